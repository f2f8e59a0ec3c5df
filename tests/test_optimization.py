"""Tests for xlnet_tf/training/optimization.py and its pieces (schedule.py, adam.py, clipping.py, slot_names.py)
against the original `model_utils.get_train_op` formulas.

Expected numbers are written out by hand or recomputed in numpy from the original (TF1) formulas; where TF 2.21
still ships the TF1 code (`tf.compat.v1.train.polynomial_decay`, `cosine_decay`, `AdamOptimizer`), it is used as
a second oracle.
"""

import contextlib
import json
import math
import os
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.training import adam, clipping, optimization, slot_names
from xlnet_tf.training import schedule as schedule_lib


def make_variable(path, value):
  """A keras.Variable whose `.path` is `path`, as the model's variables would have."""
  *scopes, name = path.split("/")
  with contextlib.ExitStack() as stack:
    for scope in scopes:
      stack.enter_context(keras.name_scope(scope))
    variable = keras.Variable(np.asarray(value, np.float32), name=name)
  assert variable.path == path
  return variable


def schedule_values(schedule, steps):
  return [float(schedule(step)) for step in steps]


# ---------------------------------------------------------------------------------------------------------------
# Learning-rate schedule

def test_poly_with_warmup_matches_hand_values_and_tf1():
  schedule = schedule_lib.lr_schedule(2.0, train_steps=10, warmup_steps=4, decay_method="poly", min_lr_ratio=0.25)
  # Warm-up 2*s/4; then from 2.0 down to 0.5 over 6 steps, counted from the end of warm-up; clamped after.
  expected = [0.0, 0.5, 1.0, 1.5, 2.0, 1.75, 1.5, 1.25, 1.0, 0.75, 0.5, 0.5, 0.5]
  np.testing.assert_allclose(schedule_values(schedule, range(13)), expected, rtol=1e-6)
  tf1 = [float(tf.compat.v1.train.polynomial_decay(2.0, s - 4, 6, end_learning_rate=0.5)()) for s in range(4, 13)]
  assert schedule_values(schedule, range(4, 13)) == tf1


def test_poly_without_warmup():
  schedule = schedule_lib.lr_schedule(2.0, train_steps=8, decay_method="poly")
  np.testing.assert_allclose(schedule_values(schedule, [0, 2, 4, 8, 9]), [2.0, 1.5, 1.0, 0.0, 0.0], atol=1e-7)


def test_cos_with_warmup_matches_hand_values_and_tf1():
  schedule = schedule_lib.lr_schedule(1.0, train_steps=6, warmup_steps=2, decay_method="cos", min_lr_ratio=0.1)
  cos_at = lambda frac: 0.9 * 0.5 * (1 + math.cos(math.pi * frac)) + 0.1
  expected = [0.0, 0.5, 1.0, cos_at(0.25), cos_at(0.5), cos_at(0.75), 0.1, 0.1]
  np.testing.assert_allclose(schedule_values(schedule, range(8)), expected, rtol=1e-6)
  tf1 = [float(tf.compat.v1.train.cosine_decay(1.0, s - 2, 4, alpha=0.1)()) for s in range(2, 8)]
  assert schedule_values(schedule, range(2, 8)) == tf1


def test_cos_without_warmup():
  schedule = schedule_lib.lr_schedule(1.0, train_steps=4, decay_method="cos")
  np.testing.assert_allclose(schedule_values(schedule, [0, 1, 2, 4, 5]),
                             [1.0, 0.5 * (1 + math.cos(math.pi / 4)), 0.5, 0.0, 0.0], atol=1e-7)


@pytest.mark.parametrize("decay_method", ["poly", "cos"])
@pytest.mark.parametrize("warmup_steps", [10, 15])
def test_a_warm_up_as_long_as_training_or_longer_warms_up_on_every_step_as_the_original(decay_method, warmup_steps):
  """--warmup_steps >= --train_steps: the original trains every step at the warm-up rate (its decay, a 0/0 there, is
  never taken); it was refused here (faith 24)."""
  schedule = schedule_lib.lr_schedule(2.0, train_steps=10, warmup_steps=warmup_steps, decay_method=decay_method,
                                      min_lr_ratio=0.25)
  np.testing.assert_allclose(schedule_values(schedule, range(10)), [2.0 * s / warmup_steps for s in range(10)],
                             rtol=1e-6)
  assert np.all(np.isfinite(schedule_values(schedule, range(30))))


def test_the_tools_say_once_that_the_warm_up_outlasts_training_or_the_rate_rises(caplog):
  import flag_configs  # pylint: disable=import-outside-toplevel
  for _ in range(2):  # the fine-tuning tools validate their flags twice
    flag_configs.check_schedule(types.SimpleNamespace(warmup_steps=12, train_steps=8, min_lr_ratio=2.0))
  said = [r.getMessage() for r in caplog.records if "--warmup_steps" in r.getMessage() or "--min_lr" in r.getMessage()]
  assert said == ["--warmup_steps=12 is not below --train_steps=8: every step trains at the warm-up rate, below "
                  "--learning_rate, and the decay never starts (as the original).",
                  "--min_lr_ratio=2 is above 1: after the warm-up the learning rate rises from --learning_rate to 2 x "
                  "--learning_rate at --train_steps, instead of decaying (as the original)."], said
  with pytest.raises(flag_configs.FlagError, match=r"^--warmup_steps must be at least 0\. Received: -1\.$"):
    flag_configs.check_schedule(types.SimpleNamespace(warmup_steps=-1, train_steps=8, min_lr_ratio=0.0))


def test_a_min_lr_ratio_above_1_rises_as_the_original_s():
  """The original's cos schedule at --min_lr_ratio=2.0, --learning_rate=0.01, --train_steps=10, no warm-up: its
  first 8 steps' rates, measured with the original's get_train_op under tf.compat.v1 (sweep 35; refused here
  before). poly rises linearly to the same end."""
  cos = schedule_lib.lr_schedule(0.01, train_steps=10, decay_method="cos", min_lr_ratio=2.0)
  np.testing.assert_allclose(schedule_values(cos, range(8)), [0.01, 0.010245, 0.010955, 0.012061, 0.013455, 0.015,
                                                              0.016545, 0.017939], atol=1e-6)
  poly = schedule_lib.lr_schedule(0.01, train_steps=10, decay_method="poly", min_lr_ratio=2.0)
  np.testing.assert_allclose(schedule_values(poly, [0, 5, 10, 12]), [0.01, 0.015, 0.02, 0.02], rtol=1e-6)


def test_schedule_takes_int64_tensor_steps_and_round_trips_config():
  schedule = schedule_lib.lr_schedule(1e-3, train_steps=100, warmup_steps=10, decay_method="cos",
                                      min_lr_ratio=0.01)
  copy = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
  assert isinstance(copy, schedule_lib.WarmupDecaySchedule)
  steps = tf.constant([0, 5, 10, 55, 100], tf.int64)
  np.testing.assert_array_equal(schedule(steps).numpy(), copy(steps).numpy())
  assert float(schedule(tf.constant(5, tf.int64))) == pytest.approx(5e-4)


@pytest.mark.parametrize("kwargs, needle", [
    (dict(decay_method="linear"), "decay_method"),
    (dict(warmup_steps=-1), "warmup_steps"),
    (dict(min_lr_ratio=-0.1), "min_lr_ratio"),
])
def test_schedule_rejects_bad_input(kwargs, needle):
  with pytest.raises(ValueError, match=needle):
    schedule_lib.lr_schedule(1e-3, train_steps=10, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Optimizers against the original formulas

PARAMS = [np.array([[0.5, -1.0], [2.0, 0.25]]), np.array([0.1, -0.3, 0.7])]
GRADS = [  # three steps; step 2 has a large gradient so clip=1.5 is active there
    [np.array([[0.3, -0.2], [0.1, 0.4]]), np.array([0.05, -0.6, 0.2])],
    [np.array([[1.5, 0.9], [-2.0, 0.7]]), np.array([1.2, 0.3, -0.8])],
    [np.array([[-0.1, 0.2], [0.05, -0.3]]), np.array([0.02, 0.4, -0.1])],
]
CLIP = 1.5
# lr_schedule(0.1, train_steps=4, warmup_steps=1): step 0 -> 0 (warm-up), then 0.1 * (1 - (s - 1) / 3).
LRS = [0.0, 0.1, 0.1 * 2 / 3]


def clip_np(grads, clip):
  norm = math.sqrt(sum(float(np.sum(g ** 2)) for g in grads))
  return [g * clip / max(norm, clip) for g in grads], norm


def run_ours(optimizer, paths):
  variables = [make_variable(p, v) for p, v in zip(paths, PARAMS)]
  gnorms, lrs = [], []
  for grads in GRADS:
    gnorm, lr = optimization.apply_gradients(optimizer, [tf.constant(g, tf.float32) for g in grads], variables,
                                             clip=CLIP)
    gnorms.append(float(gnorm))
    lrs.append(float(lr))
  return variables, gnorms, lrs


def test_adam_matches_tf1_adam_formula():
  eps = 1e-2  # large enough that putting epsilon elsewhere (e.g. after bias-correcting v) changes the result
  optimizer = optimization.create_optimizer(0.1, train_steps=4, warmup_steps=1, adam_epsilon=eps)
  assert isinstance(optimizer, adam.XLNetAdam)
  variables, gnorms, lrs = run_ours(optimizer, ["m/transformer/layer_0/ff/layer_1/kernel", "m/lm_loss/bias"])

  # TF1 AdamOptimizer: beta powers start at beta and multiply after each step; epsilon-hat form.
  params = [p.copy() for p in PARAMS]
  m = [np.zeros_like(p) for p in params]
  v = [np.zeros_like(p) for p in params]
  # TF1 keeps float32 beta powers (starting at beta, multiplied after each step); 1 - beta2^t cancels badly in
  # float32, so the bias correction is computed in float32 as there; the rest in float64.
  b1, b2 = np.float32(0.9), np.float32(0.999)
  b1p, b2p = b1, b2
  expected_gnorms = []
  for grads, lr in zip(GRADS, LRS):
    grads, norm = clip_np(grads, CLIP)
    expected_gnorms.append(norm)
    lr_t = lr * math.sqrt(float(np.float32(1) - b2p)) / float(np.float32(1) - b1p)
    for i, g in enumerate(grads):
      m[i] = m[i] + (g - m[i]) * (1 - float(b1))
      v[i] = v[i] + (g * g - v[i]) * (1 - float(b2))
      params[i] = params[i] - lr_t * m[i] / (np.sqrt(v[i]) + eps)
    b1p, b2p = np.float32(b1p * b1), np.float32(b2p * b2)
  np.testing.assert_allclose(lrs, LRS, rtol=1e-6)
  np.testing.assert_allclose(gnorms, expected_gnorms, rtol=1e-6)
  assert expected_gnorms[1] > CLIP > expected_gnorms[0]
  for var, want in zip(variables, params):
    np.testing.assert_allclose(var.numpy(), want, rtol=1e-5, atol=1e-7)
  assert int(optimizer.iterations) == 3

  # Second oracle: the TF1 AdamOptimizer itself (tf.compat.v1), fed the same clipped gradients and float32 lrs. Its
  # beta powers are a running float32 product; ours are pow(beta, t), which can differ in the last bit (1 - beta2^t
  # then amplifies it to ~1e-5 of an update). Given our beta powers, TF1's update must be bit-identical to ours
  # (both are the ResourceApplyAdam kernel); the beta powers themselves agree to float32 rounding.
  tf1_vars = [tf.Variable(p.astype(np.float32)) for p in PARAMS]
  lr_var = tf.Variable(0.0)
  tf1 = tf.compat.v1.train.AdamOptimizer(lambda: lr_var, epsilon=eps)
  products = [b1, b2]
  for t, (grads, lr) in enumerate(zip(GRADS, lrs), 1):
    lr_var.assign(lr)
    clipped, _ = tf.clip_by_global_norm([tf.constant(g, tf.float32) for g in grads], CLIP)
    ours = [tf.pow(tf.constant(b, tf.float32), float(t)) for b in (b1, b2)]
    if t > 1:
      for accumulator, power in zip(tf1._get_beta_accumulators(), ours):  # pylint: disable=protected-access
        accumulator.assign(power)
    np.testing.assert_allclose([p.numpy() for p in ours], products, rtol=2e-7)
    products = [np.float32(p * b) for p, b in zip(products, (b1, b2))]
    tf1.apply_gradients(zip(clipped, tf1_vars))
  for var, tf1_var in zip(variables, tf1_vars):
    np.testing.assert_array_equal(var.numpy(), tf1_var.numpy())
    slots = slot_names.original_slot_map(optimizer, {"w": var})
    np.testing.assert_array_equal(slots["w/Adam"].numpy(), tf1.get_slot(tf1_var, "m").numpy())
    np.testing.assert_array_equal(slots["w/Adam_1"].numpy(), tf1.get_slot(tf1_var, "v").numpy())


def test_adam_bias_correction_moves_with_each_update_in_one_traced_function():
  """The beta powers are computed once per update (`XLNetAdam._update_powers`), not once per graph: two updates in
  one `tf.function` equal two updates made one by one."""
  def two_steps(traced):
    keras.utils.set_random_seed(3)
    variables = [tf.Variable(np.full([2, 3], 0.5, np.float32)), tf.Variable(np.ones([3], np.float32))]
    optimizer = adam.XLNetAdam(learning_rate=0.1, beta_1=0.5, beta_2=0.6)
    grads = [[tf.constant(np.full(v.shape, g, np.float32)) for v in variables] for g in (0.3, -2.0)]

    def step(g):
      optimizer.apply_gradients(zip(g, variables))

    if traced:
      tf.function(lambda: [step(g) for g in grads])()
    else:
      for g in grads:
        tf.function(step)(g)
    return [v.numpy() for v in variables]

  for traced, one_by_one in zip(two_steps(True), two_steps(False)):
    np.testing.assert_array_equal(traced, one_by_one)


def test_adam_weight_decay_matches_original_formula():
  paths = ["m/transformer/layer_0/rel_attn/q/kernel", "m/transformer/layer_0/rel_attn/LayerNorm/beta"]
  eps, wd = 1e-6, 0.3
  optimizer = optimization.create_optimizer(0.1, train_steps=4, warmup_steps=1, weight_decay=wd, adam_epsilon=eps)
  assert isinstance(optimizer, adam.AdamWeightDecay)
  variables, gnorms, lrs = run_ours(optimizer, paths)

  decayed = [True, False]  # kernel decayed; LayerNorm excluded
  params = [p.copy() for p in PARAMS]
  m = [np.zeros_like(p) for p in params]
  v = [np.zeros_like(p) for p in params]
  for grads, lr in zip(GRADS, LRS):  # no bias correction
    grads, _ = clip_np(grads, CLIP)
    for i, g in enumerate(grads):
      m[i] = 0.9 * m[i] + 0.1 * g
      v[i] = 0.999 * v[i] + 0.001 * g * g
      update = m[i] / (np.sqrt(v[i]) + eps) + (wd * params[i] if decayed[i] else 0.0)
      params[i] = params[i] - lr * update
  np.testing.assert_allclose(lrs, LRS, rtol=1e-6)
  for var, want in zip(variables, params):
    np.testing.assert_allclose(var.numpy(), want, rtol=1e-5, atol=1e-7)
  slots = {s.path.split("_", 1)[-1]: s.numpy() for s in optimizer.variables}  # "<opt>/<var path>_adam_m"
  np.testing.assert_allclose(slots["transformer_layer_0_rel_attn_q_kernel_adam_m"], m[0], rtol=1e-5, atol=1e-8)
  np.testing.assert_allclose(slots["transformer_layer_0_rel_attn_LayerNorm_beta_adam_v"], v[1], rtol=1e-5,
                             atol=1e-10)
  assert int(optimizer.iterations) == 3  # one per step, as the original's hand-incremented global_step


# The original's decision for every kind of variable our model has (full paths, prefix before transformer/ varies).
DECAY_TABLE = {
    "xlnet/transformer/word_embedding/lookup_table": True,
    "xlnet/transformer/mask_emb/mask_emb": True,
    "xlnet/transformer/r_w_bias": True,  # contains "bias", but include_in_weight_decay wins
    "xlnet/transformer/r_r_bias": True,
    "xlnet/transformer/r_s_bias": True,
    "xlnet/transformer/seg_embed": True,
    "xlnet/transformer/layer_0/rel_attn/q/kernel": True,
    "xlnet/transformer/layer_0/rel_attn/LayerNorm/gamma": False,
    "xlnet/transformer/layer_0/rel_attn/LayerNorm/beta": False,
    "xlnet/transformer/layer_1/ff/layer_1/kernel": True,
    "xlnet/transformer/layer_1/ff/layer_1/bias": False,
    "xlnet/transformer/layer_1/ff/LayerNorm/gamma": False,
    "xlnet/lm_loss/bias": False,
    "xlnet/sequnece_summary/summary/kernel": True,
    "xlnet/sequnece_summary/summary/bias": False,
    "xlnet/classification_imdb/logit/bias": False,
    "xlnet/head/layer_norm/gamma": False,
}


def test_weight_decay_exclusions_by_full_path():
  assert {p: adam.uses_weight_decay(p) for p in DECAY_TABLE} == DECAY_TABLE
  # The real optimizer: a zero gradient leaves m = v = 0, so only the decay term moves a variable.
  variables = [make_variable(p, np.ones(2)) for p in DECAY_TABLE]
  optimizer = optimization.create_optimizer(0.5, train_steps=3, weight_decay=0.1)
  optimization.apply_gradients(optimizer, [tf.zeros(2)] * len(variables), variables, clip=1.0)
  moved = {v.path: not np.allclose(v.numpy(), 1.0) for v in variables}
  assert moved == DECAY_TABLE
  for v in variables:
    np.testing.assert_allclose(v.numpy(), 0.95 if DECAY_TABLE[v.path] else 1.0, rtol=1e-6)


def test_create_optimizer_rejects_bad_input():
  with pytest.raises(ValueError, match="weight_decay"):
    optimization.create_optimizer(1e-3, train_steps=10, weight_decay=-0.01)
  with pytest.raises(ValueError, match="clipnorm"):
    adam.XLNetAdam(learning_rate=1e-3, clipnorm=1.0)
  with pytest.raises(TypeError, match="create_optimizer"):
    optimization.apply_gradients(keras.optimizers.Adam(), [tf.ones(2)], [make_variable("a/b", np.ones(2))], 1.0)


# ---------------------------------------------------------------------------------------------------------------
# Clipping and layer-wise decay

def test_clip_returns_pre_clip_norm_and_clips():
  variables = [make_variable("c/w", np.zeros(1)), make_variable("c/b", np.zeros(1))]
  grads = [tf.constant([3.0]), tf.constant([4.0])]
  clipped, gnorm = clipping.clip_and_scale_gradients(grads, variables, clip=1.0)
  assert float(gnorm) == pytest.approx(5.0)
  np.testing.assert_allclose([c.numpy()[0] for c in clipped], [0.6, 0.8], rtol=1e-6)
  # A variable without a gradient passes through as None and does not count in the norm.
  clipped, gnorm = clipping.clip_and_scale_gradients(grads + [None], variables + [make_variable("c/u", [1.0])],
                                                         clip=1.0)
  assert clipped[2] is None and float(gnorm) == pytest.approx(5.0)
  clipped, gnorm = clipping.clip_and_scale_gradients(grads, variables, clip=10.0)
  assert float(gnorm) == pytest.approx(5.0)
  np.testing.assert_allclose([c.numpy()[0] for c in clipped], [3.0, 4.0])
  with pytest.raises(ValueError, match="clip"):
    clipping.clip_and_scale_gradients(grads, variables, clip=0.0)


LAYER_TABLE = {  # path -> multiplier with rate 0.5 and 3 layers: layer l gets 0.5 ** (2 - l)
    "model/transformer/word_embedding/lookup_table": 1.0,
    "model/transformer/mask_emb/mask_emb": 1.0,
    "model/transformer/r_w_bias": 1.0,
    "model/transformer/seg_embed": 1.0,
    "model/transformer/layer_0/rel_attn/q/kernel": 0.25,
    "model/transformer/layer_0/rel_attn/LayerNorm/gamma": 0.25,
    "model/transformer/layer_0/ff/layer_1/kernel": 0.25,  # ff/layer_1 is not transformer layer 1
    "model/transformer/layer_0/ff/layer_2/bias": 0.25,
    "model/transformer/layer_1/rel_attn/o/kernel": 0.5,
    "model/transformer/layer_2/ff/layer_1/kernel": 1.0,
    "model/transformer/layer_2/ff/LayerNorm/beta": 1.0,
    "model/lm_loss/bias": 1.0,
    "model/sequnece_summary/summary/kernel": 1.0,
}


def test_layer_decay_multipliers_hit_the_right_variables():
  variables = [make_variable(p, np.ones(2)) for p in LAYER_TABLE]
  assert clipping.layer_decay_multipliers(variables, 0.5) == LAYER_TABLE
  assert clipping.layer_decay_multipliers(variables, 0.5, n_layer=3) == LAYER_TABLE
  assert set(clipping.layer_decay_multipliers(variables, 1.0).values()) == {1.0}
  # layer_1 vs layer_10 and inferring n_layer = 12 from the largest index.
  deep = [make_variable(f"x/transformer/layer_{l}/ff/layer_1/kernel", np.ones(1)) for l in (1, 10, 11)]
  assert list(clipping.layer_decay_multipliers(deep, 0.5).values()) == [0.5 ** 10, 0.5, 1.0]
  with pytest.raises(ValueError, match="n_layer=2"):
    clipping.layer_decay_multipliers(variables, 0.5, n_layer=2)
  with pytest.raises(ValueError, match="transformer/layer_"):
    clipping.layer_decay_multipliers([make_variable("y/ff/layer_1/kernel", np.ones(1))], 0.5)


def test_layer_scaling_applies_to_clipped_gradients():
  variables = [make_variable(p, np.ones(2)) for p in LAYER_TABLE]
  grads = [tf.fill([2], float(i + 1)) for i in range(len(variables))]
  norm = math.sqrt(sum(2 * (i + 1) ** 2 for i in range(len(variables))))
  clipped, gnorm = clipping.clip_and_scale_gradients(grads, variables, clip=2.0, lr_layer_decay_rate=0.5)
  assert float(gnorm) == pytest.approx(norm, rel=1e-6)  # pre-clip, before scaling
  for i, (path, mult) in enumerate(LAYER_TABLE.items()):
    np.testing.assert_allclose(clipped[i].numpy(), (i + 1) * 2.0 / norm * mult, rtol=1e-6, err_msg=path)


# ---------------------------------------------------------------------------------------------------------------
# MirroredStrategy: 2 logical CPUs (in a subprocess: logical devices must be set before any TF op runs)

MIRRORED_SCRIPT = r"""
import contextlib, json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
from xlnet_tf.training import optimization

V, H, B, CLIP = 7, 5, 8, 0.05
SHAPES = {"model/transformer/word_embedding/lookup_table": (V, H),
          "model/transformer/layer_0/ff/layer_1/kernel": (H, H),
          "model/transformer/layer_1/ff/layer_1/kernel": (H, H),
          "model/transformer/layer_1/ff/LayerNorm/gamma": (H,),
          "model/transformer/r_w_bias": (H,),
          "model/lm_loss/bias": (V,)}
rng = np.random.RandomState(0)
INIT = {p: rng.normal(size=s).astype(np.float32) for p, s in SHAPES.items()}
BATCHES = [(rng.randint(0, V, size=(B, 3)).astype(np.int32), rng.randint(0, V, size=(B,)).astype(np.int32))
           for _ in range(3)]

def make_variables():
  out = []
  for path, value in INIT.items():
    *scopes, name = path.split("/")
    with contextlib.ExitStack() as stack:
      for scope in scopes:
        stack.enter_context(keras.name_scope(scope))
      out.append(keras.Variable(value, name=name))
  return out

def replica_loss(variables, x, y):
  emb, w0, w1, gamma, r_w_bias, bias = variables
  h = tf.reduce_mean(tf.nn.embedding_lookup(emb, x), axis=1) + r_w_bias
  h = tf.tanh(tf.tanh(h @ w0) @ w1) * gamma
  logits = h @ tf.transpose(emb) + bias  # tied: the embedding gets a gather and a dense gradient
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
  return tf.nn.compute_average_loss(per_example, global_batch_size=B)

def run(strategy, weight_decay, ours):
  with strategy.scope():
    variables = make_variables()
    opt = optimization.create_optimizer(0.05, train_steps=10, warmup_steps=1, weight_decay=weight_decay,
                                        adam_epsilon=1e-2)
    opt.build(variables)
  n = strategy.num_replicas_in_sync

  @tf.function
  def step(x, y):
    def replica_fn(x, y):
      first = tf.distribute.get_replica_context().replica_id_in_sync_group * (B // n)
      x, y = x[first:first + B // n], y[first:first + B // n]  # this replica's rows of the global batch
      with tf.GradientTape() as tape:
        loss = replica_loss(variables, x, y)
      grads = tape.gradient(loss, variables)
      if ours:
        gnorm, _ = optimization.apply_gradients(opt, grads, variables, clip=CLIP, lr_layer_decay_rate=0.5)
      else:
        opt.apply_gradients(zip(grads, variables))
        gnorm = tf.constant(0.0)
      return gnorm
    return strategy.run(replica_fn, args=(x, y))

  gnorms = []
  for x, y in BATCHES:
    gnorms.append([float(g) for g in strategy.experimental_local_results(step(tf.constant(x), tf.constant(y)))])
  state = [[r.numpy().tolist() for r in strategy.experimental_local_results(v.value)]
           for v in list(variables) + list(opt.variables)]
  return {"gnorm": gnorms, "state": state, "iterations": int(opt.iterations.numpy()), "replicas": n}

mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
result = {"init": [v.tolist() for v in INIT.values()]}
for name, weight_decay, ours in [("adam", 0.0, True), ("adamw", 0.01, True), ("keras_direct", 0.0, False)]:
  result[name] = {"one": run(tf.distribute.get_strategy(), weight_decay, ours),
                  "two": run(mirrored, weight_decay, ours)}
print("RESULT " + json.dumps(result))
"""


def test_mirrored_two_replicas_equal_one_device(tmp_path):
  script = tmp_path / "mirrored.py"
  script.write_text(MIRRORED_SCRIPT)
  env = dict(os.environ, PYTHONPATH=os.getcwd(), TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  result = json.loads(line[len("RESULT "):])
  init = result.pop("init")
  for name, runs in result.items():
    one, two = runs["one"], runs["two"]
    assert (one["replicas"], two["replicas"]) == (1, 2)
    assert one["iterations"] == two["iterations"] == 3, name
    if name != "keras_direct":
      gnorm_one = [g[0] for g in one["gnorm"]]
      assert all(g > 0.05 for g in gnorm_one), (name, gnorm_one)  # clipping active at every step
      for g_one, g_two in zip(one["gnorm"], two["gnorm"]):  # each replica sees the norm of the SUMMED gradient
        np.testing.assert_allclose(g_two, [g_one[0]] * 2, rtol=1e-5, err_msg=name)
    # Weights and every optimizer slot (m, v) equal on both replicas and to the one-device run; a gradient
    # summed twice would double m even where clipping or Adam's normalisation would hide it in the weights.
    assert len(one["state"]) == len(two["state"])
    for k, (s_one, s_two) in enumerate(zip(one["state"], two["state"])):
      np.testing.assert_allclose(s_two[0], s_two[1], rtol=0, atol=0, err_msg=f"{name} state {k}")
      np.testing.assert_allclose(s_two[0], s_one[0], rtol=1e-5, atol=2e-7, err_msg=f"{name} state {k}")
    for k, start in enumerate(init):  # every weight moved, so the comparison is not of untouched values
      assert not np.allclose(one["state"][k][0], start, atol=1e-4), f"{name} weight {k} did not move"
