"""Head projections, each one 2-D matmul with the kernels [H, N, D] side by side: time-major inputs [L, B, H] to
head-major heads [N, B, L, D], the relative positional embedding to [N, C, D, R], and the attention vectors back
through the output projection `o`.

Head-major layout and why: see `xlnet_tf.modeling.attention`. The memory's rows get no input gradient
(`project_heads_with_mems`), as in the original, which stops it.
"""


import tensorflow as tf


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
  `scores.banded_position_scores` are slices along the last axis (contiguous copies; with positions second to last,
  XLA's copy of a window read them 256 floats apart).

  Args:
    r: float [R, C, H], the relative positional embedding (C = B, 2 or 1, see `attention.rel_attn_core`).
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
