"""The RACE head and loss against the ORIGINAL's goldens: the TF1 checkpoint with the RACE head (`logits/dense` at the
top level) loads by name with nothing left over, and gives the goldens' sequence output, summary, logits, loss and
eval numbers within float32 tolerance (1e-5 x max(1, max |golden|), as tests/test_parity.py)."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
from xlnet_tf import checkpoint
from xlnet_tf.modeling.heads import finetune_heads
from xlnet_tf.tasks.race import evaluation
from xlnet_tf.tasks.race import task

GOLDEN = "tests/testdata/race"
CKPT = os.path.join(GOLDEN, "ckpt", "xlnet_model.ckpt")
SEQ_LEN, BATCH = 64, 5  # the goldens' L64_QA16_cased setting and eval_batch_size
RUN = dict(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0)
HEAD_NAMES = ["logits/dense/bias", "logits/dense/kernel", "model/sequnece_summary/summary/bias",
              "model/sequnece_summary/summary/kernel"]


def assert_close(actual, desired, err_msg=""):
  atol = 1e-5 * max(1.0, float(np.max(np.abs(desired))))
  np.testing.assert_allclose(np.asarray(actual), desired, atol=atol, rtol=0, err_msg=err_msg)


def config():
  return XLNetConfig(json_path=os.path.join(GOLDEN, "ckpt", "xlnet_config.json"))


def race_model(**run):
  return task.build_model(config(), RunConfig(**{**RUN, **run}))


@pytest.fixture(scope="module")
def golden():
  return np.load(os.path.join(GOLDEN, "head", "eval.npz"))


def batch(golden, rows):
  features = {key: golden[key][rows].reshape([-1, 4, SEQ_LEN]) for key in ("input_ids", "input_mask", "segment_ids")}
  features["label_ids"] = golden["label_ids"][rows]
  return features


def test_the_original_checkpoint_loads_by_name_with_nothing_left_over():
  model = race_model()
  table = checkpoint.original_variable_map(model)
  # The head is outside `model/` as in the original graph; the summary is inside.
  assert [n for n in sorted(table) if not n.startswith("model/transformer/")] == sorted(HEAD_NAMES + ["model/lm_loss/bias"])
  assert model.heads["logits"].dense.kernel.path == "model/logits/dense/kernel"
  report = checkpoint.load_weights(model, CKPT)
  assert report["kept_initial"] == [] and report["unused"] == []
  assert sorted(report["loaded"]) == sorted(table) and len(report["loaded"]) == 37
  reader = tf.train.load_checkpoint(CKPT)
  for name, var in table.items():
    np.testing.assert_array_equal(var.numpy(), reader.get_tensor(name), err_msg=name)
  assert evaluation.Inference(race_model()).load(CKPT)["kept_initial"] == []


def test_logits_and_loss_equal_the_originals(golden):
  model = race_model()
  checkpoint.load_weights(model, CKPT)
  logits, losses = [], []
  for start in (0, BATCH):
    features = batch(golden, slice(start, start + BATCH))
    output, pooled = task.encode(model, features)
    logit, loss = task.forward(model, features)
    if start == 0:
      assert output.shape == (SEQ_LEN, 4 * BATCH, 8)
      assert_close(output, golden["sequence_output_batch0"], "sequence_output_batch0")
    assert_close(pooled, golden["pooled"][4 * start:4 * (start + BATCH)], "pooled")
    assert logit.dtype == tf.float32 and logit.shape == (BATCH, 4)
    logits.append(logit.numpy())
    losses.append(loss.numpy())
  logits, losses = np.concatenate(logits), np.concatenate(losses)
  assert_close(logits, golden["logits"], "logits")
  assert_close(losses, golden["per_example_loss"], "per_example_loss")
  batch_loss = losses.reshape(2, BATCH).mean(1)
  assert_close(batch_loss, golden["batch_total_loss"], "batch_total_loss")
  metrics = evaluation.eval_metrics(logits, losses, golden["label_ids"], golden["is_real_example"], batch_loss)
  assert metrics["eval_accuracy"] == float(golden["eval_accuracy"]) == 0.125
  assert_close(metrics["eval_loss"], golden["eval_loss"])
  assert_close(metrics["loss"], golden["estimator_loss"])
  # The training task's loss is the batch mean, padding questions included (the original's total_loss).
  loss_sum, weight, mems = task.RaceTask()(model, batch(golden, slice(BATCH, 2 * BATCH)), None, training=False)
  assert mems is None and float(weight) == BATCH
  assert_close(loss_sum / weight, golden["batch_total_loss"][1])


def test_time_major_layout_and_per_question_runs(golden):
  x = np.arange(2 * 4 * 3).reshape(2, 4, 3)  # [B, 4, L]
  got = task.time_major(tf.constant(x)).numpy()
  assert got.shape == (3, 8)
  for b in range(2):
    for c in range(4):
      np.testing.assert_array_equal(got[:, b * 4 + c], x[b, c])
  model = race_model()
  checkpoint.load_weights(model, CKPT)
  together = task.forward(model, batch(golden, slice(0, BATCH)))[0].numpy()
  alone = np.concatenate([task.forward(model, batch(golden, slice(i, i + 1)))[0].numpy() for i in range(BATCH)])
  assert_close(alone, together)


def test_a_pretrained_checkpoint_leaves_the_head_to_its_initialisation(tmp_path):
  run = RunConfig(**RUN)
  pretrained = XLNetModel(config(), run)
  path = checkpoint.export_original_checkpoint(pretrained, str(tmp_path / "xlnet_model.ckpt"))
  model = race_model(init_std=0.3)
  report = checkpoint.load_weights(model, path)
  assert report["kept_initial"] == HEAD_NAMES and report["unused"] == []
  head = model.heads["logits"].dense
  assert np.all(head.bias.numpy() == 0) and 0.1 < np.std(head.kernel.numpy()) < 0.6  # init_std, bias zeros
  with pytest.raises(ValueError, match="has no fine-tuned RACE head.*logits/dense/bias"):
    evaluation.Inference(model).load(path)
  # Our export keeps the original names: the head at the top level, loadable by a fresh model.
  checkpoint.load_weights(model, CKPT)
  exported = checkpoint.export_original_checkpoint(model, str(tmp_path / "race" / "model.ckpt"))
  names = set(checkpoint.checkpoint_arrays(exported))
  assert {"logits/dense/kernel", "logits/dense/bias", "global_step"} <= names
  assert not any(n.startswith("model/logits") for n in names)
  assert evaluation.Inference(race_model()).load(exported)["kept_initial"] == []


def test_the_model_round_trips_through_its_keras_config():
  model = race_model()
  checkpoint.load_weights(model, CKPT)
  clone = XLNetModel.from_config(model.get_config())
  assert sorted(checkpoint.original_variable_map(clone)) == sorted(checkpoint.original_variable_map(model))
  layer = task.ChoiceLogits(8, keras.initializers.RandomNormal(stddev=0.02))
  assert task.ChoiceLogits.from_config(layer.get_config()).get_config() == layer.get_config()
  with pytest.raises(ValueError, match="--summary_type"):
    task.build_model(config(), RunConfig(**RUN), summary_type=None)
  assert [h.name for h in finetune_heads(config(), RunConfig(**RUN))] == ["sequnece_summary"]
