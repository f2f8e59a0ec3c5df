"""A fresh model's weights: every variable its own draw from the original's distribution for it.

The original creates each TF1 variable with its own initializer op (`modeling.py`, `function_builder.py`):
`init="normal"` draws N(0, init_std), `init="uniform"` U(-init_range, init_range); `mask_emb` has TF1's default
glorot-uniform; dense biases and `lm_loss/bias` are zeros; LayerNorm gamma 1, beta 0.
"""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
from xlnet_tf.modeling.heads import finetune_heads

CONFIG = XLNetConfig(n_layer=2, d_model=48, n_head=4, d_head=12, d_inner=96, ff_activation="gelu", untie_r=True,
                     n_token=300)


def fresh_model(init="normal", seed=None, untie_r=True, **run):
  if seed is not None:
    keras.utils.set_random_seed(seed)
  config = XLNetConfig(**{**CONFIG.to_dict(), "untie_r": untie_r})
  rc = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.1, dropatt=0.1, mem_len=4,
                 reuse_len=4, init=init, init_std=0.02, init_range=0.1, **run)
  model = XLNetModel(config, rc, heads=finetune_heads(config, rc, "attn", cls_heads={"imdb": 2}, reg_heads=["sts"]))
  model(tf.zeros([6, 2], tf.int32), tf.zeros([6, 2], tf.int32), tf.zeros([6, 2]), inp_q=tf.zeros([6, 2]))
  return {w.path: w.numpy() for w in model.weights}


def rule(path):
  """The original's initialisation of the variable at `path`: 'zeros', 'ones', 'glorot' or 'init'."""
  name = path.rsplit("/", 1)[-1]
  if name == "gamma":
    return "ones"
  if name == "beta" or name == "bias":  # dense biases, lm_loss/bias
    return "zeros"
  if name == "mask_emb":
    return "glorot"
  return "init"  # kernels, lookup_table, r_*_bias, seg_embed, summary_bias


@pytest.mark.parametrize("untie_r", [True, False])
def test_no_two_random_tensors_are_equal(untie_r):
  weights = fresh_model(untie_r=untie_r)
  random = {p: w.ravel() for p, w in weights.items() if rule(p) in ("init", "glorot")}
  assert len(random) >= 20
  same = []
  for (a, x), (b, y) in itertools.combinations(random.items(), 2):
    n = min(x.size, y.size)  # also catches one draw reshaped into another shape (ff/layer_1 vs layer_2)
    if np.array_equal(x[:n], y[:n]):
      same.append((a, b))
  assert not same, f"{len(same)} pairs of variables start equal, e.g. {same[:3]}"


@pytest.mark.parametrize("init", ["normal", "uniform"])
def test_each_variable_follows_the_originals_rule(init):
  weights = fresh_model(init=init)
  seen = set()
  for path, w in weights.items():
    r = rule(path)
    seen.add(r)
    if r == "zeros":
      np.testing.assert_array_equal(w, 0, err_msg=path)
    elif r == "ones":
      np.testing.assert_array_equal(w, 1, err_msg=path)
    elif r == "glorot":  # [1, 1, H]: fan_in 1, fan_out H, as TF1's glorot_uniform
      limit = np.sqrt(6.0 / (1 + w.shape[-1]))
      assert np.abs(w).max() <= limit and np.abs(w).max() > 0.5 * limit, path
    elif init == "normal":
      std = 0.02
      assert abs(w.mean()) < 4 * std / np.sqrt(w.size), (path, w.mean())
      # The sample std of n normals has relative sd ~ 1/sqrt(2n): allow 5 of them (and 5% for the big ones).
      assert abs(w.std() / std - 1) < max(0.05, 5 / np.sqrt(2 * w.size)), (path, w.std())
      # A truncated normal (TF's, Keras's) stops at 2 std. Beyond 2.5 std: P = 0.0124 per entry, so a plain normal
      # of 1000 entries has none with P = 4e-6 (at 3 std, P = 0.0027 per entry: 0.2 % of 2304-entry kernels failed).
      assert w.size < 1000 or np.abs(w).max() > 2.5 * std, (path, "not a plain (untruncated) normal")
    else:
      assert np.abs(w).max() <= 0.1, path
      assert abs(w.std() / (0.1 / np.sqrt(3)) - 1) < max(0.05, 5 / np.sqrt(1.8 * w.size)), (path, w.std())
  assert seen == {"zeros", "ones", "glorot", "init"}


def test_the_same_seed_gives_the_same_weights_and_another_seed_others():
  a, b, c = fresh_model(seed=3), fresh_model(seed=3), fresh_model(seed=4)
  assert a.keys() == b.keys() == c.keys()
  for path in a:
    np.testing.assert_array_equal(a[path], b[path], err_msg=path)
    if rule(path) in ("init", "glorot"):
      assert not np.array_equal(a[path], c[path]), path


def test_two_unseeded_models_differ():
  keras.utils.set_random_seed(5)  # a seed set earlier in the process must not make two models equal
  a, b = fresh_model(), fresh_model()
  for path in a:
    if rule(path) in ("init", "glorot"):
      assert not np.array_equal(a[path], b[path]), path
