"""Runs a tiny pretraining with one strategy (for tests/test_run_pretrain.py; run as a subprocess).

  python tests/helpers/pretrain_worker.py STRATEGY RECORD_INFO_DIR MODEL_DIR

mirrored uses 2 logical CPU devices; multi_worker_mirrored reads TF_CONFIG (one CPU replica per worker).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

strategy_name, record_dir, model_dir = sys.argv[1:4]
if strategy_name == "multi_worker_mirrored":
  # As the first TF call in the process; a bounded collective timeout so a lost peer cannot hang the test.
  strategy = tf.distribute.MultiWorkerMirroredStrategy(
      communication_options=tf.distribute.experimental.CommunicationOptions(
          implementation=tf.distribute.experimental.CommunicationImplementation.RING, timeout_seconds=60))
elif strategy_name == "mirrored":
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
else:
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")

import cli  # noqa: E402
import run_pretrain  # noqa: E402

tf.config.experimental.enable_op_determinism()
keras.utils.set_random_seed(3)
options = cli.defaults(
    run_pretrain.define_flags, record_info_dir=record_dir, model_dir=model_dir, n_layer=2, d_model=16, n_head=2,
    d_head=8, d_inner=24, ff_activation="gelu", untie_r=True, n_token=1000, dropout=0.0, dropatt=0.0, mem_len=12,
    train_batch_size=8, seq_len=32, reuse_len=16, bi_data=False, perm_size=8, mask_alpha=6, mask_beta=1,
    uncased=False, num_predict=6, seed=5, learning_rate=3e-3, train_steps=6, warmup_steps=2, clip=0.5,
    lr_layer_decay_rate=0.8, iterations=3, save_steps=6, max_save=2,
    # One mean over the global batch and a dense norm: N replicas then equal one device. (The original's
    # defaults, replica_mean and indexed_slices, equal its own towers, which tests/test_train_step.py checks.)
    loss_weighting="global_mean", clip_mode="dense")
result = run_pretrain.run(options, strategy)
print("FINAL", result)
