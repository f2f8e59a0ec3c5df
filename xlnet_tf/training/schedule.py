"""The original learning-rate schedule (`model_utils.get_train_op`): linear warm-up from 0, then `poly` or `cos`
decay to `learning_rate * min_lr_ratio`, as a serializable Keras `LearningRateSchedule`."""

import math

import keras
import tensorflow as tf


DECAY_METHODS = ("poly", "cos")


@keras.saving.register_keras_serializable(package="xlnet_tf")
class WarmupDecaySchedule(keras.optimizers.schedules.LearningRateSchedule):
  """The original learning rate as a function of the step (see `lr_schedule`)."""

  def __init__(self, learning_rate, train_steps, warmup_steps=0, decay_method="poly", min_lr_ratio=0.0):
    if decay_method not in DECAY_METHODS:
      raise ValueError(f"decay_method must be one of {DECAY_METHODS} (--decay_method). "
                       f"Received: {decay_method!r}.")
    if not 0 <= learning_rate < math.inf:  # NaN trained a step of NaNs (sweep 35)
      raise ValueError(f"learning_rate must be a finite number >= 0 (--learning_rate). Received: {learning_rate}.")
    if warmup_steps < 0:  # at or past train_steps: every step warms up, as the original's (it never decays)
      raise ValueError(f"warmup_steps must be >= 0 (--warmup_steps). Received: {warmup_steps}.")
    if train_steps >= 2**63:
      raise ValueError(f"train_steps must be below 2**63: TensorFlow counts steps in int64 (--train_steps). "
                       f"Received: {train_steps}.")
    if not 0.0 <= min_lr_ratio < math.inf:  # above 1 the lr rises to its end, as the original's (sweep 35)
      raise ValueError(f"min_lr_ratio must be a finite number >= 0: the final lr is learning_rate * min_lr_ratio "
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
      # TF1 polynomial_decay / cosine_decay, counting from the end of warm-up, clamped at decay_steps. None (warm-up
      # to train_steps or past it; the original's 0/0, on no step it trains): the decay's end.
      decay_steps = tf.constant(max(self.train_steps - self.warmup_steps, 0), tf.float32)
      decay_step = tf.minimum(tf.cast(step - self.warmup_steps, tf.float32), decay_steps)
      frac = decay_step / decay_steps if self.train_steps > self.warmup_steps else tf.constant(1.0)
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
  """The original schedule: linear warm-up from 0, then `poly` (linear) or `cos` decay to lr * min_lr_ratio (a rise,
  as the original's, where min_lr_ratio > 1).

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
