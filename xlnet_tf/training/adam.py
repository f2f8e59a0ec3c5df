"""The original's two optimizers as Keras optimizers: TF1 `AdamOptimizer` (`XLNetAdam`) and the original
`AdamWeightDecayOptimizer` (`AdamWeightDecay`), both taking from `optimization.apply_gradients` gradients it has
already summed across replicas (`_SummedGradientsMixin`)."""

import re
import threading
import weakref

import keras
import tensorflow as tf



# re.search patterns tried against the FULL variable path, as the original tries them against TF1 names.
# An include pattern wins over the exclusions, so `r_w_bias`, `r_r_bias` and `r_s_bias` are decayed.
WEIGHT_DECAY_EXCLUDE = ("LayerNorm", "layer_norm", "bias")


WEIGHT_DECAY_INCLUDE = ("r_s_bias", "r_r_bias", "r_w_bias")


def variable_path(variable):
  """The full name the original would see: a Keras variable's `.path`, else a tf.Variable's name without `:0`."""
  path = getattr(variable, "path", None)
  if path is None:
    path = re.sub(r":\d+$", "", variable.name)
  return path


# Set by `apply_gradients` (per replica thread) while it hands over gradients it has already summed.
_CALLER_SUMMED = threading.local()


_UNSUPPORTED_KWARGS = ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm", "gradient_accumulation_steps")


class _SummedGradientsMixin:
  """Lets `optimization.apply_gradients` hand the optimizer gradients already summed across replicas.

  Keras 3 (TF backend) sums gradients across replicas inside `optimizer.apply_gradients` when it is called in a
  replica context (`TFOptimizer._all_reduce_sum_gradients`), i.e. AFTER any clipping done by the caller. XLNet
  clips the global norm of the SUMMED gradient, so `apply_gradients` sums first and switches Keras's sum off for
  that one call. A direct `optimizer.apply_gradients(...)` still sums, as plain Keras does.
  """

  def __init__(self, *args, **kwargs):
    if not hasattr(keras.optimizers.Optimizer, "_all_reduce_sum_gradients"):
      raise RuntimeError(f"keras {keras.__version__} has no TFOptimizer._all_reduce_sum_gradients, which "
                         "xlnet_tf.training.adam overrides to sum gradients once. Use keras 3.15 with the "
                         "tensorflow backend, or update xlnet_tf/training/adam.py.")
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

  def apply(self, grads, trainable_variables=None):
    self.__dict__["_step_powers"] = (None, {})  # each update computes its beta powers anew (`_update_powers`)
    return super().apply(grads, trainable_variables)

  def _update_powers(self, dtype):
    """`beta_powers(dtype)` for every variable of one update (one `apply`, in which `iterations` moves only after
    every variable's update): computed once per update, not once per variable (about 10 scalar ops each: on a GPU
    as many kernel launches per step); eagerly, per call."""
    if tf.executing_eagerly():
      return self.beta_powers(dtype)
    graph = tf.compat.v1.get_default_graph()
    owner, powers = self.__dict__.get("_step_powers", (None, {}))
    if owner is None or owner() is not graph:  # first of this update, or an update_step outside `apply`
      powers = {}
      self.__dict__["_step_powers"] = (weakref.ref(graph), powers)
    if dtype not in powers:
      powers[dtype] = self.beta_powers(dtype)
    return powers[dtype]

  def update_step(self, gradient, variable, learning_rate):
    if isinstance(gradient, tf.IndexedSlices):  # apply_gradients densifies; a direct Keras call may not
      return super().update_step(gradient, variable, learning_rate)
    dtype = variable.dtype
    index = self._get_variable_index(variable)
    handle = lambda v: (v.value if isinstance(v, keras.Variable) else v).handle
    beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
    beta1_power, beta2_power = self._update_powers(dtype)
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
