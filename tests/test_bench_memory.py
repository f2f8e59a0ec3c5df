"""bench/memory.py: the search for the largest micro-batch under a budget and the --micro_batch table (on made-up
peaks), and one real run of each mode on a tiny model (slow: two probes each, each a fresh process that imports
TensorFlow)."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import types

import pytest

from helpers.allocator_stats import NEEDS_CPU_STATS

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "memory.py")
spec = importlib.util.spec_from_file_location("bench_memory", SCRIPT)
memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(memory)
GIB = memory.GIB


def _args(**kw):
  values = dict(budget_gib=16.0, max_probe_seconds=60, max_probes=8, confirm_next=1, max_micro_batch=1024,
                ram_headroom_gib=4.0)
  values.update(kw)
  return types.SimpleNamespace(**values)


def _fake_probes(monkeypatch, peak_gib, refuse=()):
  """Probes whose peak is peak_gib(m); a micro-batch in `refuse` times out. Returns the list of probed m."""
  probed = []

  def run_probe(spec, timeout):
    m = spec["micro_batch"]
    probed.append(m)
    if m in refuse:
      return {"error": f"over --max_probe_seconds={timeout}"}
    return {"peak_bytes": int(peak_gib(m) * GIB), "rss_bytes": int((peak_gib(m) + 1) * GIB), "seconds": 0.5 * m,
            "device": "CPU:0"}
  monkeypatch.setattr(memory, "run_probe", run_probe)
  monkeypatch.setattr(memory, "free_bytes", lambda: None)
  return probed


def _cell(task="finetune", **kw):
  return memory.Cell(dict(task=task, micro_batch=None), _args(**kw), log=lambda line: None).search()


def test_a_linear_peak_is_found_in_one_probe_and_confirmed_by_the_next(monkeypatch):
  probed = _fake_probes(monkeypatch, lambda m: 0.5 + 0.3 * m)  # (16 - 0.5) / 0.3 = 51.7
  cell = _cell()
  assert probed == [1, 2, 51, 52] and cell.best == 51
  row = cell.row("base", 128, "fp32")
  assert row.startswith("| base | finetune | 128 | fp32 | 51 | 15.80 | 25.5 | 0.50 + 0.3000·m (m=1,2) | "
                        "m=52: 16.100 GiB")


def test_while_the_optimizers_update_sets_the_peak_the_micro_batch_doubles(monkeypatch):
  """At small m the weights, slots and gradients of the update set the peak (Base at seq 128: 1.976 GiB at m=1,
  1.967 at m=2): a line through them is flat, so m doubles until the activations show."""
  probed = _fake_probes(monkeypatch, lambda m: max(2.0, 0.5 + 0.3 * m))
  cell = _cell()
  assert probed == [1, 2, 4, 8, 66, 51, 52] and cell.best == 51
  row = cell.row("base", 128, "fp32")
  assert "| 1.10 + 0.2250·m (m=4,8) |" in row and "the fit predicted 66" in row


def test_a_peak_that_grows_faster_than_the_fit_steps_down(monkeypatch):
  probed = _fake_probes(monkeypatch, lambda m: 0.5 + 0.3 * m + (0.002 * m * m if m > 2 else 0))
  cell = _cell()
  assert cell.best == 40 and 41 in cell.over  # 0.5 + 0.3 * 40 + 0.002 * 40^2 = 15.70; 41: 16.16
  assert probed[:3] == [1, 2, 51] and "the fit predicted 51" in cell.row("base", 128, "fp32")


def test_pretraining_steps_by_two_for_bi_data(monkeypatch):
  probed = _fake_probes(monkeypatch, lambda m: 1.0 + 1.0 * m)
  cell = _cell(task="pretrain")
  assert probed == [2, 4, 14, 16] and cell.best == 14


def test_a_probe_that_does_not_finish_leaves_the_cell_predicted(monkeypatch):
  _fake_probes(monkeypatch, lambda m: 0.5 + 0.3 * m, refuse={51})
  row = _cell().row("large", 512, "bf16")
  assert "| ~51 (predicted; measured 2) | ~15.80 | - |" in row and "m=51: over --max_probe_seconds=60" in row


def test_nothing_fits_when_one_example_is_over_the_budget(monkeypatch):
  probed = _fake_probes(monkeypatch, lambda m: 20.0 * m)
  cell = _cell()
  assert probed == [1] and cell.best == 0
  assert cell.row("large", 512, "fp32").startswith("| large | finetune | 512 | fp32 | 0 | - |")


def test_bad_input_is_one_line_naming_the_flag():
  done = subprocess.run([sys.executable, SCRIPT, "--combos=fp32,fp64"], capture_output=True, text=True, check=False)
  assert done.returncode == 1
  assert done.stderr.strip() == ("bench/memory.py: error: --combos: unknown fp64. Use some of: fp32, bf16, fp16, "
                                 "fp32+recompute, bf16+recompute, fp16+recompute.")


def test_micro_batch_probes_only_it_and_prints_its_peak_and_time(monkeypatch, capsys, tmp_path):
  """--micro_batch=2: one probe per combo at m = 2 (no search), with --probe_steps and --jit_compile in its spec;
  a probe out of device memory says so in its row."""
  specs = []

  def run_probe(spec, timeout):
    specs.append(spec)
    if spec["flags"].get("use_bfloat16"):
      return {"error": "ResourceExhausted: OOM", "over": True}
    recompute = spec["flags"].get("recompute_grad")
    return {"peak_bytes": int((1.5 if recompute else 2.25) * GIB), "later_peak_bytes": GIB if recompute else None,
            "rss_bytes": 3 * GIB, "seconds": 0.125 * spec["micro_batch"], "device": "CPU:0", "tensorflow": "2.x"}
  monkeypatch.setattr(memory, "run_probe", run_probe)
  memory.main([f"--model_config={_tiny_config(tmp_path)}", "--seq_lens=16", "--tasks=finetune", "--micro_batch=2",
               "--combos=fp32,fp32+recompute,bf16", "--probe_steps=2", "--jit_compile"])
  assert [(s["micro_batch"], s["steps"], s["flags"]) for s in specs] == [
      (2, 2, {"jit_compile": True}), (2, 2, {"recompute_grad": True, "jit_compile": True}),
      (2, 2, {"use_bfloat16": True, "jit_compile": True})]
  out = capsys.readouterr().out
  assert ("Peak memory and time of the training step at micro-batch 2 (--jit_compile):\n\n"
          "| model | task | seq | combo | peak (GiB) | peak of the steps after the first (GiB) | s/step | notes |\n"
          "|---|---|---|---|---|---|---|---|\n"
          "| tiny.json | finetune | 16 | fp32 | 2.25 | - | 0.25 | |\n"
          "| tiny.json | finetune | 16 | fp32+recompute | 1.50 | 1.00 | 0.25 | |\n"
          "| tiny.json | finetune | 16 | bf16 | - | - | - | out of device memory |\n") in out
  assert "machine: " in out and "2 step(s) per probe" in out


@pytest.mark.parametrize("m", [0, 3])  # 3: odd, and the pretrain task is among the default --tasks
def test_bad_micro_batch_is_one_line_naming_the_flag(m):
  with pytest.raises(SystemExit) as e:
    memory.parse_args([f"--micro_batch={m}"])
  assert str(e.value) == ("bench/memory.py: error: --micro_batch must be positive, and even with the pretrain task "
                          f"(bi_data). Received: {m}.")


@pytest.mark.parametrize("argv,line", [
    (["--budget_gib=-1"], "--budget_gib must be a positive number of GiB. Received: -1."),  # ran every probe
    (["--budget_gib=0"], "--budget_gib must be a positive number of GiB. Received: 0."),
    (["--tasks=pretrain", "--seq_lens=7,128,9"],  # numpy's "ValueError: high <= 0" in every probe's row
     "--seq_lens 7,9: a pretrain sequence must be even and at least 10 (reuse_len seq/2, and 5 positions after it)."),
    (["--tasks=finetune", "--seq_lens=2"],
     "--seq_lens 2: a finetune sequence must be at least 3 (A SEP CLS, as run_classifier.py's --max_seq_length)."),
])
def test_a_budget_or_sequence_length_no_probe_can_use_is_one_line(argv, line):
  """sweep 25, C5: each was accepted, and the search ran (a negative budget: minutes) or every probe failed alone."""
  with pytest.raises(SystemExit) as e:
    memory.parse_args(argv)
  assert str(e.value) == f"bench/memory.py: error: {line}"
  assert memory.parse_args(["--tasks=finetune", "--seq_lens=7"]).seq_lens == [7]


def test_a_probe_reads_the_peak_of_the_steps_after_the_first_apart():
  """With 3 steps the probe's peak is the whole run's (the first step's 64 MiB tensor) and the later peak that of
  steps 2 and 3 alone (their 8 MiB tensors): the allocator's statistics are reset after the first step."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from xlnet_tf.training import reporting  # pylint: disable=import-outside-toplevel

  class Trainer:
    def train(self, dataset_fn, log_fn, metrics_fn):
      for mib in (64, 8, 8, 8):
        float(tf.reduce_sum(tf.random.uniform([mib * 2 ** 18])))  # mib MiB of float32, then freed
        log_fn("a progress line")
        metrics_fn({"loss": 0.5})

  strategy = tf.distribute.get_strategy()
  if reporting.memory_device(strategy) is None:
    pytest.skip("this CPU allocator keeps no statistics (TF_ENABLE_ONEDNN_OPTS=0)")
  result = memory._run_steps({"steps": 3}, strategy, Trainer(), {"x": tf.zeros([1])})  # pylint: disable=W0212
  assert result["peak_bytes"] >= 64 * 2 ** 20 > 32 * 2 ** 20 >= result["later_peak_bytes"] >= 8 * 2 ** 20, result


def _tiny_config(tmp_path):
  config = tmp_path / "tiny.json"
  config.write_text(json.dumps(dict(n_layer=2, d_model=8, n_head=2, d_head=6, d_inner=11, ff_activation="gelu",
                                    untie_r=True, n_token=32)))
  return config


@pytest.mark.slow
@NEEDS_CPU_STATS  # the rows' peaks
def test_the_benchmark_prints_a_row_for_a_tiny_model(tmp_path):
  config = _tiny_config(tmp_path)
  done = subprocess.run([sys.executable, SCRIPT, f"--model_config={config}", "--seq_lens=16", "--combos=fp32",
                         "--tasks=finetune", "--max_probes=0", "--budget_gib=1"], capture_output=True, text=True,
                        check=False, timeout=600)
  assert done.returncode == 0, done.stderr[-2000:]
  rows = [line for line in done.stdout.splitlines() if line.startswith("| tiny.json |")]
  assert len(rows) == 1 and rows[0].startswith("| tiny.json | finetune | 16 | fp32 | 2 | 0.0"), done.stdout
  assert "machine: " in done.stdout and "device CPU:0" in done.stdout


@pytest.mark.slow
@NEEDS_CPU_STATS  # the rows' peaks
def test_micro_batch_measures_a_tiny_model(tmp_path):
  """--micro_batch's real probes (two fresh processes) print a row per combo with the peaks (of the whole probe and
  of the steps after the first: at most the whole's) and s/step."""
  done = subprocess.run([sys.executable, SCRIPT, f"--model_config={_tiny_config(tmp_path)}", "--seq_lens=16",
                         "--combos=fp32,bf16+recompute", "--tasks=finetune", "--micro_batch=2", "--probe_steps=2"],
                        capture_output=True, text=True, check=False, timeout=600)
  assert done.returncode == 0, done.stderr[-2000:]
  rows = [line for line in done.stdout.splitlines() if line.startswith("| tiny.json |")]
  assert [row.split(" | ")[3] for row in rows] == ["fp32", "bf16+recompute"], done.stdout
  row = r"\| tiny.json \| finetune \| 16 \| \S+ \| (\d+\.\d\d) \| (\d+\.\d\d) \| \d+\.\d\d \| \|"
  assert all(re.fullmatch(row, line) and float(re.fullmatch(row, line)[2]) <= float(re.fullmatch(row, line)[1])
             for line in rows), rows
  assert "device CPU:0" in done.stdout
