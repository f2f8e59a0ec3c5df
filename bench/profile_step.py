"""Where the time of xlnet-tf's step goes, op by op: a TF profiler trace of the side-by-side runner's step
(`bench/run_project.py`: the Trainer's real pretraining step, or the fine-tuning forward), summed per op type and
per part of the step.

  .venv/bin/python bench/profile_step.py --workload pretrain_step --size small       # 2 threads, 3 traced steps
  .venv/bin/python bench/profile_step.py --workload finetune_fwd --size small --logdir /tmp/trace

Flags: the harness's (`--workload`, `--size`, `--threads`, `--inter-threads`, `--warmup`, `--steps` = traced
steps), plus `--logdir` (keep the trace there, for TensorBoard's profile plugin), `--top` (rows per table),
`--mixed_bf16` (as `bench/run_project.py`'s). The last line is a JSON line of the totals per step.
PERF_HARNESS_DIR: the harness (default ../shared/perf; its `common.py` builds the inputs).

Op time is the sum of the executor's op events (`tf_Compute` threads of the host plane); with 2 intra-op threads
one op's event covers its work on both, but ops that run at the same time on the inter-op threads each count, so
the total can exceed the step's wall time (2.6 s of op time in a 1.45 s small pretraining step); read the shares.
The "wall ms" columns split the wall time instead (`wall_shares`): an op that runs alone gets all of that time, two
ops that run at once half each, so they add up to the step's wall time less the time no op ran. On a GPU the
host's op events are each op's host side (the executor and the kernel's launch): their busy time against the
step's time says whether the host bounds the step.
Parts: the optimizer (`xl_net_adam/`), the tied LM head and its loss (`lm_loss`, the cross-entropy), clipping and the
embedding rows' norm, the nested XLA-compiled functions (GELU, LayerNorm, cross-entropy, dropout bits: their runs
carry no op name, so forward and backward are one part), and the rest split into forward and backward
(`gradient_tape/`), matmuls apart.
"""

import argparse
import collections
import glob
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("PERF_HARNESS_DIR", os.path.join(HERE, "..", "..", "shared", "perf"))
sys.path.insert(0, HERE)
import run_project  # pylint: disable=wrong-import-position  # noqa: E402
from run_project import common  # pylint: disable=wrong-import-position  # noqa: E402

MATMULS = ("MatMul", "BatchMatMulV2", "_FusedMatMul")
CONTAINERS = ("Process", "Generator", "RunWithBorrowedArgs", "DoCompute", "Root", "Prefetch", "Record",
              "StartRegion", "StopRegion", "Start", "Done", "Execute")  # Execute: XLA's, inside its function's run
XLA_FUNCTIONS = "XLA functions (GELU, LayerNorm, cross-entropy, dropout bits)"


def part(op_name, op_type):
  """The part of the step an op belongs to (see the module docstring)."""
  if op_type == XLA_FUNCTIONS:
    return XLA_FUNCTIONS
  if "adam" in op_name:
    return "optimizer (Adam)"
  if "lm_loss" in op_name or "SoftmaxCrossEntropy" in op_type:
    return "LM head and loss"
  if "global_norm" in op_name or "clip" in op_name or op_type == "UnsortedSegmentSum":
    return "clipping, embedding rows"
  side = "backward" if "gradient_tape" in op_name else "forward"
  return f"{side} matmuls" if op_type in MATMULS else f"{side} other"


def _plain_type(op_type):
  """The op type without oneDNN's rewrite prefix: on CPUs with AVX-512 the graph runs `_MklMatMul`,
  `_MklNativeFusedMatMul`, ... where an AVX2 CPU runs `MatMul`, `_FusedMatMul`."""
  for prefix in ("_MklNative", "_Mkl"):
    if op_type.startswith(prefix):
      plain = op_type[len(prefix):]
      return "_" + plain if plain.startswith("Fused") else plain
  return op_type


def op_events(logdir):
  """(op name, op type, start, end) of every executor op event in the trace under logdir; times in picoseconds."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
  (path,) = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
  space = xplane_pb2.XSpace()
  with open(path, "rb") as f:
    space.ParseFromString(f.read())
  (plane,) = [p for p in space.planes if p.name == "/host:CPU"]
  for line in plane.lines:
    if not line.name.startswith("tf_Compute"):
      continue
    for event in line.events:
      name = plane.event_metadata[event.metadata_id].name
      if name in ("CpuExecutable::ExecuteAsyncOnStream", "GpuExecutable::ExecuteAsyncOnStream"):
        # A nested jit_compile function's run (the XLA-compiled element-wise functions): its events carry no op
        # name; the executor's `ExecutorState::ProcessAsync::Start` event around it is skipped as a container.
        yield "xla", XLA_FUNCTIONS, *_span(line, event)
        continue
      op_name, _, op_type = name.rpartition(":")
      op_type = _plain_type(op_type)
      if op_name and op_type not in CONTAINERS:
        yield op_name, op_type, *_span(line, event)


def _span(line, event):
  start = line.timestamp_ns * 1000 + event.offset_ps
  return start, start + event.duration_ps


def wall_shares(spans):
  """Each op's share of the wall time, from its (start, end): the time it ran alone, plus an equal part of the time
  it ran beside others (two ops at once on the two inter-op threads get half each). The shares add up to the time
  in which some op ran, unlike op time, which counts such time twice.

  Returns:
    (list of shares, parallel to spans; the time in which no op ran), in the units of spans.
  """
  edges = sorted([(start, 1, i) for i, (start, _) in enumerate(spans)]
                 + [(end, 0, i) for i, (_, end) in enumerate(spans)])  # at one time, ends before starts
  shares, idle, running, last = [0.0] * len(spans), 0, set(), edges[0][0]
  for time, starts, i in edges:
    if running:
      for j in running:
        shares[j] += (time - last) / len(running)
    else:
      idle += time - last
    last = time
    if starts:
      running.add(i)
    else:
      running.discard(i)
  return shares, idle


def main():
  pre_p = argparse.ArgumentParser(add_help=False)
  pre_p.add_argument("--logdir", default=None)
  pre_p.add_argument("--top", type=int, default=15)
  pre_p.add_argument("--mixed_bf16", action="store_true", help="as bench/run_project.py's")
  own, rest = pre_p.parse_known_args()
  cfg = common.parse_args("project", rest)
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  step, _, _ = run_project.build_step(cfg, mixed_bf16=own.mixed_bf16, project_dir=os.path.dirname(HERE))
  for _ in range(cfg["warmup_steps"]):
    step()
  traced = cfg["timed_steps"] if "--steps" in " ".join(rest) else 3
  logdir = own.logdir or tempfile.mkdtemp(prefix="xlnet-profile-")
  tf.profiler.experimental.start(logdir)
  for _ in range(traced):
    step()
  tf.profiler.experimental.stop()

  events = list(op_events(logdir))
  shares, idle = wall_shares([(start, end) for _, _, start, end in events])
  by_part, by_type, count = collections.Counter(), collections.Counter(), collections.Counter()
  wall_part, wall_type = collections.Counter(), collections.Counter()
  for (op_name, op_type, start, end), share in zip(events, shares):
    step_part = part(op_name, op_type)
    by_part[step_part] += (end - start) * 1e-12 / traced
    by_type[op_type] += (end - start) * 1e-12 / traced
    wall_part[step_part] += share * 1e-12 / traced
    wall_type[op_type] += share * 1e-12 / traced
    count[op_type] += 1
  total = sum(by_part.values())
  wall = sum(wall_part.values())
  model_gflop = common.flops(cfg)[0] / 1e9
  matmul_s = sum(by_type[t] for t in MATMULS)
  print(f"{cfg['workload']} {cfg['size']}, {cfg['threads']} threads: {total:.3f} s of op time per step "
        f"({traced} traced steps); matmuls {matmul_s:.3f} s = {100 * matmul_s / total:.0f} %, "
        f"{model_gflop / matmul_s:.0f} GFLOP/s over the model's {model_gflop:.1f} GFLOP")
  print(f"wall time: {wall:.3f} s per step with some op running, {idle * 1e-12 / traced:.3f} s with none (between "
        f"the first op and the last); wall ms = each op's share of it (time beside other ops split between them)")
  print(f"\n{'part of the step':<28} {'ms/step':>9} {'share':>7} {'wall ms':>9}")
  for name, seconds in by_part.most_common():
    print(f"{name:<28} {1e3 * seconds:9.1f} {100 * seconds / total:6.1f}% {1e3 * wall_part[name]:9.1f}")
  print(f"\n{'op type':<28} {'ms/step':>9} {'share':>7} {'wall ms':>9} {'ops/step':>9}")
  for name, seconds in by_type.most_common(own.top):
    print(f"{name:<28} {1e3 * seconds:9.1f} {100 * seconds / total:6.1f}% {1e3 * wall_type[name]:9.1f} "
          f"{count[name] // traced:9d}")
  print(f"\ntrace: {logdir}")
  print(json.dumps(dict(bench="profile_step", workload=cfg["workload"], size=cfg["size"], mixed_bf16=own.mixed_bf16,
                        traced_steps=traced, ops_per_step=sum(count.values()) // traced,
                        op_ms_per_step=round(1e3 * total, 2), busy_ms_per_step=round(1e3 * wall, 2),
                        idle_ms_per_step=round(idle * 1e-9 / traced, 2))))


if __name__ == "__main__":
  main()
