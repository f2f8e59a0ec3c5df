"""xlnet_tf/child_call.py: a function run in a child process (SentencePiece's trainer, a tf_model.h5's read), which
this process waits for where a signal can stop it. Library functions stand in for the callers' (the child imports the
function's module by its name)."""

import os
import signal
import time

import pytest

from xlnet_tf import child_call
from xlnet_tf import locks


def test_the_child_s_exception_and_its_end_are_one_line_each():
  child_call.call(time.sleep, 0, "a nap")  # returns nothing: it ended well
  with pytest.raises(child_call.ChildError, match=r"^invalid literal for int\(\) with base 10: 'x'$") as error:
    child_call.call(int, "x", "a parse")
  assert (error.value.kind, error.value.signum) == ("ValueError", None)
  with pytest.raises(child_call.ChildError, match=r"^a crash was killed by SIGKILL \(the kernel's out-of-memory "
                                                  r"killer ends processes so\)$") as error:
    child_call.call(signal.raise_signal, signal.SIGKILL, "a crash")
  assert (error.value.kind, error.value.signum) == (None, signal.SIGKILL)

  def elsewhere(request):
    pass
  elsewhere.__module__ = "no_such_module_here"  # a package broken on PYTHONPATH: its line, not the child's traceback
  with pytest.raises(child_call.ChildError, match="^No module named 'no_such_module_here'$") as error:
    child_call.call(elsewhere, None, "a lookup")
  assert error.value.kind == "ModuleNotFoundError"


def test_the_child_imports_neither_from_the_working_directory_nor_outlives_its_parent(tmp_path, monkeypatch):
  """`python -c` puts the working directory first on sys.path: a signal.py there broke the child (sweep 29, U1). A
  child whose parent died before it asked to end with it ran on where a subreaper adopted it (U2)."""
  (tmp_path / "signal.py").write_text("raise RuntimeError('the working directory')\n")
  (tmp_path / "time.py").write_text("raise RuntimeError('the working directory')\n")
  monkeypatch.chdir(tmp_path)
  child_call.call(time.sleep, 0, "a nap")
  assert locks.end_with_parent(0, os.getppid()) and not locks.end_with_parent(0, os.getpid())  # 0: no signal


def test_a_child_past_its_time_is_killed_and_one_that_cannot_be_sent_never_starts():
  start = time.time()
  with pytest.raises(TimeoutError, match="^a nap ran 1 s without an end$"):
    child_call.call(time.sleep, 60, "a nap", timeout=1)
  assert time.time() - start < 30
  with pytest.raises(TypeError):
    child_call.call(time.sleep, object(), "a nap")
