"""Tests for xlnet_tf/metrics.py against values computed by hand."""

import json
import math
import os

import numpy as np
import pytest

from xlnet_tf import fileio
from xlnet_tf.tasks.classifier import metrics

# Binary example used below: TP at 0 and 4, FP at 1, TN at 2 and 3, FN at 5.
PRED = [1, 1, 0, 0, 1, 0]
LABEL = [1, 0, 0, 0, 1, 1]


def test_accuracy_weighted():
  assert metrics.accuracy([0, 1, 1, 0], [0, 1, 0, 0]) == pytest.approx(3 / 4)
  assert metrics.accuracy([0, 1, 1, 0], [0, 1, 0, 0], weights=[1, 1, 1, 0]) == pytest.approx(2 / 3)


def test_pearson_by_hand():
  # x: mean 2, dx = [-1, 0, 1]; y: mean 7/3, dy = [-4/3, -1/3, 5/3].
  # sum dx*dy = 3, sum dx^2 = 2, sum dy^2 = 14/3 -> r = 3 / sqrt(28/3).
  assert metrics.pearson_correlation([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(28 / 3))
  # A zero weight removes the last pair: [1, 2] vs [1, 2] -> 1.
  assert metrics.pearson_correlation([1, 2, 3], [1, 2, -7], weights=[1, 1, 0]) == pytest.approx(1.0)
  assert math.isnan(metrics.pearson_correlation([1, 1, 1], [1, 2, 3]))


def test_rank_average_ties():
  np.testing.assert_array_equal(metrics.rank_average([10, 20, 20, 5, 20]), [2, 4, 4, 1, 4])


def test_spearman_with_ties_by_hand():
  # ranks x = [1, 2.5, 2.5, 4], ranks y = [1, 3, 2, 4], both mean 2.5.
  # dx = [-1.5, 0, 0, 1.5], dy = [-1.5, .5, -.5, 1.5]: sum dx*dy = 4.5, sum dx^2 = 4.5, sum dy^2 = 5.
  # r = 4.5 / sqrt(4.5 * 5) = sqrt(9/10).
  assert metrics.spearman_correlation([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(math.sqrt(9 / 10))
  # The padding pair (weight 0) is not ranked: [1, 2, 3] vs [3, 2, 1] -> -1.
  assert metrics.spearman_correlation([1, 2, 3, 0], [3, 2, 1, 9], weights=[1, 1, 1, 0]) == pytest.approx(-1.0)


def test_matthews_by_hand():
  # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2*2 - 1*1) / sqrt(3*3*3*3) = 1/3.
  assert metrics.matthews_corrcoef(PRED, LABEL) == pytest.approx(1 / 3)
  # Dropping the FN example: TP=2, FP=1, TN=2, FN=0 -> (4 - 0) / sqrt(3*2*3*2) = 4/6.
  assert metrics.matthews_corrcoef(PRED, LABEL, weights=[1, 1, 1, 1, 1, 0]) == pytest.approx(2 / 3)
  assert metrics.matthews_corrcoef([1, 1, 1], [0, 1, 1]) == 0.0  # Constant predictions: undefined -> 0.
  assert metrics.matthews_corrcoef([2, 0, 1], [2, 0, 1]) == pytest.approx(1.0)


def test_f1_by_hand():
  # 2TP / (2TP + FP + FN) = 4 / 6.
  assert metrics.f1_score(PRED, LABEL) == pytest.approx(2 / 3)
  assert metrics.f1_score([0, 0], [0, 0]) == 0.0
  with pytest.raises(ValueError, match="F1 is binary"):
    metrics.f1_score([0, 2], [0, 1])


def test_task_metrics():
  logits = np.array([[0.0, 1.0], [0.0, 2.0], [1.0, 0.0], [3.0, 0.0], [-1.0, 1.0], [1.0, 0.5], [9.0, 0.0]])
  labels = LABEL + [1]
  weights = [1, 1, 1, 1, 1, 1, 0]  # The last row is eval padding.
  loss = [1, 2, 3, 4, 5, 6, 100]
  got = metrics.task_metrics("MRPC", logits, labels, weights, per_example_loss=loss)
  assert got == pytest.approx({"eval_accuracy": 4 / 6, "eval_f1": 2 / 3, "eval_loss": 21 / 6})
  # The original's metrics in float32, as its tf.metrics report them; GLUE's F1 (new) in float64.
  assert (got["eval_accuracy"], got["eval_loss"]) == (float(np.float32(4) / np.float32(6)), 3.5)
  assert got["eval_accuracy"] != 4 / 6 and got["eval_f1"] == 2 / 3
  got = metrics.task_metrics("cola", np.array(PRED), LABEL)
  assert got == pytest.approx({"eval_accuracy": 4 / 6, "eval_matthews_corr": 1 / 3})
  got = metrics.task_metrics("sts-b", [[1.0], [2.0], [3.0]], [1.0, 2.0, 4.0])
  assert got == pytest.approx({"eval_pearsonr": 3 / math.sqrt(28 / 3), "eval_spearmanr": 1.0})
  assert metrics.task_metrics("imdb", [[0, 1]], [1]) == {"eval_accuracy": 1.0}
  assert metrics.task_metrics("csv", [0.5, 1.5], [1, 2], is_regression=True) == pytest.approx(
      {"eval_pearsonr": 1.0, "eval_spearmanr": 1.0})
  assert metrics.best_metric_key(True) == "eval_pearsonr" and metrics.best_metric_key(False) == "eval_accuracy"


def test_bad_inputs():
  with pytest.raises(ValueError, match=r"1-D arrays of the same length. Received shapes \(2,\) and \(3,\)"):
    metrics.accuracy([0, 1], [0, 1, 1])
  with pytest.raises(ValueError, match="none with weight > 0"):
    metrics.accuracy([0, 1], [0, 1], weights=[0, 0])
  with pytest.raises(ValueError, match="non-negative"):
    metrics.accuracy([0, 1], [0, 1], weights=[1, -1])


def test_predictions_from_logits():
  assert metrics.predictions_from_logits([[0.0, 1.0], [0.0, 0.25]], ["neg", "pos"], 0.5) == ["pos", "neg"]
  assert metrics.predictions_from_logits([[0, 1, 5], [7, 1, 5]], ["c", "e", "n"]) == ["n", "c"]
  assert metrics.predictions_from_logits([3.5, 1.25], None) == [3.5, 1.25]
  with pytest.raises(ValueError, match="need a label list of 3 labels"):
    metrics.predictions_from_logits([[0, 1, 5]], ["a", "b"])


def test_write_predictions(tmp_path):
  d = str(tmp_path / "pred")
  tsv_path, json_path = metrics.write_predictions(
      metrics.PredictionFiles(predict_dir=d, task_name="SST-2", label_list=["0", "1"]),
      [[0.0, 1.0], [2.0, 0.5], [0.0, 0.0]], is_real_example=[1, 1, 0])
  assert tsv_path == os.path.join(d, "sst-2.tsv") and json_path == os.path.join(d, "sst-2.logits.json")
  with open(tsv_path) as f:
    assert f.read() == "index\tprediction\n0\t1\n1\t0\n"
  with open(json_path) as f:
    assert json.load(f) == [[0.0, 1.0], [2.0, 0.5]]
  metrics.write_predictions(metrics.PredictionFiles(predict_dir=d, task_name="sts-b"),
                            np.array([3.5, 0.25], np.float32))
  with open(os.path.join(d, "sts-b.tsv")) as f:
    assert f.read() == "index\tprediction\n0\t3.5\n1\t0.25\n"
  assert sorted(os.listdir(d)) == ["sst-2.logits.json", "sst-2.tsv", "sts-b.logits.json", "sts-b.tsv"]
  with pytest.raises(ValueError, match="--predict_dir"):
    metrics.PredictionFiles(predict_dir=None, task_name="sst-2", label_list=["0", "1"])
  # NaN logits (weights holding NaN) were written as class 0 everywhere, and a logits file no json reader takes.
  before = {name: open(os.path.join(d, name)).read() for name in os.listdir(d)}
  with pytest.raises(FloatingPointError, match=r"^The model's logits are not finite \(NaN or inf\) for 1 of 2 "
                                               r"examples \(the first: row 1\): .* Nothing was written"):
    metrics.write_predictions(metrics.PredictionFiles(predict_dir=d, task_name="SST-2", label_list=["0", "1"]),
                              [[0.0, 1.0], [np.nan, 0.5], [np.nan, np.nan]], is_real_example=[1, 1, 0])
  assert {name: open(os.path.join(d, name)).read() for name in os.listdir(d)} == before


def test_prediction_files_replace_only_prediction_files_in_the_directory(tmp_path):
  """write_predictions with a task named "train" replaced a user's train.tsv in the directory; "../escape" wrote
  beside it (sweep 35). An earlier run's prediction files, and empty files, are replaced."""
  (tmp_path / "train.tsv").write_text("sentence\tlabel\na fine film\t1\n")
  (tmp_path / "notes.logits.json").write_text("my notes")
  for task, name in (("train", "train.tsv"), ("notes", "notes.logits.json")):
    with pytest.raises(ValueError, match=f"^{tmp_path}/{name} is not a prediction file of these tools \\(it does not "
                                         "start with .*\\): left as it is. Move it away, or pass another "
                                         "--predict_dir."):
      metrics.write_predictions(metrics.PredictionFiles(predict_dir=str(tmp_path), task_name=task), [[1.0]])
  with pytest.raises(ValueError, match=r"^The task name '../escape', which names the prediction files, may hold "):
    metrics.PredictionFiles(predict_dir=str(tmp_path), task_name="../escape")
  assert (tmp_path / "train.tsv").read_text() == "sentence\tlabel\na fine film\t1\n"
  assert sorted(os.listdir(tmp_path)) == ["notes.logits.json", "train.tsv"]
  (tmp_path / "sst-2.tsv").write_text("")
  files = metrics.PredictionFiles(predict_dir=str(tmp_path), task_name="sst-2", label_list=["0", "1"])
  for logits in ([[0.0, 1.0]], [[1.0, 0.0]]):
    metrics.write_predictions(files, logits)
  assert (tmp_path / "sst-2.tsv").read_text() == "index\tprediction\n0\t0\n"


def test_a_failed_write_leaves_both_prediction_files_of_the_run_before(tmp_path, monkeypatch):
  """run_classifier.py --do_predict on a full disk when the logits file is written: the .tsv of this run is not
  put beside the .logits.json of the run before; both files keep that run's bytes, and nothing else is left."""
  files = metrics.PredictionFiles(predict_dir=str(tmp_path), task_name="sst-2", label_list=["0", "1"])
  tsv_path, json_path = metrics.write_predictions(files, [[0.0, 1.0], [2.0, 0.5]])
  before = {path: open(path, "rb").read() for path in (tsv_path, json_path)}
  open_file = fileio.open_file

  def full_disk_at_the_logits(path, mode="r"):
    if os.path.basename(path).startswith("sst-2.logits.json.tmp-"):
      raise OSError(28, "No space left on device")
    return open_file(path, mode)
  monkeypatch.setattr(fileio, "open_file", full_disk_at_the_logits)
  with pytest.raises(OSError, match=f"^Could not write {json_path} \\(No space left on device\\); what was there is "
                                    "left as it was"):
    metrics.write_predictions(files, [[3.0, 0.0], [0.0, 3.0], [1.0, 0.0]])
  assert {path: open(path, "rb").read() for path in (tsv_path, json_path)} == before
  assert sorted(os.listdir(tmp_path)) == ["sst-2.logits.json", "sst-2.tsv"]
