"""Classification / regression fine-tuning on the shared training loop, and the eval and predict modes.

As the original `run_classifier.py` + `function_builder.get_{classification,regression}_loss`:
- the model is `XLNetModel` on `[L, B]` inputs (no memory, no permutation), pooled by the sequence summary
  (`sequnece_summary/summary`), with one head `model/classification_{scope}/logit` (n_class logits, per-example loss
  `-sum(one_hot * log_softmax)`) or `model/regression_{task}/logit` (one value, loss `(logit - label)^2`);
- the training loss is the mean over the global batch (`ClassifierTask` for `training.Trainer`);
- eval runs every checkpoint of model_dir (or the last), weights the metrics by `is_real_example` and logs
  `Eval result | key value | ...` per checkpoint and `Best result | ...` (by eval_accuracy or eval_pearsonr);
- predict writes `{task}.tsv` (GLUE submission format) and `{task}.logits.json`.
"""

import math
import os
import re

import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf import classifier_data
from xlnet_tf import heads as heads_lib
from xlnet_tf import metrics
from xlnet_tf import training
from xlnet_tf.transformer_xl import XLNetModel

SUMMARY_TYPES = ("last", "first", "mean", "attn")
_STEP_SUFFIX = re.compile(r"-(\d+)$")


def head_scope(task_name, cls_scope=None, is_regression=False):
  """The head's variable scope, as the original: `regression_{task}` (cls_scope is not used for regression, as
  in the original), else `classification_{cls_scope or task}` (task lower-cased)."""
  task = task_name.lower()
  if is_regression:
    return f"regression_{task}"
  return f"classification_{cls_scope or task}"


def build_model(xlnet_config, run_config, scope, n_class=None, summary_type="last", use_summ_proj=True):
  """An XLNetModel with the sequence summary and one head.

  Args:
    xlnet_config: XLNetConfig.
    run_config: RunConfig (is_training=True for training: dropout on; False for eval, predict and serving).
    scope: str, `head_scope(...)`: `classification_{name}` or `regression_{name}`.
    n_class: int, number of classes (classification only).
    summary_type: "last" (the CLS token in the left-padded layout), "first", "mean" or "attn".
    use_summ_proj: bool, the tanh projection on the pooled vector.
  """
  if summary_type not in SUMMARY_TYPES:
    raise ValueError(f"--summary_type must be one of {SUMMARY_TYPES}. Received: {summary_type!r}.")
  if scope.startswith("regression_"):
    return XLNetModel(xlnet_config, run_config, summary_type=summary_type, use_summ_proj=use_summ_proj,
                      reg_heads=[scope[len("regression_"):]])
  if not scope.startswith("classification_"):
    raise ValueError(f"A head scope starts with 'classification_' or 'regression_'. Received: {scope!r}.")
  if not n_class or n_class < 2:
    raise ValueError(f"A classification head needs at least 2 classes. Received: n_class={n_class!r}.")
  return XLNetModel(xlnet_config, run_config, summary_type=summary_type, use_summ_proj=use_summ_proj,
                    cls_heads={scope[len("classification_"):]: n_class})


def forward(model, features, scope, training=False):
  """Logits and the per-example loss of a batch of classifier features.

  Args:
    model: an XLNetModel with the head `scope` (see `build_model`).
    features: dict of batch-major tensors (see `classifier_data.classifier_dataset`): input_ids int [B, L];
      segment_ids int [B, L] (A 0, B 1, CLS 2, padding 4); input_mask float [B, L] (1 = padding, 0 = real);
      label_ids int [B] (class ids) or float [B] (regression).
    scope: str, the head scope.
    training: bool, dropout on.

  Returns:
    (logits, per_example_loss): logits float32 [B, n_class] (classification) or [B] (regression); loss float32 [B].
  """
  input_ids = tf.transpose(features["input_ids"], [1, 0])
  seg_ids = tf.transpose(features["segment_ids"], [1, 0])
  input_mask = tf.transpose(tf.cast(features["input_mask"], tf.float32), [1, 0])
  output, _ = model(input_ids, seg_ids=seg_ids, input_mask=input_mask, training=training)
  pooled = model.get_pooled_out(output, input_mask, training=training)
  logits = tf.cast(model.get_head_logits(pooled, scope), tf.float32)
  if scope.startswith("regression_"):
    loss = heads_lib.regression_loss(logits, features["label_ids"])
  else:
    loss = heads_lib.classification_loss(logits, features["label_ids"])
  return logits, loss


class ClassifierTask:
  """The fine-tuning task for `training.Trainer`: the mean per-example loss over the global batch."""

  def __init__(self, scope):
    self.scope = scope

  @tf.autograph.experimental.do_not_convert  # plain Python control flow only: tracing without autograph is faster
  def __call__(self, model, features, mems, training):
    _, loss = forward(model, features, self.scope, training=training)
    return tf.reduce_sum(loss), tf.cast(tf.shape(loss)[0], tf.float32), None


def classifier_dataset_fn(train_file, max_seq_length, per_replica_batch_size, is_regression, shuffle_buffer,
                          seed=None):
  """A `dataset_fn(input_context, start_step)` for `Trainer.train` over the training records.

  With a seed, the shuffled order is reproducible and a resumed run skips the `start_step` batches it already
  consumed, so it sees what an uninterrupted run would have seen.
  """
  def dataset_fn(input_context, start_step):
    d = classifier_data.classifier_dataset(train_file, max_seq_length, is_training=True, drop_remainder=True,
                                           batch_size=per_replica_batch_size, is_regression=is_regression,
                                           shuffle_buffer=shuffle_buffer, seed=seed, input_context=input_context)
    if seed is not None and start_step:
      d = d.skip(start_step)
    return d
  return dataset_fn


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints.


def checkpoint_step(path):
  """The step of a checkpoint: its `-N` suffix, else its `global_step` (original) or optimizer step (ours); None
  if it records none."""
  match = _STEP_SUFFIX.search(path)
  if match:
    return int(match.group(1))
  reader = tf.train.load_checkpoint(path)
  for key in ("global_step", "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"):
    if reader.has_tensor(key):
      return int(reader.get_tensor(key))
  return None


def list_checkpoints(model_dir):
  """[(step, prefix)] of every checkpoint (`*.index`) in model_dir, sorted by step (None first).

  Unlike the original (which parses `int(name.split("-")[-1])` and crashes on e.g. `model.ckpt`), a checkpoint
  without a step suffix is listed with the step it records, if any.
  """
  if not model_dir or not tf.io.gfile.isdir(model_dir):
    raise FileNotFoundError(f"--model_dir {model_dir!r} is not a directory holding checkpoints. Train first "
                            "(--do_train=True) or point --model_dir at the fine-tuning output.")
  entries = []
  for name in tf.io.gfile.listdir(model_dir):
    if not name.endswith(".index") or ".tmp-" in name:
      continue
    prefix = os.path.join(model_dir, name[:-len(".index")])
    entries.append((checkpoint_step(prefix), prefix))
  return sorted(entries, key=lambda e: (-1 if e[0] is None else e[0], e[1]))


def load_for_inference(model, ckpt_path, scope):
  """Loads `ckpt_path` into `model` and checks that the head `scope` came from it (eval and predict need a
  fine-tuned head, not a fresh one)."""
  report = training.load_weights(model, ckpt_path)
  missing = [n for n in report["kept_initial"] if n.startswith(f"model/{scope}/") or "sequnece_summary" in n]
  if missing:
    heads = sorted({n.split("/")[1] for n in report["unused"] if re.match(r"model/(classification|regression)_", n)})
    raise ValueError(f"Checkpoint {ckpt_path} has no fine-tuned {missing[0].rsplit('/', 2)[0]} (it lacks "
                     f"{missing[0]}); it holds the heads {heads or 'none'}. Evaluate a fine-tuned checkpoint, or "
                     "set --cls_scope / --task_name to the head it holds.")
  return report


# ---------------------------------------------------------------------------------------------------------------
# Eval and predict.


class Inference:
  """A model for eval and predict: loads checkpoints and runs batches through one traced forward pass.

  Args:
    model: an XLNetModel built for inference (is_training=False) with the head `scope`.
    scope: the head scope.
  """

  def __init__(self, model, scope):
    self.model = model
    self.scope = scope
    self.is_regression = scope.startswith("regression_")
    self._step = tf.function(lambda features: forward(model, features, scope, training=False), autograph=False)

  def load(self, ckpt_path):
    """Loads a fine-tuned checkpoint (see `load_for_inference`)."""
    return load_for_inference(self.model, ckpt_path, self.scope)

  def run(self, dataset):
    """Runs the model over a dataset of feature batches (`classifier_data.classifier_dataset`).

    Returns:
      dict of numpy arrays over all examples: logits [N, n_class] or [N], loss [N], label_ids [N],
      is_real_example [N].
    """
    out = {"logits": [], "loss": [], "label_ids": [], "is_real_example": []}
    for features in dataset:
      logits, loss = self._step(features)
      out["logits"].append(logits.numpy())
      out["loss"].append(loss.numpy())
      out["label_ids"].append(features["label_ids"].numpy())
      out["is_real_example"].append(features["is_real_example"].numpy())
    return {k: np.concatenate(v) if v else np.zeros([0]) for k, v in out.items()}


def _format_result(title, result):
  return f"{title} | " + "".join(f"{key} {value} | " for key, value in sorted(result.items()))


def evaluate_checkpoints(inference, checkpoints, eval_file, max_seq_length, eval_batch_size, task_name,
                         log_fn=print):
  """Evaluates each checkpoint on the eval records, as the original's eval mode.

  Args:
    inference: an `Inference` (its head scope `regression_*` means regression metrics).
    checkpoints: [(step, prefix)], e.g. `list_checkpoints(model_dir)` (or its last entry).
    eval_file: the eval tfrecord (padded with is_real_example=0 examples to a multiple of the batch size).
    max_seq_length, eval_batch_size: ints.
    task_name: str, selects the metrics (`metrics.task_metrics`).
    log_fn: where the `Eval result` / `Best result` lines go.

  Returns:
    (results, best): the list of per-checkpoint dicts (eval_* metrics, eval_loss, loss, global_step, step, path),
    and the best of them by eval_pearsonr (regression) or eval_accuracy.
  """
  is_regression = inference.is_regression
  if not checkpoints:
    raise FileNotFoundError("No checkpoint to evaluate (no *.index file in --model_dir). Train first "
                            "(--do_train=True) or point --model_dir at the fine-tuning output.")
  dataset = classifier_data.classifier_dataset(eval_file, max_seq_length, is_training=False, drop_remainder=False,
                                               batch_size=eval_batch_size, is_regression=is_regression)
  results = []
  for step, path in checkpoints:
    inference.load(path)
    out = inference.run(dataset)
    result = metrics.task_metrics(task_name, out["logits"], out["label_ids"], weights=out["is_real_example"],
                                  per_example_loss=out["loss"], is_regression=is_regression)
    result["loss"] = float(np.mean(out["loss"]))  # As the Estimator's `loss`: padding examples included.
    result["global_step"] = step
    result["step"] = step
    result["path"] = path
    results.append(result)
    log_fn("=" * 80)
    log_fn(_format_result("Eval result", result))
  key = metrics.best_metric_key(is_regression)
  rank = lambda r: -math.inf if r[key] is None or math.isnan(r[key]) else r[key]
  best = sorted(results, key=rank, reverse=True)[0]
  log_fn("=" * 80)
  log_fn(_format_result("Best result", best))
  return results, best


def predict(inference, ckpt_path, predict_file, max_seq_length, predict_batch_size, task_name, label_list,
            predict_dir, predict_threshold=0.0):
  """Writes `{predict_dir}/{task}.tsv` and `{task}.logits.json` for the records of `predict_file`.

  Padding examples (is_real_example = 0) are left out (the original predicted them too when --do_eval had
  padded the shared example list).

  Returns:
    (tsv_path, json_path).
  """
  inference.load(ckpt_path)
  dataset = classifier_data.classifier_dataset(predict_file, max_seq_length, is_training=False,
                                               drop_remainder=False, batch_size=predict_batch_size,
                                               is_regression=inference.is_regression)
  out = inference.run(dataset)
  logging.info("Predicted %d examples with %s.", int(np.sum(out["is_real_example"])), ckpt_path)
  return metrics.write_predictions(predict_dir, task_name, out["logits"], label_list, predict_threshold,
                                   is_real_example=out["is_real_example"])
