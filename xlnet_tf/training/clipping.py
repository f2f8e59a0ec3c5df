"""Clipping by the global norm and layer-wise gradient scaling (`--clip`, `--lr_layer_decay_rate`), and the
norm the original's GPU path gives the word-embedding gradient: steps 3 and 4 of `optimization.apply_gradients`."""

import re

import tensorflow as tf

from xlnet_tf.training.adam import variable_path



# A transformer block: `.../transformer/layer_{l}/...`. The leading component keeps `ff/layer_1/kernel` (the
# first feed-forward projection) from being read as transformer layer 1.
_LAYER_RE = re.compile(r"(?:^|/)transformer/layer_(\d+)/")


def _transformer_layer(path):
  match = _LAYER_RE.search(path)
  return None if match is None else int(match.group(1))


def _layer_multiplier_list(variables, lr_layer_decay_rate, n_layer):
  if lr_layer_decay_rate == 1.0:
    return [1.0] * len(variables)
  if lr_layer_decay_rate < 0:
    raise ValueError(f"lr_layer_decay_rate must be >= 0 (--lr_layer_decay_rate). Received: {lr_layer_decay_rate}.")
  paths = [variable_path(v) for v in variables]
  layers = [_transformer_layer(p) for p in paths]
  found = [l for l in layers if l is not None]
  if not found:
    raise ValueError(f"lr_layer_decay_rate={lr_layer_decay_rate} needs variables under 'transformer/layer_{{l}}/'"
                     f", but none of the {len(paths)} variable paths matched (e.g. {paths[:3]}). Check the model's "
                     "layer names or pass --lr_layer_decay_rate=1.0.")
  if n_layer is None:
    n_layer = max(found) + 1
  elif max(found) >= n_layer:
    raise ValueError(f"A variable is under transformer/layer_{max(found)}/ but n_layer={n_layer}. "
                     "Pass the model's n_layer, or None to count the layers from the variable paths.")
  return [1.0 if l is None else lr_layer_decay_rate ** (n_layer - 1 - l) for l in layers]


def layer_decay_multipliers(variables, lr_layer_decay_rate, n_layer=None):
  """Returns {variable path: gradient multiplier}: `rate ** (n_layer - 1 - l)` under `transformer/layer_{l}/`, else 1.

  Args:
    variables: the trainable variables.
    lr_layer_decay_rate: per-layer decay (--lr_layer_decay_rate); 1.0 = no decay.
    n_layer: number of transformer layers; None = 1 + the largest `l` found in the paths (as the original).
  """
  return {variable_path(v): m for v, m in zip(variables, _layer_multiplier_list(variables, lr_layer_decay_rate,
                                                                                  n_layer))}


def clip_and_scale_gradients(grads, variables, clip, lr_layer_decay_rate=1.0, n_layer=None, use_norm=None):
  """Clips by global norm, then multiplies each transformer layer's clipped gradient by its layer-decay factor.

  Args:
    grads: list of float Tensor (or tf.IndexedSlices), one per variable and shaped like it: the gradient of the
      loss: summed across replicas, or with clip_mode per_core / per_replica this replica's own. None = the variable
      gets no gradient; it is passed through.
    variables: the variables, in the order of `grads`.
    clip: the global-norm bound (--clip), > 0.
    lr_layer_decay_rate, n_layer: as `layer_decay_multipliers`.
    use_norm: float32 [] norm to clip by instead of the global norm of `grads` (see `apply_gradients`).

  Returns:
    (clipped and scaled grads, gnorm: float32 [] global norm of `grads` BEFORE clipping, or `use_norm`).
  """
  grads = list(grads)
  variables = list(variables)
  if len(grads) != len(variables):
    raise ValueError(f"Need one gradient per variable. Received {len(grads)} gradients for {len(variables)} "
                     "variables.")
  if not clip > 0:
    raise ValueError(f"clip must be > 0: it bounds the global gradient norm (--clip). Received: {clip}.")
  multipliers = _layer_multiplier_list(variables, lr_layer_decay_rate, n_layer)
  clipped, gnorm = tf.clip_by_global_norm(grads, clip, use_norm=use_norm)
  scaled = []
  for grad, multiplier in zip(clipped, multipliers):
    if grad is None or multiplier == 1.0:
      scaled.append(grad)
    elif isinstance(grad, tf.IndexedSlices):
      scaled.append(tf.IndexedSlices(grad.values * multiplier, grad.indices, grad.dense_shape))
    else:
      scaled.append(grad * multiplier)
  return scaled, gnorm


def embedding_rows_square_norm(table_grad, rows_grad, ids):
  """The squared norm the original's GPU path gives the word-embedding gradient (one replica's share).

  There the gradient of `lookup_table` is an IndexedSlices that `clip_by_global_norm` never merges: one row per
  gathered position (repeated tokens counted separately), and, with the tied LM softmax, the softmax's dense part
  `G` as further rows (TF 1.13 joins the two without summing). So its squared norm is
  `||G||^2 + sum_p ||e_p||^2`, where `e_p` is the gradient of the row gathered at position p and `G` is the rest.

  Args:
    table_grad: float [V, D], the (dense) gradient of the table: G + the e_p summed by id.
    rows_grad: float [..., D], the gradient of each gathered row.
    ids: int [...], the ids that were gathered, shaped like rows_grad without D.

  Returns:
    float32 [].
  """
  table_grad = tf.convert_to_tensor(table_grad)
  rows = tf.reshape(tf.cast(rows_grad, table_grad.dtype), [-1, tf.shape(table_grad)[-1]])
  merged = tf.math.unsorted_segment_sum(rows, tf.reshape(tf.cast(ids, tf.int32), [-1]), tf.shape(table_grad)[0])
  dense_part = table_grad - merged
  return tf.cast(tf.reduce_sum(tf.square(dense_part)) + tf.reduce_sum(tf.square(rows)), tf.float32)
