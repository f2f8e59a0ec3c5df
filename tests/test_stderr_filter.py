"""The CLIs' stderr filter: TensorFlow's C++ noise is dropped, every other line kept in order (also one written just
before the process dies), and `-v 1` shows everything."""

import json
import subprocess
import sys

import pytest

from xlnet_tf import stderr_filter

# Lines a tiny bfloat16 run_pretrain.py printed (TF 2.21, a 2-core AMD EPYC), the long op dumps cut short.
NOISE = [
    "W0000 00:00:1795779700.010056   10378 op_level_cost_estimator.cc:699] Error in PredictCost() for the op: "
    'goo.gle/debugproto  op: "Softmax" attr { key: "T" value { type: DT_BFLOAT16 } } inputs { dtype: DT_BFLOAT16',
    "E0000 00:00:1795779701.864012   10378 util.cc:131] oneDNN supports DT_INT32 only on platforms with AVX-512. "
    "Falling back to the default Eigen-based implementation if present.",
    "I0000 00:00:1795779849.225280   13872 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders.",
    "E0000 00:00:1795779853.506038   13872 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1795779702.260431   10531 service.cc:153] XLA service 0x7fc64c0039d0 initialized for platform Host "
    "(this does not guarantee that XLA will be used). Devices:",
    "I0000 00:00:1795779703.765943   10530 device_compiler.h:208] Compiled cluster using XLA!  This line is logged at "
    "most once for the lifetime of the process.",
    "I1127 11:41:57.767117 140491356756864 functional_saver.py:440] Sharding callback duration: 60 microseconds",
    # --xla_cache_dir, loading an entry on the machine that wrote it
    "E0000 00:00:1795809770.112576    4380 text_format.cc:378] Error parsing text-format "
    "tensorflow.XlaSerializedCacheEntry: 2:1: Expected identifier, got: 5",
    "E0000 00:00:1795809770.541177    4380 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. Target machine feature "
    "+prefer-no-scatter is not  supported on the host machine. Machine type used for XLA:CPU compilation doesn't "
    "match the machine type for execution. Compile machine features: [+64bit,+adx] vs host machine features: [adx]",
]
SIGNAL = [
    "E0000 00:00:1795779701.864012   10378 util.cc:131] oneDNN failed to create a primitive: out of memory",
    "E0000 00:00:1795779853.506038   13872 cuda_platform.cc:52] failed call to cuDevicePrimaryCtxRetain: "
    "CUDA_ERROR_OUT_OF_MEMORY",
    "W0000 00:00:1795779700.010056   10378 op_level_cost_estimator.cc:699] Some other cost-model warning",
    "I1127 11:41:57.855973 140491356756864 trainer.py:488] Saved checkpoint /tmp/pt/ckpt-4",
    "W1127 11:41:57.855973 140491356756864 runtime.py:180] --use_bfloat16 on a CPU without native bfloat16",
    "run_pretrain.py: error: --record_info_dir is required: data_utils.py's <save_dir>/tfrecords directory.",
    "Traceback (most recent call last):",
    "E0000 00:00:1795809770.112576    4380 text_format.cc:378] Error parsing text-format tensorflow.TFRecordInfo",
    "E0000 00:00:1795809770.541177    4380 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. Target machine feature "
    "+avx512fp16 is not  supported on the host machine. This could lead to execution errors such as SIGILL.",
]


@pytest.mark.parametrize("line", NOISE)
def test_noise_is_dropped(line):
  assert stderr_filter.is_noise(line)


@pytest.mark.parametrize("line", SIGNAL)
def test_a_real_line_is_kept(line):
  assert not stderr_filter.is_noise(line)


# Writes the lines (alternately through Python's sys.stderr and straight to descriptor 2, as the C++ runtime does)
# after cli.filter_stderr(argv), then ends with os._exit: nothing waits for the filter, as in a crash.
_SCRIPT = """
import json, os, sys
sys.path.insert(0, os.getcwd())
import cli
cli.filter_stderr(json.loads(sys.argv[1]))
for i, line in enumerate(json.loads(sys.argv[2])):
  if i % 2:
    sys.stderr.write(line + "\\n")
    sys.stderr.flush()
  else:
    os.write(2, (line + "\\n").encode())
os._exit(3)
"""


def _stderr_of_a_process(argv):
  """(the stderr lines of _SCRIPT, the lines it wrote): noise and real lines in turn."""
  lines = [line for pair in zip(NOISE, SIGNAL, strict=True) for line in pair]
  proc = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(argv), json.dumps(lines)], capture_output=True,
                        text=True, timeout=60)
  assert proc.returncode == 3, proc.stderr
  return proc.stderr.splitlines(), lines


def test_a_process_shows_the_real_lines_in_order_even_when_it_dies():
  got, _ = _stderr_of_a_process(["tool.py", "--seed=1"])
  assert got == SIGNAL


def test_verbosity_1_shows_everything():
  for argv in (["tool.py", "-v", "1"], ["tool.py", "--verbosity=1", "--seed=1"]):
    got, lines = _stderr_of_a_process(argv)
    assert got == lines


def test_the_cli_modules_import_no_tensorflow_and_define_no_flag():
  """A CLI imports `cli` (then `flags`) before TensorFlow so that `filter_stderr()` comes first: neither module may
  import TensorFlow, nor define a flag before a script's `define_flags()` asks."""
  script = ("import os, sys; sys.path.insert(0, os.getcwd()); import cli, flags; from absl import flags as f; "
            "print('tensorflow' in sys.modules, len(f.FLAGS.get_flags_for_module(flags)))")
  proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
  assert proc.stdout.split() == ["False", "0"], proc.stderr
