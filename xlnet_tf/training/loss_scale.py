"""Dynamic loss scaling for float16 training (`--use_fp16`): the loop's state and its one skip-or-apply step.

Small gradients underflow in float16, so the objective is multiplied by a scale S before the backward pass and the
float32 gradients divided by S after it. A step whose gradients (on any replica) hold an inf or NaN overflowed:
it is skipped and S halves; after `growth_interval` finite steps in a row S doubles. Keras's defaults (the
`LossScaleOptimizer` of Keras 2 and 3): S starts at 2**15, doubles after 2000 good steps; here S never falls below
1 (`min_scale`, as TF1's `tf.train.experimental.DynamicLossScale`).

A skipped step changes no weight, no optimizer slot and not Adam's bias correction: `XLNetAdam.beta_powers` count
the applied steps only (its `skipped_steps` hook reads `skipped`), as TF1's Adam, whose beta powers are variables
that only an applied step updates. The optimizer's `iterations` still advances by one, as in Keras 2's
LossScaleOptimizer and TF1's mixed-precision optimizer: it is the run's step, the position of the data (exact
resume) and the learning-rate schedule's step, so a skipped step uses up its batch and its learning rate.

The mems never hold a non-finite value: a skipped step still moves them on (its batch is used up, and the next
batch continues this one's text), and any entry its float16 forward pass made inf or NaN becomes 0, the value mems
start from (`finite_mems`).

The scale, the run of good steps and the count of skipped steps are variables that `run_checkpoint.RunCheckpoint`
saves with the run, so a resumed run continues with the same scale (bit-identical to an uninterrupted one).
"""

import tensorflow as tf

from xlnet_tf.training.adam import XLNetAdam


INITIAL_SCALE = 2.0 ** 15
GROWTH_INTERVAL = 2000
MIN_SCALE = 1.0


class DynamicLossScale(tf.Module):
  """The loss scale of a float16 run, created inside `strategy.scope()` (its variables are then mirrored).

  Variables: `scale` (float32, a power of two), `good_steps` (int64, finite steps since the scale last changed),
  `skipped` (int64, overflowed steps of the whole run: the log line's `skipped N`) and `floor_overflows` (int64,
  steps that overflowed with the scale already at `min_scale`: the unscaled gradients themselves are not finite,
  which halving cannot help; the loop stops on it).
  """

  def __init__(self, initial_scale=INITIAL_SCALE, growth_interval=GROWTH_INTERVAL, min_scale=MIN_SCALE):
    super().__init__(name="loss_scale")
    self.growth_interval = growth_interval
    self.min_scale = min_scale

    def variable(value, dtype, name):
      return tf.Variable(value, dtype=dtype, trainable=False, name=name,
                         synchronization=tf.VariableSynchronization.ON_WRITE,
                         aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    self.scale = variable(initial_scale, tf.float32, "scale")
    self.good_steps = variable(0, tf.int64, "good_steps")
    self.skipped = variable(0, tf.int64, "skipped")
    self.floor_overflows = variable(0, tf.int64, "floor_overflows")

  def report(self):
    """The progress report's figures: the run's skipped steps and the scale."""
    return dict(skipped=int(self.skipped.numpy()), loss_scale=float(self.scale.numpy()))

  def scale_objective(self, objective):
    """objective (float32 []) times the scale: what the tape differentiates."""
    return objective * tf.cast(self.scale, objective.dtype)

  def unscale(self, grads, rows, times=None):
    """The gradients of a scaled objective -> those of the objective, dense float32 (exact: the scale is a power
    of two). grads: list of Tensor / IndexedSlices / None; rows: None or (gradient of the gathered embedding rows,
    their ids); times: None, or a power of two the objective was divided by before the scale, multiplied back in
    the same pass. Returns (grads, rows)."""
    inverse = 1.0 / self.scale if times is None else times / self.scale
    grads = [None if g is None else tf.cast(tf.convert_to_tensor(g), tf.float32) * inverse for g in grads]
    if rows is not None:
      rows = (tf.cast(rows[0], tf.float32) * inverse, rows[1])
    return grads, rows

  @staticmethod
  def finite(grads, rows):
    """bool []: every gradient (and embedding-row gradient) of this replica is finite."""
    checked = [g for g in grads if g is not None] + ([] if rows is None else [rows[0]])
    return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(g)) for g in checked]))

  @staticmethod
  def finite_mems(new_mems):
    """new_mems (list of float [M, B, H], or None) with every non-finite entry set to 0."""
    if new_mems is None:
      return None
    return [tf.where(tf.math.is_finite(m), m, tf.zeros_like(m)) for m in new_mems]

  def update(self, finite):
    """After a step (cross-replica context): halve on overflow (not below min_scale), double after
    growth_interval finite steps in a row; count what was skipped. finite: bool [], over all replicas."""
    def overflowed():
      at_floor = self.scale <= self.min_scale
      return tf.group(self.scale.assign(tf.maximum(self.scale / 2.0, self.min_scale)),
                      self.good_steps.assign(0), self.skipped.assign_add(1),
                      self.floor_overflows.assign_add(tf.cast(at_floor, tf.int64)))

    def applied():
      grow = self.good_steps + 1 >= self.growth_interval
      return tf.group(self.scale.assign(tf.where(grow, self.scale * 2.0, self.scale)),
                      self.good_steps.assign(tf.where(grow, tf.constant(0, tf.int64), self.good_steps + 1)))

    return tf.cond(finite, applied, overflowed)

  def step(self, strategy, compute_fn, apply_fn, iterations, learning_rate, features):
    """One training step with loss scaling, from the loop's cross-replica context.

    `compute_fn(features)` runs on every replica (forward, scaled backward, `unscale`, the mems) and returns
    (loss, grads, rows, finite) with any cross-replica work (e.g. the loss weight) already done; then, only if
    every replica's gradients are finite, `apply_fn(grads, rows)` runs on every replica (it sums over replicas,
    clips and applies: a synchronisation point, which TensorFlow allows inside a `tf.cond` only here, in the
    cross-replica context) and returns (gnorm, lr). A skipped step only advances `iterations`.

    Returns:
      (loss: float32 [], the replicas' summed loss of this step; gnorm: float32 [], NaN when skipped; lr: float32
      []; applied: bool []).
    """
    loss, grads, rows, finite = strategy.run(compute_fn, args=(features,))
    overflowed = strategy.run(lambda finite: tf.cast(tf.logical_not(finite), tf.float32), args=(finite,))
    finite = strategy.reduce(tf.distribute.ReduceOp.SUM, overflowed, axis=None) == 0  # on every replica

    def apply():
      gnorm, lr = strategy.run(apply_fn, args=(grads, rows))
      return (strategy.reduce(tf.distribute.ReduceOp.MEAN, gnorm, axis=None),
              strategy.reduce(tf.distribute.ReduceOp.MEAN, lr, axis=None))

    def skip():
      lr = tf.cast(learning_rate(), tf.float32)  # the step's lr, before iterations moves on
      with tf.control_dependencies([lr]):
        advance = iterations.assign_add(1)
      with tf.control_dependencies([advance]):
        return tf.constant(float("nan")), tf.identity(lr)

    gnorm, lr = tf.cond(finite, apply, skip)
    with tf.control_dependencies([gnorm, lr]):
      update = self.update(finite)
    with tf.control_dependencies([update]):
      loss = strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
    return loss, gnorm, lr, finite


def loss_scale_for(model, optimizer):
  """A `DynamicLossScale` for a model that computes in float16 (its dtype policy, from `RunConfig.use_fp16`: one
  source for the precision), else None; call it inside `strategy.scope()`. An `XLNetAdam`'s bias correction then
  counts the applied steps only (its `skipped_steps` hook)."""
  if model.compute_dtype != "float16":
    return None
  scale = DynamicLossScale()
  if isinstance(optimizer, XLNetAdam):
    optimizer.skipped_steps = lambda: scale.skipped
  return scale
