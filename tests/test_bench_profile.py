"""bench/profile_step.py's reading of a profiler trace, on a made-up XSpace laid out as TensorFlow's profiler writes
one on a GPU (the host plane's executor threads, CUPTI's kernels on the device plane's stream lines with the
launching op in their `tf_op` stat), so that the GPU side is checked before a GPU machine runs it."""

import importlib.util
import os
import sys
import types

import pytest
from tensorflow.tsl.profiler.protobuf import xplane_pb2

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "profile_step.py")
MS = 10 ** 9  # picoseconds


@pytest.fixture(name="profile_step")
def fixture_profile_step(monkeypatch):
  # The script imports the side-by-side harness's `common` (through bench/run_project.py) for its inputs, which
  # the functions read here do not use: an empty module stands in for it.
  monkeypatch.setitem(sys.modules, "common", types.ModuleType("common"))
  monkeypatch.setattr(sys, "path", list(sys.path))
  spec = importlib.util.spec_from_file_location("profile_step", SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  yield module
  sys.modules.pop("run_project", None)


def _events(plane, line_name, events, timestamp_ns=1000):
  """Adds a line of (name, start_ps, duration_ps, {stat name: ref name}) events to the plane."""
  ids = {m.name: i for i, m in plane.event_metadata.items()}
  stat_ids = {m.name: i for i, m in plane.stat_metadata.items()}

  def metadata(table, known, name):
    if name not in known:
      known[name] = len(table) + 1
      table[known[name]].id = known[name]
      table[known[name]].name = name
    return known[name]

  line = plane.lines.add(name=line_name, timestamp_ns=timestamp_ns)
  for name, start, duration, stats in events:
    event = line.events.add(metadata_id=metadata(plane.event_metadata, ids, name), offset_ps=start,
                            duration_ps=duration)
    for stat, value in stats.items():
      event.stats.add(metadata_id=metadata(plane.stat_metadata, stat_ids, stat),
                      ref_value=metadata(plane.stat_metadata, stat_ids, value))


def _gpu_space():
  space = xplane_pb2.XSpace()
  host = space.planes.add(name="/host:CPU")
  _events(host, "tf_Compute", [
      ("layer_0/MatMul:MatMul", 0, 2 * MS, {}),
      ("ExecutorState::Process:Process", 0, 5 * MS, {}),  # a container around the ops
      ("GpuExecutable::ExecuteAsyncOnStream", 2 * MS, 1 * MS, {})])  # a nested XLA function's run
  _events(host, "Host Threads/17", [("cuLaunchKernel", 0, MS // 10, {})])  # CUPTI's launches: not executor ops
  gpu = space.planes.add(name="/device:GPU:0")
  matmul = ("sm90_xmma_gemm_f32f32", 0, 2 * MS, {"tf_op": "gradient_tape/layer_0/MatMul:MatMul"})
  fusion = ("loop_add_fusion", 1 * MS, 2 * MS, {})  # a nested XLA function's kernel: no launching TF op
  _events(gpu, "Stream #7(Kernel)", [matmul, fusion])
  _events(gpu, "Stream #7(Kernel,MemcpyD2D)", [matmul])  # one stream's event on a second line counts once
  _events(gpu, "XLA Ops", [("fusion.1", 0, 9 * MS, {})])  # not a stream line
  return space


def test_host_op_events_are_the_executor_ops_and_nested_xla_runs(profile_step):
  events = list(profile_step.op_events(_gpu_space()))
  assert [(name, op_type) for name, op_type, _, _ in events] == [
      ("layer_0/MatMul", "MatMul"), ("xla", profile_step.XLA_FUNCTIONS)]
  assert [end - start for _, _, start, end in events] == [2 * MS, 1 * MS]


def test_gpu_kernels_are_summed_per_launching_op_type(profile_step):
  kernels = list(profile_step.device_events(_gpu_space()))
  assert [(kernel, op_type) for kernel, op_type, _, _ in kernels] == [
      ("sm90_xmma_gemm_f32f32", "MatMul"), ("loop_add_fusion", profile_step.XLA_FUNCTIONS)]
  totals = profile_step.device_summary(kernels, traced=1, top=5)
  # The two kernels overlap by 1 ms: some kernel runs 3 ms of the 3 ms span.
  assert totals == dict(gpu_kernels_per_step=2, gpu_busy_ms_per_step=3.0, gpu_span_ms_per_step=3.0,
                        gpu_ms_by_op_type={"MatMul": 2.0, profile_step.XLA_FUNCTIONS: 2.0})


def test_a_cpu_trace_has_no_gpu_summary(profile_step, capsys):
  space = _gpu_space()
  del space.planes[1]
  assert not list(profile_step.device_events(space))
  assert profile_step.device_summary([], traced=1, top=5) == {}
  assert "no GPU kernels" in capsys.readouterr().out
