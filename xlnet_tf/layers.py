"""XLNet's building blocks, ported from the original `modeling.py`: pure functions and Keras 3 layers.

All tensors are time-major, as in the original. Dimension key used in shapes and einsum strings:
  I qlen (queries), M mlen (memory), J klen = mlen + qlen (keys), R klen + qlen (relative positions),
  B bsz, N n_head, D d_head, H d_model, F d_inner, V n_token, P num_predict (m in einsum strings), S = 2 segments.

Mask polarity everywhere: 1 (or True) = may NOT attend, 0 = may attend. `input_mask` uses 1 = padding.

Bit-exact training (`--deterministic`): autodiff sums the gradients of a tensor read by k ops with one AddN, and
TF's CPU AddN adds its inputs in an order that depends on which input buffer it may reuse at run time, i.e. on op
scheduling. For k >= 3 that changes the last bits from run to run even with op determinism enabled (for k = 2 the
order does not matter). So every tensor that has a gradient is read by at most two ops here (tests/test_layers.py
checks the gradient graphs).
"""

import math

import keras
import tensorflow as tf

_PACKAGE = "xlnet_tf"


_GELU_2C = 2.0 * math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


@tf.custom_gradient
def gelu(x):
  """The original's tanh approximation of GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

  Computed as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), which is the same function
  (0.5 (1 + tanh(u)) = sigmoid(2u)) in fewer element-wise passes, with a hand-written gradient
  (s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2), s = sigmoid(2u)) instead of autodiff through the chain.
  """
  x_sq = x * x
  cdf = tf.sigmoid(x * (_GELU_2C + (_GELU_2C * _GELU_A) * x_sq))

  def grad(upstream):
    slope = (_GELU_2C + (3.0 * _GELU_2C * _GELU_A) * x_sq) * x
    return upstream * (cdf + cdf * (1.0 - cdf) * slope)

  return x * cdf, grad


def get_activation(ff_activation):
  if ff_activation == "relu":
    return tf.nn.relu
  if ff_activation == "gelu":
    return gelu
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


def relative_positional_encoding(qlen, klen, d_model, clamp_len, attn_type, bi_data, bsz=None, dtype=tf.float32):
  """Relative positional encoding, as the original.

  Positions run klen, klen-1, ..., -qlen+1 for `bi` attention and klen, ..., 0 for `uni`, clipped to
  +-clamp_len when clamp_len > 0. With `bi_data`, the first bsz/2 batch columns get the forward sequence and
  the second half the negated one (the backward streams).

  Returns:
    float [R, bsz (or 1 without bsz and bi_data False, 2 with bi_data), H].
  """
  freq_seq = tf.range(0, d_model, 2.0)
  inv_freq = 1 / (10000 ** (freq_seq / d_model))
  if attn_type == "bi":
    beg, end = klen, -qlen
  elif attn_type == "uni":
    beg, end = klen, -1
  else:
    raise ValueError(f"attn_type must be 'bi' or 'uni'. Received: {attn_type!r}.")
  fwd_pos_seq = tf.range(beg, end, -1.0)
  if clamp_len > 0:
    fwd_pos_seq = tf.clip_by_value(fwd_pos_seq, -clamp_len, clamp_len)
  if bi_data:
    bwd_pos_seq = tf.range(-beg, -end, 1.0)
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


def build_attn_masks(qlen, mlen, bsz, attn_type="bi", same_length=False, input_mask=None, perm_mask=None,
                     dtype=tf.float32):
  """The query-stream and content-stream attention masks of `transformer_xl`.

  Args:
    qlen, mlen, bsz: int or scalar int tensors.
    attn_type: "bi" (no causal mask) or "uni".
    same_length: bool, only with "uni".
    input_mask: float [I, B] or None. 1 = padding token (no query may attend it).
    perm_mask: float [I, I, B] or None. 1 = query i may not attend token j.

  Returns:
    (attn_mask, non_tgt_mask): float [I, J, B, 1] each, or (None, None) when nothing is masked. `attn_mask`
    (query stream) blocks memory never, and blocks whatever `input_mask`, `perm_mask` and the causal mask
    block. `non_tgt_mask` (content stream) is the same but lets every token see itself.
  """
  attn_mask = None
  if attn_type == "uni":
    attn_mask = causal_attn_mask(qlen, mlen, same_length, dtype)[:, :, None, None]
  elif attn_type != "bi":
    raise ValueError(f"attn_type must be 'bi' or 'uni'. Received: {attn_type!r}.")

  data_mask = None
  if input_mask is not None:
    data_mask = tf.cast(input_mask, dtype)[None]
  if perm_mask is not None:
    perm_mask = tf.cast(perm_mask, dtype)
    data_mask = perm_mask if data_mask is None else data_mask + perm_mask
  if data_mask is not None:
    mems_mask = tf.zeros([tf.shape(data_mask)[0], mlen, bsz], dtype=dtype)
    data_mask = tf.concat([mems_mask, data_mask], 1)
    attn_mask = data_mask[:, :, :, None] if attn_mask is None else attn_mask + data_mask[:, :, :, None]

  if attn_mask is None:
    return None, None
  attn_mask = tf.cast(attn_mask > 0, dtype)
  non_tgt_mask = tf.concat([tf.zeros([qlen, mlen], dtype=dtype), -tf.eye(qlen, dtype=dtype)], axis=-1)
  non_tgt_mask = tf.cast((attn_mask + non_tgt_mask[:, :, None, None]) > 0, dtype)
  return attn_mask, non_tgt_mask


def segment_matrix(seg_id, mlen, dtype=tf.float32):
  """One-hot "different segment" matrix.

  Args:
    seg_id: int [I, B]. Memory positions count as segment 0.

  Returns:
    float [I, J, B, 2]: index 0 = same segment, index 1 = different segment.
  """
  seg_id = tf.cast(seg_id, tf.int32)
  cat_ids = tf.concat([tf.zeros([mlen, tf.shape(seg_id)[1]], dtype=tf.int32), seg_id], 0)
  diff = tf.cast(tf.not_equal(seg_id[:, None], cat_ids[None, :]), tf.int32)
  return tf.one_hot(diff, 2, dtype=dtype)


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


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Dropout(keras.layers.Dropout):
  """`keras.layers.Dropout` (same seed generator and config) with a cheaper, XLA-friendly mask.

  The keep mask is drawn with an explicit Philox generator: the default "auto_select" algorithm of TF's stateless
  random ops compiles under XLA on CPU to a generator ~100x slower than the graph kernel. When the last dimension
  is even, each 32-bit random word gives two 16-bit uniforms (half the generator work), so the drop probability
  is round(rate * 65536) / 65536 (0.100006 for 0.1); otherwise 32-bit uniforms are used.
  """

  def call(self, inputs, training=False):
    if not training or self.rate <= 0 or self.noise_shape is not None:
      return super().call(inputs, training=training)
    scale = tf.cast(1.0 / (1.0 - self.rate), inputs.dtype)
    return tf.where(self._keep_mask(inputs), inputs * scale, tf.zeros([], inputs.dtype))

  def drop_unscaled(self, inputs, training=False):
    """Dropout without the 1 / (1 - rate) rescaling, for a caller that rescales a smaller tensor downstream.

    Returns:
      (inputs with the dropped entries zeroed, scale): scale is the python float 1 / (1 - rate), or None when
      nothing is dropped (not training, or rate 0).
    """
    if not training or self.rate <= 0:
      return inputs, None
    return tf.where(self._keep_mask(inputs), inputs, tf.zeros([], inputs.dtype)), 1.0 / (1.0 - self.rate)

  def _keep_mask(self, inputs):
    """bool, shaped like inputs: True = keep."""
    seed = tf.cast(tf.math.floormod(self.seed_generator.next(), 2 ** 31 - 1), tf.int32)
    shape = tf.shape(inputs)
    last = inputs.shape[-1]
    if last is not None and last % 2 == 0:
      bits = tf.random.stateless_uniform(tf.concat([shape[:-1], [last // 2]], 0), seed, minval=None, maxval=None,
                                         dtype=tf.uint32, alg="philox")
      bits = tf.reshape(tf.bitcast(bits, tf.uint16), shape)
      return bits >= tf.constant(min(round(self.rate * 65536), 65535), tf.uint16)
    return tf.random.stateless_uniform(shape, seed, alg="philox") >= self.rate


def _head_projection(name, d_model, n_head, d_head, initializer, dtype):
  """Holds `{name}/kernel` [H, N, D] (no bias); `project_heads` applies it."""
  return keras.layers.EinsumDense("ibh,hnd->ibnd", output_shape=(None, n_head, d_head), bias_axes=None,
                                  kernel_initializer=initializer, name=name, dtype=dtype)


def _output_projection(d_model, initializer, dtype):
  """Holds `o/kernel` [H, N, D]; `project_out` applies it."""
  return keras.layers.EinsumDense("ibnd,hnd->ibh", output_shape=(None, d_model), bias_axes=None,
                                  kernel_initializer=initializer, name="o", dtype=dtype)


_LAYER_NORM_EPS = 1e-12


def _layer_norm(dtype):
  return keras.layers.LayerNormalization(epsilon=_LAYER_NORM_EPS, name="LayerNorm", dtype=dtype)


def _serialize_initializer(initializer):
  return keras.initializers.serialize(keras.initializers.get(initializer))


def _masked_softmax(score, mask):
  """Softmax over keys (axis 1) of score [I, J, B, N]; mask [I, J, B, 1 or N] (1 = blocked) or None."""
  if mask is not None:
    score = tf.where(tf.cast(mask, tf.bool), tf.cast(mask_value(score.dtype), score.dtype), score)
  return tf.nn.softmax(score, axis=1)


# ----------------------------------------------------------------------------------------------------------------
# The attention kernels. The layers' public calls take the original time-major tensors; inside, attention runs
# head-major: q/k/v are [N, B, L, D] and scores [N, B, I, J], keys last, so that every score einsum is a plain
# batched matmul, softmax and masks run over contiguous rows, and no score-sized tensor is ever transposed (only
# projection-sized ones). Every projection is ONE 2-D matmul (a broadcasting einsum's kernel gradient is a slow
# batched matmul plus a reduction). Masks and the segment matrix are turned into that layout once per forward
# (`attention_context`) and shared by all layers.


@tf.custom_gradient
def _layer_norm_rows(x, gamma, beta):
  """LayerNorm over the last axis in float32 with a hand-written gradient: x [K, H] -> [K, H] in x's dtype."""
  x32 = tf.cast(x, tf.float32)
  centered = x32 - tf.reduce_mean(x32, -1, keepdims=True)
  inv = tf.math.rsqrt(tf.reduce_mean(centered * centered, -1, keepdims=True) + _LAYER_NORM_EPS)
  x_hat = centered * inv

  def grad(upstream):
    upstream = tf.cast(upstream, tf.float32)
    scaled = upstream * gamma
    d_x = inv * (scaled - tf.reduce_mean(scaled, -1, keepdims=True)
                 - x_hat * tf.reduce_mean(scaled * x_hat, -1, keepdims=True))
    return tf.cast(d_x, x.dtype), tf.reduce_sum(upstream * x_hat, 0), tf.reduce_sum(upstream, 0)

  return tf.cast(x_hat * gamma + beta, x.dtype), grad


def layer_norm_rows(layer_norm, rows):
  """Applies a `LayerNormalization` layer's gamma/beta to rows float [K, H] (statistics in float32, as Keras).

  Same function as calling the layer, with fewer element-wise passes forward and backward.
  """
  return _layer_norm_rows(rows, tf.cast(layer_norm.gamma, tf.float32), tf.cast(layer_norm.beta, tf.float32))


def dense_rows(rows, kernel, bias, transpose_kernel=False):
  """A dense layer on rows: rows float [K, A] times kernel [A, F] (or [F, A] with transpose_kernel) + bias [F].

  In float32 the bias add is a `BiasAdd` that grappler fuses into the matmul. In bfloat16 it is written as a
  3-D add instead: oneDNN's fused MatMul+BiasAdd kernel does not use the CPU's bf16 matrix units (AMX) and ran
  ~3x slower than the plain matmul on this stack.
  """
  out = tf.matmul(rows, tf.cast(kernel, rows.dtype), transpose_b=transpose_kernel)
  bias = tf.cast(bias, rows.dtype)
  if rows.dtype == tf.float32:
    return tf.nn.bias_add(out, bias)
  width = tf.shape(out)[-1]
  return tf.reshape(tf.reshape(out, [-1, 1, width]) + bias, [-1, width])


def project_heads(x, kernels):
  """Head projections of x with one 2-D matmul.

  Args:
    x: float [L, B, H] (time-major; B may be 1 or 2 for the positional embedding).
    kernels: list of float [H, N, D], e.g. [k/kernel, v/kernel].

  Returns:
    list of float [N, B, L, D], one per kernel (head-major).
  """
  length, bsz = tf.shape(x)[0], tf.shape(x)[1]
  d_model, n_head, d_head = kernels[0].shape
  weight = tf.concat([tf.reshape(tf.cast(k, x.dtype), [d_model, n_head * d_head]) for k in kernels], 1)
  y = tf.matmul(tf.reshape(x, [-1, d_model]), weight)
  y = tf.reshape(y, [length, bsz, len(kernels), n_head, d_head])
  y = tf.transpose(y, [2, 3, 1, 0, 4])
  return tf.unstack(y, num=len(kernels))


def project_out(attn_vec, kernel):
  """The output projection: attn_vec float [N, B, L, D], kernel [H, N, D] -> float [L * B, H] (row l*B + b)."""
  d_model, n_head, d_head = kernel.shape
  x = tf.reshape(tf.transpose(attn_vec, [2, 1, 0, 3]), [-1, n_head * d_head])
  return tf.matmul(x, tf.reshape(tf.cast(kernel, x.dtype), [d_model, n_head * d_head]), transpose_b=True)


def rel_shift_keys_last(x, klen):
  """`rel_shift` for scores with keys last: x [..., I, R] -> [..., I, klen], entry (i, j) = x[..., i, j + I - i]."""
  # tf.slice, not x[...]: the gradient of a strided slice is a slow StridedSliceGrad, that of a slice a pad.
  shape = tf.shape(x)
  lead, qlen, rlen = shape[:-2], shape[-2], shape[-1]
  x = tf.reshape(x, tf.concat([lead, [rlen, qlen]], 0))
  zeros = tf.zeros_like(lead)
  x = tf.slice(x, tf.concat([zeros, [1, 0]], 0), tf.concat([lead, [rlen - 1, qlen]], 0))
  x = tf.reshape(x, tf.concat([lead, [qlen, rlen - 1]], 0))
  return tf.slice(x, tf.concat([zeros, [0, 0]], 0), tf.concat([lead, [qlen, klen]], 0))


def _rel_shift_rows(x, shift, klen):
  """`rel_shift` for rows at arbitrary query positions: x [N, B, P, R] -> [N, B, P, klen].

  out[n, b, p, j] = x[n, b, p, j + shift[b, p]] with shift = I - (the row's query position), the index `rel_shift`
  reads for that query. With uni attention (R = klen + 1) the index runs past R - 1 only where the causal mask
  blocks; it is clamped there. The gather runs over the last-but-one axis of a heads-last copy (one index per
  N values), and the gradient is the same kind of gather from the zero-padded upstream gradient (each kept entry
  has one source), not a scatter-add.
  """
  rlen = tf.shape(x)[-1]
  index = tf.minimum(tf.range(klen)[None, None, :] + shift[:, :, None], rlen - 1)  # [B, P, J]

  @tf.custom_gradient
  def shift_rows(x):
    out = tf.gather(tf.transpose(x, [1, 2, 3, 0]), index, batch_dims=2, axis=2)  # [B, P, J, N]

    def grad(upstream):
      # d x[.., r] = upstream[.., r - shift] for 0 <= r - shift < klen, else 0. Where the index was clamped the
      # keys are masked, so those upstream entries are 0.
      padded = tf.pad(tf.transpose(upstream, [1, 2, 3, 0]), [[0, 0], [0, 0], [rlen, rlen], [0, 0]])
      back = tf.range(rlen)[None, None, :] - shift[:, :, None] + rlen  # [B, P, R], in [0, klen + 2R)
      return tf.transpose(tf.gather(padded, back, batch_dims=2, axis=2), [3, 0, 1, 2])

    return tf.transpose(out, [3, 0, 1, 2]), grad

  return shift_rows(x)


class AttentionContext:
  """What every layer's attention needs besides its weights and inputs, in the head-major layout.

  Build it with `attention_context`, once per forward; all layers share it.

  Attributes:
    bias_h: float [1, B, I, J] or None. The content stream's additive mask: `mask_value` = query i may NOT attend
      key j, 0 = may attend. None: nothing masked.
    bias_g: float [1, B, P or I, J] or None, the same for the query stream (rows of the target positions when
      `target_pos` is set).
    seg_h: float [1, B, I, J] or None. 1 = query i and key j are in different segments, 0 = same segment.
      None: no segment term.
    seg_g: float [1, B, P or I, J] or None, the same for the query stream's rows.
    target_pos: int32 [B, P] or None. The position each prediction slot targets (its target_mapping row's
      argmax). None: the query stream has one row per position (no target_mapping).
    target_valid: float [B, P] or None. 1 = the slot has a target, 0 = a padding slot (all-zero row), whose
      attention output is 0 as in the original.
  """

  def __init__(self, bias_h=None, bias_g=None, seg_h=None, seg_g=None, target_pos=None, target_valid=None):
    self.bias_h = bias_h
    self.bias_g = bias_g
    self.seg_h = seg_h
    self.seg_g = seg_g
    self.target_pos = target_pos
    self.target_valid = target_valid


def attention_context(attn_mask_h=None, attn_mask_g=None, seg_mat=None, target_mapping=None, dtype=tf.float32):
  """Converts the original time-major masks to an `AttentionContext`.

  Args:
    attn_mask_h: float [I, J, B, 1] or None, the content stream's mask (`non_tgt_mask`). 1 = blocked.
    attn_mask_g: float [I, J, B, 1] or None, the query stream's mask (`attn_mask`). 1 = blocked.
    seg_mat: float [I, J, B, 2] or None, the one-hot segment matrix of `segment_matrix` (index 1 = different).
    target_mapping: float [P, I, B] or None. Each row p must be one-hot (slot p targets that position) or all zero
      (a padding slot), with distinct positions, as the data pipeline builds it: the query stream then attends
      from the P target positions only. (The original scatters the P query vectors to all I positions, attends
      from every position and gathers back; for such a mapping that gives the same numbers with I/P times the
      work. A soft or duplicated mapping would differ.)
    dtype: the compute dtype.
  """

  def bias(mask):
    if mask is None:
      return None
    mask = tf.transpose(tf.cast(mask[..., 0], dtype), [2, 0, 1])
    return (mask * tf.cast(mask_value(dtype), dtype))[None]

  bias_h, bias_g = bias(attn_mask_h), bias(attn_mask_g)
  seg_h = None if seg_mat is None else tf.transpose(tf.cast(seg_mat[..., 1], dtype), [2, 0, 1])[None]
  seg_g = seg_h
  target_pos = target_valid = None
  if target_mapping is not None:
    mapping = tf.transpose(tf.cast(target_mapping, tf.float32), [2, 0, 1])  # [B, P, I]
    target_pos = tf.argmax(mapping, axis=-1, output_type=tf.int32)
    target_valid = tf.cast(tf.reduce_sum(mapping, -1), dtype)
    gather_rows = lambda x: None if x is None else tf.gather(x[0], target_pos, batch_dims=1)[None]
    bias_g, seg_g = gather_rows(bias_g), gather_rows(seg_g)
  return AttentionContext(bias_h, bias_g, seg_h, seg_g, target_pos, target_valid)


def rel_attn_core(q_head, k_head_h, v_head_h, k_head_r, r_w_bias, r_r_bias, r_s_bias, seg_embed, bias, seg, scale,
                  attn_dropout, training, target_pos=None, qlen=None):
  """Scores (content + position + segment) -> masked softmax over keys -> attention vectors, head-major.

  score[n, b, i, j] = scale * ((q + r_w_bias).k_j + (q + r_r_bias).k_r[rel(i, j)] + (q + r_s_bias).seg_embed[s])
  + mask, with s = 1 if i and j are in different segments; the scale is folded into the (small) query terms.
  `attn_dropout` must be a `Dropout` of this module (it has `drop_unscaled`).

  Args:
    q_head: float [N, B, Q, D], queries (Q = I, or P with target_pos).
    k_head_h, v_head_h: float [N, B, J, D], keys and values of [mems; h].
    k_head_r: float [N, C, R, D], the projected positional embedding; C divides B and batch column b uses
      column b // (B / C) (C = B: one per column; C = 2 with bi_data: forward, backward; C = 1: shared).
    r_w_bias, r_r_bias, r_s_bias: float [N, D]; r_s_bias None when seg is None.
    seg_embed: float [2, N, D] or None.
    bias: float [1, B, Q, J] additive mask or None. seg: float [1, B, Q, J] (1 = different segment) or None.
    scale: python float, 1 / sqrt(D).
    attn_dropout: the dropout layer of the attention probabilities.
    target_pos: int32 [B, P] or None: the position of each query row (query stream with target_mapping).
    qlen: int scalar, the content stream's length I; needed with target_pos.

  Returns:
    float [N, B, Q, D].
  """
  n_head, d_head = q_head.shape[0], q_head.shape[-1]
  bsz, q_len, klen = tf.shape(q_head)[1], tf.shape(q_head)[2], tf.shape(k_head_h)[2]
  columns = tf.shape(k_head_r)[1]
  # All biased queries from one add: q_head is read once (see the module docstring on bit-exact training).
  biases = [r_w_bias, r_r_bias] + ([r_s_bias] if seg is not None else [])
  q_w, q_r, *q_s = tf.unstack((q_head[None] + tf.stack(biases)[:, :, None, None]) * scale, len(biases))
  ac = tf.matmul(q_w, k_head_h, transpose_b=True)
  q_r = tf.reshape(q_r, [n_head, columns, -1, d_head])
  bd = tf.reshape(tf.matmul(q_r, k_head_r, transpose_b=True), [n_head, bsz, q_len, -1])  # [N, B, Q, R]
  if target_pos is None:
    bd = rel_shift_keys_last(bd, klen)
  else:
    bd = _rel_shift_rows(bd, qlen - target_pos, klen)
  score = ac + bd
  if seg is not None:
    q_s = tf.reshape(q_s[0], [n_head, -1, d_head])
    ef = tf.matmul(q_s, tf.transpose(tf.cast(seg_embed, q_s.dtype), [1, 2, 0]))  # [N, B*Q, 2]
    ef = tf.reshape(ef, [n_head, bsz, q_len, 2])
    ef_same, ef_diff = tf.split(ef, 2, axis=-1)
    # ef_same + seg * (ef_diff - ef_same): ef_same is the same for every key of a query row, and softmax over the
    # keys ignores such a constant, so only the difference is added (one pass less over the scores).
    score += seg * (ef_diff - ef_same)
  if bias is not None:
    score += bias
  attn_prob, keep_scale = attn_dropout.drop_unscaled(tf.nn.softmax(score, axis=-1), training=training)
  attn_vec = tf.matmul(attn_prob, v_head_h)
  # The dropout's 1 / (1 - rate) is applied to the [.., Q, D] result rather than the [.., Q, J] probabilities.
  return attn_vec if keep_scale is None else attn_vec * tf.cast(keep_scale, attn_vec.dtype)


def split_streams(rows, h, g=None):
  """Rows [(I + P) * B, H] of `RelMultiheadAttn.attend_rows` (h's rows, then g's) -> (h-shaped, g-shaped or None)."""
  if g is None:
    return tf.reshape(rows, tf.shape(h)), None
  rows_h, rows_g = tf.split(rows, [tf.shape(h)[0] * tf.shape(h)[1], -1])
  return tf.reshape(rows_h, tf.shape(h)), tf.reshape(rows_g, tf.shape(g))


@keras.saving.register_keras_serializable(package=_PACKAGE)
class PositionwiseFFN(keras.layers.Layer):
  """Position-wise feed-forward network: LayerNorm(x + drop(layer_2(drop(act(layer_1(x)))))).

  Variables: `layer_1/{kernel,bias}` [H, F], [F]; `layer_2/{kernel,bias}` [F, H], [H]; `LayerNorm/{gamma,beta}`.
  """

  def __init__(self, d_model, d_inner, dropout=0.0, ff_activation="relu", kernel_initializer="glorot_uniform",
               **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.d_inner = d_inner
    self.dropout = dropout
    self.ff_activation = ff_activation
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.activation = get_activation(ff_activation)
    policy = self.dtype_policy
    self.layer_1 = keras.layers.Dense(d_inner, activation=self.activation,
                                      kernel_initializer=self.kernel_initializer, name="layer_1", dtype=policy)
    self.drop_1 = Dropout(dropout, name="drop_1", dtype=policy)
    self.layer_2 = keras.layers.Dense(d_model, kernel_initializer=self.kernel_initializer, name="layer_2",
                                      dtype=policy)
    self.drop_2 = Dropout(dropout, name="drop_2", dtype=policy)
    self.layer_norm = _layer_norm(policy)

  def build(self, input_shape):
    self.layer_1.build(input_shape)
    self.layer_2.build(tuple(input_shape[:-1]) + (self.d_inner,))
    self.layer_norm.build(input_shape)

  def call(self, inp, training=False):
    """inp: float [I, B, H] -> float [I, B, H]."""
    return tf.reshape(self.ffn_rows(tf.reshape(inp, [-1, self.d_model]), training), tf.shape(inp))

  def ffn_rows(self, rows, training=False):
    """The network on rows: float [K, H] -> float [K, H], with 2-D matmuls."""
    output = self.activation(dense_rows(rows, self.layer_1.kernel, self.layer_1.bias))
    output = self.drop_1(output, training=training)
    output = self.drop_2(dense_rows(output, self.layer_2.kernel, self.layer_2.bias), training=training)
    return layer_norm_rows(self.layer_norm, output + rows)

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, d_inner=self.d_inner, dropout=self.dropout,
                  ff_activation=self.ff_activation,
                  kernel_initializer=_serialize_initializer(self.kernel_initializer))
    return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class RelMultiheadAttn(keras.layers.Layer):
  """Multi-head attention with relative positional encoding and segment encoding (one stream).

  Variables (no biases): `q,k,v,r,o/kernel` [H, N, D]; `LayerNorm/{gamma,beta}` [H]. The relative biases and
  the segment embedding belong to `TransformerXL` and are passed in.
  """

  def __init__(self, d_model, n_head, d_head, dropout=0.0, dropatt=0.0, kernel_initializer="glorot_uniform",
               **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.n_head = n_head
    self.d_head = d_head
    self.dropout = dropout
    self.dropatt = dropatt
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.scale = 1.0 / (d_head ** 0.5)
    policy = self.dtype_policy
    self.q, self.k, self.v, self.r = (_head_projection(n, d_model, n_head, d_head, self.kernel_initializer, policy)
                                      for n in ("q", "k", "v", "r"))
    self.o = _output_projection(d_model, self.kernel_initializer, policy)
    self.attn_dropout = Dropout(dropatt, name="attn_drop", dtype=policy)
    self.out_dropout = Dropout(dropout, name="out_drop", dtype=policy)
    self.layer_norm = _layer_norm(policy)

  def build(self, input_shape=None):
    shape = (None, None, self.d_model)
    for proj in (self.q, self.k, self.v, self.r):
      proj.build(shape)
    self.o.build((None, None, self.n_head, self.d_head))
    self.layer_norm.build(shape)

  def attend_rows(self, h, r, context, r_w_bias, r_r_bias, r_s_bias=None, seg_embed=None, mems=None, g=None,
                  training=False):
    """Both streams (or the content stream alone) up to the post-attention LayerNorm, on rows.

    Args:
      h: float [I, B, H], the content stream.
      r: float [R, C, H], the relative positional embedding; C = B, 2 (bi_data, no dropout) or 1 (see
        `rel_attn_core`).
      context: `AttentionContext` (masks, segments, target positions).
      r_w_bias, r_r_bias, r_s_bias: float [N, D], this layer's biases (r_s_bias None without segments).
      seg_embed: float [2, N, D] or None, this layer's segment embedding.
      mems: float [M, B, H] or None, this layer's memory.
      g: float [P or I, B, H] or None, the query stream.

    Returns:
      float [(I + P) * B, H]: LayerNorm(h + o(attention)) rows of h (time-major, row i*B + b), then those of g.
    """
    dtype = h.dtype
    # h is read twice (projections, residual; see the module docstring on bit-exact training): without mems q, k
    # and v come from one matmul, with mems q comes from the h rows of [mems; h].
    if mems is None:
      q_head_h, k_head_h, v_head_h = project_heads(h, [self.q.kernel, self.k.kernel, self.v.kernel])
    else:
      mlen = tf.shape(mems)[0]
      cat = tf.concat([tf.cast(mems, dtype), h], 0)
      k_head_h, v_head_h = project_heads(cat, [self.k.kernel, self.v.kernel])
      (q_head_h,) = project_heads(tf.slice(cat, [mlen, 0, 0], [-1, -1, -1]), [self.q.kernel])
    (k_head_r,) = project_heads(tf.cast(r, dtype), [self.r.kernel])
    r_w_bias, r_r_bias = tf.cast(r_w_bias, dtype), tf.cast(r_r_bias, dtype)
    r_s_bias = None if r_s_bias is None else tf.cast(r_s_bias, dtype)

    def core(q_head, bias, seg, target_pos=None):
      return rel_attn_core(q_head, k_head_h, v_head_h, k_head_r, r_w_bias, r_r_bias, r_s_bias, seg_embed, bias, seg,
                           self.scale, self.attn_dropout, training, target_pos, tf.shape(h)[0])

    attn_vec = core(q_head_h, context.bias_h, context.seg_h)
    residual = h
    if g is not None:
      attn_vec_g = core(project_heads(g, [self.q.kernel])[0], context.bias_g, context.seg_g, context.target_pos)
      if context.target_valid is not None:
        attn_vec_g *= context.target_valid[None, :, :, None]
      attn_vec = tf.concat([attn_vec, attn_vec_g], 2)
      residual = tf.concat([h, g], 0)
    attn_out = self.out_dropout(project_out(attn_vec, self.o.kernel), training=training)
    return layer_norm_rows(self.layer_norm, attn_out + tf.reshape(residual, [-1, self.d_model]))

  def call(self, h, r, seg_mat=None, r_w_bias=None, r_r_bias=None, r_s_bias=None, seg_embed=None, attn_mask=None,
           mems=None, training=False):
    """One attention stream.

    Args:
      h: float [I, B, H], the content stream.
      r: float [R, B, H], the relative positional embedding (B may also be 1 = shared, or 2 = bi_data halves).
      seg_mat: float [I, J, B, 2] or None (no segment term); one-hot, index 1 = different segment.
      r_w_bias, r_r_bias, r_s_bias: float [N, D], the content, position and segment biases of this layer.
      seg_embed: float [2, N, D], this layer's segment embedding.
      attn_mask: float [I, J, B, 1] or None. 1 = query i may not attend key j.
      mems: float [M, B, H] or None, this layer's memory.

    Returns:
      float [I, B, H].
    """
    context = attention_context(attn_mask, None, seg_mat, None, h.dtype)
    return split_streams(self.attend_rows(h, r, context, r_w_bias, r_r_bias, r_s_bias, seg_embed, mems,
                                          training=training), h)[0]

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, n_head=self.n_head, d_head=self.d_head, dropout=self.dropout,
                  dropatt=self.dropatt, kernel_initializer=_serialize_initializer(self.kernel_initializer))
    return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TwoStreamRelAttention(RelMultiheadAttn):
  """Two-stream relative attention: the content stream h and the query stream g share every weight.

  `call(h, r, ...)` without `g` runs the content stream alone (fine-tuning), like `RelMultiheadAttn`.
  """

  def call(self, h, r, seg_mat=None, r_w_bias=None, r_r_bias=None, r_s_bias=None, seg_embed=None, attn_mask=None,
           mems=None, g=None, attn_mask_g=None, target_mapping=None, training=False):
    """Args as `RelMultiheadAttn.call` (`attn_mask` is the content stream's `non_tgt_mask`), plus:

      g: float [P or I, B, H] or None, the query stream (P rows with target_mapping, else I).
      attn_mask_g: float [I, J, B, 1] or None, the query stream's mask (targets do not see themselves).
      target_mapping: float [P, I, B] or None. 1 = prediction slot p targets position i; each row one-hot or all
        zero (padding slot), positions distinct (see `attention_context`).

    Returns:
      (output_h [I, B, H], output_g [P or I, B, H]), or output_h alone when g is None.
    """
    context = attention_context(attn_mask, attn_mask_g if g is not None else None, seg_mat,
                                target_mapping if g is not None else None, h.dtype)
    output_h, output_g = split_streams(
        self.attend_rows(h, r, context, r_w_bias, r_r_bias, r_s_bias, seg_embed, mems, g, training), h, g)
    return output_h if g is None else (output_h, output_g)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MultiheadAttn(keras.layers.Layer):
  """Standard multi-head attention (the original `multihead_attn`), used by the `attn` sequence summary.

  Variables: `q,k,v,o/kernel` [H, N, D]; `LayerNorm/{gamma,beta}`.
  """

  def __init__(self, d_model, n_head, d_head, dropout=0.0, dropatt=0.0, residual=True,
               kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.n_head = n_head
    self.d_head = d_head
    self.dropout = dropout
    self.dropatt = dropatt
    self.residual = residual
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.scale = 1.0 / (d_head ** 0.5)
    policy = self.dtype_policy
    self.q, self.k, self.v = (_head_projection(n, d_model, n_head, d_head, self.kernel_initializer, policy)
                              for n in ("q", "k", "v"))
    self.o = _output_projection(d_model, self.kernel_initializer, policy)
    self.attn_dropout = Dropout(dropatt, name="attn_drop", dtype=policy)
    self.out_dropout = Dropout(dropout, name="out_drop", dtype=policy)
    self.layer_norm = _layer_norm(policy)

  def build(self, input_shape=None):
    shape = (None, None, self.d_model)
    for proj in (self.q, self.k, self.v):
      proj.build(shape)
    self.o.build((None, None, self.n_head, self.d_head))
    self.layer_norm.build(shape)

  def call(self, q, k, v, attn_mask=None, training=False):
    """q: float [I, B, H]; k, v: float [J, B, H]; attn_mask: float [I or 1, J, B, 1] (1 = blocked) or None."""
    q_head, k_head, v_head = self.q(q), self.k(k), self.v(v)
    score = tf.einsum("ibnd,jbnd->ijbn", q_head, k_head) * self.scale
    attn_prob = self.attn_dropout(_masked_softmax(score, attn_mask), training=training)
    attn_vec = tf.einsum("ijbn,jbnd->ibnd", attn_prob, v_head)
    attn_out = self.out_dropout(self.o(attn_vec), training=training)
    # The original's residual is `v` (its `h` argument), not `q`.
    out = attn_out + v if self.residual else attn_out
    return tf.reshape(layer_norm_rows(self.layer_norm, tf.reshape(out, [-1, self.d_model])), tf.shape(out))

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, n_head=self.n_head, d_head=self.d_head, dropout=self.dropout,
                  dropatt=self.dropatt, residual=self.residual,
                  kernel_initializer=_serialize_initializer(self.kernel_initializer))
    return config

