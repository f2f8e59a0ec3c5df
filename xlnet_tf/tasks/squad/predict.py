"""Prediction and evaluation with a fine-tuned SQuAD model, as the original `run_squad.py --do_predict`: the head's
beam on every evaluation feature, then `postprocess.write_predictions` (predictions.json, nbest_predictions.json,
null_odds.json, each written atomically) and, when the predicted file has answers, the evaluation with the
no-answer threshold search, logged as the original's `Result | key value | ...` line.

Unlike the original (which always predicts with model_dir's latest checkpoint, xlnet#56), the checkpoint is the
caller's choice: one (written to predict_dir) or several (each to predict_dir/<checkpoint name>/, and the best by
`target_eval_key` logged as `Best result | ...`).
"""

import dataclasses
import math
import os

from absl import logging

from xlnet_tf.data import records as records_lib
from xlnet_tf.training import inference
from xlnet_tf.training.inference import each_remaining
from xlnet_tf.tasks.squad import postprocess
from xlnet_tf.tasks.squad import records
from xlnet_tf.tasks.squad import task

OUTPUT_FILES = ("predictions.json", "nbest_predictions.json", "null_odds.json")


@dataclasses.dataclass
class EvalSet:
  """What prediction reads: the examples and features of the predicted file, its record, its `data` list (None
  when the file has no answers: nothing is evaluated) and the records' max_seq_length."""
  examples: list
  features: list
  record: str
  orig_data: list
  max_seq_length: int


class Inference(inference.Inference):
  """A SQuAD model for prediction (`training.inference.Inference`): the head's beam through one traced step.

  Args:
    model: an XLNetModel with the QA head, built for inference (`task.build_model`, is_training=False).
    start_n_top, end_n_top: the beam (the original's flags).
    jit_compile: XLA-compile the forward pass and the beam (`--jit_compile`).
  """

  def __init__(self, model, start_n_top=5, end_n_top=5, jit_compile=False):
    def step(features):
      out = task.qa_outputs(model, features, training=False, start_n_top=start_n_top, end_n_top=end_n_top)
      return {k: out[k] for k in postprocess.RESULT_KEYS if k in out}

    super().__init__(model, step, ("unique_ids",), jit_compile, reduce_retracing=True)
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top

  def check_head(self, report, ckpt_path):
    missing = [n for n in report["kept_initial"] if n.split("/", 1)[0] in task.HEAD_SCOPES]
    if missing:
      raise ValueError(f"Checkpoint {ckpt_path} has no fine-tuned SQuAD head (it lacks {missing[0]}). Predict with "
                       "a checkpoint fine-tuned on SQuAD (by run_squad.py or the original code).")

  def run(self, dataset):
    """The head's outputs over a dataset of evaluation batches (`records.squad_dataset`, not training).

    Returns:
      dict of numpy arrays over all F features (postprocess.RESULT_KEYS): unique_ids int [F], start_top_log_probs
      float32 [F, K], start_top_index int32 [F, K], end_top_log_probs float32 [F, K * K2], end_top_index int32
      [F, K * K2] (start-major), cls_logits float32 [F].
    """
    out = super().run(dataset)
    if not out:
      raise ValueError("The evaluation record holds no feature: the predicted file has no question.")
    return out


def predict_checkpoint(inference, ckpt_path, eval_set, predict_dir, predict_batch_size, options):
  """Predicts the evaluation features with one checkpoint and writes the three files to predict_dir
  (`options`: `postprocess.AnswerOptions`).

  Returns:
    The evaluation of `postprocess.write_predictions` ({} when eval_set.orig_data is None).
  """
  inference.load(ckpt_path)
  dataset = records.squad_dataset(eval_set.record, eval_set.max_seq_length,
                                  records_lib.ReadConfig(batch_size=predict_batch_size, n_token=inference.n_token))
  outputs = inference.run_records(dataset, [eval_set.record], "--predict_batch_size")
  logging.info("Predicted %d features with %s.", len(outputs["unique_ids"]), ckpt_path)
  results = postprocess.raw_results_from_arrays(outputs)
  paths = [os.path.join(predict_dir, name) for name in OUTPUT_FILES]
  return postprocess.write_predictions(
      eval_set.examples, eval_set.features, results, options, paths, eval_set.orig_data,
      start_n_top=inference.start_n_top, end_n_top=inference.end_n_top)


def format_result(title, result):
  """The original's log line: `{title} | key value | ...` (no step where there is none)."""
  return inference.result_line(title, result.items())


def predict_checkpoints(inference, checkpoints, eval_set, predict_dir, predict_batch_size, options,
                        target_eval_key="best_f1", log_fn=print, dir_each=False):
  """Predicts with each checkpoint: into predict_dir, or with `dir_each` (--predict_all_ckpt: one directory per
  checkpoint, however many model_dir holds) into predict_dir/<checkpoint name>/. Logs a `Result | ...` line per
  checkpoint (with its step and path) and, for several checkpoints with answers known, `Best result | ...` by
  target_eval_key.

  Args:
    checkpoints: [(step or None, checkpoint prefix)], at least one; several need `dir_each`.
    options: `postprocess.AnswerOptions` (see `predict_checkpoint`).

  Returns:
    (results, best): per-checkpoint dicts (the evaluation, plus step, path and predict_dir), and the best one
    (None without answers or with one checkpoint).
  """
  if len(checkpoints) > 1 and not dir_each:
    raise ValueError("Several checkpoints need dir_each=True: each writes the same file names.")

  def predict(step, path):
    out_dir = os.path.join(predict_dir, os.path.basename(path)) if dir_each else predict_dir
    result = dict(predict_checkpoint(inference, path, eval_set, out_dir, predict_batch_size, options))
    result.update(step=step, path=path, predict_dir=out_dir)
    log_fn("=" * 80)
    log_fn(format_result("Result", result))
    return result

  results = each_remaining(checkpoints, predict, log_fn)
  best = None
  if len(results) > 1 and eval_set.orig_data is not None:
    if target_eval_key not in results[0]:
      raise ValueError(f"--target_eval_key {target_eval_key!r} is not an evaluation key; choose one of "
                       f"{sorted(k for k, v in results[0].items() if isinstance(v, (int, float)))}.")
    rank = lambda r: -math.inf if r[target_eval_key] is None or math.isnan(r[target_eval_key]) else r[target_eval_key]
    best = max(results, key=rank)
    log_fn("=" * 80)
    log_fn(format_result("Best result", best))
  return results, best
