"""The lines TensorFlow's C++ runtime (and SentencePiece's trainer) writes to stderr that tell a user nothing, and
a command-line tool's stderr.

TensorFlow's C++ libraries write to file descriptor 2 directly, past Python's logging: at start-up (build flags,
oneDNN's notice, the CUDA probe on a machine without a GPU) and while the first steps are traced and compiled
(grappler's cost estimator on bfloat16 ops it has no cost for, oneDNN falling back to Eigen for int32 ops, XLA's
service start). None of them says anything about the run. Nor does TensorFlow's report of an out-of-memory error
(the GPU allocator's dump: hundreds of lines), which the CLI states in its own last line. `start()` puts a pipe on
descriptor 2 whose reader, a small child process (this file run as a script), passes every line on to the real
stderr except those (`kept`); `stop()` closes the pipe and waits until the last line is out. A process rather than
a thread, so that a line written just before a crash (a fatal check's message) still reaches the terminal: the
reader drains the pipe after this process is gone.

Only the standard library here: the reader starts without the package (`python -I -S`).
"""

import atexit
import os
import re
import subprocess
import sys

# One alternative per message. The TensorFlow log prefix: level letter, date, time, thread id, file:line.
_LOG_PREFIX = r"[IWE]\d{4} [\d:. ]+\d+ "
_UNRESTORED = (r"(?:Detecting that an object or model or tf\.train\.Checkpoint is being deleted with unrestored "
               r"values|Value in checkpoint could not be found in the restored object: )")
NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|To enable the following instructions: "
    r"|INFO:tensorflow:Assets written to: "  # a SavedModel's, naming its temporary directory (also below)
    # A resume's restore that failed (the tools say why in their own line), torn down: its unrestored values (also
    # below, as a log line; sweep 25, C4).
    r"|WARNING:tensorflow:" + _UNRESTORED +
    r"|" + _LOG_PREFIX + r"(?:checkpoint\.py:\d+\] " + _UNRESTORED + "|"
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
    # TensorFlow's Python checkpoint writer, at INFO on every save; its SavedModel writer, naming the temporary
    # directory the export is written to (renamed onto --export_dir, which the tool's own line names).
    r"|functional_saver\.py:\d+\] Sharding callback duration: "
    r"|builder_impl\.py:\d+\] Assets written to: "
    r"|fingerprinting_utils\.py:\d+\] Writing fingerprint to "
    # SentencePiece's trainer (scripts/train_spm.py): each symbol the tool adds, and the temporary files it writes
    # (the tool's own line names the model).
    r"|trainer_interface\.cc:\d+\] (?:Adding meta_piece: |Saving (?:model|vocabs): .*\.tmp-)"
    r"))")

# Out of memory. A CLI turns every out-of-memory error into its own line (`training.out_of_memory`: the allocation,
# the flags that make the step fit), so TensorFlow's report of it is dropped: the allocator's dump (BFC, the GPU's
# allocator: the bins, every chunk of the pool, hundreds of lines), the kernel's and the rendezvous's copies of the
# error, and the lines that continue them. A message that begins a report (`OOM_REPORT`) starts one; its other lines
# (`OOM_REPORT_LINE`) are dropped until a line that is neither.
# What TensorFlow's allocators (`OOM when allocating tensor ...`), XLA (`Out of memory while trying to allocate ...`,
# `Failed to allocate ...`) and a TPU (`Attempting to reserve ... That was not possible`) say, case aside, as against
# other RESOURCE_EXHAUSTED errors (a quota, too many open files); `training.out_of_memory` reads errors by it too.
MEMORY_WORDS = r"\bOOM when allocating|out of memory|failed to allocate|attempting to reserve"
# The words of a TensorFlow error message around its reason: the function's node ("{{function_node
# __inference_...}} OOM when ..."), the device's job prefix (".../device:GPU:0" -> "GPU:0") and an eager op's name
# ("... [Op:SaveV2] name: ").
_ERROR_NOISE = re.compile(r"\{\{[^}]*\}\}|/job:[^/\s]+/replica:\d+/task:\d+/device:|\s*\[Op:\w+\]( name:.*)?")


def error_text(message):
  """A TensorFlow error's message (or one line of it) without `_ERROR_NOISE`, white space collapsed: what the
  tools' one-line errors quote."""
  return " ".join(_ERROR_NOISE.sub("", message).split())
OOM_REPORT = re.compile(
    _LOG_PREFIX + r"(?:"
    r"bfc_allocator\.cc:\d+\] Allocator \(.*\) ran out of memory trying to allocate (?!.*with freed_by_count)"
    r"|(?:op_kernel\.cc:\d+\] OP_REQUIRES failed at .*|local_rendezvous\.cc:\d+\] Local rendezvous is aborting "
    r"with status): (?:RESOURCE_EXHAUSTED: (?i:" + MEMORY_WORDS + r")"
    # A damaged record file, and records of other features than the run parses (another --max_seq_length under a
    # cache's name), which the CLIs name in their own line (`data.read_errors`; 15 lines above it: sweep 27).
    # A checkpoint whose bytes fail their checksum, which a resume or a load names in its line (sweep 34, R8).
    r"|DATA_LOSS: (?:truncated record at|corrupted record at|TensorBundle at .*: Checksum does not match)"
    r"|INVALID_ARGUMENT: .*(?:Key: \w+(?:, Index: \d+)?\.  (?:Number of \w+ values != expected|Can't parse serialized "
    r"Example)|Feature: \w+ \(data type: \w+\) is required but could not be found))"
    r")")
OOM_REPORT_LINE = re.compile(
    r"^(?:" + _LOG_PREFIX + r"bfc_allocator\.cc:\d+\] "  # the dump, its occupancy map last
    r"|If the cause is memory fragmentation maybe the environment variable "
    r"|Current allocation summary follows\.$"
    r"|(?:Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved|LargestFreeBlock): +\S+$"  # Stats
    r"|\t \[\[.*\]\]$"  # the node the rendezvous's error came from
    r"| \[[\w-]+='.*'\]$"  # the error's payload (XLA's: [tf-allocator-allocation-error=''])
    r"|Hint: If you want to see a list of allocated tensors when OOM happens"
    r"|\s*$)")

# SentencePiece's trainer echoes its settings, some 60 lines (`Starts training with :`, then `trainer_spec {` to
# `denormalizer_spec {}`: the values of train_spm.py's flags, which the .model file holds too), above which the
# tool's own warnings were lost (sweep 22, N5). Dropped as a report.
SPM_SETTINGS = re.compile(_LOG_PREFIX + r"sentencepiece_trainer\.cc:\d+\] Starts training with : ?$")
SPM_SETTINGS_LINE = re.compile(r"^(?:\w+_spec \{\}?|  .*|\})$")
_REPORTS = ((OOM_REPORT, OOM_REPORT_LINE), (SPM_SETTINGS, SPM_SETTINGS_LINE))  # (first line, the lines after it)

_reader = []  # [(the reader process, descriptor 2 as it was)] while the filter runs


def is_noise(line):
  """Whether `line` (str) is one of the `NOISE` messages."""
  return bool(NOISE.match(line))


def kept(lines):
  """The lines of the iterable `lines` (str or bytes) that a user is shown: neither `NOISE` nor part of one of
  `_REPORTS` (TensorFlow's report of an out-of-memory error, SentencePiece's settings), each as soon as it is
  read."""
  report = None  # the pattern of the lines after a report's first, while in one
  for line in lines:
    text = (line.decode("utf-8", "replace") if isinstance(line, bytes) else line).rstrip("\n")
    if report and report.match(text):
      continue
    report = next((rest for first, rest in _REPORTS if first.match(text)), None)
    if report is None and not is_noise(text):
      yield line


def start():
  """Filters descriptor 2 of this process (and of the processes it starts) through `kept` until `stop()` or exit.

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
  """Copies the `kept` lines from binary file `source` to binary file `sink`, each as soon as it is read."""
  try:
    for line in kept(source):
      sink.write(line)
      sink.flush()
  except OSError:  # the terminal or the reading process is gone (EPIPE; EIO after a hang-up): read on, show nothing
    for _ in source:
      pass


if __name__ == "__main__":
  _relay(sys.stdin.buffer, sys.stdout.buffer)
