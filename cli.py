"""What the command-line tools share as processes, beyond their flags (`flags.py` defines those): the filter of
TensorFlow's C++ noise, the signals, the flags parsed into a plain namespace, and the `main` of every CLI, which
turns any error into one line. The checks of the namespace's values and the library's plain configs built from it
are `flag_configs.py`'s; what a training run keeps in --model_dir beside its checkpoints, and checks there,
`run_files.py`'s; what every path flag goes through, `path_flags.py`'s.

One pattern for every CLI: `main = cli.cli_main(prog, body)`, where `body` receives `values()`, the script's flags
as a plain namespace, and turns them into the plain configs its `run(...)` takes. Tests and Python callers build
the same namespace with `defaults(script.define_flags, **overrides)`. Library code in `xlnet_tf/` never reads
flags.

Importing this module has no side effects. A CLI calls `start_script()` before it imports TensorFlow, so that
TensorFlow's C++ noise stays off its stderr (`-v 1` shows everything) and a signal while it starts ends it with one
line.
"""

import atexit
import contextlib
import errno
import gc
import math
import os
import re
import signal
import sys
import types

from absl import app
from absl import flags as absl_flags
from absl import logging

import flag_configs
import flags
from flags import FlagError  # the tools raise it as cli.FlagError
import path_flags
from xlnet_tf import signal_holds
from xlnet_tf import stderr_filter


def filter_stderr(argv=None):
  """Keeps TensorFlow's C++ lines that say nothing about the run (`xlnet_tf.stderr_filter.NOISE`: start-up, and
  the first steps' tracing and compilation) off stderr for the rest of the process; `run_script` waits for the
  last line at the end. A CLI calls it first, before anything imports TensorFlow, when run as a script.

  With `-v 1` (absl's --verbosity=1, which also shows DEBUG logs) on the command line `argv` (default sys.argv), or
  XLNET_TF_STARTUP_LOG=1 in the environment, nothing is filtered.
  """
  if _verbosity(sys.argv if argv is None else argv) >= 1 or os.environ.get("XLNET_TF_STARTUP_LOG"):
    return
  stderr_filter.start()


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP unless ignored (`nohup`)


_WHEN = {False: "while starting; nothing was written.",
         True: "after its run ended; what the run wrote is whole."}
_main_ended = [False]  # whether a `cli_main` body has ended (then a signal no longer interrupts the start)
_kept = []  # the exception of a stop by a signal, never torn down (`cli_main`)


def _exit_on_signal(signum, frame):
  del frame
  line = (f"{os.path.basename(sys.argv[0])}: stopped by {signal.Signals(signum).name} "
          f"{_WHEN[_main_ended[0]]}")
  os.write(2, line.encode() + b"\n")  # not print: the interrupted code may be inside a write to sys.stderr
  os._exit(128 + signum)  # pylint: disable=protected-access


def start_script(argv=None):
  """What a CLI run as a script does first, before it imports TensorFlow: `filter_stderr(argv)`, and SIGINT or
  SIGTERM outside its `main`'s body (imports, flags: nothing written yet; or the end, after the body) end it with
  one line, exit 128 + signal."""
  for fd, name in ((1, "stdout"), (2, "stderr")):  # closed (`>&-`, a daemon's set-up): a file opened later would
    try:  # take its number, native lines (TensorFlow's log) would go into it, and Python's stream is None
      os.fstat(fd)
    except OSError:
      _to_devnull(fd)
      setattr(sys, name, open(fd, "w", buffering=1, closefd=False))  # pylint: disable=consider-using-with
  with contextlib.suppress(AttributeError, ValueError):  # a line naming a path no stdout encoding holds
    sys.stdout.reconfigure(errors="backslashreplace")  # (PYTHONIOENCODING=ascii) failed the run (sweep 23, C11)
  for signum in _SIGNALS:  # before the checks and the stderr filter's start: a signal then ended it without a line
    if signum != signal.SIGHUP or signal.getsignal(signum) is not signal.SIG_IGN:  # (sweep 29, U4)
      signal.signal(signum, _exit_on_signal)
  _check_flagfiles(sys.argv if argv is None else argv)
  filter_stderr(argv)
  sys.excepthook = _unloadable


def _unloadable(kind, error, tb):
  """`sys.excepthook` of a CLI until its `main` starts (`cli_main`): a module (TensorFlow) that cannot be loaded at
  the script's imports (a memory cap, `ulimit -v`, was a 13-line traceback ending `failed to map segment from shared
  object`; sweep 30, U12) is one line; any other error, and one raised later (a bug), keeps its traceback."""
  if not issubclass(kind, (ImportError, MemoryError)):
    sys.__excepthook__(kind, error, tb)
    return
  reason = " ".join(str(error).split())[:300] or kind.__name__
  fix = ("the memory this process may map (ulimit -v, a scheduler's memory limit) is too small for TensorFlow (about "
         "3 GB): raise it" if kind is MemoryError or "failed to map segment" in reason else
         "the installation is incomplete: run bash scripts/setup.sh")
  with contextlib.suppress(OSError):
    print(f"{os.path.basename(sys.argv[0])}: error: Could not load the tool's modules ({reason}); {fix}, and rerun.",
          file=sys.stderr, flush=True)


def _to_devnull(fd):
  """Points the file descriptor `fd` (closed, or a stream nobody reads any more) at /dev/null."""
  null = os.open(os.devnull, os.O_WRONLY)
  if null != fd:  # where `fd` was closed, /dev/null took its number
    os.dup2(null, fd)
    os.close(null)


def _check_flagfiles(argv):
  """One line, exit 1, for a --flagfile (on the command line, or named in one) that cannot be read twice as the
  same UTF-8 text (`filter_stderr` reads the command line's flags first, absl's parse then): a pipe or a device
  (`<(...)`, /dev/stdin) gave its flags to the first read only, and the run went on with the defaults, exit 0; a
  file of another encoding was a traceback; one missing, or a directory, absl's `ERROR:: Unable to open flagfile`
  (`flag_configs.require_file`'s line instead). A nested one's line names the file and line that name it."""
  given = [(a.split("=", 1)[1], None, 0) for a in argv if a.startswith(("--flagfile=", "-flagfile="))]
  given += [(b, None, 0) for a, b in zip(argv, argv[1:]) if a in ("--flagfile", "-flagfile")]
  seen = set()
  while given:
    path, parent, number = given.pop(0)  # parent: the file whose line `number` names it, None on the command line
    path = os.path.expanduser(path.strip())  # as absl: the shell leaves a ~ after = (sweep 30, U4)
    if path in seen or os.path.realpath(path) == os.devnull:  # absl's line for a circular one; empty, as a stub
      continue
    seen.add(path)
    try:
      if parent and not path:  # "--flagfile is required" (sweep 32, U18)
        raise FlagError("'--flagfile=' names no file. Name a file of flags, or remove the line.")
      if parent and not os.path.isabs(path) and not os.path.exists(path) and os.path.isfile(
          beside := os.path.join(os.path.dirname(parent), path)):  # it named the missing file alone (sweep 32, U18)
        raise FlagError(f"--flagfile={path} does not exist: absl reads a --flagfile named in one from the working "
                        f"directory, not beside the file that names it. Write --flagfile={beside}.")
      path_flags.check_path("flagfile", path)
      flag_configs.require_file(path, "flagfile", "a file of flags, one --flag=value per line")
      with open(path, "rb") as f:
        text = f.read()
      if b"\0" in text:  # UTF-16: absl named a flag of NUL bytes; one NUL: a bare "embedded null byte" (sweep 30, U8)
        if text[:2] in (b"\xff\xfe", b"\xfe\xff") or 3 * text.count(b"\0") > len(text):
          raise FlagError(f"--flagfile={path} holds NUL bytes: is it UTF-16? Convert it to UTF-8 (e.g. iconv -f "
                          "utf-16 -t utf-8) and pass that.")
        if read := [n for n, line in enumerate(text.split(b"\n"), 1) if b"\0" in line and not line.startswith(
            (b"#", b"//"))]:  # absl skips comments
          raise FlagError(f"--flagfile={path} holds a NUL byte on line {read[0]}, which no flag's value can hold. "
                          "Remove it and rerun.")
      lines = text.decode("utf-8").splitlines()
      if text.startswith(b"\xef\xbb\xbf"):  # absl read the first flag with it as a stray word
        raise FlagError(f"--flagfile={path} starts with a byte-order mark (a Windows editor's 'UTF-8'), which would "
                        "make its first flag an unknown word. Save it as UTF-8 without one (e.g. sed -i "
                        "'1s/^\\xEF\\xBB\\xBF//' FILE) and rerun.")
      for number, line in enumerate(lines, 1):
        if line.strip().startswith(("--flagfile=", "-flagfile=")) and line[:1].isspace():
          raise FlagError(f"--flagfile={path} line {number}: absl reads an indented {line.strip().split('=')[0]}= "
                          "as an unknown flag, not as a file of flags. Remove the spaces before it.")
        if line.startswith("-") and re.search(r"=.*\s#", line):  # trained into "D  # my model" (sweep 32, U4)
          raise FlagError(f"--flagfile={path} line {number}: {line.strip()!r}: absl keeps the whole rest of the line "
                          "as the value, this comment too. Put the comment on a line of its own (a value that holds "
                          "' #' itself: pass that flag on the command line).")
      given += [(line.strip().split("=", 1)[1], path, number)
                for number, line in enumerate(lines, 1) if line.startswith(("--flagfile=", "-flagfile="))]
    except FlagError as e:
      line = f"--flagfile={parent} line {number}: {e}" if parent else str(e)
    except UnicodeDecodeError as e:
      line_number = text[:e.start].count(b"\n") + 1
      line = (f"--flagfile={path} is not UTF-8 (byte 0x{text[e.start]:02x} on line {line_number}). Convert it to "
              "UTF-8 (e.g. iconv -f latin1 -t utf-8) and pass that.")
    except OSError as e:  # e.g. no permission to read it
      line = f"--flagfile={path} cannot be read ({e.strerror}). Pass a file of flags this user can read."
    else:
      continue
    print(f"{os.path.basename(argv[0])}: error: {line}", file=sys.stderr, flush=True)
    sys.exit(1)


def _verbosity(argv):
  """absl's -v/--verbosity as the command line sets it, read before the flags are parsed (-1 when unset)."""
  flag_values = absl_flags.FlagValues()
  absl_flags.DEFINE_integer("verbosity", -1, "Logging verbosity.", short_name="v", flag_values=flag_values)
  try:
    flag_values(list(argv), known_only=True)
  except absl_flags.Error:  # the real parse reports it
    return -1
  return flag_values.verbosity


def values(flag_values=absl_flags.FLAGS):
  """The script's own flags (every flag `flags.py` defined) as a plain namespace: what its `run` takes; a path
  flag's leading `~` is the user's home (`path_flags.expand_user`), a HuggingFace hub cache directory given as the
  model to read its snapshot (`path_flags.hub_snapshot`). A float flag that is nan or infinite is a FlagError (absl
  takes `--learning_rate=nan`; a run trained to its first non-finite loss, and wrote a run_flags.json that is no
  json), so is a path flag with a `gs:/` typo or a remote path TensorFlow cannot read here
  (`path_flags.check_path`)."""
  own = flag_values.get_flags_for_module(flags)
  for f in own:
    if isinstance(f.value, float) and not math.isfinite(f.value):
      raise FlagError(f"--{f.name} must be a finite number. Received: {f.value}.")
  options = types.SimpleNamespace(**{f.name: path_flags.expand_user(f.name, f.value) for f in own})
  for name, value in vars(options).items():
    path_flags.check_path(name, value)
  for name in ("init_checkpoint", "predict_ckpt", "input"):
    if getattr(options, name, None):
      setattr(options, name, path_flags.hub_snapshot(name, getattr(options, name)))
  return options


def given(name, flag_values=absl_flags.FLAGS):
  """Whether flag `name` was given on the command line (at its default value too); False where the flags were not
  parsed from one (a namespace made by `defaults`)."""
  return flag_values.is_parsed() and name in flag_values and flag_values[name].present > 0


def defaults(define_flags, **overrides):
  """`values()` of a fresh flag set made by `define_flags(flag_values=...)`: every default, then `overrides`.

  Raises:
    ValueError: an override names no flag of that script.
  """
  flag_values = absl_flags.FlagValues()
  define_flags(flag_values=flag_values)
  flag_values.mark_as_parsed()
  options = values(flag_values)
  unknown = sorted(set(overrides) - set(vars(options)))
  if unknown:
    raise ValueError(f"No such flag: {', '.join(unknown)}.")
  vars(options).update(overrides)
  return options


_OUT_OF_MEMORY = ("Out of memory (%s): the device cannot hold what the run needs. Make its batches or sequences "
                  "smaller, or run on a device with more memory.")


def _failed_allocation(error):
  """What a TensorFlow out-of-memory error could not allocate (`out_of_memory.allocation`), or None."""
  if "tensorflow" not in sys.modules:
    return None
  from xlnet_tf.training import out_of_memory  # pylint: disable=g-import-not-at-top
  return out_of_memory.allocation(error)


def print_line(line):
  """A CLI's line on standard output. Where it cannot be written (its reader gone: `| head`, a `tee` that ended; a
  terminal hung up: EIO; a full disk under `> log`), the line and those after it go nowhere, and a training run
  stops as on a signal, saving its step (`preemption.request_stop`): it ended at its next line with `[Errno 32]
  Broken pipe` (or 5, 28), saving nothing."""
  try:
    print(line, flush=True)
  except OSError as e:
    _to_devnull(sys.stdout.fileno())
    from xlnet_tf.training import preemption  # pylint: disable=g-import-not-at-top
    preemption.request_stop(signal.SIGPIPE, None if e.errno == errno.EPIPE else e.strerror)


def cli_main(prog, body):
  """The absl `main` of a CLI: rejects stray arguments, logs at INFO, runs `body(values())`, and ends a bad flag,
  file or value, a failed write, a remote path that cannot be read (`fileio.PathError`, or TensorFlow's error
  naming the path: the line names the flag whose value holds it), or a device out of memory (ValueError, OSError,
  FloatingPointError, MemoryError, TensorFlow's out-of-memory ResourceExhaustedError) with one line
  `{prog}: error: ...`,
  exit 1; a run stopped by a signal with one line and exit 128 + signal: in the training loop after saving (an
  exception with `exit_code`, `training.Interrupted`), elsewhere where it was (`preemption.stops_raised`), at the
  end where the code it landed in lost it, or at the end where it landed in the pass that put the run's last files
  in place (`fileio.atomic_files(final=True)`: the run reports them first); a run whose standard output could not
  be written (a full disk, not a gone reader: `print_line`) with one line at its end, exit 1."""
  def main(argv):
    if sys.excepthook is _unloadable:  # the imports are done: an ImportError now is a bug, shown whole (sweep 31)
      sys.excepthook = sys.__excepthook__
    if len(argv) > 1:  # absl's UsageError printed the whole help before its line
      word = argv[1]
      before = sys.argv[sys.argv.index(word) - 1] if word in sys.argv[1:] else ""  # the flag it was meant for
      meant = f"{before}={word}" if before.startswith("-") and "=" not in before else "--flag=value"
      print(f"{prog}: error: Unexpected argument {word!r}: flags take their value after '=' ({meant}), and a "
            "bool flag alone means True. Pass --helpshort to see the flags.", file=sys.stderr, flush=True)
      sys.exit(1)
    logging.set_verbosity(max(logging.INFO, logging.get_verbosity()))  # INFO, or DEBUG with -v 1
    from xlnet_tf.training import preemption  # pylint: disable=g-import-not-at-top  (cli.py stays light to import)
    noted, options, kept = [], None, False
    try:
      with signal_holds.signals_deferred() as deferred, preemption.stops_raised() as noted:
        options = values()
        body(options)
      if not noted and (lost := preemption.output_lost()) is None:
        _main_ended[0] = True
        for signum in deferred:  # `_exit_on_signal`: its run ended, what it wrote is whole
          signal.raise_signal(signum)
        return
      if noted:
        name = signal.Signals(noted[0]).name  # lost where it landed (`preemption.check_stop` saw no step after it)
        line, code = (f"{prog}: stopped by {name} late: the code it landed in lost it, and the run went on to its "
                      "end; what the run wrote is whole."), 128 + noted[0]
      else:  # an evaluation or prediction went on to its end, its lines (its results) nowhere: exit 0, no word
        line, code = (f"{prog}: error: its standard output could not be written ({lost}), so the lines after that, "
                      "its results among them, were lost; the files it wrote are whole. Rerun with standard output "
                      "where it can be written."), 1
    except BaseException as e:  # pylint: disable=broad-except
      signum = None if hasattr(e, "exit_code") else preemption.stop_signal(e, noted)
      kept = hasattr(e, "exit_code") or signum is not None
      if kept:  # A stop: what it interrupted stays alive, and no collection runs here, until os._exit
        # (`_end_process`) ends the process. Tearing it down took 26 s after 19k steps of a run stopped on SIGTERM
        # (a spot machine's grace is 30 s; sweep 19, F2), and outside the loop, where the signal may land inside
        # TensorFlow's making of an object, once corrupted the heap (SIGTERM during --eval_all_ckpt: exit 134, no
        # line; sweep 23, B3).
        _kept.append(e)
      if hasattr(e, "exit_code"):  # e.g. training.Interrupted: stopped by a signal after saving
        line, code = f"{prog}: {e}", e.exit_code
      elif signum is not None:
        line, code = (f"{prog}: stopped by {signal.Signals(signum).name}; files are written whole or not at all, "
                      "so none was left half-written. Run the same command again."), 128 + signum
      elif (path_line := path_flags.path_error(e, options)) is not None:  # a remote path that cannot be read
        line, code = f"{prog}: error: {path_line}", 1
      elif isinstance(e, (ValueError, OSError, FloatingPointError, MemoryError)):
        line, code = f"{prog}: error: " + (_bare_os_error(e) or " ".join(str(e).split()) or
                                           _OUT_OF_MEMORY % "Python's MemoryError"), 1
      elif type(e).__module__.startswith("tensorflow") and (cache_line := _xla_cache_line(e)) is not None:
        line, code = f"{prog}: error: {cache_line}", 1
      elif (allocation := _failed_allocation(e)) is not None:  # outside the steps, which name their flags
        line, code = f"{prog}: error: " + _OUT_OF_MEMORY % allocation, 1
      else:
        raise
    finally:
      _main_ended[0] = True
    if not kept:
      gc.collect()  # TensorFlow objects of the failed run log their teardown now, not after our last line
    with contextlib.suppress(OSError):  # its reader gone too (`2>&1 | tee`, the group stopped): the code says it
      print(line, file=sys.stderr, flush=True)
    sys.exit(code)
  return main


def _xla_cache_line(e):
  from xlnet_tf.training import xla_cache  # pylint: disable=g-import-not-at-top  (TensorFlow's error: it is loaded)
  return xla_cache.failure_line(e)


def _bare_os_error(e):
  """A line naming the path for an OSError no check of the tools foresaw, which Python words as `[Errno 21] Is a
  directory: 'D/config.json'` (sweep 30, U11); None for any other error."""
  if not isinstance(e, OSError) or not e.filename or not str(e).startswith("[Errno"):
    return None
  fix = ("a file is read or written there: move the directory away or pass another path" if e.errno == errno.EISDIR
         else "give this user access to it or pass another path" if e.errno in (errno.EACCES, errno.EPERM)
         else "fix that and rerun")
  return f"{e.filename}{f' -> {e.filename2}' if e.filename2 else ''}: {e.strerror}; {fix}."


def _absl_line(line):
  """absl's parse error in our words: `Did you mean: do_train ?` -> `Did you mean --do_train?`; a bool flag's value
  `('Non-boolean argument to boolean flag', 'maybe')` -> `not true or false`; `--nox=1 does not take an argument`."""
  line = re.sub(r"Did you mean: (.+?) \?$", lambda m: "Did you mean " + ", ".join(
      f"--{name.strip()}" for name in m.group(1).split(",")) + "?", line)
  line = re.sub(r"\('Non-boolean argument to boolean flag', '(.*)'\)$", r"\1 is not true or false (a bool flag "
                r"takes true, false, 1 or 0; alone it means true)", line)
  return re.sub(r"^(--no(\w+))=(.*) does not take an argument$", r"\1=\3: --no\2 takes no value; pass --no\2 "
                r"alone (--\2=false) or --\2=\3", line)


def _parse_flags(argv):
  """absl's parsing of `argv` (an unknown flag or a bad value: one line `{tool}: error: ...`, exit 1), then what
  must come before TensorFlow's runtime starts, which absl's start-up callbacks do before `main` (tf.distribute's
  lists the GPUs): XLA's cache setting (`xla_cache.set_flags`)."""
  try:
    rest = absl_flags.FLAGS(argv)
  except (absl_flags.Error, ValueError) as e:  # absl's report ends in a help hint (app.parse_flags_with_usage); a
    line = _absl_line(" ".join(str(e).split()))  # ValueError: `--nodo_train=1`, a traceback (sweep 32, U21)
    end = "" if line.endswith("?") else "."
    print(f"{os.path.basename(argv[0])}: error: {line}{end} Pass --helpshort or --helpfull to see the flags.",
          file=sys.stderr, flush=True)
    sys.exit(1)
  if getattr(absl_flags.FLAGS, "xla_cache_dir", None):
    from xlnet_tf.training import xla_cache  # pylint: disable=g-import-not-at-top  (cli.py stays light to import)
    xla_cache.set_flags(absl_flags.FLAGS.xla_cache_dir)
  return rest


def run_script(define_flags, main):
  """`define_flags()`, --helpshort listing them, then `app.run(main)`: the `__main__` of every CLI. Its exit ends
  the process at once (`_end_process`)."""
  define_flags()
  for flag in absl_flags.FLAGS.get_flags_for_module(flags):  # key flags of the script, which --helpshort lists
    absl_flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  try:
    app.run(main, flags_parser=_parse_flags)
  except SystemExit as e:
    code = e.code
  else:
    code = 0
  finally:
    stderr_filter.stop()  # every line out before the process ends (also where it ends with os._exit)
  _end_process(code)


def _end_process(code):
  """Ends the process with `code` (SystemExit's: None is 0, a message is printed and is 1) as Python's shutdown
  would, but without its teardown. Python sets SIGINT and SIGTERM back to their default actions before it tears the
  modules down, and TensorFlow's teardown takes about half a second: a signal then killed the process without its
  line (`_exit_on_signal`). So the atexit functions (logging's flush among them) run here, under that handler, the
  standard streams are flushed, and `os._exit` ends the process; the tools close or flush every file they write
  (the TensorBoard writer after each report) before."""
  if code is None:
    code = 0
  elif not isinstance(code, int):
    print(code, file=sys.stderr)
    code = 1
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in filter(None, (sys.stdout, sys.stderr)):  # None: closed when the process started
    try:
      stream.flush()
    except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
      pass
  os._exit(code)  # pylint: disable=protected-access
