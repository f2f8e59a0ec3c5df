"""XLNet's Keras 3 layers, as the original `modeling.py` scopes: `PositionwiseFFN` (`ff`), `RelMultiheadAttn`
and `TwoStreamRelAttention` (`rel_attn`), `MultiheadAttn` (`abs_attn`, for the `attn` summary), and a faster
`Dropout`.

Variable paths end like the original checkpoint names (`layer_0/rel_attn/q/kernel`, `layer_0/ff/layer_1/kernel`,
`LayerNorm/gamma`). Time-major tensors at every call; the attention itself runs on the head-major kernels of
`xlnet_tf.modeling.projections` and `xlnet_tf.modeling.attention`, their LayerNorm and dense tails on the row kernels
of `xlnet_tf.modeling.rows`.
"""

import contextlib
import threading

import keras
import tensorflow as tf

from xlnet_tf.modeling.attention import StreamRows, masked_softmax, query_biases, rel_attn_core
from xlnet_tf.modeling import ops
from xlnet_tf.modeling.projections import project_heads, project_heads_with_mems, project_out, project_positions
from xlnet_tf.modeling.rows import LAYER_NORM_EPS, dense_rows, layer_norm_rows, split_streams


_PACKAGE = "xlnet_tf"

_SEEDS = threading.local()  # per thread: a MirroredStrategy traces each replica's step in a thread of its own


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Dropout(keras.layers.Dropout):
  """`keras.layers.Dropout` (same seed generator and config) with a cheaper, XLA-friendly mask.

  The keep mask is drawn with an explicit Philox generator: the default "auto_select" algorithm of TF's stateless
  random ops compiles under XLA on CPU to a generator far slower than the graph kernel. The words come from
  `ops.philox_words`, an XLA function with the same numbers as TF's kernel, faster. When the last dimension
  is even, each 32-bit random word gives two 16-bit uniforms (half the generator work), so the drop probability
  is round(rate * 65536) / 65536 (0.100006 for 0.1); otherwise 32-bit uniforms are used (TF's kernel: XLA's
  conversion to float differs).
  """

  def call(self, inputs, training=False):
    keep = self.maybe_keep(inputs, training) if self.noise_shape is None else None
    if keep is None:
      return super().call(inputs, training=training)
    return ops.apply_keep(inputs, keep)

  def unscaled_keep(self, inputs, training=False):
    """The next mask for inputs without the 1 / (1 - rate) rescaling, for a caller that rescales a smaller tensor
    downstream.

    Returns:
      (keep: (uniforms, threshold, None) for `ops.apply_keep`, or None when nothing is dropped (not training, or
      rate 0); scale: the python float 1 / (1 - rate), or None when nothing is dropped).
    """
    keep = self.maybe_keep(inputs, training)
    if keep is None:
      return None, None
    uniforms, threshold, scale = keep
    return (uniforms, threshold, None), scale

  def maybe_keep(self, inputs, training=False):
    """`keep(inputs)`, or None when nothing is dropped (not training, or rate 0)."""
    return self.keep(inputs) if training and self.rate > 0 else None

  def keep(self, inputs):
    """The next mask for inputs as (uniforms shaped like inputs, threshold, scale) for `ops.apply_keep`: keep
    where uniforms >= threshold, scale = 1 / (1 - rate)."""
    scale = 1.0 / (1.0 - self.rate)
    seed = tf.cast(tf.math.floormod(self.next_seed(), 2 ** 31 - 1), tf.int32)
    shape = tf.shape(inputs)
    last = inputs.shape[-1]
    if last is not None and last % 2 == 0:
      bits = ops.philox_words(tf.concat([shape[:-1], [last // 2]], 0), seed)
      return (tf.reshape(tf.bitcast(bits, tf.uint16), shape),
              tf.constant(min(round(self.rate * 65536), 65535), tf.uint16), scale)
    return tf.random.stateless_uniform(shape, seed, alg="philox"), tf.constant(self.rate, tf.float32), scale

  def next_seed(self):
    """The seed [2] of this layer's next mask: its generator's `next()`, or inside `fixed_seeds` (which holds
    this layer) the one that call would give, from the state `fixed_seeds` was given, leaving the generator alone."""
    plans = getattr(_SEEDS, "plans", None)
    plan = plans[-1].get(id(self)) if plans else None
    if plan is None:
      return self.seed_generator.next()
    state, drawn = plan
    plan[1] += 1
    return state + tf.constant([0, drawn], state.dtype)  # as `next()`: the state, then + [0, 1] per draw

  def advance_seed(self, draws):
    """Advances the seed generator as `draws` calls of its `next()` would (after `fixed_seeds`)."""
    state = self.seed_generator.state
    state.assign(state.value + tf.constant([0, draws], state.dtype))


@contextlib.contextmanager
def fixed_seeds(states):
  """Within: each `Dropout` d of `states` ({d: a [2] tensor, its generator's state}) draws its k-th mask (k = 0, 1,
  ...) with the seed states[d] + [0, k], the seed the (k+1)-th call of its generator's `next()` would give from
  that state, and leaves its generator alone. So a function run twice inside it (a recomputed forward) draws the
  same masks both times.

  Yields:
    {d: the number of masks d drew}, complete on exit (what to advance each generator by: `Dropout.advance_seed`).
  """
  plan = {id(d): [state, 0] for d, state in states.items()}
  plans = _SEEDS.__dict__.setdefault("plans", [])
  plans.append(plan)
  drawn = {}
  try:
    yield drawn
  finally:
    plans.pop()
    drawn.update({d: plan[id(d)][1] for d in states})


def _head_projection(name, d_model, n_head, d_head, initializer, dtype):
  """Holds `{name}/kernel` [H, N, D] (no bias); `project_heads` applies it."""
  return keras.layers.EinsumDense("ibh,hnd->ibnd", output_shape=(None, n_head, d_head), bias_axes=None,
                                  kernel_initializer=initializer, name=name, dtype=dtype)


def _output_projection(d_model, initializer, dtype):
  """Holds `o/kernel` [H, N, D]; `project_out` applies it."""
  return keras.layers.EinsumDense("ibnd,hnd->ibh", output_shape=(None, d_model), bias_axes=None,
                                  kernel_initializer=initializer, name="o", dtype=dtype)


def _layer_norm(dtype):
  return keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPS, name="LayerNorm", dtype=dtype)


def _serialize_initializer(initializer):
  return keras.initializers.serialize(keras.initializers.get(initializer))


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
    self.activation = ops.get_activation(ff_activation)
    self.inference_activation = ops.get_activation(ff_activation, training=False, dtype=self.compute_dtype)
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
    output = dense_rows(rows, self.layer_1.kernel, self.layer_1.bias)
    keep = self.drop_1.maybe_keep(output, training) if self.activation is ops.gelu else None
    if keep is not None:
      output = ops.gelu_dropout(output, keep)
    else:
      activation = self.activation if training else self.inference_activation
      output = self.drop_1(activation(output), training=training)
    output = dense_rows(output, self.layer_2.kernel, self.layer_2.bias)
    return layer_norm_rows(self.layer_norm, output, rows, self.drop_2.maybe_keep(output, training))

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, d_inner=self.d_inner, dropout=self.dropout,
                  ff_activation=self.ff_activation,
                  kernel_initializer=_serialize_initializer(self.kernel_initializer))
    return config


class _Attention(keras.layers.Layer):
  """What every attention layer holds: the head projections `PROJECTIONS` and the output projection `o` (kernels
  [H, N, D], no biases), attention and output dropout, and the post-attention `LayerNorm`."""

  PROJECTIONS = ()

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
    for name in self.PROJECTIONS:
      setattr(self, name, _head_projection(name, d_model, n_head, d_head, self.kernel_initializer, policy))
    self.o = _output_projection(d_model, self.kernel_initializer, policy)
    self.attn_dropout = Dropout(dropatt, name="attn_drop", dtype=policy)
    self.out_dropout = Dropout(dropout, name="out_drop", dtype=policy)
    self.layer_norm = _layer_norm(policy)

  def build(self, input_shape=None):
    shape = (None, None, self.d_model)
    for name in self.PROJECTIONS:
      getattr(self, name).build(shape)
    self.o.build((None, None, self.n_head, self.d_head))
    self.layer_norm.build(shape)

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, n_head=self.n_head, d_head=self.d_head, dropout=self.dropout,
                  dropatt=self.dropatt, kernel_initializer=_serialize_initializer(self.kernel_initializer))
    return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class RelMultiheadAttn(_Attention):
  """Multi-head attention with relative positional encoding and segment encoding (one stream).

  Variables (no biases): `q,k,v,r,o/kernel` [H, N, D]; `LayerNorm/{gamma,beta}` [H]. The relative biases and
  the segment embedding belong to `TransformerXL` and are passed in (`attention.AttentionBiases`).
  """

  PROJECTIONS = ("q", "k", "v", "r")

  def project_positions(self, r, dtype):
    """This layer's projection of the relative positional embedding: r float [R, C, H] -> float [N, C, D, R].

    `TransformerXL` projects for all its layers with one matmul instead (`project_positions` with every layer's
    kernel).
    """
    return project_positions(tf.cast(r, dtype), [self.r.kernel])[0]

  def attend_rows(self, h, k_head_r, context, biases, mems=None, g=None, training=False, h_out=True):
    """Both streams (or the content stream alone) up to the post-attention LayerNorm, on rows.

    Args:
      h: float [I, B, H], the content stream.
      k_head_r: float [N, C, D, R], the projected relative positional embedding (`project_positions`); C = B, 2
        (bi_data, no dropout) or 1 (see `rel_attn_core`).
      context: `attention.AttentionContext` (masks, segments, target positions) in h's dtype; its query-stream
        fields are read only with g.
      biases: `attention.AttentionBiases`, this layer's r_w_bias, r_r_bias, r_s_bias and seg_embed.
      mems: float [M, B, H] or None, this layer's memory.
      g: float [P or I, B, H] or None, the query stream.
      training: bool, dropout on.
      h_out: False = only g's rows are wanted (needs g): h still gives the keys and values, but its own queries,
        attention and rows are not computed. The last layer of two-stream pretraining, whose content output
        nothing reads (the original's graph never runs it either).

    Returns:
      float [(I + P) * B, H]: LayerNorm(h + o(attention)) rows of h (time-major, row i*B + b), then those of g;
      g's rows alone when h_out is False.
    """
    dtype = h.dtype
    # h is read twice (projections, residual; see the module docstring on bit-exact training): without mems q, k
    # and v come from one matmul, with mems from one custom-gradient projection of [mems; h] and h.
    if mems is None and not h_out:
      k_head_h, v_head_h = project_heads(h, [self.k.kernel, self.v.kernel])
    elif mems is None:
      q_head_h, k_head_h, v_head_h = project_heads(h, [self.q.kernel, self.k.kernel, self.v.kernel])
    else:
      k_head_h, v_head_h, *q_head_h = project_heads_with_mems(mems, h, [self.k.kernel, self.v.kernel],
                                                              self.q.kernel if h_out else None)
      q_head_h = q_head_h[0] if q_head_h else None
    q_biases = query_biases(biases, dtype, self.scale, context.seg_h is not None or context.seg_g is not None)

    def core(q_head, bias, seg, target_pos=None):
      rows = StreamRows(bias, seg, target_pos, tf.shape(h)[0])
      return rel_attn_core(q_head, k_head_h, v_head_h, k_head_r, q_biases, rows, self.attn_dropout, training)

    attn_vec, residual = (core(q_head_h, context.bias_h, context.seg_h), h) if h_out else (None, None)
    if g is not None:
      attn_vec_g = core(project_heads(g, [self.q.kernel])[0], context.bias_g, context.seg_g, context.target_pos)
      if context.target_valid is not None:
        attn_vec_g *= context.target_valid[None, :, :, None]
      attn_vec = attn_vec_g if attn_vec is None else tf.concat([attn_vec, attn_vec_g], 2)
      residual = g if residual is None else tf.concat([h, g], 0)
    attn_out = project_out(attn_vec, self.o.kernel)
    return layer_norm_rows(self.layer_norm, attn_out, tf.reshape(residual, [-1, self.d_model]),
                           self.out_dropout.maybe_keep(attn_out, training))

  def call(self, h, r, context, biases, mems=None, training=False):
    """One attention stream. Keras takes only tensors positionally: pass context and biases by keyword.

    Args:
      h: float [I, B, H], the content stream.
      r: float [R, B, H], the relative positional embedding (B may also be 1 = shared, or 2 = bi_data halves).
      context: `attention.AttentionContext` in h's dtype, from the original time-major masks by
        `attention.attention_context(attn_mask, None, seg_mat)`: attn_mask float [I, J, B, 1] or None (1 = query i
        may not attend key j), seg_mat float [I, J, B, 2] or None (no segment term; one-hot, index 1 = different
        segment).
      biases: `attention.AttentionBiases`, this layer's r_w_bias, r_r_bias, r_s_bias and seg_embed.
      mems: float [M, B, H] or None, this layer's memory.
      training: bool, dropout on.

    Returns:
      float [I, B, H].
    """
    return split_streams(self.attend_rows(h, self.project_positions(r, h.dtype), context, biases, mems,
                                          training=training), h)[0]

@keras.saving.register_keras_serializable(package=_PACKAGE)
class TwoStreamRelAttention(RelMultiheadAttn):
  """Two-stream relative attention: the content stream h and the query stream g share every weight.

  `call(h, r, context=..., biases=...)` without `g` runs the content stream alone (fine-tuning), like
  `RelMultiheadAttn`.
  """

  def call(self, h, r, context, biases, mems=None, g=None, training=False):
    """Args as `RelMultiheadAttn.call`, plus g; the context is `attention.attention_context(attn_mask,
    attn_mask_g, seg_mat, target_mapping)`, where attn_mask is the content stream's `non_tgt_mask` and:

      attn_mask_g: float [I, J, B, 1] or None, the query stream's mask (targets do not see themselves).
      target_mapping: float [P, I, B] or None. 1 = prediction slot p targets position i; each row one-hot or all
        zero (padding slot), positions distinct (see `attention.batch_major_context`).
      g: float [P or I, B, H] or None, the query stream (P rows with target_mapping, else I).

    Returns:
      (output_h [I, B, H], output_g [P or I, B, H]), or output_h alone when g is None.
    """
    output_h, output_g = split_streams(
        self.attend_rows(h, self.project_positions(r, h.dtype), context, biases, mems, g, training), h, g)
    return output_h if g is None else (output_h, output_g)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MultiheadAttn(_Attention):
  """Standard multi-head attention (the original `multihead_attn`), used by the `attn` sequence summary.

  Variables: `q,k,v,o/kernel` [H, N, D]; `LayerNorm/{gamma,beta}`.
  """

  PROJECTIONS = ("q", "k", "v")

  def __init__(self, d_model, n_head, d_head, dropout=0.0, dropatt=0.0, residual=True,
               kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(d_model, n_head, d_head, dropout, dropatt, kernel_initializer, **kwargs)
    self.residual = residual

  def call(self, q, k, v, attn_mask=None, training=False):
    """q: float [I, B, H]; k, v: float [J, B, H]; attn_mask: float [I or 1, J, B, 1] (1 = blocked) or None."""
    q_head, k_head, v_head = self.q(q), self.k(k), self.v(v)
    score = tf.einsum("ibnd,jbnd->ijbn", q_head, k_head) * self.scale
    attn_prob = self.attn_dropout(masked_softmax(score, attn_mask), training=training)
    attn_vec = tf.einsum("ijbn,jbnd->ibnd", attn_prob, v_head)
    attn_out = self.out_dropout(self.o(attn_vec), training=training)
    # The original's residual is `v` (its `h` argument), not `q`.
    out = attn_out + v if self.residual else attn_out
    return tf.reshape(layer_norm_rows(self.layer_norm, tf.reshape(out, [-1, self.d_model])), tf.shape(out))

  def get_config(self):
    config = super().get_config()
    config.update(residual=self.residual)
    return config
