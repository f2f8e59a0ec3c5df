"""Learning-rate schedule, optimizers, clipping and layer-wise decay, as the original `model_utils.get_train_op`.

One training step of the original does, in this order:
  1. lr = warm-up (`lr * step / warmup_steps` while step < warmup_steps), then `poly` or `cos` decay, where
     `step` is the global step BEFORE this step's increment (so the first step uses lr(0), 0 with warm-up);
  2. gradients of the loss, averaged over towers/cores (here: summed over replicas, see `apply_gradients`);
  3. `clip_by_global_norm(grads, clip)`; the reported `gnorm` is the norm BEFORE clipping;
  4. if `lr_layer_decay_rate != 1`: the CLIPPED gradient of every variable under `transformer/layer_{l}/` is
     multiplied by `lr_layer_decay_rate ** (n_layer - 1 - l)`; embeddings, `r_*_bias`, `seg_embed`, `mask_emb`
     and the heads are not scaled;
  5. `weight_decay == 0`: TF1 `AdamOptimizer` (bias-corrected, "epsilon hat"); `weight_decay > 0`: the original
     `AdamWeightDecayOptimizer` (no bias correction, decoupled decay, `r_*_bias` decayed, LayerNorm and other
     biases not); the step counter advances by exactly 1 in both cases.

Use `create_optimizer` for the optimizer and `apply_gradients` for steps 2-5.
"""

import math
import re
import threading

import keras
import tensorflow as tf


DECAY_METHODS = ("poly", "cos")


# re.search patterns tried against the FULL variable path, as the original tries them against TF1 names.
# An include pattern wins over the exclusions, so `r_w_bias`, `r_r_bias` and `r_s_bias` are decayed.
WEIGHT_DECAY_EXCLUDE = ("LayerNorm", "layer_norm", "bias")


WEIGHT_DECAY_INCLUDE = ("r_s_bias", "r_r_bias", "r_w_bias")


# A transformer block: `.../transformer/layer_{l}/...`. The leading component keeps `ff/layer_1/kernel` (the
# first feed-forward projection) from being read as transformer layer 1.
_LAYER_RE = re.compile(r"(?:^|/)transformer/layer_(\d+)/")


def variable_path(variable):
  """The full name the original would see: a Keras variable's `.path`, else a tf.Variable's name without `:0`."""
  path = getattr(variable, "path", None)
  if path is None:
    path = re.sub(r":\d+$", "", variable.name)
  return path


@keras.saving.register_keras_serializable(package="xlnet_tf")
class WarmupDecaySchedule(keras.optimizers.schedules.LearningRateSchedule):
  """The original learning rate as a function of the step (see `lr_schedule`)."""

  def __init__(self, learning_rate, train_steps, warmup_steps=0, decay_method="poly", min_lr_ratio=0.0):
    if decay_method not in DECAY_METHODS:
      raise ValueError(f"decay_method must be one of {DECAY_METHODS} (--decay_method). "
                       f"Received: {decay_method!r}.")
    if learning_rate < 0:
      raise ValueError(f"learning_rate must be >= 0 (--learning_rate). Received: {learning_rate}.")
    if not 0 <= warmup_steps < train_steps:
      raise ValueError(f"Need 0 <= warmup_steps < train_steps so that warm-up ends before training does "
                       f"(--warmup_steps, --train_steps). Received: warmup_steps={warmup_steps}, "
                       f"train_steps={train_steps}.")
    if not 0.0 <= min_lr_ratio <= 1.0:
      raise ValueError(f"min_lr_ratio must be in [0, 1]: the final lr is learning_rate * min_lr_ratio "
                       f"(--min_lr_ratio). Received: {min_lr_ratio}.")
    self.learning_rate = float(learning_rate)
    self.train_steps = int(train_steps)
    self.warmup_steps = int(warmup_steps)
    self.decay_method = decay_method
    self.min_lr_ratio = float(min_lr_ratio)

  def __call__(self, step):
    """Returns float32 [] lr for int `step` (the step counter before this step's increment)."""
    with tf.name_scope("xlnet_lr"):
      step = tf.cast(step, tf.int64)
      lr = tf.constant(self.learning_rate, tf.float32)
      # TF1 polynomial_decay / cosine_decay, counting from the end of warm-up, clamped at decay_steps.
      decay_steps = tf.constant(self.train_steps - self.warmup_steps, tf.float32)
      decay_step = tf.minimum(tf.cast(step - self.warmup_steps, tf.float32), decay_steps)
      frac = decay_step / decay_steps
      if self.decay_method == "poly":
        end_lr = tf.constant(self.learning_rate * self.min_lr_ratio, tf.float32)
        decay_lr = (lr - end_lr) * tf.pow(1.0 - frac, 1.0) + end_lr
      else:
        cosine = 0.5 * (1.0 + tf.cos(tf.constant(math.pi, tf.float32) * frac))
        decay_lr = lr * ((1.0 - self.min_lr_ratio) * cosine + self.min_lr_ratio)
      if self.warmup_steps > 0:
        warmup_lr = tf.cast(step, tf.float32) / tf.constant(self.warmup_steps, tf.float32) * lr
      else:
        warmup_lr = tf.constant(0.0, tf.float32)
      return tf.where(step < self.warmup_steps, warmup_lr, decay_lr)

  def get_config(self):
    return {"learning_rate": self.learning_rate, "train_steps": self.train_steps,
            "warmup_steps": self.warmup_steps, "decay_method": self.decay_method,
            "min_lr_ratio": self.min_lr_ratio}


def lr_schedule(learning_rate, train_steps, warmup_steps=0, decay_method="poly", min_lr_ratio=0.0):
  """The original schedule: linear warm-up from 0, then `poly` (linear) or `cos` decay to lr * min_lr_ratio.

  lr(step) = learning_rate * step / warmup_steps                               if step < warmup_steps
           = poly: (lr - lr*min_lr_ratio) * (1 - s / D) + lr*min_lr_ratio      otherwise,
             cos:  lr * ((1 - min_lr_ratio) * 0.5 * (1 + cos(pi * s / D)) + min_lr_ratio)
  with s = min(step - warmup_steps, D) and D = train_steps - warmup_steps.

  Args:
    learning_rate: peak learning rate (--learning_rate).
    train_steps: total number of steps (--train_steps); the decay ends there.
    warmup_steps: steps of linear warm-up (--warmup_steps); 0 = none.
    decay_method: "poly" or "cos" (--decay_method).
    min_lr_ratio: final lr / peak lr (--min_lr_ratio).

  Returns:
    A `WarmupDecaySchedule` (a serializable keras LearningRateSchedule).
  """
  return WarmupDecaySchedule(learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio)


# Set by `apply_gradients` (per replica thread) while it hands over gradients it has already summed.
_CALLER_SUMMED = threading.local()


_UNSUPPORTED_KWARGS = ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm", "gradient_accumulation_steps")


class _SummedGradientsMixin:
  """Lets `apply_gradients` below hand the optimizer gradients already summed across replicas.

  Keras 3 (TF backend) sums gradients across replicas inside `optimizer.apply_gradients` when it is called in a
  replica context (`TFOptimizer._all_reduce_sum_gradients`), i.e. AFTER any clipping done by the caller. XLNet
  clips the global norm of the SUMMED gradient, so `apply_gradients` sums first and switches Keras's sum off for
  that one call. A direct `optimizer.apply_gradients(...)` still sums, as plain Keras does.
  """

  def __init__(self, *args, **kwargs):
    if not hasattr(keras.optimizers.Optimizer, "_all_reduce_sum_gradients"):
      raise RuntimeError(f"keras {keras.__version__} has no TFOptimizer._all_reduce_sum_gradients, which "
                         "xlnet_tf.training.optimization overrides to sum gradients once. Use keras 3.15 with the "
                         "tensorflow backend, or update xlnet_tf/optimization.py.")
    for key in _UNSUPPORTED_KWARGS:
      if kwargs.get(key):
        raise ValueError(f"{type(self).__name__} does not take Keras's {key}={kwargs[key]!r}: weight decay, "
                         "clipping and layer-wise decay are done as the original by create_optimizer and "
                         "apply_gradients. Remove the argument.")
    super().__init__(*args, **kwargs)

  def _all_reduce_sum_gradients(self, grads_and_vars):
    if getattr(_CALLER_SUMMED, "active", False):
      return list(grads_and_vars)
    return super()._all_reduce_sum_gradients(grads_and_vars)


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetAdam(_SummedGradientsMixin, keras.optimizers.Adam):
  """Keras Adam whose update is TF1 `AdamOptimizer`'s own kernel (`ResourceApplyAdam`).

  lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t);  m += (g - m) * (1 - beta_1);  v += (g^2 - v) * (1 - beta_2);
  var -= lr_t * m / (sqrt(v) + epsilon), with t = iterations + 1, in one pass over each variable (Keras's own
  update takes a dozen element-wise ops). Given the same gradient, lr and beta powers, var, m and v are bit-identical
  to TF1's; the beta powers are Keras's pow(beta, t), where TF1 keeps a running float32 product (the two agree to
  float32 rounding). Keras's own formula differs from TF1's in the last bit of m and v (its 1 - beta is rounded
  from float64; TF1 subtracts in float32).
  """

  skipped_steps = None  # None, or () -> int64 []: steps that updated nothing (float16 overflow, `loss_scale`)

  def beta_powers(self, dtype=tf.float32):
    """TF1's `beta1_power` and `beta2_power` as they stand now: beta^(t+1) after t applied steps, the powers the
    next update feeds `ResourceApplyAdam` (TF1 keeps them as variables; here they follow from `iterations`, less
    the `skipped_steps` when that hook is set).

    Returns:
      (beta1_power, beta2_power): `dtype` [] tensors.
    """
    applied = self.iterations if self.skipped_steps is None else self.iterations - self.skipped_steps()
    step = tf.cast(applied + 1, dtype)
    return tf.pow(tf.cast(self.beta_1, dtype), step), tf.pow(tf.cast(self.beta_2, dtype), step)

  def update_step(self, gradient, variable, learning_rate):
    if isinstance(gradient, tf.IndexedSlices):  # apply_gradients densifies; a direct Keras call may not
      return super().update_step(gradient, variable, learning_rate)
    dtype = variable.dtype
    index = self._get_variable_index(variable)
    handle = lambda v: (v.value if isinstance(v, keras.Variable) else v).handle
    beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
    beta1_power, beta2_power = self.beta_powers(dtype)
    return tf.raw_ops.ResourceApplyAdam(
        var=handle(variable), m=handle(self._momentums[index]), v=handle(self._velocities[index]),
        beta1_power=beta1_power, beta2_power=beta2_power, lr=tf.cast(learning_rate, dtype),
        beta1=beta_1, beta2=beta_2, epsilon=tf.cast(self.epsilon, dtype), grad=tf.cast(gradient, dtype))


def uses_weight_decay(path, exclude=WEIGHT_DECAY_EXCLUDE, include=WEIGHT_DECAY_INCLUDE):
  """Whether the original AdamWeightDecayOptimizer decays the variable named `path` (full path, no `:0`)."""
  if any(re.search(pattern, path) for pattern in include):
    return True
  return not any(re.search(pattern, path) for pattern in exclude)


@keras.saving.register_keras_serializable(package="xlnet_tf")
class AdamWeightDecay(_SummedGradientsMixin, keras.optimizers.Optimizer):
  """The original `AdamWeightDecayOptimizer`: Adam WITHOUT bias correction plus decoupled weight decay.

  m = beta_1 * m + (1 - beta_1) * g;  v = beta_2 * v + (1 - beta_2) * g^2;
  update = m / (sqrt(v) + epsilon) [+ weight_decay_rate * var if `uses_weight_decay(var.path)`];
  var -= lr * update.
  Slots are named `adam_m` / `adam_v` as in the original. `iterations` advances by 1 per step (the original
  incremented `global_step` by hand for this optimizer).
  """

  def __init__(self, learning_rate, weight_decay_rate, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
               exclude_from_weight_decay=WEIGHT_DECAY_EXCLUDE, include_in_weight_decay=WEIGHT_DECAY_INCLUDE,
               name="AdamWeightDecay", **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    if weight_decay_rate < 0:
      raise ValueError(f"weight_decay must be >= 0 (--weight_decay). Received: {weight_decay_rate}.")
    self.weight_decay_rate = float(weight_decay_rate)
    self.beta_1 = float(beta_1)
    self.beta_2 = float(beta_2)
    self.epsilon = float(epsilon)
    # Not `exclude_from_weight_decay`: that is a method of the Keras base optimizer.
    self.decay_exclude_patterns = tuple(exclude_from_weight_decay)
    self.decay_include_patterns = tuple(include_in_weight_decay)

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._adam_m, self._adam_v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
    self._decayed = tuple(bool(self.weight_decay_rate) and
                          uses_weight_decay(variable_path(v), self.decay_exclude_patterns,
                                            self.decay_include_patterns) for v in var_list)

  def update_step(self, gradient, variable, learning_rate):
    index = self._get_variable_index(variable)
    lr = tf.cast(learning_rate, variable.dtype)
    grad = tf.cast(gradient, variable.dtype)
    m = self._adam_m[index]
    v = self._adam_v[index]
    next_m = self.beta_1 * tf.convert_to_tensor(m) + (1.0 - self.beta_1) * grad
    next_v = self.beta_2 * tf.convert_to_tensor(v) + (1.0 - self.beta_2) * tf.square(grad)
    update = next_m / (tf.sqrt(next_v) + self.epsilon)
    if self._decayed[index]:
      update += self.weight_decay_rate * tf.convert_to_tensor(variable)
    next_param = tf.convert_to_tensor(variable) - lr * update
    self.assign(variable, next_param)
    self.assign(m, next_m)
    self.assign(v, next_v)

  def get_config(self):
    config = super().get_config()
    config.update({"weight_decay_rate": self.weight_decay_rate, "beta_1": self.beta_1, "beta_2": self.beta_2,
                   "epsilon": self.epsilon, "exclude_from_weight_decay": list(self.decay_exclude_patterns),
                   "include_in_weight_decay": list(self.decay_include_patterns)})
    return config


def create_optimizer(learning_rate, train_steps, warmup_steps=0, decay_method="poly", min_lr_ratio=0.0,
                     weight_decay=0.0, adam_epsilon=1e-8):
  """The original optimizer with the original schedule. Under a strategy, call it inside `strategy.scope()`
  and `optimizer.build(model.trainable_variables)` there before the first `strategy.run`.

  Args:
    learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio: as `lr_schedule`.
    weight_decay: 0 = TF1 Adam (the default of every original script); > 0 = AdamWeightDecay (--weight_decay).
    adam_epsilon: epsilon of either optimizer (--adam_epsilon).

  Returns:
    An `XLNetAdam` or `AdamWeightDecay`, to be stepped with `apply_gradients`.
  """
  schedule = lr_schedule(learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio)
  if weight_decay < 0:
    raise ValueError(f"weight_decay must be >= 0 (--weight_decay). Received: {weight_decay}.")
  if weight_decay == 0:
    return XLNetAdam(learning_rate=schedule, beta_1=0.9, beta_2=0.999, epsilon=adam_epsilon)
  return AdamWeightDecay(schedule, weight_decay_rate=weight_decay, beta_1=0.9, beta_2=0.999, epsilon=adam_epsilon)


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


CLIP_MODES = ("indexed_slices", "dense", "per_core")


def clip_and_scale_gradients(grads, variables, clip, lr_layer_decay_rate=1.0, n_layer=None, use_norm=None):
  """Clips by global norm, then multiplies each transformer layer's clipped gradient by its layer-decay factor.

  Args:
    grads: list of float Tensor (or tf.IndexedSlices), one per variable and shaped like it: the gradient of the
      loss (already summed across replicas). None = the variable gets no gradient; it is passed through.
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


def _sum_over_replicas(context, values):
  """All-reduces the non-None entries of `values` (SUM) when there is more than one replica."""
  if context.num_replicas_in_sync == 1:
    return list(values)
  values = list(values)
  present = [i for i, v in enumerate(values) if v is not None]
  summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [values[i] for i in present])
  for i, value in zip(present, summed):
    values[i] = value
  return values


def apply_gradients(optimizer, grads, variables, clip, lr_layer_decay_rate=1.0, n_layer=None, clip_mode="dense",
                    embedding_rows=None):
  """One optimizer step of the original, the same on one device and inside `strategy.run`.

  The gradients are summed across replicas exactly once (here, not again inside Keras), clipped, layer-scaled,
  then applied. For the sum to be the gradient of the global-batch loss, each replica's loss must be its share of
  it (the original: each tower's/core's mean loss divided by the number of towers/cores). How the global norm is
  taken and where the clip applies follows the original's path (`clip_mode`):
    "indexed_slices": the original on GPU/CPU (`train_gpu.py`, GPU `run_classifier.py`): towers are averaged,
      then clipped by a global norm in which the word-embedding gradient counts as its un-merged IndexedSlices
      rows (`embedding_rows_square_norm`; each replica's rows separately). Needs `embedding_rows`.
    "dense": the same, with every gradient merged to dense first (the original's `use_tpu` embedding math on the
      GPU optimizer; what most ports do).
    "per_core": the original on TPU (`CrossShardOptimizer`): each replica clips its OWN gradient by its own norm,
      then the clipped gradients are summed; the reported gnorm is the mean of the replicas' norms (the TPU host
      call's `reduce_mean`). On one replica it equals "dense".

  Args:
    optimizer: from `create_optimizer`; under a strategy, created and built in `strategy.scope()`.
    grads: list of float Tensor / tf.IndexedSlices, one per variable and shaped like it: this replica's gradient.
      None = no gradient for that variable. IndexedSlices are made dense (the original's Adam updates every row,
      which equals the dense update).
    variables: the trainable variables, in the order of `grads`.
    clip, lr_layer_decay_rate, n_layer: as `clip_and_scale_gradients`.
    clip_mode: one of CLIP_MODES (--clip_mode).
    embedding_rows: with "indexed_slices": (index of the word-embedding table in `variables`, this replica's
      gradient of the gathered rows [..., D], the gathered ids [...]), as `embedding_rows_square_norm` takes them.

  Returns:
    (gnorm: float32 [] pre-clip global norm, learning_rate: float32 [] lr of this step).
  """
  if not isinstance(optimizer, _SummedGradientsMixin):
    raise TypeError(f"apply_gradients needs an optimizer from xlnet_tf.training.optimization.create_optimizer. "
                    f"Received: {type(optimizer).__name__}.")
  if clip_mode not in CLIP_MODES:
    raise ValueError(f"--clip_mode must be one of {CLIP_MODES}. Received: {clip_mode!r}.")
  if clip_mode == "indexed_slices" and embedding_rows is None:
    raise ValueError("clip_mode='indexed_slices' needs embedding_rows (the gradient of the gathered embedding rows).")
  context = tf.distribute.get_replica_context()
  if context is None:
    raise RuntimeError("apply_gradients must run in a replica context: call it inside strategy.run(...).")
  if context.num_replicas_in_sync > 1 and not optimizer.built:
    raise RuntimeError("Under a distribution strategy the optimizer must be built before the first step: call "
                       "optimizer.build(model.trainable_variables) inside strategy.scope().")
  grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
  learning_rate = optimizer.learning_rate  # lr(iterations) before this step's increment: the lr the update uses.
  if clip_mode == "per_core":
    clipped, gnorm = clip_and_scale_gradients(grads, variables, clip, lr_layer_decay_rate, n_layer)
    clipped = _sum_over_replicas(context, clipped)
    gnorm = _sum_over_replicas(context, [gnorm])[0] / context.num_replicas_in_sync
  else:
    use_norm = None
    if clip_mode == "indexed_slices":
      index, rows_grad, ids = embedding_rows
      table_square = embedding_rows_square_norm(grads[index], rows_grad, ids)
      *grads, table_square = _sum_over_replicas(context, grads + [table_square])
      squares = [table_square] + [tf.reduce_sum(tf.square(tf.cast(g, tf.float32)))
                                  for i, g in enumerate(grads) if g is not None and i != index]
      use_norm = tf.sqrt(tf.add_n(squares))
    else:
      grads = _sum_over_replicas(context, grads)
    clipped, gnorm = clip_and_scale_gradients(grads, variables, clip, lr_layer_decay_rate, n_layer, use_norm)
  _CALLER_SUMMED.active = True
  try:  # variables without a gradient (e.g. lm_loss/bias when fine-tuning) are left out, as TF1's Adam did
    optimizer.apply_gradients([(g, v) for g, v in zip(clipped, variables) if g is not None])
  finally:
    _CALLER_SUMMED.active = False
  return gnorm, learning_rate


def original_slot_map(optimizer, variables_by_name):
  """{original TF1 name: optimizer slot variable} for `variables_by_name` ({TF1 name: variable}, e.g.
  `checkpoint.original_variable_map(model)`): `{name}/Adam` (m) and `{name}/Adam_1` (v) as TF1 `AdamOptimizer`
  names them, or `{name}/adam_m` and `{name}/adam_v` for the original AdamWeightDecayOptimizer. The optimizer
  must be built."""
  if isinstance(optimizer, AdamWeightDecay):
    suffixes, slots = ("adam_m", "adam_v"), (optimizer._adam_m, optimizer._adam_v)  # pylint: disable=protected-access
  else:
    suffixes, slots = ("Adam", "Adam_1"), (optimizer._momentums, optimizer._velocities)  # pylint: disable=protected-access
  table = {}
  for name, variable in variables_by_name.items():
    index = optimizer._get_variable_index(variable)  # pylint: disable=protected-access
    for suffix, slot in zip(suffixes, slots):
      table[f"{name}/{suffix}"] = slot[index]
  return table


def original_optimizer_state(optimizer, variables_by_name):
  """{original TF1 name: value} of the optimizer's whole state as TF1 names it: the slots (`original_slot_map`),
  `global_step` (int64, the optimizer's `iterations`) and, for `XLNetAdam`, TF1 AdamOptimizer's `beta1_power` and
  `beta2_power` (`XLNetAdam.beta_powers`; the original AdamWeightDecayOptimizer keeps none). Values are tensors or
  variables; the optimizer must be built."""
  state = dict(original_slot_map(optimizer, variables_by_name))
  state["global_step"] = tf.cast(optimizer.iterations, tf.int64)
  if isinstance(optimizer, XLNetAdam):
    state["beta1_power"], state["beta2_power"] = optimizer.beta_powers()
  return state
