"""training.reporting: the per-loop progress line, its TensorBoard scalars, the ETA's format."""

import glob

import pytest

from xlnet_tf.training import reporting


@pytest.mark.parametrize("seconds, text", [(0, "0h00m00s"), (59.9, "0h00m59s"), (3723, "1h02m03s"),
                                           (100 * 3600 + 61, "100h01m01s")])
def test_format_seconds(seconds, text):
  assert reporting.format_seconds(seconds) == text


@pytest.mark.parametrize("language_model", [True, False])
def test_the_progress_line_and_the_scalars(tmp_path, language_model):
  progress = reporting.Progress(str(tmp_path), chief=True, tokens_per_step=4 * 7, language_model=language_model)
  progress.begin(start=0, train_steps=10)
  lines = []
  progress.report(step=2, loss=2.0, gnorm=1.5, lr=1e-4, steps=2, seconds=0.5, log_fn=lines.append)
  head, tail = lines[0].split(" | 4.00 steps/s, 112 tokens/s, ETA ")
  lm = " | pplx    7.39, bpc  2.8854" if language_model else ""
  assert head == f"[2] | gnorm 1.50 lr 0.000100 | loss 2.0000{lm}"
  assert tail.startswith("0h00m0")
  assert glob.glob(str(tmp_path / "events.out.tfevents.*"))


def test_a_worker_that_is_not_the_chief_writes_no_events(tmp_path):
  progress = reporting.Progress(str(tmp_path), chief=False, tokens_per_step=1, language_model=False)
  progress.begin(start=5, train_steps=6)
  progress.report(step=6, loss=1.0, gnorm=1.0, lr=0.0, steps=1, seconds=1.0, log_fn=lambda line: None)
  assert not glob.glob(str(tmp_path / "events.out.tfevents.*"))
