"""What a training run reports after every host loop: the progress line and the TensorBoard scalars."""

import math
import time

import tensorflow as tf


class Progress:
  """The per-loop report of a run: one line (step, gnorm, lr, loss, for a language model perplexity and bits per
  character, throughput, ETA) and `train/*` scalars in `model_dir`'s TensorBoard log (on the chief only).

  Args:
    model_dir: str, where the TensorBoard events go.
    chief: bool, whether this worker writes them.
    tokens_per_step: int, tokens of one global batch (for tokens/s).
    language_model: bool, add perplexity and bits per character to the line.
  """

  def __init__(self, model_dir, chief, tokens_per_step, language_model):
    self.tokens_per_step = tokens_per_step
    self.language_model = language_model
    self._writer = tf.summary.create_file_writer(model_dir) if chief else tf.summary.create_noop_writer()
    self._start = self._train_steps = self._t_start = None

  def begin(self, start, train_steps):
    """Starts the clock of a run from step `start` to `train_steps` (for the ETA)."""
    self._start, self._train_steps, self._t_start = start, train_steps, time.time()

  def report(self, step, loss, gnorm, lr, steps, seconds, log_fn, skipped=None, loss_scale=None):
    """Reports a loop that ended at `step` after `steps` steps in `seconds`: the line through `log_fn`, and the
    scalars. With float16 loss scaling, `skipped` (the run's overflowed steps) ends the line and `loss_scale`
    is a scalar too."""
    steps_per_sec = steps / seconds
    tokens_per_sec = steps_per_sec * self.tokens_per_step
    eta = (self._train_steps - step) * (time.time() - self._t_start) / max(step - self._start, 1)
    lm = (f" | pplx {math.exp(min(loss, 50)):>7.2f}, bpc {loss / math.log(2):>7.4f}"
          if self.language_model else "")
    log_fn(f"[{step}] | gnorm {gnorm:.2f} lr {lr:8.6f} | loss {loss:.4f}{lm} | {steps_per_sec:.2f} steps/s, "
           f"{tokens_per_sec:.0f} tokens/s, ETA {format_seconds(eta)}"
           + ("" if skipped is None else f" | skipped {skipped}"))
    with self._writer.as_default(step=step):
      tf.summary.scalar("train/total_loss", loss)
      tf.summary.scalar("train/lr", lr)
      tf.summary.scalar("train/gnorm", gnorm)
      tf.summary.scalar("train/steps_per_sec", steps_per_sec)
      tf.summary.scalar("train/tokens_per_sec", tokens_per_sec)
      if loss_scale is not None:
        tf.summary.scalar("train/loss_scale", loss_scale)
        tf.summary.scalar("train/skipped_steps", skipped)
    self._writer.flush()


def format_seconds(seconds):
  """`1h02m03s` for 3723 seconds."""
  seconds = int(seconds)
  return f"{seconds // 3600}h{seconds // 60 % 60:02d}m{seconds % 60:02d}s"
