"""What a training run reports after every host loop: the progress line and the TensorBoard scalars, with the peak
memory of the run's first device."""

import math
import time

import tensorflow as tf


GIB = 2 ** 30


def memory_device(strategy):
  """The first device of `strategy` as `tf.config.experimental.get_memory_info` names it ("CPU:0", "GPU:0",
  "TPU:0"), or None where TensorFlow keeps no allocator statistics for it (its call raises).

  On a CPU the statistics are those of oneDNN's CPU allocator (on by default in x86 Linux builds): it counts the
  buffers of 256 KiB and more (its BFC part: weights, optimizer slots, activations, gradients of any real model),
  not the smaller ones (a tiny test model's peak is 0) nor the process's other memory (the library's code, Python,
  malloc's own buffers). With `TF_ENABLE_ONEDNN_OPTS=0` the plain CPU allocator keeps no statistics (unless
  `TF_CPU_ALLOCATOR_USE_BFC=1`, which counts every buffer) and the figure is left out.
  """
  try:
    name = strategy.extended.worker_devices[0]
  except RuntimeError:  # the default strategy names no devices: its ops go to the first GPU, else the CPU
    name = "GPU:0" if tf.config.list_logical_devices("GPU") else "CPU:0"
  spec = tf.DeviceSpec.from_string(name)
  device = f"{spec.device_type}:{spec.device_index or 0}"
  return device if peak_memory_bytes(device) is not None else None


def peak_memory_bytes(device):
  """The most bytes `device` ("GPU:0") has held at once since the process started (or since
  `tf.config.experimental.reset_memory_stats`); None where its allocator keeps no statistics."""
  try:
    return tf.config.experimental.get_memory_info(device)["peak"]
  except (ValueError, RuntimeError, tf.errors.OpError):
    return None


class Progress:
  """The per-loop report of a run: one line (step, gnorm, lr, loss, for a language model perplexity and bits per
  character, throughput, ETA, the peak memory) and `train/*` scalars in `model_dir`'s TensorBoard log (on the
  chief only; its events file is made at the first report).

  Args:
    model_dir: str, where the TensorBoard events go.
    chief: bool, whether this worker writes them.
    tokens_per_step: int, tokens of one global batch (for tokens/s).
    language_model: bool, add perplexity and bits per character to the line.
    memory_device: str, the device ("CPU:0", see `memory_device`) whose peak memory since the start ends the line
      (`| peak mem X.XX GiB`) and goes to `train/peak_mem_gib`; None: left out.
  """

  def __init__(self, model_dir, chief, tokens_per_step, language_model, memory_device=None):
    self.tokens_per_step = tokens_per_step
    self.language_model = language_model
    self.memory_device = memory_device
    self._model_dir = model_dir if chief else None
    self._writer = None  # made at the first report: a run that fails before adds no empty events file
    self._start = self._train_steps = self._t_start = self._log_fn = None

  def begin(self, start, train_steps, log_fn):
    """Starts the clock of a run from step `start` to `train_steps` (for the ETA); its lines go to `log_fn`."""
    self._start, self._train_steps, self._t_start, self._log_fn = start, train_steps, time.time(), log_fn

  def report(self, step, loss, gnorm, lr, steps, seconds, skipped=None, loss_scale=None):
    """Reports a loop that ended at `step` after `steps` steps in `seconds`: the line through `begin`'s `log_fn`,
    and the scalars. With float16 loss scaling, `skipped` (the run's overflowed steps) ends the line and
    `loss_scale` is a scalar too."""
    steps_per_sec = steps / seconds
    tokens_per_sec = steps_per_sec * self.tokens_per_step
    eta = (self._train_steps - step) * (time.time() - self._t_start) / max(step - self._start, 1)
    lm = (f" | pplx {math.exp(min(loss, 50)):>7.2f}, bpc {loss / math.log(2):>7.4f}"
          if self.language_model else "")
    peak = peak_memory_bytes(self.memory_device) if self.memory_device else None
    mem = f" | peak mem {peak / GIB:.2f} GiB" if peak is not None else ""
    self._log_fn(f"[{step}] | gnorm {gnorm:.2f} lr {lr:8.6f} | loss {loss:.4f}{lm} | {steps_per_sec:.2f} steps/s, "
           f"{tokens_per_sec:.0f} tokens/s, ETA {format_seconds(eta)}"
           + ("" if skipped is None else f" | skipped {skipped}") + mem)
    if not self._model_dir:  # not the chief's, or its events could not be written
      return
    scalars = {"total_loss": loss, "lr": lr, "gnorm": gnorm, "steps_per_sec": steps_per_sec,
               "tokens_per_sec": tokens_per_sec}
    if loss_scale is not None:
      scalars.update(loss_scale=loss_scale, skipped_steps=skipped)
    if peak is not None:
      scalars["peak_mem_gib"] = peak / GIB
    try:
      if self._writer is None:
        self._writer = tf.summary.create_file_writer(self._model_dir)
      with self._writer.as_default(step=step):  # its exit flushes
        for name, value in scalars.items():
          tf.summary.scalar(f"train/{name}", value)
    except tf.errors.OpError as e:  # a full disk or a file-size limit: a traceback ended the run, or was taken for
      # the dataset's end. The checkpoints are what a run must write (their saves say where they cannot); no more
      # events: tf.summary keeps a writer whose flush failed as its default, and a no-op writer would not replace it.
      why = e.message.splitlines()[0].rsplit("; ", 1)[-1][:200]
      self._log_fn(f"Warning: could not write the TensorBoard events in {self._model_dir} ({why}); the run goes on "
                   "without them." + (" Free space for its checkpoints." if "space" in why else ""))
      self._model_dir = None


def format_seconds(seconds):
  """`1h02m03s` for 3723 seconds."""
  seconds = int(seconds)
  return f"{seconds // 3600}h{seconds // 60 % 60:02d}m{seconds % 60:02d}s"
