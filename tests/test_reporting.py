"""training.reporting: the per-loop progress line, its TensorBoard scalars, the ETA's format, the peak memory."""

import glob
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import training
from xlnet_tf.config import RunConfig, XLNetConfig
from xlnet_tf.tasks.classifier import task as classifier_task
from xlnet_tf.training import reporting

from helpers.allocator_stats import NEEDS_CPU_STATS


@pytest.mark.parametrize("seconds, text", [(0, "0h00m00s"), (59.9, "0h00m59s"), (3723, "1h02m03s"),
                                           (100 * 3600 + 61, "100h01m01s")])
def test_format_seconds(seconds, text):
  assert reporting.format_seconds(seconds) == text


@pytest.mark.parametrize("language_model", [True, False])
def test_the_progress_line_and_the_scalars(tmp_path, language_model):
  progress = reporting.Progress(str(tmp_path), chief=True, tokens_per_step=4 * 7, language_model=language_model)
  lines = []
  progress.begin(start=0, train_steps=10, log_fn=lines.append)
  assert not os.listdir(tmp_path)  # a run that fails before its first report leaves no empty events file
  progress.report(step=2, loss=2.0, gnorm=1.5, lr=1e-4, steps=2, seconds=0.5)
  head, tail = lines[0].split(" | 4.00 steps/s, 112 tokens/s, ETA ")
  lm = " | pplx    7.39, bpc  2.8854" if language_model else ""
  assert head == f"[2] | gnorm 1.50 lr 0.000100 | loss 2.0000{lm}"
  assert tail.startswith("0h00m0")
  assert glob.glob(str(tmp_path / "events.out.tfevents.*"))


def test_a_worker_that_is_not_the_chief_writes_no_events(tmp_path):
  progress = reporting.Progress(str(tmp_path), chief=False, tokens_per_step=1, language_model=False)
  progress.begin(start=5, train_steps=6, log_fn=lambda line: None)
  progress.report(step=6, loss=1.0, gnorm=1.0, lr=0.0, steps=1, seconds=1.0)
  assert not glob.glob(str(tmp_path / "events.out.tfevents.*"))


def _scalars(model_dir, tag):
  """{step: value} of the scalar `tag` in `model_dir`'s TensorBoard events."""
  found = {}
  for path in glob.glob(os.path.join(str(model_dir), "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == tag:
          found[event.step] = float(tf.make_ndarray(value.tensor))
  return found


@NEEDS_CPU_STATS
def test_the_line_ends_with_the_peak_memory_and_tensorboard_has_it(tmp_path):
  tf.config.experimental.reset_memory_stats("CPU:0")
  big = tf.ones([1024, 1024])  # 4 MiB held by the CPU allocator at least until the report
  progress = reporting.Progress(str(tmp_path), chief=True, tokens_per_step=1, language_model=False,
                                memory_device="CPU:0")
  lines = []
  progress.begin(start=0, train_steps=1, log_fn=lines.append)
  progress.report(step=1, loss=1.0, gnorm=1.0, lr=0.0, steps=1, seconds=1.0)
  match = re.search(r" \| peak mem (\d+\.\d\d) GiB$", lines[0])
  assert match and float(match.group(1)) >= 0.0
  (peak,) = _scalars(tmp_path, "train/peak_mem_gib").values()
  assert peak * reporting.GIB >= big.numpy().nbytes
  assert f"{peak:.2f}" == match.group(1)


def test_a_device_without_allocator_statistics_leaves_the_figure_out(tmp_path, monkeypatch):
  """As the CPU with TF_ENABLE_ONEDNN_OPTS=0: get_memory_info raises ValueError ("Allocator stats not available")."""
  def no_stats(device):
    raise ValueError(f"Allocator stats not available for device '{device}'")
  monkeypatch.setattr(tf.config.experimental, "get_memory_info", no_stats)
  assert reporting.memory_device(tf.distribute.OneDeviceStrategy("/cpu:0")) is None
  progress = reporting.Progress(str(tmp_path), chief=True, tokens_per_step=1, language_model=False,
                                memory_device="CPU:0")
  lines = []
  progress.begin(start=0, train_steps=1, log_fn=lines.append)
  progress.report(step=1, loss=1.0, gnorm=1.0, lr=0.0, steps=1, seconds=1.0)
  assert "peak mem" not in lines[0] and not _scalars(tmp_path, "train/peak_mem_gib")


@NEEDS_CPU_STATS
def test_the_memory_device_is_the_strategys_first():
  assert reporting.memory_device(tf.distribute.OneDeviceStrategy("/cpu:0")) == "CPU:0"
  assert reporting.memory_device(tf.distribute.MirroredStrategy(["/cpu:0"])) == "CPU:0"
  assert reporting.memory_device(tf.distribute.get_strategy()) == (
      "GPU:0" if tf.config.list_logical_devices("GPU") else "CPU:0")


@NEEDS_CPU_STATS
def test_a_training_run_logs_its_peak_memory(tmp_path):
  """A tiny classifier's Trainer: the log line of its step ends with the device's peak, which holds at least the
  word embedding and its two Adam slots, and TensorBoard has the same figure. (On a CPU, oneDNN's allocator counts
  buffers of 256 KiB and more only: the embedding here is 320 KB, the other weights are not counted.)"""
  tf.config.experimental.reset_memory_stats("CPU:0")
  config = XLNetConfig(n_layer=2, d_model=8, n_head=2, d_head=6, d_inner=11, ff_activation="gelu", untie_r=True,
                       n_token=10000)
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0)
  strategy = training.make_strategy("one_device")
  trainer = training.Trainer(
      strategy, lambda: classifier_task.build_model(config, run_config, "classification_imdb", n_class=2),
      classifier_task.ClassifierTask("classification_imdb"), str(tmp_path),
      training.TrainConfig(learning_rate=1e-4, train_steps=1, global_batch_size=4, iterations=1))
  rng = np.random.default_rng(0)
  features = {"input_ids": rng.integers(0, 32, [4, 7]).astype(np.int32),
              "segment_ids": rng.integers(0, 2, [4, 7]).astype(np.int32),
              "input_mask": (rng.random([4, 7]) < 0.3).astype(np.float32), "label_ids": np.arange(4) % 2}
  dataset = tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in features.items()}).repeat()
  lines = []
  trainer.train(lambda ctx, start: dataset, log_fn=lines.append)
  match = re.search(r" \| peak mem (\d+\.\d\d) GiB$", lines[-1])
  assert match, lines
  (peak,) = _scalars(tmp_path, "train/peak_mem_gib").values()
  assert peak * reporting.GIB >= 3 * trainer.model.transformer.word_embedding.lookup_table.numpy().nbytes
  assert f"{peak:.2f}" == match.group(1)


def test_events_that_cannot_be_written_are_one_warning_and_the_run_goes_on(tmp_path):
  """A full disk or a file-size limit while the events were flushed: a 40-line traceback ended the run, or (the
  limit: TensorFlow's OutOfRangeError) the Trainer took it for the dataset's end (sweep 19, F5). One warning now,
  and the reports go on without events; the checkpoints' saves say where they cannot be written."""
  script = f"""
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))
from xlnet_tf.training import reporting
progress = reporting.Progress({str(tmp_path)!r}, chief=True, tokens_per_step=1, language_model=False)
progress.begin(start=0, train_steps=9, log_fn=print)
for step in range(1, 10):
  progress.report(step=step, loss=1.0, gnorm=1.0, lr=0.0, steps=1, seconds=1.0)
"""
  proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.splitlines()
  warnings = [line for line in lines if line.startswith("Warning")]
  assert warnings == [f"Warning: could not write the TensorBoard events in {tmp_path} (File too large); the run goes "
                      "on without them."], proc.stdout  # no "Free space" for a file-size limit (sweep 20, N5)
  assert lines[-1].startswith("[9] | gnorm 1.00")
