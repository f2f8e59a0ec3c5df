"""The XLNet network (the original `modeling.transformer_xl`) and the public `XLNetModel`.

Variable paths end like the original checkpoint names: an `XLNetModel` named "model" holds
`model/transformer/{r_w_bias, r_r_bias, word_embedding/lookup_table, mask_emb/mask_emb, r_s_bias, seg_embed,
layer_{i}/rel_attn/..., layer_{i}/ff/...}`, `model/lm_loss/bias`, and the optional fine-tuning heads
`model/sequnece_summary/...`, `model/classification_{scope}/logit/...`, `model/regression_{scope}/logit/...`.
"""

import os

import keras
import tensorflow as tf

from xlnet_tf.modeling import attention
from xlnet_tf.modeling import heads as heads_lib
from xlnet_tf.modeling import layers
from xlnet_tf.modeling import ops
from xlnet_tf.modeling import projections
from xlnet_tf.modeling import recompute
from xlnet_tf.modeling.rows import split_streams
from xlnet_tf.config import RunConfig, XLNetConfig


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

  def call(self, h, r, g=None, seg_mat=None, r_w_bias=None, r_r_bias=None, r_s_bias=None, seg_embed=None,
           attn_mask_h=None, attn_mask_g=None, mems=None, target_mapping=None, training=False):
    """Returns (h [I, B, H], g [P or I, B, H] or None); see `TwoStreamRelAttention.call`."""
    context = attention.attention_context(attn_mask_h, attn_mask_g if g is not None else None, seg_mat,
                                       target_mapping if g is not None else None, h.dtype)
    return self.forward(h, self.rel_attn.project_positions(r, h.dtype), context, r_w_bias, r_r_bias, r_s_bias,
                        seg_embed, mems, g, training)

  def forward(self, h, k_head_r, context, r_w_bias, r_r_bias, r_s_bias=None, seg_embed=None, mems=None, g=None,
              training=False, h_out=True):
    """The layer on a prebuilt `attention.AttentionContext` and projected positional embedding (see
    `TwoStreamRelAttention.attend_rows` for the args).

    Both streams go through the output projection and the feed-forward network as one matrix of rows.

    Returns:
      (h [I, B, H], g [P or I, B, H] or None); h is None when h_out is False.
    """
    rows = self.ff.ffn_rows(self.rel_attn.attend_rows(h, k_head_r, context, r_w_bias, r_r_bias, r_s_bias, seg_embed,
                                                      mems, g, training, h_out), training)
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

  Architecture arguments are the 8 `XLNetConfig` keys (less `n_token`'s tie to the LM head, which lives in
  `XLNetModel`); run arguments are those of `RunConfig` plus `attn_type`. With `recompute_grad`, training recomputes
  each layer's activations in the backward pass (`recompute.recompute_grad`).
  """

  def __init__(self, n_token, n_layer, d_model, n_head, d_head, d_inner, ff_activation="relu", untie_r=False,
               dropout=0.0, dropatt=0.0, attn_type="bi", bi_data=False, clamp_len=-1, same_length=False,
               mem_len=None, reuse_len=None, init="normal", init_range=0.1, init_std=0.02, recompute_grad=False,
               **kwargs):
    kwargs.setdefault("name", "transformer")
    super().__init__(**kwargs)
    if attn_type not in ("bi", "uni"):
      raise ValueError(f"attn_type must be 'bi' or 'uni'. Received: {attn_type!r}.")
    self.n_token = n_token
    self.n_layer = n_layer
    self.d_model = d_model
    self.n_head = n_head
    self.d_head = d_head
    self.d_inner = d_inner
    self.ff_activation = ff_activation
    self.untie_r = untie_r
    self.dropout = dropout
    self.dropatt = dropatt
    self.attn_type = attn_type
    self.bi_data = bi_data
    self.clamp_len = clamp_len
    self.same_length = same_length
    self.mem_len = mem_len
    self.reuse_len = reuse_len
    self.init = init
    self.init_range = init_range
    self.init_std = init_std
    self.recompute_grad = recompute_grad
    self.initializer = ops.get_initializer(init, init_range, init_std)
    policy = self.dtype_policy
    self.word_embedding = WordEmbedding(n_token, d_model, self.initializer, name="word_embedding", dtype=policy)
    self.mask_emb = _MaskEmbedding(d_model, name="mask_emb", dtype=policy)
    self.layer_stack = [XLNetLayer(d_model, n_head, d_head, d_inner, ff_activation, dropout, dropatt,
                                   self.initializer, name=f"layer_{i}", dtype=policy) for i in range(n_layer)]
    self.drop = layers.Dropout(dropout, name="dropout", dtype=policy)
    self.inference_chains = 2  # see `_chains`; 1 runs inference as one chain

  def build(self, input_shape=None):
    # Creation order follows the original: r_w_bias, r_r_bias, word_embedding, mask_emb, r_s_bias, seg_embed.
    bias_shape = (self.n_layer, self.n_head, self.d_head) if self.untie_r else (self.n_head, self.d_head)
    self.r_w_bias = self.add_weight(name="r_w_bias", shape=bias_shape, initializer=self.initializer)
    self.r_r_bias = self.add_weight(name="r_r_bias", shape=bias_shape, initializer=self.initializer)
    self.word_embedding.build()
    self.mask_emb.build()
    self.r_s_bias = self.add_weight(name="r_s_bias", shape=bias_shape, initializer=self.initializer)
    self.seg_embed = self.add_weight(name="seg_embed", shape=(self.n_layer, 2, self.n_head, self.d_head),
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
    if self.bi_data and inp_k.shape[1] is not None and inp_k.shape[1] % 2:
      raise ValueError(f"bi_data needs an even batch size (first half forward, second half backward). "
                       f"Received: bsz={inp_k.shape[1]}.")
    inputs = (inp_k, seg_id, input_mask, mems, perm_mask, target_mapping, inp_q)
    chains = self._chains(inp_k, training)
    if chains == 1:
      return self._network(*inputs, training=training)
    qlen = tf.shape(inp_k)[0]
    klen = qlen + (tf.shape(mems[0])[0] if mems is not None else 0)
    k_heads_r = self._projected_positions(qlen, klen, None, training=False)  # one column: shared by every chain
    bsz = inp_k.shape[1]
    sizes = [bsz // chains + int(i < bsz % chains) for i in range(chains)]  # the first ones longer by one if need be
    parts = [_split_batch(x, sizes) for x in inputs]
    results = [self._network(*part, training=training, k_heads_r=k_heads_r) for part in zip(*parts)]
    output = tf.concat([out for out, _ in results], 1)
    return output, (None if not self.mem_len else [tf.concat(m, 1) for m in zip(*(m for _, m in results))])

  def _chains(self, inp_k, training):
    """How many chains of layers the batch runs as: `inference_chains` for inference by TensorFlow's executor on a
    machine without GPU or TPU, with 2 or more inter-op threads (a static batch of at least that size, no
    `bi_data`), else 1.

    The examples of a batch are independent in inference, so each chain's ops wait only for their own chain: on a
    CPU the executor runs one chain's smaller and memory-bound ops beside the other's matmuls, where one chain
    leaves a core idle between them (docs/performance.md, "Inference as independent chains"). The outputs are the
    examples' own, as with one chain. XLA schedules one chain itself (two measured no faster), one inter-op thread
    would run the chains one after the other (measured slower), and an accelerator would only get smaller kernels.
    """
    if ops.is_training(training) or self.bi_data or self.inference_chains < 2:
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
    pos_emb = ops.relative_positional_encoding(qlen, klen, self.d_model, self.clamp_len, self.attn_type,
                                                  self.bi_data, bsz=bsz if per_column else None,
                                                  dtype=self.compute_dtype)
    if per_column:
      pos_emb = self.drop(pos_emb, training=training)
    # Every layer's projection of it from one matmul: per layer, the small [R, H] x [H, N * D] products used the
    # matmul units poorly (docs/performance.md).
    return projections.project_positions(pos_emb, [layer.rel_attn.r.kernel for layer in self.layer_stack])

  def _network(self, inp_k, seg_id, input_mask, mems, perm_mask, target_mapping, inp_q, training, k_heads_r=None):
    """`call` on one chain; k_heads_r: `_projected_positions` (None: made here, after the embeddings' dropout)."""
    dtype = self.compute_dtype
    qlen = tf.shape(inp_k)[0]
    bsz = tf.shape(inp_k)[1]
    mlen = tf.shape(mems[0])[0] if mems is not None else 0
    klen = mlen + qlen

    # The padding mask, permutation mask and segment ids batch-major, each in a buffer of its own (`ops.batch_major`).
    attn_mask, non_tgt_mask = ops.build_attn_masks(
        qlen, mlen, self.attn_type, self.same_length, None if input_mask is None else ops.batch_major(input_mask),
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
        value = tf.broadcast_to(value, [self.n_layer, *value.shape])
      return tf.unstack(value, self.n_layer)

    r_w_bias, r_r_bias, r_s_bias = (per_layer(v, self.untie_r) for v in (self.r_w_bias, self.r_r_bias, self.r_s_bias))
    seg_embed = per_layer(self.seg_embed)
    new_mems = []
    recomputed = self.recompute_grad and ops.is_training(training)
    for i, layer in enumerate(self.layer_stack):
      new_mems.append(ops.cache_mem(output_h, None if mems is None else mems[i], self.mem_len,
                                       self.reuse_len))
      forward = recompute.recompute_grad(layer.forward, layer) if recomputed else layer.forward
      output_h, output_g = forward(
          output_h, k_heads_r[i], context,
          r_w_bias=r_w_bias[i], r_r_bias=r_r_bias[i],
          r_s_bias=None if seg is None else r_s_bias[i],
          seg_embed=None if seg is None else seg_embed[i],
          mems=None if mems is None else mems[i], g=output_g, training=training,
          # The last layer's content stream feeds nothing when the query stream is the output: not computed.
          h_out=inp_q is None or i < self.n_layer - 1)
    output = self.drop(output_g if inp_q is not None else output_h, training=training)
    return output, (new_mems if self.mem_len else None)

  def get_config(self):
    config = super().get_config()
    config.update({k: getattr(self, k) for k in (
        "n_token", "n_layer", "d_model", "n_head", "d_head", "d_inner", "ff_activation", "untie_r", "dropout",
        "dropatt", "attn_type", "bi_data", "clamp_len", "same_length", "mem_len", "reuse_len", "init",
        "init_range", "init_std", "recompute_grad")})
    return config


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


@keras.saving.register_keras_serializable(package=_PACKAGE)
class XLNetModel(keras.Model):
  """XLNet as the original `xlnet.XLNetModel` (scope `model`), with its tied LM head and the heads a task gives.

  The model owns the network (`transformer`) and the LM softmax tied to its word embedding (`lm_loss/bias`, in
  every released checkpoint). It knows no task: a task builds its heads (Keras layers named as the original's TF1
  scopes, e.g. `sequnece_summary`, `classification_imdb`, see `xlnet_tf.modeling.heads.finetune_heads`) and
  passes them in, so their variables are `model/<head name>/...` as in the original checkpoints.

  Args:
    xlnet_config: XLNetConfig (or its dict).
    run_config: RunConfig (or its dict).
    attn_type: "bi" (the original XLNetModel's) or "uni".
    heads: list of Keras layers (each with a unique name, the TF1 scope below `model/`; `build()` without an
      input shape), or None.

  Mixed precision: with `run_config.use_bfloat16` (or `use_fp16`), the layers compute in bfloat16 (float16) with
  float32 variables (the Keras "mixed_bfloat16" / "mixed_float16" policy, `run_config.dtype_policy`); losses are
  float32.
  """

  def __init__(self, xlnet_config, run_config, attn_type="bi", heads=None, **kwargs):
    kwargs.setdefault("name", "model")
    if isinstance(xlnet_config, dict):
      xlnet_config = XLNetConfig(**xlnet_config)
    if isinstance(run_config, dict):
      run_config = RunConfig(**run_config)
    if run_config.dtype_policy:
      kwargs.setdefault("dtype", run_config.dtype_policy)
    super().__init__(**kwargs)
    self.xlnet_config = xlnet_config
    self.run_config = run_config
    self.attn_type = attn_type
    c, rc = xlnet_config, run_config
    policy = self.dtype_policy
    self.transformer = TransformerXL(
        c.n_token, c.n_layer, c.d_model, c.n_head, c.d_head, c.d_inner, c.ff_activation, c.untie_r,
        dropout=rc.dropout if rc.is_training else 0.0, dropatt=rc.dropatt if rc.is_training else 0.0,
        attn_type=attn_type, bi_data=rc.bi_data, clamp_len=rc.clamp_len, same_length=rc.same_length,
        mem_len=rc.mem_len, reuse_len=rc.reuse_len, init=rc.init, init_range=rc.init_range, init_std=rc.init_std,
        recompute_grad=rc.recompute_grad, name="transformer", dtype=policy)
    self.lm_loss_layer = heads_lib.LMLoss(c.n_token, name="lm_loss", dtype=policy)
    self.head_list = list(heads or [])
    if len(self.heads) != len(self.head_list) or "transformer" in self.heads or "lm_loss" in self.heads:
      raise ValueError(f"Heads need unique names other than 'transformer' and 'lm_loss'. Received: "
                       f"{[head.name for head in self.head_list]}.")
    self.build()

  @property
  def heads(self):
    """{name: layer} of the task heads."""
    return {head.name: head for head in self.head_list}

  def build(self, input_shape=None):
    self.transformer.build()
    self.lm_loss_layer.build()
    for head in self.head_list:
      head.build()
    self.built = True

  def call(self, input_ids, seg_ids=None, input_mask=None, mems=None, perm_mask=None, target_mapping=None,
           inp_q=None, training=False):
    """Runs XLNet on time-major inputs with the original layouts and polarities.

    Args:
      input_ids: int [I, B], token ids.
      seg_ids: int [I, B] or None, segment ids (only equality matters; memory counts as segment 0).
        None: no segment term.
      input_mask: float [I, B] or None. 1 = padding (no query attends it), 0 = real token. None: no padding.
      mems: list of n_layer float [M, B, H], or None (no memory).
      perm_mask: float [I, I, B] or None. 1 = i may NOT attend to j in batch b; 0 = may attend.
        None: attend to all.
      target_mapping: float [P, I, B] or None. 1 = prediction slot p is on token i (partial prediction). Each row
        one-hot (distinct positions) or all zero (a padding slot: zero attention output, as the original),
        as the data pipeline builds it; see `attention.attention_context`. None: the query stream covers every
        position.
      inp_q: float [I, B] or None. 1 = target token (query stream input is mask_emb). None: no query stream
        (fine-tuning).
      training: bool, dropout on.

    Returns:
      (output, new_mems): output float [P, B, H] (query stream, with target_mapping), [I, B, H] (query stream
      without target_mapping, or content stream when inp_q is None); new_mems a list of n_layer float
      [min(mem_len, M + (reuse_len or I)), B, H] (no gradient), or None when run_config.mem_len is unset.
    """
    return self.transformer(input_ids, seg_ids, input_mask, mems, perm_mask, target_mapping, inp_q,
                            training=training)

  def get_embedding_table(self):
    """float variable [V, H], the word embedding (tied to the LM softmax)."""
    return self.transformer.word_embedding.lookup_table

  def get_pooled_out(self, output, input_mask=None, training=False):
    """The sequence summary (head `sequnece_summary`) of a content-stream output [I, B, H] -> float [B, H]."""
    return self._head("sequnece_summary")(output, input_mask, training=training)

  def get_head_logits(self, pooled, scope_name):
    """Logits of head `classification_{scope}` [B, C] or `regression_{scope}` [B] on a pooled output [B, H]."""
    return self._head(scope_name)(pooled)

  def _head(self, name):
    if name not in self.heads:
      raise ValueError(f"This XLNetModel has no head {name!r}; its heads are {sorted(self.heads)}. Pass it in "
                       "`heads` (see xlnet_tf.modeling.heads.finetune_heads).")
    return self.heads[name]

  def get_lm_logits(self, output):
    """LM logits float [P, B, V] of a query-stream output [P, B, H], tied to the embedding, + lm_loss/bias."""
    return self.lm_loss_layer(output, self.get_embedding_table())

  def get_lm_loss(self, output, target):
    """Per-token LM loss float32 [P, B] for targets int [P, B]."""
    return heads_lib.lm_loss(self.get_lm_logits(output), target)

  def get_config(self):
    return {"xlnet_config": self.xlnet_config.to_dict(), "run_config": self.run_config.to_dict(),
            "attn_type": self.attn_type, "heads": [keras.saving.serialize_keras_object(h) for h in self.head_list],
            "name": self.name}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    # Unbuilt, so that their variables are created under the model's name scope (`model/<head>/...`).
    config["heads"] = [keras.saving.deserialize_keras_object({k: v for k, v in h.items() if k != "build_config"})
                       for h in config.get("heads") or []]
    return cls(**config)
