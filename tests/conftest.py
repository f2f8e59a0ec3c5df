import os

# Tests use paths relative to the repository root.
os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
