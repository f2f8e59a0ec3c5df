"""Peak memory and time of a fine-tuning training step (run_classifier.py's: the Trainer, the classification head,
dropout 0.1) with and without `--recompute_grad`, in float32 and bfloat16.

  .venv/bin/python bench/recompute_memory.py                          # XLNet-Base, seq 512, batch 2, four runs
  .venv/bin/python bench/recompute_memory.py --size large --batch 8 --runs bf16+recompute

Each run is a process of its own (its own allocator statistics and Keras policy). It trains one step (tracing
and the first step) with the loop `Trainer.train` runs, resets the allocator's statistics, trains `--steps` more
(one call of the loop) and prints the allocator's peak
(`tf.config.experimental.get_memory_info("CPU:0")`: the TensorFlow tensors of the step, weights and Adam slots
included; not the process's resident size) and the mean time per step.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SIZES = {"base": dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072),
         "large": dict(n_layer=24, d_model=1024, n_head=16, d_head=64, d_inner=4096)}
RUNS = ("fp32", "fp32+recompute", "bf16", "bf16+recompute")


def measure(size, seq_len, batch, steps, run, jit_compile):
  """One run in this process; returns {"run", "peak_gib", "step_s"}."""
  import numpy as np  # pylint: disable=g-import-not-at-top  (the parent process needs no TensorFlow)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from xlnet_tf import training  # pylint: disable=g-import-not-at-top
  from xlnet_tf.config import RunConfig, XLNetConfig  # pylint: disable=g-import-not-at-top
  from xlnet_tf.tasks.classifier import task as classifier_task  # pylint: disable=g-import-not-at-top

  use_bfloat16 = run.startswith("bf16")
  strategy = training.start(strategy="one_device", seed=0, use_bfloat16=use_bfloat16)
  config = XLNetConfig(**SIZES[size], ff_activation="gelu", untie_r=True, n_token=32000)
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=use_bfloat16, dropout=0.1, dropatt=0.1,
                         recompute_grad=run.endswith("+recompute"))
  scope = "classification_bench"
  trainer = training.Trainer(
      strategy, lambda: classifier_task.build_model(config, run_config, scope, n_class=2),
      classifier_task.ClassifierTask(scope), tempfile.mkdtemp(),
      training.TrainConfig(learning_rate=1e-5, train_steps=1 + steps, global_batch_size=batch, iterations=1,
                           jit_compile=jit_compile))
  rng = np.random.default_rng(0)
  features = {"input_ids": rng.integers(0, config.n_token, [batch, seq_len]).astype(np.int32),
              "segment_ids": (np.arange(seq_len) >= seq_len // 2).astype(np.int32)[None].repeat(batch, 0),
              "input_mask": np.zeros([batch, seq_len], np.float32),
              "label_ids": np.arange(batch, dtype=np.int32) % 2}
  dataset = tf.data.Dataset.from_tensors(features).repeat()
  iterator = iter(strategy.distribute_datasets_from_function(lambda _: dataset))
  loop = trainer._build_loop()  # pylint: disable=protected-access  # the loop Trainer.train runs, without its saving
  float(loop(iterator, tf.constant(1))[0])
  tf.config.experimental.reset_memory_stats("CPU:0")
  start = time.perf_counter()
  float(loop(iterator, tf.constant(steps))[0])
  step_s = (time.perf_counter() - start) / steps
  peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
  return {"run": run, "peak_gib": round(peak / 2 ** 30, 3), "step_s": round(step_s, 2)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--size", choices=sorted(SIZES), default="base")
  parser.add_argument("--seq_len", type=int, default=512)
  parser.add_argument("--batch", type=int, default=2)
  parser.add_argument("--steps", type=int, default=2, help="measured steps, after one warm-up step")
  parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of {RUNS}")
  parser.add_argument("--jit_compile", action="store_true", help="XLA-compile the forward and backward pass")
  parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    print("RESULT " + json.dumps(measure(args.size, args.seq_len, args.batch, args.steps, args.child,
                                                args.jit_compile)))
    return
  runs = args.runs.split(",")
  if any(run not in RUNS for run in runs):
    sys.exit(f"--runs takes names from {RUNS}. Received: {args.runs!r}.")
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2")
  xla = ", XLA" if args.jit_compile else ""
  print(f"{args.size}, seq {args.seq_len}, batch {args.batch}{xla}: peak of the TensorFlow CPU allocator over "
        f"{args.steps} step(s) after one warm-up step")
  for run in runs:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *sys.argv[1:], f"--child={run}"],
                          capture_output=True, text=True, env=env, check=False)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    if proc.returncode or not lines:
      print(f"{run:16s} failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
      continue
    result = json.loads(lines[-1][len("RESULT "):])
    print(f"{run:16s} peak {result['peak_gib']:6.2f} GiB   {result['step_s']:6.2f} s/step")


if __name__ == "__main__":
  main()
