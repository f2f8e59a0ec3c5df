"""XLA's persistent compilation cache (`--xla_cache_dir`): TensorFlow writes every program it compiles with XLA to
a directory, and a later process that builds the same program on the same kind of machine loads it from there
instead of compiling it again: a rerun, or a resume after a preemption, skips the compilation (docs/performance.md,
"Compilation cache").

TensorFlow reads the setting (`TF_XLA_FLAGS=--tf_xla_persistent_cache_directory`) once, when its runtime starts
(the first device listing or op), so `set_flags` must come before that: the CLIs call it as soon as their flags
are parsed, and `enable` (in `training.start`) before anything is compiled. What TensorFlow does not do, these add:
- an entry's name carries a key of this machine (`machine_key`: TensorFlow's version, the CPU's model and features,
  the GPUs' models, the user's XLA options), so a directory shared by other machines or kept over an upgrade never hands this one a
  program built for another (TensorFlow's own key names only the device type: "GPU", whatever the card);
- a damaged entry (cut short by a copy, or by a full disk) makes TensorFlow fail the run at its first step; `enable`
  removes those of this machine before the run starts (each named in a warning), so they are compiled again;
- a directory that cannot be written ends the run at once with one line, not at the first compilation; a write
  that fails later (a full disk), or an entry that does not match its program, is one line (`failure_line`), not
  TensorFlow's traceback at the first step.
"""

import glob as glob_lib
import hashlib
import os
import re
import time

import tensorflow as tf
from absl import logging

from xlnet_tf import fileio

_DIR_FLAG = "--tf_xla_persistent_cache_directory"
_PREFIX_FLAG = "--tf_xla_persistent_cache_prefix"
_STALE_TEMP_S = 600  # a temporary entry untouched this long was left by a process that died while writing it


def _first_value(text, key):
  """The value of the first `key : value` line of /proc/cpuinfo-like `text`, else ""."""
  for line in text.splitlines():
    name, _, value = line.partition(":")
    if name.strip() == key:
      return value.strip()
  return ""


def _read(path):
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      return f.read()
  except OSError:
    return ""


def machine_key():
  """12 hex digits naming what a compiled program depends on here: TensorFlow's version, the CPU's model name and
  feature flags, the model of every NVIDIA GPU the driver lists (read from /proc, without starting TensorFlow's
  runtime), and the XLA options the user set (`XLA_FLAGS`: a vector width or a fast-math option changes the
  program XLA builds from the same graph, and TensorFlow's key does not see them)."""
  cpuinfo = _read("/proc/cpuinfo")
  gpu_files = sorted(glob_lib.glob("/proc/driver/nvidia/gpus/*/information"))
  gpus = [_first_value(_read(path), "Model") for path in gpu_files]
  parts = [tf.__version__, _first_value(cpuinfo, "model name"), _first_value(cpuinfo, "flags"), *gpus,
           "XLA_FLAGS=" + os.environ.get("XLA_FLAGS", "")]
  return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _varint(f):
  """The next varint of binary file `f`, or None at a truncated one."""
  value = shift = 0
  while True:
    byte = f.read(1)
    if not byte:
      return None
    value |= (byte[0] & 0x7F) << shift
    if byte[0] < 0x80:
      return value
    shift += 7
    if shift > 63:
      return None


def is_complete_entry(path):
  """Whether file `path` is one whole protocol buffer at its top level, of one field or more: every field's tag,
  and every field's length, fits the file exactly (a cut-short or overwritten entry does not; the bytes within a
  field are not read)."""
  with fileio.open_file(path, "rb") as f:
    f.seek(0, 2)  # tf.io.gfile's seek returns nothing: the size from tell()
    size = f.tell()
    f.seek(0)
    if not size:
      return False
    while f.tell() < size:
      tag = _varint(f)
      if tag is None or tag >> 3 == 0:
        return False
      wire = tag & 7
      if wire == 0:
        if _varint(f) is None:
          return False
        continue
      if wire == 2:
        length = _varint(f)
        if length is None:
          return False
        skip = length
      elif wire in (1, 5):
        skip = 8 if wire == 1 else 4
      else:
        return False
      if f.tell() + skip > size:
        return False
      f.seek(skip, 1)
    return True


def _runtime_started():
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  ctx = context.context()
  return bool(ctx._initialized or ctx._physical_devices is not None)  # pylint: disable=protected-access


def _tidy(directory, prefix):
  """Removes this machine's damaged entries and stale temporary ones in `directory`; returns the damaged names."""
  damaged = []
  for path in fileio.glob_in(directory, f"{prefix}__*"):
    try:
      if path.endswith(".pb") and not is_complete_entry(path):
        damaged.append(os.path.basename(path))
        fileio.remove(path)
      elif path.endswith(".tmp") and not fileio.is_remote(path) and \
          time.time() - os.path.getmtime(path) > _STALE_TEMP_S:
        fileio.remove(path)
    except (OSError, tf.errors.OpError):  # gone meanwhile (another process tidying the same directory)
      continue
  return damaged


def set_flags(directory):
  """Sets `TF_XLA_FLAGS` so that TensorFlow keeps its XLA programs in `directory`, under names that start with
  `xlnet_{machine_key()}`; nothing else (no file is touched). The CLIs call it as soon as their flags are parsed
  (`cli.run_script`): absl's start-up callbacks start TensorFlow's runtime before a CLI's main runs.

  Returns:
    The entries' name prefix when TensorFlow will use `directory`; None when `TF_XLA_FLAGS` names another cache
    directory (the user's setting wins) or the runtime has already started without it (a warning says so).
  """
  current = os.environ.get("TF_XLA_FLAGS", "")
  prefix = f"xlnet_{machine_key()}"
  ours = f"{_DIR_FLAG}={directory} {_PREFIX_FLAG}={prefix}"
  if ours in current:
    return prefix
  if _DIR_FLAG in current:
    logging.info("XLA cache: TF_XLA_FLAGS already sets %s; --xla_cache_dir=%s is not used.", _DIR_FLAG, directory)
    return None
  if _runtime_started():
    logging.warning("--xla_cache_dir=%s: TensorFlow's runtime has already started in this process, so its XLA "
                    "programs are not cached (set it before anything lists a device or runs an op).", directory)
    return None
  os.environ["TF_XLA_FLAGS"] = f"{current} {ours}".strip()
  return prefix


def enable(directory):
  """`set_flags(directory)`, then makes sure the cache can be used: `directory` is created and written, and this
  machine's damaged entries there are removed (each named in a warning) before anything is compiled. Call it before
  the first compilation (`training.start` does).

  Returns:
    `set_flags`'s result: the entries' name prefix, or None.

  Raises:
    ValueError: `directory` cannot be written (one line naming it).
  """
  prefix = set_flags(directory)
  if prefix is None:
    return None
  fileio.check_output_dir(directory, "--xla_cache_dir")  # a file there, or not writable: the other flags' words
  probe = os.path.join(directory, f".write_check-{os.getpid()}")
  try:
    fileio.makedirs(directory)
    with fileio.open_file(probe, "wb"):  # a bare probe: the atomic writer's own sentence nested in this one (C8)
      pass
    fileio.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    raise ValueError(f"--xla_cache_dir {directory} cannot be written ({getattr(e, 'strerror', None) or e}). Pass a "
                     "writable directory, or leave the flag unset to compile in every run.") from None
  for name in _tidy(directory, prefix):
    logging.warning("XLA cache: %s in %s is damaged (cut short); removed, its program is compiled again.", name,
                    directory)
  return prefix


def failure_line(error):
  """The one line (for `cli.cli_main`) of a TensorFlow error that this process's cache directory caused, or None:
  writing an entry failed (a full disk, a file-size limit; what the process left under a temporary name is
  removed), or an entry does not match the program it is named for (cut at a field boundary, which
  `is_complete_entry` takes as whole, or written by another build). Both were TensorFlow's traceback at the first
  step (sweep 32, U8, U9)."""
  found = re.search(rf"{_DIR_FLAG}=(\S+)", os.environ.get("TF_XLA_FLAGS", ""))
  if found is None or not isinstance(error, tf.errors.OpError):
    return None
  directory, message = found.group(1), error.message
  if "Serialized HLO does not match" in message:
    return (f"An entry of --xla_cache_dir {directory} does not match the program it is named for (cut short by a "
            "copy, or written by another build of TensorFlow). Delete the directory's xlnet_* files and rerun: "
            "their programs are compiled again.")
  failed = re.search(rf"{re.escape(directory.rstrip('/'))}/\S+?; ([^\n\[]+)", message)
  if failed is None:
    return None
  for path in fileio.glob_in(directory, f"*-{os.getpid()}-*.tmp"):  # TensorFlow's temporary: {entry}...-{pid}-...
    fileio.remove(path)
  return (f"Could not write a compiled program into --xla_cache_dir {directory} ({failed.group(1).strip()}). Free "
          "space there, or leave --xla_cache_dir unset (each run then compiles its programs), and rerun; the "
          "checkpoints saved before are kept.")
