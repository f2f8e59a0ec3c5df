"""XLNet's stateless math, as the original `modeling.py`: activation, initializer, relative positions,
attention masks, segment matrix, memory caching.

All tensors are time-major, as in the original, except the model's attention masks and segment matrix
(`build_attn_masks`, `different_segments`), which are batch-major [B, I, J] for the head-major attention.
Dimension key used in shapes and einsum strings:
  I qlen (queries), M mlen (memory), J klen = mlen + qlen (keys), R klen + qlen (relative positions),
  B bsz, N n_head, D d_head, H d_model, F d_inner, V n_token, P num_predict (m in einsum strings), S = 2 segments.

Mask polarity everywhere: 1 (or True) = may NOT attend, 0 = may attend. `input_mask` uses 1 = padding.

Bit-exact training (`--deterministic`): autodiff sums the gradients of a tensor read by k ops with one AddN, and
TF's CPU AddN adds its inputs in an order that depends on which input buffer it may reuse at run time, i.e. on op
scheduling. For k >= 3 that changes the last bits from run to run even with op determinism enabled (for k = 2 the
order does not matter). So every tensor that has a gradient is read by at most two ops here (tests/test_layers.py
checks the gradient graphs).
"""

import functools
import math

import keras
import tensorflow as tf


_NESTED_XLA = [True]


def xla_function(fn):
  """`fn` as an XLA-compiled `tf.function`: the element-wise chains and their hand-written gradients (GELU,
  LayerNorm, the score sum, the cross-entropy, the dropout's bits, ...) each one XLA program instead of a chain of
  TensorFlow kernels. After `set_nested_xla(False)` a call made while tracing runs `fn`'s ops as TensorFlow's own
  kernels instead, the same math: the benchmarks' switch to measure what the programs cost where each is a launch
  of its own (on a GPU, about 77 per eager pretraining step; under `--jit_compile` they are part of the step's
  program either way)."""
  compiled = tf.function(fn, jit_compile=True, autograph=False)  # graph code as written: nothing to convert

  @functools.wraps(fn)
  def call(*args, **kwargs):
    return (compiled if _NESTED_XLA[0] else fn)(*args, **kwargs)

  return call


def set_nested_xla(enabled):
  """Whether `xla_function`s traced from now on run as XLA programs (True: the default) or as TensorFlow's
  kernels."""
  _NESTED_XLA[0] = bool(enabled)


_GELU_2C = 2.0 * math.sqrt(2.0 / math.pi)


_GELU_A = 0.044715


@xla_function
def philox_words(shape, seed):
  """`tf.random.stateless_uniform(shape, seed, dtype=tf.uint32, alg="philox")` full-range words, compiled by XLA:
  the same numbers as TF's kernel, faster on CPU (XLA vectorises the generator; docs/performance.md)."""
  return tf.random.stateless_uniform(shape, seed, minval=None, maxval=None, dtype=tf.uint32, alg="philox")


def apply_keep(x, keep):
  """A dropout mask applied: x * scale where uniforms >= threshold, 0 elsewhere; keep = (uniforms, threshold,
  scale) as `layers.Dropout.keep` draws it (scale None: x unscaled), or None (x unchanged)."""
  if keep is None:
    return x
  uniforms, threshold, scale = keep
  kept = x if scale is None else x * tf.cast(scale, x.dtype)
  return tf.where(uniforms >= threshold, kept, tf.zeros([], x.dtype))


@xla_function
def _gelu_forward(x, keep=None):
  x_sq = x * x
  return apply_keep(x * tf.sigmoid(x * (_GELU_2C + (_GELU_2C * _GELU_A) * x_sq)), keep)


@xla_function
def _gelu_backward(x, upstream, keep=None):
  x_sq = x * x
  cdf = tf.sigmoid(x * (_GELU_2C + (_GELU_2C * _GELU_A) * x_sq))
  slope = (_GELU_2C + (3.0 * _GELU_2C * _GELU_A) * x_sq) * x
  return apply_keep(upstream, keep) * (cdf + cdf * (1.0 - cdf) * slope)


@tf.custom_gradient
def gelu(x):
  """The original's tanh approximation of GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

  Computed as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), which is the same function
  (0.5 (1 + tanh(u)) = sigmoid(2u)), with a hand-written gradient
  (s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2), s = sigmoid(2u)) instead of autodiff through the chain.
  Forward and gradient are each one XLA-compiled element-wise pass (the gradient recomputes s from x), where
  TF's element-wise ops take five and seven passes over the [K, F] activation (docs/performance.md).
  """

  def grad(upstream):
    return _gelu_backward(x, upstream)

  return _gelu_forward(x), grad


def gelu_dropout(x, keep):
  """Dropout of gelu(x) in the same two passes as `gelu`: apply_keep(gelu(x), keep).

  The same numbers as `gelu` followed by `layers.Dropout` with this mask (keep: its `keep(x)`), without the
  dropout's own passes over the activation (three forward, two backward).
  """

  @tf.custom_gradient
  def fused(x):
    return _gelu_forward(x, keep), lambda upstream: _gelu_backward(x, upstream, keep)

  return fused(x)


def gelu_inference(x):
  """`gelu` (the same function, equal up to float32 rounding) written as TF's own `tf.nn.gelu(approximate=True)`.

  Where `tf_gelu_fuses`, grappler fuses that pattern with a preceding MatMul+BiasAdd into one oneDNN kernel, which
  makes the fine-tuning forward's first FFN layer faster; it cannot fuse `gelu`, whose custom gradient wraps it. Its
  autodiff gradient is slower than `gelu`'s, so use it where no gradient is taken.
  """
  return tf.nn.gelu(x, approximate=True)


def tf_gelu_fuses(dtype):
  """Whether `gelu_inference` runs fused into the MatMul+BiasAdd before it in `rows.dense_rows`: grappler's remapper
  fuses them with oneDNN's kernels only (TensorFlow turns oneDNN on for x86 CPUs with AVX512_VNNI, AVX512_BF16,
  AVX-VNNI or AMX, or with TF_ENABLE_ONEDNN_OPTS=1), in float32 (the bfloat16 bias add is a plain add) and on the
  CPU (no GPU visible). Elsewhere (an AVX2 CPU, a GPU) TF's GELU is nine element-wise kernels and `gelu` one
  XLA-compiled pass, the faster there (docs/performance.md)."""
  try:
    from tensorflow.python.util import _pywrap_util_port  # pylint: disable=import-outside-toplevel
    onednn = _pywrap_util_port.IsMklEnabled()
  except (ImportError, AttributeError):  # a TensorFlow without the query: take the form that is right everywhere
    onednn = False
  return tf.as_dtype(dtype) == tf.float32 and onednn and not tf.config.get_visible_devices("GPU")


def get_activation(ff_activation, training=True, dtype=tf.float32):
  """The activation `ff_activation` names; with training=False, the form that is fastest without a gradient for
  activations of `dtype` (`tf_gelu_fuses`)."""
  if ff_activation == "relu":
    return tf.nn.relu
  if ff_activation == "gelu":
    return gelu_inference if not training and tf_gelu_fuses(dtype) else gelu
  raise ValueError(f"ff_activation must be 'relu' or 'gelu'. Received: {ff_activation!r}.")


def get_initializer(init="normal", init_range=0.1, init_std=0.02):
  """The original's `_get_initializer`: a plain (not truncated) normal, or a uniform in [-range, range].

  Every call of the returned initializer is a new draw, as every TF1 variable's own initializer op: it holds a
  `keras.random.SeedGenerator`, so one instance can be shared by all the variables of a model. (A Keras 3
  initializer with an int or no seed returns the same values at every call of one shape.) The generator's seed
  comes from Keras's global seed: `keras.utils.set_random_seed(s)` makes the weights reproducible.
  """
  seed = keras.random.SeedGenerator()
  if init == "normal":
    return keras.initializers.RandomNormal(stddev=init_std, seed=seed)
  if init == "uniform":
    return keras.initializers.RandomUniform(minval=-init_range, maxval=init_range, seed=seed)
  raise ValueError(f"init must be 'normal' or 'uniform'. Received: {init!r}.")


def in_xla_context():
  """Whether the ops being built now will be compiled by XLA as a whole: inside a `tf.function(jit_compile=True)`
  (also nested in it) or a TPU replica; False eagerly and in a plain `tf.function`."""
  from tensorflow.python.ops import control_flow_util  # pylint: disable=import-outside-toplevel  # TF's own check
  return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def is_training(training):
  """Whether a layer's `training` argument asks for training: anything but None and False (a tensor counts, as
  Keras may pass one when tracing); a string is a TypeError ("False" ran dropout: sweep 35)."""
  if isinstance(training, (str, bytes)):
    raise TypeError(f"training must be True, False or None. Received: {training!r}.")
  return training is not None and training is not False


def mask_value(dtype):
  """The large negative score of a blocked position; -1e30 as the original, but finite in float16."""
  return -6e4 if tf.as_dtype(dtype) == tf.float16 else -1e30


def rel_shift(x, klen):
  """The Transformer-XL relative shift in the original's layout (the model runs `rel_shift_keys_last`, the same
  shift on head-major scores; this one is its reference in the tests).

  Args:
    x: float [I, R, B, N], scores of query i against relative position index r (R = klen + qlen for bi
      attention; r = 0 is the largest distance).
    klen: int, number of keys to keep.

  Returns:
    float [I, klen, B, N]; entry (i, j) holds the score of relative distance (mlen + i) - j.
  """
  x_size = tf.shape(x)
  x = tf.reshape(x, [x_size[1], x_size[0], x_size[2], x_size[3]])
  x = x[1:]
  x = tf.reshape(x, [x_size[0], x_size[1] - 1, x_size[2], x_size[3]])
  return x[:, :klen]


def positional_embedding(pos_seq, inv_freq, bsz=None):
  """Sinusoids [sin | cos] (concatenated, not interleaved): float [R] -> float [R, 1 or bsz, H]."""
  sinusoid_inp = tf.einsum("i,d->id", pos_seq, inv_freq)
  pos_emb = tf.concat([tf.sin(sinusoid_inp), tf.cos(sinusoid_inp)], -1)[:, None, :]
  if bsz is not None:
    pos_emb = tf.tile(pos_emb, [1, bsz, 1])
  return pos_emb


def relative_positional_encoding(qlen, klen, d_model, clamp_len, attn_type, bi_data, bsz=None, dtype=tf.float32,
                                 compute_dtype=tf.float32):
  """Relative positional encoding, as the original.

  Positions run klen, klen-1, ..., -qlen+1 for `bi` attention and klen, ..., 0 for `uni`, clipped to
  +-clamp_len when clamp_len > 0. With `bi_data`, the first bsz/2 batch columns get the forward sequence and
  the second half the negated one (the backward streams). The frequencies, positions and sinusoids are computed in
  `compute_dtype`, the result cast to `dtype`: the original computes them in bfloat16 where it runs in bfloat16
  (`compute_dtype=tf.bfloat16`), so that positions past 256 and the sinusoids' arguments are rounded (an encoding
  off by up to 2.0 at distance 512; `RunConfig.float32_positions` computes it in float32).

  Returns:
    float [R, bsz (or 1 without bsz and bi_data False, 2 with bi_data), H].
  """
  freq_seq = tf.cast(tf.range(0, d_model, 2.0), compute_dtype)
  inv_freq = 1 / (10000 ** (freq_seq / d_model))
  if attn_type == "bi":
    beg, end = klen, -qlen
  elif attn_type == "uni":
    beg, end = klen, -1
  else:
    raise ValueError(f"attn_type must be 'bi' or 'uni'. Received: {attn_type!r}.")
  fwd_pos_seq = tf.cast(tf.range(beg, end, -1.0), compute_dtype)
  if clamp_len > 0:
    fwd_pos_seq = tf.clip_by_value(fwd_pos_seq, -clamp_len, clamp_len)
  if bi_data:
    bwd_pos_seq = tf.cast(tf.range(-beg, -end, 1.0), compute_dtype)
    if clamp_len > 0:
      bwd_pos_seq = tf.clip_by_value(bwd_pos_seq, -clamp_len, clamp_len)
    half = None if bsz is None else bsz // 2
    pos_emb = tf.concat([positional_embedding(fwd_pos_seq, inv_freq, half),
                         positional_embedding(bwd_pos_seq, inv_freq, half)], axis=1)
  else:
    pos_emb = positional_embedding(fwd_pos_seq, inv_freq, bsz)
  return tf.cast(pos_emb, dtype)


def causal_attn_mask(qlen, mlen, same_length=False, dtype=tf.float32):
  """The `uni` attention mask (the original `_create_mask`).

  Returns:
    float [I, J]: 1 where query i may not attend key j: future tokens; with `same_length` also keys more than
    qlen positions back, so every query sees the same number of keys.
  """
  ones = tf.ones([qlen, qlen], dtype=dtype)
  mask_u = tf.linalg.band_part(ones, 0, -1)
  mask_dia = tf.linalg.band_part(ones, 0, 0)
  ret = tf.concat([tf.zeros([qlen, mlen], dtype=dtype), mask_u - mask_dia], 1)
  if same_length:
    mask_l = tf.linalg.band_part(ones, -1, 0)
    ret = tf.concat([ret[:, :qlen] + mask_l - mask_dia, ret[:, qlen:]], 1)
  return ret


def batch_major(x):
  """x float or int [..., B] -> float32 [B, ...]: the batch axis moved first, in a buffer of its own.

  A transpose is free under XLA: it becomes index arithmetic in every op that reads its result, and reading a
  time-major [L, B] input along L is then a strided gather (16 scalar loads per 16-lane vector in the two passes
  over each layer's scores, which read the padding mask and segment id of every key). A product with the
  identity makes XLA write the batch-major copy once. Exact for finite inputs (ids, masks): each entry is one
  term 1 * x plus terms 0 * x.
  """
  x = tf.cast(x, tf.float32)
  shape = tf.shape(x)
  flat = tf.reshape(x, [-1, shape[-1]])
  out = tf.matmul(tf.eye(shape[-1]), flat, transpose_b=True)
  return tf.reshape(out, tf.concat([shape[-1:], shape[:-1]], 0))


def build_attn_masks(qlen, mlen, attn_type="bi", same_length=False, input_mask=None, perm_mask=None,
                     dtype=tf.float32):
  """The query-stream and content-stream attention masks of `transformer_xl`, batch-major.

  Args:
    qlen, mlen: int or scalar int tensors.
    attn_type: "bi" (no causal mask) or "uni".
    same_length: bool, only with "uni".
    input_mask: float [B, I] or None (batch-major, e.g. `batch_major` of the model's [I, B] input). 1 = padding
      token (no query may attend it).
    perm_mask: float [B, I, I] or None (batch-major). 1 = query i may not attend token j.

  Returns:
    (attn_mask, non_tgt_mask): float [B or 1, I or 1, J] and [B or 1, I, J], or (None, None) when nothing is
    masked. `attn_mask` (query stream) blocks memory never, and blocks whatever `input_mask`, `perm_mask` and the
    causal mask block. `non_tgt_mask` (content stream) is the same but lets every token see itself.
  """
  attn_mask = None
  if attn_type == "uni":
    attn_mask = causal_attn_mask(qlen, mlen, same_length, dtype)[None]
  elif attn_type != "bi":
    raise ValueError(f"attn_type must be 'bi' or 'uni'. Received: {attn_type!r}.")

  data_mask = None
  if input_mask is not None:
    data_mask = tf.cast(input_mask, dtype)[:, None]
  if perm_mask is not None:
    perm_mask = tf.cast(perm_mask, dtype)
    data_mask = perm_mask if data_mask is None else data_mask + perm_mask
  if data_mask is not None:
    shape = tf.shape(data_mask)
    data_mask = tf.concat([tf.zeros([shape[0], shape[1], mlen], dtype=dtype), data_mask], 2)
    attn_mask = data_mask if attn_mask is None else attn_mask + data_mask

  if attn_mask is None:
    return None, None
  attn_mask = tf.cast(attn_mask > 0, dtype)
  non_tgt_mask = tf.concat([tf.zeros([qlen, mlen], dtype=dtype), -tf.eye(qlen, dtype=dtype)], axis=-1)
  non_tgt_mask = tf.cast((attn_mask + non_tgt_mask[None]) > 0, dtype)
  return attn_mask, non_tgt_mask


def different_segments(seg_id, mlen, dtype=tf.float32):
  """The "different segment" matrix, batch-major.

  Args:
    seg_id: float or int [B, I] (batch-major, e.g. `batch_major` of the model's [I, B] input). Memory positions
      count as segment 0.

  Returns:
    float [B, I, J]: 1 = query i and key j are in different segments, 0 = same segment.
  """
  seg_id = tf.cast(seg_id, tf.float32)
  cat_ids = tf.concat([tf.zeros([tf.shape(seg_id)[0], mlen]), seg_id], 1)
  return tf.cast(tf.not_equal(seg_id[:, :, None], cat_ids[:, None, :]), dtype)


def segment_matrix(seg_id, mlen, dtype=tf.float32):
  """The original's one-hot segment matrix (the `seg_mat` argument of the layers' own calls).

  Args:
    seg_id: int [I, B]. Memory positions count as segment 0.

  Returns:
    float [I, J, B, 2]: index 0 = same segment, index 1 = different segment.
  """
  different = different_segments(tf.transpose(seg_id), mlen, tf.int32)
  return tf.one_hot(tf.transpose(different, [1, 2, 0]), 2, dtype=dtype)


def cache_mem(curr_out, prev_mem, mem_len, reuse_len=None):
  """The original `_cache_mem`: the last `mem_len` states of [prev_mem; curr_out[:reuse_len]], no gradient.

  Args:
    curr_out: float [I, B, H], a layer's input states.
    prev_mem: float [M, B, H] or None.
    mem_len: int or None; None or 0 means no memory (returns None).
    reuse_len: int or None; when > 0 only the first reuse_len states are cached.
  """
  if not mem_len:
    return None
  if reuse_len is not None and reuse_len > 0:
    curr_out = curr_out[:reuse_len]
  new_mem = curr_out if prev_mem is None else tf.concat([tf.cast(prev_mem, curr_out.dtype), curr_out], 0)
  return tf.stop_gradient(new_mem[-mem_len:])
