"""Fine-tuning metrics (numpy) and the prediction files of `run_classifier.py --do_predict`.

Every metric takes an optional `weights: float [N]`, the original's `is_real_example` (1 = real example,
0 = eval padding that must not count); None weighs every example 1.
GLUE conventions: MRPC and QQP report F1 and accuracy, STS-B Pearson and Spearman, CoLA Matthews correlation.
"""

import dataclasses
import json
import os

import numpy as np

from xlnet_tf import fileio
from xlnet_tf.config import check_field_types, is_head_name
from xlnet_tf.training import inference


F1_TASKS = ("mrpc", "qqp")


MATTHEWS_TASKS = ("cola",)


REGRESSION_TASKS = ("sts-b",)


def _vectors(name_a, a, name_b, b, weights):
  """Checks two 1-D arrays of equal length (and weights), returns them as float64 numpy arrays."""
  a = np.asarray(a, dtype=np.float64)
  b = np.asarray(b, dtype=np.float64)
  if a.ndim != 1 or b.shape != a.shape:
    raise ValueError(f"{name_a} and {name_b} must be 1-D arrays of the same length. Received shapes {a.shape} "
                     f"and {b.shape}.")
  if weights is None:
    w = np.ones_like(a)
  else:
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != a.shape:
      raise ValueError(f"weights must have the shape of {name_a}, {a.shape}. Received shape {w.shape}.")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
      raise ValueError("weights (is_real_example) must be finite and non-negative.")
  if not np.any(w > 0):
    raise ValueError(f"A metric needs at least one example with weight > 0; received {a.shape[0]} examples, "
                     "none with weight > 0. Check the eval data (--data_dir, --eval_split).")
  return a, b, w


def accuracy(predictions, labels, weights=None):
  """Weighted fraction of predictions: int [N] equal to labels: int [N], in float32 as `tf.metrics.accuracy`
  reports it (the counts are exact in float32: batching changes nothing)."""
  p, l, w = _vectors("predictions", predictions, "labels", labels, weights)
  return inference.tf_metrics_mean(p == l, w)


def pearson_correlation(x, y, weights=None):
  """Weighted Pearson correlation of x: float [N] and y: float [N]; nan if either is constant."""
  x, y, w = _vectors("x", x, "y", y, weights)
  w = w / np.sum(w)
  dx = x - np.sum(w * x)
  dy = y - np.sum(w * y)
  var_x, var_y = np.sum(w * dx * dx), np.sum(w * dy * dy)
  if var_x <= 0 or var_y <= 0:
    return float("nan")
  return float(np.sum(w * dx * dy) / np.sqrt(var_x * var_y))


def rank_average(x):
  """1-based ranks of x: float [N], ties getting the average of the ranks they span (e.g. [1, 2.5, 2.5, 4])."""
  x = np.asarray(x, dtype=np.float64)
  order = np.argsort(x, kind="mergesort")
  sorted_x = x[order]
  # Start index of every run of equal values in sorted order.
  starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
  ends = np.r_[starts[1:], len(x)]
  run_rank = (starts + ends + 1) / 2.0  # Average of the 1-based ranks starts+1 .. ends.
  ranks = np.empty(len(x))
  ranks[order] = np.repeat(run_rank, ends - starts)
  return ranks


def spearman_correlation(x, y, weights=None):
  """Spearman correlation of x: float [N] and y: float [N]: Pearson of their average ranks.

  Only examples with weight > 0 are ranked; their weights then weigh the Pearson of the ranks.
  """
  x, y, w = _vectors("x", x, "y", y, weights)
  keep = w > 0
  return pearson_correlation(rank_average(x[keep]), rank_average(y[keep]), w[keep])


def _confusion(predictions, labels, weights):
  p, l, w = _vectors("predictions", predictions, "labels", labels, weights)
  classes = np.unique(np.concatenate([p, l]))
  p_idx, l_idx = np.searchsorted(classes, p), np.searchsorted(classes, l)
  c = np.zeros([len(classes), len(classes)])
  np.add.at(c, (l_idx, p_idx), w)
  return classes, c  # c[true, predicted]


def matthews_corrcoef(predictions, labels, weights=None):
  """Matthews correlation of class ids predictions: int [N] and labels: int [N] (multi-class form); 0 if undefined.

  Binary: (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)).
  """
  _, c = _confusion(predictions, labels, weights)
  s = c.sum()
  correct = np.trace(c)
  t, p = c.sum(axis=1), c.sum(axis=0)
  denom = (s * s - p @ p) * (s * s - t @ t)
  if denom <= 0:
    return 0.0
  return float((correct * s - t @ p) / np.sqrt(denom))


def f1_score(predictions, labels, weights=None):
  """Binary F1 of the positive class 1: 2TP / (2TP + FP + FN) for predictions, labels: int [N] in {0, 1}; 0 if none."""
  p, l, w = _vectors("predictions", predictions, "labels", labels, weights)
  if not (np.all(np.isin(p, (0, 1))) and np.all(np.isin(l, (0, 1)))):
    raise ValueError(f"F1 is binary: predictions and labels must be 0 or 1. Received label values "
                     f"{sorted(set(np.unique(l)) | set(np.unique(p)))}.")
  tp = np.sum(w * ((p == 1) & (l == 1)))
  fp = np.sum(w * ((p == 1) & (l == 0)))
  fn = np.sum(w * ((p == 0) & (l == 1)))
  denom = 2 * tp + fp + fn
  return float(2 * tp / denom) if denom > 0 else 0.0


def metric_names(task_name, is_regression=None, glue_metrics=True):
  """The metrics a task reports (keys of task_metrics without `eval_`; `loss` comes on top when given).
  glue_metrics False: the original's tasks report the original's metrics only (STS-B: no spearmanr)."""
  task = (task_name or "").lower()
  if is_regression is None:
    is_regression = task in REGRESSION_TASKS
  if is_regression:
    return ("pearsonr",) if not glue_metrics and task in REGRESSION_TASKS else ("pearsonr", "spearmanr")
  if task in F1_TASKS:
    return ("accuracy", "f1")
  if task in MATTHEWS_TASKS:
    return ("accuracy", "matthews_corr")
  return ("accuracy",)


def best_metric_key(is_regression):
  """The key the original ranks checkpoints by in `Best result`: eval_pearsonr or eval_accuracy."""
  return "eval_pearsonr" if is_regression else "eval_accuracy"


_METRIC_FNS = {"accuracy": accuracy, "f1": f1_score, "matthews_corr": matthews_corrcoef,
               "pearsonr": pearson_correlation, "spearmanr": spearman_correlation}


def task_metrics(task_name, logits, labels, weights=None, per_example_loss=None, is_regression=None, batch_size=None,
                 glue_metrics=True):
  """The eval metrics of a task, named as the original logs them (`eval_accuracy`, `eval_pearsonr`, ...); the
  original's (accuracy, loss) in float32 as its `tf.metrics`, the new ones (GLUE's) and Pearson in float64.

  Args:
    task_name: str, `--task_name`.
    logits: classification: float [N, n_class] (argmax taken) or int [N] class ids; regression: float [N] or
      [N, 1] predicted scores.
    labels: int [N] class ids, or float [N] scores for regression.
    weights: float [N], is_real_example (1 = counts, 0 = eval padding). None: all count.
    per_example_loss: float [N] or None; given, `eval_loss` is its weighted mean (`tf.metrics.mean`'s float32).
    is_regression: bool or None (None: True only for sts-b).
    batch_size: the eval batch size the N examples came in (the order of `eval_loss`'s float32 sums).
    glue_metrics: False: the original's tasks get the original's metrics only (`metric_names`).

  Returns:
    dict of floats, e.g. {"eval_accuracy": .., "eval_f1": .., "eval_loss": ..}.
  """
  names = metric_names(task_name, is_regression, glue_metrics)
  logits = np.asarray(logits)
  if "pearsonr" in names:
    if logits.ndim == 2 and logits.shape[1] == 1:
      logits = logits[:, 0]
    predictions = logits
  elif logits.ndim == 2:
    predictions = np.argmax(logits, axis=-1)
  else:
    predictions = logits
  result = {f"eval_{name}": _METRIC_FNS[name](predictions, labels, weights) for name in names}
  if per_example_loss is not None:
    result["eval_loss"] = inference.tf_metrics_mean(per_example_loss, weights, batch_size)
  return result


def predictions_from_logits(logits, label_list, predict_threshold=0.0):
  """The original's decision rule for `{task}.tsv`.

  1 logit: the value itself; 2 logits: label_list[1] if logit1 - logit0 > predict_threshold else label_list[0];
  more: label_list[argmax].

  Args:
    logits: float [N, n] or [N] (regression).
    label_list: list of labels, or None for regression.
    predict_threshold: float, `--predict_threshold`.
  """
  logits = np.asarray(logits, dtype=np.float32)
  if logits.ndim == 1:
    logits = logits[:, None]
  if logits.ndim != 2 or logits.shape[1] == 0:
    raise ValueError(f"logits must have shape [N, n_class] or [N]. Received shape {logits.shape}.")
  n = logits.shape[1]
  if n == 1:
    return [float(v) for v in logits[:, 0]]
  if label_list is None or len(label_list) != n:
    raise ValueError(f"{n} logits per example need a label list of {n} labels. Received: {label_list!r}. "
                     "Check --task_name and --is_regression.")
  if n == 2:
    return [label_list[1] if float(b) - float(a) > predict_threshold else label_list[0] for a, b in logits]
  return [label_list[int(i)] for i in np.argmax(logits, axis=-1)]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PredictionFiles:
  """The prediction files of `--do_predict`: where they go, what they are named and how logits become labels.

  Attributes:
    predict_dir: str, `--predict_dir` (created if missing).
    task_name: str, `--task_name` (lower-cased in the file names, as the original).
    label_list: list of labels, or None for regression.
    predict_threshold: float, `--predict_threshold` for 2-class tasks.
  """
  predict_dir: str
  task_name: str
  label_list: list = None
  predict_threshold: float = 0.0

  def __post_init__(self):
    if not self.predict_dir:
      raise ValueError("Prediction needs an output directory. Set --predict_dir.")
    check_field_types(self)  # predict_threshold "0.5" failed in the comparison (sweep 35)
    if isinstance(self.label_list, (str, bytes)):  # "01": two labels
      raise TypeError(f"PredictionFiles.label_list must be a list of labels or None. Received: {self.label_list!r}.")
    if self.label_list is not None:  # a numpy array of them: its list
      object.__setattr__(self, "label_list", list(self.label_list))
    if not is_head_name(self.task_name):  # "../escape" wrote beside --predict_dir (sweep 35)
      raise ValueError(f"The task name {self.task_name!r}, which names the prediction files, may hold letters, "
                       "digits, '_', '.' and '-' only.")


def prediction_file_names(task_name):
  """The names of `write_predictions`' two files: `{task}.tsv`, `{task}.logits.json` (lower-cased, as the original)."""
  return f"{task_name.lower()}.tsv", f"{task_name.lower()}.logits.json"


def write_predictions(files, logits, is_real_example=None):
  """Writes `{predict_dir}/{task}.tsv` (`index\\tprediction`, GLUE submission format) and `{task}.logits.json`,
  together (`fileio.atomic_files`): a failed or stopped write leaves both files of the run before.

  Args:
    files: `PredictionFiles`, the directory, task name, label list and threshold.
    logits: float [N, n_class] or [N] (regression), one row per predicted example, in order.
    is_real_example: int [N] or None. Rows with 0 (eval padding) are left out; None keeps every row.

  Returns:
    (tsv_path, json_path).
  """
  logits = np.asarray(logits, dtype=np.float32)
  if logits.ndim == 1:
    logits = logits[:, None]
  if is_real_example is not None:
    real = np.asarray(is_real_example).reshape(-1)
    if real.shape[0] != logits.shape[0]:
      raise ValueError(f"is_real_example has {real.shape[0]} entries but there are {logits.shape[0]} logit rows.")
    logits = logits[real != 0]
  finite = np.isfinite(logits).all(axis=1)
  if not finite.all():  # every row class 0, and a logits file no json reader takes
    bad = np.flatnonzero(~finite)
    raise FloatingPointError(f"The model's logits are not finite (NaN or inf) for {bad.size} of {logits.shape[0]} "
                             f"examples (the first: row {bad[0]}): its weights hold NaN or inf (a damaged checkpoint, "
                             "or one of a diverged run). Nothing was written; predict with another checkpoint.")
  labels_out = predictions_from_logits(logits, files.label_list, files.predict_threshold)
  tsv_path, json_path = (os.path.join(files.predict_dir, name) for name in prediction_file_names(files.task_name))
  lines = ["index\tprediction\n"] + [f"{i}\t{label}\n" for i, label in enumerate(labels_out)]
  for path, head in ((tsv_path, lines[0]), (json_path, "[")):  # a task "train" replaced a user's train.tsv (sweep 35)
    inference.check_prediction_file(path, head)
  with fileio.atomic_files() as out:  # both files of this run, or both of the run before
    out.write(tsv_path, "".join(lines))
    out.write(json_path, json.dumps([[float(v) for v in row] for row in logits], indent=4))
  return tsv_path, json_path
