"""Eval and predict: loading a fine-tuned checkpoint and running a model over evaluation batches, the one runner
every task's eval and predict share (a task says what its step returns and how to tell a fine-tuned head)."""

import math

import numpy as np
import tensorflow as tf

from xlnet_tf import checkpoint
from xlnet_tf import fileio
from xlnet_tf.data import read_errors
from xlnet_tf.training import out_of_memory, preemption


class UnusableCheckpointError(ValueError):
  """A checkpoint that reads whole but that this model cannot use (NaN weights, a head of another shape or none)."""


class Inference:
  """A model for eval and predict: loads fine-tuned checkpoints and runs batches through one traced step.

  A task subclasses it with `check_head` (eval and predict need a fine-tuned head, not a fresh one) and, where it
  post-processes the outputs, `run`.

  Args:
    model: the task's XLNetModel with its head, built for inference (is_training=False).
    step: features -> dict of tensors with the batch first (the head's outputs); traced once.
    feature_keys: features passed through beside the outputs (e.g. the labels).
    jit_compile: XLA-compile the step (`--jit_compile`).
    reduce_retracing: trace shapes that vary (e.g. a last, smaller batch) once, with an unknown dimension.
  """

  def __init__(self, model, step, feature_keys=(), jit_compile=False, reduce_retracing=False):
    self.model = model
    self.feature_keys = tuple(feature_keys)
    self._step = tf.function(step, autograph=False, reduce_retracing=reduce_retracing or None,
                             jit_compile=jit_compile or None)

  def load(self, ckpt_path):
    """Loads `ckpt_path` into the model (any format `checkpoint.load_weights` reads) and checks its head.

    Returns:
      `checkpoint.load_weights`'s report.
    """
    try:
      report = checkpoint.load_weights(self.model, ckpt_path)
      self.check_head(report, ckpt_path)
    except checkpoint.DamagedCheckpointError:
      raise
    except ValueError as e:
      raise UnusableCheckpointError(str(e)) from None
    return report

  def check_head(self, report, ckpt_path):
    """Raises ValueError (naming ckpt_path and what to pass) if the head did not come from the checkpoint."""
    del report, ckpt_path

  @property
  def n_token(self):
    """The model's vocabulary size, which the records read for it are checked against (`records.ReadConfig`)."""
    return self.model.xlnet_config.n_token

  def run(self, dataset):
    """The step's outputs and the passed-through features over a dataset of feature batches (`run_batches`)."""
    return run_batches(self._step, dataset, self.feature_keys)

  def run_records(self, dataset, files, batch_flag="--eval_batch_size"):
    """`run` over a dataset read from the record `files`: a record that cannot be read, or holds a token id
    outside the vocabulary, ends it with a ValueError of one line naming the file and record
    (`read_errors.records_named`); a batch the device cannot hold, with a MemoryError of one line naming
    `batch_flag` (the flag of the dataset's batch size) and the other flags that make it fit
    (`out_of_memory.reported`)."""
    run_config = self.model.run_config
    half = "" if run_config.use_bfloat16 or run_config.use_fp16 else f", or {out_of_memory.HALF_PRECISION}"
    fixes = f"The batch needs more memory than the device has: pass a smaller {batch_flag} or --max_seq_length{half}"
    with read_errors.records_named(files), out_of_memory.reported(f"running the model over {files[0]}", fixes):
      return self.run(dataset)


def run_batches(step, dataset, feature_keys=()):
  """Runs `step` over every batch of `dataset` and concatenates what comes back, in order.

  Args:
    step: features -> dict of tensors or arrays, each with the batch as its first dimension (e.g. a traced forward
      pass).
    dataset: an iterable of feature dicts (a batched `tf.data.Dataset`).
    feature_keys: features to pass through beside the outputs (e.g. the labels).

  Returns:
    dict name -> numpy array over all examples, the step's outputs and the passed-through features; an empty dict
    when the dataset is empty.
  """
  out = {}
  for features in dataset:
    preemption.check_stop()  # a Ctrl-C that TensorFlow's code lost in the batch before
    batch = dict(step(features))
    batch.update((k, features[k]) for k in feature_keys)
    for k, v in batch.items():
      out.setdefault(k, []).append(np.asarray(v))
  return {k: np.concatenate(v) for k, v in out.items()}


def batches_of(values, batch_size=None):
  """`values` (an array, batch first) cut into the batches an eval reader gives: `batch_size` each, the last one
  smaller where they do not divide; one batch when batch_size is None."""
  return np.split(values, range(batch_size, len(values), batch_size)) if batch_size else [values]


def tf_metrics_mean(values, weights=None, batch_size=None):
  """`tf.metrics.mean(values, weights)` updated once per batch of `batch_size` (`batches_of`), in its float32, as
  the original's eval reports its metrics: per batch the sums of values * weights and of weights, accumulated, then
  divided (1/3 is 0.3333333432674408, as the original logs it). weights None: all 1. NaN when they sum to 0."""
  weights = np.ones(len(values), np.float32) if weights is None else np.asarray(weights, np.float32)
  values = np.asarray(values, np.float32) * weights
  total, count = np.float32(0), np.float32(0)
  for v, w in zip(batches_of(values, batch_size), batches_of(weights, batch_size)):
    total += np.sum(v, dtype=np.float32)
    count += np.sum(w, dtype=np.float32)
  return float(total / count) if count else math.nan


def result_line(title, items):
  """The original's result line, `{title} | key value | ...`, of `items` ((key, value) pairs), less a `step` or
  `global_step` of None: a checkpoint that records none, an HF model directory (the line read `step None`)."""
  return f"{title} | " + "".join(f"{key} {value} | " for key, value in items
                                 if not (value is None and key in ("step", "global_step")))


def each_remaining(checkpoints, work, log_fn):
  """[work(step, path)] for the listed `checkpoints` ([(step, path)]), skipping with a line each one
  deleted since it was listed (a training run in the same --model_dir keeps only its last --max_save, and an
  evaluation beside it stopped at the first one gone), each one found damaged (a copy cut short: the evaluation
  stopped there, the later ones never read; sweep 27, U6) and each one `Inference.load` finds unusable.
  FileNotFoundError if every one is gone; the damage of the last where none could be read."""
  done, damaged = [], None
  for step, path in checkpoints:
    try:
      done.append(work(step, path))
    except (FileNotFoundError, checkpoint.DamagedCheckpointError, UnusableCheckpointError,
            tf.errors.NotFoundError) as e:
      if not tf.io.gfile.exists(path + ".index") and not tf.io.gfile.exists(path):  # (a SavedModel: its error)
        log_fn(f"Skipped {path}: it was deleted after its directory was listed (a training run there keeps its "
               "last --max_save checkpoints).")
      elif isinstance(e, checkpoint.DamagedCheckpointError):
        damaged = e
        log_fn(f"Skipped {path}: it is incomplete or damaged ({e.reason}). Copy it again, or delete its files "
               f"({path}.*).")
      elif isinstance(e, UnusableCheckpointError):  # it ended the evaluation of the others (sweep 34, S3)
        damaged = e
        log_fn(f"Skipped {path}: {str(e).removeprefix(f'{path}: ')}")
      else:
        raise
  if checkpoints and not done and damaged:
    raise damaged
  if checkpoints and not done:
    listed = ", ".join(p for _, p in checkpoints)
    raise FileNotFoundError(f"Every checkpoint listed was deleted before it was read ({listed}). Rerun once a "
                            "training run in that directory has saved, or raise its --max_save.")
  return done


def check_prediction_file(path, head):
  """ValueError where the file `path` holds something else than a prediction file the tools write there: neither
  empty nor starting with the text `head` (a user's file given or named as an output was replaced: sweeps 35, 36).
  A missing file or a directory passes (the write says what it must)."""
  if not fileio.exists(path) or fileio.isdir(path):
    return
  with fileio.open_file(path, "rb") as f:
    start = f.read(len(head.encode("utf-8")))
  if start and start != head.encode("utf-8"):
    raise ValueError(f"{path} is not a prediction file of these tools (it does not start with {head.strip()!r}): "
                     "left as it is. Move it away, or pass another --predict_dir.")
