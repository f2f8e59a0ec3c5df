"""`TrainConfig`: what the training loop (`trainer.Trainer`) needs besides the model and the task, as plain typed
values, validated once. The CLIs build it from their flags (`flag_configs.train_config`); the error messages name the
flag a CLI user sets.
"""

import dataclasses
import math
from typing import Optional

from xlnet_tf.config import check_field_types
from xlnet_tf.training import accumulation
from xlnet_tf.training import optimization


MEMS_RESET = ("never", "every_loop")


LOSS_WEIGHTINGS = ("replica_mean", "global_mean")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """The optimizer, its schedule, the step and the loop of a training run.

  Args:
    learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio, weight_decay, adam_epsilon: as
      `optimization.create_optimizer` (`optimizer_args`).
    global_batch_size: int, rows per step over all replicas.
    gradient_accumulation_steps: int N, micro-batches per step: each replica's batch is split into N micro-batches
      whose gradients are summed into ONE update, equal to the whole batch's (`accumulation`); 1: no splitting.
    clip, lr_layer_decay_rate: as `optimization.apply_gradients`.
    clip_mode: as `optimization.apply_gradients`; None = the original's pretraining rule for the strategy
      (`optimization.default_clip_mode`); the fine-tuning CLIs pass `default_clip_mode(strategy, fine_tuning=True)`.
    loss_weighting: "replica_mean" (the original) or "global_mean", see `trainer`'s docstring.
    mems_reset: "never" or "every_loop" (the mems' length is the model's `run_config.mem_len`).
    iterations: steps per host call (and the logging interval).
    save_steps: checkpoint every N steps (None: only at the end); max_save: checkpoints kept (0 or None: all).
    save_at_start: with save_steps, a run without a checkpoint in model_dir also saves the step it starts from,
      before its first step (the fine-tuning Estimator's `Saving checkpoints for 0`).
    jit_compile: XLA-compile the per-replica forward and backward.
    skip_bad_records: read damaged record files (`train`'s data_files) only up to their first unreadable record,
      instead of stopping at it (`records.skip_unreadable_records`).
    tokens_per_example: int, for throughput figures.
  """
  learning_rate: float
  train_steps: int
  global_batch_size: int
  warmup_steps: int = 0
  decay_method: str = "poly"
  min_lr_ratio: float = 0.0
  weight_decay: float = 0.0
  adam_epsilon: float = 1e-8
  clip: float = 1.0
  clip_mode: Optional[str] = None
  lr_layer_decay_rate: float = 1.0
  loss_weighting: str = "replica_mean"
  mems_reset: str = "never"
  iterations: int = 1000
  save_steps: Optional[int] = None
  max_save: Optional[int] = None
  save_at_start: bool = False
  jit_compile: bool = False
  skip_bad_records: bool = False
  tokens_per_example: int = 1
  gradient_accumulation_steps: int = 1

  def __post_init__(self):
    check_field_types(self)  # a notebook's "1e-3" or 2.0 failed deep in the schedule or the loop
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if field.type is float and not math.isfinite(value):  # a NaN lr trained a step of NaNs (sweep 35)
        raise ValueError(f"TrainConfig.{field.name} must be a finite number. Received: {value!r}.")
    for name in ("train_steps", "tokens_per_example"):  # 0 or less: `Nothing to do`, a throughput of nothing
      if getattr(self, name) < 1:
        raise ValueError(f"TrainConfig.{name} must be a positive integer. Received: {getattr(self, name)}.")
    if self.global_batch_size < 1:
      raise ValueError(f"TrainConfig.global_batch_size (--train_batch_size) must be a positive integer. Received: "
                       f"{self.global_batch_size}.")
    if self.mems_reset not in MEMS_RESET:
      raise ValueError(f"--mems_reset must be one of {MEMS_RESET}. Received: {self.mems_reset!r}.")
    accumulation.check_steps(self.gradient_accumulation_steps)  # the split of the per-replica batch: Trainer
    if self.iterations <= 0:
      raise ValueError(f"--iterations must be positive. Received: {self.iterations}.")
    if self.loss_weighting not in LOSS_WEIGHTINGS:
      raise ValueError(f"--loss_weighting must be one of {LOSS_WEIGHTINGS}. Received: {self.loss_weighting!r}.")
    if self.clip_mode is not None and self.clip_mode not in optimization.CLIP_MODES:
      raise ValueError(f"--clip_mode must be one of {optimization.CLIP_MODES}. Received: {self.clip_mode!r}.")
    if not self.clip > 0:
      raise ValueError(f"--clip must be > 0: it bounds the global gradient norm. Received: {self.clip}. To train "
                       "without clipping (what the original made of a negative --clip), pass one above any norm the "
                       "run reaches, e.g. --clip=1e9: the gradients then pass unchanged.")
    if not self.lr_layer_decay_rate >= 0:
      raise ValueError(f"--lr_layer_decay_rate must be >= 0 (1.0: no decay). Received: {self.lr_layer_decay_rate}.")
    if not self.adam_epsilon > 0:
      raise ValueError(f"--adam_epsilon must be > 0 (Adam divides by sqrt(v) + epsilon). Received: "
                       f"{self.adam_epsilon}.")
    if self.save_steps is not None and self.save_steps < 1:
      raise ValueError(f"--save_steps must be positive (or unset: a checkpoint at the end only). Received: "
                       f"{self.save_steps}.")
    if self.max_save is not None and self.max_save < 0:
      raise ValueError(f"--max_save must be >= 0 (0: keep every checkpoint). Received: {self.max_save}.")
    optimization.check_optimizer_args(**self.optimizer_args())

  def optimizer_args(self):
    """The arguments of `optimization.create_optimizer`."""
    return dict(learning_rate=self.learning_rate, train_steps=self.train_steps, warmup_steps=self.warmup_steps,
                decay_method=self.decay_method, min_lr_ratio=self.min_lr_ratio, weight_decay=self.weight_decay,
                adam_epsilon=self.adam_epsilon)
