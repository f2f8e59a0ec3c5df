"""The relative attention core: scores (content, position, segment) -> masked softmax -> attention vectors, with
hand-written gradients; the `AttentionContext` of masks, segments and target positions all layers share; and what
one layer's attention takes besides: its `AttentionBiases`, made ready for the scores as `QueryBiases`, and the
`StreamRows` each stream attends from.

The head projections that feed it are `xlnet_tf.modeling.projections`'s, the score sum and relative shift
`xlnet_tf.modeling.scores`'s.

The layers' public calls take the original time-major tensors (their masks in an `AttentionContext` made by
`attention_context`); inside, attention runs head-major: q/k/v are [N, B, L, D] and scores [N, B, I, J], keys last,
so that every score einsum is a plain batched matmul, softmax and masks run over contiguous rows, and no score-sized
tensor is ever transposed. Dimension key and mask polarity:
see `xlnet_tf.modeling.ops`. Bit-exact training: every tensor that has a gradient is read by at most two ops
(see `ops`; tests/test_layers.py checks the gradient graphs).
"""

from typing import NamedTuple

import tensorflow as tf

from xlnet_tf.modeling import ops
from xlnet_tf.modeling import scores


def masked_softmax(score, mask):
  """Softmax over keys (axis 1) of score [I, J, B, N]; mask [I, J, B, 1 or N] (1 = blocked) or None."""
  if mask is not None:
    score = tf.where(tf.cast(mask, tf.bool), tf.cast(ops.mask_value(score.dtype), score.dtype), score)
  return tf.nn.softmax(score, axis=1)


class AttentionContext:
  """What every layer's attention needs besides its weights and inputs, in the head-major layout.

  Build it with `batch_major_context` (or `attention_context`), once per forward; all layers share it.

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


class AttentionBiases(NamedTuple):
  """One layer's relative attention parameters: its slices of the network's `r_w_bias`, `r_r_bias`, `r_s_bias`
  and `seg_embed` (`TransformerXL` owns the variables and hands each layer its own). A NamedTuple, so that
  `recompute.recompute_grad` differentiates the tensors inside.

  Attributes:
    r_w_bias: float [N, D], the content bias: the content score is (q + r_w_bias).k.
    r_r_bias: float [N, D], the position bias: the position score is (q + r_r_bias).k_r.
    r_s_bias: float [N, D] or None, the segment bias: the segment score is (q + r_s_bias).seg_embed[s]. None: no
      segments (the segment term is not computed).
    seg_embed: float [2, N, D] or None, the segment embedding: index 0 = same segment, 1 = different. None: no
      segments.
  """

  r_w_bias: tf.Tensor
  r_r_bias: tf.Tensor
  r_s_bias: tf.Tensor = None
  seg_embed: tf.Tensor = None


class QueryBiases(NamedTuple):
  """One layer's `AttentionBiases` as `rel_attn_core` adds them to the queries, made once per layer by
  `query_biases` and shared by both streams.

  Attributes:
    stacked: float [2, N, D], r_w_bias and r_r_bias stacked (the biased queries come from one add).
    seg_term: `segment_term`'s (weight, shift), or None without segments.
    scale: python float, 1 / sqrt(D).
  """

  stacked: tf.Tensor
  seg_term: tuple
  scale: float


class StreamRows(NamedTuple):
  """What one stream's attention differs in besides its queries: the rows of the `AttentionContext` it reads
  (`bias_h`, `seg_h` for the content stream; `bias_g`, `seg_g`, `target_pos` for the query stream).

  Attributes:
    bias: float [1, B, Q, J] or None, the additive mask: `ops.mask_value` = query row q may NOT attend key j, 0 = may
      attend. None: nothing masked.
    seg: float [1, B, Q, J] or None. 1 = query row q and key j are in different segments, 0 = same. None: no segment
      term.
    target_pos: int32 [B, P] or None, the position each query row stands for (query stream with target_mapping).
      None: row q is position q.
    qlen: int scalar, the content stream's length I; read only with target_pos.
  """

  bias: tf.Tensor = None
  seg: tf.Tensor = None
  target_pos: tf.Tensor = None
  qlen: tf.Tensor = None


def attention_context(attn_mask_h=None, attn_mask_g=None, seg_mat=None, target_mapping=None, dtype=tf.float32):
  """Converts the original time-major masks to an `AttentionContext` (what the layers' own calls take).

  Args:
    attn_mask_h: float [I, J, B, 1] or None, the content stream's mask (`non_tgt_mask`). 1 = blocked.
    attn_mask_g: float [I, J, B, 1] or None, the query stream's mask (`attn_mask`). 1 = blocked.
    seg_mat: float [I, J, B, 2] or None, the original's one-hot segment matrix (index 1 = different).
    target_mapping, dtype: as `batch_major_context`.
  """
  batch_first = lambda x: None if x is None else tf.transpose(x[..., -1], [2, 0, 1])  # masks' [..., 0], seg_mat's 1
  return batch_major_context(batch_first(attn_mask_h), batch_first(attn_mask_g), batch_first(seg_mat),
                             target_mapping, dtype)


def batch_major_context(mask_h=None, mask_g=None, seg=None, target_mapping=None, dtype=tf.float32):
  """An `AttentionContext` from batch-major masks (`ops.build_attn_masks`, `ops.different_segments`).

  Args:
    mask_h: float [B or 1, I, J] or None, the content stream's mask (`non_tgt_mask`). 1 = blocked.
    mask_g: float [B or 1, I or 1, J] or None, the query stream's mask (`attn_mask`). 1 = blocked.
    seg: float [B, I, J] or None. 1 = different segment.
    target_mapping: float [P, I, B] or None. Each row p must be one-hot (slot p targets that position) or all zero
      (a padding slot), with distinct positions, as the data pipeline builds it: the query stream then attends
      from the P target positions only. (The original scatters the P query vectors to all I positions, attends
      from every position and gathers back; for such a mapping that gives the same numbers with I/P times the
      work. A soft or duplicated mapping would differ.)
    dtype: the compute dtype.
  """

  def bias(mask):
    return None if mask is None else (tf.cast(mask, dtype) * tf.cast(ops.mask_value(dtype), dtype))[None]

  bias_h, bias_g = bias(mask_h), bias(mask_g)
  seg_h = None if seg is None else tf.cast(seg, dtype)[None]
  seg_g = seg_h
  target_pos = target_valid = None
  if target_mapping is not None:
    mapping = tf.transpose(tf.cast(target_mapping, tf.float32), [2, 0, 1])  # [B, P, I]
    target_pos = tf.argmax(mapping, axis=-1, output_type=tf.int32)
    target_valid = tf.cast(tf.reduce_sum(mapping, -1), dtype)
    gather_rows = lambda x: None if x is None else tf.gather(x[0], target_pos, batch_dims=1)[None]
    bias_g, seg_g = gather_rows(bias_g), gather_rows(seg_g)
  return AttentionContext(bias_h, bias_g, seg_h, seg_g, target_pos, target_valid)


@ops.xla_function
def _biased_queries_forward(q_head, biases, scale):
  return tf.unstack((q_head[None] + biases[:, :, None, None]) * scale, biases.shape[0])


@ops.xla_function
def _biased_queries_backward(upstreams, scale):
  total = upstreams[0]
  for upstream in upstreams[1:]:
    total += upstream
  return total * scale, tf.stack([tf.reduce_sum(upstream, [1, 2]) for upstream in upstreams]) * scale


def _biased_queries(q_head, biases, scale):
  """[(q_head + biases[k]) * scale for each k]: q_head float [N, B, Q, D], biases [K, N, D].

  One XLA-compiled pass forward and one backward (q_head read once, so its gradient is one sum in a fixed order),
  where TF's broadcast add, multiply and unstack took a pack and two reductions more in the gradient.
  """

  @tf.custom_gradient
  def biased(q_head, biases):
    return _biased_queries_forward(q_head, biases, scale), lambda *upstreams: _biased_queries_backward(
        list(upstreams), scale)

  return biased(q_head, biases)


def _dropped_softmax(score, keep):
  """Softmax over the keys (last axis) with the dropout mask `keep` applied unscaled (`ops.apply_keep`; None: no
  dropout). Its gradient takes t = upstream * output (zero where dropped) and returns t - sum(t) * softmax: four
  passes over the scores, where TF's select and softmax gradient took five."""

  @tf.custom_gradient
  def dropped(score):
    prob = tf.nn.softmax(score, axis=-1)
    out = ops.apply_keep(prob, keep)

    def grad(upstream):
      t = upstream * out
      return t - tf.reduce_sum(t, -1, keepdims=True) * prob

    return out, grad

  return dropped(score)


def segment_term(r_s_bias, r_w_bias, seg_embed, scale):
  """The weights of the segment term's difference, once per layer (both streams share them).

  The segment term of the score is ef_same + seg * (ef_diff - ef_same), ef_s = scale * (q + r_s_bias).seg_embed[s].
  ef_same is the same for every key of a query row and softmax over the keys ignores such a constant, so only the
  difference is added: with raw = seg_embed[1] - seg_embed[0] and q_w = scale * (q + r_w_bias), the content
  queries `rel_attn_core` computes anyway, scale * (q + r_s_bias).raw = q_w.raw + scale * (r_s_bias - r_w_bias).raw:
  one [N, B*Q, D] x [N, D, 1] product on q_w (no third biased copy of the queries, no [N, B*Q, D] x [D, 2] matmul,
  and under XLA no product pass and two-stage reduction over a copy of the unbiased queries).

  Args:
    r_s_bias, r_w_bias: float [N, D]. seg_embed: float [2, N, D]. scale: python float.

  Returns:
    (weight float [N, D, 1], shift float [N, 1, 1, 1]); diff = q_w [N, B*Q, D] x weight + shift.
  """
  # Each tensor here has at most two consumers (see the module docstring of `layers` on bit-exact training).
  same, different = tf.unstack(tf.cast(seg_embed, r_s_bias.dtype))  # one op: its gradient is one stack
  raw = different - same
  return raw[:, :, None], (tf.reduce_sum((r_s_bias - r_w_bias) * raw, -1) * scale)[:, None, None, None]


def query_biases(biases, dtype, scale, segments):
  """A layer's `AttentionBiases` in the compute dtype, ready for `rel_attn_core`: once per layer, for both streams.

  Args:
    biases: `AttentionBiases` (r_s_bias and seg_embed are read only with segments).
    dtype: the compute dtype.
    scale: python float, 1 / sqrt(D).
    segments: bool, whether a stream has a segment term (the `AttentionContext` has seg_h or seg_g).

  Returns:
    `QueryBiases`.
  """
  r_w_bias = tf.cast(biases.r_w_bias, dtype)
  stacked = tf.stack([r_w_bias, tf.cast(biases.r_r_bias, dtype)])  # once: r_w_bias has at most two consumers
  seg_term = None
  if segments:
    seg_term = segment_term(tf.cast(biases.r_s_bias, dtype), r_w_bias, biases.seg_embed, scale)
  return QueryBiases(stacked, seg_term, scale)


def rel_attn_core(q_head, k_head_h, v_head_h, k_head_r, q_biases, rows, attn_dropout, training):
  """Scores (content + position + segment) -> masked softmax over keys -> attention vectors, head-major.

  score[n, b, i, j] = scale * ((q + r_w_bias).k_j + (q + r_r_bias).k_r[rel(i, j)] + (q + r_s_bias).seg_embed[s])
  + mask, with s = 1 if i and j are in different segments; the scale is folded into the (small) query terms, and
  only the segment term's difference is added (`segment_term`). `attn_dropout` must be a `Dropout` of this module
  (it has `unscaled_keep`).

  Args:
    q_head: float [N, B, Q, D], queries (Q = I, or P with target_pos).
    k_head_h, v_head_h: float [N, B, J, D], keys and values of [mems; h].
    k_head_r: float [N, C, D, R], the projected positional embedding, positions last
      (`projections.project_positions`); C divides B and batch column b uses column b // (B / C) (C = B: one per
      column; C = 2 with bi_data: forward, backward; C = 1: shared).
    q_biases: `QueryBiases` (`query_biases`), the layer's biases and scale; seg_term is read only with rows.seg.
    rows: `StreamRows`, the mask and segment rows of this stream's queries and where they stand.
    attn_dropout: the dropout layer of the attention probabilities.
    training: bool, dropout on.

  Returns:
    float [N, B, Q, D].
  """
  bias, seg, target_pos = rows.bias, rows.seg, rows.target_pos
  n_head, d_head = q_head.shape[0], q_head.shape[-1]
  bsz, q_len = tf.shape(q_head)[1], tf.shape(q_head)[2]
  columns = tf.shape(k_head_r)[1]
  # Both biased queries from one add: q_head is read once (see the module docstring on bit-exact training).
  q_w, q_r = _biased_queries(q_head, q_biases.stacked, q_biases.scale)
  ac = tf.matmul(q_w, k_head_h, transpose_b=True)
  band = None
  if target_pos is None and not ops.is_training(training) and k_head_h.shape[2] is not None:
    band = scores.banded_position_scores(q_r, k_head_r, k_head_h.shape[2])
  if band is not None:
    bd, offset = band
  else:  # the full product [N, B, Q, R], shifted in scores.score_sum
    q_r = tf.reshape(q_r, [n_head, columns, -1, d_head])
    bd = tf.reshape(tf.matmul(q_r, k_head_r), [n_head, bsz, q_len, -1])
    offset = q_len - tf.range(q_len)[None] if target_pos is None else rows.qlen - target_pos
  diff = None
  if seg is not None:
    weight, shift = q_biases.seg_term
    diff = tf.reshape(tf.matmul(tf.reshape(q_w, [n_head, -1, d_head]), weight), [n_head, bsz, q_len, 1]) + shift
  keep, keep_scale = attn_dropout.unscaled_keep(ac, training=training)
  attn_prob = _dropped_softmax(scores.score_sum(ac, bd, seg, diff, bias, offset), keep)
  attn_vec = tf.matmul(attn_prob, v_head_h)
  # The dropout's 1 / (1 - rate) is applied to the [.., Q, D] result rather than the [.., Q, J] probabilities.
  return attn_vec if keep_scale is None else attn_vec * tf.cast(keep_scale, attn_vec.dtype)
