"""The optimizer's state under the names TF1 gives it (`{var}/Adam`, `{var}/Adam_1`, `beta1_power`, ...), to read
and write the original's checkpoints."""

import tensorflow as tf

from xlnet_tf.training.adam import AdamWeightDecay, XLNetAdam


def original_slot_map(optimizer, variables_by_name):
  """{original TF1 name: optimizer slot variable} for `variables_by_name` ({TF1 name: variable}, e.g.
  `checkpoint.original_variable_map(model)`): `{name}/Adam` (m) and `{name}/Adam_1` (v) as TF1 `AdamOptimizer`
  names them, or `{name}/adam_m` and `{name}/adam_v` for the original AdamWeightDecayOptimizer. The optimizer
  must be built."""
  if isinstance(optimizer, AdamWeightDecay):
    suffixes, slots = ("adam_m", "adam_v"), (optimizer._adam_m, optimizer._adam_v)  # pylint: disable=protected-access
  else:
    # pylint: disable-next=protected-access
    suffixes, slots = ("Adam", "Adam_1"), (optimizer._momentums, optimizer._velocities)
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
