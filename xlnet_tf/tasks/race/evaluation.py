"""Eval and predict of a fine-tuned RACE model, as the original `run_race.py` evaluates (and a predict mode it lacks).

Eval runs each checkpoint over the eval records (padded with fake questions to a multiple of the batch size) and
reports what the original's Estimator reports, logged as its `Eval | key value | ...` line:

    eval_accuracy  argmax(logits) == label, weighted by is_real_example   (tf.metrics.accuracy)
    eval_loss      per-question loss, weighted by is_real_example           (tf.metrics.mean)
    loss           the mean of the batches' total_loss (padding included)   (the Estimator's `loss`)
    global_step    the checkpoint's step

Predict writes, per real question of the split, the chosen option and the softmax probabilities of the four.
"""

import math

import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf import checkpoint
from xlnet_tf import fileio
from xlnet_tf.data import records as records_lib
from xlnet_tf.training import inference
from xlnet_tf.training.inference import check_prediction_file, each_remaining
from xlnet_tf.tasks.race import data
from xlnet_tf.tasks.race import records
from xlnet_tf.tasks.race.task import HEAD_NAME, forward


class Inference(inference.Inference):
  """A RACE model for eval and predict (`training.inference.Inference`).

  Args:
    model: an XLNetModel from `task.build_model` built for inference (is_training=False).
    jit_compile: XLA-compile the forward pass (`--jit_compile`).
  """

  def __init__(self, model, jit_compile=False):
    super().__init__(model, lambda features: dict(zip(("logits", "loss"), forward(model, features, training=False))),
                     ("label_ids", "is_real_example"), jit_compile)

  def check_head(self, report, ckpt_path):
    missing = [n for n in report["kept_initial"] if n.startswith((f"{HEAD_NAME}/", "model/sequnece_summary/"))]
    if missing:
      raise ValueError(f"Checkpoint {ckpt_path} has no fine-tuned RACE head (it lacks {', '.join(missing)}). "
                       "Use a checkpoint written by run_race.py or fine-tuned by the original run_race.py.")

  def run(self, dataset):
    """Runs the model over a dataset of feature batches (`records.race_dataset`).

    Returns:
      dict of numpy arrays over all questions: logits float32 [N, 4], loss float32 [N], label_ids int32 [N],
      is_real_example int32 [N], batch_loss float32 [number of batches] (each batch's mean loss).
    """
    def step(features):
      out = self._step(features)
      loss = out["loss"].numpy()
      return {"logits": out["logits"], "loss": loss, "batch_loss": np.mean(loss, keepdims=True)}

    out = inference.run_batches(step, dataset, self.feature_keys)
    return {k: out.get(k, np.zeros([0])) for k in ("logits", "loss", "label_ids", "is_real_example", "batch_loss")}


def eval_metrics(logits, loss, label_ids, is_real_example, batch_loss):
  """The original's eval numbers (see the module docstring) from `Inference.run`'s arrays, in float32 as its
  `tf.metrics` compute them (1/3 is 0.3333333432674408, as the original reports and logs it).

  Returns:
    dict: eval_accuracy, eval_loss, loss (floats; NaN when there is no real question).
  """
  batch_size = max(len(loss) // max(len(batch_loss), 1), 1)  # the eval records are padded to full batches
  correct = np.argmax(logits, axis=-1) == np.asarray(label_ids)
  return {
      "eval_accuracy": inference.tf_metrics_mean(correct, is_real_example, batch_size),
      "eval_loss": inference.tf_metrics_mean(loss, is_real_example, batch_size),
      "loss": inference.tf_metrics_mean(batch_loss, batch_size=1),
  }


def format_result(title, result, keys=("eval_accuracy", "eval_loss", "loss", "global_step")):
  """`{title} | key value | ...`, the original's log line (no step where there is none)."""
  return inference.result_line(title, ((key, result[key]) for key in keys))


def eval_dataset(eval_file, max_seq_length, eval_batch_size, n_token=None):
  """The eval records in order, in batches of eval_batch_size (the original's input_fn drops a remainder), their
  ids checked against n_token (None: not checked; `records.ReadConfig`)."""
  return records.race_dataset(eval_file, max_seq_length,
                              records_lib.ReadConfig(batch_size=eval_batch_size, drop_remainder=True, n_token=n_token))


def evaluate_checkpoints(inference, checkpoints, eval_file, max_seq_length, eval_batch_size, log_fn=print,
                         model_dir=None):
  """Evaluates each checkpoint on the eval records, as the original's eval mode (for every checkpoint).

  Args:
    inference: an `Inference`.
    checkpoints: [(step, path)], e.g. `checkpoint.list_checkpoints(model_dir)` (or its last entry).
    eval_file: the eval record file, padded to a multiple of eval_batch_size (`records.prepare_records`).
    max_seq_length, eval_batch_size: ints, as written.
    log_fn: where the `Eval | ...` lines go (and `Best | ...` when several checkpoints were evaluated).
    model_dir: str, where `checkpoints` were listed (named when there are none).

  Returns:
    (results, best): per-checkpoint dicts (eval_accuracy, eval_loss, loss, global_step, path), and the one with
    the highest eval_accuracy.
  """
  if not checkpoints:
    raise FileNotFoundError(checkpoint.no_checkpoint_line(model_dir, (
        "No checkpoint to evaluate: no complete checkpoint (*.index and its .data-* files) in --model_dir "
        f"{model_dir}, no --init_checkpoint. Train first (--do_train=True) or point --model_dir at the fine-tuning "
        "output.")))
  dataset = eval_dataset(eval_file, max_seq_length, eval_batch_size, inference.n_token)

  def evaluate(step, path):
    inference.load(path)
    out = inference.run_records(dataset, [eval_file])
    result = eval_metrics(out["logits"], out["loss"], out["label_ids"], out["is_real_example"], out["batch_loss"])
    result.update(global_step=step, path=path)
    log_fn("=" * 80)
    log_fn(f"Evaluated {path}: {len(out['loss'])} questions ({int(np.sum(out['is_real_example']))} real)")
    log_fn(format_result("Eval", result))
    log_fn("=" * 80)
    return result

  results = each_remaining(checkpoints, evaluate, log_fn)
  rank = lambda r: -math.inf if math.isnan(r["eval_accuracy"]) else r["eval_accuracy"]
  best = sorted(results, key=rank, reverse=True)[0]
  if len(results) > 1:
    log_fn(format_result("Best", best, keys=("eval_accuracy", "eval_loss", "loss", "global_step", "path")))
  return results, best


def _relative(path, data_dir):
  """`path` below `data_dir` (`dev/middle/1.txt`), else as given."""
  root = data_dir.rstrip("/") + "/"
  return path[len(root):] if path.startswith(root) else path


def predict(inference, ckpt_path, eval_file, max_seq_length, eval_batch_size, examples, data_dir, output_file):
  """Writes the predictions of `ckpt_path` for the real questions of `eval_file`, atomically, as a JSON list.

  Each entry: `file` (below data_dir), `question_index`, `level`, `prediction` (the chosen letter A-D),
  `probabilities` (softmax over the 4 options), `logits`, `answer` (the file's letter) and `correct` (both null
  for a file without `answers`).

  Args:
    inference: an `Inference`.
    ckpt_path: the checkpoint to run.
    eval_file, max_seq_length, eval_batch_size: the padded eval records (as `evaluate_checkpoints`).
    examples: the split's `data.InputExample`s, in the records' order (`data.get_examples`).
    data_dir: str, the RACE root (file names are written relative to it).
    output_file: str, the JSON file.

  Returns:
    dict: path (output_file), accuracy (over the real questions; NaN where a file has no answers), num_questions.
  """
  inference.load(ckpt_path)
  dataset = eval_dataset(eval_file, max_seq_length, eval_batch_size, inference.n_token)
  out = inference.run_records(dataset, [eval_file])
  real = out["is_real_example"] != 0
  logits, labels = out["logits"][real], out["label_ids"][real]
  if len(logits) != len(examples):
    raise ValueError(f"{eval_file} holds {len(logits)} real questions but the split has {len(examples)}: the cached "
                     "record is stale. Pass --overwrite_data=True.")
  if len(examples) and not np.array_equal(labels, [0 if ex.label is None else ex.label for ex in examples]):
    raise ValueError(f"The answers in {eval_file} do not match the split's files: the cached record is stale. Pass "
                     "--overwrite_data=True.")
  probabilities = tf.nn.softmax(logits.astype(np.float64), axis=-1).numpy()
  choices = np.argmax(logits, axis=-1)
  entries = [{
      "file": _relative(ex.file, data_dir), "question_index": ex.question_index, "level": ex.level,
      "prediction": data.ANSWER_LETTERS[choice], "probabilities": [round(float(p), 6) for p in probs],
      "logits": [float(v) for v in row], "answer": None if ex.label is None else data.ANSWER_LETTERS[ex.label],
      "correct": None if ex.label is None else bool(choice == ex.label),
  } for ex, choice, probs, row in zip(examples, choices, probabilities, logits)]
  check_prediction_file(output_file, "[")  # a user's file, replaced (sweep 36)
  fileio.write_json(output_file, entries, indent=1)
  answered = all(ex.label is not None for ex in examples)
  accuracy = float(np.mean(choices == labels)) if len(labels) and answered else math.nan
  logging.info("Predicted %d questions with %s (accuracy %.4f).", len(entries), ckpt_path, accuracy)
  return {"path": output_file, "accuracy": accuracy, "num_questions": len(entries)}
