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
  0, writing over the checkpoints it did not see). Without a `checkpoint` state file, the training run's checkpoint
  of the highest step (`_highest_run_checkpoint`). None where the state file names none, or its files are gone."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    return _highest_run_checkpoint(directory)
  path = state.model_checkpoint_path
  return path if path and fileio.exists(path + ".index") else None


_RUN_CHECKPOINT = re.compile(r"ckpt-(\d+)\.index")  # the names a training run gives its checkpoints (run_checkpoint)
_WARNED = set()


def _highest_run_checkpoint(directory):
  """In a directory without a `checkpoint` state file (e.g. a copy that left it out), the training run's
  checkpoint (`ckpt-{step}`) of the highest step, with a warning; None if it holds none. TensorFlow takes such a
  directory for one without checkpoints: a run there started again from step 0 and wrote over them, and eval and
  prediction skipped the checks of the run's `run_flags.json`."""
  if not directory or not fileio.isdir(directory):
    return None
  steps = [int(m.group(1)) for m in map(_RUN_CHECKPOINT.fullmatch, fileio.listdir(directory)) if m]
  if not steps:
    return None
  path = os.path.join(directory, f"ckpt-{max(steps)}")
  if path not in _WARNED:
    _WARNED.add(path)
    logging.warning("%s has no `checkpoint` state file: its latest checkpoint is taken to be %s, the highest step.",
                    directory, path)
  return path


def resolve_checkpoint_path(ckpt_path):
  """A checkpoint prefix from a prefix, a directory (its latest checkpoint or its single `*.index`), or
  `<dir>/latest` (the original's convention). FileNotFoundError naming what is missing where there is none (for a
  directory of HuggingFace weights without config.json: that file)."""
  if ckpt_path.endswith("/latest"):
    ckpt_path = os.path.dirname(ckpt_path)
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
