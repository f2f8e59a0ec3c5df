"""Benchmark (not a test): the largest micro-batch whose real training step fits a memory budget, or (with
--micro_batch) the peak memory and time of the step at a given one.

  .venv/bin/python bench/memory.py                                    # Base and Large, every task, seq and combo
  .venv/bin/python bench/memory.py --models=base --seq_lens=128 --combos=fp32,bf16 --budget_gib=16
  .venv/bin/python bench/memory.py --gpu_memory_limit_gib=16          # on a GPU: a logical device of 16 GiB
  .venv/bin/python bench/memory.py --micro_batch=2 --models=base --tasks=finetune --seq_lens=512 \
      --combos=fp32,fp32+recompute,bf16,bf16+recompute --probe_steps=3   # no search: the peak and time at m = 2

For each model (XLNet-Base, XLNet-Large, or --model_config's json), task, sequence length and combination of
precision and recomputation (`--combos`: the training CLIs' flags each sets, see COMBOS), it finds the largest
micro-batch m (per-replica `--train_batch_size`) whose training step peaks at most --budget_gib, and prints a
markdown table for docs/performance.md and a line naming the machine. With --micro_batch=M it searches nothing:
it probes m = M once per model, task, seq and combo and prints each probe's peak and seconds per step (what
`--recompute_grad` saves at a fixed batch, docs/training_step.md). --jit_compile sets the CLIs' --jit_compile in
every probe.

- finetune: the step `run_classifier.py` runs (its flag defaults, dropout 0.1; a two-class head; `--max_seq_length`
  = seq), on random batch-major features with the reader's dtypes.
- pretrain: the step `run_pretrain.py` runs (its flag defaults: bi_data, two streams, mems) with the original
  README's XLNet-Large recipe (seq 512: reuse_len 256, mem_len 384, perm_size 256, num_predict 85) scaled to seq:
  reuse_len and perm_size seq/2, mem_len 3*seq/4, num_predict 85*seq/512; bi_data needs an even m, so m steps by 2.
  Its batch is made by the real record parser from random records (`bench_pretrain.make_rows`).

A probe is one fresh process (`--probe`, so that peaks do not mix) that starts like the CLI (`flag_configs.start`),
builds the CLI's Trainer from its flags (random weights, no checkpoint), runs --probe_steps real steps through
`Trainer.train` and reads the peak the progress line shows (`reporting.peak_memory_bytes` of the strategy's first
device since the probe started: building, tracing and every step; on a CPU oneDNN's allocator's buffers of 256
KiB and more; also the process's peak RSS: the search goes by the whole probe's peak, what a run needs). With
--probe_steps of 2 or more it also reads the peak of the steps after the first alone (it resets the statistics
after the first: with --jit_compile and recomputation the first step, compilation included, peaked higher than
the later ones). The seconds are the mean of the steps after the first; with --probe_steps=1, the first step's,
tracing included. On a GPU with --gpu_memory_limit_gib the probe's device has that much memory: a step that does
not fit there fails (ResourceExhausted), and counts as over the budget.

Search: measure m = u and 2u (u = 1, or 2 for pretrain), fit peak = a + b*m through the two largest measured m,
predict the largest m under the budget, measure it, refit and step down while it is over, and measure m + u to
confirm it is over (--confirm_next). While the line is flat (the peak grows by less than a quarter of m's growth:
at small m the optimizer's update, with the weights, both Adam slots and the gradients, sets the peak; Base at
seq 128, float32: about 1.95 GiB at m = 1, 2 and 4, 2.41 at 8), m doubles instead. A probe that did not finish in
--max_probe_seconds, or that (on a CPU) would leave less than --ram_headroom_gib of the machine's memory free, ends
the search: its cell shows the fit's prediction, marked `~`.
"""

import argparse
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 2 ** 30
MODELS = {"base": dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072, ff_activation="gelu",
                       untie_r=True, n_token=32000),
          "large": dict(n_layer=24, d_model=1024, n_head=16, d_head=64, d_inner=4096, ff_activation="gelu",
                        untie_r=True, n_token=32000)}
# The training CLIs' flags of each combination (--use_fp16 and --recompute_grad are issue 51's).
COMBOS = {"fp32": {}, "bf16": {"use_bfloat16": True}, "fp16": {"use_fp16": True},
          "fp32+recompute": {"recompute_grad": True}, "bf16+recompute": {"use_bfloat16": True, "recompute_grad": True},
          "fp16+recompute": {"use_fp16": True, "recompute_grad": True}}
TASKS = ("finetune", "pretrain")


class _Done(Exception):
  """Ends a probe's `Trainer.train` after its last step (from `metrics_fn`, before any checkpoint is written)."""


def pretrain_shapes(seq_len):
  """The README's Large pretraining recipe (seq 512) scaled to seq_len."""
  return dict(seq_len=seq_len, reuse_len=seq_len // 2, mem_len=3 * seq_len // 4, perm_size=seq_len // 2,
              num_predict=max(1, round(85 * seq_len / 512)))


# -- the probe: one process, one configuration ------------------------------------------------------------------
def probe(spec):
  """Runs spec's training step(s) in this process; returns its figures (a dict) or {"error": ...}."""
  sys.path.insert(0, ROOT)
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  gpus = tf.config.list_physical_devices("GPU")
  if gpus and spec["gpu_memory_limit_gib"]:
    tf.config.set_logical_device_configuration(gpus[0], [tf.config.LogicalDeviceConfiguration(
        memory_limit=int(spec["gpu_memory_limit_gib"] * 1024))])  # in MiB
  from xlnet_tf import XLNetConfig  # pylint: disable=import-outside-toplevel
  model_dir = tempfile.mkdtemp(prefix="xlnet-memory-")
  try:
    strategy, trainer, features = _build(spec, XLNetConfig(**spec["model"]), model_dir)
    return _run_steps(spec, strategy, trainer, features)
  finally:
    shutil.rmtree(model_dir, ignore_errors=True)


def _build(spec, xlnet_config, model_dir):
  """(strategy, the CLI's Trainer, one batch of features) of a probe: the CLI's flag defaults, then spec's."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import cli  # pylint: disable=import-outside-toplevel
  import flag_configs  # pylint: disable=import-outside-toplevel
  import run_start  # pylint: disable=import-outside-toplevel
  m, seq_len = spec["micro_batch"], spec["seq_len"]
  common = dict(spec["flags"], model_dir=model_dir, train_batch_size=m, iterations=1, train_steps=10 ** 6,
                warmup_steps=0, seed=0)
  rng = np.random.default_rng(0)
  if spec["task"] == "finetune":
    import run_classifier  # pylint: disable=import-outside-toplevel
    from xlnet_tf.tasks.classifier import task as classifier_task  # pylint: disable=import-outside-toplevel
    o = cli.defaults(run_classifier.define_flags, task_name="imdb", max_seq_length=seq_len, **common)
    strategy = flag_configs.start(o)
    model_args = run_classifier.build_model_args(o, ["neg", "pos"])
    trainer, _, _, _ = run_start.fine_tuning_trainer(
        o, strategy, lambda run_config: classifier_task.build_model(xlnet_config, run_config, **model_args),
        classifier_task.ClassifierTask(model_args["scope"]), xlnet_config, seq_len, log_fn=lambda line: None)
    features = {"input_ids": rng.integers(10, xlnet_config.n_token, [m, seq_len]).astype(np.int32),
                "segment_ids": rng.integers(0, 2, [m, seq_len]).astype(np.int32),
                "input_mask": np.zeros([m, seq_len], np.float32), "label_ids": np.arange(m, dtype=np.int32) % 2,
                "is_real_example": np.ones([m], np.int32)}
    return strategy, trainer, {k: tf.constant(v) for k, v in features.items()}
  import bench_pretrain  # pylint: disable=import-outside-toplevel
  import run_pretrain  # pylint: disable=import-outside-toplevel
  shapes = pretrain_shapes(seq_len)
  o = cli.defaults(run_pretrain.define_flags, record_info_dir=model_dir, **shapes, **common)
  strategy = flag_configs.start(o)
  trainer = run_pretrain.build_trainer(o, strategy, xlnet_config)
  return strategy, trainer, bench_pretrain.make_rows(dict(shapes, bsz=m, n_token=xlnet_config.n_token), seed=0,
                                                     use_bfloat16=o.use_bfloat16)


def _run_steps(spec, strategy, trainer, features):
  """Runs spec["steps"] steps of `trainer` on `features` through `Trainer.train`; the probe's figures."""
  import resource  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from xlnet_tf.training import reporting  # pylint: disable=import-outside-toplevel
  dataset = tf.data.Dataset.from_tensors(features).repeat()
  device = reporting.memory_device(strategy)
  times, lines, first_peak = [time.perf_counter()], [], []

  def stop_after_the_last(last):
    times.append(time.perf_counter())
    if device and len(times) == 2 and spec["steps"] > 1:  # the peak up to the first step's end; then the later's
      first_peak.append(reporting.peak_memory_bytes(device))
      tf.config.experimental.reset_memory_stats(device)
    if len(times) > spec["steps"]:
      raise _Done(last)

  try:
    trainer.train(lambda input_context, start_step: dataset, log_fn=lines.append, metrics_fn=stop_after_the_last)
  except _Done as done:
    last = done.args[0]
  except tf.errors.ResourceExhaustedError as e:
    return {"error": "ResourceExhausted: " + str(e).splitlines()[0][:200], "over": True}
  gpus = tf.config.list_physical_devices("GPU")
  details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
  peak = reporting.peak_memory_bytes(device) if device else None
  return {"peak_bytes": max(first_peak + [peak]) if first_peak else peak, "device": device,
          "later_peak_bytes": peak if first_peak else None,
          "rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
          "seconds": (times[-1] - times[1]) / (len(times) - 2) if len(times) > 2 else times[-1] - times[0],
          "loss": last["loss"], "line": lines[-1], "tensorflow": tf.__version__,
          "gpu": details.get("device_name") if gpus else None}


# -- the search, in the parent --------------------------------------------------------------------------------
def free_bytes():
  """MemAvailable of /proc/meminfo (None where it cannot be read)."""
  try:
    with open("/proc/meminfo", encoding="ascii") as f:
      return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
  except (OSError, StopIteration):
    return None


def run_probe(spec, timeout):
  """One probe in a fresh process; its figures, {"over": True} for a device OOM, or {"error": ...}."""
  cmd = [sys.executable, os.path.abspath(__file__), "--probe", json.dumps(spec)]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  try:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT, check=False)
  except subprocess.TimeoutExpired:
    return {"error": f"over --max_probe_seconds={timeout}"}
  results = [line for line in done.stdout.splitlines() if line.startswith("{")]
  if results:
    return json.loads(results[-1])
  tail = " | ".join(done.stderr.strip().splitlines()[-3:])
  return {"error": f"exit {done.returncode}: {tail}", "over": "ResourceExhausted" in done.stderr}


def fit(points):
  """(a, b) of peak = a + b*m through the two largest measured m (bytes)."""
  (m1, p1), (m2, p2) = sorted(points.items())[-2:]
  b = (p2 - p1) / (m2 - m1)
  return p2 - b * m2, b


def largest_under(a, b, budget, unit, cap):
  """The largest multiple of `unit` up to `cap` whose fitted peak is at most `budget` (0 if none); `cap` where the
  peak does not grow with m (b <= 0: a model too small for its activations to count)."""
  return min(cap, max(0, int((budget - a) // (b * unit)) * unit)) if b > 0 else cap


class Cell:
  """The probes of one cell (model, task, seq, combo): peak and seconds by micro-batch, what was over the budget,
  and why a probe was not run."""

  def __init__(self, spec, args, log):
    self.spec, self.args, self.log = spec, args, log
    self.unit = 2 if spec["task"] == "pretrain" else 1
    self.budget = args.budget_gib * GIB
    self.peaks, self.seconds, self.over, self.notes, self.first = {}, {}, set(), [], None
    self.predicted = None  # (m, the two micro-batches of the fit): the first fit where the peak grows with m
    self.unmeasured = None  # a larger micro-batch the fit says fits, whose probe was not run

  @property
  def best(self):
    return max((m for m in self.peaks if m not in self.over), default=0)

  def measure(self, m):
    """Probes micro-batch m: True (fits), False (over the budget), None (not run or failed; see notes)."""
    on_gpu = self.first and self.first.get("gpu")
    free = free_bytes()
    if self.first and not on_gpu and free is not None:
      a, b = fit(self.peaks) if len(self.peaks) > 1 and self.growing() else (0, max(self.peaks.values()) / self.best)
      need = a + b * m + self.first["rss_bytes"] - self.first["peak_bytes"]
      if need > free - self.args.ram_headroom_gib * GIB:
        self.notes.append(f"m={m} not run: needs ~{need / GIB:.1f} GiB of RAM, {free / GIB:.1f} GiB free "
                          f"(--ram_headroom_gib={self.args.ram_headroom_gib:g})")
        self.log(f"  {self.notes[-1]}")
        return None
    t0 = time.time()
    result = run_probe(dict(self.spec, micro_batch=m), self.args.max_probe_seconds)
    self.log(f"  m={m}: " + (f"peak {result['peak_bytes'] / GIB:.3f} GiB, rss {result['rss_bytes'] / GIB:.2f} GiB, "
                             f"step {result['seconds']:.1f} s" if result.get("peak_bytes") is not None
                             else result.get("error", "no peak figure")) + f" ({time.time() - t0:.0f} s in all)")
    if result.get("peak_bytes") is not None:
      self.first = self.first or result
      self.peaks[m], self.seconds[m] = result["peak_bytes"], result["seconds"]
      if result["peak_bytes"] > self.budget:
        self.over.add(m)
      return m not in self.over
    if result.get("over"):
      self.over.add(m)
      return False
    self.notes.append(f"m={m}: {result.get('error', 'the device keeps no allocator statistics')}")
    return None

  def growing(self):
    """Whether the peak grows with m between the two largest measured micro-batches at least a quarter as fast as
    in proportion to m: the activations, not the optimizer's update (weights, slots and gradients, the same for
    every m), set the peak, and the line through them predicts it."""
    (m1, p1), (m2, p2) = sorted(self.peaks.items())[-2:]
    return (p2 - p1) / p1 >= 0.25 * (m2 - m1) / m1

  def next_micro_batch(self):
    """The fit's largest micro-batch under the budget where the peak grows with m, else twice the largest that
    fits (at small m the optimizer's update sets the peak and the line through two points is flat)."""
    if self.growing():
      return largest_under(*fit(self.peaks), self.budget, self.unit, self.args.max_micro_batch)
    return min(2 * self.best, self.args.max_micro_batch)

  def search(self):
    """m = u, 2u; then the next micro-batch (`next_micro_batch`) between the largest that fits and the smallest
    that is over, until they are u apart (or --max_probes, or --confirm_next=0 once the fit says the largest that
    fits is it)."""
    u = self.unit
    for m in (u, 2 * u):
      if not self.measure(m):
        return self
    for _ in range(self.args.max_probes):
      lo, hi = self.best, min(self.over, default=10 ** 9)
      if hi <= lo + u:
        break
      m = self.next_micro_batch()
      if self.predicted is None and self.growing():
        self.predicted = (m, sorted(self.peaks)[-2:])
      m = min(max(m, lo + u if self.args.confirm_next else 0), hi - u)
      if m <= lo or m > self.args.max_micro_batch:
        break
      if self.measure(m) is None:
        self.unmeasured = m
        break
    return self

  def head(self, name, seq_len, combo):
    """The first cells of the cell's markdown row."""
    return f"| {name} | {self.spec['task']} | {seq_len} | {combo} |"

  def fixed_row(self, name, seq_len, combo):
    """The markdown row of --micro_batch's table: the one probe's (`first`) peaks and seconds, or why none."""
    head = self.head(name, seq_len, combo)
    if not self.peaks:
      return f"{head} - | - | - | {'; '.join(self.notes) or 'out of device memory'} |"
    later = self.first.get("later_peak_bytes")
    return (f"{head} {self.first['peak_bytes'] / GIB:.2f} | {'-' if later is None else f'{later / GIB:.2f}'} | "
            f"{self.first['seconds']:.2f} | |")

  def row(self, name, seq_len, combo):
    """The markdown row of the search's table."""
    head = self.head(name, seq_len, combo)
    u, m = self.unit, self.best
    pair = self.predicted[1] if self.predicted else sorted(self.peaks)[-2:]
    a_b = fit({k: self.peaks[k] for k in pair}) if len(pair) > 1 else None
    fit_text = f"{a_b[0] / GIB:.2f} + {a_b[1] / GIB:.4f}·m (m={pair[0]},{pair[1]})" if a_b else "-"
    notes = list(self.notes)
    if not self.peaks:
      return f"{head} - | - | - | - | {'; '.join(notes) or 'no probe'} |"
    if m == 0:
      return f"{head} 0 | - | - | {fit_text} | m={u}: {self.peaks[u] / GIB:.2f} GiB, over the budget |"
    if m + u in self.peaks:
      notes.insert(0, f"m={m + u}: {self.peaks[m + u] / GIB:.3f} GiB")
    elif m + u in self.over:
      notes.insert(0, f"m={m + u}: out of device memory")
    else:
      notes.insert(0, f"m={m + u} not measured")
    if self.predicted is not None and self.predicted[0] != m:
      notes.append(f"the fit predicted {self.predicted[0]}")
    if self.unmeasured:
      return (f"{head} ~{self.unmeasured} (predicted; measured {m}) | ~{(a_b[0] + a_b[1] * self.unmeasured) / GIB:.2f} "
              f"| - | {fit_text} | {'; '.join(notes[1:])} |")
    return (f"{head} {m} | {self.peaks[m] / GIB:.2f} | {self.seconds[m]:.1f} | {fit_text} | {'; '.join(notes)} |")


def parse_args(argv):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  p.add_argument("--models", default="base,large", help=f"Comma-separated: {', '.join(MODELS)}.")
  p.add_argument("--model_config", default=None, help="An xlnet_config.json to measure instead of --models.")
  p.add_argument("--tasks", default=",".join(TASKS), help="Comma-separated: finetune, pretrain.")
  p.add_argument("--seq_lens", default="128,256,512", help="Comma-separated sequence lengths.")
  p.add_argument("--combos", default="fp32,bf16,fp16,bf16+recompute,fp32+recompute",
                 help=f"Comma-separated: {', '.join(COMBOS)}.")
  p.add_argument("--budget_gib", type=float, default=16.0, help="Peak memory a step may take (GiB).")
  p.add_argument("--gpu_memory_limit_gib", type=float, default=None,
                 help="On a GPU: a logical device with this much memory (the budget the device enforces).")
  p.add_argument("--max_probe_seconds", type=int, default=1800, help="A probe running longer is stopped.")
  p.add_argument("--max_probes", type=int, default=8, help="Probes per cell after m = 1 and 2 (u and 2u).")
  p.add_argument("--max_micro_batch", type=int, default=1024, help="The largest micro-batch a probe may try.")
  p.add_argument("--ram_headroom_gib", type=float, default=4.0,
                 help="On a CPU: a probe runs only if it leaves this much RAM free (for the machine's other work).")
  p.add_argument("--probe_steps", type=int, default=1,
                 help="Steps per probe; the time is the mean of those after the first (with 1: the first's).")
  p.add_argument("--micro_batch", type=int, default=None, help="Probe only this micro-batch (no search).")
  p.add_argument("--jit_compile", action="store_true", help="The CLIs' --jit_compile in every probe.")
  p.add_argument("--confirm_next", type=int, default=1, help="1: also measure m + 1 (m + 2 for pretrain).")
  p.add_argument("--probe", default=None, help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  lists = {"models": MODELS, "tasks": TASKS, "combos": COMBOS}
  for flag, known in lists.items():
    values = [v for v in getattr(args, flag).split(",") if v]
    bad = [v for v in values if v not in known]
    if bad and not (flag == "models" and args.model_config):
      sys.exit(f"bench/memory.py: error: --{flag}: unknown {', '.join(bad)}. Use some of: {', '.join(known)}.")
    setattr(args, flag, values)
  if args.micro_batch is not None and (args.micro_batch < 1 or args.micro_batch % 2 and "pretrain" in args.tasks):
    sys.exit(f"bench/memory.py: error: --micro_batch must be positive, and even with the pretrain task (bi_data). "
             f"Received: {args.micro_batch}.")
  try:
    args.seq_lens = [int(v) for v in args.seq_lens.split(",")]
  except ValueError:
    sys.exit(f"bench/memory.py: error: --seq_lens must be comma-separated integers. Received: {args.seq_lens!r}.")
  # Each probe failed alone, after a TensorFlow start-up, with numpy's "ValueError: high <= 0" (sweep 25, C5).
  for task, shortest, need in (("finetune", 3, "at least 3 (A SEP CLS, as run_classifier.py's --max_seq_length)"),
                               ("pretrain", 10, "even and at least 10 (reuse_len seq/2, and 5 positions after it)")):
    if task in args.tasks and (bad := [s for s in args.seq_lens if s < shortest or task == "pretrain" and s % 2]):
      sys.exit(f"bench/memory.py: error: --seq_lens {','.join(map(str, bad))}: a {task} sequence must be {need}.")
  if not 0 < args.budget_gib < float("inf"):  # a negative budget ran the whole search (minutes), every probe over it
    sys.exit(f"bench/memory.py: error: --budget_gib must be a positive number of GiB. Received: {args.budget_gib:g}.")
  if args.model_config and not os.path.isfile(args.model_config):
    sys.exit(f"bench/memory.py: error: --model_config {args.model_config!r} is not a file. Pass an "
             "xlnet_config.json.")
  return args


def main(argv):
  args = parse_args(argv)
  if args.probe:
    try:
      result = probe(json.loads(args.probe))
    except ValueError as e:  # e.g. "No such flag: use_fp16." in a checkout without that flag
      result = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(result), flush=True)
    return
  if args.model_config:
    with open(args.model_config, encoding="utf-8") as f:
      models = {os.path.basename(args.model_config): json.load(f)}
  else:
    models = {name: MODELS[name] for name in args.models}
  t_start = time.time()
  rows, machine = [], None
  for (name, model), task, seq_len, combo in itertools.product(models.items(), args.tasks, args.seq_lens, args.combos):
    print(f"{name} {task} seq {seq_len} {combo}:", file=sys.stderr, flush=True)
    spec = dict(model=model, task=task, seq_len=seq_len, flags=dict(COMBOS[combo], jit_compile=args.jit_compile),
                steps=args.probe_steps, gpu_memory_limit_gib=args.gpu_memory_limit_gib)
    cell = Cell(spec, args, lambda line: print(line, file=sys.stderr, flush=True))
    if args.micro_batch:
      cell.measure(args.micro_batch)
      rows.append(cell.fixed_row(name, seq_len, combo))
    else:
      rows.append(cell.search().row(name, seq_len, combo))
    machine = machine or cell.first
  seconds = "s/step" if args.probe_steps > 1 else "s (1st step, incl. tracing)"
  xla = " (--jit_compile)" if args.jit_compile else ""
  if args.micro_batch:
    print(f"\nPeak memory and time of the training step at micro-batch {args.micro_batch}{xla}:\n")
    print(f"| model | task | seq | combo | peak (GiB) | peak of the steps after the first (GiB) | {seconds} | notes |"
          "\n|---|---|---|---|---|---|---|---|")
  else:
    print(f"\nLargest micro-batch whose training step peaks under {args.budget_gib:g} GiB{xla} (`~`: predicted by the "
          "fit, not measured):\n")
    print(f"| model | task | seq | combo | largest micro-batch | peak at it (GiB) | {seconds} | fitted peak (GiB) | "
          "notes |\n|---|---|---|---|---|---|---|---|---|")
  print("\n".join(rows))
  device = (machine or {}).get("gpu") or (machine or {}).get("device") or "?"
  mem_total = (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) / GIB
  print(f"\nmachine: {platform.machine()} {os.cpu_count()} CPUs, {mem_total:.0f} GiB RAM, device {device}"
        f"{f' limited to {args.gpu_memory_limit_gib:g} GiB' if args.gpu_memory_limit_gib else ''}, tensorflow "
        f"{(machine or {}).get('tensorflow', '?')}; peak = get_memory_info of the first device since "
        f"the probe's start; {args.probe_steps} step(s) per probe; {time.time() - t_start:.0f} s in all")


if __name__ == "__main__":
  main(sys.argv[1:])
