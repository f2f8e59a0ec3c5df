"""The lines TensorFlow's C++ runtime writes to stderr that tell a user nothing, and the filter that keeps them off
a command-line tool's stderr.

TensorFlow's C++ libraries write to file descriptor 2 directly, past Python's logging: at start-up (build flags,
oneDNN's notice, the CUDA probe on a machine without a GPU) and while the first steps are traced and compiled
(grappler's cost estimator on bfloat16 ops it has no cost for, oneDNN falling back to Eigen for int32 ops, XLA's
service start). None of them says anything about the run. `start()` puts a pipe on descriptor 2 whose reader, a
small child process (this file run as a script), passes every line on to the real stderr except those `NOISE`
matches; `stop()` closes the pipe and waits until the last line is out. A process rather than a thread, so that a
line written just before a crash (a fatal check's message) still reaches the terminal: the reader drains the pipe
after this process is gone.

Only the standard library here: the reader starts without the package (`python -I -S`).
"""

import atexit
import os
import re
import subprocess
import sys

# One alternative per message. The TensorFlow log prefix: level letter, date, time, thread id, file:line.
_LOG_PREFIX = r"[IWE]\d{4} [\d:. ]+\d+ "
NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|To enable the following instructions: "
    r"|" + _LOG_PREFIX + r"(?:"
    # Start-up: build flags, oneDNN's notice, the CUDA probe's failure on a machine without an NVIDIA driver.
    r"(?:port|cudart_stub|cpu_feature_guard)\.cc:\d+\] "
    r"|cuda_platform\.cc:\d+\] failed call to cuInit"
    # Grappler's cost model has no cost for some ops (bfloat16 Softmax): it logs the op and uses a default.
    r"|op_level_cost_estimator\.cc:\d+\] Error in PredictCost\(\) for the op: "
    # oneDNN has no int32 kernels without AVX-512 and falls back to Eigen's (error level, on a run that is fine).
    r"|util\.cc:\d+\] oneDNN supports DT_INT32 only on platforms with AVX-512"
    # XLA's CPU service and first compilation.
    r"|service\.cc:\d+\] (?:XLA service 0x[0-9a-f]+ initialized for platform|  StreamExecutor \[\d+\]: )"
    r"|device_compiler\.h:\d+\] Compiled cluster using XLA!"
    r"|dump_mlir_util\.cc:\d+\] disabling MLIR crash reproducer"
    # tf.data: the input pipeline's generator and defaults (runtime.keep_freed_memory_after_input undoes the
    # memory patch), and the cache of an iterator a finite run stops reading.
    r"|generator_dataset_op\.cc:\d+\] Memory patch applied: "
    r"|dataset\.cc:\d+\] Input of GeneratorDatasetOp::Dataset will not be optimized"
    r"|tf_record_dataset_op\.cc:\d+\] TFRecordDataset `buffer_size` is unspecified"
    r"|cache_dataset_ops\.cc:\d+\] The calling iterator did not fully read the dataset being cached"
    # XLA's compilation cache (--xla_cache_dir): the loader first tries each entry as text (it is binary), and on a
    # CPU compares the features the program was compiled for with the host's, where tuning preferences
    # ("+prefer-no-gather") never appear (the entries' names carry the CPU's real features: training.xla_cache).
    r"|text_format\.cc:\d+\] Error parsing text-format tensorflow\.XlaSerializedCacheEntry: "
    r"|cpu_aot_loader\.cc:\d+\] Loading XLA:CPU AOT result\. Target machine feature \+prefer-"
    # TensorFlow's Python checkpoint writer, at INFO on every save.
    r"|functional_saver\.py:\d+\] Sharding callback duration: "
    r"))")

_reader = []  # [(the reader process, descriptor 2 as it was)] while the filter runs


def is_noise(line):
  """Whether `line` (str) is one of the `NOISE` messages."""
  return bool(NOISE.match(line))


def start():
  """Filters descriptor 2 of this process (and of the processes it starts) through `NOISE` until `stop()` or exit.

  Returns:
    True if the filter runs now; False if it already ran or descriptor 2 cannot be redirected (then nothing
    changed).
  """
  if _reader:
    return False
  sys.stderr.flush()
  try:
    saved = os.dup(2)
  except OSError:
    return False
  read_end, write_end = os.pipe()
  try:
    # Its own session: Ctrl-C and the terminal's signals go to the tool, and the reader drains what it writes.
    reader = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__)], stdin=read_end,
                              stdout=saved, close_fds=True, start_new_session=True)
  except OSError:
    os.close(saved)
    return False
  finally:
    os.close(read_end)
  os.dup2(write_end, 2)
  os.close(write_end)
  _reader.append((reader, saved))
  atexit.register(stop)
  return True


def stop(timeout=10.0):
  """Restores descriptor 2 and waits (up to `timeout` seconds) until the reader has passed on every line."""
  if not _reader:
    return
  reader, saved = _reader.pop()
  sys.stderr.flush()
  os.dup2(saved, 2)  # closes this process's end of the pipe: the reader sees its end once child processes close it
  os.close(saved)
  try:
    reader.wait(timeout)
  except subprocess.TimeoutExpired:  # a child process still holds the pipe; the reader ends when it does
    pass


def _relay(source, sink):
  """Copies lines from binary file `source` to binary file `sink`, except the noise, each as soon as it is read."""
  try:
    for line in source:
      if not is_noise(line.decode("utf-8", "replace")):
        sink.write(line)
        sink.flush()
  except BrokenPipeError:  # the terminal or the reading process is gone: nothing left to show
    pass


if __name__ == "__main__":
  _relay(sys.stdin.buffer, sys.stdout.buffer)
