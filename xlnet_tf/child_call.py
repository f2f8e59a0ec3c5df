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
  """The function raised in the child (the message is its exception's), or the child ended without an answer."""


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
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
  child = subprocess.Popen([sys.executable, "-c", f"import {__name__}; {__name__}._serve()"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
  try:
    answer, _ = child.communicate(message, timeout=timeout)
  except subprocess.TimeoutExpired:
    raise TimeoutError(f"{what} ran {timeout:.0f} s without an end") from None
  finally:
    if child.poll() is None:  # a signal, the time limit (or an error) while it runs
      child.kill()
      child.wait()
  try:
    error = json.loads(answer)["error"]
  except (ValueError, KeyError, TypeError):
    code = child.returncode
    error = (f"{what} was killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
             else f"{what} ended without a result (exit code {code})")
  if error is not None:
    raise ChildError(error)


def _serve():
  """The child's side of `call`: the function and its request from stdin (JSON), `{"error": None or the message of
  the exception it raised}` to stdout."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)  # a Ctrl-C reaches the whole process group: the parent says why
  if not locks.end_with_parent(signal.SIGKILL):  # a kill -9 of the tool left its trainer training on for hours,
    return  # then writing its files
  message = json.load(sys.stdin)
  try:  # the import too: a package broken on PYTHONPATH is the parent's line, not a traceback here
    getattr(importlib.import_module(message["module"]), message["name"])(message["request"])
    error = None
  except Exception as e:  # pylint: disable=broad-except  # the parent says it
    error = str(e) or type(e).__name__
  json.dump({"error": error}, sys.stdout)
