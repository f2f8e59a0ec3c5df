"""Head outputs -> answers: the original's `write_predictions` (n-best, null score, the three JSON files).

For every example, over its features f and the beam i < start_n_top, j < end_n_top:
  s = start_top_index[f, i], e = end_top_index[f, i * end_n_top + j] (the head flattens start-major),
  score = start_top_log_probs[f, i] + end_top_log_probs[f, i * end_n_top + j].
A candidate is dropped when s or e >= paragraph_len - 1 (see `allow_last_token`), s is not a max-context token of
f (the end is not checked), e < s, or e - s + 1 > max_answer_length. Candidates are sorted by score, descending,
ties in (feature, i, j) order; the text of (f, s, e) is `context[tok_start_to_orig[s] : tok_end_to_orig[e] + 1]
.strip()`; texts already seen are skipped; the first n_best_size remain. No candidate: one ("", -1e6, -1e6).
probability = softmax of the scores over the n-best. The null score ("null odds") = min over the features of
cls_logits (1000000, an int, for an example without features); it is a logit of "no answer", not a difference.

The original's two oddities are the defaults; one flag each gives the corrected behaviour:
- allow_last_token=False: the bound `paragraph_len - 1` means a window's last paragraph token can never start
  or end an answer (an answer ending on a paragraph's last token is never predicted). True: bound paragraph_len.
- allow_empty_prediction=False: predictions.json holds the best non-null text even when the null score is high
  (it is "" only when no candidate is valid); the threshold is applied only inside the evaluation. True: the
  prediction is "" when null odds > null_threshold, so predictions.json can be scored without a na-prob file.
"""

import collections
import dataclasses
import json
import math

import numpy as np
from absl import logging

from xlnet_tf import fileio
from xlnet_tf.tasks.squad import evaluate as evaluate_lib
from xlnet_tf.training import inference

RawResult = collections.namedtuple(
    "RawResult", ["unique_id", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
                  "cls_logits"])
RESULT_KEYS = ("unique_ids", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
               "cls_logits")
NULL_SCORE_NO_FEATURE = 1000000  # The original's initial null score, left as is when an example has no feature.
EMPTY_LOG_PROB = -1e6

_Prelim = collections.namedtuple("_Prelim", ["feature_index", "start_index", "end_index", "start_log_prob",
                                             "end_log_prob"])


def raw_results_from_arrays(outputs):
  """RawResults from batched head outputs, converted to Python ints/floats as the original's predict loop does.

  Args:
    outputs: mapping with (F = features, K = start_n_top, K2 = end_n_top)
      unique_ids: int [F]; start_top_log_probs: float [F, K]; start_top_index: int [F, K];
      end_top_log_probs: float [F, K * K2]; end_top_index: int [F, K * K2] (index i * K2 + j: the j-th end for
      the i-th start); cls_logits: float [F] (or [F, 1]). float32 values become the doubles they equal.

  Returns:
    list of F RawResult.
  """
  missing = [k for k in RESULT_KEYS if k not in outputs]
  if missing:
    raise ValueError(f"Head outputs need {', '.join(RESULT_KEYS)}. Received keys {sorted(outputs)}; missing "
                     f"{', '.join(missing)}.")
  arrays = {k: np.asarray(outputs[k]) for k in RESULT_KEYS}
  num = arrays["unique_ids"].reshape(-1).shape[0]
  for k in RESULT_KEYS[1:]:
    if arrays[k].shape[0] != num:
      raise ValueError(f"Every head output needs one row per feature ({num} unique_ids). Received {k} of shape "
                       f"{arrays[k].shape}.")
  rows = [arrays[k].reshape(num, -1).tolist() for k in RESULT_KEYS]
  return [RawResult(int(u[0]), [float(x) for x in slp], [int(x) for x in sti], [float(x) for x in elp],
                    [int(x) for x in eti], float(cls[0]))
          for u, slp, sti, elp, eti, cls in zip(*rows)]


def _softmax(scores):
  """The original's `_compute_softmax` arithmetic: exp(x - max), summed left to right, divided."""
  if not scores:
    return []
  max_score = max(scores)
  exp_scores = [math.exp(s - max_score) for s in scores]
  total = 0.0
  for x in exp_scores:
    total += x
  return [x / total for x in exp_scores]


def _check_args(n_best_size, max_answer_length, start_n_top, end_n_top):
  for name, value in (("n_best_size", n_best_size), ("max_answer_length", max_answer_length),
                      ("start_n_top", start_n_top), ("end_n_top", end_n_top)):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
      raise ValueError(f"--{name} must be a positive integer. Received: {name}={value!r}.")


def compute_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length, start_n_top=5,
                        end_n_top=5, allow_last_token=False):
  """The n-best answers and null score of every example (no files, no threshold).

  Args:
    all_examples: list of SquadExample, in the order the features were converted.
    all_features: list of evaluation InputFeatures (example_index set), as `data.convert_examples_to_features`.
    all_results: iterable of RawResult (one per feature; extra results are ignored).
    n_best_size, max_answer_length: the original flags (5 and 64 by default there).
    start_n_top, end_n_top: the beam of the head that produced the results (the original reads its flags).
    allow_last_token: False = the original's `paragraph_len - 1` bound; True lets the last token be used.

  Returns:
    (best_texts, nbest, null_odds): OrderedDicts keyed by qas_id in example order; best_texts: the best non-null
    text; nbest: lists of OrderedDict(text, probability, start_log_prob, end_log_prob); null_odds: the null score.
  """
  _check_args(n_best_size, max_answer_length, start_n_top, end_n_top)
  features_by_example = collections.defaultdict(list)
  for feature in all_features:
    if feature.example_index is None:
      raise ValueError("compute_predictions needs evaluation features (example_index set). Received training "
                       f"features (unique_id {feature.unique_id}); convert with is_training=False.")
    features_by_example[feature.example_index].append(feature)
  results = {r.unique_id: r for r in all_results}
  bound = 0 if allow_last_token else 1
  best_texts, all_nbest, null_odds = (collections.OrderedDict() for _ in range(3))
  for example_index, example in enumerate(all_examples):
    features = features_by_example[example_index]
    prelim = []
    score_null = NULL_SCORE_NO_FEATURE
    for feature_index, feature in enumerate(features):
      result = results.get(feature.unique_id)
      if result is None:
        raise ValueError(f"No head result for feature unique_id {feature.unique_id} (example {example.qas_id}). "
                         "Predict every feature of the evaluation record.")
      if len(result.start_top_index) < start_n_top or len(result.end_top_index) < start_n_top * end_n_top:
        raise ValueError(f"Result {feature.unique_id} has {len(result.start_top_index)} starts and "
                         f"{len(result.end_top_index)} ends; start_n_top={start_n_top}, end_n_top={end_n_top} need "
                         f"{start_n_top} and {start_n_top * end_n_top}. Pass the head's start_n_top/end_n_top.")
      score_null = min(score_null, result.cls_logits)
      last = feature.paragraph_len - bound
      max_context = feature.token_is_max_context
      for i in range(start_n_top):
        start_index = result.start_top_index[i]
        for j in range(end_n_top):
          end_index = result.end_top_index[i * end_n_top + j]
          if start_index >= last or end_index >= last or start_index < 0 or not max_context[start_index]:
            continue
          if end_index < start_index or end_index - start_index + 1 > max_answer_length:
            continue
          prelim.append(_Prelim(feature_index, start_index, end_index, result.start_top_log_probs[i],
                                result.end_top_log_probs[i * end_n_top + j]))
    prelim.sort(key=lambda p: p.start_log_prob + p.end_log_prob, reverse=True)  # Stable: ties keep their order.
    seen, nbest = set(), []
    for pred in prelim:
      if len(nbest) >= n_best_size:
        break
      feature = features[pred.feature_index]
      start_orig = feature.tok_start_to_orig_index[pred.start_index]
      end_orig = feature.tok_end_to_orig_index[pred.end_index]
      text = example.paragraph_text[start_orig:end_orig + 1].strip()
      if text in seen:
        continue
      seen.add(text)
      nbest.append((text, pred.start_log_prob, pred.end_log_prob))
    if not nbest:
      nbest.append(("", EMPTY_LOG_PROB, EMPTY_LOG_PROB))
    probs = _softmax([s + e for _, s, e in nbest])
    all_nbest[example.qas_id] = [
        collections.OrderedDict([("text", t), ("probability", p), ("start_log_prob", s), ("end_log_prob", e)])
        for (t, s, e), p in zip(nbest, probs)]
    best_texts[example.qas_id] = nbest[0][0]
    null_odds[example.qas_id] = score_null
  return best_texts, all_nbest, null_odds


def _dump(obj):
  return json.dumps(obj, indent=4) + "\n"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AnswerOptions:
  """How head outputs become answers: the original's --n_best_size and --max_answer_length, and the new
  --allow_last_token, --allow_empty_prediction and --null_threshold (see `write_predictions`)."""
  n_best_size: int
  max_answer_length: int
  allow_last_token: bool = False
  allow_empty_prediction: bool = False
  null_threshold: float = None


def write_predictions(all_examples, all_features, all_results, options, output_files, orig_data, start_n_top=5,
                      end_n_top=5):
  """The original `write_predictions`: writes predictions.json, nbest_predictions.json, null_odds.json (together,
  `fileio.atomic_files`: a failed or stopped write leaves the three of the run before; `json.dumps(indent=4)` as
  the original) and returns the evaluation.

  Args:
    all_examples, all_features, all_results, start_n_top, end_n_top: as `compute_predictions`.
    options: `AnswerOptions`: n_best_size, max_answer_length, allow_last_token (as `compute_predictions`),
      allow_empty_prediction and null_threshold (below).
    output_files: (predictions.json, nbest_predictions.json, null_odds.json) str paths (local or gs://).
    orig_data: the `data` list of the predicted SQuAD file (`examples.load_squad_data`), or None (no answers known:
      nothing is evaluated and {} is returned).
    allow_empty_prediction: False = the original (predictions.json is never "" unless nothing is valid). True:
      "" where null_odds > null_threshold.
    null_threshold: float, or None = the best_f1_thresh found on orig_data (then orig_data is required).

  Returns:
    The original's dict: best_exact, best_exact_thresh, best_f1, best_f1_thresh (x100 and logits),
    has_ans_exact, has_ans_f1 (0-1 fractions), always computed from the non-null texts. With
    allow_empty_prediction also null_threshold and the official exact/f1/total/HasAns_*/NoAns_* of the written
    predictions.
  """
  output_prediction_file, output_nbest_file, output_null_log_odds_file = output_files
  allow_empty_prediction, null_threshold = options.allow_empty_prediction, options.null_threshold
  best_texts, all_nbest, null_odds = compute_predictions(
      all_examples, all_features, all_results, options.n_best_size, options.max_answer_length, start_n_top,
      end_n_top, options.allow_last_token)
  out_eval = evaluate_lib.run_squad_eval(orig_data, best_texts, null_odds) if orig_data is not None else {}
  predictions = best_texts
  if allow_empty_prediction:
    if null_threshold is None:
      if orig_data is None:
        raise ValueError("allow_empty_prediction needs a null_threshold when no answers are known (orig_data is "
                         "None). Pass the best_f1_thresh found on a dev set.")
      null_threshold = out_eval["best_f1_thresh"]
    predictions = collections.OrderedDict(
        (qid, "" if null_odds[qid] > null_threshold else text) for qid, text in best_texts.items())
    if orig_data is not None:
      out_eval["null_threshold"] = null_threshold
      out_eval.update(evaluate_lib.evaluate(orig_data, predictions))
  for path in (output_prediction_file, output_nbest_file, output_null_log_odds_file):  # a user's, replaced (sweep 36)
    inference.check_prediction_file(path, "{")
  logging.info("Writing predictions to %s", output_prediction_file)
  with fileio.atomic_files() as out:  # the three files of this run, or the three of the run before
    out.write(output_prediction_file, _dump(predictions))
    out.write(output_nbest_file, _dump(all_nbest))
    out.write(output_null_log_odds_file, _dump(null_odds))
  return out_eval
