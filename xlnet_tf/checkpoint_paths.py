"""Finding a directory's checkpoints by their files, without reading them: the latest of a training run's
`model_dir` (its `checkpoint` state file, else its highest `ckpt-N`), and the prefix that a path given for a
checkpoint (a prefix, a directory, or `<dir>/latest`) names. Reading and writing checkpoints is `checkpoint.py`'s."""

import os
import re

import tensorflow as tf
from absl import logging

from xlnet_tf import fileio
from xlnet_tf import hf_checkpoint


def latest_checkpoint(directory):
  """`tf.train.latest_checkpoint(directory)` for a directory of any name: TensorFlow's checks the prefix's files
  with a glob, so in a directory named with [ ] * or ? it finds no checkpoint (a rerun then started again from step
  0, writing over the checkpoints it did not see). Without a `checkpoint` state file, the training run's complete
  checkpoint of the highest step, with a warning. Where the state file names a checkpoint whose `.index` is gone
  (deleted, or a copy cut short), the newest complete one it lists (else the highest complete `ckpt-N` there), with
  a warning naming the missing one: TensorFlow's takes such a directory for one without checkpoints, and a run there
  started again from step 0 and wrote over them. None where the directory holds no complete checkpoint."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    path = _highest_run_checkpoint(directory, complete=False)  # a damaged one: `Cannot resume`, naming it
    if path:
      _warn_once("%s has no `checkpoint` state file: its latest checkpoint is taken to be %s, the highest step.",
                 directory, path)
    return path
  named = state.model_checkpoint_path
  beside = lambda p: os.path.join(directory, os.path.basename(p))  # TF1 wrote absolute paths: a directory moved
  if fileio.exists(named + ".index") or fileio.exists(beside(named) + ".index"):
    return named if fileio.exists(named + ".index") else beside(named)
  listed = [beside(p) for p in reversed(state.all_model_checkpoint_paths) if beside(p) != beside(named)]
  path = next((p for p in listed if is_complete(p)), None) or _highest_run_checkpoint(directory, complete=True)
  _warn_once("%s names %s as the latest checkpoint, but its files are gone (no %s.index): %s",
             os.path.join(directory, "checkpoint"), named, os.path.basename(named),
             f"the latest complete checkpoint there, {path}, is taken." if path else
             "there is no complete checkpoint there either, so none is taken.")
  return path


_RUN_CHECKPOINT = re.compile(r"ckpt-(\d+)\.index")  # the names a training run gives its checkpoints (run_checkpoint)
_SHARDS = re.compile(r"\.data-\d+-of-(\d+)$")
_WARNED = set()


def _warn_once(message, *args):
  """logging.warning, once a process for the same line (the tools look for a directory's latest several times)."""
  if (message, args) not in _WARNED:
    _WARNED.add((message, args))
    logging.warning(message, *args)


def is_complete(prefix):
  """Whether checkpoint `prefix` has its `.index` and every `.data-*` shard its files' names count."""
  if not fileio.exists(prefix + ".index"):
    return False
  shards = [n for n in fileio.glob_in(os.path.dirname(prefix) or ".", os.path.basename(prefix) + ".data-*")
            if not fileio.is_temp_name(n) and _SHARDS.search(n)]
  return bool(shards) and len(shards) == int(_SHARDS.search(shards[0]).group(1))


def _highest_run_checkpoint(directory, complete):
  """The training run's checkpoint (`ckpt-{step}`; with `complete`, of those `is_complete`) of the highest step in
  `directory`; None if it holds none (or is no directory)."""
  if not directory or not fileio.isdir(directory):
    return None
  steps = [int(m.group(1)) for m in map(_RUN_CHECKPOINT.fullmatch, fileio.listdir(directory)) if m]
  paths = (os.path.join(directory, f"ckpt-{step}") for step in sorted(steps, reverse=True))
  return next((path for path in paths if not complete or is_complete(path)), None)


def resolve_checkpoint_path(ckpt_path):
  """A checkpoint prefix from a prefix (where `{prefix}.index` exists, even if a directory `prefix` does too: a
  run_squad.py --predict_all_ckpt into --model_dir made one per checkpoint), a directory (its latest checkpoint or
  its single `*.index`), or `<dir>/latest` (the original's convention). FileNotFoundError naming what is missing where there is none (for a
  directory of HuggingFace weights without config.json: that file)."""
  if ckpt_path.endswith("/latest"):
    ckpt_path = os.path.dirname(ckpt_path)
  if fileio.exists(ckpt_path + ".index"):  # also where a directory of that name lies beside it (predictions)
    return ckpt_path
  if tf.io.gfile.isdir(ckpt_path):
    latest = latest_checkpoint(ckpt_path)
    if latest is None:
      indexes = fileio.glob_in(ckpt_path, "*.index")
      if not indexes:
        hf_checkpoint.require_config(ckpt_path)
      if len(indexes) != 1:
        raise FileNotFoundError(f"No checkpoint found in directory {ckpt_path} (found {len(indexes)} *.index "
                                "files). Pass the checkpoint prefix, e.g. .../xlnet_model.ckpt.")
      latest = indexes[0][:-len(".index")]
    return latest
  if not tf.io.gfile.exists(ckpt_path + ".index") and tf.io.gfile.exists(ckpt_path):
    raise FileNotFoundError(f"{ckpt_path} is a file, not a checkpoint. Pass a checkpoint's prefix (its files' names "
                            "without .index or .data-*, e.g. .../xlnet_model.ckpt) or a model directory.")
  if not tf.io.gfile.exists(ckpt_path + ".index"):
    raise FileNotFoundError(f"Checkpoint {ckpt_path} not found ({ckpt_path}.index does not exist). Pass the "
                            "prefix of a TF checkpoint, e.g. xlnet_cased_L-24_H-1024_A-16/xlnet_model.ckpt.")
  return ckpt_path


def directory_of(ckpt_path):
  """The absolute directory holding the checkpoint `ckpt_path` (as `resolve_checkpoint_path` takes it; a relative
  prefix too), where its run's files lie; a HuggingFace model directory itself."""
  if hf_checkpoint.is_hf_directory(ckpt_path):
    return os.path.abspath(ckpt_path)
  return os.path.dirname(os.path.abspath(resolve_checkpoint_path(ckpt_path)))
