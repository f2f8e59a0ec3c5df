"""The official SQuAD 2.0 evaluation, as the original's `squad_utils.py` (v2.0 script plus XLNet's `_v2` search).

Scores (per question id q, `preds[q]` a string):
- normalize(s): lower-case, drop ASCII punctuation, replace the words a/an/the by a space, collapse whitespace.
- EM = [normalize(gold) == normalize(pred)]. F1 over the multisets of normalized tokens; when either side has no
  token, F1 = [both have none]. The gold set is the answers whose normalized text is non-empty, else {""}; a
  question scores the max over its golds. A question is answerable ("has_ans") when it lists any answer.
- With a no-answer score na[q] and threshold t: a question with na[q] > t is scored as predicting "".
- Best threshold: start from "every question predicts no answer" (score = #unanswerable, t = 0.0); walk the
  questions by increasing na (stable), adding the raw score of an answerable one and -1 for an unanswerable one
  with a non-empty prediction; every strict improvement sets t = na[q]. best = 100 * score / #scored.

`evaluate` is `squad_utils.py data.json pred.json --na-prob-file na.json` (it first keeps only the questions that
have a prediction); `find_all_best_thresh_v2` is what the original `write_predictions` returns.
"""

import collections
import re
import string

from absl import logging

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s):
  """Lower text and remove punctuation, articles and extra whitespace (the official rule)."""
  s = s.lower()
  s = "".join(ch for ch in s if ch not in _PUNCTUATION)
  s = _ARTICLES.sub(" ", s)
  return " ".join(s.split())


def get_tokens(s):
  return normalize_answer(s).split() if s else []


def compute_exact(a_gold, a_pred):
  """int 0/1."""
  return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
  """Token F1 (an int 0/1 when either side is empty or nothing is shared, else a float)."""
  gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
  if not gold_toks or not pred_toks:
    return int(gold_toks == pred_toks)
  num_same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(pred_toks)
  recall = 1.0 * num_same / len(gold_toks)
  return (2 * precision * recall) / (precision + recall)


def _questions(dataset):
  for article in dataset:
    for paragraph in article["paragraphs"]:
      yield from paragraph["qas"]


def make_qid_to_has_ans(dataset):
  """dict qid -> bool (the question lists at least one answer), in file order."""
  return {qa["id"]: bool(qa["answers"]) for qa in _questions(dataset)}


def get_raw_scores(dataset, preds):
  """Unthresholded scores: (exact dict, f1 dict) qid -> score, in file order; questions without a prediction are
  logged and skipped."""
  exact_scores, f1_scores = {}, {}
  for qa in _questions(dataset):
    qid = qa["id"]
    gold_answers = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
    if qid not in preds:
      logging.warning("Missing prediction for %s", qid)
      continue
    exact_scores[qid] = max(compute_exact(a, preds[qid]) for a in gold_answers)
    f1_scores[qid] = max(compute_f1(a, preds[qid]) for a in gold_answers)
  return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
  """Scores with every question whose na_probs exceeds na_prob_thresh scored as a "" prediction."""
  return {qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else s
          for qid, s in scores.items()}


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
  """OrderedDict exact, f1 (x100), total over qid_list (all scored questions when it is empty or None)."""
  if not qid_list:
    total = len(exact_scores)
    exact, f1 = sum(exact_scores.values()), sum(f1_scores.values())
  else:
    total = len(qid_list)
    exact, f1 = sum(exact_scores[k] for k in qid_list), sum(f1_scores[k] for k in qid_list)
  return collections.OrderedDict([("exact", 100.0 * exact / total), ("f1", 100.0 * f1 / total), ("total", total)])


def merge_eval(main_eval, new_eval, prefix):
  for k in new_eval:
    main_eval[f"{prefix}_{k}"] = new_eval[k]


def _best_thresh(preds, scores, na_probs, qid_to_has_ans):
  """(100 * best score / #scored, its threshold, questions in increasing na order)."""
  cur_score = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
  best_score, best_thresh = cur_score, 0.0
  qid_list = sorted(na_probs, key=lambda k: na_probs[k])
  for qid in qid_list:
    if qid not in scores:
      continue
    if qid_to_has_ans[qid]:
      cur_score += scores[qid]
    elif preds[qid]:
      cur_score += -1
    if cur_score > best_score:
      best_score, best_thresh = cur_score, na_probs[qid]
  return 100.0 * best_score / len(scores), best_thresh, qid_list


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
  """(best score x100, threshold) of the official v2.0 script."""
  best, thresh, _ = _best_thresh(preds, scores, na_probs, qid_to_has_ans)
  return best, thresh


def find_best_thresh_v2(preds, scores, na_probs, qid_to_has_ans):
  """XLNet's variant: also the mean unthresholded score over answerable questions (a 0-1 fraction, not x100).

  The mean's denominator counts every answerable question in na_probs, scored or not (the original divides by
  zero when there is none; here it is 0.0).
  """
  best, thresh, qid_list = _best_thresh(preds, scores, na_probs, qid_to_has_ans)
  has_ans_score, has_ans_cnt = 0, 0
  for qid in qid_list:
    if not qid_to_has_ans[qid]:
      continue
    has_ans_cnt += 1
    if qid in scores:
      has_ans_score += scores[qid]
  return best, thresh, (1.0 * has_ans_score / has_ans_cnt if has_ans_cnt else 0.0)


def find_all_best_thresh(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans):
  """Adds best_exact, best_exact_thresh, best_f1, best_f1_thresh to main_eval (the official v2.0 script)."""
  main_eval["best_exact"], main_eval["best_exact_thresh"] = find_best_thresh(
      preds, exact_raw, na_probs, qid_to_has_ans)
  main_eval["best_f1"], main_eval["best_f1_thresh"] = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)


def find_all_best_thresh_v2(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans):
  """Adds best_exact, best_exact_thresh, best_f1, best_f1_thresh, has_ans_exact, has_ans_f1 (XLNet's variant)."""
  best_exact, exact_thresh, has_ans_exact = find_best_thresh_v2(preds, exact_raw, na_probs, qid_to_has_ans)
  best_f1, f1_thresh, has_ans_f1 = find_best_thresh_v2(preds, f1_raw, na_probs, qid_to_has_ans)
  main_eval["best_exact"] = best_exact
  main_eval["best_exact_thresh"] = exact_thresh
  main_eval["best_f1"] = best_f1
  main_eval["best_f1_thresh"] = f1_thresh
  main_eval["has_ans_exact"] = has_ans_exact
  main_eval["has_ans_f1"] = has_ans_f1


def run_squad_eval(dataset, preds, na_probs):
  """What the original `write_predictions` returns: `find_all_best_thresh_v2` over the whole dataset.

  Args:
    dataset: the `data` list of the SQuAD file (`examples.load_squad_data`).
    preds: dict qid -> predicted text.
    na_probs: dict qid -> no-answer score (XLNet's null_odds: the minimum cls logit).

  Returns:
    dict best_exact, best_exact_thresh, best_f1, best_f1_thresh, has_ans_exact, has_ans_f1.
  """
  qid_to_has_ans = make_qid_to_has_ans(dataset)
  exact_raw, f1_raw = get_raw_scores(dataset, preds)
  out_eval = {}
  find_all_best_thresh_v2(out_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
  return out_eval


def evaluate(dataset, preds, na_probs=None, na_prob_thresh=1.0):
  """The official SQuAD 2.0 script (`squad_utils.py data.json pred.json [--na-prob-file na.json]`).

  Only the questions that have a prediction are evaluated. Without na_probs every score is 0.0 and there is no
  threshold search.

  Args:
    dataset: the `data` list of the SQuAD file.
    preds: dict qid -> predicted text ("" = no answer).
    na_probs: dict qid -> no-answer score, or None.
    na_prob_thresh: float, questions with a no-answer score above it count as predicting "".

  Returns:
    OrderedDict exact, f1, total, HasAns_exact/f1/total, NoAns_exact/f1/total (when such questions exist), and
    with na_probs best_exact, best_exact_thresh, best_f1, best_f1_thresh. Scores are x100.
  """
  dataset = [{"paragraphs": [{"qas": [qa]}]} for qa in _questions(dataset) if qa["id"] in preds]
  if not dataset:
    raise ValueError("No question of the dataset has a prediction; pass predictions keyed by the dataset's ids.")
  has_na_file = na_probs is not None
  if not has_na_file:
    na_probs = {k: 0.0 for k in preds}
  qid_to_has_ans = make_qid_to_has_ans(dataset)
  has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
  no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
  exact_raw, f1_raw = get_raw_scores(dataset, preds)
  exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
  f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
  out_eval = make_eval_dict(exact_thresh, f1_thresh)
  if has_ans_qids:
    merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids), "HasAns")
  if no_ans_qids:
    merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids), "NoAns")
  if has_na_file:
    find_all_best_thresh(out_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
  return out_eval
