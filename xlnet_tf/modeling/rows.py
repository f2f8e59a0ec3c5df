"""Row kernels: LayerNorm and dense layers on rows float [K, H], the 2-D form every layer's tail runs in, and
`split_streams`, which gives the rows of both streams back their shapes.

The LayerNorm is one XLA-compiled pass forward and one backward with a hand-written gradient that takes the dropout
mask and the residual add in the same pass; the dense layer keeps its bias add where the CPU's matrix units are
used (see `dense_rows`). Dropout masks: `ops.apply_keep`.
"""


import tensorflow as tf

from xlnet_tf.modeling import ops


LAYER_NORM_EPS = 1e-12  # the original's (tf.contrib.layers.layer_norm's)


def _normalized_rows(x):
  """(x_hat, inv) in float32: x's rows centred and scaled to unit variance, and the scale 1 / std."""
  x32 = tf.cast(x, tf.float32)
  centered = x32 - tf.reduce_mean(x32, -1, keepdims=True)
  inv = tf.math.rsqrt(tf.reduce_mean(centered * centered, -1, keepdims=True) + LAYER_NORM_EPS)
  return centered * inv, inv


def _summed(x, residual, keep):
  """apply_keep(x, keep) + residual in x's dtype (residual None: the dropped x alone)."""
  x = ops.apply_keep(x, keep)
  return x if residual is None else x + tf.cast(residual, x.dtype)


@ops.xla_function
def _layer_norm_forward(x, gamma, beta, residual=None, keep=None):
  x_hat, _ = _normalized_rows(_summed(x, residual, keep))
  return tf.cast(x_hat * gamma + beta, x.dtype)


@ops.xla_function
def _layer_norm_backward(x, gamma, upstream, residual=None, keep=None):
  x_hat, inv = _normalized_rows(_summed(x, residual, keep))
  upstream = tf.cast(upstream, tf.float32)
  scaled = upstream * gamma
  d_sum = inv * (scaled - tf.reduce_mean(scaled, -1, keepdims=True)
                 - x_hat * tf.reduce_mean(scaled * x_hat, -1, keepdims=True))
  d_x = tf.cast(ops.apply_keep(d_sum, keep), x.dtype)
  d_residual = () if residual is None else (tf.cast(d_sum, residual.dtype),)
  return (d_x, *d_residual, tf.reduce_sum(upstream * x_hat, 0), tf.reduce_sum(upstream, 0))


def layer_norm_rows(layer_norm, rows, residual=None, keep=None):
  """Applies a `LayerNormalization` layer's gamma/beta to rows float [K, H] (statistics in float32, as Keras), after
  the dropout mask `keep` (`ops.apply_keep`; None: none) and the residual [K, H] (None: none):
  layer_norm(dropout(rows) + residual), the original's post-attention and post-FFN step.

  Forward and gradient are each one XLA-compiled pass with a hand-written gradient (the gradient recomputes the
  sum and its statistics from the inputs): faster than the LayerNorm alone as TF ops (docs/performance.md), and
  the dropout and the residual add cost no passes of their own.
  """
  gamma, beta = tf.cast(layer_norm.gamma, tf.float32), tf.cast(layer_norm.beta, tf.float32)

  @tf.custom_gradient
  def normalized(rows, gamma, beta, *maybe_residual):  # the residual is an input only when there is one
    residual = maybe_residual[0] if maybe_residual else None

    def grad(upstream):
      d_rows, *d_residual, d_gamma, d_beta = _layer_norm_backward(rows, gamma, upstream, residual, keep)
      return (d_rows, d_gamma, d_beta, *d_residual)

    return _layer_norm_forward(rows, gamma, beta, residual, keep), grad

  return normalized(rows, gamma, beta, *([] if residual is None else [residual]))


def dense_rows(rows, kernel, bias, transpose_kernel=False):
  """A dense layer on rows: rows float [K, A] times kernel [A, F] (or [F, A] with transpose_kernel) + bias [F].

  In float32 the bias add is a `BiasAdd` that grappler fuses into the matmul. In bfloat16 it is written as a
  3-D add instead: oneDNN's fused MatMul+BiasAdd kernel does not use the CPU's bf16 matrix units (AMX), and was
  slower than the plain matmul and a separate add on this stack (docs/performance.md).
  """
  out = tf.matmul(rows, tf.cast(kernel, rows.dtype), transpose_b=transpose_kernel)
  bias = tf.cast(bias, rows.dtype)
  if rows.dtype == tf.float32:
    return tf.nn.bias_add(out, bias)
  width = tf.shape(out)[-1]
  return tf.reshape(tf.reshape(out, [-1, 1, width]) + bias, [-1, width])


def split_streams(rows, h, g=None):
  """Rows [(I + P) * B, H] of `RelMultiheadAttn.attend_rows` (h's rows, then g's) -> (h-shaped, g-shaped or None)."""
  if g is None:
    return tf.reshape(rows, tf.shape(h)), None
  rows_h, rows_g = tf.split(rows, [tf.shape(h)[0] * tf.shape(h)[1], -1])
  return tf.reshape(rows_h, tf.shape(h)), tf.reshape(rows_g, tf.shape(g))
