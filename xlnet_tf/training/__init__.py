"""Training: the one `tf.distribute` loop (`trainer`) and its config (`config.TrainConfig`), the start-up every
CLI shares (`runtime`), the run files beside its checkpoints (`model_dir`), the optimizer."""

from xlnet_tf.training.model_dir import check_run_files, read_run_flags, write_run_files
from xlnet_tf.training.runtime import (STRATEGIES, CloudTPU, cpu_has_native_bfloat16, fine_tuning_batch_sizes,
                                       input_pipelines, is_chief, keep_freed_memory, keep_freed_memory_after_input,
                                       make_strategy, prefer_wide_xla_vectors, set_float32_matmul_precision, start,
                                       warn_if_emulated_bfloat16)
from xlnet_tf.training.config import LOSS_WEIGHTINGS, MEMS_RESET, TrainConfig
from xlnet_tf.training.mems import default_mems_reset
from xlnet_tf.training.preemption import Interrupted
from xlnet_tf.training.trainer import Trainer

__all__ = ["STRATEGIES", "CloudTPU", "LOSS_WEIGHTINGS", "check_run_files", "MEMS_RESET", "Interrupted", "TrainConfig",
           "Trainer", "default_mems_reset", "fine_tuning_batch_sizes", "cpu_has_native_bfloat16", "read_run_flags",
           "is_chief", "keep_freed_memory", "keep_freed_memory_after_input", "start", "make_strategy",
           "prefer_wide_xla_vectors", "set_float32_matmul_precision", "warn_if_emulated_bfloat16", "write_run_files"]
