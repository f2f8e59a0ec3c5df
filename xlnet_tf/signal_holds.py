"""SIGINT and SIGTERM held back while a pass of renames puts files in place (`fileio.atomic_path`,
`fileio.atomic_files`), so a stopped run never leaves half of them new, and, for a run's last files, until the run
has reported them (`signals_deferred`, around a CLI's whole run)."""

import contextlib
import signal
import threading

_deferred = []  # the lists of the `signals_deferred` blocks running, innermost last


@contextlib.contextmanager
def signals_deferred():
  """Yields a list: within the body, the signals a `signals_held(final=True)` held back (the pass of a run's last
  files) are added to it, not delivered, when that body ends whole; the caller delivers them once the run has
  reported what it wrote (`cli.cli_main`). The run had said "stopped; run the same command again", which was then
  refused, its output being there whole (sweep 27, U7)."""
  noted = []
  _deferred.append(noted)
  try:
    yield noted
  finally:
    _deferred.remove(noted)


@contextlib.contextmanager
def signals_held(final=False):
  """Holds SIGINT and SIGTERM back while the body runs; each one sent meanwhile is delivered (once) right after
  (with `final`, inside a `signals_deferred`, and when the body ends whole: noted there, delivered later).

  Python runs signal handlers in the main thread, but the kernel gives a signal sent to the process to any thread
  that does not block it, and TensorFlow runs many: blocking them in the main thread alone
  (`signal.pthread_sigmask`) would not hold back the handler. So the handlers themselves are swapped for one that
  notes the signal, and put back before the noted signals are raised again. A handler set outside Python (which
  `signal.getsignal` reports as None) or SIG_IGN is left alone; off the main thread nothing is held.
  """
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  held, old, whole = [], {}, False
  try:
    for signum in (signal.SIGINT, signal.SIGTERM):
      if signal.getsignal(signum) not in (None, signal.SIG_IGN):
        old[signum] = signal.signal(signum, lambda sent, frame: held.append(sent))
    yield
    whole = True
  finally:
    for signum, handler in old.items():
      signal.signal(signum, handler)
    if final and whole and _deferred:
      _deferred[-1].extend(s for s in dict.fromkeys(held) if s not in _deferred[-1])
    else:
      for signum in dict.fromkeys(held):
        signal.raise_signal(signum)
