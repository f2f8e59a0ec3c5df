"""The SQuAD head and loss: the original's outputs on its own checkpoint (goldens), the original TF1 variable names
(top-level scopes), a checkpoint without the head refused for prediction, the beam batched = per example, the
training graph's dependencies (gold start for the end, expected start for the answer class)."""

import importlib.util

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
from xlnet_tf import checkpoint
from xlnet_tf.tasks.squad import predict
from xlnet_tf.tasks.squad import task

TESTDATA = "tests/testdata/squad"
CKPT = f"{TESTDATA}/ckpt/xlnet_model.ckpt"
INPUTS = ("input_ids", "segment_ids", "input_mask", "p_mask", "cls_index")
# The original's head variables for d_model 8 (goldens' ckpt/head_variables.json).
HEAD_VARIABLES = {
    "start_logits/dense/kernel": [8, 1], "start_logits/dense/bias": [1], "end_logits/dense_0/kernel": [16, 8],
    "end_logits/dense_0/bias": [8], "end_logits/LayerNorm/beta": [8], "end_logits/LayerNorm/gamma": [8],
    "end_logits/dense_1/kernel": [8, 1], "end_logits/dense_1/bias": [1], "answer_class/dense_0/kernel": [16, 8],
    "answer_class/dense_0/bias": [8], "answer_class/dense_1/kernel": [8, 1],
}


def _config():
  return XLNetConfig(json_path=f"{TESTDATA}/ckpt/xlnet_config.json")


def _model(is_training, dropout=0.0, heads=True):
  run_config = RunConfig(is_training=is_training, use_tpu=False, use_bfloat16=False, dropout=dropout, dropatt=0.0)
  if not heads:
    return XLNetModel(_config(), run_config)
  return task.build_model(_config(), run_config)


def _batch(name, rows=None):
  with np.load(f"{TESTDATA}/head/{name}.npz") as f:
    arrays = {k: f[k] if rows is None else f[k][rows] for k in f.files}
  features = {k: tf.constant(arrays[k]) for k in INPUTS}
  if "start_position" in arrays:
    features.update(start_positions=tf.constant(arrays["start_position"]),
                    end_positions=tf.constant(arrays["end_position"]),
                    is_impossible=tf.constant(arrays["is_impossible"].astype(np.float32)))
  return features, arrays


def test_head_reproduces_the_original_on_its_checkpoint():
  spec = importlib.util.spec_from_file_location("check_squad", "scripts/check_squad.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  rows = module.check_head(module.golden_check.Golden(TESTDATA))
  assert len(rows) >= 15
  assert all(ok for _, _, ok in rows), [r for r in rows if not r[2]]


def test_head_variables_have_the_original_top_level_names():
  model = _model(is_training=False)
  table = checkpoint.original_variable_map(model)
  assert {n: list(v.shape) for n, v in table.items() if not n.startswith("model/")} == HEAD_VARIABLES
  report = checkpoint.load_weights(model, CKPT)
  assert report["kept_initial"] == [] and report["unused"] == []
  assert len(report["loaded"]) == len(table) == len(checkpoint.checkpoint_arrays(CKPT)) - 1  # all but global_step
  # Initialisation as the original: kernels drawn, biases 0, LayerNorm gamma 1 / beta 0.
  fresh = _model(is_training=True)
  names = checkpoint.original_variable_map(fresh)
  assert np.all(names["end_logits/LayerNorm/gamma"].numpy() == 1)
  assert not np.any(names["answer_class/dense_0/bias"].numpy()) and np.any(names["start_logits/dense/kernel"].numpy())


def test_prediction_needs_a_checkpoint_with_the_head(tmp_path):
  backbone = _model(is_training=False, heads=False)
  checkpoint.load_weights(backbone, CKPT)
  released = checkpoint.export_original_checkpoint(backbone, str(tmp_path / "xlnet_model.ckpt"))
  model = _model(is_training=False)
  report = checkpoint.load_weights(model, released)  # a released checkpoint initialises a new head
  assert report["kept_initial"] == sorted(HEAD_VARIABLES)
  with pytest.raises(ValueError, match="has no fine-tuned SQuAD head"):
    predict.Inference(model).load(released)
  predict.Inference(model).load(CKPT)


def test_the_beam_batched_equals_each_feature_alone():
  model = _model(is_training=False)
  checkpoint.load_weights(model, CKPT)
  rows = [3, 40, 41, 100, 200, 315]
  features, _ = _batch("predict", rows)
  batched = {k: v.numpy() for k, v in task.qa_outputs(model, features, start_n_top=3, end_n_top=2).items()}
  assert batched["end_top_index"].shape == (len(rows), 6) and batched["end_log_probs"].shape == (len(rows), 3, 64)
  for i in range(len(rows)):
    alone = task.qa_outputs(model, {k: v[i:i + 1] for k, v in features.items()}, start_n_top=3, end_n_top=2)
    for key, value in alone.items():
      if key.endswith("index"):
        np.testing.assert_array_equal(value.numpy()[0], batched[key][i], err_msg=key)
      else:
        np.testing.assert_allclose(value.numpy()[0], batched[key][i], rtol=1e-5, atol=1e-5, err_msg=key)
  # Start-major: the ends of start i are entries i * end_n_top + j, the top-2 of end_log_probs[:, i].
  top2 = np.argsort(-batched["end_log_probs"], axis=-1, kind="stable")[:, :, :2].reshape(len(rows), 6)
  np.testing.assert_array_equal(batched["end_top_index"], top2)


def test_training_graph_dependencies_and_the_task_loss():
  model = _model(is_training=True)
  checkpoint.load_weights(model, CKPT)
  features, arrays = _batch("train_batch")
  out = task.qa_outputs(model, features, training=True)
  # The end is conditioned on the GOLD start: moving it changes the end log-probs only.
  moved = dict(features, start_positions=tf.constant(arrays["cls_index"]))
  out_moved = task.qa_outputs(model, moved, training=True)
  np.testing.assert_array_equal(out["start_log_probs"].numpy(), out_moved["start_log_probs"].numpy())
  np.testing.assert_array_equal(out["cls_logits"].numpy(), out_moved["cls_logits"].numpy())
  assert np.max(np.abs(out["end_log_probs"].numpy() - out_moved["end_log_probs"].numpy())) > 1e-3
  # The answer class reads the EXPECTED start: its loss has a gradient into the start logits.
  kernel = checkpoint.original_variable_map(model)["start_logits/dense/kernel"]
  with tf.GradientTape() as tape:
    cls_loss = tf.reduce_mean(task.qa_losses(task.qa_outputs(model, features, training=True), features)[2])
  assert np.any(tape.gradient(cls_loss, [kernel])[0].numpy())
  # The task gives the loss sum and the example count: their ratio is the original's total_loss.
  loss_sum, weight, mems = task.SquadTask()(model, features, None, training=True)
  assert mems is None and float(weight) == 24
  np.testing.assert_allclose(float(loss_sum) / float(weight), float(arrays["total_loss"]), rtol=1e-5)
