"""XLNet's building blocks, ported from the original `modeling.py`: pure functions and Keras 3 layers.

All tensors are time-major, as in the original. Dimension key used in shapes and einsum strings:
  I qlen (queries), M mlen (memory), J klen = mlen + qlen (keys), R klen + qlen (relative positions),
  B bsz, N n_head, D d_head, H d_model, F d_inner, V n_token, P num_predict (m in einsum strings), S = 2 segments.

Mask polarity everywhere: 1 (or True) = may NOT attend, 0 = may attend. `input_mask` uses 1 = padding.
"""

import math

import keras
import tensorflow as tf

_PACKAGE = "xlnet_tf"


def gelu(x):
  """The original's tanh approximation of GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
  cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
  return x * cdf


def get_activation(ff_activation):
  if ff_activation == "relu":
    return tf.nn.relu
  if ff_activation == "gelu":
    return gelu
  raise ValueError(f"ff_activation must be 'relu' or 'gelu'. Received: {ff_activation!r}.")


def get_initializer(init="normal", init_range=0.1, init_std=0.02):
  """The original's `_get_initializer`: a plain (not truncated) normal, or a uniform in [-range, range]."""
  if init == "normal":
    return keras.initializers.RandomNormal(stddev=init_std)
  if init == "uniform":
    return keras.initializers.RandomUniform(minval=-init_range, maxval=init_range)
  raise ValueError(f"init must be 'normal' or 'uniform'. Received: {init!r}.")


def mask_value(dtype):
  """The large negative score of a blocked position; -1e30 as the original, but finite in float16."""
  return -6e4 if tf.as_dtype(dtype) == tf.float16 else -1e30


def rel_shift(x, klen):
  """The Transformer-XL relative shift.

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


def _head_projection(name, d_model, n_head, d_head, initializer, dtype):
  """`{name}/kernel` [H, N, D], no bias: h [I, B, H] -> [I, B, N, D]."""
  return keras.layers.EinsumDense("ibh,hnd->ibnd", output_shape=(None, n_head, d_head), bias_axes=None,
                                  kernel_initializer=initializer, name=name, dtype=dtype)


def _output_projection(d_model, initializer, dtype):
  """`o/kernel` [H, N, D]: attention vectors [I, B, N, D] -> [I, B, H]."""
  return keras.layers.EinsumDense("ibnd,hnd->ibh", output_shape=(None, d_model), bias_axes=None,
                                  kernel_initializer=initializer, name="o", dtype=dtype)


def _layer_norm(dtype):
  return keras.layers.LayerNormalization(epsilon=1e-12, name="LayerNorm", dtype=dtype)


def _serialize_initializer(initializer):
  return keras.initializers.serialize(keras.initializers.get(initializer))


def _masked_softmax(score, mask):
  """Softmax over keys (axis 1) of score [I, J, B, N]; mask [I, J, B, 1 or N] (1 = blocked) or None."""
  if mask is not None:
    score = tf.where(tf.cast(mask, tf.bool), tf.cast(mask_value(score.dtype), score.dtype), score)
  return tf.nn.softmax(score, axis=1)


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
    policy = self.dtype_policy
    self.layer_1 = keras.layers.Dense(d_inner, activation=get_activation(ff_activation),
                                      kernel_initializer=self.kernel_initializer, name="layer_1", dtype=policy)
    self.drop_1 = keras.layers.Dropout(dropout, name="drop_1", dtype=policy)
    self.layer_2 = keras.layers.Dense(d_model, kernel_initializer=self.kernel_initializer, name="layer_2",
                                      dtype=policy)
    self.drop_2 = keras.layers.Dropout(dropout, name="drop_2", dtype=policy)
    self.layer_norm = _layer_norm(policy)

  def build(self, input_shape):
    self.layer_1.build(input_shape)
    self.layer_2.build(tuple(input_shape[:-1]) + (self.d_inner,))
    self.layer_norm.build(input_shape)

  def call(self, inp, training=False):
    """inp: float [I, B, H] -> float [I, B, H]."""
    output = self.drop_1(self.layer_1(inp), training=training)
    output = self.drop_2(self.layer_2(output), training=training)
    return self.layer_norm(output + inp)

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
    self.attn_dropout = keras.layers.Dropout(dropatt, name="attn_drop", dtype=policy)
    self.out_dropout = keras.layers.Dropout(dropout, name="out_drop", dtype=policy)
    self.layer_norm = _layer_norm(policy)

  def build(self, input_shape=None):
    shape = (None, None, self.d_model)
    for proj in (self.q, self.k, self.v, self.r):
      proj.build(shape)
    self.o.build((None, None, self.n_head, self.d_head))
    self.layer_norm.build(shape)

  def rel_attn_core(self, q_head, k_head_h, v_head_h, k_head_r, seg_mat, r_w_bias, r_r_bias, r_s_bias, seg_embed,
                    attn_mask, training):
    """Scores (content + position + segment) -> masked softmax over keys -> attention vectors [I, B, N, D]."""
    ac = tf.einsum("ibnd,jbnd->ijbn", q_head + r_w_bias, k_head_h)
    bd = tf.einsum("ibnd,jbnd->ijbn", q_head + r_r_bias, k_head_r)
    bd = rel_shift(bd, klen=tf.shape(ac)[1])
    score = ac + bd
    if seg_mat is not None:
      ef = tf.einsum("ibnd,snd->ibns", q_head + r_s_bias, seg_embed)
      score += tf.einsum("ijbs,ibns->ijbn", seg_mat, ef)
    attn_prob = _masked_softmax(score * self.scale, attn_mask)
    attn_prob = self.attn_dropout(attn_prob, training=training)
    return tf.einsum("ijbn,jbnd->ibnd", attn_prob, v_head_h)

  def post_attention(self, h, attn_vec, training):
    attn_out = self.out_dropout(self.o(attn_vec), training=training)
    return self.layer_norm(attn_out + h)

  def _content_heads(self, h, r, mems):
    cat = h if mems is None else tf.concat([tf.cast(mems, h.dtype), h], 0)
    return self.k(cat), self.v(cat), self.r(r)

  def call(self, h, r, seg_mat=None, r_w_bias=None, r_r_bias=None, r_s_bias=None, seg_embed=None, attn_mask=None,
           mems=None, training=False):
    """One attention stream.

    Args:
      h: float [I, B, H], the content stream.
      r: float [R, B, H], the relative positional embedding.
      seg_mat: float [I, J, B, 2] or None (no segment term).
      r_w_bias, r_r_bias, r_s_bias: float [N, D], the content, position and segment biases of this layer.
      seg_embed: float [2, N, D], this layer's segment embedding.
      attn_mask: float [I, J, B, 1] or None. 1 = query i may not attend key j.
      mems: float [M, B, H] or None, this layer's memory.

    Returns:
      float [I, B, H].
    """
    k_head_h, v_head_h, k_head_r = self._content_heads(h, r, mems)
    attn_vec = self.rel_attn_core(self.q(h), k_head_h, v_head_h, k_head_r, seg_mat, r_w_bias, r_r_bias, r_s_bias,
                                  seg_embed, attn_mask, training)
    return self.post_attention(h, attn_vec, training)

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
      target_mapping: float [P, I, B] or None. 1 = prediction slot p targets position i.

    Returns:
      (output_h [I, B, H], output_g [P or I, B, H]), or output_h alone when g is None.
    """
    k_head_h, v_head_h, k_head_r = self._content_heads(h, r, mems)
    attn_vec_h = self.rel_attn_core(self.q(h), k_head_h, v_head_h, k_head_r, seg_mat, r_w_bias, r_r_bias,
                                    r_s_bias, seg_embed, attn_mask, training)
    output_h = self.post_attention(h, attn_vec_h, training)
    if g is None:
      return output_h

    q_head_g = self.q(g)
    if target_mapping is not None:
      q_head_g = tf.einsum("mbnd,mlb->lbnd", q_head_g, target_mapping)
    attn_vec_g = self.rel_attn_core(q_head_g, k_head_h, v_head_h, k_head_r, seg_mat, r_w_bias, r_r_bias, r_s_bias,
                                    seg_embed, attn_mask_g, training)
    if target_mapping is not None:
      attn_vec_g = tf.einsum("lbnd,mlb->mbnd", attn_vec_g, target_mapping)
    output_g = self.post_attention(g, attn_vec_g, training)
    return output_h, output_g


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
    self.attn_dropout = keras.layers.Dropout(dropatt, name="attn_drop", dtype=policy)
    self.out_dropout = keras.layers.Dropout(dropout, name="out_drop", dtype=policy)
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
    return self.layer_norm(attn_out + v if self.residual else attn_out)

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, n_head=self.n_head, d_head=self.d_head, dropout=self.dropout,
                  dropatt=self.dropatt, residual=self.residual,
                  kernel_initializer=_serialize_initializer(self.kernel_initializer))
    return config

