"""The XLNet network (the original `modeling.transformer_xl`): embeddings, the stack of `XLNetLayer`s, the masks
and relative positions they share, and inference on a CPU as independent chains. `XLNetModel` (the original
`xlnet.XLNetModel`, in `xlnet_tf.modeling.xlnet`) wraps it.

Variable paths end like the original checkpoint names: the network (scope `transformer`, below `model/` in an
`XLNetModel`) holds `transformer/{r_w_bias, r_r_bias, word_embedding/lookup_table, mask_emb/mask_emb, r_s_bias,
seg_embed, layer_{i}/rel_attn/..., layer_{i}/ff/...}`.
"""

import os
from typing import NamedTuple

import keras
import tensorflow as tf

from xlnet_tf.config import as_configs
from xlnet_tf.modeling import attention
from xlnet_tf.modeling import layers
from xlnet_tf.modeling import ops
from xlnet_tf.modeling import projections
from xlnet_tf.modeling import recompute
from xlnet_tf.modeling.rows import split_streams


_PACKAGE = "xlnet_tf"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class WordEmbedding(keras.layers.Layer):
  """`word_embedding/lookup_table` [V, H]; int ids [I, B] -> float [I, B, H].

  `last_lookup` holds (ids, gathered rows) of the latest call, so that a training step can take the gradient of
  each gathered row (the original GPU path's IndexedSlices rows, see `optimization.apply_gradients`).
  """

  def __init__(self, n_token, d_model, embeddings_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.n_token = n_token
    self.d_model = d_model
    self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

  def build(self, input_shape=None):
    self.lookup_table = self.add_weight(name="lookup_table", shape=(self.n_token, self.d_model),
                                        initializer=self.embeddings_initializer)

  def call(self, ids):
    if tf.executing_eagerly() and tf.size(ids) > 0:  # a call from Python: one line (the data pipelines check their
      # ids as they read them; traced, XLA clamps an id past the table, and the cast wrapped int64 ids: sweep 35)
      low, high = int(tf.reduce_min(ids)), int(tf.reduce_max(ids))
      if low < 0 or high >= self.n_token:
        raise ValueError(f"input_ids holds the id {low if low < 0 else high}, outside this model's vocabulary [0, "
                         f"{self.n_token}) (n_token): ids from another SentencePiece model?")
    ids = tf.cast(ids, tf.int32)
    rows = tf.gather(self.lookup_table, ids)
    self.last_lookup = (ids, rows)
    return tf.cast(rows, self.compute_dtype)

  def get_config(self):
    config = super().get_config()
    config.update(n_token=self.n_token, d_model=self.d_model,
                  embeddings_initializer=keras.initializers.serialize(self.embeddings_initializer))
    return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class XLNetLayer(keras.layers.Layer):
  """One layer `layer_{i}`: `rel_attn` (two-stream relative attention) then `ff`, shared by both streams."""

  def __init__(self, d_model, n_head, d_head, d_inner, ff_activation="relu", dropout=0.0, dropatt=0.0,
               kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.n_head = n_head
    self.d_head = d_head
    self.d_inner = d_inner
    self.ff_activation = ff_activation
    self.dropout = dropout
    self.dropatt = dropatt
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    policy = self.dtype_policy
    self.rel_attn = layers.TwoStreamRelAttention(d_model, n_head, d_head, dropout, dropatt, self.kernel_initializer,
                                                 name="rel_attn", dtype=policy)
    self.ff = layers.PositionwiseFFN(d_model, d_inner, dropout, ff_activation, self.kernel_initializer, name="ff",
                                     dtype=policy)

  def build(self, input_shape=None):
    self.rel_attn.build()
    self.ff.build((None, None, self.d_model))

  def call(self, h, r, context, biases, mems=None, g=None, training=False):
    """Returns (h [I, B, H], g [P or I, B, H] or None); the args as `TwoStreamRelAttention.call` (context and
    biases by keyword)."""
    return self.forward(h, self.rel_attn.project_positions(r, h.dtype), context, biases, mems, g, training)

  def forward(self, h, k_head_r, context, biases, mems=None, g=None, training=False, h_out=True):
    """The layer on a prebuilt `attention.AttentionContext` and projected positional embedding (see
    `TwoStreamRelAttention.attend_rows` for the args).

    Both streams go through the output projection and the feed-forward network as one matrix of rows.

    Returns:
      (h [I, B, H], g [P or I, B, H] or None); h is None when h_out is False.
    """
    rows = self.ff.ffn_rows(self.rel_attn.attend_rows(h, k_head_r, context, biases, mems, g, training, h_out),
                            training)
    return split_streams(rows, h, g) if h_out else (None, tf.reshape(rows, tf.shape(g)))

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, n_head=self.n_head, d_head=self.d_head, d_inner=self.d_inner,
                  ff_activation=self.ff_activation, dropout=self.dropout, dropatt=self.dropatt,
                  kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerXL(keras.layers.Layer):
  """The XLNet Transformer-XL with two-stream attention (the original `transformer_xl`), scope `transformer`.

  Args:
    xlnet_config: XLNetConfig (or its dict), the architecture.
    run_config: RunConfig (or its dict): dropout (dropped unless `is_training`), initializer, memory, `bi_data`,
      `clamp_len`, `same_length`, `recompute_grad` (training recomputes each layer's activations in the backward
      pass, `recompute.recompute_grad`) and the dtype policy.
    attn_type: "bi" (the original XLNetModel's) or "uni".
  """

  def __init__(self, xlnet_config, run_config, attn_type="bi", **kwargs):
    kwargs.setdefault("name", "transformer")
    xlnet_config, run_config = as_configs(xlnet_config, run_config)
    if run_config.dtype_policy:
      kwargs.setdefault("dtype", run_config.dtype_policy)
    super().__init__(**kwargs)
    if attn_type not in ("bi", "uni"):
      raise ValueError(f"attn_type must be 'bi' or 'uni'. Received: {attn_type!r}.")
    self.xlnet_config = xlnet_config
    self.run_config = run_config
    self.attn_type = attn_type
    c, rc = xlnet_config, run_config
    # The rates in effect: the original's RunConfig drops nothing unless is_training.
    self.dropout = rc.dropout if rc.is_training else 0.0
    self.dropatt = rc.dropatt if rc.is_training else 0.0
    self.initializer = ops.get_initializer(rc.init, rc.init_range, rc.init_std)
    policy = self.dtype_policy
    self.word_embedding = WordEmbedding(c.n_token, c.d_model, self.initializer, name="word_embedding", dtype=policy)
    self.mask_emb = _MaskEmbedding(c.d_model, name="mask_emb", dtype=policy)
    self.layer_stack = [XLNetLayer(c.d_model, c.n_head, c.d_head, c.d_inner, c.ff_activation, self.dropout,
                                   self.dropatt, self.initializer, name=f"layer_{i}", dtype=policy)
                        for i in range(c.n_layer)]
    self.drop = layers.Dropout(self.dropout, name="dropout", dtype=policy)
    self.inference_chains = 2  # see `_chains`; 1 runs inference as one chain

  def build(self, input_shape=None):
    # Creation order follows the original: r_w_bias, r_r_bias, word_embedding, mask_emb, r_s_bias, seg_embed.
    c = self.xlnet_config
    bias_shape = (c.n_layer, c.n_head, c.d_head) if c.untie_r else (c.n_head, c.d_head)
    self.r_w_bias = self.add_weight(name="r_w_bias", shape=bias_shape, initializer=self.initializer)
    self.r_r_bias = self.add_weight(name="r_r_bias", shape=bias_shape, initializer=self.initializer)
    self.word_embedding.build()
    self.mask_emb.build()
    self.r_s_bias = self.add_weight(name="r_s_bias", shape=bias_shape, initializer=self.initializer)
    self.seg_embed = self.add_weight(name="seg_embed", shape=(c.n_layer, 2, c.n_head, c.d_head),
                                     initializer=self.initializer)
    for layer in self.layer_stack:
      layer.build()

  def call(self, inp_k, seg_id=None, input_mask=None, mems=None, perm_mask=None, target_mapping=None, inp_q=None,
           training=False):
    """Runs the network; see `XLNetModel.call` for the arguments.

    Inference on a CPU runs the batch as `inference_chains` independent chains of layers (see `_chains`).

    Returns:
      (output, new_mems): output float [P or I, B, H] (query stream when inp_q is given, else content stream);
      new_mems a list of n_layer float [min(mem_len, M + reuse_len or I), B, H], or None without mem_len.
    """
    inputs = _Inputs(inp_k, seg_id, input_mask, mems, perm_mask, target_mapping, inp_q)
    self._check_inputs(inputs)
    if self.run_config.bi_data and inp_k.shape[1] is not None and inp_k.shape[1] % 2:
      raise ValueError(f"bi_data needs an even batch size (first half forward, second half backward). "
                       f"Received: bsz={inp_k.shape[1]}.")
    chains = self._chains(inp_k, training)
    if chains == 1:
      return self._network(inputs, training)
    qlen = tf.shape(inp_k)[0]
    klen = qlen + (tf.shape(mems[0])[0] if mems is not None else 0)
    k_heads_r = self._projected_positions(qlen, klen, None, training=False)  # one column: shared by every chain
    bsz = inp_k.shape[1]
    sizes = [bsz // chains + int(i < bsz % chains) for i in range(chains)]  # the first ones longer by one if need be
    parts = [_split_batch(x, sizes) for x in inputs]
    results = [self._network(_Inputs(*part), training, k_heads_r) for part in zip(*parts)]
    output = tf.concat([out for out, _ in results], 1)
    new_mems = None if not self.run_config.mem_len else [tf.concat(m, 1) for m in zip(*(m for _, m in results))]
    return output, new_mems

  def _check_inputs(self, inputs):
    """A ValueError (TypeError for float ids) naming the argument whose static shape does not fit the others (what
    is known while tracing; nothing is computed): such inputs failed deep inside the network, naming an op, or were
    read otherwise (float ids truncated, a target_mapping without inp_q ignored, mems of more layers dropped)."""
    def shape(name, x, rank):
      got = tf.TensorShape(getattr(x, "shape", None))
      if got.rank is not None and got.rank != rank:
        raise ValueError(f"{name} must have rank {rank} (time-major: see XLNetModel.call). Received shape "
                         f"{got.as_list()}.")
      return got if got.rank is not None else tf.TensorShape([None] * rank)

    def agree(name, got, want, what):
      if not got.is_compatible_with(want):
        raise ValueError(f"{name} has shape {got.as_list()}, where {what} make it {want.as_list()}.")

    d = self.xlnet_config.d_model
    if getattr(inputs.inp_k, "dtype", None) is not None and tf.as_dtype(inputs.inp_k.dtype).is_floating:
      raise TypeError(f"input_ids must hold integer token ids. Received: {tf.as_dtype(inputs.inp_k.dtype).name}.")
    ids = shape("input_ids", inputs.inp_k, 2)
    qlen, bsz = ids[0], ids[1]
    for name, x in (("seg_ids", inputs.seg_id), ("input_mask", inputs.input_mask), ("inp_q", inputs.inp_q)):
      if x is not None:
        agree(name, shape(name, x, 2), ids, "input_ids [len, bsz]")
    if inputs.perm_mask is not None:
      agree("perm_mask", shape("perm_mask", inputs.perm_mask, 3), tf.TensorShape([qlen, qlen, bsz]),
            "input_ids [len, bsz]")
    if inputs.target_mapping is not None:
      if inputs.inp_q is None:
        raise ValueError("target_mapping is read with inp_q only (the query stream's prediction slots); pass inp_q, "
                         "or no target_mapping.")
      agree("target_mapping", shape("target_mapping", inputs.target_mapping, 3),
            tf.TensorShape([None, qlen, bsz]), "input_ids [len, bsz]")
    if inputs.mems is not None:
      if not isinstance(inputs.mems, (list, tuple)) or len(inputs.mems) != self.xlnet_config.n_layer:
        raise ValueError(f"mems must be a list of n_layer={self.xlnet_config.n_layer} tensors [mlen, bsz, d_model]. "
                         f"Received: {_described(inputs.mems)}.")
      first = shape("mems[0]", inputs.mems[0], 3)
      for i, m in enumerate(inputs.mems):
        agree(f"mems[{i}]", shape(f"mems[{i}]", m, 3), tf.TensorShape([first[0], bsz, d]),
              f"mems[0] [{first[0]}, ...], input_ids [len, bsz] and d_model={d}")

  def _chains(self, inp_k, training):
    """How many chains of layers the batch runs as: `inference_chains` for inference by TensorFlow's executor on a
    machine without GPU or TPU, with 2 or more inter-op threads (a static batch of at least that size, no
    `bi_data`), else 1.

    The examples of a batch are independent in inference, so each chain's ops wait only for their own chain: on a
    CPU the executor runs one chain's smaller and memory-bound ops beside the other's matmuls, where one chain
    leaves a core idle between them (docs/performance_log.md, "Inference as independent chains"). The outputs are the
    examples' own, as with one chain. XLA schedules one chain itself (two measured no faster), one inter-op thread
    would run the chains one after the other (measured slower), and an accelerator would only get smaller kernels.
    """
    if ops.is_training(training) or self.run_config.bi_data or self.inference_chains < 2:
      return 1
    bsz = inp_k.shape[1]
    if bsz is None or bsz < self.inference_chains or ops.in_xla_context():
      return 1
    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
      return 1
    # 0: TensorFlow's default, a thread per core this process may run on.
    inter_op = tf.config.threading.get_inter_op_parallelism_threads() or (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    return self.inference_chains if inter_op >= 2 else 1

  def _projected_positions(self, qlen, klen, bsz, training):
    """Every layer's projection of the relative positional embedding: n_layer float [C, N, D, R]."""
    # The original tiles the positional embedding over the batch before its dropout, so each batch column has its
    # own mask and its own projection. Without dropout the columns are equal: keep one (two with bi_data).
    per_column = self.dropout > 0 and ops.is_training(training)
    rc = self.run_config
    # In bfloat16, as the original: positions and sinusoids rounded to it (`RunConfig.float32_positions`: float32).
    positions_dtype = self.compute_dtype if rc.use_bfloat16 and not rc.float32_positions else tf.float32
    pos_emb = ops.relative_positional_encoding(qlen, klen, self.xlnet_config.d_model, rc.clamp_len, self.attn_type,
                                               rc.bi_data, bsz=bsz if per_column else None, dtype=self.compute_dtype,
                                               compute_dtype=positions_dtype)
    if per_column:
      pos_emb = self.drop(pos_emb, training=training)
    # Every layer's projection of it from one matmul: per layer, the small [R, H] x [H, N * D] products used the
    # matmul units poorly (docs/performance.md).
    return projections.project_positions(pos_emb, [layer.rel_attn.r.kernel for layer in self.layer_stack])

  def _network(self, inputs, training, k_heads_r=None):
    """`call` on one chain of `_Inputs`; k_heads_r: `_projected_positions` (None: made here, after the embeddings'
    dropout)."""
    inp_k, seg_id, input_mask, mems, perm_mask, target_mapping, inp_q = inputs
    c, rc = self.xlnet_config, self.run_config
    dtype = self.compute_dtype
    qlen = tf.shape(inp_k)[0]
    bsz = tf.shape(inp_k)[1]
    mlen = tf.shape(mems[0])[0] if mems is not None else 0
    klen = mlen + qlen

    # The padding mask, permutation mask and segment ids batch-major, each in a buffer of its own (`ops.batch_major`).
    attn_mask, non_tgt_mask = ops.build_attn_masks(
        qlen, mlen, self.attn_type, rc.same_length, None if input_mask is None else ops.batch_major(input_mask),
        None if perm_mask is None else ops.batch_major(perm_mask), dtype)
    word_emb_k = self.word_embedding(inp_k)
    output_h = self.drop(word_emb_k, training=training)
    output_g = None
    if target_mapping is not None:
      target_mapping = tf.cast(target_mapping, dtype)
    if inp_q is not None:
      mask_emb = tf.cast(self.mask_emb.mask_emb, dtype)
      if target_mapping is not None:
        word_emb_q = tf.tile(mask_emb, [tf.shape(target_mapping)[0], bsz, 1])
      else:
        inp_q_ext = tf.cast(inp_q, dtype)[:, :, None]
        word_emb_q = inp_q_ext * mask_emb + (1 - inp_q_ext) * word_emb_k
      output_g = self.drop(word_emb_q, training=training)

    seg = None if seg_id is None else ops.different_segments(ops.batch_major(seg_id), mlen, dtype)
    context = attention.batch_major_context(non_tgt_mask, attn_mask if inp_q is not None else None, seg,
                                            target_mapping if inp_q is not None else None, dtype)
    if k_heads_r is None:
      k_heads_r = self._projected_positions(qlen, klen, bsz, training)

    # Per-layer slices by one unstack each (its gradient is one stack, not n_layer strided-slice gradients). A tied
    # bias is broadcast to every layer first: its gradient is then one sum, not an AddN of n_layer terms (see
    # `layers` on bit-exact training).
    def per_layer(variable, untied=True):
      value = tf.cast(variable, dtype)
      if not untied:
        value = tf.broadcast_to(value, [c.n_layer, *value.shape])
      return tf.unstack(value, c.n_layer)

    r_w_bias, r_r_bias, r_s_bias = (per_layer(v, c.untie_r) for v in (self.r_w_bias, self.r_r_bias, self.r_s_bias))
    seg_embed = per_layer(self.seg_embed)
    new_mems = []
    recomputed = rc.recompute_grad and ops.is_training(training)
    for i, layer in enumerate(self.layer_stack):
      new_mems.append(ops.cache_mem(output_h, None if mems is None else mems[i], rc.mem_len, rc.reuse_len))
      forward = recompute.recompute_grad(layer.forward, layer) if recomputed else layer.forward
      biases = attention.AttentionBiases(r_w_bias[i], r_r_bias[i], None if seg is None else r_s_bias[i],
                                         None if seg is None else seg_embed[i])
      output_h, output_g = forward(
          output_h, k_heads_r[i], context, biases, mems=None if mems is None else mems[i], g=output_g,
          training=training,
          # The last layer's content stream feeds nothing when the query stream is the output: not computed.
          h_out=inp_q is None or i < c.n_layer - 1)
    output = self.drop(output_g if inp_q is not None else output_h, training=training)
    return output, (new_mems if rc.mem_len else None)

  def get_config(self):
    config = super().get_config()
    config.update(xlnet_config=self.xlnet_config.to_dict(), run_config=self.run_config.to_dict(),
                  attn_type=self.attn_type)
    return config


def _described(mems):
  if isinstance(mems, (list, tuple)):
    return f"a {type(mems).__name__} of {len(mems)}"
  return f"a {type(mems).__name__} of shape {tf.TensorShape(getattr(mems, 'shape', None))}"


class _Inputs(NamedTuple):
  """The network's inputs, which `TransformerXL.call` splits into chains together. `XLNetModel.call` documents each
  (its `input_ids` is inp_k, `seg_ids` seg_id).

  Attributes:
    inp_k: int [I, B]. seg_id: int [I, B] or None. input_mask: float [I, B] or None (1 = padding).
    mems: list of n_layer float [M, B, H], or None. perm_mask: float [I, I, B] or None (1 = i may NOT attend to j).
    target_mapping: float [P, I, B] or None. inp_q: float [I, B] or None (1 = target).
  """

  inp_k: tf.Tensor
  seg_id: tf.Tensor
  input_mask: tf.Tensor
  mems: list
  perm_mask: tf.Tensor
  target_mapping: tf.Tensor
  inp_q: tf.Tensor


def _split_batch(x, sizes):
  """x split along the batch axis into parts of the given sizes: mems (a list of float [M, B, H]) each on axis 1,
  others on the last axis, as in [I, B] and [I, J, B]; None: a None per part."""
  if x is None:
    return [None] * len(sizes)
  if isinstance(x, (list, tuple)):
    return [list(part) for part in zip(*(tf.split(m, sizes, 1) for m in x))]
  return tf.split(x, sizes, -1)


class _MaskEmbedding(keras.layers.Layer):
  """`mask_emb/mask_emb` [1, 1, H], the query stream's input; glorot-uniform as TF1's default."""

  def __init__(self, d_model, **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model

  def build(self, input_shape=None):
    self.mask_emb = self.add_weight(name="mask_emb", shape=(1, 1, self.d_model), initializer="glorot_uniform")
