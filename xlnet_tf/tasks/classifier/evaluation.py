"""Eval and predict of a fine-tuned classifier, as the original `run_classifier.py`: every checkpoint of
model_dir (or the last) on the eval records, the metrics weighted by `is_real_example`, the `Eval result` and
`Best result` lines; predict writes `{task}.tsv` (GLUE submission format) and `{task}.logits.json`.
"""

import math
import re

import numpy as np
from absl import logging

from xlnet_tf import checkpoint
from xlnet_tf.data import records
from xlnet_tf.training import inference
from xlnet_tf.training.inference import batches_of, each_remaining, tf_metrics_mean
from xlnet_tf.tasks.classifier import features as classifier_data
from xlnet_tf.tasks.classifier import metrics
from xlnet_tf.tasks.classifier.task import forward


class Inference(inference.Inference):
  """A classifier for eval and predict (`training.inference.Inference`).

  Args:
    model: an XLNetModel built for inference (is_training=False) with the head `scope`.
    scope: the head scope.
    jit_compile: XLA-compile the forward pass (`--jit_compile`).
  """

  def __init__(self, model, scope, jit_compile=False):
    super().__init__(model, lambda features: dict(zip(("logits", "loss"), forward(model, features, scope,
                                                                                    training=False))),
                     ("label_ids", "is_real_example"), jit_compile)
    self.scope = scope
    self.is_regression = scope.startswith("regression_")

  def check_head(self, report, ckpt_path):
    if report.get("other_classes"):  # an HF model's head, not loaded: it was "no classification head" (sweep 21, C6)
      held, ours = report["other_classes"]
      has, task = (("1 output", "a regression: pass --is_regression=True (a csv or tsv task)") if held == 1 else
                   (f"{held} classes", f"another task. Pass that task as --task_name (a csv or tsv task with its "
                                       f"{held} --labels)"))
      raise ValueError(f"Checkpoint {ckpt_path}'s classification head has {has}, this task's {ours} classes: it was "
                       f"fine-tuned for {task}, or another checkpoint.")
    missing = [n for n in report["kept_initial"] if n.startswith(f"model/{self.scope}/") or "sequnece_summary" in n]
    if missing:
      heads = sorted({n.split("/")[1] for n in report["unused"] if re.match(r"model/(classification|regression)_", n)})
      names = ", ".join(h.split("_", 1)[1] for h in heads)  # the flag takes the name after the prefix
      held = (f"it holds the classification heads {', '.join(heads)}. Use a fine-tuned checkpoint, or pass "
              f"the head's name as --cls_scope (or --task_name): {names}." if heads else
              "it holds no classification head (a pretrained checkpoint, or another task's). Use a checkpoint "
              "run_classifier.py fine-tuned.")
      raise ValueError(f"Checkpoint {ckpt_path} has no fine-tuned {missing[0].rsplit('/', 2)[0]} (it lacks "
                       f"{missing[0]}); {held}")

  def run(self, dataset):
    """Runs the model over a dataset of feature batches (`classifier_data.classifier_dataset`).

    Returns:
      dict of numpy arrays over all examples: logits [N, n_class] or [N], loss [N], label_ids [N],
      is_real_example [N].
    """
    out = super().run(dataset)
    return {k: out.get(k, np.zeros([0])) for k in ("logits", "loss", "label_ids", "is_real_example")}


def _format_result(title, result):
  return inference.result_line(title, sorted(result.items()))


def evaluate_checkpoints(inference, checkpoints, eval_file, max_seq_length, eval_batch_size, task_name,
                         log_fn=print, model_dir=None, glue_metrics=False):
  """Evaluates each checkpoint on the eval records, as the original's eval mode.

  Args:
    inference: an `Inference` (its head scope `regression_*` means regression metrics).
    checkpoints: [(step, prefix)], e.g. `list_checkpoints(model_dir)` (or its last entry).
    eval_file: the eval tfrecord (padded with is_real_example=0 examples to a multiple of the batch size).
    max_seq_length, eval_batch_size: ints.
    task_name: str, selects the metrics (`metrics.task_metrics`).
    log_fn: where the `Eval result` / `Best result` lines go.
    model_dir: str, where `checkpoints` were listed (named when there are none).
    glue_metrics: also GLUE's metrics the original did not report for its tasks (STS-B: eval_spearmanr).

  Returns:
    (results, best): the list of per-checkpoint dicts (eval_* metrics, eval_loss, loss, global_step: the
    checkpoint's global_step variable, step: the one in its name, path),
    and the best of them by eval_pearsonr (regression) or eval_accuracy.
  """
  is_regression = inference.is_regression
  if not checkpoints:
    raise FileNotFoundError(checkpoint.no_checkpoint_line(model_dir, (
        "No checkpoint to evaluate: no complete checkpoint (*.index and its .data-* files) in --model_dir "
        f"{model_dir}. Train first (--do_train=True) or point --model_dir at the fine-tuning output.")))
  dataset = classifier_data.classifier_dataset(eval_file, max_seq_length, is_regression,
                                               records.ReadConfig(batch_size=eval_batch_size,
                                                                  n_token=inference.n_token))

  def evaluate(step, path):
    inference.load(path)
    out = inference.run_records(dataset, [eval_file])
    result = metrics.task_metrics(task_name, out["logits"], out["label_ids"], weights=out["is_real_example"],
                                  per_example_loss=out["loss"], is_regression=is_regression, batch_size=eval_batch_size,
                                  glue_metrics=glue_metrics)
    # As the Estimator's `loss`: the mean of the batches' mean losses (padding examples included), in float32.
    batch_loss = [np.mean(b, dtype=np.float32) for b in batches_of(np.asarray(out["loss"], np.float32),
                                                                   eval_batch_size)]
    result["loss"] = tf_metrics_mean(batch_loss, batch_size=1)
    # As the Estimator's: the checkpoint's global_step variable (the step in its name goes to `step`).
    result["global_step"] = checkpoint.recorded_step(path, default=step)
    result["step"] = step
    result["path"] = path
    log_fn("=" * 80)
    log_fn(_format_result("Eval result", result))
    return result

  results = each_remaining(checkpoints, evaluate, log_fn)
  key = metrics.best_metric_key(is_regression)
  rank = lambda r: -math.inf if r[key] is None or math.isnan(r[key]) else r[key]
  best = sorted(results, key=rank, reverse=True)[0]
  log_fn("=" * 80)
  log_fn(_format_result("Best result", best))
  return results, best


def predict(inference, ckpt_path, predict_file, max_seq_length, predict_batch_size, files, keep_padding=False):
  """Writes the prediction files (`files`: `metrics.PredictionFiles`, `{predict_dir}/{task}.tsv` and
  `{task}.logits.json`) for the records of `predict_file`.

  Padding examples (is_real_example = 0; the predict records hold them after --do_eval, as the original's) are
  left out, unless keep_padding (`--predict_eval_padding`, the original's files: a row for every record).

  Returns:
    (tsv_path, json_path).
  """
  inference.load(ckpt_path)
  dataset = classifier_data.classifier_dataset(predict_file, max_seq_length, inference.is_regression,
                                               records.ReadConfig(batch_size=predict_batch_size,
                                                                  n_token=inference.n_token))
  out = inference.run_records(dataset, [predict_file], "--predict_batch_size")
  logging.info("Predicted %d examples with %s.", int(np.sum(out["is_real_example"])), ckpt_path)
  real = None if keep_padding else out["is_real_example"]
  return metrics.write_predictions(files, out["logits"], is_real_example=real)
