"""The relative attention's score sum: ac + rel_shift(bd) + segment term + mask as one XLA-compiled pass with a
hand-written gradient, float16-safe (a blocked score stays finite); the relative shift of scores with keys last;
and the band of positions each block of query rows reads in inference.

Layout: scores [N, B, Q, J] head-major, keys last (see `xlnet_tf.modeling.attention`).
"""


import tensorflow as tf

from xlnet_tf.modeling import ops


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
  `bd, offset` for `score_sum`.

  Query row i reads positions I - i + j (j < klen) of the R = klen + I: a block of `rows` queries reads a window of
  W = klen + rows of them, so the product is (klen + rows) / (klen + I) of the full one. Within its block's window
  row i reads entries j + rows - i % rows. Where XLA compiles the whole computation (`ops.in_xla_context`) that
  shift is `rel_shift_keys_last` here, whose slices XLA fuses into the score sum (there its gather is the slower
  one); elsewhere TF would copy the band twice for those slices, and `score_sum`'s gather shifts it instead, the
  faster there. Forward-only use: the window gather's gradient makes it slower than the full product in training.
  Measurements: docs/performance.md.

  Args:
    q_r: float [N, B, I, D], the position queries; k_head_r: float [N, C, D, R] (C divides B, as
      `attention.rel_attn_core`).
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


@ops.xla_function
def _shift_backward(upstream, offset, rlen):
  """The gradient of the shift in `_score_sum_forward`: d bd[n, b, i, r] = upstream[n, b, i, r - offset[b, i]] where
  0 <= r - offset < klen, else 0, gathered from a padded copy (each kept entry has one source: no scatter-add)."""
  padded = tf.pad(upstream, [[0, 0], [0, 0], [0, 0], [rlen, rlen]])
  back = tf.range(rlen)[None, None, :] - offset[:, :, None] + rlen  # [B or 1, Q, R], in [0, klen + 2R)
  return tf.gather(padded, tf.broadcast_to(back, tf.concat([tf.shape(upstream)[:-1], [rlen]], 0)), batch_dims=3)


@ops.xla_function
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


def score_sum(ac, bd, seg, diff, bias, offset=None):
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
