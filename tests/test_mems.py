"""training.mems.Mems: per-replica rows, gathered for checkpoints (replica c's rows at [c*b, (c+1)*b)) and scattered
back; nothing without memory."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from xlnet_tf.training.mems import Mems

N_LAYER, MEM_LEN, BSZ, D_MODEL = 2, 3, 5, 4  # bsz per replica

# Two replicas on two logical CPUs: logical devices must be set before any TF op runs, so in a subprocess.
MIRRORED_SCRIPT = f"""
import json
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from xlnet_tf.training.mems import Mems

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
  mems = Mems(strategy, {N_LAYER}, {MEM_LEN}, {BSZ}, {D_MODEL})

def fill():  # replica c, layer i: 10 * c + i + 1 everywhere
  c = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
  mems.assign([tf.fill([{MEM_LEN}, {BSZ}, {D_MODEL}], 10.0 * c + i + 1) for i in range({N_LAYER})])

tf.function(lambda: strategy.run(fill))()
gathered = mems.numpy()
tf.function(lambda: strategy.run(mems.reset))()
zeroed = mems.numpy()
mems.global_variable.assign(gathered)
mems.scatter()
read = strategy.experimental_local_results(tf.function(lambda: strategy.run(lambda: tf.stack(mems.read())))())
print(json.dumps(dict(gathered=gathered.tolist(), zeroed=zeroed.tolist(), read=[r.numpy().tolist() for r in read])))
"""


def test_replicas_rows_are_gathered_side_by_side_and_scattered_back():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT], cwd=root, capture_output=True, text=True,
                       check=True, env=dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2"))
  result = json.loads(out.stdout.strip().splitlines()[-1])
  gathered = np.array(result["gathered"])
  assert gathered.shape == (N_LAYER, MEM_LEN, 2 * BSZ, D_MODEL)
  for c in range(2):
    for i in range(N_LAYER):
      np.testing.assert_array_equal(gathered[i, :, c * BSZ:(c + 1) * BSZ], 10 * c + i + 1)
  np.testing.assert_array_equal(result["zeroed"], 0)
  for c, rows in enumerate(result["read"]):  # each replica reads back its own rows of the checkpointed copy
    np.testing.assert_array_equal(rows, gathered[:, :, c * BSZ:(c + 1) * BSZ])


def test_without_memory_there_is_nothing():
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  for mem_len in (None, 0):
    with strategy.scope():
      mems = Mems(strategy, N_LAYER, mem_len, BSZ, D_MODEL)
    assert mems.variables == [] and mems.global_variable is None
    assert mems.read() is None and mems.numpy() is None
    mems.assign(None)
    mems.scatter()


def test_every_loop_zeroes_the_mems_at_multiples_of_iterations_wherever_the_loops_are_cut(tmp_path):
  """--mems_reset=every_loop zeroed the mems at the start of every host call, and calls are cut at save points and
  at a stop's step: another --save_steps, or a SIGTERM and its resume, gave other numbers, exit 0. The zeroing now
  follows the step (before every multiple of --iterations), so the runs below end in the same state, bit for bit."""
  from test_fp16 import CONFIG, BSZ, MEM_LEN, REUSE_LEN, dataset_fn, state  # pylint: disable=import-outside-toplevel
  from xlnet_tf import training  # pylint: disable=import-outside-toplevel
  from xlnet_tf.config import RunConfig, XLNetConfig  # pylint: disable=import-outside-toplevel
  from xlnet_tf.modeling.xlnet import XLNetModel  # pylint: disable=import-outside-toplevel
  from xlnet_tf.tasks.pretrain.task import PretrainTask  # pylint: disable=import-outside-toplevel

  def run(name, save_steps, train_steps=(7,)):
    run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0,
                           mem_len=MEM_LEN, reuse_len=REUSE_LEN)
    for steps in train_steps:  # each a new process's run: the same command resumed
      tf.keras.utils.set_random_seed(1)
      trainer = training.Trainer(
          training.make_strategy("one_device"), lambda: XLNetModel(XLNetConfig(**CONFIG), run_config),
          PretrainTask(), str(tmp_path / name),
          training.TrainConfig(learning_rate=1e-2, train_steps=7, global_batch_size=BSZ, iterations=3,
                               save_steps=save_steps, mems_reset="every_loop"))
      trainer.restore_or_init()
      trainer.train(dataset_fn, train_steps=steps, log_fn=lambda _: None)
    return state(trainer)

  want = run("uninterrupted", None)
  for got in (run("saved_every_2", 2), run("stopped_at_4", None, train_steps=(4, 7))):
    assert sorted(got) == sorted(want)
    for key, value in want.items():
      np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_mems_reset_auto_is_the_original_s_for_the_strategy(monkeypatch):
  """--mems_reset=auto: every_loop on TPU (train.py's TPUEstimator starts each host loop from zero mems), never
  elsewhere (train_gpu.py); an explicit value stays."""
  import cli  # pylint: disable=import-outside-toplevel
  import run_pretrain  # pylint: disable=import-outside-toplevel
  o = cli.defaults(run_pretrain.define_flags)
  assert o.mems_reset == "auto"
  assert run_pretrain.for_strategy(o, tf.distribute.get_strategy()).mems_reset == "never"

  class FakeTPUStrategy:  # no TPU here: the type the check looks for
    pass

  monkeypatch.setattr(tf.distribute, "TPUStrategy", FakeTPUStrategy)
  assert run_pretrain.for_strategy(o, FakeTPUStrategy()).mems_reset == "every_loop"
  never = cli.defaults(run_pretrain.define_flags, mems_reset="never")
  assert run_pretrain.for_strategy(never, FakeTPUStrategy()).mems_reset == "never"
  assert o.mems_reset == "auto"  # the caller's options are left as they are
