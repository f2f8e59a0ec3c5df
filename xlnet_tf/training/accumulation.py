"""Gradient accumulation: one update from N micro-batches of a replica's batch, equal to the whole batch's.

The input pipeline still yields the whole per-replica batch of a step (b rows); `accumulate` splits it into N
micro-batches of m = b / N rows, runs the forward and backward pass on one micro-batch at a time (a `tf.while_loop`
with one iteration in flight, so a micro-batch's activations are freed before the next one's are made) and sums
what the whole batch's pass would give: the loss sum, the weight sum and the gradients of the loss SUM (the caller
divides them once by the whole batch's weight, so the loss normalisation is the big batch's). With a clip_mode
that counts rows (`optimization.ROW_CLIP_MODES`) it also keeps every micro-batch's gradient of its gathered
word-embedding rows and their ids: together they are the whole batch's un-merged rows, so the gradient norm is
the one the whole batch would give.

Rows. Micro-batch i takes rows [i*m, (i+1)*m) of every feature (batch axis 0: every task's features are
batch-major) and of the mems (batch axis 1: [mem_len, b, d_model] per layer); its new mems go back to the same
rows. With `bi_data` the batch is [forward rows | backward rows] (b/2 each; the model gives the second half
backward positions), so micro-batch i takes forward rows i*m/2..(i+1)*m/2 AND the matching backward rows: each
micro-batch is itself a valid bi_data batch, and a row keeps its own mems. In general the batch is `groups` equal
blocks and micro-batch i takes the i-th slice of every block.
"""

import tensorflow as tf


def check_steps(num_micro):
  """Raises ValueError unless `num_micro` (micro-batches per update) is at least 1."""
  if num_micro < 1:
    raise ValueError(f"--gradient_accumulation_steps must be a positive integer (1: no accumulation). Received: "
                     f"{num_micro}.")


def check_split(bsz, num_micro, groups=1):
  """Raises ValueError unless a replica's batch of `bsz` rows splits into `num_micro` equal micro-batches, each of
  `groups` equal blocks (`groups` 2 with bi_data: as many forward as backward rows)."""
  check_steps(num_micro)
  if bsz % (num_micro * groups):
    paired = " of paired forward and backward rows (bi_data)" if groups == 2 else ""
    rows = f"{bsz // 2} (half the batch, with bi_data)" if groups == 2 else f"{bsz}"
    raise ValueError(f"--gradient_accumulation_steps={num_micro} must split the per-replica batch of {bsz} rows "
                     f"(--train_batch_size) into equal micro-batches{paired}. Use a --gradient_accumulation_steps "
                     f"that divides {rows}, or a --train_batch_size that gives such a batch.")


def _dims(x):
  """x's dimensions: static where known, else dynamic scalars."""
  return [d if d is not None else tf.shape(x)[k] for k, d in enumerate(x.shape)]


def micro_batch(x, i, num_micro, groups=1, axis=0):
  """The rows of micro-batch `i` (int or int32 scalar Tensor) of `x` along its batch axis `axis` (module docstring):
  [..., b, ...] -> [..., b / num_micro, ...], the slice i of each of `groups` blocks, in block order."""
  dims = _dims(x)
  part = dims[axis] // (groups * num_micro)
  blocks = tf.reshape(x, dims[:axis] + [groups, num_micro, part] + dims[axis + 1:])
  return tf.reshape(tf.gather(blocks, i, axis=axis + 1), dims[:axis] + [groups * part] + dims[axis + 1:])


def join_micro_batches(stacked, groups=1, axis=0):
  """The inverse of `micro_batch` over all i: `stacked` [N, ..., m, ...] (micro-batch i's rows at [i], its batch
  axis at `axis` + 1) -> [..., N * m, ...], every row back in its place in the whole batch."""
  dims = _dims(stacked)
  num_micro, part = dims[0], dims[axis + 1] // groups
  x = tf.reshape(stacked, dims[:axis + 1] + [groups, part] + dims[axis + 2:])  # [N, ..., G, m/G, ...]
  rank = len(dims) + 1
  order = list(range(1, axis + 2)) + [0] + list(range(axis + 2, rank))  # [..., G, N, m/G, ...]
  return tf.reshape(tf.transpose(x, order), dims[1:axis + 1] + [groups * num_micro * part] + dims[axis + 2:])


def accumulate(forward_backward, features, mems, num_micro, groups=1):
  """The whole batch's sums from `num_micro` micro-batches (module docstring), one micro-batch at a time.

  Args:
    forward_backward: (features, mems) -> (loss_sum, weight_sum, grads, rows, new_mems) of one micro-batch, with
      grads the gradients of its loss_sum (not divided by any weight): a list with one float Tensor,
      tf.IndexedSlices or None per trainable variable; rows None, or (gradient of each gathered word-embedding
      row float [..., D], the gathered ids int [...]); new_mems None or a list of float [M, m, H].
    features: dict of batch-major Tensors [b, ...], the replica's whole batch.
    mems: None, or list of float [M, b, H] (the mems before the step).
    num_micro: int, N (> 1): micro-batches per step; must divide b into `groups` blocks (`check_split`).
    groups: int, 2 with bi_data (the batch is [forward | backward] rows), else 1.

  Returns:
    (loss_sum float32 [], weight_sum float32 [], grads: the sums, dense (None where forward_backward gives None),
    rows: None or (every micro-batch's row gradients [N, ..., D], their ids [N, ...]), new_mems: None or list of
    float [M, b, H] with each row where it came from).
  """
  def run(i):
    part = {name: micro_batch(x, i, num_micro, groups) for name, x in features.items()}
    part_mems = None if mems is None else [micro_batch(m, i, num_micro, groups, axis=1) for m in mems]
    loss_sum, weight_sum, grads, rows, new_mems = forward_backward(part, part_mems)
    grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
    return tf.cast(loss_sum, tf.float32), tf.cast(weight_sum, tf.float32), grads, rows, new_mems

  # Micro-batch 0 outside the loop: it fixes which variables have a gradient and starts the sums.
  loss_sum, weight_sum, grads, rows, new_mems = run(0)
  present = [k for k, g in enumerate(grads) if g is not None]
  sums = [tf.cast(grads[k], tf.float32) for k in present]
  kept = list(rows or []) + list(new_mems or [])  # every micro-batch's, stacked
  arrays = [tf.TensorArray(t.dtype, size=num_micro, element_shape=t.shape).write(0, t) for t in kept]

  def body(i, loss_sum, weight_sum, sums, arrays):
    loss_i, weight_i, grads_i, rows_i, new_mems_i = run(i)
    sums = [s + tf.cast(grads_i[k], tf.float32) for s, k in zip(sums, present)]
    arrays = [a.write(i, t) for a, t in zip(arrays, list(rows_i or []) + list(new_mems_i or []))]
    return i + 1, loss_sum + loss_i, weight_sum + weight_i, sums, arrays

  # One micro-batch in flight, which is the memory saving: parallel_iterations=1 runs the iterations one after the
  # other, and micro-batch 1 may start only once micro-batch 0's gradients are done (the loop is lowered to
  # dataflow, where its first iteration would otherwise overlap micro-batch 0).
  with tf.control_dependencies([loss_sum, weight_sum] + sums):
    first = tf.identity(tf.constant(1))
  _, loss_sum, weight_sum, sums, arrays = tf.while_loop(
      lambda i, *_: i < num_micro, body, (first, loss_sum, weight_sum, sums, arrays), parallel_iterations=1)
  for k, s in zip(present, sums):
    grads[k] = tf.cast(s, grads[k].dtype)
  kept = [a.stack() for a in arrays]
  if rows is not None:
    rows, kept = tuple(kept[:2]), kept[2:]
  if new_mems is not None:
    new_mems = [join_micro_batches(m, groups, axis=1) for m in kept]
  return loss_sum, weight_sum, grads, rows, new_mems
