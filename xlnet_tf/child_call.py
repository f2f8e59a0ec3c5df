"""Calling a function in a child Python process, for C code that holds the calling thread and Python's signal
handlers until it returns: SentencePiece's trainer (minutes on a large corpus), h5py reading a damaged file (for
ever). This process only waits, which SIGINT and SIGTERM interrupt; the child is killed on the way out, and ends with
this process however that ends (kill -9 too). The child imports the function's module alone (not the caller's
`__main__`, as multiprocessing's spawn would); its log goes to stderr."""

import importlib
import json
import os
import signal
import subprocess
import sys

from xlnet_tf import locks


class ChildError(RuntimeError):
  """The function raised in the child (the message is its exception's; `kind` its class's name), or the child ended
  without an answer (`kind` None; `signum` the signal that ended it, if one did)."""

  def __init__(self, message, kind=None, signum=None):
    super().__init__(message)
    self.kind, self.signum = kind, signum


def call(function, request, what, timeout=None):
  """Runs `function(request)` in a child process: `function` a module-level function of a module the child can
  import, `request` JSON-serialisable (a TypeError before any child starts where it is not); its return value is
  not sent back. `what`: how the messages name it ("the SentencePiece trainer").

  Raises:
    ChildError: the function's exception's message where it raised one, or how the child ended without a result
      (a crash in C code: killed by a signal).
    TimeoutError: the child ran `timeout` seconds (None: no limit); it is killed.
  """
  message = json.dumps({"module": function.__module__, "name": function.__qualname__, "request": request})
  package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  # This package first, and not the working directory (`-c` puts it first: a signal.py there broke the child, sweep 29)
  start = (f"import sys; sys.path[:] = [{package_root!r}] + [p for p in sys.path if p]; import {__name__}; "
           f"{__name__}._serve({os.getpid()})")
  child = subprocess.Popen([sys.executable, "-c", start], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    answer, _ = child.communicate(message, timeout=timeout)
  except subprocess.TimeoutExpired:
    raise TimeoutError(f"{what} ran {timeout:.0f} s without an end") from None
  finally:
    if child.poll() is None:  # a signal, the time limit (or an error) while it runs
      child.kill()
      child.wait()
  try:
    answer = json.loads(answer)
    error, kind = answer["error"], answer["kind"]
  except (ValueError, KeyError, TypeError):
    code, kind = child.returncode, None
    if code < 0 and -code in signal.valid_signals():
      raise ChildError(f"{what} was killed by {signal.Signals(-code).name}" + (
          " (the kernel's out-of-memory killer ends processes so)" if -code == signal.SIGKILL else ""), signum=-code)
    error = f"{what} ended without a result (exit code {code})"
  if error is not None:
    raise ChildError(error, kind)


def _serve(parent):
  """The child's side of `call` (`parent`: the caller's pid): the function and its request from stdin (JSON),
  `{"error": None or the message of the exception it raised, "kind": its class's name}` to stdout."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)  # a Ctrl-C reaches the whole process group: the parent says why
  if not locks.end_with_parent(signal.SIGKILL, parent):  # a kill -9 of the tool left its trainer training on for
    return  # hours, then writing its files
  message = json.load(sys.stdin)
  try:  # the import too: a package broken on PYTHONPATH is the parent's line, not a traceback here
    getattr(importlib.import_module(message["module"]), message["name"])(message["request"])
    error = kind = None
  except Exception as e:  # pylint: disable=broad-except  # the parent says it
    error, kind = str(e) or type(e).__name__, type(e).__name__
  json.dump({"error": error, "kind": kind}, sys.stdout)
