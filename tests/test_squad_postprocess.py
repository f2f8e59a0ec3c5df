"""write_predictions and the SQuAD 2.0 evaluation: the original's goldens, hand-worked cases, the quirk flags."""

import collections
import json
import math
import os

import numpy as np
import pytest

from xlnet_tf.data import tokenization
from xlnet_tf.tasks.squad import data
from xlnet_tf.tasks.squad import examples as squad_examples
from xlnet_tf.tasks.squad import evaluate
from xlnet_tf.tasks.squad import postprocess

TESTDATA = "tests/testdata/squad"
OUTPUTS = ("predictions.json", "nbest_predictions.json", "null_odds.json")


@pytest.fixture(scope="module")
def dev():
  """(examples, features, orig_data) of dev-v2.0.json at L64_Q16_S24_cased (what the goldens' head predicted)."""
  sp_model = tokenization.load_sentencepiece(f"{TESTDATA}/spm/spiece.model")
  path = f"{TESTDATA}/data/dev-v2.0.json"
  examples = squad_examples.read_squad_examples(path, is_training=False)
  options = data.FeatureOptions(max_seq_length=64, doc_stride=24, max_query_length=16)
  features, _ = data.build_features(examples, sp_model, options, is_training=False)
  return examples, features, squad_examples.load_squad_data(path)


def _results(npz):
  with np.load(npz) as r:
    return postprocess.raw_results_from_arrays({k: r[k] for k in postprocess.RESULT_KEYS})


def _options(**kwargs):
  """`AnswerOptions` with n_best_size 5, max_answer_length 10 (the goldens')."""
  return postprocess.AnswerOptions(n_best_size=5, max_answer_length=10, **kwargs)


@pytest.mark.parametrize("golden, npz", [("predictions", "predict_results.npz"),
                                         ("crafted", "crafted/raw_results.npz")])
def test_write_predictions_equals_goldens(dev, tmp_path, golden, npz):
  examples, features, orig_data = dev
  paths = [str(tmp_path / name) for name in OUTPUTS]
  out_eval = postprocess.write_predictions(examples, features, _results(f"{TESTDATA}/{npz}"), _options(), paths,
                                           orig_data)
  for name in OUTPUTS:  # Byte for byte: same texts, floats, key order and json.dumps(indent=4) layout.
    with open(tmp_path / name, "rb") as got, open(f"{TESTDATA}/{golden}/{name}", "rb") as want:
      assert got.read() == want.read(), name
  with open(f"{TESTDATA}/{golden}/eval_run_squad.json", encoding="utf-8") as f:
    assert out_eval == json.load(f)
  with open(tmp_path / "predictions.json", encoding="utf-8") as p, open(tmp_path / "null_odds.json") as n:
    official = evaluate.evaluate(orig_data, json.load(p), json.load(n))
  with open(f"{TESTDATA}/{golden}/eval_squad_utils.json", encoding="utf-8") as f:
    want = json.load(f, object_pairs_hook=collections.OrderedDict)
  assert list(official.items()) == list(want.items())
  assert sorted(os.listdir(tmp_path)) == sorted(OUTPUTS)  # Nothing half-written left behind.


def test_crafted_scenarios(dev):
  examples, features, _ = dev
  _, nbest, null_odds = postprocess.compute_predictions(
      examples, features, _results(f"{TESTDATA}/crafted/raw_results.npz"), 5, 10)
  with open(f"{TESTDATA}/crafted/scenarios.json", encoding="utf-8") as f:
    scenarios = json.load(f)
  for scenario in scenarios:
    assert [dict(e) for e in nbest[scenario["qas_id"]]] == scenario["original_nbest"], scenario["what"]
  # The minimum cls logit over the example's 7 features (scenarios.json's "what" says -2.5, the first feature's).
  assert null_odds["v00_start"] == -4.0
  assert null_odds["v07_mandb"] == 1000000 and isinstance(null_odds["v07_mandb"], int)  # Dropped: no feature.
  assert [dict(e) for e in nbest["v07_mandb"]] == [
      {"text": "", "probability": 1.0, "start_log_prob": -1e6, "end_log_prob": -1e6}]


# ---------------------------------------------------------------------------------------------------------------
# A hand-made example: "The capital is Paris", pieces ▁The ▁capital ▁is ▁Paris (paragraph_len 4).

CONTEXT = "The capital is Paris"


def _tiny():
  example = squad_examples.SquadExample("q", "What is the capital?", CONTEXT)
  feature = data.InputFeatures(
      unique_id=7, example_index=0, source_example=0, doc_span_index=0, tok_start_to_orig_index=[0, 3, 11, 14],
      tok_end_to_orig_index=[2, 10, 13, 19], token_is_max_context=[True] * 4, input_ids=[], input_mask=[],
      p_mask=[], segment_ids=[], paragraph_len=4, cls_index=10)
  # Beam start_n_top = 2, end_n_top = 1: (▁Paris, ▁Paris) scores -0.2, (▁The, ▁capital) -2.0; cls logit 2.0.
  result = postprocess.RawResult(7, [-0.1, -1.0], [3, 0], [-0.1, -1.0], [3, 1], 2.0)
  orig_data = [{"paragraphs": [{"context": CONTEXT, "qas": [
      {"id": "q", "question": "What is the capital?", "answers": [{"text": "Paris", "answer_start": 15}]}]}]}]
  return [example], [feature], [result], orig_data


def _predict(tmp_path, **kwargs):
  examples, features, results, orig_data = _tiny()
  paths = [str(tmp_path / name) for name in OUTPUTS]
  out_eval = postprocess.write_predictions(examples, features, results, _options(**kwargs), paths, orig_data,
                                           start_n_top=2, end_n_top=1)
  loaded = []
  for name in OUTPUTS:
    with open(tmp_path / name, encoding="utf-8") as f:
      loaded.append(json.load(f))
  return out_eval, loaded


def test_last_token_quirk(tmp_path):
  out_eval, (predictions, nbest, null_odds) = _predict(tmp_path)
  assert predictions == {"q": "The capital"}  # ▁Paris is token paragraph_len - 1: never a start or an end.
  assert [e["text"] for e in nbest["q"]] == ["The capital"] and nbest["q"][0]["probability"] == 1.0
  assert null_odds == {"q": 2.0}
  assert out_eval["has_ans_exact"] == 0.0
  out_eval, (predictions, nbest, _) = _predict(tmp_path, allow_last_token=True)
  assert predictions == {"q": "Paris"}
  p = 1.0 / (1.0 + math.exp(-2.0 - -0.2))
  assert [(e["text"], e["probability"]) for e in nbest["q"]] == [("Paris", pytest.approx(p)),
                                                                 ("The capital", pytest.approx(1 - p))]
  assert out_eval["has_ans_exact"] == 1.0


def test_empty_prediction_flag(tmp_path):
  _, (predictions, _, _) = _predict(tmp_path, allow_last_token=True)
  assert predictions == {"q": "Paris"}  # The original: never "" although the null logit (2.0) is high.
  out_eval, (predictions, _, _) = _predict(tmp_path, allow_last_token=True, allow_empty_prediction=True,
                                           null_threshold=0.0)
  assert predictions == {"q": ""}  # 2.0 > 0.0.
  assert out_eval["null_threshold"] == 0.0 and out_eval["exact"] == 0.0 and out_eval["HasAns_total"] == 1
  _, (predictions, _, _) = _predict(tmp_path, allow_last_token=True, allow_empty_prediction=True,
                                    null_threshold=2.0)
  assert predictions == {"q": "Paris"}  # Not strictly above.
  # No threshold: the best_f1_thresh found on the data (here "all null" scores 0 and answering scores 1, so the
  # search ends at the answerable question's null odds, 2.0, and the answer is kept).
  out_eval, (predictions, _, _) = _predict(tmp_path, allow_last_token=True, allow_empty_prediction=True)
  assert out_eval["null_threshold"] == out_eval["best_f1_thresh"] == 2.0 and predictions == {"q": "Paris"}


def test_empty_prediction_without_answers_needs_a_threshold(tmp_path):
  examples, features, results, _ = _tiny()
  paths = [str(tmp_path / name) for name in OUTPUTS]
  with pytest.raises(ValueError, match="null_threshold"):
    postprocess.write_predictions(examples, features, results, _options(allow_empty_prediction=True), paths, None,
                                  start_n_top=2, end_n_top=1)
  assert postprocess.write_predictions(examples, features, results, _options(), paths, None, start_n_top=2,
                                       end_n_top=1) == {}


def test_a_user_s_file_named_as_an_output_is_left_as_it_is(tmp_path):
  """The three outputs given as a user's files (data.csv, notes): each held `{}` after (sweep 36). An earlier run's
  prediction files are replaced."""
  examples, features, results, _ = _tiny()
  paths = [str(tmp_path / name) for name in OUTPUTS]
  postprocess.write_predictions(examples, features, results, _options(), paths, None, start_n_top=2, end_n_top=1)
  (tmp_path / OUTPUTS[1]).write_text("question,answer\n")
  with pytest.raises(ValueError, match=f"^{tmp_path}/{OUTPUTS[1]} is not a prediction file of these tools \\(it does "
                                       "not start with '{'\\): left as it is"):
    postprocess.write_predictions(examples, features, results, _options(), paths, None, start_n_top=2, end_n_top=1)
  assert (tmp_path / OUTPUTS[1]).read_text() == "question,answer\n"
  (tmp_path / OUTPUTS[1]).unlink()
  assert postprocess.write_predictions(examples, features, results, _options(), paths, None, start_n_top=2,
                                       end_n_top=1) == {}


def test_bad_postprocess_inputs():
  examples, features, results, _ = _tiny()
  with pytest.raises(ValueError, match="No head result for feature unique_id 7"):
    postprocess.compute_predictions(examples, features, [], 5, 10, 2, 1)
  with pytest.raises(ValueError, match="start_n_top=5, end_n_top=5"):
    postprocess.compute_predictions(examples, features, results, 5, 10)
  with pytest.raises(ValueError, match="--n_best_size"):
    postprocess.compute_predictions(examples, features, results, 0, 10, 2, 1)
  training = [data.InputFeatures(**{**features[0].__dict__, "example_index": None})]
  with pytest.raises(ValueError, match="evaluation features"):
    postprocess.compute_predictions(examples, training, results, 5, 10, 2, 1)
  with pytest.raises(ValueError, match="missing cls_logits"):
    postprocess.raw_results_from_arrays({k: np.zeros([2, 1]) for k in postprocess.RESULT_KEYS[:-1]})
  with pytest.raises(ValueError, match="one row per feature"):
    postprocess.raw_results_from_arrays({**{k: np.zeros([2, 1]) for k in postprocess.RESULT_KEYS},
                                         "cls_logits": np.zeros([3])})


def test_raw_results_from_arrays_gives_python_numbers():
  (r,) = postprocess.raw_results_from_arrays({
      "unique_ids": np.array([1000000000], np.int32), "start_top_log_probs": np.array([[-0.1]], np.float32),
      "start_top_index": np.array([[3]], np.int32), "end_top_log_probs": np.array([[-0.2, -0.3]], np.float32),
      "end_top_index": np.array([[4, 5]], np.int64), "cls_logits": np.array([[0.5]], np.float32)})
  assert r == (1000000000, [float(np.float32(-0.1))], [3], [float(np.float32(-0.2)), float(np.float32(-0.3))],
               [4, 5], 0.5)
  assert all(type(x) is float for x in r.start_top_log_probs) and type(r.unique_id) is int


# ---------------------------------------------------------------------------------------------------------------
# The evaluation, worked by hand.


def test_normalize_and_scores_by_hand():
  assert evaluate.normalize_answer("The  Cat's, hat!") == "cats hat"
  assert evaluate.normalize_answer("an apple a day") == "apple day"
  assert evaluate.compute_exact("The Cat", "cat") == 1
  assert evaluate.compute_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)  # P 2/3, R 1.
  assert evaluate.compute_f1("", "x") == 0 and evaluate.compute_f1("", "") == 1
  assert evaluate.compute_f1("the", "a") == 1  # Both normalise to nothing.
  assert evaluate.compute_f1("red car", "blue bike") == 0


HAND_DATA = [{"paragraphs": [{"context": "...", "qas": [
    {"id": "q1", "answers": [{"text": "Paris"}]},
    {"id": "q2", "answers": [{"text": "the red car"}, {"text": "car"}]},
    {"id": "q3", "answers": []},
    {"id": "q4", "answers": []},
]}]}]
HAND_PREDS = {"q1": "Paris", "q2": "blue car", "q3": "x", "q4": ""}
HAND_NA = {"q1": 0.2, "q2": -1.0, "q3": 3.0, "q4": 0.1}


def test_evaluate_by_hand():
  # Raw EM/F1: q1 1/1; q2 0 and max(F1 vs "red car" = 1/2, vs "car" = 2/3) = 2/3; q3 0/0; q4 1/1 ("" = "").
  # Threshold 1.0: q3 (na 3.0) counts as "", which is right: 1/1.
  got = evaluate.evaluate(HAND_DATA, HAND_PREDS, HAND_NA)
  assert list(got) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
                       "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
  assert got["exact"] == 75.0 and got["f1"] == pytest.approx(100 * (3 + 2 / 3) / 4) and got["total"] == 4
  assert got["HasAns_exact"] == 50.0 and got["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
  assert got["NoAns_exact"] == got["NoAns_f1"] == 100.0 and got["NoAns_total"] == 2
  # Threshold walk by increasing na: start at 2 (#no-answer); q2 (-1.0) EM +0, F1 +2/3 (F1 best, t = -1.0);
  # q4 (0.1) +0; q1 (0.2) +1: best 3 (EM) / 3 2/3 (F1), t = 0.2; q3 (3.0): "x" for no answer, -1.
  assert (got["best_exact"], got["best_exact_thresh"]) == (75.0, 0.2)
  assert got["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4) and got["best_f1_thresh"] == 0.2
  v2 = evaluate.run_squad_eval(HAND_DATA, HAND_PREDS, HAND_NA)
  assert v2["has_ans_exact"] == 0.5 and v2["has_ans_f1"] == pytest.approx((1 + 2 / 3) / 2)
  assert (v2["best_exact"], v2["best_exact_thresh"]) == (75.0, 0.2)


def test_evaluate_without_na_probs_and_missing_predictions(caplog):
  got = evaluate.evaluate(HAND_DATA, {"q1": "Paris", "q3": ""})
  assert got == {"exact": 100.0, "f1": 100.0, "total": 2, "HasAns_exact": 100.0, "HasAns_f1": 100.0,
                 "HasAns_total": 1, "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 1}
  with caplog.at_level("WARNING"):
    exact, _ = evaluate.get_raw_scores(HAND_DATA, {"q1": "Paris"})
  assert exact == {"q1": 1} and "Missing prediction for q2" in caplog.text
  with pytest.raises(ValueError, match="No question"):
    evaluate.evaluate(HAND_DATA, {"zz": "x"})


def test_best_threshold_all_null_wins():
  # Every answer wrong: "predict nothing" (threshold 0.0, the search's start) is best even though every null
  # score is negative (a threshold of 0.0 would then answer everything: the original's unrealisable optimum).
  preds = {"q1": "x", "q2": "y", "q3": "z", "q4": "w"}
  na = {"q1": -3.0, "q2": -2.0, "q3": -1.0, "q4": -0.5}
  got = evaluate.run_squad_eval(HAND_DATA, preds, na)
  assert (got["best_exact"], got["best_exact_thresh"], got["best_f1"], got["best_f1_thresh"]) == (50.0, 0.0,
                                                                                                  50.0, 0.0)


def test_check_squad_script_crafted_part(capsys):
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location("check_squad", "scripts/check_squad.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  assert module.main(["--golden_dir", TESTDATA, "--parts", "crafted"]) == 0
  out = capsys.readouterr().out
  assert "crafted: PASS" in out and out.splitlines()[-1] == "PASS"
