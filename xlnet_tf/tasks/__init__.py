"""Fine-tuning tasks: one sub-package per task (data, post-processing, evaluation)."""
