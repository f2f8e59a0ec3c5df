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
step's time says whether the host bounds the step. Where the profiler's CUPTI library loads (CUDA 12's
libcupti.so.12 on the library path), the GPU's own kernels are summed too: per launching op type, the longest
kernels, and the time some kernel ran per step (`device_events`, `device_summary`).
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


def read_space(logdir):
  """The trace under logdir, an XSpace."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
  (path,) = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
  space = xplane_pb2.XSpace()
  with open(path, "rb") as f:
    space.ParseFromString(f.read())
  return space


def op_events(space):
  """(op name, op type, start, end) of every executor op event of the XSpace's host plane; times in picoseconds."""
  for plane in space.planes:
    if plane.name == "/host:CPU":
      yield from _host_op_events(plane)


def _host_op_events(plane):
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


def device_events(space):
  """(kernel, op type, start, end) of every kernel and copy on a GPU's streams in the XSpace (picoseconds); none
  when the trace has no GPU plane (no GPU, or CUPTI did not load). The op type is that of the TensorFlow op that
  launched it (its `tf_op` stat, "name:type"); a kernel of a nested XLA-compiled function has the fusion's name only
  and counts as `XLA_FUNCTIONS`. An event on two lines of one stream counts once."""
  seen = set()
  for plane in space.planes:
    if not plane.name.startswith("/device:GPU"):
      continue
    stat_names = {i: m.name for i, m in plane.stat_metadata.items()}
    for line in plane.lines:
      if not line.name.startswith("Stream"):
        continue
      for event in line.events:
        kernel = plane.event_metadata[event.metadata_id].name
        start, end = _span(line, event)
        if (kernel, start, end) in seen:
          continue
        seen.add((kernel, start, end))
        op_type = XLA_FUNCTIONS
        for stat in event.stats:
          if stat_names.get(stat.metadata_id) == "tf_op":
            value = stat.str_value or stat_names.get(stat.ref_value, "")
            op_type = _plain_type(value.rpartition(":")[2]) or XLA_FUNCTIONS
        yield kernel, op_type, start, end


def busy_time(spans):
  """The time in which at least one of the (start, end) spans runs."""
  busy, last_end = 0, None
  for start, end in sorted(spans):
    if last_end is None or start > last_end:
      busy += end - start
      last_end = end
    elif end > last_end:
      busy += end - last_end
      last_end = end
  return busy


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

  space = read_space(logdir)
  totals = dict(bench="profile_step", workload=cfg["workload"], size=cfg["size"], mixed_bf16=own.mixed_bf16,
                traced_steps=traced)
  events = list(op_events(space))
  if events:
    totals.update(host_summary(events, cfg, traced, own.top))
  else:  # a trace whose host plane names its threads otherwise: say what it has, and go on to the GPU's kernels
    print("no executor op events in the trace; its planes and lines: %s" % "; ".join(
        "%s: %s" % (p.name, ", ".join(sorted({line.name for line in p.lines})[:12])) for p in space.planes))
  totals.update(device_summary(list(device_events(space)), traced, own.top))
  print(f"\ntrace: {logdir}")
  print(json.dumps(totals))


def host_summary(events, cfg, traced, top):
  """Prints where the host's op time goes (per part of the step and per op type) and returns its totals for the
  JSON line."""
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
        f"{model_gflop / max(matmul_s, 1e-12):.0f} GFLOP/s over the model's {model_gflop:.1f} GFLOP")
  print(f"wall time: {wall:.3f} s per step with some op running, {idle * 1e-12 / traced:.3f} s with none (between "
        f"the first op and the last); wall ms = each op's share of it (time beside other ops split between them)")
  print(f"\n{'part of the step':<28} {'ms/step':>9} {'share':>7} {'wall ms':>9}")
  for name, seconds in by_part.most_common():
    print(f"{name:<28} {1e3 * seconds:9.1f} {100 * seconds / total:6.1f}% {1e3 * wall_part[name]:9.1f}")
  print(f"\n{'op type':<28} {'ms/step':>9} {'share':>7} {'wall ms':>9} {'ops/step':>9}")
  for name, seconds in by_type.most_common(top):
    print(f"{name:<28} {1e3 * seconds:9.1f} {100 * seconds / total:6.1f}% {1e3 * wall_type[name]:9.1f} "
          f"{count[name] // traced:9d}")
  return dict(ops_per_step=sum(count.values()) // traced, op_ms_per_step=round(1e3 * total, 2),
              busy_ms_per_step=round(1e3 * wall, 2), idle_ms_per_step=round(idle * 1e-9 / traced, 2))


def device_summary(kernels, traced, top):
  """Prints where a GPU's time goes (kernel time per op type and the longest kernels) and returns its totals for the
  JSON line: the time some kernel ran per step against the step's wall time says whether the GPU waits for the host."""
  if not kernels:
    print("\nno GPU kernels in the trace (no GPU, or the profiler's CUPTI library did not load)")
    return {}
  per_type, per_kernel, count = collections.Counter(), collections.Counter(), collections.Counter()
  for kernel, op_type, start, end in kernels:
    per_type[op_type] += (end - start) * 1e-9 / traced
    per_kernel[kernel] += (end - start) * 1e-9 / traced
    count[op_type] += 1
  busy = busy_time([(start, end) for _, _, start, end in kernels]) * 1e-9 / traced
  first, last = min(k[2] for k in kernels), max(k[3] for k in kernels)
  span = (last - first) * 1e-9 / traced
  print(f"\nGPU: some kernel running {busy:.1f} ms per step of the {span:.1f} ms from the first kernel to the last "
        f"({len(kernels) // traced} kernels and copies per step)")
  print(f"{'op type (GPU)':<60} {'ms/step':>9} {'kernels/step':>13}")
  for name, ms in per_type.most_common(top):
    print(f"{name[:60]:<60} {ms:9.2f} {count[name] // traced:13d}")
  print(f"{'kernel':<60} {'ms/step':>9}")
  for name, ms in per_kernel.most_common(top):
    print(f"{name[:60]:<60} {ms:9.2f}")
  return dict(gpu_kernels_per_step=len(kernels) // traced, gpu_busy_ms_per_step=round(busy, 2),
              gpu_span_ms_per_step=round(span, 2),
              gpu_ms_by_op_type={k: round(v, 2) for k, v in per_type.most_common(top)})


if __name__ == "__main__":
  main()
