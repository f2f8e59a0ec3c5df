"""The memory (`mems`) a training run carries from step to step, per replica, and its checkpointed copy.

Each replica keeps its own rows: `n_layer` non-trainable `ON_READ` variables `[mem_len, bsz_per_replica, d_model]`,
read before the forward pass and assigned the model's stop-gradient `new_mems` after it. For checkpoints they are
gathered into one `[n_layer, mem_len, global_bsz, d_model]` variable (replica c's rows at `[c*b, (c+1)*b)`), and
scattered back on restore.
"""

import numpy as np
import tensorflow as tf


def default_mems_reset(strategy):
  """The original's mems between host loops on this strategy (--mems_reset=auto): "every_loop" on TPU (`train.py`:
  the TPUEstimator's training loop starts every `iterations_per_loop` steps from the zero cache of its
  `cache_fn`), else "never" (`train_gpu.py` feeds each step's new mems to the next for the whole run)."""
  return "every_loop" if isinstance(strategy, tf.distribute.TPUStrategy) else "never"


class Mems:
  """The per-replica mem variables of a run; with `mem_len` 0 or None there are none and every method is a no-op.

  Create it inside `strategy.scope()`. `read`, `assign` and `reset` run in a replica context (inside
  `strategy.run`); `gather`, `scatter` and `numpy` in the cross-replica context, between steps.

  Args:
    strategy: the run's tf.distribute.Strategy.
    n_layer, d_model: the model's.
    mem_len: int or None, per-layer memory length.
    bsz_per_replica: int, rows per replica; the global batch is `bsz_per_replica * num_replicas_in_sync`.
  """

  def __init__(self, strategy, n_layer, mem_len, bsz_per_replica, d_model):
    self.strategy = strategy
    self.bsz_per_replica = bsz_per_replica
    self.variables = []
    self.global_variable = None  # what a checkpoint holds
    if mem_len:
      sync = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                  aggregation=tf.VariableAggregation.NONE)
      self.variables = [tf.Variable(tf.zeros([mem_len, bsz_per_replica, d_model]), name=f"mems_{i}", **sync)
                        for i in range(n_layer)]
      global_bsz = bsz_per_replica * strategy.num_replicas_in_sync
      self.global_variable = tf.Variable(tf.zeros([n_layer, mem_len, global_bsz, d_model]), trainable=False,
                                         name="mems")
    self._gather_fn = None

  def read(self):
    """This replica's mems: list of `n_layer` float [M, b, H], or None without memory."""
    return [v.read_value() for v in self.variables] if self.variables else None

  def assign(self, new_mems):
    """This replica's mems <- `new_mems` (the model's, one per layer; None without memory)."""
    for v, m in zip(self.variables, new_mems or []):
      v.assign(tf.cast(m, v.dtype))

  def reset(self, now=True):
    """This replica's mems <- zeros, where `now` (a bool, or bool tensor: they stay as they are where false)."""
    for v in self.variables:
      v.assign(tf.where(now, tf.zeros_like(v), v))

  def gather(self):
    """The checkpointed copy <- every replica's mems (replica c's rows at [c*b, (c+1)*b))."""
    if self.global_variable is None:
      return
    if self._gather_fn is None:
      @tf.function
      def gather():
        per_replica = self.strategy.run(lambda: tf.stack([v.read_value() for v in self.variables]))
        self.global_variable.assign(self.strategy.gather(per_replica, axis=2))
      self._gather_fn = gather
    self._gather_fn()

  def scatter(self):
    """Every replica's mems <- its rows of the checkpointed copy (after a restore)."""
    if self.global_variable is None:
      return
    b = self.bsz_per_replica

    def fn():
      c = tf.distribute.get_replica_context().replica_id_in_sync_group
      rows = self.global_variable[:, :, c * b:(c + 1) * b]
      for i, v in enumerate(self.variables):
        v.assign(rows[i])

    tf.function(lambda: self.strategy.run(fn))()

  def numpy(self):
    """The current mems as numpy [n_layer, mem_len, global_bsz, d_model], or None without memory."""
    self.gather()
    return None if self.global_variable is None else np.asarray(self.global_variable.numpy())
