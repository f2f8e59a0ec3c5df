"""Stopping a training run cleanly on SIGTERM (what a preempted cloud VM and most schedulers send), SIGINT or
SIGHUP (its terminal closed; not under `nohup`).

A signal cannot interrupt a `tf.function` that runs many steps, and Python runs its signal handlers only when that
call returns. So the signal is also written to a pipe (`signal.set_wakeup_fd`): a watcher thread reads it at once
and sets `StopRequest.flag`, a variable the training loop reads before every step. The loop then ends after the
step in progress, the trainer saves a checkpoint of that step (weights, optimizer, mems, RNG state) and raises
`Interrupted`; the same command resumes from that step. A second Ctrl-C stops at once: Python's handler raises
KeyboardInterrupt, or, where the main thread is inside a TensorFlow call that no signal interrupts (a long step,
XLA compiling the loop), the watcher ends the process as kill -9 would, files whole and the step not saved.

Outside the training loop (`stops_raised`, what every CLI's `main` runs in) a signal raises `Stopped` where the main
thread is, as KeyboardInterrupt would. Code it lands in may lose it: a Python call made by TensorFlow's C code
(`TFE_Py_FastPathExecute` asks `TensorShape.__len__`) clears the exception, and a bare `except:` (`DType.max`)
raises another in its place. So the signal is also noted: `stop_signal` reads an exception that follows it as the
stop, and the loops that call TensorFlow step by step ask `check_stop` before each step (a training loop that
would start, every batch of eval and predict), which raises the lost stop there.
"""

import contextlib
import math
import os
import signal
import sys
import threading
import time

import tensorflow as tf

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # SIGHUP: the terminal or ssh session of the run closed
# How long the watcher waits, after a second Ctrl-C, for Python's handler to take it before it ends the process:
# the handler runs within microseconds unless the main thread is inside a TensorFlow call.
FORCE_AFTER_S = 2.0


def _handled_signals():
  """`_SIGNALS`, SIGHUP only where it is not ignored (a run under `nohup` goes on when its terminal closes)."""
  return tuple(s for s in _SIGNALS if s != signal.SIGHUP or signal.getsignal(s) is not signal.SIG_IGN)


class Interrupted(Exception):
  """Training stopped on a signal after saving a checkpoint. `exit_code` is 128 + the signal number, 1 where the
  stop was a write to standard output that failed otherwise than by a gone reader (`stopped`)."""

  def __init__(self, message, signum, exit_code=None):
    super().__init__(message)
    self.signum = signum
    self.exit_code = exit_code or 128 + signum


class Stopped(BaseException):
  """SIGINT or SIGTERM outside the training loop (`stops_raised`): what is being written is removed on the way out
  (`fileio.atomic_files`, the directory locks), and the CLI ends with one line. `signum`: the signal."""

  def __init__(self, signum):
    super().__init__(signum)
    self.signum = signum


_noted = []  # the lists of signals the `stops_raised` that run now noted, innermost last
_requests = []  # the StopRequests whose bodies run now
_pending = []  # a stop `request_stop` asked for outside any StopRequest: the next one stops at once
_reasons = []  # why `request_stop` stopped, where its signal alone does not say


def request_stop(signum, reason=None):
  """Requests a stop from code, as the signal `signum` would (`cli.print_line`: standard output cannot be written;
  `reason`: why, where it is not that its reader is gone, e.g. a full disk): the training loop that runs stops after
  its step, saving it; outside one, the next training loop stops before its first step (an evaluation or prediction
  goes on)."""
  if reason:
    _reasons[:] = [reason]
  for request in _requests:
    request.signum = request.signum or signum
    request.flag.assign(1)
  if not _requests:
    _pending[:] = [signum]


def output_lost():
  """Why standard output could not be written (`request_stop`'s reason: a full disk, EIO), or None where it could,
  or only its reader went (`| head`)."""
  return _reasons[0] if _reasons else None


def stop_name(signum):
  """How a stop's line names its signal; SIGPIPE (`request_stop`'s) with what failed."""
  return "SIGPIPE (its standard output cannot be written)" if signum == signal.SIGPIPE else signal.Signals(signum).name


def stopped(signum, step, path):
  """The training loop's `Interrupted` for a stop by `signum` after saving `path`, the checkpoint of `step`. A
  write to standard output that failed otherwise than by a gone reader (a full disk under `> log`) is no signal: it
  was "stopped by SIGPIPE", exit 141, and advised the same command, which meets the same disk (sweep 23, C3)."""
  resume = f"the same command again to resume from step {step}."
  if signum == signal.SIGPIPE and output_lost():
    return Interrupted(f"stopped at step {step}: its standard output cannot be written ({output_lost()}); checkpoint "
                       f"{path}. Once it can be written (e.g. space freed on its disk), run {resume}", signum,
                       exit_code=1)
  return Interrupted(f"stopped by {stop_name(signum)} at step {step}; checkpoint {path}. Run {resume}", signum)


@contextlib.contextmanager
def stops_raised():
  """Runs the body with SIGINT and SIGTERM raising `Stopped`; yields the list of the signals they raised (first
  first), for `stop_signal`. An exception that C code could not raise and reports as "unraisable" is not printed
  when it comes from the stop (TensorFlow's `nest.flatten` asks `isinstance(x, Mapping)`; a signal that lands in
  that check's Python code is reported as a SystemError's traceback, and lost): the CLI's one line says it. Off the
  main thread (where no handler can be set) nothing changes."""
  noted = []
  if threading.current_thread() is not threading.main_thread():
    yield noted
    return

  def raise_stopped(signum, frame):
    del frame
    noted.append(signum)
    raise Stopped(signum)

  def unless_stopped(unraisable):
    if stop_signal(unraisable.exc_value, []) is None:
      old_unraisable(unraisable)

  old = {signum: signal.signal(signum, raise_stopped) for signum in _handled_signals()}
  old_unraisable, sys.unraisablehook = sys.unraisablehook, unless_stopped
  _noted.append(noted)
  try:
    yield noted
  finally:
    _noted.pop()  # this one: they nest
    sys.unraisablehook = old_unraisable
    for signum, handler in old.items():
      signal.signal(signum, handler)


def stop_signal(error, noted):
  """The signal `error` comes from: a `Stopped` or KeyboardInterrupt, itself or in its `__context__` chain (an
  exception code raised in its place), or any exception after a signal in `noted` (a `stops_raised` list); else
  None."""
  seen = error
  while seen is not None:
    if isinstance(seen, (Stopped, KeyboardInterrupt)):
      return getattr(seen, "signum", signal.SIGINT)
    seen = seen.__cause__ or seen.__context__
  return noted[0] if noted else None


def check_stop():
  """Raises `Stopped` if a signal raised it under a `stops_raised` that runs now (`_noted`) and the code it landed
  in lost it; else nothing (cheap enough to ask before every step)."""
  for noted in _noted:
    if noted:
      raise Stopped(noted[0])


class StopRequest:
  """A context in which SIGTERM/SIGINT request a stop instead of killing the process.

  Attributes:
    flag: int32 scalar variable, 0 until a stop is requested, then 1 (read by the training loop).
    signum: the signal that requested the stop, or None.
  """

  def __init__(self):
    with tf.init_scope(), tf.device("/cpu:0"):
      self.flag = tf.Variable(0, dtype=tf.int32, trainable=False, name="stop_request")
    self.signum = None
    self._old = {}

  def __enter__(self):
    check_stop()  # a stop requested before the loop that the code it landed in lost: the loop does not start
    self.signum = _pending.pop() if _pending else None
    self._sigints = 0
    self.flag.assign(int(self.signum is not None))
    _requests.append(self)
    if threading.current_thread() is not threading.main_thread():
      return self  # Signal handlers can only be installed from the main thread: no clean stop then.
    self._read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    self._write_fd = write_fd
    self._old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for signum in _handled_signals():
      self._old[signum] = signal.signal(signum, self._handle)
    self._watcher = threading.Thread(target=self._watch, name="xlnet-stop-request", daemon=True)
    self._watcher.start()
    return self

  def _handle(self, signum, frame):
    """Runs in the main thread wherever Python is: also inside TensorFlow's tracing of the training loop, under the
    lock of the graph it builds. A TensorFlow op here (`flag.assign`) joined that graph and waited on that lock:
    the run hung. So it only notes the signal; the watcher, to which each signal is also written, sets the flag.
    A second Ctrl-C is the second this handler sees (the watcher notes the first one too, while a loop runs and
    this waits)."""
    del frame
    if signum == signal.SIGINT:
      self._sigints += 1
      if self._sigints > 1:
        raise KeyboardInterrupt
    self.signum = self.signum or signum

  def _watch(self):  # sees the signal while a tf.function runs
    sigints = 0
    while True:
      try:
        data = os.read(self._read_fd, 1)
      except OSError:
        return
      if not data:
        return
      if data[0] in [int(s) for s in _SIGNALS]:
        self.signum = self.signum or data[0]
        self.flag.assign(1)
        sigints += data[0] == signal.SIGINT
        if sigints == 2:
          self._exit_unless_handled()

  def _exit_unless_handled(self):
    """A second Ctrl-C: Python's handler raises KeyboardInterrupt where the main thread is. If the handler has not
    run within `FORCE_AFTER_S` (once for Ctrl-Cs that came while the main thread was in C: then the stop goes on
    as for one, saving its step), the main thread is inside a TensorFlow call (a step of a large model, XLA
    compiling the loop: minutes on a GPU) that no signal interrupts, and the process ends here with one line, as
    kill -9 would: every file is written whole or not at all (a write in progress leaves its temporary name, the
    `--model_dir` lock is taken over by the next run), and the step in progress is not saved."""
    handled = self._sigints
    deadline = time.monotonic() + FORCE_AFTER_S
    while time.monotonic() < deadline:
      if self._sigints > handled or self._sigints > 1:  # Python took it (or is raising KeyboardInterrupt)
        return
      time.sleep(0.02)
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    os.write(2, (f"{prog}: stopped by a second SIGINT inside a TensorFlow call (a step, or XLA compiling the loop), "
                 "without saving the step in progress; files are written whole or not at all. Run the same command "
                 "again to resume from the latest checkpoint.\n").encode())
    os._exit(128 + signal.SIGINT)  # pylint: disable=protected-access

  def __exit__(self, *exc_info):
    if self in _requests:
      _requests.remove(self)
    if not self._old:
      return False
    for signum, handler in self._old.items():
      signal.signal(signum, handler)
    self._old = {}
    signal.set_wakeup_fd(self._old_wakeup)
    os.close(self._write_fd)  # ends the watcher's read
    self._watcher.join(timeout=5)
    os.close(self._read_fd)
    return False


def check_finite(step, loss, gnorm, loss_scale, run_config, latest):
  """FloatingPointError when the run cannot go on: a loop whose loss or gradient norm is not finite; with loss
  scaling (`loss_scale`, where an overflowed step is skipped and its loop reports the applied steps only, NaN when
  none was) a step that overflowed with the scale already at its minimum 1: the gradients themselves are not finite.
  The line names `latest()`, the last good checkpoint, and what may help (the model's `run_config`: its --init_*)."""
  if loss_scale is None:
    if math.isfinite(loss) and math.isfinite(gnorm):
      return
    what = f"Loss or gradient norm is not finite at step {step} (loss {loss}, gnorm {gnorm})"
  else:
    if not int(loss_scale.floor_overflows.numpy()):
      return
    what = (f"The float16 gradients are not finite even unscaled (loss scale at its minimum 1) by step {step} "
            f"(loss {loss}, gnorm {gnorm})")
  # float16's range (65504) may be the cause itself: activations of large weights overflow from the first step.
  fix = (", check the data, or train without --use_fp16 (float32, or --use_bfloat16)" if loss_scale is not None
         else " or check the data")
  run = run_config  # new weights of a huge spread overflow at once (sweep 28)
  if run is not None and (spread := (run.init_std if run.init == "normal" else run.init_range)) > 1:
    fix += f", or pass a smaller --init_{'std' if run.init == 'normal' else 'range'} (received {spread:g})"
  raise FloatingPointError(f"{what}; stopped without saving. The last good checkpoint is {latest()}. Lower "
                           f"--learning_rate{fix}.")
