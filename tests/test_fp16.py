"""float16 mixed precision with dynamic loss scaling (`--use_fp16`, `xlnet_tf.training.loss_scale`): a tiny model
trains as in float32 with float32 variables and slots; an overflowed step is skipped (nothing but the step moves),
also when only one of two replicas overflows; a resumed run is bit-identical, scale included; run_classifier.py
trains, evaluates and predicts with --use_fp16 on two replicas."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import checkpoint, training
from xlnet_tf.config import RunConfig, XLNetConfig
from xlnet_tf.data import corpora
from xlnet_tf.modeling import ops, scores
from xlnet_tf.modeling.xlnet import XLNetModel
from xlnet_tf.tasks.pretrain.task import PretrainTask

PY = sys.executable
SPM = "tests/testdata/data/spm/spiece.model"
CONFIG = dict(n_layer=2, d_model=8, n_head=2, d_head=6, d_inner=11, ff_activation="gelu", untie_r=True, n_token=32)
BSZ, SEQ, NUM_PREDICT, MEM_LEN, REUSE_LEN = 4, 7, 3, 5, 4
NUM_BATCHES = 8  # the data: these batches, repeated (a tiny model can learn them in tens of steps)


def pretraining_batches(seed=0):
  """NUM_BATCHES pretraining batches (the reader's features, batch-major), stacked on a leading axis."""
  rng = np.random.default_rng(seed)
  n = NUM_BATCHES
  mapping = np.zeros([n, BSZ, NUM_PREDICT, SEQ], np.float32)
  for b in range(n):
    for r in range(BSZ):
      mapping[b, r, np.arange(NUM_PREDICT), rng.choice(SEQ, NUM_PREDICT, replace=False)] = 1.0
  input_k = rng.integers(0, 8, [n, BSZ, SEQ]).astype(np.int32)  # 8 of the 32 ids: a first thing to learn
  return {"input_k": input_k,
          "seg_id": (np.arange(SEQ) >= 3).astype(np.int32)[None, None].repeat(n, 0).repeat(BSZ, 1),
          "input_q": mapping.sum(2), "perm_mask": (rng.random([n, BSZ, SEQ, SEQ]) < 0.3).astype(np.float32),
          "target_mapping": mapping, "target": np.einsum("nbpi,nbi->nbp", mapping, input_k).astype(np.int32),
          "target_mask": np.ones([n, BSZ, NUM_PREDICT], np.float32)}


BATCHES = pretraining_batches()


def dataset_fn(ctx, start):
  """The run's batches from step `start` on (as a resumed run reads them), split into the replicas' rows."""
  batches = tf.data.Dataset.from_tensor_slices(BATCHES).repeat().skip(start)
  return batches.unbatch().batch(BSZ // ctx.num_replicas_in_sync, drop_remainder=True)


def make_trainer(model_dir, use_fp16, train_steps=8, learning_rate=1e-2, iterations=1, save_steps=None,
                 strategy="one_device", mem_len=MEM_LEN, save_at_start=False):
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0,
                         mem_len=mem_len, reuse_len=REUSE_LEN, use_fp16=use_fp16)
  tf.keras.utils.set_random_seed(1)
  return training.Trainer(training.make_strategy(strategy), lambda: XLNetModel(XLNetConfig(**CONFIG), run_config),
                          PretrainTask(), str(model_dir),
                          training.TrainConfig(learning_rate=learning_rate, train_steps=train_steps,
                                               global_batch_size=BSZ, iterations=iterations, save_steps=save_steps,
                                               save_at_start=save_at_start))


def state(trainer):
  """Every variable of the run: weights, optimizer (step, slots), mems, loss scale (None without)."""
  values = {v.path: v.numpy() for v in trainer.model.trainable_variables}
  slots = [v for v in trainer.optimizer.variables if v is not trainer.optimizer.iterations]
  values.update({f"opt/{i}/{v.name}": v.numpy() for i, v in enumerate(slots)})
  values["step"] = trainer.optimizer.iterations.numpy()
  values["mems"] = trainer.mems.numpy()
  if trainer.loss_scale is not None:
    values.update({f"loss_scale/{v.name}": v.numpy() for v in trainer.loss_scale.variables})
  return values


def test_use_fp16_and_use_bfloat16_exclude_each_other():
  with pytest.raises(ValueError, match="--use_bfloat16 or --use_fp16"):
    RunConfig(is_training=True, use_tpu=False, use_bfloat16=True, dropout=0.0, dropatt=0.0, use_fp16=True)


def test_float16_scores_stay_finite_where_every_key_is_blocked():
  """A blocked float16 score plus the mask value (-6e4) would pass -65504 and become -inf; a row with every key
  blocked would then give NaN probabilities. It stays at -6e4: a finite (uniform) row, as float32's -1e30 gives."""
  ac = tf.constant(np.full([1, 1, 2, 3], -1e4), tf.float16)  # [N, B, Q, J], very negative scores
  blocked = tf.constant([[[[1, 1, 1], [0, 1, 1]]]], tf.float16)  # row 0: every key blocked
  bias = blocked * ops.mask_value(tf.float16)
  score = scores.score_sum(ac, tf.zeros_like(ac), None, None, bias)
  prob = tf.nn.softmax(score).numpy()
  assert np.isfinite(prob).all()
  np.testing.assert_allclose(prob[0, 0], [[1 / 3] * 3, [1, 0, 0]], atol=1e-3)


def test_float16_trains_like_float32_with_float32_variables_and_slots(tmp_path):
  """40 steps on 8 batches: the first step's loss and gradient norm equal float32's to float16 rounding, and the
  last loop's loss is float32's within 5% of what training took off.

  Tolerances: one step's gradients agree with float32's to ~1e-3 (float16 keeps 11 bits, 5e-4 relative, per op),
  so the first loss and gnorm within 1%. After that the runs part: Adam divides each element by its own running
  size, so an element whose gradient is nearly 0 moves by the sign of its float16 rounding. With random targets
  (nothing to learn) the last losses differed by about 20% of the small drop; with these learnable ones they
  agree to 1e-4 (2.1670 both, from 3.4747), so 5% of the drop leaves a margin. A step that is not unscaled (gnorm
  2**15 times larger), computed in float32 (no loss scale), or a loss that stops falling fails one of the
  checks."""
  logs = {}
  results = {}
  for use_fp16 in (False, True):
    trainer = make_trainer(tmp_path / str(use_fp16), use_fp16, train_steps=40, iterations=10)
    lines = logs[use_fp16] = []
    first = trainer.train(dataset_fn, train_steps=1, log_fn=lines.append)
    last = trainer.train(dataset_fn, log_fn=lines.append)
    results[use_fp16] = first, last, trainer
  (first32, last32, _), (first16, last16, trainer) = results[False], results[True]
  assert trainer.model.compute_dtype == "float16" and trainer.model.variable_dtype == "float32"
  assert trainer.loss_scale is not None and results[False][2].loss_scale is None
  assert {v.dtype for v in trainer.model.trainable_variables} == {"float32"}
  assert {v.dtype for v in trainer.optimizer.variables if "iteration" not in v.path} == {"float32"}
  output, _ = trainer.model(tf.constant(BATCHES["input_k"][0].T), seg_ids=tf.constant(BATCHES["seg_id"][0].T))
  assert output.dtype == tf.float16
  assert first16["loss"] == pytest.approx(first32["loss"], rel=1e-2)
  assert first16["gnorm"] == pytest.approx(first32["gnorm"], rel=1e-2)
  drop = first32["loss"] - last32["loss"]
  assert drop > 0.5
  assert abs(last16["loss"] - last32["loss"]) < 0.05 * drop
  assert all("| skipped 0 " in line + " " for line in logs[True]) and "skipped" not in "".join(logs[False])
  assert float(trainer.loss_scale.scale.numpy()) == 2.0 ** 15


def test_an_overflowed_step_is_skipped_and_counted(tmp_path):
  """Scaled gradients beyond float16 (scale 2**100): weights and slots stay, the step (data, lr) moves on, the scale
  halves, the log line counts the skip; Adam's bias correction counts applied steps only. The next step applies."""
  trainer = make_trainer(tmp_path, True)
  trainer.loss_scale.scale.assign(2.0 ** 100)
  before = state(trainer)
  lines = []
  trainer.train(dataset_fn, train_steps=1, log_fn=lines.append)
  after = state(trainer)
  assert trainer.step == 1 and "| skipped 1 " in lines[-1] + " " and "loss nan" in lines[-1]
  assert after["loss_scale/scale:0"] == 2.0 ** 99 and after["loss_scale/skipped:0"] == 1
  changed = [k for k in before if not np.array_equal(before[k], after[k])]
  assert sorted(changed) == ["loss_scale/scale:0", "loss_scale/skipped:0", "mems", "step"]
  np.testing.assert_allclose([float(p) for p in trainer.optimizer.beta_powers()], [0.9, 0.999], rtol=1e-7)
  trainer.loss_scale.scale.assign(2.0 ** 10)
  trainer.train(dataset_fn, train_steps=2, log_fn=lines.append)
  assert "| skipped 1 " in lines[-1] + " " and "loss nan" not in lines[-1]
  assert [k for k in state(trainer) if k.startswith("opt/") and np.array_equal(state(trainer)[k], after[k])] == []
  np.testing.assert_allclose([float(p) for p in trainer.optimizer.beta_powers()], [0.81, 0.999 ** 2], rtol=1e-6)
  assert trainer.loss_scale.good_steps.numpy() == 1


def test_gradients_not_finite_at_the_minimum_scale_stop_the_run(tmp_path):
  """A weight beyond float16's range makes the loss itself non-finite: halving the scale cannot help, so at the
  minimum scale 1 the run stops, as a float32 run stops on a non-finite loss."""
  trainer = make_trainer(tmp_path, True)
  trainer.model.lm_loss_layer.bias.assign(np.full(trainer.model.lm_loss_layer.bias.shape, 1e5, np.float32))
  trainer.loss_scale.scale.assign(2.0)
  with pytest.raises(FloatingPointError, match=r"not finite even unscaled .* Lower --learning_rate, check the data, "
                                                r"or train without --use_fp16 \(float32, or --use_bfloat16\)\.$"):
    trainer.train(dataset_fn, train_steps=3, log_fn=lambda _: None)


def test_a_new_run_saves_the_step_it_starts_from_where_asked(tmp_path):
  """The fine-tuning Estimator's `Saving checkpoints for 0` (--save_initial_checkpoint, sweep 35): ckpt-0 holds the
  initial weights; a resumed run does not save its first step again, and without save_at_start there is none."""
  for name, save_at_start, expected in (("asked", True, [0, 2]), ("not", False, [2])):
    trainer = make_trainer(tmp_path / name, False, save_steps=2, save_at_start=save_at_start)
    initial = {v.path: v.numpy() for v in trainer.model.trainable_variables}
    trainer.train(dataset_fn, train_steps=2, log_fn=lambda _: None)
    assert [step for step, _ in checkpoint.list_checkpoints(str(tmp_path / name))] == expected
  loaded = make_trainer(tmp_path / "asked", False)
  checkpoint.load_weights(loaded.model, str(tmp_path / "asked" / "ckpt-0"))
  for v in loaded.model.trainable_variables:
    np.testing.assert_array_equal(v.numpy(), initial[v.path], err_msg=v.path)
  trainer = make_trainer(tmp_path / "asked", False, train_steps=4, save_steps=2, save_at_start=True)
  assert trainer.restore_or_init() == 2
  trainer.train(dataset_fn, train_steps=4, log_fn=lambda _: None)
  assert [step for step, _ in checkpoint.list_checkpoints(str(tmp_path / "asked"))] == [0, 2, 4]
  # A run that fails before its next save (a loss of NaN): its start's checkpoint held the weights it failed from,
  # which a rerun resumed, its --init_* flags unread ("The last good checkpoint is D/ckpt-0", sweep 36). Dropped.
  trainer = make_trainer(tmp_path / "nan", False, learning_rate=1e30, save_steps=2, save_at_start=True)
  undone = []
  trainer.before_first_save = lambda: (lambda: undone.append(True))
  with pytest.raises(FloatingPointError, match=f"The last good checkpoint is none \\(no checkpoint in {tmp_path}/nan"):
    trainer.train(dataset_fn, train_steps=4, log_fn=lambda _: None)
  assert [name for name in os.listdir(tmp_path / "nan") if not name.startswith("events.")] == []
  assert undone == [True]  # the run files written before its first save, put back


def test_train_refuses_a_train_steps_that_is_no_positive_integer(tmp_path):
  """train(train_steps=0) trained to TrainConfig.train_steps, 2.5 to step 3, "3" was a bare TypeError (sweep 36)."""
  trainer = make_trainer(tmp_path, False)
  for steps in (0, 2.5, "3"):
    with pytest.raises(ValueError, match=f"^train_steps must be a positive integer or None. Received: {steps!r}.$"):
      trainer.train(dataset_fn, train_steps=steps, log_fn=lambda _: None)
  assert trainer.step == 0


def test_train_refuses_batches_that_are_no_dict_or_hold_float_ids(tmp_path):
  """A dataset of (features, labels) tuples: `TypeError: tuple indices must be integers` in autograph's words; float
  token ids: Keras' dump of the call's arguments (sweep 36)."""
  trainer = make_trainer(tmp_path, False)
  with pytest.raises(ValueError, match=r"^dataset_fn's batches must be dicts of features by name .* Received: tuple "):
    trainer.train(lambda ctx, start: dataset_fn(ctx, start).map(lambda f: (f, f["target"])), train_steps=1,
                  log_fn=lambda _: None)
  floats = lambda ctx, start: dataset_fn(ctx, start).map(lambda f: dict(f, input_k=tf.cast(f["input_k"], tf.float32)))
  with pytest.raises(ValueError, match="^dataset_fn's batches hold input_k of float32: token ids are integers.$"):
    trainer.train(floats, train_steps=1, log_fn=lambda _: None)
  assert trainer.step == 0


def test_a_trainer_refuses_a_model_dir_that_is_a_file(tmp_path):
  """Built, it trained every step, then failed at the first save with `Could not write checkpoint F/ckpt-2 (... is
  not a directory) ... free space` (sweep 35)."""
  (tmp_path / "notes").write_text("mine")
  with pytest.raises(ValueError, match=f"^Cannot use model_dir {tmp_path}/notes: it is a file, left as it is\."):
    make_trainer(tmp_path / "notes", False)
  assert (tmp_path / "notes").read_text() == "mine"


@pytest.mark.slow  # the default suite's 15 minutes; by default: run_pretrain's SIGTERM resume
def test_resume_is_bit_identical_scale_included(tmp_path):
  """8 steps in one go equal 4, a checkpoint, a new Trainer restoring it, and 4 more: weights, slots, step, mems and
  the loss scale (which overflows and grows in these steps: from 2**17, doubling after 2 good steps, it went
  2**16, 2**17, 2**18, 2**17, 2**18 with 2 skipped steps)."""
  def run(model_dir, stops):
    for train_steps in stops:
      trainer = make_trainer(model_dir, True, save_steps=4)
      trainer.loss_scale.growth_interval = 2
      if not trainer.restore_or_init():
        trainer.loss_scale.scale.assign(2.0 ** 17)
      trainer.train(dataset_fn, train_steps=train_steps, log_fn=lambda _: None)
    return state(trainer)

  full = run(tmp_path / "full", [8])
  resumed = run(tmp_path / "resumed", [4, 8])
  skipped = full["loss_scale/skipped:0"]
  assert full["step"] == 8 and 1 <= skipped < 8 and full["loss_scale/scale:0"] > 2.0 ** 17 / 2 ** skipped  # it grew
  assert sorted(full) == sorted(resumed)
  for key, value in full.items():
    np.testing.assert_array_equal(resumed[key], value, err_msg=key)


MIRRORED_SCRIPT = r"""
import json
import os
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import test_fp16

trainer = test_fp16.make_trainer("{model_dir}", True, strategy="mirrored")
scale_objective = trainer.loss_scale.scale_objective

def replica_0_overflows(objective):  # replica 0 scales by 2**100 at step 0: only its gradients overflow
  replica = tf.distribute.get_replica_context().replica_id_in_sync_group
  huge = tf.logical_and(tf.equal(replica, 0), tf.equal(trainer.optimizer.iterations, 0))
  return tf.where(huge, objective * 2.0 ** 100, scale_objective(objective))

trainer.loss_scale.scale_objective = replica_0_overflows
before = test_fp16.state(trainer)
lines = []
trainer.train(test_fp16.dataset_fn, train_steps=1, log_fn=lines.append)
skipped = test_fp16.state(trainer)
trainer.train(test_fp16.dataset_fn, train_steps=2, log_fn=lines.append)
after = test_fp16.state(trainer)
replicas = [[v.numpy().tolist() for v in trainer.strategy.experimental_local_results(w.value)]
            for w in trainer.model.trainable_variables[:3]]
print("RESULT " + json.dumps({{
    "changed_by_skip": sorted(k for k in before if (before[k] != skipped[k]).any()),
    "changed_after": sorted(k for k in before if (before[k] != after[k]).any()),
    "scale": float(after["loss_scale/scale:0"]), "lines": lines, "replicas": replicas}}))
"""


@pytest.mark.slow  # about a minute: a subprocess on two logical CPUs
def test_one_replica_overflowing_skips_the_step_on_both(tmp_path):
  """MirroredStrategy over two logical CPUs: when only replica 0's gradients overflow, both replicas skip the step
  (the decision is taken over all replicas); the following steps apply on both, which stay equal."""
  script = tmp_path / "mirrored.py"
  script.write_text(MIRRORED_SCRIPT.format(model_dir=tmp_path / "model"))
  env = dict(__import__("os").environ, PYTHONPATH=f"{__import__('os').getcwd()}:tests", CUDA_VISIBLE_DEVICES="")
  proc = subprocess.run([PY, str(script)], capture_output=True, text=True, timeout=300, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1][len("RESULT "):])
  assert result["changed_by_skip"] == ["loss_scale/scale:0", "loss_scale/skipped:0", "mems", "step"]
  assert result["scale"] == 2.0 ** 14 and "| skipped 1 " in result["lines"][0] + " "
  assert all("| skipped 1 " in line + " " and "loss nan" not in line for line in result["lines"][1:])
  assert len([k for k in result["changed_after"] if k.startswith("model/")]) > 20
  for values in result["replicas"]:
    np.testing.assert_array_equal(values[0], values[1])


@pytest.mark.slow  # the default suite's 15 minutes; by default: float16 trains like float32
def test_run_classifier_trains_evaluates_and_predicts_with_use_fp16(tmp_path):
  """run_classifier.py end to end with --use_fp16 (two replicas: the test above): the log lines count skipped
  steps, evaluation and prediction run in float16 and give finite numbers."""
  corpora.write_aclimdb(str(tmp_path / "aclImdb"), num_train=8, num_dev=6, seed=3)
  config = tmp_path / "xlnet_config.json"
  config.write_text(json.dumps(dict(CONFIG, n_token=1000)))
  cmd = [PY, "run_classifier.py", "--task_name=imdb",
         f"--data_dir={tmp_path / 'aclImdb'}", f"--spiece_model_file={SPM}", f"--model_config_path={config}",
         "--max_seq_length=32", "--uncased=False", "--do_train=True", "--do_eval=True", "--do_predict=True",
         f"--output_dir={tmp_path / 'records'}", f"--model_dir={tmp_path / 'model'}",
         f"--predict_dir={tmp_path / 'predict'}", "--train_batch_size=4", "--train_steps=4",
         "--iterations=2", "--eval_batch_size=4", "--predict_batch_size=4", "--learning_rate=1e-3", "--seed=1",
         "--use_fp16=True"]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  progress = [l for l in proc.stdout.splitlines() if l.startswith("[")]
  assert len(progress) == 2 and all("| skipped 0 " in l + " " for l in progress), proc.stdout
  eval_line = [l for l in proc.stdout.splitlines() if l.startswith("Eval result |")]
  assert len(eval_line) == 1 and "eval_accuracy" in eval_line[0] and "nan" not in eval_line[0]
  logits = np.array(json.loads((tmp_path / "predict" / "imdb.logits.json").read_text()))
  assert logits.shape == (8, 2) and np.isfinite(logits).all()  # 6 dev reviews, 2 eval padding rows (as the original)


@pytest.mark.slow  # the default suite's 15 minutes; by default: test_an_overflowed_step_is_skipped_and_counted
def test_gradient_accumulation_in_float16_skips_no_more_steps_than_the_whole_batch(tmp_path):
  """With accumulation the objective is the micro-batch's loss SUM (divided by the batch's weight after): scaled
  as it was, its float16 gradients were the weight times larger, overflowed, and the first steps were skipped (2 of
  8 here; about log2(85 x 32) with the README's pretraining batch). Scaled then as the micro-batch's mean, each
  row's gradients were still N times the whole batch's: from a scale of 2**18, 2 and 3 steps skipped with 2 and 4
  micro-batches where the whole batch skips 1 (faith 21, B1). It is scaled as the whole step's mean now."""
  skipped = []
  for steps, scale in ((1, None), (2, None), (1, 2.0**18), (2, 2.0**18), (4, 2.0**18)):
    run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0,
                           mem_len=MEM_LEN, reuse_len=REUSE_LEN, use_fp16=True)
    tf.keras.utils.set_random_seed(1)
    trainer = training.Trainer(training.make_strategy("one_device"),
                               lambda: XLNetModel(XLNetConfig(**CONFIG), run_config), PretrainTask(),
                               str(tmp_path / f"{steps}-{scale}"),
                               training.TrainConfig(learning_rate=1e-2, train_steps=8, global_batch_size=BSZ,
                                                    iterations=4, gradient_accumulation_steps=steps))
    trainer.restore_or_init()
    if scale:
      trainer.loss_scale.scale.assign(scale)
    trainer.train(dataset_fn, log_fn=lambda _: None)
    skipped.append(trainer.loss_scale.report()["skipped"])
  assert skipped == [0, 0, 1, 1, 1]


@pytest.mark.parametrize("use_fp16", [False, pytest.param(True, marks=pytest.mark.slow)])  # the suite's 15 minutes
def test_a_step_that_fails_moves_nothing_and_the_trainer_goes_on(tmp_path, use_fp16):
  """A step failing on its data (a token id beyond the vocabulary) still advanced the step counter (the increment
  did not wait for the gradients): the same Trainer then went on one step ahead, its ckpt-N holding N-1 updates and
  the schedule skipping a step (sweep 17, P3). A dataset that runs out is one line naming the step."""
  trainer = make_trainer(tmp_path, use_fp16, iterations=2)
  trainer.train(dataset_fn, train_steps=2, log_fn=lambda _: None)

  def bad_dataset_fn(ctx, start):
    bad = dict(BATCHES, input_k=np.where(np.arange(NUM_BATCHES)[:, None, None] == 3, 5000, BATCHES["input_k"]))
    batches = tf.data.Dataset.from_tensor_slices(bad).skip(start)
    return batches.unbatch().batch(BSZ // ctx.num_replicas_in_sync, drop_remainder=True)

  with pytest.raises(tf.errors.InvalidArgumentError, match="5000 is not in"):
    trainer.train(bad_dataset_fn, train_steps=4, log_fn=lambda _: None)
  reference = make_trainer(tmp_path / "reference", use_fp16, iterations=2)
  reference.train(dataset_fn, train_steps=3, log_fn=lambda _: None)
  after, expected = state(trainer), state(reference)
  assert after["step"] == 3  # step 3 applied, step 4 (batch 3) failed and moved nothing
  assert [k for k in expected if not np.array_equal(expected[k], after[k])] == []
  with pytest.raises(ValueError, match=r"^The dataset ran out at step 6: dataset_fn's dataset must give a batch for "
                                       r"every step up to train_steps 8 \(end it with \.repeat\(\)\)\. The steps "
                                       r"before it were applied; nothing was saved"):
    trainer.train(lambda ctx, start: dataset_fn(ctx, start).take(2), train_steps=8, log_fn=lambda _: None)
  assert state(trainer)["step"] == 5


def test_a_float32_run_resumed_in_float16_or_with_other_mems_continues_with_them_afresh(tmp_path):
  """A float32 checkpoint has no loss scale: the resume was refused, its line listing every changed flag as the
  cause (sweep 25, C2), though the README advises --use_fp16 for a run out of memory. It resumes, its weights,
  slots and step the checkpoint's, the loss scale a fresh float16 run's, and says so; the variables TensorFlow
  lists for other missing state are named, not its reprs (sweep 17, P1)."""
  from xlnet_tf import run_checkpoint  # pylint: disable=import-outside-toplevel
  first = make_trainer(tmp_path, False)
  first.optimizer.iterations.assign(3)
  first.checkpoints.manager.save(checkpoint_number=3)
  lines = []
  resumed = make_trainer(tmp_path, True)
  assert resumed.restore_or_init(None, log_fn=lines.append) == 3
  assert lines == [f"Resumed from {tmp_path}/ckpt-3 at step 3. It holds no loss scale (a float32 or bfloat16 run's): "
                   "float16's starts afresh."]
  fresh = state(make_trainer(tmp_path / "fresh", True))
  assert {k: v for k, v in state(resumed).items() if k.startswith("loss_scale/")} == {
      k: v for k, v in fresh.items() if k.startswith("loss_scale/")}
  before, after = state(first), state(resumed)
  assert [k for k in before if not np.array_equal(before[k], after[k])] == []
  # mems of another --mem_len: refused, TensorFlow's shape text and every changed flag in the line (sweep 25, C4);
  # they start afresh, as the original's train_gpu.py, which keeps them out of its checkpoints, starts every resume's
  first.mems.global_variable.assign(tf.ones_like(first.mems.global_variable))  # a run's after its steps
  first.checkpoints.manager.save(checkpoint_number=4)
  lines = []
  other = make_trainer(tmp_path, False, mem_len=MEM_LEN + 2)
  assert other.restore_or_init(None, log_fn=lines.append) == 3
  shapes = [other.mems.numpy().shape[0], MEM_LEN, other.mems.numpy().shape[2], other.mems.numpy().shape[3]]
  assert lines == [f"Resumed from {tmp_path}/ckpt-4 at step 3. Its mems are of shape {shapes}, this run's "
                   f"{list(other.mems.numpy().shape)} (another --mem_len or batch): they start afresh, as every "
                   "resume of the original's."]
  assert not other.mems.numpy().any() and make_trainer(tmp_path, False).restore_or_init(None) == 3
  # None at all (--mem_len=0): refused as lacking them (sweep 26, B3).
  none = make_trainer(tmp_path / "none", False, mem_len=0)
  none.checkpoints.manager.save(checkpoint_number=2)
  lines = []
  assert make_trainer(tmp_path / "none", False).restore_or_init(None, log_fn=lines.append) == 0
  assert lines == [f"Resumed from {tmp_path}/none/ckpt-2 at step 0. It holds no mems (a --mem_len=0 run's): this "
                   "run's start afresh."]
  reason = ("Found 2 Python objects that were not bound to checkpointed values, likely due to changes in the Python "
            "program. Showing 2 of 2 unmatched objects: [<tf.Variable 'skipped:0' shape=() dtype=int64, numpy=0>, "
            "<Variable path=seed_generator_4/seed_generator_state, shape=(2,), dtype=uint32, value=[0 0]>]")
  assert run_checkpoint._variable_names(reason) == (  # pylint: disable=protected-access
      "it lacks 2 of this run's variables: skipped, seed_generator_4/seed_generator_state")


def test_training_past_the_schedule_s_end_says_so(tmp_path):
  """Trainer.train(train_steps=N) past TrainConfig.train_steps trained at the schedule's final learning rate (0 by
  default) without a word (sweep 17, P8)."""
  trainer = make_trainer(tmp_path, False, train_steps=2)
  lines = []
  assert trainer.train(dataset_fn, train_steps=3, log_fn=lines.append)["lr"] == 0.0
  assert lines[0] == ("Warning: training to step 3, past the learning rate schedule's end at TrainConfig.train_steps=2:"
                      " the steps after it use its final learning rate (learning_rate x min_lr_ratio = 0).")


@pytest.mark.slow  # the default suite's 15 minutes
def test_a_trainer_of_a_model_or_of_a_dict_config_is_one_line(tmp_path):
  """Trainer(strategy, model, ...) (a model, not a function building one) failed calling it (`missing a required
  argument: 'input_ids'`), a dict config with `'dict' object has no attribute 'global_batch_size'` (sweep 17, P6)."""
  trainer = make_trainer(tmp_path, False)
  args = dict(strategy=trainer.strategy, model_fn=lambda: trainer.model, task=PretrainTask(), model_dir=str(tmp_path),
              config=trainer.config)
  with pytest.raises(TypeError, match="^Trainer's model_fn must be a function that builds the model .* Received: "
                                      "XLNetModel."):
    training.Trainer(**dict(args, model_fn=trainer.model))
  with pytest.raises(TypeError, match="^Trainer's config must be a TrainConfig. Received: dict."):
    training.Trainer(**dict(args, config=dict(learning_rate=1e-3, train_steps=4, global_batch_size=BSZ)))
  with pytest.raises(ValueError, match=f"^dataset_fn's batches have 2 rows per replica, where TrainConfig."
                                       f"global_batch_size={BSZ} over 1 replica\\(s\\) means {BSZ}. Batch the"):
    trainer.train(lambda ctx, start: dataset_fn(ctx, start).unbatch().batch(2, drop_remainder=True), train_steps=1,
                  log_fn=lambda _: None)
  # On two replicas (each one's batch in a PerReplicaSpec: the check saw none; sweep 18, R1).
  proc = subprocess.run([PY, "-c", TWO_REPLICAS_WRONG_BATCH.format(model_dir=tmp_path / "mirrored")],
                        capture_output=True, text=True, timeout=300, cwd="tests")
  assert proc.stdout.strip().splitlines()[-1] == (
      f"dataset_fn's batches have {BSZ} rows per replica, where TrainConfig.global_batch_size={BSZ} over 2 "
      f"replica(s) means {BSZ // 2}. Batch the dataset by input_context.get_per_replica_batch_size(global_batch_size)."
  ), proc.stderr[-2000:]


@pytest.mark.slow  # the default suite's 15 minutes
def test_a_dataset_batched_without_drop_remainder_is_checked_as_it_is_read(tmp_path):
  """Batches of unknown size (batched without drop_remainder): the check of their rows saw none, and a short last
  batch failed deep in the model (with mems: a ConcatOp error) or trained on fewer rows (sweep 18, not taken then).
  They are checked as they are read; batches of the right rows train as the same batches of known size."""
  unknown = lambda ctx, start: dataset_fn(ctx, 0).unbatch().take(2 * BSZ + 1).batch(BSZ).skip(start)  # 4, 4, 1
  assert unknown(tf.distribute.InputContext(), 0).element_spec["input_k"].shape[0] is None
  trainers = [make_trainer(tmp_path / name, False) for name in ("known", "unknown")]
  trainers[0].train(dataset_fn, train_steps=2, log_fn=lambda _: None)
  trainers[1].train(unknown, train_steps=2, log_fn=lambda _: None)
  for name, value in state(trainers[0]).items():
    np.testing.assert_array_equal(state(trainers[1])[name], value, err_msg=name)
  with pytest.raises(ValueError) as error:
    trainers[1].train(unknown, train_steps=3, log_fn=lambda _: None)
  assert str(error.value) == (
      f"dataset_fn's batches have other rows per replica than {BSZ} (at step 3: batched without "
      f"drop_remainder=True, or by another size?), where TrainConfig.global_batch_size={BSZ} over 1 replica(s) means {BSZ}. Batch the "
      "dataset by input_context.get_per_replica_batch_size(global_batch_size), with drop_remainder=True.")
  assert state(trainers[1])["step"] == 2


def test_a_first_save_that_fails_puts_the_run_files_back(tmp_path, monkeypatch):
  """A resume with other flags whose first save failed (a full disk) had already written its run_flags.json: the
  next rerun named flags of steps never saved as the checkpoints' (sweep 19, F11). They are put back (a first run's
  removed), and written again before the next save."""
  trainer = make_trainer(tmp_path, False)
  (tmp_path / "run_flags.json").write_text('{"learning_rate": 1e-05}')
  (tmp_path / "xlnet_config.json").write_text("{}")
  trainer.before_first_save = lambda: training.write_run_files(str(tmp_path), XLNetConfig(**CONFIG),
                                                               {"learning_rate": 5e-05})
  save = trainer.checkpoints.save

  def full_disk(step):
    raise OSError(28, "No space left on device")
  monkeypatch.setattr(trainer.checkpoints, "save", full_disk)
  with pytest.raises(OSError):
    trainer.save()
  assert json.loads((tmp_path / "run_flags.json").read_text()) == {"learning_rate": 1e-05}
  assert (tmp_path / "xlnet_config.json").read_text() == "{}"
  monkeypatch.setattr(trainer.checkpoints, "save", save)
  trainer.save()
  assert json.loads((tmp_path / "run_flags.json").read_text()) == {"learning_rate": 5e-05}
  first = make_trainer(tmp_path / "first", False)
  first.before_first_save = lambda: training.write_run_files(str(tmp_path / "first"), XLNetConfig(**CONFIG), {})
  monkeypatch.setattr(first.checkpoints, "save", full_disk)
  with pytest.raises(OSError):
    first.save()
  assert not list((tmp_path / "first").glob("*.json"))


TWO_REPLICAS_WRONG_BATCH = r"""
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import test_fp16

trainer = test_fp16.make_trainer("{model_dir}", False, strategy="mirrored")
try:
  trainer.train(lambda ctx, start: test_fp16.dataset_fn(ctx, start).unbatch().batch(test_fp16.BSZ, drop_remainder=True),
                train_steps=1)
except ValueError as e:
  print(e)
"""
