"""Finding a directory's checkpoints by their files, without reading them: the latest of a training run's
`model_dir` (its `checkpoint` state file, else its highest `ckpt-N`), and the prefix that a path given for a
checkpoint (a prefix, a directory, or `<dir>/latest`) names. Reading and writing checkpoints is `checkpoint.py`'s."""

import contextlib
import logging as py_logging
import os
import re
import time

import tensorflow as tf
from absl import logging
from google.protobuf import text_format
from tensorflow.python.training import checkpoint_state_pb2  # pylint: disable=no-name-in-module

from xlnet_tf import fileio
from xlnet_tf import hf_checkpoint

SAVED_MODEL_MARKER = "saved_model.pb"  # in every SavedModel directory


def is_saved_model(path):
  """Whether path is a SavedModel's directory (an export, for serving), where a checkpoint or a run is expected."""
  return fileio.exists(os.path.join(path, SAVED_MODEL_MARKER))


def latest_checkpoint(directory):
  """`tf.train.latest_checkpoint(directory)` for a directory of any name: TensorFlow's checks the prefix's files
  with a glob, so in a directory named with [ ] * or ? it finds no checkpoint (a rerun then started again from step
  0, writing over the checkpoints it did not see). Without a `checkpoint` state file, the training run's complete
  checkpoint of the highest step, with a warning. Where the state file names a checkpoint whose `.index` is gone
  (deleted, or a copy cut short), the newest complete one it lists (else the highest complete `ckpt-N` there), with
  a warning naming the missing one: TensorFlow's takes such a directory for one without checkpoints, and a run there
  started again from step 0 and wrote over them. The same where it names one outside the directory (a copied or
  moved run's state file, sweep 23 A2: a resume trained it against this directory's run files). None where the
  directory holds no complete checkpoint."""
  state = read_state(directory)
  if state is None:
    path = _highest_run_checkpoint(directory, complete=False)  # a damaged one: `Cannot resume`, naming it
    if path and not fileio.exists(os.path.join(directory, "checkpoint")):  # one of garbage: read_state's line
      _warn_once("%s has no `checkpoint` state file: its latest checkpoint is taken to be %s, the highest step.",
                 directory, path)
    return path
  named = state.model_checkpoint_path
  beside = lambda p: os.path.join(directory, os.path.basename(p))  # TF1 wrote absolute paths: a directory moved
  if fileio.exists(beside(named) + ".index"):  # the directory's own files, where a copied run's names the original's
    _warn_of_a_later_checkpoint(directory, beside(named))
    return beside(named)
  outside = fileio.exists(named + ".index")
  if outside and fileio.is_within(named, directory):
    return named
  listed = [beside(p) for p in reversed(state.all_model_checkpoint_paths) if beside(p) != beside(named)]
  path = next((p for p in listed if is_complete(p)), None) or _highest_run_checkpoint(directory, complete=True)
  _warn_once("%s names %s as the latest checkpoint, but %s: %s", os.path.join(directory, "checkpoint"), named,
             f"it lies outside {directory} (the state file of a copied or moved run?), and only the directory's own "
             "checkpoints are read (another run's flags would be checked against this one's)" if outside else
             f"its files are gone (no {os.path.basename(named)}.index)",
             f"the latest complete checkpoint there, {path}, is taken." if path else
             "there is no complete checkpoint there either, so none is taken.")
  return path


def _warn_of_a_later_checkpoint(directory, named):
  """A warning where `directory` holds a complete run checkpoint of a later step than `named`, the one its state
  file names (a state file restored from a backup, or a run stopped between a save's files and its state file): it
  is not taken, and a training run there writes its later checkpoints over it, without a word (sweep 27)."""
  match = _RUN_CHECKPOINT.fullmatch(os.path.basename(named) + ".index")
  later = _highest_run_checkpoint(directory, complete=True) if match else None
  if later and int(_RUN_CHECKPOINT.fullmatch(os.path.basename(later) + ".index").group(1)) > int(match.group(1)):
    _warn_once("%s names %s as the latest checkpoint, but %s, of a later step, is there too (a state file restored "
               "from a backup, or a run stopped between a save's files and its state file): %s is taken, as the "
               "state file says, and a training run there writes its later checkpoints over %s. To go on from it "
               "instead, delete the state file (the highest step is then taken).",
               os.path.join(directory, "checkpoint"), named, later, os.path.basename(named), os.path.basename(later))


def read_state(directory):
  """`tf.train.get_checkpoint_state(directory)` (the `checkpoint` state file, its relative paths joined to the
  directory; None where there is none), with one line of ours where it cannot be used: one TensorFlow cannot parse
  is ignored (as TensorFlow ignores it) with one warning, not TensorFlow's two at each of the tools' reads; one that
  names no checkpoint (empty, or cut short), which TensorFlow refuses naming no file, is a ValueError saying what to
  do."""
  path = os.path.join(directory, "checkpoint") if directory else None
  if not path or not fileio.exists(path):
    return None
  if fileio.isdir(path):  # a training run failed on its first save, naming the checkpoint (sweep 23, C7)
    raise ValueError(f"{path} is a directory, where a run keeps its `checkpoint` state file (the latest checkpoint's "
                     "name). Move it away, then rerun.")
  with fileio.open_file(path) as f:
    text = f.read()
  state = checkpoint_state_pb2.CheckpointState()
  try:
    text_format.Merge(text, state)
  except text_format.ParseError as e:
    _warn_once("%s is not a `checkpoint` state file (%s): it is ignored, as TensorFlow ignores it (the latest "
               "checkpoint there is the training run's of the highest step, ckpt-N). Delete it to silence this line.",
               path, " ".join(str(e).split())[:120])
    return None
  if not state.model_checkpoint_path:
    raise ValueError(f"{path}, the `checkpoint` state file, names no checkpoint (it is empty or cut short), which "
                     "TensorFlow refuses. Delete it, then rerun: the latest checkpoint in that directory is then "
                     "taken to be the training run's of the highest step (ckpt-N).")
  if not os.path.isabs(state.model_checkpoint_path):
    state.model_checkpoint_path = os.path.join(directory, state.model_checkpoint_path)
  for i, listed in enumerate(state.all_model_checkpoint_paths):
    if not os.path.isabs(listed):
      state.all_model_checkpoint_paths[i] = os.path.join(directory, listed)
  return state


def keep_own_state(directory):
  """Rewrites `directory`'s state file, where it lists other entries, to list the directory's own complete
  checkpoints it names, by step, the latest (`latest_checkpoint`) last. TensorFlow's CheckpointManager deletes the
  first entries beyond --max_save, by their place in the file and wherever they lie: a copied run's state file naming
  the original's had those deleted, exit 0, and entries out of order the checkpoint resumed from (sweep 34, R1, R2).
  Their timestamps are kept (else now's), without which it would never delete them."""
  state, latest = read_state(directory), latest_checkpoint(directory)
  if state is None or latest is None:
    return
  when = dict(zip(state.all_model_checkpoint_paths, state.all_model_checkpoint_timestamps))
  own = {}
  for listed in state.all_model_checkpoint_paths:
    path = os.path.join(directory, os.path.basename(listed))
    if path != latest and is_complete(path) and fileio.real_path(os.path.dirname(listed)) == fileio.real_path(
        directory):
      own[path] = when.get(listed) or time.time()
  step = lambda p: int(m.group(1)) if (m := _RUN_CHECKPOINT.fullmatch(os.path.basename(p) + ".index")) else -1
  paths = [*sorted(own, key=step), latest]
  if paths == list(state.all_model_checkpoint_paths) and latest == state.model_checkpoint_path:
    return
  new = checkpoint_state_pb2.CheckpointState(
      model_checkpoint_path=os.path.basename(latest), all_model_checkpoint_paths=map(os.path.basename, paths),
      all_model_checkpoint_timestamps=[*(own[p] for p in paths[:-1]),
                                       when.get(latest) or time.time()],
      last_preserved_timestamp=state.last_preserved_timestamp)
  fileio.atomic_write(os.path.join(directory, "checkpoint"), text_format.MessageToString(new))
  dropped = [p for p in state.all_model_checkpoint_paths if os.path.join(directory, os.path.basename(p)) not in paths]
  _warn_once("%s listed %s: it now lists %s, by step, which --max_save prunes in that order.%s",
             os.path.join(directory, "checkpoint"), ", ".join(state.all_model_checkpoint_paths),
             ", ".join(os.path.basename(p) for p in paths),
             f" Left out, never deleted: {', '.join(dropped)}." if dropped else "")


@contextlib.contextmanager
def state_read_once(directory):
  """`read_state(directory)` (its line, or its ValueError), then TensorFlow's own warnings about that state file
  (two lines a read) kept off the log while the body reads it again (a `tf.train.CheckpointManager`)."""
  read_state(directory)
  logger = tf.get_logger()
  level = logger.level
  logger.setLevel(max(level, py_logging.ERROR))
  try:
    yield
  finally:
    logger.setLevel(level)


_RUN_CHECKPOINT = re.compile(r"ckpt-(\d+)\.index")  # the names a training run gives its checkpoints (run_checkpoint)
_SHARDS = re.compile(r"\.data-\d+-of-(\d+)$")
_WARNED = set()


def is_run_checkpoint(prefix):
  """Whether checkpoint `prefix` is named as a training run's (`ckpt-N`), not e.g. an original run's model.ckpt-N."""
  return bool(_RUN_CHECKPOINT.fullmatch(os.path.basename(prefix) + ".index"))


def _warn_once(message, *args):
  """logging.warning, once a process for the same line (the tools look for a directory's latest several times)."""
  if (message, args) not in _WARNED:
    _WARNED.add((message, args))
    logging.warning(message, *args)


def is_complete(prefix):
  """Whether checkpoint `prefix` has its `.index` and every `.data-*` shard its files' names count."""
  if not fileio.exists(prefix + ".index"):
    return False
  shards = data_files(prefix)
  return bool(shards) and len(shards) == int(_SHARDS.search(shards[0]).group(1))


def checkpoint_prefixes(directory):
  """The sorted prefixes of the checkpoints in `directory` (its `*.index` files, hidden names too), less a writer's
  temporaries (`xlnet_model.ckpt.tmp-P-H.index`: a writer killed before its rename), which are no checkpoint."""
  return [p[:-len(".index")] for p in fileio.glob_in(directory, "*.index") if not fileio.is_temp_name(p)]


def data_files(prefix):
  """The `.data-*-of-*` files (shards) of checkpoint `prefix` there are."""
  return [n for n in fileio.glob_in(os.path.dirname(prefix) or ".", os.path.basename(prefix) + ".data-*")
          if not fileio.is_temp_name(n) and _SHARDS.search(n)]


def _highest_run_checkpoint(directory, complete):
  """The training run's checkpoint (`ckpt-{step}`; with `complete`, of those `is_complete`) of the highest step in
  `directory`; None if it holds none (or is no directory)."""
  if not directory or not fileio.isdir(directory):
    return None
  found = map(_RUN_CHECKPOINT.fullmatch, fileio.listdir(directory))
  named = [(int(m.group(1)), m.group(0)[:-len(".index")]) for m in found if m]
  # As named: `ckpt-04` was taken as ckpt-4, then refused as damaged, advising to delete files that are not there
  # (sweep 34, R5).
  paths = (os.path.join(directory, name) for _, name in sorted(named, reverse=True))
  return next((path for path in paths if not complete or is_complete(path)), None)


def resolve_checkpoint_path(ckpt_path):
  """A checkpoint prefix from a prefix (where `{prefix}.index` exists, even if a directory `prefix` does too: a
  run_squad.py --predict_all_ckpt into --model_dir made one per checkpoint), a directory (its latest checkpoint or
  its single `*.index`), or `<dir>/latest` (the original's convention). FileNotFoundError naming what is missing
  where there is none (for a directory of HuggingFace weights without config.json: that file; for a prefix whose
  `.data-*` files lie there without its `.index`: that it is incomplete)."""
  if ckpt_path.endswith("/latest"):
    ckpt_path = os.path.dirname(ckpt_path)
  if fileio.exists(ckpt_path + ".index"):  # also where a directory of that name lies beside it (predictions)
    return ckpt_path
  if tf.io.gfile.isdir(ckpt_path):
    latest = latest_checkpoint(ckpt_path)
    if latest is None:
      prefixes = checkpoint_prefixes(ckpt_path)
      if not prefixes:
        hf_checkpoint.require_config(ckpt_path)
        if is_saved_model(ckpt_path):
          raise FileNotFoundError(f"{ckpt_path} is a SavedModel (saved_model.pb: an export, for serving), not a "
                                  "checkpoint. Pass the --model_dir it was exported from, or one of its checkpoints.")
        left = [os.path.basename(p) for p in fileio.glob_in(ckpt_path, "*.tmp-*.index")]
        raise FileNotFoundError(f"No checkpoint found in directory {ckpt_path} (no *.index file" + (
            f"; {left[0]} is what a writer killed while writing left: write it again" if left else "") +
            "). Pass the checkpoint prefix, e.g. .../xlnet_model.ckpt.")
      if len(prefixes) != 1:
        names = ", ".join(os.path.basename(p) for p in prefixes)
        raise FileNotFoundError(f"Directory {ckpt_path} holds {len(prefixes)} checkpoints ({names}), none of them "
                                "named its latest by a `checkpoint` state file: pass the prefix of one, e.g. "
                                f"{prefixes[0]}.")
      latest = prefixes[0]
    return latest
  if tf.io.gfile.exists(ckpt_path):  # its .index is not there (above)
    raise FileNotFoundError(f"{ckpt_path} is a file, not a checkpoint. Pass a checkpoint's prefix (its files' names "
                            "without .index or .data-*, e.g. .../xlnet_model.ckpt) or a model directory.")
  if data_files(ckpt_path):
    raise FileNotFoundError(f"Checkpoint {ckpt_path} is incomplete: its {os.path.basename(ckpt_path)}.data-* "
                            f"file(s) are there, its {os.path.basename(ckpt_path)}.index is not (a copy or download "
                            "cut short). Copy or download it again.")
  shown = repr(ckpt_path) if ckpt_path != ckpt_path.strip() else ckpt_path  # "ckpt-2 " read as an existing name
  raise FileNotFoundError(f"Checkpoint {shown} not found ({ckpt_path}.index does not exist). Pass the "
                          "prefix of a TF checkpoint, e.g. xlnet_cased_L-24_H-1024_A-16/xlnet_model.ckpt.")


def directory_of(ckpt_path):
  """The absolute directory holding the checkpoint `ckpt_path` (as `resolve_checkpoint_path` takes it; a relative
  prefix too), where its run's files lie; a HuggingFace model directory itself."""
  if hf_checkpoint.is_hf_directory(ckpt_path):
    return os.path.abspath(ckpt_path)
  return os.path.dirname(os.path.abspath(resolve_checkpoint_path(ckpt_path)))
