"""How scripts/demo.py runs and shows its stages: one line per stage (rewritten in place on a terminal), its log
file and done marker, the command-line tool it runs, and the native stderr kept off the terminal."""

if __name__ == "__main__":  # run by its name it did nothing, exit 0
  raise SystemExit("demo_stages.py is a library: run scripts/demo.sh.")

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

from xlnet_tf import locks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Display:
  """One line per stage: rewritten in place on a terminal, printed once when the stage ends otherwise."""

  def __init__(self):
    self.tty = sys.stdout.isatty()

  def update(self, text):
    if self.tty:
      width = shutil.get_terminal_size((100, 20)).columns - 1
      self.write("\r\033[K" + text[:width])

  def done(self, text):
    self.write(("\r\033[K" if self.tty else "") + text + "\n")

  @staticmethod
  def write(text):
    with contextlib.suppress(OSError):  # a hung-up terminal (EIO): the demo goes on, its tool's lines to the log
      sys.stdout.write(text)
      sys.stdout.flush()


DISPLAY = Display()


def rel(path):
  """`path` relative to the working directory, unless that climbs out of it."""
  relative = os.path.relpath(path)
  return relative if not relative.startswith("..") else path


def duration(seconds):
  """`1h02m`, `3m05s` or `42s`: the time a stage took, as its line shows it."""
  seconds = int(round(seconds))
  if seconds >= 3600:
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
  return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Stage:
  """A numbered stage: its label, log file, done marker and timing."""

  def __init__(self, demo, name, label):
    demo.stage_index += 1
    self.prefix = f"[{demo.stage_index}/{demo.num_stages}] {label}"
    self.log = os.path.join(demo.log_dir, f"{demo.stage_index}_{name}.log")
    self.marker = os.path.join(demo.log_dir, f"{name}.done.json")
    self.t0 = time.time()

  def show(self, text):
    DISPLAY.update(f"{self.prefix}: {text}  ({duration(time.time() - self.t0)})")

  def finish(self, text, skipped=False):
    took = "done earlier" if skipped else duration(time.time() - self.t0)
    DISPLAY.done(f"{self.prefix}: {text}  ({took})")

  def load(self, key):
    """The result a finished run of the same command stored, or None."""
    try:
      with open(self.marker) as f:
        saved = json.load(f)
    except (OSError, ValueError):  # none, or damaged (a traceback): the stage runs again and writes it anew
      return None
    return saved["result"] if isinstance(saved, dict) and saved.get("key") == key and "result" in saved else None

  def store(self, key, result):
    from xlnet_tf import fileio
    fileio.write_json(self.marker, {"key": key, "result": result}, indent=1)


def train_progress(line, train_steps):
  """`[120] | gnorm .. | loss 6.57 | pplx .. | 2.75 steps/s, 5625 tokens/s, ETA 0h00m28s | peak mem 0.31 GiB` -> a
  short text."""
  if not (line.startswith("[") and "| loss " in line):
    return None
  step = line[1:line.index("]")]
  loss = line.split("| loss ")[1].split()[0]
  speed = line.split(" steps/s")[0].rsplit("| ", 1)[-1] if " steps/s" in line else "?"
  eta = line.rsplit("ETA ", 1)[-1].split(" | ")[0].strip() if "ETA " in line else "?"
  if eta.count("h") == 1 and eta.endswith("s"):  # 0h01m54s -> 1m54s
    h, rest = eta.split("h")
    m, sec = rest[:-1].split("m")
    eta = duration(int(h) * 3600 + int(m) * 60 + int(sec))
  return f"step {step}/{train_steps}, loss {loss}, {speed} steps/s, ETA {eta}"


# What stops the demo: each is passed on to the tool that runs (in a session of its own, so that a Ctrl-C or a
# hang-up reaches it once, through the demo), which saves its step and ends; the demo then ends with one line.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def handle_stop_signals(handler):
  """Sets `handler` for the `STOP_SIGNALS` not ignored (under nohup a hang-up stops nothing); {signal: handler
  before}."""
  return {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS
          if signal.getsignal(signum) is not signal.SIG_IGN}


def run_tool(stage, cmd, progress_fn, commands):
  """Runs a command-line tool from the repository root; output to the stage's log; progress on the stage's line.

  Returns the tool's output lines. Stops the demo (showing the log's tail) if the tool fails, and with one line
  (exit 128 + the signal) where a signal stopped it (`STOP_SIGNALS`: the demo ended at once, no line, and the tool
  lost its step).
  """
  commands.append(cmd)
  lines, stopped = [], []
  with open(stage.log, "a") as log:
    log.write(f"\n$ {shlex.join(cmd)}\n")
    log.flush()
    env, parent = dict(os.environ, PYTHONUNBUFFERED="1"), os.getpid()
    procs = []
    def forward(signum, frame):
      del frame
      stopped.append(signum)
      for proc in procs:
        proc.send_signal(signum)
    old = handle_stop_signals(forward)
    try:
      procs.append(proc := subprocess.Popen(  # a kill -9 of the demo left the tool training on (sweep 22, N4)
          cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
          start_new_session=True, preexec_fn=lambda: locks.end_with_parent(signal.SIGTERM, parent)))
      if stopped:  # before it started: it stops at once
        proc.send_signal(stopped[0])
      for line in proc.stdout:
        log.write(line)
        log.flush()
        lines.append(line.rstrip("\n"))
        text = progress_fn(lines[-1])
        if text:
          stage.show(text)
      returncode = proc.wait()
    finally:
      for signum, handler in old.items():
        signal.signal(signum, handler)
  if stopped:
    name = signal.Signals(stopped[0]).name
    DISPLAY.done(f"{stage.prefix}: stopped by {name} after {duration(time.time() - stage.t0)}")
    DISPLAY.write("".join(f"    {line}\n" for line in lines[-1:]))  # the tool's own line: what it saved
    with contextlib.suppress(OSError):  # a hung-up terminal
      print(f"demo: stopped by {name}; the stages done are kept: run the same command again to go on (a training "
            "stage resumes from the step it saved).", file=sys.stderr, flush=True)
    sys.exit(128 + stopped[0])
  if returncode != 0:
    DISPLAY.done(f"{stage.prefix}: FAILED (exit {returncode}) after {duration(time.time() - stage.t0)}")
    print("".join(f"    {line}\n" for line in lines[-15:]), end="")
    sys.exit(f"demo: {os.path.basename(cmd[1])} failed; its whole output is in {stage.log}")
  return lines


def quiet_native_stderr(path):
  """Sends what native libraries write to file descriptor 2 (TensorFlow's start-up lines) to a file.

  Python's own messages (errors, tracebacks) still reach the terminal through `sys.stderr`.
  """
  sys.stderr.flush()
  saved = os.dup(2)
  fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  os.dup2(fd, 2)
  os.close(fd)
  sys.stderr = os.fdopen(saved, "w", buffering=1)
