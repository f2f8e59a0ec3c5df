"""The training step equals the original's: recorded optimizer steps of the ORIGINAL code (tests/testdata/train_step,
copied from shared/goldens/train_step), and the original's gradient norm and clipping on each path."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.training import optimization


GOLDEN_DIR = os.path.join("tests", "testdata", "train_step")
ENV = dict(os.environ, PYTHONPATH=os.getcwd(), TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


def _apply(clip_mode, ids, loss_fn, clip=100.0):
  """One apply_gradients on one device; returns (gnorm, the table's update direction)."""
  table = keras.Variable(np.ones([5, 2], np.float32), name="lookup_table")
  opt = optimization.create_optimizer(1e-3, train_steps=10)
  with tf.GradientTape() as tape:
    rows = tf.gather(table, ids)
    loss = loss_fn(table, rows)
  grad, rows_grad = tape.gradient(loss, [table, rows])
  gnorm, _ = optimization.apply_gradients(opt, [grad], [table], clip, clip_mode=clip_mode,
                                          embedding_rows=(0, rows_grad, ids))
  return float(gnorm)


def test_indexed_slices_norm_counts_repeated_tokens_separately():
  # ids [1, 1, 1, 3], each gathered row's gradient (1, 1): the original's un-merged rows give sqrt(4 * 2) = 2.83;
  # merged, row 1 is (3, 3) and the norm is sqrt(18 + 2) = 4.47.
  ids = tf.constant([1, 1, 1, 3])
  loss_fn = lambda table, rows: tf.reduce_sum(rows)
  assert _apply("indexed_slices", ids, loss_fn) == pytest.approx(np.sqrt(8.0), rel=1e-6)
  assert _apply("dense", ids, loss_fn) == pytest.approx(np.sqrt(20.0), rel=1e-6)


def test_tied_embedding_norm_has_no_cross_terms():
  # The table is gathered AND used densely (the tied LM softmax): TF 1.13 joined the dense part G and the rows
  # without summing them, so the squared norm is ||G||^2 + sum_p ||e_p||^2.
  ids = tf.constant([1, 1, 3])
  weights = tf.constant(np.arange(10, dtype=np.float32).reshape(5, 2) / 10)
  loss_fn = lambda table, rows: tf.reduce_sum(rows) + tf.reduce_sum(table * weights)
  dense_part = np.sum(np.square(weights.numpy()))
  assert _apply("indexed_slices", ids, loss_fn) == pytest.approx(np.sqrt(dense_part + 3 * 2.0), rel=1e-6)
  merged = weights.numpy() + np.array([[0, 0], [2, 2], [0, 0], [1, 1], [0, 0]], np.float32)
  assert _apply("dense", ids, loss_fn) == pytest.approx(np.sqrt(np.sum(np.square(merged))), rel=1e-6)


def test_indexed_slices_clip_mode_needs_the_rows():
  table = keras.Variable(np.ones([5, 2], np.float32))
  opt = optimization.create_optimizer(1e-3, train_steps=10)
  with pytest.raises(ValueError, match="embedding_rows"):
    optimization.apply_gradients(opt, [tf.ones([5, 2])], [table], 1.0, clip_mode="indexed_slices")
  with pytest.raises(ValueError, match="--clip_mode"):
    optimization.apply_gradients(opt, [tf.ones([5, 2])], [table], 1.0, clip_mode="sparse")


PER_CORE_SCRIPT = r"""
import json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
from xlnet_tf.training import optimization

CLIP = 0.5
rng = np.random.RandomState(0)
INIT = [rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(3,)).astype(np.float32)]
# Each replica's gradient: its own constant, so the per-replica norms differ (one clipped hard, one barely).
GRADS = [[np.full((4, 3), 0.4, np.float32), np.full((3,), -0.2, np.float32)],
         [np.full((4, 3), 0.02, np.float32), np.full((3,), 0.01, np.float32)]]

def run(strategy, grads_fn, clip, clip_mode):
  with strategy.scope():
    variables = []
    for layer, value in enumerate(INIT):  # paths .../transformer/layer_{0,1}/...: layer-wise decay applies
      with keras.name_scope("transformer"), keras.name_scope(f"layer_{layer}"):
        variables.append(keras.Variable(value, name="kernel"))
    opt = optimization.create_optimizer(0.1, train_steps=10)
    opt.build(variables)

  @tf.function
  def step():
    def replica_fn():
      grads = grads_fn(tf.distribute.get_replica_context().replica_id_in_sync_group)
      gnorm, _ = optimization.apply_gradients(opt, grads, variables, clip, lr_layer_decay_rate=0.5,
                                              clip_mode=clip_mode)
      return gnorm
    return strategy.run(replica_fn)

  gnorm = [float(g) for g in strategy.experimental_local_results(step())]
  return {"gnorm": gnorm, "state": [strategy.experimental_local_results(v.value)[0].numpy().tolist()
                                    for v in variables + list(opt.variables)]}

def own(replica):
  return [tf.gather(tf.constant(np.stack([g[i] for g in GRADS])), replica) for i in range(2)]

def clipped_sum(replica):  # the expectation: each replica's gradient clipped by its own norm, then summed
  out = [0.0, 0.0]
  for g in GRADS:
    norm = np.sqrt(sum(np.sum(np.square(x)) for x in g))
    out = [o + x * CLIP / max(norm, CLIP) for o, x in zip(out, g)]
  return [tf.constant(o, tf.float32) for o in out]

mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
print("RESULT " + json.dumps({
    "per_core": run(mirrored, own, CLIP, "per_core"),
    "dense": run(mirrored, own, CLIP, "dense"),
    "expected": run(tf.distribute.get_strategy(), clipped_sum, 1e9, "dense"),
    "norms": [float(np.sqrt(sum(np.sum(np.square(x)) for x in g))) for g in GRADS]}))
"""


def test_per_core_clipping_on_two_replicas(tmp_path):
  """--clip_mode=per_core (the original TPU's CrossShardOptimizer): each replica clips its own gradient, then the
  clipped gradients are summed; the logged gnorm is the replicas' mean norm."""
  script = tmp_path / "per_core.py"
  script.write_text(PER_CORE_SCRIPT)
  proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=ENV)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1][len("RESULT "):])
  norms = result["norms"]
  assert norms[0] > 0.5 > norms[1]  # one replica clipped, the other not
  np.testing.assert_allclose(result["per_core"]["gnorm"], [np.mean(norms)] * 2, rtol=1e-6)
  for got, want in zip(result["per_core"]["state"], result["expected"]["state"]):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
  # Clipping the sum instead (the GPU path) gives other Adam moments: the test can tell the two apart. (Adam's first
  # step is nearly scale-free, so the weights alone would hardly differ.)
  assert not all(np.allclose(a, b, rtol=1e-3) for a, b in zip(result["dense"]["state"], result["expected"]["state"]))


def test_original_training_steps_replay_within_tolerance():
  """scripts/check_train_step.py over the copied goldens: every file PASSes (per-step loss, lr, gnorm, mems; step-1
  gradients; final variables, Adam slots, beta powers, global step)."""
  proc = subprocess.run([sys.executable, "scripts/check_train_step.py", f"--golden_dir={GOLDEN_DIR}"],
                        capture_output=True, text=True, timeout=600, env=ENV)
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
  files = sorted(f[:-len(".npz")] for f in os.listdir(GOLDEN_DIR) if f.endswith(".npz"))
  for name in files:
    assert f"{name}.npz: PASS" in proc.stdout, proc.stdout
  assert proc.stdout.strip().endswith("PASS")


def test_global_mean_weighting_on_one_replica_replays_the_original():
  """--loss_weighting=global_mean divides the gradients of the loss sum after the backward (the default divides the
  loss before it): on one replica both are the original's mean loss, so a one-tower golden must pass either way."""
  from xlnet_tf.training import step_parity  # pylint: disable=import-outside-toplevel
  g, meta, ours = step_parity.replay(os.path.join(GOLDEN_DIR, "pretrain_adam_gpu.npz"), loss_weighting="global_mean")
  failed = {name: worst for name, (worst, _, ok) in step_parity.compare(g, meta, ours).items() if not ok}
  assert not failed, failed


def test_check_train_step_fails_on_a_tampered_golden(tmp_path):
  """The comparison can fail: a golden whose recorded gnorm is off by 1 % is reported FAIL (exit 1)."""
  for name in ("ckpt",):
    os.symlink(os.path.abspath(os.path.join(GOLDEN_DIR, name)), tmp_path / name)
  with np.load(os.path.join(GOLDEN_DIR, "finetune_cls_gpu.npz")) as data:
    arrays = {k: data[k] for k in data.files}
  arrays["gnorm"] = arrays["gnorm"] * 1.01
  np.savez(tmp_path / "finetune_cls_gpu.npz", **arrays)
  proc = subprocess.run([sys.executable, "scripts/check_train_step.py", f"--golden_dir={tmp_path}"],
                        capture_output=True, text=True, timeout=300, env=ENV)
  assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
  assert "FAIL gnorm" in proc.stdout and proc.stdout.strip().endswith("FAIL")


@pytest.mark.parametrize("golden", ["pretrain_adam_gpu", "pretrain_adamwd_gpu"])
def test_init_checkpoint_continues_the_original_optimizer_state(golden, tmp_path):
  """--init_checkpoint of an original checkpoint holding Adam slots and global_step (the original's state after 3
  steps, written under its TF1 names) restores weights, slots and step, as init_from_checkpoint(global_vars=True);
  without init_optimizer_state only the weights."""
  from xlnet_tf.training import step_parity  # pylint: disable=import-outside-toplevel
  g, meta = step_parity.load(os.path.join(GOLDEN_DIR, f"{golden}.npz"))
  finals = {k[len("final/"):]: v for k, v in g.items() if k.startswith("final/")}
  names = sorted(n for n in finals if n not in ("beta1_power", "beta2_power"))
  tf.raw_ops.SaveV2(prefix=str(tmp_path / "original.ckpt"), tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(finals[n]) for n in names])
  lines = []
  trainer = step_parity.build_trainer(GOLDEN_DIR, meta, 1, str(tmp_path / "run"), "indexed_slices")
  assert trainer.restore_or_init(str(tmp_path / "original.ckpt"), init_optimizer_state=True,
                                 log_fn=lines.append) == 3
  assert "Continued the optimizer state" in lines[-1] and "step 3" in lines[-1]
  ours = step_parity._final_state(trainer)  # pylint: disable=protected-access
  for name in names:
    np.testing.assert_array_equal(ours[name], finals[name], err_msg=name)
  for name in set(finals) - set(names):  # beta powers: TF1 multiplied them step by step; ours follow from the step
    np.testing.assert_allclose(ours[name], finals[name], rtol=1e-6, err_msg=name)

  fresh = step_parity.build_trainer(GOLDEN_DIR, meta, 1, str(tmp_path / "run2"), "indexed_slices")
  assert fresh.restore_or_init(str(tmp_path / "original.ckpt"), log_fn=lines.append) == 0
  state = step_parity._final_state(fresh)  # pylint: disable=protected-access
  np.testing.assert_array_equal(state["model/lm_loss/bias"], finals["model/lm_loss/bias"])
  assert not np.any(state["model/lm_loss/bias/" + ("adam_m" if "adamwd" in golden else "Adam")])


def test_train_makes_the_malloc_settings_again_after_building_its_iterator(monkeypatch, tmp_path):
  """Building the input iterator resets glibc's mmap threshold (TF's GeneratorDataset kernel; see
  test_run_pretrain); Trainer.train calls keep_freed_memory_after_input() once the iterator exists."""
  from xlnet_tf.training import step_parity, trainer as trainer_module  # pylint: disable=import-outside-toplevel
  g, meta = step_parity.load(os.path.join(GOLDEN_DIR, "pretrain_adam_gpu.npz"))
  trainer = step_parity.build_trainer(GOLDEN_DIR, meta, 1, str(tmp_path / "run"), "indexed_slices")
  calls = []
  real_iter = iter
  monkeypatch.setattr(trainer_module, "iter", lambda x: calls.append("iterator") or real_iter(x), raising=False)
  monkeypatch.setattr(trainer_module, "keep_freed_memory_after_input", lambda: calls.append("malloc settings"))
  dataset_fn = step_parity._dataset_fn(step_parity._pretrain_batches(g))  # pylint: disable=protected-access
  trainer.train(dataset_fn, train_steps=1, log_fn=lambda line: None)
  assert calls == ["iterator", "malloc settings"]
