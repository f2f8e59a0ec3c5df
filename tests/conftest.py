import atexit
import os
import shutil
import signal
import tempfile

import pytest

# Tests use paths relative to the repository root.
os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# One XLA compilation cache for the session, through TensorFlow's own setting (set before TensorFlow starts; the
# CLIs leave a TF_XLA_FLAGS cache directory alone): each CLI run in a subprocess otherwise compiles the same nested
# XLA programs again, about 3 s a run. Tests of the cache itself (`--xla_cache_dir`) and of what XLA compiles run
# their subprocesses without it (`helpers.suite_xla_cache.without`). pytest-xdist's workers (scripts/test.sh) share
# the one their controller made, and inherit its TF_XLA_FLAGS; the controller removes it at the end.
SUITE_XLA_CACHE = os.environ.get("XLNET_TF_TESTS_XLA_CACHE") if "PYTEST_XDIST_WORKER" in os.environ else None
if not SUITE_XLA_CACHE:
  SUITE_XLA_CACHE = os.environ["XLNET_TF_TESTS_XLA_CACHE"] = tempfile.mkdtemp(prefix="xlnet_tf_tests_xla_cache_")
  os.environ["TF_XLA_FLAGS"] = (
      os.environ.get("TF_XLA_FLAGS", "") + f" --tf_xla_persistent_cache_directory={SUITE_XLA_CACHE}").strip()
  atexit.register(shutil.rmtree, SUITE_XLA_CACHE, True)

# The CLIs' start-up lets XLA use 512-bit vectors where the CPU qualifies (`training.prefer_wide_xla_vectors`), which
# changes the XLA-compiled element-wise code's rounding. Tests compare CLI runs in subprocesses with runs in this
# process, so this process makes the same setting before anything is compiled (its subprocesses inherit it).
from xlnet_tf.training import runtime  # noqa: E402  pylint: disable=wrong-import-position

runtime.prefer_wide_xla_vectors()


@pytest.fixture
def stop_signals_default():
  """SIGINT and SIGHUP as a foreground process has them, for the tests that send them (in the test's process or to
  a child, which inherits them): a suite started in the background of a script (SIGINT ignored) or under nohup
  (SIGHUP ignored) failed them, and a run sent SIGHUP trained on until its unread output blocked it. Restored after."""
  old = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGHUP)}
  signal.signal(signal.SIGINT, signal.default_int_handler)
  signal.signal(signal.SIGHUP, signal.SIG_DFL)
  yield
  for signum, handler in old.items():
    if handler is not None:  # None: set outside Python, left as the test had it
      signal.signal(signum, handler)
