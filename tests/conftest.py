import os

# Tests use paths relative to the repository root.
os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The CLIs' start-up lets XLA use 512-bit vectors where the CPU qualifies (`training.prefer_wide_xla_vectors`), which
# changes the XLA-compiled element-wise code's rounding. Tests compare CLI runs in subprocesses with runs in this
# process, so this process makes the same setting before anything is compiled (its subprocesses inherit it).
from xlnet_tf.training import runtime  # noqa: E402  pylint: disable=wrong-import-position

runtime.prefer_wide_xla_vectors()
