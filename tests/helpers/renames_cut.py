"""A CLI run in a subprocess whose renames through `fileio.rename` (the pass that puts its files in place) are cut:
killed outright before one of them (kill -9), or sent a signal as the first begins."""

import sys

KILL = "os.kill(os.getpid(), signal.SIGKILL)"
TERM = "os.kill(os.getpid(), signal.SIGTERM)"

_CHILD = """
import os, runpy, signal, sys
from xlnet_tf import fileio
rename, done = fileio.rename, []
def renaming(src, dst):
  if len(done) == {at}:
    {action}
  done.append(dst)
  rename(src, dst)
fileio.rename = renaming
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def command(argv, at, action):
  """The command running `argv` (a CLI script and its flags) that does `action` (`KILL`, `TERM`) before its rename
  number `at` (0: the first)."""
  return [sys.executable, "-c", _CHILD.format(at=at, action=action), *argv]
