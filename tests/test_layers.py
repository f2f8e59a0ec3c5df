"""The model's pure pieces against matrices written out by hand, and layer/model invariants."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
from xlnet_tf.modeling import attention
from xlnet_tf.modeling import heads
from xlnet_tf.modeling import layers
from xlnet_tf.modeling import ops
from xlnet_tf.modeling import projections
from xlnet_tf.modeling import scores
from xlnet_tf.modeling.heads import LogitHead, SequenceSummary
from xlnet_tf.modeling.transformer_xl import TransformerXL, XLNetLayer
from xlnet_tf.modeling.heads import finetune_heads
from xlnet_tf.modeling.rows import dense_rows, layer_norm_rows

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
  got = ops.rel_shift(tf.constant(x), klen=3)[:, :, 0, 0].numpy()
  np.testing.assert_array_equal(got, [[2, 3, 4], [11, 12, 13]])
  # So (i, j) reads relative position index r = j + qlen - i, whose distance klen - r = (mlen + i) - j.


def test_causal_masks_by_hand():
  np.testing.assert_array_equal(ops.causal_attn_mask(3, 2).numpy(),
                                [[0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(ops.causal_attn_mask(3, 2, same_length=True).numpy(),
                                [[0, 0, 0, 1, 1], [1, 0, 0, 0, 1], [1, 1, 0, 0, 0]])


def test_data_masks_by_hand():
  input_mask = np.array([[0], [0], [1]], np.float32)  # the third token is padding
  perm_mask = np.array([[0, 1, 0], [0, 0, 0], [1, 0, 0]], np.float32)[:, :, None]
  attn_mask, non_tgt_mask = ops.build_attn_masks(3, 1, "bi", False, ops.batch_major(input_mask),
                                                 ops.batch_major(perm_mask))
  np.testing.assert_array_equal(attn_mask[0].numpy(), [[0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 0, 1]])
  # The content stream always sees itself (the padding token included); memory is always visible.
  np.testing.assert_array_equal(non_tgt_mask[0].numpy(), [[0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 0, 0]])
  assert ops.build_attn_masks(3, 1, "bi") == (None, None)
  uni, _ = ops.build_attn_masks(3, 1, "uni", False, ops.batch_major(input_mask))
  np.testing.assert_array_equal(uni[0].numpy(), [[0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 1]])


def test_batch_major_is_an_exact_transpose():
  x = np.random.default_rng(0).integers(-5, 5, size=(7, 3, 4)).astype(np.float32)
  np.testing.assert_array_equal(ops.batch_major(x).numpy(), np.transpose(x, [2, 0, 1]))
  ids = np.array([[0, 3], [1, 2], [4, 4]], np.int32)
  np.testing.assert_array_equal(ops.batch_major(ids).numpy(), ids.T.astype(np.float32))


def test_segment_matrix_by_hand():
  seg_mat = ops.segment_matrix(np.array([[0], [1], [1]], np.int32), mlen=1).numpy()
  np.testing.assert_array_equal(seg_mat[:, :, 0, 1], [[0, 0, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]])
  np.testing.assert_array_equal(seg_mat[..., 0] + seg_mat[..., 1], np.ones((3, 4, 1)))
  different = ops.different_segments(np.array([[0, 1, 1], [2, 2, 0]], np.int32), mlen=1).numpy()
  np.testing.assert_array_equal(different[0], seg_mat[:, :, 0, 1])
  np.testing.assert_array_equal(different[1], [[1, 0, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]])


def test_relative_positional_encoding_bi_data_and_clamp():
  d_model = 4
  pos_emb = ops.relative_positional_encoding(2, 3, d_model, clamp_len=2, attn_type="bi", bi_data=True,
                                                bsz=4).numpy()
  assert pos_emb.shape == (5, 4, d_model)
  inv_freq = 1 / (10000 ** (np.arange(0, d_model, 2.0) / d_model))

  def expected(pos):
    arg = np.outer(pos, inv_freq)
    return np.concatenate([np.sin(arg), np.cos(arg)], -1)

  np.testing.assert_allclose(pos_emb[:, 0], expected([2, 2, 1, 0, -1]), atol=1e-6)  # 3 2 1 0 -1, clamped
  np.testing.assert_allclose(pos_emb[:, 1], pos_emb[:, 0])
  np.testing.assert_allclose(pos_emb[:, 2], expected([-2, -2, -1, 0, 1]), atol=1e-6)  # negated, clamped
  uni = ops.relative_positional_encoding(2, 3, d_model, -1, "uni", False, bsz=1).numpy()
  np.testing.assert_allclose(uni[:, 0], expected([3, 2, 1, 0]), atol=1e-6)


def test_cache_mem():
  prev = np.arange(2 * 1 * 1, dtype=np.float32).reshape(2, 1, 1)
  curr = 10 + np.arange(4, dtype=np.float32).reshape(4, 1, 1)
  np.testing.assert_array_equal(ops.cache_mem(curr, prev, 3, 2)[:, 0, 0], [1, 10, 11])
  np.testing.assert_array_equal(ops.cache_mem(curr, None, 3)[:, 0, 0], [11, 12, 13])
  assert ops.cache_mem(curr, prev, 0) is None and ops.cache_mem(curr, prev, None) is None


def test_masking_constant_is_finite_in_half_precision():
  for dtype in (tf.float16, tf.bfloat16):
    score = tf.zeros([2, 3, 1, 1], dtype)
    mask = tf.constant([[0, 1, 1], [1, 1, 1]], dtype)[:, :, None, None]
    prob = attention.masked_softmax(score, mask).numpy().astype(np.float32)
    assert np.isfinite(prob).all()
    np.testing.assert_allclose(prob[0, :, 0, 0], [1, 0, 0])


def test_gelu_is_the_tanh_approximation():
  x = np.linspace(-3, 3, 13).astype(np.float32)
  expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
  np.testing.assert_allclose(ops.gelu(x).numpy(), expected, atol=1e-6)
  np.testing.assert_allclose(ops.gelu_inference(x).numpy(), expected, atol=1e-6)


def test_ffn_without_training_uses_the_fusable_gelu_where_it_fuses_with_the_same_numbers():
  ffn = layers.PositionwiseFFN(16, 64, dropout=0.0, ff_activation="gelu", kernel_initializer="normal")
  x = tf.constant(np.random.RandomState(0).randn(5, 3, 16).astype(np.float32))
  ffn(x)
  fused = ops.tf_gelu_fuses(tf.float32)
  assert ffn.inference_activation is (ops.gelu_inference if fused else ops.gelu) and ffn.activation is ops.gelu
  bf16 = layers.PositionwiseFFN(16, 64, ff_activation="gelu", dtype="mixed_bfloat16")
  assert bf16.inference_activation is ops.gelu  # the bfloat16 bias add is a plain add: nothing to fuse into
  trained, inferred = tf.function(ffn)(x, training=True).numpy(), tf.function(ffn)(x, training=False).numpy()
  np.testing.assert_allclose(inferred, trained, atol=2e-6)


def test_tf_gelu_fuses_only_with_onednn_in_float32_on_the_cpu(monkeypatch):
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=import-outside-toplevel
  onednn = _pywrap_util_port.IsMklEnabled()  # on for x86 CPUs with AVX512_VNNI, AVX512_BF16, AVX-VNNI or AMX
  assert ops.tf_gelu_fuses(tf.float32) is onednn
  assert not ops.tf_gelu_fuses(tf.bfloat16) and not ops.tf_gelu_fuses("float16")
  monkeypatch.setattr(tf.config, "get_visible_devices", lambda kind=None: ["a GPU"] if kind == "GPU" else [])
  assert not ops.tf_gelu_fuses(tf.float32)


def _grads(fn, *args):
  args = [tf.constant(a) for a in args]
  with tf.GradientTape() as tape:
    tape.watch(args)
    out = fn(*args)
    loss = tf.reduce_sum(out * tf.cos(tf.reshape(tf.range(tf.size(out), dtype=out.dtype), tf.shape(out))))
  return out.numpy(), [g.numpy() for g in tape.gradient(loss, args)]


def test_ffn_training_fuses_gelu_and_dropout_with_the_same_numbers():
  rng = np.random.RandomState(0)
  ffn = layers.PositionwiseFFN(8, 16, dropout=0.3, ff_activation="gelu")
  x = tf.constant(rng.randn(6, 8).astype(np.float32))
  ffn(x[:, None])
  seeds = [d.seed_generator.state.numpy() for d in (ffn.drop_1, ffn.drop_2)]

  def unfused(rows):
    hidden = ffn.drop_1(ops.gelu(dense_rows(rows, ffn.layer_1.kernel, ffn.layer_1.bias)), training=True)
    out = ffn.drop_2(dense_rows(hidden, ffn.layer_2.kernel, ffn.layer_2.bias), training=True)
    return layer_norm_rows(ffn.layer_norm, out + rows)

  results = []
  for fn in (lambda rows: ffn.ffn_rows(rows, training=True), unfused):
    for d, seed in zip((ffn.drop_1, ffn.drop_2), seeds):
      d.seed_generator.state.assign(seed)
    with tf.GradientTape() as tape:
      tape.watch(x)
      out = fn(x)
      loss = tf.reduce_sum(out * tf.cos(tf.range(6.0)[:, None] * tf.range(8.0)))
    results.append([out] + tape.gradient(loss, [x, ffn.layer_1.kernel, ffn.layer_1.bias]))
  assert not np.allclose(results[0][0], ffn.ffn_rows(x, training=False), atol=1e-3)  # it dropped something
  for got, want in zip(*results):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_gelu_gradient_equals_autodiff_of_the_formula():
  x = np.linspace(-4, 4, 41).astype(np.float32)
  plain = lambda t: 0.5 * t * (1 + tf.tanh(np.sqrt(2 / np.pi) * (t + 0.044715 * t ** 3)))
  (_, (want,)), (_, (got,)) = _grads(plain, x), _grads(ops.gelu, x)
  np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_lm_loss_equals_tf_sparse_cross_entropy_with_gradients(dtype):
  rng = np.random.RandomState(0)
  logits = tf.constant((8 * rng.randn(5, 3, 700)).astype(np.float32), dtype)
  target = tf.constant(rng.randint(0, 700, size=(5, 3)), tf.int64)
  weights = tf.constant(rng.rand(5, 3).astype(np.float32))
  want_fn = lambda t: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(target, tf.int32),
                                                                     logits=tf.cast(t, tf.float32))
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(logits)
    want, got = (weights * f(logits) for f in (want_fn, lambda t: heads.lm_loss(t, target)))
  assert got.shape == (5, 3) and got.dtype == tf.float32
  np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
  d_want, d_got = tape.gradient(want, logits), tape.gradient(got, logits)
  assert d_got.dtype == logits.dtype
  np.testing.assert_allclose(tf.cast(d_got, tf.float32), tf.cast(d_want, tf.float32), atol=1e-6)


def test_get_lm_loss_refuses_targets_outside_the_vocabulary():
  """The compiled loss clamps an id out of range (a finite loss of another token; the docstring said the CPU would
  raise): the model's get_lm_loss checks its targets, and refuses float ones (they were cast)."""
  model = XLNetModel(CONFIG, run_config())
  x = random_inputs()
  out, _ = model(x["input_ids"], x["seg_ids"], x["input_mask"])
  good = tf.zeros(out.shape[:2], tf.int32) + CONFIG.n_token - 1
  assert model.get_lm_loss(out, good).shape == out.shape[:2]
  for bad in (CONFIG.n_token, -1):
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"every target id must lie in \[0, n_token="
                                                             rf"{CONFIG.n_token}\)"):
      model.get_lm_loss(out, good * 0 + bad)
  with pytest.raises(TypeError, match="target must hold integer token ids"):
    model.get_lm_loss(out, tf.cast(good, tf.float32))


def test_classification_loss_refuses_float_labels():
  """Float label_ids of 0.7 and 1.9 trained as classes 0 and 1, without a word (sweep 35)."""
  logits = tf.constant([[0.0, 1.0], [2.0, 0.0]])
  with pytest.raises(TypeError, match=r"^Classification labels must be integer class ids \(label_ids\)\. Received: "
                                      r"float32"):
    heads.classification_loss(logits, tf.constant([0.7, 1.9]))
  np.testing.assert_allclose(heads.classification_loss(logits, tf.constant([1, 0], tf.int64)),
                             np.log1p(np.exp([-1.0, -2.0])), rtol=1e-6)


def test_a_call_from_python_refuses_ids_outside_the_vocabulary():
  """Eagerly only TensorFlow's `indices[0,0] = 100 is not in [0, 100) [Op:GatherV2]`; an int64 id of 2**32 + 17 was
  id 17 (the cast wrapped it): one line (sweep 35)."""
  model = XLNetModel(CONFIG, run_config())
  x = random_inputs()
  for bad in (CONFIG.n_token, -1, 2**32 + 17):
    ids = np.array(x["input_ids"], np.int64)
    ids[0, 0] = bad
    with pytest.raises(ValueError, match=rf"input_ids holds the id {bad}, outside this model's vocabulary \[0, "
                                         rf"{CONFIG.n_token}\) \(n_token\)"):
      model(tf.constant(ids), x["seg_ids"], x["input_mask"])


@pytest.mark.parametrize("change, error", [
    (dict(seg_ids=np.zeros((QLEN, 1), np.int32)),
     "seg_ids has shape [7, 1], where input_ids [len, bsz] make it [7, 4]"),
    (dict(input_mask=np.zeros((3, BSZ), np.float32)), "input_mask has shape [3, 4], where"),
    (dict(input_ids=np.zeros((QLEN,), np.int32)), "input_ids must have rank 2 (time-major"),
    (dict(input_ids=np.zeros((QLEN, BSZ), np.float32)), "input_ids must hold integer token ids. Received: float32"),
    (dict(perm_mask=np.zeros((BSZ, QLEN, QLEN), np.float32)), "perm_mask has shape [4, 7, 7], where input_ids"),
    (dict(target_mapping=np.zeros((2, QLEN + 1, BSZ), np.float32)), "target_mapping has shape [2, 8, 4], where"),
    (dict(inp_q=None), "target_mapping is read with inp_q only"),
    (dict(mems=[np.zeros((MLEN, BSZ, CONFIG.d_model), np.float32)]), "mems must be a list of n_layer=2 tensors"),
    (dict(mems=[np.zeros((MLEN, BSZ, CONFIG.d_model), np.float32), np.zeros((MLEN, BSZ, 3), np.float32)]),
     "mems[1] has shape [5, 4, 3], where mems[0] [5, ...], input_ids [len, bsz] and d_model=8 make it [5, 4, 8]"),
], ids=["seg", "mask", "ids-rank", "ids-float", "perm-batch-major", "mapping-len", "mapping-without-q", "mems-count",
        "mems-width"])
def test_inputs_that_do_not_fit_together_are_named(change, error):
  """Inputs whose shapes do not fit failed deep in the network with TensorFlow's message naming an op (or were read
  otherwise: float ids truncated, target_mapping without inp_q ignored); one error names the argument."""
  model = XLNetModel(CONFIG, run_config(mem_len=MLEN))
  x = {k: v for k, v in random_inputs().items() if k != "input_ids"}
  args = dict(input_ids=random_inputs()["input_ids"], **x)
  args.update(change)
  with pytest.raises((ValueError, TypeError)) as caught:
    model(args.pop("input_ids"), **args)
  assert error in str(caught.value), str(caught.value)


def test_a_batch_major_output_is_not_pooled():
  """get_pooled_out of a batch-major output pooled over its batch, [len, d_model], without a word."""
  model = XLNetModel(CONFIG, run_config(), heads=finetune_heads(CONFIG, run_config(), "last"))
  x = random_inputs()
  out, _ = model(x["input_ids"], x["seg_ids"], x["input_mask"])
  assert model.get_pooled_out(out, x["input_mask"]).shape == (BSZ, CONFIG.d_model)
  with pytest.raises(ValueError, match=r"output has shape \[4, 7, 8\], input_mask \[7, 4\]: the output must be "
                                       r"time-major"):
    model.get_pooled_out(tf.transpose(out, [1, 0, 2]), x["input_mask"])


def test_layer_norm_rows_equals_keras_layer_norm_with_gradients():
  rng = np.random.RandomState(0)
  norm = keras.layers.LayerNormalization(epsilon=1e-12)
  norm.build((None, 8))
  norm.gamma.assign(rng.randn(8)), norm.beta.assign(rng.randn(8))
  rows = (3 * rng.randn(5, 8) + 1).astype(np.float32)
  with tf.GradientTape(persistent=True) as tape:
    x = tf.constant(rows)
    tape.watch(x)
    weights = tf.constant(rng.randn(5, 8).astype(np.float32))
    want, got = (tf.reduce_sum(weights * f(x)) for f in (norm, lambda t: layer_norm_rows(norm, t)))
  np.testing.assert_allclose(got, want, rtol=1e-5)
  for w, g in zip(tape.gradient(want, [x, norm.gamma, norm.beta]), tape.gradient(got, [x, norm.gamma, norm.beta])):
    np.testing.assert_allclose(g, w, atol=1e-5)


@pytest.mark.parametrize("with_q", [True, False])
def test_projection_with_mems_equals_autodiff_of_the_concatenation(with_q):
  """The custom gradient skips the memory's rows; the outputs and the gradients of h and the kernels are TF's."""
  rng = np.random.RandomState(0)
  mems = tf.constant(rng.randn(MLEN, BSZ, 8).astype(np.float32))
  h = tf.Variable(rng.randn(QLEN, BSZ, 8).astype(np.float32))
  kernels = [tf.Variable(rng.randn(8, 2, 6).astype(np.float32)) for _ in range(3)]
  q_kernel = kernels[2] if with_q else None

  def by_concatenation():
    cat = tf.concat([mems, h], 0)
    return projections.project_heads(cat, kernels[:2]) + (projections.project_heads(h, [q_kernel]) if with_q else [])

  with tf.GradientTape(persistent=True) as tape:
    want, got = by_concatenation(), projections.project_heads_with_mems(mems, h, kernels[:2], q_kernel)
    weights = [tf.constant(rng.randn(*w.shape).astype(np.float32)) for w in want]
    loss_want, loss_got = (tf.add_n([tf.reduce_sum(w * o) for w, o in zip(weights, outs)]) for outs in (want, got))
  shapes = [(2, BSZ, MLEN + QLEN, 6)] * 2 + [(2, BSZ, QLEN, 6)] * with_q
  assert [o.shape for o in got] == [o.shape for o in want] == shapes
  for w, g in zip(want, got):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
  variables = [h] + kernels[:2 + with_q]
  for w, g in zip(tape.gradient(loss_want, variables), tape.gradient(loss_got, variables)):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_layer_norm_rows_after_dropout_and_residual_equals_keras_with_gradients():
  """layer_norm_rows(norm, x, residual, keep) is norm(dropout(x) + residual), with the gradients of x, the
  residual, gamma and beta; the dropout's mask and scale as `layers.Dropout` applies them."""
  rng = np.random.RandomState(1)
  norm = keras.layers.LayerNormalization(epsilon=1e-12)
  norm.build((None, 8))
  norm.gamma.assign(rng.randn(8)), norm.beta.assign(rng.randn(8))
  drop = layers.Dropout(0.3, seed=3)
  x, residual = (tf.constant((3 * rng.randn(6, 8) + 1).astype(np.float32)) for _ in range(2))
  keep = drop.keep(x)
  assert 0 < int(tf.reduce_sum(tf.cast(keep[0] < keep[1], tf.int32))) < 48  # some dropped, some kept
  weights = tf.constant(rng.randn(6, 8).astype(np.float32))
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([x, residual])
    want = tf.reduce_sum(weights * norm(ops.apply_keep(x, keep) + residual))
    got = tf.reduce_sum(weights * layer_norm_rows(norm, x, residual, keep))
  np.testing.assert_allclose(got, want, rtol=1e-5)
  targets = [x, residual, norm.gamma, norm.beta]
  for w, g in zip(tape.gradient(want, targets), tape.gradient(got, targets)):
    np.testing.assert_allclose(g, w, atol=1e-5)


def _shifted_by_score_sum(bd, offset, klen):
  """scores.score_sum with only its shift at work: ac = 0, no segments, no mask."""
  ac = tf.zeros(tf.concat([tf.shape(bd)[:-1], [klen]], 0), bd.dtype)
  return scores.score_sum(ac, bd, None, None, None, tf.constant(offset, tf.int32))


def test_score_sum_shifts_the_query_rows_like_rel_shift_then_gather_with_gradients():
  rng = np.random.RandomState(0)
  n_head, bsz, qlen, klen, n_pred = 2, 3, 5, 8, 3
  rlen = klen + qlen  # bi attention
  x = rng.randn(n_head, bsz, n_pred, rlen).astype(np.float32)  # the scores of P query rows
  rows = np.array([[4, 0, 2], [1, 3, 0], [2, 2, 4]])  # [B, P] their query positions

  def reference(t):  # put each slot's scores at its query position of an [I, R] block, shift, read that row
    out = []
    for p in range(n_pred):
      shifted = scores.rel_shift_keys_last(tf.broadcast_to(t[:, :, p:p + 1], [n_head, bsz, qlen, rlen]), klen)
      out.append(tf.stack([shifted[:, b, rows[b, p]] for b in range(bsz)], 1))
    return tf.stack(out, 2)

  want, (want_grad,) = _grads(reference, x)
  got, (got_grad,) = _grads(lambda t: _shifted_by_score_sum(t, qlen - rows, klen), x)
  np.testing.assert_allclose(got, want, atol=0)
  np.testing.assert_allclose(got_grad, want_grad, atol=1e-6)


@pytest.mark.parametrize("attn_type", ["bi", "uni"])
def test_score_sum_shifts_the_content_stream_like_rel_shift_with_gradients(attn_type):
  rng = np.random.RandomState(0)
  n_head, bsz, qlen, klen = 2, 3, 5, 8
  rlen = klen + qlen if attn_type == "bi" else klen + 1
  x = rng.randn(n_head, bsz, qlen, rlen).astype(np.float32)
  offset = (qlen - np.arange(qlen))[None]
  got, (got_grad,) = _grads(lambda t: _shifted_by_score_sum(t, offset, klen), x)
  want, (want_grad,) = _grads(lambda t: scores.rel_shift_keys_last(t, klen), x)
  # With uni attention the keys past the query's own position read beyond R (the causal mask blocks them): the
  # score sum clamps those reads, rel_shift reads the next row; only the keys a query may attend must agree.
  readable = np.arange(klen)[None, :] + offset[0][:, None] <= rlen - 1  # [I, J]
  np.testing.assert_allclose(got[..., readable], want[..., readable], atol=0)
  if attn_type == "bi":
    assert readable.all()
    np.testing.assert_allclose(got_grad, want_grad, atol=1e-6)


@pytest.mark.parametrize("columns", [1, 2, 4])
def test_banded_position_scores_equal_the_full_product_shifted(columns):
  rng = np.random.RandomState(0)
  n_head, bsz, qlen, klen, d_head = 2, 4, 12, 17, 5
  q_r = tf.constant(rng.randn(n_head, bsz, qlen, d_head).astype(np.float32))
  k_r = tf.constant(rng.randn(n_head, columns, d_head, klen + qlen).astype(np.float32))  # positions last
  full = tf.reshape(tf.matmul(tf.reshape(q_r, [n_head, columns, -1, d_head]), k_r), [n_head, bsz, qlen, -1])
  expected = scores.rel_shift_keys_last(full, klen)
  for rows in (3, 4, 6):
    band, offset = scores.banded_position_scores(q_r, k_r, klen, rows)  # TF: the windows, for the gather
    assert band.shape == (n_head, bsz, qlen, klen + rows)
    np.testing.assert_allclose(_shifted_by_score_sum(band, offset, klen), expected, rtol=1e-6, atol=1e-6)
    compiled = tf.function(lambda: scores.banded_position_scores(q_r, k_r, klen, rows)[0], jit_compile=True)
    np.testing.assert_allclose(compiled(), expected, rtol=1e-6, atol=1e-6)  # XLA: shifted here (offset None)
  assert scores.banded_position_scores(q_r, k_r, klen, rows=5) is None  # 12 rows are not blocks of 5
  assert scores.banded_position_scores(q_r, k_r, klen + 1, rows=4) is None  # R != klen + I (uni attention)


def test_inference_takes_the_banded_position_scores_with_the_same_output():
  # In inference (training=False) a content stream of 128 queries computes its position scores in blocks of 64;
  # without dropout, training=True computes the same function with the full product.
  model = make_model()
  x = random_inputs(qlen=128)
  args = (x["input_ids"], x["seg_ids"], x["input_mask"])
  # Also with the batch size unknown when traced, as evaluation without drop_remainder traces it.
  unknown_batch = [tf.TensorSpec([128, None], a.dtype) for a in args]
  forward = tf.function(lambda *a: model(*a)[0], input_signature=unknown_batch)
  graph = forward.get_concrete_function().graph
  assert any(op.type == "Pack" and op.inputs[0].shape.rank == 4 for op in graph.get_operations())  # the windows
  want = model(*args, training=True)[0]
  np.testing.assert_allclose(forward(*args), want, atol=1e-5)
  np.testing.assert_allclose(tf.function(lambda: model(*args)[0], jit_compile=True)(), want, atol=1e-5)


def test_rel_shift_keys_last_equals_rel_shift():
  x = np.random.RandomState(0).randn(6, 11, 2, 3).astype(np.float32)  # [I, R, B, N], the original layout
  want = ops.rel_shift(tf.constant(x), klen=9).numpy()
  got = scores.rel_shift_keys_last(tf.transpose(x, [3, 2, 0, 1]), 9).numpy()
  np.testing.assert_array_equal(np.transpose(got, [2, 3, 1, 0]), want)


def test_dropout_drops_at_its_rate_and_rescales():
  for shape in [(64, 32, 16), (64, 32, 15)]:  # even last dim: 16-bit uniforms; odd: 32-bit
    drop = layers.Dropout(0.3, seed=3)
    x = tf.ones(shape)
    out = drop(x, training=True).numpy()
    np.testing.assert_allclose(np.unique(out), [0.0, 1 / 0.7], rtol=1e-6)
    assert abs((out == 0).mean() - 0.3) < 0.01
    np.testing.assert_array_equal(drop(x, training=False), x)
    keep, scale = drop.unscaled_keep(x, training=True)
    unscaled = ops.apply_keep(x, keep)
    assert set(np.unique(unscaled).tolist()) == {0.0, 1.0} and scale == pytest.approx(1 / 0.7)
    assert not np.array_equal(out == 0, unscaled.numpy() == 0)  # the seed generator advances


def test_xla_philox_equals_tf_kernel():
  # Dropout draws its bits in an XLA function: it must give the numbers of TF's stateless Philox kernel.
  seed = tf.constant([7, 123456789])
  for shape in ([3, 5, 64], [1001]):
    shape = tf.constant(shape)
    np.testing.assert_array_equal(
        ops.philox_words(shape, seed),
        tf.random.stateless_uniform(shape, seed, minval=None, maxval=None, dtype=tf.uint32, alg="philox"))


@pytest.mark.parametrize("seg", [False, True])
def test_query_stream_on_target_rows_equals_the_originals_scatter_gather(seg):
  """With target_mapping, the query stream attends from the P target rows only. The original scatters the P query
  vectors to all I positions, attends from every position and gathers back: same values and gradients for a
  one-hot mapping; an all-zero (padding) slot gets a zero attention output in both."""
  keras.utils.set_random_seed(2)
  rng = np.random.RandomState(2)
  d_model, n_head, d_head, qlen, mlen, bsz = 8, 2, 6, 7, 3, 2
  layer = layers.TwoStreamRelAttention(d_model, n_head, d_head)
  klen = qlen + mlen
  f = lambda *s: tf.constant(rng.randn(*s).astype(np.float32))
  h, g, mems, r = f(qlen, bsz, d_model), f(3, bsz, d_model), f(mlen, bsz, d_model), f(klen + qlen, bsz, d_model)
  biases = [f(n_head, d_head) for _ in range(3)]
  seg_embed = f(2, n_head, d_head)
  seg_mat = tf.one_hot(rng.randint(0, 2, (qlen, klen, bsz)), 2) if seg else None
  mask = tf.constant((rng.rand(qlen, klen, bsz, 1) < 0.3).astype(np.float32))
  mapping = np.zeros((3, qlen, bsz), np.float32)
  mapping[0, 5, 0] = mapping[1, 2, 0] = mapping[2, 6, 0] = 1
  mapping[0, 1, 1] = mapping[1, 4, 1] = 1  # slot 2 of column 1 is padding
  mapping = tf.constant(mapping)
  weights = f(3, bsz, d_model)

  def run(scatter):
    with tf.GradientTape() as tape:
      tape.watch([h, g])
      kw = dict(biases=attention.AttentionBiases(biases[0], biases[1], biases[2] if seg else None,
                                                 seg_embed if seg else None), mems=mems)
      if scatter:
        g_full = tf.einsum("mbh,mib->ibh", g, mapping)
        _, out_full = layer(h, r, context=attention.attention_context(mask, mask, seg_mat), g=g_full, **kw)
        attn_full = out_full  # LayerNorm(g_full + o(attn)) at every position; gather the targets back
        out = tf.einsum("ibh,mib->mbh", attn_full, mapping)
        # The padding slot: the original's output is LayerNorm(g + 0).
        pad = layer_norm_rows(layer.layer_norm, g[2:, 1])[:, None]
        out = tf.concat([out[:, :1], tf.concat([out[:2, 1:], pad], 0)], 1)
      else:
        _, out = layer(h, r, context=attention.attention_context(mask, mask, seg_mat, mapping), g=g, **kw)
      loss = tf.reduce_sum(out * weights)
    return out.numpy(), tape.gradient(loss, [h, g] + layer.trainable_variables)

  want, want_grads = run(True)
  got, got_grads = run(False)
  np.testing.assert_allclose(got, want, atol=1e-5)
  for w, g_ in zip(want_grads, got_grads):
    np.testing.assert_allclose(g_, w, atol=1e-4)


def make_model(**kw):
  keras.utils.set_random_seed(1)
  rc = run_config(mem_len=6, reuse_len=4)
  return XLNetModel(CONFIG, rc, heads=finetune_heads(CONFIG, rc, **kw) if kw else None)


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


def test_last_layer_runs_the_query_stream_alone():
  # The content stream's output of the last layer feeds nothing in two-stream mode (the original's graph never runs
  # it): its attention products are not built. Each stream's attention is 4 batched matmuls (content and position
  # scores, values, and the segment term's [N, B*Q, D] x [N, D, 1] product on the content queries).
  model = make_model()
  model.transformer.inference_chains = 1  # the batch in one chain (see the next test)
  x = random_inputs()
  kw = dict(perm_mask=x["perm_mask"], target_mapping=x["target_mapping"], inp_q=x["inp_q"])
  graph = tf.function(lambda: model(x["input_ids"], x["seg_ids"], x["input_mask"], mems=x["mems"], **kw)
                      ).get_concrete_function().graph
  assert _attention_products(graph) == 4 * (2 * CONFIG.n_layer - 1)


def _attention_products(graph):
  return sum(op.type == "BatchMatMulV2" for op in graph.get_operations())


@pytest.mark.slow  # the default suite's 15 minutes; by default: test_classifier_flow
@pytest.mark.parametrize("two_stream", [False, True])
def test_inference_chains_split_the_batch_with_the_same_outputs(two_stream, monkeypatch):
  # On a CPU with 2 or more inter-op threads, inference runs the batch as independent chains of layers (5 examples
  # in 3 chains: 2, 2, 1), with every batched input split: the outputs and new mems are those of one chain.
  inter_op = 2
  monkeypatch.setattr(tf.config.threading, "get_inter_op_parallelism_threads", lambda: inter_op)
  model = make_model()
  x = random_inputs(bsz=5)
  args = (x["input_ids"], x["seg_ids"], x["input_mask"])
  kw = dict(mems=x["mems"])
  if two_stream:
    kw.update(perm_mask=x["perm_mask"], target_mapping=x["target_mapping"], inp_q=x["inp_q"])
  results, products = {}, {}
  for chains in (1, 3):
    model.transformer.inference_chains = chains
    forward = tf.function(lambda: model(*args, **kw))
    products[chains] = _attention_products(forward.get_concrete_function().graph)
    results[chains] = forward()
  content = 4 * CONFIG.n_layer  # 4 per stream and layer; two-stream: no content stream in the last layer
  per_chain = 2 * content - 4 if two_stream else content
  assert products == {1: per_chain, 3: 3 * per_chain}
  (out_1, mems_1), (out_3, mems_3) = results[1], results[3]
  np.testing.assert_allclose(out_3, out_1, rtol=1e-6, atol=1e-6)
  for m_3, m_1 in zip(mems_3, mems_1, strict=True):
    np.testing.assert_allclose(m_3, m_1, rtol=1e-6, atol=1e-6)
  # One chain in training, under XLA, for a batch smaller than the chains or unknown when traced, and with one
  # inter-op thread.
  model.transformer.inference_chains = 3
  training = tf.function(lambda: model(*args, training=True, **kw))
  xla = tf.function(lambda: model(*args, **kw), jit_compile=True)
  unknown = tf.function(lambda *a: model(*a)[0], input_signature=[tf.TensorSpec([QLEN, None], a.dtype) for a in args])
  small = tf.function(lambda: model(*(a[:, :2] for a in args))[0])
  assert [_attention_products(f.get_concrete_function().graph) for f in (training, xla, unknown, small)] == [
      per_chain, per_chain, content, content]
  inter_op = 1
  assert _attention_products(tf.function(lambda: model(*args, **kw)).get_concrete_function().graph) == per_chain


def test_get_config_round_trip():
  init = keras.initializers.RandomNormal(stddev=0.02)
  for layer in (layers.PositionwiseFFN(8, 11, 0.1, "gelu", init), layers.RelMultiheadAttn(8, 2, 6, 0.1, 0.2, init),
                layers.TwoStreamRelAttention(8, 2, 6), XLNetLayer(8, 2, 6, 11, "relu"),
                TransformerXL(CONFIG, run_config(is_training=True, dropout=0.1, bi_data=True, mem_len=5, reuse_len=3),
                              "uni"),
                SequenceSummary("attn", 8, 2, 6), LogitHead.regression("sts-b", 8)):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
  model = make_model(summary_type="mean", cls_heads={"toy": 3})
  clone = XLNetModel.from_config(model.get_config())
  assert clone.get_config() == model.get_config()
  assert [v.path for v in clone.trainable_variables] == [v.path for v in model.trainable_variables]


def test_transformer_xl_takes_the_model_and_run_configs():
  # As XLNetModel: the configs or their dicts; dropout only with is_training; the run config's dtype policy; and a
  # Keras config round trip to the same variables.
  rc = run_config(dropout=0.3, dropatt=0.2, use_bfloat16=True, mem_len=5).to_dict()
  network = TransformerXL(CONFIG.to_dict(), rc)
  assert (network.name, network.dtype_policy.name, network.dropout, network.dropatt) == (
      "transformer", "mixed_bfloat16", 0.0, 0.0)
  assert network.layer_stack[0].dropatt == 0.0 and len(network.layer_stack) == CONFIG.n_layer
  training = TransformerXL(CONFIG, RunConfig(**dict(rc, is_training=True)), "uni")
  assert (training.dropout, training.layer_stack[1].dropatt, training.attn_type) == (0.3, 0.2, "uni")
  clone = TransformerXL.from_config(training.get_config())
  for layer in (training, clone):
    layer.build()
  assert clone.dtype_policy.name == "mixed_bfloat16" and clone.run_config.mem_len == 5
  assert [(v.path, v.shape) for v in clone.weights] == [(v.path, v.shape) for v in training.weights]


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


def _addn_fan_ins(fn):
  """The input counts of the AddN ops of fn's graph (autodiff sums a tensor's gradients with one AddN)."""
  graph = tf.function(fn).get_concrete_function().graph
  return sorted(len(op.inputs) for op in graph.get_operations() if op.type == "AddN")


@pytest.mark.parametrize("untie_r,two_stream,with_mems,summary", [  # two of them slow: the default suite's 15 min
    (True, True, True, None), pytest.param(False, True, False, None, marks=pytest.mark.slow),
    pytest.param(False, False, True, "attn", marks=pytest.mark.slow), (True, False, False, "last")])
def test_no_gradient_is_an_addn_of_three_or_more_terms(untie_r, two_stream, with_mems, summary):
  # TF's CPU AddN adds 3 or more inputs in an order that depends on op scheduling (see `layers`), which broke the
  # bit-exact resume of run_pretrain.py --deterministic about once in a thousand steps.
  config = XLNetConfig(**{**CONFIG.to_dict(), "n_layer": 3, "untie_r": untie_r})
  keras.utils.set_random_seed(1)
  rc = run_config(mem_len=6, reuse_len=4, bi_data=two_stream, dropout=0.1, dropatt=0.1)
  model = XLNetModel(config, rc, heads=finetune_heads(config, rc, summary or "last", cls_heads={"toy": 3}))
  x = random_inputs()
  extra = dict(perm_mask=x["perm_mask"], target_mapping=x["target_mapping"], inp_q=x["inp_q"]) if two_stream else {}
  mems = x["mems"] + [x["mems"][0]] if with_mems else None
  model(x["input_ids"], x["seg_ids"], x["input_mask"], mems=mems, **extra)  # builds every weight

  def loss_and_grads():
    with tf.GradientTape() as tape:
      out, _ = model(x["input_ids"], x["seg_ids"], x["input_mask"], mems=mems, training=True, **extra)
      if summary:
        loss = tf.reduce_sum(model.get_head_logits(model.get_pooled_out(out, x["input_mask"], training=True), "classification_toy"))
      else:
        loss = tf.reduce_sum(model.get_lm_loss(out, tf.zeros(out.shape[:2], tf.int32)))
    return tape.gradient(loss, model.trainable_variables)

  fan_ins = _addn_fan_ins(loss_and_grads)
  assert fan_ins and max(fan_ins) == 2, fan_ins
