"""The attention kernels: the fast head-major path every attention layer runs on.

The layers' public calls take the original time-major tensors; inside, attention runs head-major: q/k/v are
[N, B, L, D] and scores [N, B, I, J], keys last, so that every score einsum is a plain batched matmul, softmax and
masks run over contiguous rows, and no score-sized tensor is ever transposed. Dimension key and mask polarity:
see `xlnet_tf.modeling.ops`. Bit-exact training: every tensor that has a gradient is read by at most two ops
(see `ops`; tests/test_layers.py checks the gradient graphs).
"""


import tensorflow as tf

from xlnet_tf.modeling import ops


def masked_softmax(score, mask):
  """Softmax over keys (axis 1) of score [I, J, B, N]; mask [I, J, B, 1 or N] (1 = blocked) or None."""
  if mask is not None:
    score = tf.where(tf.cast(mask, tf.bool), tf.cast(ops.mask_value(score.dtype), score.dtype), score)
  return tf.nn.softmax(score, axis=1)


def _kernel_matrix(kernels, dtype):
  """Kernels float [H, N, D] side by side as one matrix [H, K * N * D] in dtype (one matmul projects them all)."""
  d_model, n_head, d_head = kernels[0].shape
  return tf.concat([tf.reshape(tf.cast(k, dtype), [d_model, n_head * d_head]) for k in kernels], 1)


def project_heads(x, kernels):
  """Head projections of x with one 2-D matmul.

  Args:
    x: float [L, B, H] (time-major).
    kernels: list of float [H, N, D], e.g. [k/kernel, v/kernel].

  Returns:
    list of float [N, B, L, D], one per kernel (head-major).
  """
  weight = _kernel_matrix(kernels, x.dtype)
  return _head_major(tf.matmul(tf.reshape(x, [-1, kernels[0].shape[0]]), weight), tf.shape(x)[0], kernels)


def _head_major(y, length, kernels):
  """Projected rows float [L * B, K * N * D] (time-major) -> list of K float [N, B, L, D]."""
  _, n_head, d_head = kernels[0].shape
  y = tf.reshape(y, [length, -1, len(kernels), n_head, d_head])
  return tf.unstack(tf.transpose(y, [2, 3, 1, 0, 4]), num=len(kernels))


def project_heads_with_mems(mems, h, kernels, q_kernel=None):
  """Head projections of [mems; h] by `kernels` (one 2-D matmul) and, with q_kernel, of h alone by it.

  The memory is a constant to the gradient, as in the original (whose `_cache_mem` stops it): the gradient of the
  input is computed for h's rows only, where TF's matmul gradient would also multiply out the M * B rows of the
  memory and discard them (M / (M + I) of that product). The kernels' gradient is the one product over all rows
  that TF computes.

  Args:
    mems: float [M, B, H], this layer's memory.
    h: float [I, B, H] (time-major).
    kernels: list of float [H, N, D], e.g. [k/kernel, v/kernel].
    q_kernel: float [H, N, D] or None.

  Returns:
    list of float [N, B, M + I, D], one per kernel, then float [N, B, I, D] with q_kernel.
  """
  dtype, d_model = h.dtype, kernels[0].shape[0]
  mem_rows = tf.reshape(tf.cast(tf.stop_gradient(mems), dtype), [-1, d_model])
  matrices = [_kernel_matrix(kernels, dtype)] + ([] if q_kernel is None else [_kernel_matrix([q_kernel], dtype)])

  @tf.custom_gradient
  def project(h_rows, *weights):  # weights: the matrices, as inputs of the custom gradient
    cat = tf.concat([mem_rows, h_rows], 0)
    outputs = [tf.matmul(cat, weights[0])] + [tf.matmul(h_rows, w) for w in weights[1:]]

    def grad(*upstreams):
      d_h = tf.matmul(upstreams[0][tf.shape(mem_rows)[0]:], weights[0], transpose_b=True)
      d_weights = [tf.matmul(cat, upstreams[0], transpose_a=True)]
      if q_kernel is not None:
        d_h += tf.matmul(upstreams[1], weights[1], transpose_b=True)
        d_weights.append(tf.matmul(h_rows, upstreams[1], transpose_a=True))
      return (d_h, *d_weights)

    return outputs, grad

  outputs = project(tf.reshape(h, [-1, d_model]), *matrices)
  mlen, length = tf.shape(mems)[0], tf.shape(h)[0]
  heads = _head_major(outputs[0], mlen + length, kernels)
  return heads + ([] if q_kernel is None else _head_major(outputs[1], length, [q_kernel]))


def project_positions(r, kernels):
  """The relative positional embedding projected by each kernel, positions last, with one matmul.

  Positions last, the position scores are a plain [.., Q, D] x [.., D, R] product, and the windows of
  `banded_position_scores` are slices along the last axis (contiguous copies; with positions second to last, XLA's
  copy of a window read them 256 floats apart).

  Args:
    r: float [R, C, H], the relative positional embedding (C = B, 2 or 1, see `rel_attn_core`).
    kernels: list of float [H, N, D], e.g. every layer's r/kernel.

  Returns:
    list of float [N, C, D, R], one per kernel.
  """
  rlen, columns = tf.shape(r)[0], tf.shape(r)[1]
  d_model, n_head, d_head = kernels[0].shape
  weight = _kernel_matrix(kernels, r.dtype)
  rows = tf.reshape(tf.transpose(r, [1, 0, 2]), [-1, d_model])  # [C * R, H]: column c's positions in turn
  y = tf.matmul(weight, rows, transpose_a=True, transpose_b=True)  # [K * N * D, C * R]
  y = tf.reshape(y, [len(kernels), n_head, d_head, columns, rlen])
  return tf.unstack(tf.transpose(y, [0, 1, 3, 2, 4]), num=len(kernels))


def project_out(attn_vec, kernel):
  """The output projection: attn_vec float [N, B, L, D], kernel [H, N, D] -> float [L * B, H] (row l*B + b)."""
  _, n_head, d_head = kernel.shape
  x = tf.reshape(tf.transpose(attn_vec, [2, 1, 0, 3]), [-1, n_head * d_head])
  return tf.matmul(x, _kernel_matrix([kernel], x.dtype), transpose_b=True)


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


def banded_position_scores(q_r, k_head_r, klen, rows=64):
  """`rel_shift_keys_last(q_r . k_head_r^T, klen)` from the band of positions each block of query rows reads, as
  `bd, offset` for `_score_sum`.

  Query row i reads positions I - i + j (j < klen) of the R = klen + I: a block of `rows` queries reads a window of
  W = klen + rows of them, so the product is (klen + rows) / (klen + I) of the full one. Within its block's window
  row i reads entries j + rows - i % rows. Where XLA compiles the whole computation (`ops.in_xla_context`) that
  shift is `rel_shift_keys_last` here, whose slices XLA fuses into the score sum (there its gather is the slower
  one); elsewhere TF would copy the band twice for those slices, and `_score_sum`'s gather shifts it instead, the
  faster there. Forward-only use: the window gather's gradient makes it slower than the full product in training.
  Measurements: docs/performance.md.

  Args:
    q_r: float [N, B, I, D], the position queries; k_head_r: float [N, C, D, R] (C divides B, as `rel_attn_core`).
    klen: python int.
    rows: queries per block.

  Returns:
    (float [N, B, I, W], int32 [1, I] offset rows - i % rows) or, under XLA, (float [N, B, I, klen] shifted, None);
    None when the static shapes do not fit (I, C or R unknown, R != klen + I, or I not a multiple of `rows` above
    it).
  """
  n_head, _, qlen, d_head = q_r.shape  # the batch size may be unknown (evaluation without drop_remainder)
  columns, rlen = k_head_r.shape[1], k_head_r.shape[3]
  if None in (qlen, columns, rlen) or rlen != klen + qlen or qlen % rows or qlen <= rows:
    return None
  blocks = qlen // rows
  # Block t, rows [t*rows, (t+1)*rows), reads positions [start, start + W), start = I - rows * (t + 1).
  starts = [qlen - rows * (1 + t) for t in range(blocks)]
  windows = tf.stack([k_head_r[..., start:start + klen + rows] for start in starts], 2)  # one copy each
  q_r = tf.reshape(q_r, [n_head, columns, -1, blocks, rows, d_head])
  bd = tf.matmul(q_r, windows[:, :, None])  # [N, C, B / C, T, rows, W]
  if ops.in_xla_context():
    return tf.reshape(rel_shift_keys_last(bd, klen), [n_head, -1, qlen, klen]), None
  return tf.reshape(bd, [n_head, -1, qlen, klen + rows]), rows - tf.range(qlen)[None] % rows


@tf.function(jit_compile=True)
def _shift_backward(upstream, offset, rlen):
  """The gradient of the shift in `_score_sum_forward`: d bd[n, b, i, r] = upstream[n, b, i, r - offset[b, i]] where
  0 <= r - offset < klen, else 0, gathered from a padded copy (each kept entry has one source: no scatter-add)."""
  padded = tf.pad(upstream, [[0, 0], [0, 0], [0, 0], [rlen, rlen]])
  back = tf.range(rlen)[None, None, :] - offset[:, :, None] + rlen  # [B or 1, Q, R], in [0, klen + 2R)
  return tf.gather(padded, tf.broadcast_to(back, tf.concat([tf.shape(upstream)[:-1], [rlen]], 0)), batch_dims=3)


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


def attention_context(attn_mask_h=None, attn_mask_g=None, seg_mat=None, target_mapping=None, dtype=tf.float32):
  """Converts the original time-major masks (the layers' own calls) to an `AttentionContext`.

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


@tf.function(jit_compile=True)
def _biased_queries_forward(q_head, biases, scale):
  return tf.unstack((q_head[None] + biases[:, :, None, None]) * scale, biases.shape[0])


@tf.function(jit_compile=True)
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


@tf.function(jit_compile=True)
def _score_sum_forward(ac, bd, offset, seg, diff, bias):
  if offset is not None:  # the relative shift: bd[..., i, j] = bd_unshifted[..., i, min(j + offset[b, i], R - 1)]
    index = tf.range(tf.shape(ac)[-1])[None, None, :] + offset[:, :, None]
    index = tf.minimum(index, tf.shape(bd)[-1] - 1)
    bd = tf.gather(bd, tf.broadcast_to(index, tf.shape(ac)), batch_dims=3)
  score = ac + bd
  if seg is not None:
    score += seg * diff
  if bias is None:
    return score
  if score.dtype == tf.float16:  # a blocked score plus the mask value can pass float16's -65504: keep it finite
    return tf.maximum(score + bias, tf.cast(ops.mask_value(tf.float16), tf.float16))
  return score + bias


def _score_sum(ac, bd, seg, diff, bias, offset=None):
  """ac + rel_shift(bd) + seg * diff + bias as one XLA-compiled pass over the scores (the shift a gather inside it),
  where TF's slices, adds and multiply took five.

  ac: float [N, B, Q, J]. bd: float [N, B, Q, R], shifted here: score[..., i, j] reads bd[..., i, j + offset[b, i]]
  (offset int32 [B or 1, Q]: I - i for the content stream, I - the target position for the query stream's rows,
  rows - i % rows for the windows of `banded_position_scores`, R then their width; indices past R - 1, which only
  the causal mask's blocked keys read with uni attention, are clamped, and their gradient is ignored: it is 0); or
  with offset None, bd already [N, B, Q, J]. seg and diff (float [1, B, Q, J], [N, B, Q, 1]) or bias [1, B, Q, J]
  may be None. The gradient of diff is the upstream's sum over the keys where seg is 1; ac gets the upstream
  itself, bd the upstream shifted back.
  """
  rlen = tf.shape(bd)[-1]

  @tf.custom_gradient
  def summed(ac, bd, *maybe_diff):  # diff is an input (with a gradient) only with segments
    def grad(upstream):
      grads = (upstream, upstream if offset is None else _shift_backward(upstream, offset, rlen))
      return grads if seg is None else grads + (tf.reduce_sum(upstream * seg, -1, keepdims=True),)

    return _score_sum_forward(ac, bd, offset, seg, maybe_diff[0] if maybe_diff else None, bias), grad

  return summed(ac, bd, *([] if seg is None else [diff]))


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


def rel_attn_core(q_head, k_head_h, v_head_h, k_head_r, biases, seg_term, bias, seg, scale, attn_dropout, training,
                  target_pos=None, qlen=None):
  """Scores (content + position + segment) -> masked softmax over keys -> attention vectors, head-major.

  score[n, b, i, j] = scale * ((q + r_w_bias).k_j + (q + r_r_bias).k_r[rel(i, j)] + (q + r_s_bias).seg_embed[s])
  + mask, with s = 1 if i and j are in different segments; the scale is folded into the (small) query terms, and
  only the segment term's difference is added (`segment_term`). `attn_dropout` must be a `Dropout` of this module
  (it has `unscaled_keep`).

  Args:
    q_head: float [N, B, Q, D], queries (Q = I, or P with target_pos).
    k_head_h, v_head_h: float [N, B, J, D], keys and values of [mems; h].
    k_head_r: float [N, C, D, R], the projected positional embedding, positions last (`project_positions`); C
      divides B and batch column b uses column b // (B / C) (C = B: one per column; C = 2 with bi_data: forward,
      backward; C = 1: shared).
    biases: float [2, N, D], r_w_bias and r_r_bias stacked.
    seg_term: `segment_term`'s (weight, shift), or None when seg is None.
    bias: float [1, B, Q, J] additive mask or None. seg: float [1, B, Q, J] (1 = different segment) or None.
    scale: python float, 1 / sqrt(D).
    attn_dropout: the dropout layer of the attention probabilities.
    target_pos: int32 [B, P] or None: the position of each query row (query stream with target_mapping).
    qlen: int scalar, the content stream's length I; needed with target_pos.

  Returns:
    float [N, B, Q, D].
  """
  n_head, d_head = q_head.shape[0], q_head.shape[-1]
  bsz, q_len = tf.shape(q_head)[1], tf.shape(q_head)[2]
  columns = tf.shape(k_head_r)[1]
  # Both biased queries from one add: q_head is read once (see the module docstring on bit-exact training).
  q_w, q_r = _biased_queries(q_head, biases, scale)
  ac = tf.matmul(q_w, k_head_h, transpose_b=True)
  band = None
  if target_pos is None and not ops.is_training(training) and k_head_h.shape[2] is not None:
    band = banded_position_scores(q_r, k_head_r, k_head_h.shape[2])
  if band is not None:
    bd, offset = band
  else:  # the full product [N, B, Q, R], shifted in _score_sum
    q_r = tf.reshape(q_r, [n_head, columns, -1, d_head])
    bd = tf.reshape(tf.matmul(q_r, k_head_r), [n_head, bsz, q_len, -1])
    offset = q_len - tf.range(q_len)[None] if target_pos is None else qlen - target_pos
  diff = None
  if seg is not None:
    weight, shift = seg_term
    diff = tf.reshape(tf.matmul(tf.reshape(q_w, [n_head, -1, d_head]), weight), [n_head, bsz, q_len, 1]) + shift
  keep, keep_scale = attn_dropout.unscaled_keep(ac, training=training)
  attn_prob = _dropped_softmax(_score_sum(ac, bd, seg, diff, bias, offset), keep)
  attn_vec = tf.matmul(attn_prob, v_head_h)
  # The dropout's 1 / (1 - rate) is applied to the [.., Q, D] result rather than the [.., Q, J] probabilities.
  return attn_vec if keep_scale is None else attn_vec * tf.cast(keep_scale, attn_vec.dtype)


def split_streams(rows, h, g=None):
  """Rows [(I + P) * B, H] of `RelMultiheadAttn.attend_rows` (h's rows, then g's) -> (h-shaped, g-shaped or None)."""
  if g is None:
    return tf.reshape(rows, tf.shape(h)), None
  rows_h, rows_g = tf.split(rows, [tf.shape(h)[0] * tf.shape(h)[1], -1])
  return tf.reshape(rows_h, tf.shape(h)), tf.reshape(rows_g, tf.shape(g))
