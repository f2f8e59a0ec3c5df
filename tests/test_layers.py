"""The model's pure pieces against matrices written out by hand, and layer/model invariants."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import RunConfig, XLNetConfig, XLNetModel, layers
from xlnet_tf.heads import LogitHead, SequenceSummary
from xlnet_tf.transformer_xl import TransformerXL, XLNetLayer

# Tiny sizes that all differ: bsz 4, qlen 7, mlen 5, num_predict 3, n_head 2, d_head 6, d_model 8, d_inner 11.
CONFIG = XLNetConfig(n_layer=2, d_model=8, n_head=2, d_head=6, d_inner=11, ff_activation="gelu", untie_r=True,
                     n_token=32)
BSZ, QLEN, MLEN, NUM_PREDICT = 4, 7, 5, 3


def run_config(**kw):
  args = dict(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0)
  args.update(kw)
  return RunConfig(**args)


def random_inputs(seed=0, bsz=BSZ, qlen=QLEN):
  rng = np.random.RandomState(seed)
  input_ids = rng.randint(0, CONFIG.n_token, size=(qlen, bsz)).astype(np.int32)
  seg_ids = np.zeros((qlen, bsz), np.int32)
  input_mask = np.zeros((qlen, bsz), np.float32)
  for b in range(bsz):  # ragged LEFT padding, two segments, CLS last (segment 2)
    pad = b % 3
    input_mask[:pad, b] = 1
    seg_ids[:pad, b] = 4
    seg_ids[pad + (qlen - pad) // 2:, b] = 1
    seg_ids[-1, b] = 2
  mems = [rng.randn(MLEN, bsz, CONFIG.d_model).astype(np.float32) for _ in range(CONFIG.n_layer)]
  perm_mask = (rng.rand(qlen, qlen, bsz) < 0.4).astype(np.float32)
  target_mapping = np.zeros((NUM_PREDICT, qlen, bsz), np.float32)
  for b in range(bsz):
    for p, pos in enumerate(rng.choice(qlen, NUM_PREDICT - b % 2, replace=False)):
      target_mapping[p, pos, b] = 1
  inp_q = target_mapping.sum(0)
  return dict(input_ids=input_ids, seg_ids=seg_ids, input_mask=input_mask, mems=mems, perm_mask=perm_mask,
              target_mapping=target_mapping, inp_q=inp_q)


def test_rel_shift_by_hand():
  # x[i, r] = 10 i + r, qlen 2, klen 3 (mlen 1), R = 5 relative positions klen .. -qlen+1.
  x = (10 * np.arange(2)[:, None] + np.arange(5)[None, :]).astype(np.float32)[:, :, None, None]
  got = layers.rel_shift(tf.constant(x), klen=3)[:, :, 0, 0].numpy()
  np.testing.assert_array_equal(got, [[2, 3, 4], [11, 12, 13]])
  # So (i, j) reads relative position index r = j + qlen - i, whose distance klen - r = (mlen + i) - j.


def test_causal_masks_by_hand():
  np.testing.assert_array_equal(layers.causal_attn_mask(3, 2).numpy(),
                                [[0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(layers.causal_attn_mask(3, 2, same_length=True).numpy(),
                                [[0, 0, 0, 1, 1], [1, 0, 0, 0, 1], [1, 1, 0, 0, 0]])


def test_data_masks_by_hand():
  input_mask = np.array([[0], [0], [1]], np.float32)  # the third token is padding
  perm_mask = np.array([[0, 1, 0], [0, 0, 0], [1, 0, 0]], np.float32)[:, :, None]
  attn_mask, non_tgt_mask = layers.build_attn_masks(3, 1, 1, "bi", False, input_mask, perm_mask)
  np.testing.assert_array_equal(attn_mask[:, :, 0, 0].numpy(), [[0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 0, 1]])
  # The content stream always sees itself (the padding token included); memory is always visible.
  np.testing.assert_array_equal(non_tgt_mask[:, :, 0, 0].numpy(), [[0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 0, 0]])
  assert layers.build_attn_masks(3, 1, 1, "bi") == (None, None)
  uni, _ = layers.build_attn_masks(3, 1, 1, "uni", False, input_mask)
  np.testing.assert_array_equal(uni[:, :, 0, 0].numpy(), [[0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 1]])


def test_segment_matrix_by_hand():
  seg_mat = layers.segment_matrix(np.array([[0], [1], [1]], np.int32), mlen=1).numpy()
  np.testing.assert_array_equal(seg_mat[:, :, 0, 1], [[0, 0, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]])
  np.testing.assert_array_equal(seg_mat[..., 0] + seg_mat[..., 1], np.ones((3, 4, 1)))


def test_relative_positional_encoding_bi_data_and_clamp():
  d_model = 4
  pos_emb = layers.relative_positional_encoding(2, 3, d_model, clamp_len=2, attn_type="bi", bi_data=True,
                                                bsz=4).numpy()
  assert pos_emb.shape == (5, 4, d_model)
  inv_freq = 1 / (10000 ** (np.arange(0, d_model, 2.0) / d_model))

  def expected(pos):
    arg = np.outer(pos, inv_freq)
    return np.concatenate([np.sin(arg), np.cos(arg)], -1)

  np.testing.assert_allclose(pos_emb[:, 0], expected([2, 2, 1, 0, -1]), atol=1e-6)  # 3 2 1 0 -1, clamped
  np.testing.assert_allclose(pos_emb[:, 1], pos_emb[:, 0])
  np.testing.assert_allclose(pos_emb[:, 2], expected([-2, -2, -1, 0, 1]), atol=1e-6)  # negated, clamped
  uni = layers.relative_positional_encoding(2, 3, d_model, -1, "uni", False, bsz=1).numpy()
  np.testing.assert_allclose(uni[:, 0], expected([3, 2, 1, 0]), atol=1e-6)


def test_cache_mem():
  prev = np.arange(2 * 1 * 1, dtype=np.float32).reshape(2, 1, 1)
  curr = 10 + np.arange(4, dtype=np.float32).reshape(4, 1, 1)
  np.testing.assert_array_equal(layers.cache_mem(curr, prev, 3, 2)[:, 0, 0], [1, 10, 11])
  np.testing.assert_array_equal(layers.cache_mem(curr, None, 3)[:, 0, 0], [11, 12, 13])
  assert layers.cache_mem(curr, prev, 0) is None and layers.cache_mem(curr, prev, None) is None


def test_masking_constant_is_finite_in_half_precision():
  for dtype in (tf.float16, tf.bfloat16):
    score = tf.zeros([2, 3, 1, 1], dtype)
    mask = tf.constant([[0, 1, 1], [1, 1, 1]], dtype)[:, :, None, None]
    prob = layers._masked_softmax(score, mask).numpy().astype(np.float32)
    assert np.isfinite(prob).all()
    np.testing.assert_allclose(prob[0, :, 0, 0], [1, 0, 0])


def test_gelu_is_the_tanh_approximation():
  x = np.linspace(-3, 3, 13).astype(np.float32)
  expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
  np.testing.assert_allclose(layers.gelu(x).numpy(), expected, atol=1e-6)


def make_model(**kw):
  keras.utils.set_random_seed(1)
  return XLNetModel(CONFIG, run_config(mem_len=6, reuse_len=4), **kw)


def test_batched_equals_per_example():
  model = make_model()
  x = random_inputs()
  for two_stream in (False, True):
    extra = dict(perm_mask=x["perm_mask"], target_mapping=x["target_mapping"], inp_q=x["inp_q"]) if two_stream else {}
    out, new_mems = model(x["input_ids"], x["seg_ids"], x["input_mask"], mems=x["mems"], **extra)
    for b in range(BSZ):
      sl = lambda a: a[..., b:b + 1] if a.ndim in (2, 3) else a[:, b:b + 1]
      one = {k: sl(v) for k, v in extra.items()}
      out_b, mems_b = model(sl(x["input_ids"]), sl(x["seg_ids"]), sl(x["input_mask"]),
                            mems=[m[:, b:b + 1] for m in x["mems"]], **one)
      np.testing.assert_allclose(out_b[:, 0], out[:, b], atol=1e-5)
      for m_b, m in zip(mems_b, new_mems):
        np.testing.assert_allclose(m_b[:, 0], m[:, b], atol=1e-5)


def test_streams_share_weights_and_variable_names_match_original():
  model = make_model()
  n_before = len(model.trainable_variables)
  x = random_inputs()
  model(x["input_ids"], x["seg_ids"], perm_mask=x["perm_mask"], target_mapping=x["target_mapping"],
        inp_q=x["inp_q"])
  # r_w_bias, r_r_bias, lookup_table, mask_emb, r_s_bias, seg_embed, 13 per layer, lm_loss/bias.
  assert len(model.trainable_variables) == n_before == 6 + 13 * CONFIG.n_layer + 1
  paths = {v.path for v in model.trainable_variables}
  for name in ("transformer/layer_1/rel_attn/q/kernel", "transformer/layer_0/ff/layer_1/kernel",
               "transformer/layer_0/rel_attn/LayerNorm/gamma", "transformer/word_embedding/lookup_table",
               "transformer/mask_emb/mask_emb", "lm_loss/bias"):
    assert "model/" + name in paths


def test_get_config_round_trip():
  init = keras.initializers.RandomNormal(stddev=0.02)
  for layer in (layers.PositionwiseFFN(8, 11, 0.1, "gelu", init), layers.RelMultiheadAttn(8, 2, 6, 0.1, 0.2, init),
                layers.TwoStreamRelAttention(8, 2, 6), XLNetLayer(8, 2, 6, 11, "relu"),
                TransformerXL(32, 2, 8, 2, 6, 11, "gelu", True, bi_data=True, mem_len=5, reuse_len=3),
                SequenceSummary("attn", 8, 2, 6), LogitHead.regression("sts-b", 8)):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
  model = make_model(summary_type="mean", cls_heads={"toy": 3})
  clone = XLNetModel.from_config(model.get_config())
  assert clone.get_config() == model.get_config()
  assert [v.path for v in clone.trainable_variables] == [v.path for v in model.trainable_variables]


def test_jit_compile_forward_equals_plain():
  model = make_model()
  x = random_inputs()
  args = (x["input_ids"], x["seg_ids"], x["input_mask"])
  kw = dict(mems=x["mems"], perm_mask=x["perm_mask"], target_mapping=x["target_mapping"], inp_q=x["inp_q"])
  plain, _ = model(*args, **kw)
  jitted, _ = tf.function(lambda: model(*args, **kw), jit_compile=True)()
  np.testing.assert_allclose(jitted, plain, atol=1e-5)


def test_dropout_only_in_training():
  keras.utils.set_random_seed(1)
  model = XLNetModel(CONFIG, run_config(is_training=True, dropout=0.3, dropatt=0.3))
  x = random_inputs()
  eval_1, _ = model(x["input_ids"], x["seg_ids"], x["input_mask"])
  eval_2, _ = model(x["input_ids"], x["seg_ids"], x["input_mask"])
  train_1, _ = model(x["input_ids"], x["seg_ids"], x["input_mask"], training=True)
  np.testing.assert_array_equal(eval_1, eval_2)
  assert np.abs(train_1 - eval_1).max() > 1e-3


def test_bi_data_needs_even_batch():
  model = XLNetModel(CONFIG, run_config(bi_data=True))
  with pytest.raises(ValueError, match="even batch"):
    model(np.zeros((5, 3), np.int32))
