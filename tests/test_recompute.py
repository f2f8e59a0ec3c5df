"""Recomputation (`RunConfig.recompute_grad`, xlnet_tf/modeling/recompute.py): each layer runs again in the backward
pass, and the gradients, dropout masks and dropout RNG state equal those without it, on the fine-tuning path and
the two-stream pretraining path with mems, under XLA and mixed_bfloat16, and through the Trainer."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers.gpu_kernels import check_training_loop
from xlnet_tf import training
from xlnet_tf.config import RunConfig, XLNetConfig
from xlnet_tf.modeling.transformer_xl import XLNetLayer
from xlnet_tf.modeling.xlnet import XLNetModel
from xlnet_tf.tasks.classifier import task as classifier_task
from xlnet_tf.tasks.pretrain.task import PretrainTask

CONFIG = XLNetConfig(n_layer=2, d_model=8, n_head=2, d_head=6, d_inner=11, ff_activation="gelu", untie_r=True,
                     n_token=32)
BSZ, SEQ, MEM_LEN, NUM_PREDICT = 4, 7, 5, 3
SCOPE = "classification_imdb"


def _features(pretrain, seed=0):
  """A batch as the task's reader yields it: ragged LEFT padding and two segments (fine-tuning), or a permutation
  mask and NUM_PREDICT targets, the last slot of odd rows a padding slot (pretraining)."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(0, CONFIG.n_token, (BSZ, SEQ)).astype(np.int32)
  if pretrain:
    target_mapping = np.zeros((BSZ, NUM_PREDICT, SEQ), np.float32)
    for b in range(BSZ):
      for p, pos in enumerate(rng.choice(SEQ, NUM_PREDICT - b % 2, replace=False)):
        target_mapping[b, p, pos] = 1
    return {"input_k": ids, "seg_id": (np.arange(SEQ) >= 4).astype(np.int32)[None].repeat(BSZ, 0),
            "input_q": target_mapping.sum(1), "perm_mask": (rng.rand(BSZ, SEQ, SEQ) < 0.4).astype(np.float32),
            "target_mapping": target_mapping, "target": rng.randint(0, CONFIG.n_token, (BSZ, NUM_PREDICT)),
            "target_mask": target_mapping.sum(2)}
  pad = np.arange(BSZ)[:, None] % 3 > np.arange(SEQ)[None]
  segment_ids = np.where(pad, 4, (np.arange(SEQ) >= 3).astype(np.int32)[None])
  segment_ids[:, -1] = 2
  return {"input_ids": ids, "segment_ids": segment_ids.astype(np.int32), "input_mask": pad.astype(np.float32),
          "label_ids": np.arange(BSZ, dtype=np.int32) % 2}


def _run_config(recompute_grad, pretrain, dropout=0.3, use_bfloat16=False):
  mems = dict(mem_len=MEM_LEN, reuse_len=4) if pretrain else {}
  return RunConfig(is_training=True, use_tpu=False, use_bfloat16=use_bfloat16, dropout=dropout, dropatt=dropout,
                   recompute_grad=recompute_grad, **mems)


def _model_fn(recompute_grad, pretrain, **kwargs):
  run_config = _run_config(recompute_grad, pretrain, **kwargs)
  if pretrain:
    return lambda: XLNetModel(CONFIG, run_config)
  return lambda: classifier_task.build_model(CONFIG, run_config, SCOPE, n_class=2)


def _task(pretrain):
  return PretrainTask() if pretrain else classifier_task.ClassifierTask(SCOPE)


def _steps(recompute_grad, pretrain, jit_compile=False, steps=2, **kwargs):
  """Two forward-backward passes (the second with the dropout state the first left); the same weights and
  dropout seeds either way. Returns (per pass: (loss, new mems, gradient of every trainable variable)), the
  dropout RNG state after them)."""
  keras.utils.set_random_seed(1)
  model = _model_fn(recompute_grad, pretrain, **kwargs)()
  task = _task(pretrain)
  features = {k: tf.constant(v) for k, v in _features(pretrain).items()}
  mems = [tf.constant(np.random.RandomState(i).randn(MEM_LEN, BSZ, CONFIG.d_model), tf.float32)
          for i in range(CONFIG.n_layer)] if pretrain else None

  @tf.function(jit_compile=jit_compile)
  def step():
    with tf.GradientTape() as tape:
      loss, _, new_mems = task(model, features, mems, training=True)
    return loss, new_mems, tape.gradient(loss, model.trainable_variables)

  passes = []
  for _ in range(steps):
    loss, new_mems, grads = step()
    passes.append((loss.numpy(), None if new_mems is None else [m.numpy() for m in new_mems],
                   [None if g is None else tf.convert_to_tensor(g).numpy() for g in grads]))
  return passes, [v.numpy() for v in model.non_trainable_variables]


def _assert_same_run(recomputed, plain, rtol=1e-6, atol=1e-7):
  """Equal losses, mems and gradients (every trainable variable the loss reaches, each nonzero) and equal dropout
  RNG states."""
  (passes, rng), (passes_plain, rng_plain) = recomputed, plain
  for (loss, mems, grads), (loss_plain, mems_plain, grads_plain) in zip(passes, passes_plain):
    np.testing.assert_allclose(loss, loss_plain, rtol=rtol)
    for m, m_plain in zip(mems or [], mems_plain or []):
      np.testing.assert_allclose(m, m_plain, rtol=rtol, atol=atol)
    assert [g is None for g in grads] == [g is None for g in grads_plain]
    assert len([g for g in grads if g is not None]) > 20
    for i, (g, g_plain) in enumerate(zip(grads, grads_plain)):
      if g is None:  # not reached by this loss: the LM head's bias in fine-tuning, mask_emb
        continue
      assert np.any(g != 0), i
      np.testing.assert_allclose(g, g_plain, rtol=rtol, atol=atol, err_msg=f"variable {i}")
  assert len(rng) == len(rng_plain)
  for state, state_plain in zip(rng, rng_plain):
    np.testing.assert_array_equal(state, state_plain)


@pytest.mark.parametrize("dropout", [pytest.param(0.0, marks=pytest.mark.slow), 0.3])  # slow: 15 minutes
def test_fine_tuning_gradients_equal(dropout):
  _assert_same_run(_steps(True, False, dropout=dropout), _steps(False, False, dropout=dropout))


def test_pretraining_gradients_equal_with_two_streams_and_mems():
  recomputed = _steps(True, True)
  assert len(recomputed[1]) > 4  # the dropout layers' RNG states (compared)
  _assert_same_run(recomputed, _steps(False, True))


def test_dropout_masks_differ_between_passes():
  """The check above can fail: each pass draws new masks, so a recomputation with the next pass's masks (or the
  masks of no dropout) would give other gradients."""
  (first, second), _ = _steps(False, True)
  (no_dropout,), _ = _steps(False, True, steps=1, dropout=0.0)
  for other in (second, no_dropout):
    assert not all(np.allclose(g, o, rtol=1e-3) for g, o in zip(first[2], other[2]) if g is not None)


@pytest.mark.slow  # the default suite's 15 minutes
def test_xla_gradients_equal():
  """With jit_compile (as --jit_compile compiles the trainer's forward and backward): XLA fuses the recomputed
  forward its own way, so the two agree to float32 rounding."""
  _assert_same_run(_steps(True, True, jit_compile=True, steps=1), _steps(False, True, jit_compile=True, steps=1),
                   rtol=2e-5, atol=1e-6)


@pytest.mark.slow  # the default suite's 15 minutes; by default: the float32 gradients' tests above
def test_mixed_bfloat16_gradients_equal():
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    runs = [_steps(recompute, False, steps=1, use_bfloat16=True) for recompute in (True, False)]
  finally:
    keras.mixed_precision.set_global_policy("float32")
  _assert_same_run(*runs, rtol=1e-5, atol=1e-6)  # the same bfloat16 ops on the same inputs: bit-identical here


def test_each_layer_runs_again_in_the_backward_pass(monkeypatch):
  calls = []
  forward = XLNetLayer.forward
  monkeypatch.setattr(XLNetLayer, "forward", lambda self, *a, **k: calls.append(self.name) or forward(self, *a, **k))
  forward_calls = ["layer_0", "layer_1"]
  for recompute_grad, expected in ((False, forward_calls), (True, forward_calls + ["layer_1", "layer_0"])):
    calls.clear()
    _steps(recompute_grad, False, steps=1)
    assert calls == expected
  calls.clear()
  model = _model_fn(True, False)()
  model.transformer.inference_chains = 1  # one call per layer (see TransformerXL._chains)
  classifier_task.forward(model, {k: tf.constant(v) for k, v in _features(False).items()}, SCOPE, training=False)
  assert calls == ["layer_0", "layer_1"]  # nothing to recompute in inference


def _train(recompute_grad, pretrain, strategy, jit_compile, tmp_path, steps=3):
  """`steps` Trainer steps with dropout; returns every variable of the model and the optimizer."""
  keras.utils.set_random_seed(2)
  trainer = training.Trainer(
      strategy, _model_fn(recompute_grad, pretrain, dropout=0.1), _task(pretrain), str(tmp_path / str(recompute_grad)),
      training.TrainConfig(learning_rate=1e-3, train_steps=steps, global_batch_size=BSZ, iterations=steps,
                           jit_compile=jit_compile))
  batches = [{k: tf.constant(v) for k, v in _features(pretrain, seed).items()} for seed in range(steps)]
  dataset = lambda _ctx, _start: tf.data.Dataset.from_tensor_slices(
      {k: tf.stack([b[k] for b in batches]) for k in batches[0]})
  trainer.train(dataset, log_fn=lambda _: None)
  return [v.numpy() for v in trainer.model.variables + trainer.optimizer.variables]


@pytest.mark.parametrize("pretrain, strategy, jit_compile", [
    (False, "one_device", False), pytest.param(True, "mirrored", False, marks=pytest.mark.slow),
    pytest.param(True, "one_device", True, marks=pytest.mark.slow)])
def test_trainer_runs_equal(tmp_path, pretrain, strategy, jit_compile):
  """A few Trainer steps with --recompute_grad (dropout 0.1; a one-CPU MirroredStrategy replica context, XLA)
  leave the same weights, Adam slots, mems and dropout RNG states as without."""
  make = lambda: tf.distribute.MirroredStrategy(["/cpu:0"]) if strategy == "mirrored" else training.make_strategy(
      "one_device")
  recomputed = _train(True, pretrain, make(), jit_compile, tmp_path)
  plain = _train(False, pretrain, make(), jit_compile, tmp_path)
  assert len(recomputed) == len(plain) > 40
  for i, (a, b) in enumerate(zip(recomputed, plain)):
    np.testing.assert_allclose(a, b, rtol=2e-5 if jit_compile else 1e-6, atol=1e-6 if jit_compile else 1e-7,
                               err_msg=f"variable {i}")


@pytest.mark.skipif(not tf.test.is_built_with_cuda(), reason="this TensorFlow build has no GPU kernels")
@pytest.mark.parametrize("jit_compile", [pytest.param(False, marks=pytest.mark.slow), True])  # slow: 15 minutes
def test_every_op_of_the_recomputed_step_runs_on_a_gpu(tmp_path, jit_compile):
  """As tests/test_gpu_path.py: the recomputation adds no op without a GPU kernel (or XLA's) to the loop."""
  trainer = training.Trainer(
      training.make_strategy("one_device"), _model_fn(True, True), PretrainTask(), str(tmp_path),
      training.TrainConfig(learning_rate=1e-4, train_steps=10, global_batch_size=BSZ, jit_compile=jit_compile))
  missing, checked = check_training_loop(trainer, _features(True))
  assert missing == []
  assert ("BatchMatMulV2", jit_compile) in checked


TWO_REPLICAS_SCRIPT = r"""
import json, sys, tempfile
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
sys.path.insert(0, "tests")
import test_recompute as t
from xlnet_tf import training

def train(recompute_grad, steps=3):
  keras.utils.set_random_seed(2)
  trainer = training.Trainer(
      tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), t._model_fn(recompute_grad, True, dropout=0.1),
      t._task(True), tempfile.mkdtemp(), training.TrainConfig(learning_rate=1e-3, train_steps=steps,
                                                              global_batch_size=2 * t.BSZ, iterations=steps))
  batches = [t._features(True, seed) for seed in range(2 * steps)]  # one per replica and step
  trainer.train(lambda _ctx, _start: tf.data.Dataset.from_tensor_slices(
      {k: np.stack([b[k] for b in batches]) for k in batches[0]}), log_fn=lambda _: None)
  return [v.numpy() for v in trainer.model.variables + trainer.optimizer.variables] + [trainer.mems.numpy()]

a, b = train(True), train(False)
print("RESULT " + json.dumps({"n": len(a), "max_diff": max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))}))
"""


@pytest.mark.slow
def test_two_replicas_with_dropout_equal():
  """Two MirroredStrategy replicas (2 logical CPUs, in a subprocess) with dropout: 3 pretraining steps with
  --recompute_grad leave the same weights, slots, mems and RNG states as without."""
  env = dict(os.environ, PYTHONPATH=os.getcwd(), TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run([sys.executable, "-c", TWO_REPLICAS_SCRIPT], capture_output=True, text=True, timeout=900,
                        env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1][len("RESULT "):])
  assert result["n"] > 40 and result["max_diff"] <= 1e-6


@pytest.mark.slow  # the default suite's 15 minutes; by default: test_trainer_runs_equal
def test_resume_mid_run_is_bit_identical(tmp_path):
  """With --recompute_grad and dropout (pretraining: mems, two streams), 4 steps stopped after 2 (checkpoint, then
  a new Trainer that resumes from it) end bit-identical to 4 uninterrupted steps: the checkpoint's dropout RNG
  state is the one the recomputation reproduces and advances."""
  batches = [_features(True, seed) for seed in range(4)]
  data = tf.data.Dataset.from_tensor_slices({k: np.stack([b[k] for b in batches]) for k in batches[0]})

  def run(model_dir, stops):
    for stop in stops:
      keras.utils.set_random_seed(2)
      trainer = training.Trainer(
          training.make_strategy("one_device"), _model_fn(True, True, dropout=0.1), _task(True), model_dir,
          training.TrainConfig(learning_rate=1e-3, train_steps=4, global_batch_size=BSZ, iterations=1))
      trainer.restore_or_init()
      trainer.train(lambda _ctx, start: data.skip(start), train_steps=stop, log_fn=lambda _: None)
    return [v.numpy() for v in trainer.model.variables + trainer.optimizer.variables] + [trainer.mems.numpy()]

  full, resumed = run(str(tmp_path / "full"), [4]), run(str(tmp_path / "resumed"), [2, 4])
  assert len(full) == len(resumed) > 40
  for i, (a, b) in enumerate(zip(resumed, full)):
    np.testing.assert_array_equal(a, b, err_msg=f"variable {i}")
