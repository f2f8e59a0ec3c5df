"""Gradient accumulation (`--gradient_accumulation_steps`, xlnet_tf/training/accumulation.py): N micro-batches make
the update of the whole batch.

The runs are the recorded training steps of the ORIGINAL code (tests/testdata/train_step: 3 steps from one
checkpoint, dropout 0, the inputs of every step), replayed through the Trainer the CLIs build
(scripts/step_parity.py): with N micro-batches they must equal our own whole-batch replay within float32 rounding
(step_parity's tolerances: loss, gnorm, lr, mems after every step, step-1 gradients of `batch_gradients`, final
variables and Adam slots), and still pass against the original's whole-batch steps."""

import importlib
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import RunConfig, XLNetConfig
from xlnet_tf import training
from xlnet_tf.modeling.xlnet import XLNetModel
from xlnet_tf.tasks.classifier import task as classifier_task
from xlnet_tf.tasks.pretrain.task import PretrainTask
from xlnet_tf.training import accumulation

from helpers.allocator_stats import NEEDS_CPU_STATS

GOLDEN_DIR = os.path.join("tests", "testdata", "train_step")


def _step_parity():
  """scripts/step_parity.py (it imports the CLIs: the repository root and scripts/ go on the path)."""
  for path in (os.getcwd(), os.path.join(os.getcwd(), "scripts")):
    if path not in sys.path:
      sys.path.insert(0, path)
  return importlib.import_module("step_parity")


def test_micro_batches_keep_bi_data_pairs_and_join_back():
  # 8 rows [f0 f1 f2 f3 | b0 b1 b2 b3] in 2 micro-batches: [f0 f1 | b0 b1] and [f2 f3 | b2 b3].
  x = tf.reshape(tf.range(8 * 3), [8, 3])
  assert accumulation.micro_batch(x, 1, 2, groups=2).numpy()[:, 0].tolist() == [6, 9, 18, 21]
  assert accumulation.micro_batch(x, tf.constant(0), 4).numpy()[:, 0].tolist() == [0, 3]
  mems = tf.reshape(tf.range(5 * 8 * 2), [5, 8, 2])  # [M, b, H]: the batch axis is 1
  for n, groups in ((2, 2), (4, 1), (2, 1)):
    parts = tf.stack([accumulation.micro_batch(mems, i, n, groups, axis=1) for i in range(n)])
    np.testing.assert_array_equal(accumulation.join_micro_batches(parts, groups, axis=1), mems)
  part = accumulation.micro_batch(mems, 1, 2, groups=2, axis=1).numpy()
  np.testing.assert_array_equal(part, mems.numpy()[:, [2, 3, 6, 7]])


def test_a_split_that_cannot_be_equal_is_one_line():
  with pytest.raises(ValueError, match=r"--gradient_accumulation_steps=3 must split the per-replica batch of 8"):
    accumulation.check_split(8, 3)
  with pytest.raises(ValueError, match=r"paired forward and backward rows .* divides 2 \(half the batch"):
    accumulation.check_split(4, 4, groups=2)
  with pytest.raises(ValueError, match="--gradient_accumulation_steps must be a positive integer"):
    accumulation.check_split(8, 0)
  accumulation.check_split(8, 2, groups=2)


@pytest.fixture(scope="module")
def replays():
  """replay(golden, **flags) -> (golden, meta, ours), each run once per module."""
  step_parity = _step_parity()
  cache = {}

  def replay(name, **overrides):
    key = (name, tuple(sorted(overrides.items())))
    if key not in cache:
      cache[key] = step_parity.replay(os.path.join(GOLDEN_DIR, f"{name}.npz"), **overrides)
    return cache[key]
  return replay


def as_golden(g, meta, ours):
  """Our replay in the golden format (the golden's inputs and settings, our results), so that `compare` judges
  another replay against it."""
  step_parity = _step_parity()
  out = {k: v for k, v in g.items() if k in step_parity.INPUT_KEYS[meta["mode"]]}
  out.update({k: np.asarray(ours[k]) for k in step_parity.step_keys(g, meta)})
  for kind in ("grad0", "final"):  # the variables and slots the golden holds
    out.update({k: ours[kind][k[len(kind) + 1:]] for k in g if k.startswith(kind + "/")})
  return out


def failed_rows(g, meta, ours, initial):
  return {name: row for name, row in _step_parity().compare(g, meta, ours, initial).items() if not row[2]}


@pytest.mark.parametrize("golden,n,flags", [
    # mems (mem_len 20) and bi_data: micro-batches of 1 forward + 1 backward row (slow, the default suite's 15
    # minutes; by default: test_run_classifier.py's test_mirrored_fine_tuning_equals_one_device accumulates)
    pytest.param("pretrain_adam_gpu", 2, {}, marks=pytest.mark.slow),
    # mems (mem_len 24), untie_r false, relu, no bi_data, batch 5: 5 micro-batches of 1 row
    pytest.param("../train_step_tied/pretrain_adam_gpu", 5, {}, marks=pytest.mark.slow),
    # clip_mode indexed_slices (the CLI's default on CPU): micro-batches of 1 row (the default suite's fine-tuning
    # accumulation: test_run_classifier.py's test_mirrored_fine_tuning_equals_one_device)
    pytest.param("finetune_cls_gpu", 4, {}, marks=pytest.mark.slow),
    pytest.param("finetune_cls_gpu", 4, {"clip_mode": "dense"}, marks=pytest.mark.slow),  # 2 more replays
])
def test_micro_batches_give_the_whole_batch_update(golden, n, flags, replays):
  g, meta, whole = replays(golden, **flags)
  _, _, micro = replays(golden, gradient_accumulation_steps=n, **flags)
  assert micro["global_step"] == [1, 2, 3]  # one update per step
  # Equal to our whole-batch run within rounding: every step's loss, gnorm, lr (and mems), the step-1 gradients
  # (batch_gradients), the final variables and Adam slots.
  assert not failed_rows(as_golden(g, meta, whole), meta, micro, whole["initial"])
  np.testing.assert_allclose(micro["gnorm"], whole["gnorm"], rtol=2e-6)
  np.testing.assert_allclose(micro["loss"], whole["loss"], rtol=2e-6)
  if golden.startswith("pretrain"):
    np.testing.assert_allclose(micro["new_mems"], whole["new_mems"], rtol=1e-5, atol=1e-6)
  # ... and the original's whole-batch steps are still met (clip_mode dense on the GPU golden: its gnorm differs).
  if not flags:
    assert not failed_rows(g, meta, micro, whole["initial"])


@pytest.mark.slow
def test_micro_batches_under_xla_give_the_whole_batch_update(replays):
  """--jit_compile: each micro-batch's forward and backward is the compiled unit."""
  g, meta, whole = replays("pretrain_adam_gpu")
  _, _, micro = replays("pretrain_adam_gpu", gradient_accumulation_steps=2, jit_compile=True)
  assert not failed_rows(as_golden(g, meta, whole), meta, micro, whole["initial"])


@pytest.mark.slow  # the default suite's 15 minutes; by default: test_micro_batches_give_the_whole_batch_update
def test_resume_between_updates_is_bit_identical(tmp_path):
  """4 updates of 2 micro-batches (pretraining: mems, bi_data), interrupted after update 2 (checkpoint, then a new
  Trainer that resumes from it), end bit-identical to an uninterrupted run: weights, slots, step and mems. An
  update is one step of the loop, so a checkpoint (or a SIGTERM's save) always falls between updates; a kill -9
  in the middle of one loses only that unfinished update, which the resumed run repeats."""
  step_parity = _step_parity()
  g, meta = step_parity.load(os.path.join(GOLDEN_DIR, "pretrain_adam_gpu.npz"))
  batches = step_parity.batches(g, meta)
  data = step_parity.dataset_fn(batches + batches[:1])
  quiet = lambda line: None

  def trainer(name):
    return step_parity.build_trainer(GOLDEN_DIR, meta, str(tmp_path / name), gradient_accumulation_steps=2)[0]

  full = trainer("full")
  full.train(data, train_steps=4, log_fn=quiet)
  first = trainer("resumed")
  first.train(data, train_steps=2, log_fn=quiet)  # saves ckpt-2 at its end
  second = trainer("resumed")
  assert second.step == 2
  second.train(data, train_steps=4, log_fn=quiet)
  ours, expected = step_parity.final_state(second), step_parity.final_state(full)
  assert ours.keys() == expected.keys()
  for name in expected:
    np.testing.assert_array_equal(ours[name], expected[name], err_msg=name)
  np.testing.assert_array_equal(second.mems.numpy(), full.mems.numpy())


@pytest.mark.slow  # the default suite's 15 minutes
@NEEDS_CPU_STATS
def test_micro_batches_take_less_memory(tmp_path):
  """The peak of the CPU allocator during a classifier step (above what it held before): 2 micro-batches hold one
  micro-batch's activations at a time, so the step needs much less than the whole batch's (here about 0.57 of it;
  0.22 with 4); same loss and gnorm. (Figures for a larger model: docs/training_step.md.)"""
  config = XLNetConfig(n_layer=2, d_model=128, n_head=2, d_head=64, d_inner=512, n_token=1000, untie_r=True,
                       ff_activation="gelu")
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0)
  rng = np.random.RandomState(0)
  features = {"input_ids": rng.randint(0, 1000, [8, 128]).astype(np.int32),
              "segment_ids": np.zeros([8, 128], np.int32), "input_mask": np.zeros([8, 128], np.float32),
              "label_ids": rng.randint(0, 2, [8]).astype(np.int32)}
  data = lambda input_context, start_step: tf.data.Dataset.from_tensors(features).repeat()
  initial, peaks, results = None, {}, {}
  for n in (1, 2):
    trainer = training.Trainer(
        training.make_strategy("one_device"), lambda: classifier_task.build_model(config, run_config, "classification_x", 2),
        classifier_task.ClassifierTask("classification_x"), str(tmp_path / str(n)),
        training.TrainConfig(learning_rate=1e-4, train_steps=2, global_batch_size=8, gradient_accumulation_steps=n))
    initial = initial or [v.numpy() for v in trainer.model.trainable_variables]
    for v, value in zip(trainer.model.trainable_variables, initial):
      v.assign(value)
    trainer.train(data, train_steps=1, log_fn=lambda line: None)  # traced, compiled, run once
    tf.config.experimental.reset_memory_stats("CPU:0")
    held = tf.config.experimental.get_memory_info("CPU:0")["current"]
    results[n] = trainer.train(data, train_steps=2, log_fn=lambda line: None)
    peaks[n] = tf.config.experimental.get_memory_info("CPU:0")["peak"] - held
  print(f"peak above what was held: whole batch {peaks[1] / 2**20:.1f} MiB, 2 micro-batches {peaks[2] / 2**20:.1f} MiB")
  assert peaks[2] < 0.7 * peaks[1], peaks
  assert results[2]["loss"] == pytest.approx(results[1]["loss"], rel=1e-5)
  assert results[2]["gnorm"] == pytest.approx(results[1]["gnorm"], rel=1e-5)


@pytest.mark.slow  # the default suite's 15 minutes
def test_bi_data_in_four_micro_batches_gives_the_whole_batch_update(tmp_path):
  """Pretraining with bi_data and mems, per-replica batch 8 ([4 forward | 4 backward] rows), in 2 and in 4
  micro-batches (each [f_i | b_i] pairs): every step's loss and gnorm, the mems after 3 steps (each row's own
  history) and the final weights equal the whole batch's within float32 rounding. The goldens' bi_data batch (4)
  allows 2 micro-batches at most; this covers the larger splits."""
  config = XLNetConfig(n_layer=2, d_model=8, n_head=2, d_head=6, d_inner=11, ff_activation="gelu", untie_r=True,
                       n_token=32)
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0,
                         mem_len=5, reuse_len=4, bi_data=True, init_std=0.5)  # large weights: positions count
  bsz, seq, num_predict = 8, 7, 3
  rng = np.random.RandomState(0)

  def batch():
    target_mapping = np.zeros((bsz, num_predict, seq), np.float32)
    for b in range(bsz):
      target_mapping[b, np.arange(num_predict), rng.choice(seq, num_predict, replace=False)] = 1
    return {"input_k": rng.randint(0, 32, (bsz, seq)).astype(np.int32),
            "seg_id": (np.arange(seq) >= 4).astype(np.int32)[None].repeat(bsz, 0),
            "input_q": target_mapping.sum(1), "perm_mask": (rng.rand(bsz, seq, seq) < 0.4).astype(np.float32),
            "target_mapping": target_mapping, "target": rng.randint(0, 32, (bsz, num_predict)).astype(np.int32),
            "target_mask": np.ones((bsz, num_predict), np.float32)}

  batches = [batch() for _ in range(3)]
  data = lambda input_context, start_step: tf.data.Dataset.from_tensor_slices(
      {k: np.stack([b[k] for b in batches]) for k in batches[0]})
  runs = {}
  for n in (1, 2, 4):
    keras.utils.set_random_seed(3)
    trainer = training.Trainer(
        training.make_strategy("one_device"), lambda: XLNetModel(config, run_config), PretrainTask(),
        str(tmp_path / str(n)),
        training.TrainConfig(learning_rate=1e-3, train_steps=3, global_batch_size=bsz, iterations=1,
                             gradient_accumulation_steps=n))
    steps = []
    trainer.train(data, train_steps=3, log_fn=lambda line: None,
                  metrics_fn=lambda m: steps.append((float(m["loss"]), float(m["gnorm"]))))
    runs[n] = (np.array(steps), trainer.mems.numpy(), [v.numpy() for v in trainer.model.trainable_variables])
  whole_steps, whole_mems, whole_vars = runs[1]
  assert whole_steps.shape == (3, 2)
  for n in (2, 4):
    steps, mems, variables = runs[n]
    np.testing.assert_allclose(steps, whole_steps, rtol=2e-6, err_msg=f"{n} micro-batches: loss, gnorm")
    np.testing.assert_allclose(mems, whole_mems, rtol=1e-5, atol=1e-6, err_msg=f"{n} micro-batches: mems")
    # Adam moves an entry by about the learning rate whatever its gradient's size, so an entry whose gradient is in
    # the rounding noise may move differently: allowed 1 % of the 3 steps' 3e-3.
    for i, (v, v_whole) in enumerate(zip(variables, whole_vars)):
      np.testing.assert_allclose(v, v_whole, rtol=1e-5, atol=3e-5, err_msg=f"{n} micro-batches: variable {i}")
