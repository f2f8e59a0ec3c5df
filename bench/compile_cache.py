"""Benchmark (not a test): what `--xla_cache_dir` saves when a pretraining command runs again (a rerun, or a resume
after a preemption): the same `run_pretrain.py` command twice, each in a fresh --model_dir, both with one cache
directory (empty before the first run), and for reference once without the flag.

  .venv/bin/python bench/compile_cache.py                          # small size, --jit_compile
  .venv/bin/python bench/compile_cache.py --size=base --steps=4     # the harness's base pretraining shape
  .venv/bin/python bench/compile_cache.py --nojit_compile           # only the XLA-compiled parts of the eager step

The shapes are the side-by-side harness's `pretrain_step` sizes (`../shared/perf/workloads.json`, or
$PERF_HARNESS_DIR): model, seq_len, reuse_len, mem_len, num_predict, perm_size and batch; the records are synthetic
ones in the original format (`bench_input.write_synthetic_records`). Every run logs each step (`--iterations=1`),
so its first step's seconds (tracing and compilation included) and the later steps' median come from its own
TensorBoard log; `compile` is their difference. Prints one line per run and a JSON line with all of them.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.bench_input import write_synthetic_records  # pylint: disable=wrong-import-position  # noqa: E402


def workload(size, harness_dir):
  """(model config, pretrain_step shapes) of the harness's `size`."""
  with open(os.path.join(harness_dir, "workloads.json"), encoding="utf-8") as f:
    sizes = json.load(f)["sizes"]
  if size not in sizes:
    raise SystemExit(f"--size must be one of {sorted(sizes)} (workloads.json). Received: {size!r}.")
  return sizes[size]["model"], sizes[size]["pretrain_step"]


def command(model, shape, record_dir, model_dir, args, cache_dir):
  """The `run_pretrain.py` command line of one run."""
  flags = dict(record_info_dir=record_dir, model_dir=model_dir, train_batch_size=shape["bsz"],
               seq_len=shape["seq_len"], reuse_len=shape["reuse_len"], mem_len=shape["mem_len"],
               perm_size=shape["perm_size"], num_predict=shape["num_predict"], bi_data=shape["bi_data"],
               uncased=True, train_steps=args.steps, iterations=1, warmup_steps=0, learning_rate=1e-4,
               jit_compile=args.jit_compile, use_bfloat16=args.use_bfloat16, seed=1,
               **{k: v for k, v in model.items() if k != "n_token"})
  if cache_dir:
    flags["xla_cache_dir"] = cache_dir
  return [sys.executable, os.path.join(ROOT, "run_pretrain.py")] + [f"--{k}={v}" for k, v in flags.items()]


def step_seconds(model_dir):
  """Seconds of each logged loop, in step order, from the run's TensorBoard log (`train/steps_per_sec`, float32:
  the progress line rounds it to 0.01)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  rates = {}
  for path in tf.io.gfile.glob(os.path.join(model_dir, "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == "train/steps_per_sec":
          rates[event.step] = float(tf.make_ndarray(value.tensor))
  return [1 / rates[step] for step in sorted(rates)]


def timed_run(name, cmd, model_dir, cache_dir):
  """Runs `cmd`; {name, wall_s, first_step_s, step_s (median of the later steps), compile_s, cache_entries}."""
  start = time.perf_counter()
  proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
  wall = time.perf_counter() - start
  if proc.returncode:
    raise SystemExit(f"{name}: run_pretrain.py failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
  seconds = step_seconds(model_dir)
  if len(seconds) < 2:
    raise SystemExit(f"{name}: fewer than two logged steps in {model_dir}:\n{proc.stdout[-2000:]}")
  later = statistics.median(seconds[1:])
  entries = len(os.listdir(cache_dir)) if cache_dir and os.path.isdir(cache_dir) else None
  return dict(run=name, wall_s=round(wall, 2), first_step_s=round(seconds[0], 3), step_s=round(later, 4),
              compile_s=round(seconds[0] - later, 3), cache_entries=entries)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--size", default="small", help="a size of the harness's workloads.json (small, base, gpu)")
  parser.add_argument("--steps", type=int, default=4, help="steps per run (the first compiles)")
  parser.add_argument("--nojit_compile", dest="jit_compile", action="store_false",
                      help="run without --jit_compile (default: with)")
  parser.add_argument("--use_bfloat16", action="store_true")
  parser.add_argument("--no_reference", action="store_true", help="skip the run without the cache (where a "
                      "compilation takes minutes: the first run with the empty cache compiles as it would)")
  parser.add_argument("--harness_dir", default=os.environ.get("PERF_HARNESS_DIR",
                                                              os.path.join(ROOT, "..", "shared", "perf")))
  args = parser.parse_args(argv)
  model, shape = workload(args.size, args.harness_dir)
  with tempfile.TemporaryDirectory() as tmp:
    record_dir = os.path.join(tmp, "records")
    os.makedirs(record_dir)
    write_synthetic_records(record_dir, args.steps + 1, shape["bsz"], shape["seq_len"], shape["reuse_len"],
                            shape["num_predict"], shape["bi_data"], True, 6, 1)
    cache_dir = os.path.join(tmp, "xla_cache")
    runs = []
    plan = [("no cache", None)] * (not args.no_reference) + [("first (empty cache)", cache_dir),
                                                               ("second (cache)", cache_dir)]
    for name, cache in plan:
      model_dir = os.path.join(tmp, f"model_{len(runs)}")
      runs.append(timed_run(name, command(model, shape, record_dir, model_dir, args, cache), model_dir, cache))
      r = runs[-1]
      print(f"{name:20s} wall {r['wall_s']:7.1f} s | first step {r['first_step_s']:7.2f} s | later steps "
            f"{r['step_s']:.3f} s | compile ~{r['compile_s']:.2f} s | cache entries {r['cache_entries']}",
            flush=True)
  print(json.dumps(dict(bench="compile_cache", size=args.size, jit_compile=args.jit_compile,
                        use_bfloat16=args.use_bfloat16, steps=args.steps, runs=runs)))


if __name__ == "__main__":
  main()
