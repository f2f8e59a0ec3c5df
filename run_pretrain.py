"""XLNet pretraining: the original `train.py` and `train_gpu.py` in one tf.distribute loop.

  python run_pretrain.py --record_info_dir=proc_data/tfrecords --model_dir=exp/pretrain --train_batch_size=32 \\
      --seq_len=512 --reuse_len=256 --mem_len=384 --perm_size=256 --n_layer=24 --d_model=1024 --d_embed=1024 \\
      --n_head=16 --d_head=64 --d_inner=4096 --untie_r=True --mask_alpha=6 --mask_beta=1 --num_predict=85 \\
      --train_steps=500000 --warmup_steps=40000 --learning_rate=1e-4 --save_steps=10000 --iterations=1000

Every flag of the original scripts is accepted with its name and default (see README: `use_tpu` defaults to
False and means `--strategy=tpu`; `train_batch_size` is global). New: --strategy, --mems_reset, --jit_compile,
--seed, --deterministic, --model_config_path. Restarting the same command resumes from the latest checkpoint.
"""

import json
import os
import sys

import keras
import tensorflow as tf
from absl import app
from absl import flags as absl_flags
from absl import logging

import flags
from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
from xlnet_tf import training
from xlnet_tf.tasks.pretrain import input as pretrain_input
from xlnet_tf.tasks.pretrain import task as pretrain_task
from xlnet_tf.config import CONFIG_KEYS

DEFAULT_N_TOKEN = 32000


class FlagError(ValueError):
  """A flag value the run cannot use; main prints it as one line."""


def read_corpus_vocab_size(record_info_dir):
  """vocab_size from data_utils.py's corpus_info.json (in <save_dir>, the parent of tfrecords/), or None."""
  for record_dir in str(record_info_dir).split(","):
    for path in (os.path.join(record_dir, "corpus_info.json"),
                 os.path.join(os.path.dirname(os.path.normpath(record_dir)), "corpus_info.json")):
      if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
          return json.load(f).get("vocab_size")
  return None


def validate(fv, num_replicas=1):
  """One-line errors for flag combinations the run cannot satisfy (before anything heavy starts)."""
  if not fv.record_info_dir:
    raise FlagError("--record_info_dir is required: data_utils.py's <save_dir>/tfrecords directory.")
  if not fv.model_dir:
    raise FlagError("--model_dir is required: where checkpoints and logs go (a rerun resumes from it).")
  if fv.seq_len <= 0:
    raise FlagError(f"--seq_len must be > 0 (the data_utils.py value). Received: {fv.seq_len}.")
  if fv.perm_size is None or fv.perm_size <= 0:
    raise FlagError(f"--perm_size must be set (> 0; usually --reuse_len). Received: {fv.perm_size}.")
  if fv.reuse_len <= 0 or fv.reuse_len >= fv.seq_len:
    raise FlagError(f"--reuse_len must be in (0, seq_len); usually seq_len / 2. Received: reuse_len={fv.reuse_len}, "
                    f"seq_len={fv.seq_len}.")
  if fv.mem_len and fv.reuse_len > fv.seq_len:
    raise FlagError(f"--reuse_len ({fv.reuse_len}) may not exceed --seq_len ({fv.seq_len}) with --mem_len.")
  if fv.train_batch_size % fv.num_hosts:
    raise FlagError(f"--train_batch_size ({fv.train_batch_size}) must be divisible by --num_hosts "
                    f"({fv.num_hosts}).")
  if fv.train_batch_size % num_replicas:
    raise FlagError(f"--train_batch_size ({fv.train_batch_size}) must be divisible by the {num_replicas} "
                    "replicas.")
  bsz_per_replica = fv.train_batch_size // num_replicas
  if fv.bi_data and bsz_per_replica % 2:
    raise FlagError(f"bi_data needs an even per-replica batch size. Received: bsz_per_replica={bsz_per_replica} "
                    f"(--train_batch_size={fv.train_batch_size} over {num_replicas} replicas). Use an even "
                    "per-replica batch or --bi_data=False (with records written that way).")
  if fv.deterministic and fv.seed is None:
    raise FlagError("--deterministic needs --seed (the data permutations and initialisation must be seeded).")


def build_xlnet_config(fv):
  if fv.model_config_path:
    return XLNetConfig(json_path=fv.model_config_path)
  n_token = fv.n_token or read_corpus_vocab_size(fv.record_info_dir) or DEFAULT_N_TOKEN
  fields = {k: getattr(fv, k) for k in CONFIG_KEYS if k != "n_token"}
  return XLNetConfig(n_token=n_token, **fields)


def run(xlnet_config, run_config, data, train, strategy, model_dir, init_checkpoint=None, log_fn=print):
  """Pretrains from plain configs.

  Args:
    xlnet_config: XLNetConfig.
    run_config: RunConfig (is_training=True; mem_len, reuse_len, bi_data, ...).
    data: dict of `pretrain_input.get_input_fn` arguments (record_info_dir, split, bsz_per_host, seq_len,
      reuse_len, bi_data, perm_size, mask_alpha, mask_beta, uncased, num_predict, use_bfloat16, seed).
    train: dict: optimizer args (learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio,
      weight_decay, adam_epsilon), clip, lr_layer_decay_rate, train_batch_size, iterations, save_steps, max_save,
      mems_reset, jit_compile.
    strategy: a tf.distribute.Strategy.
    model_dir: str.
    init_checkpoint: optional checkpoint to initialise from (original TF1 or ours); ignored when resuming.

  Returns:
    The last loop's {loss, gnorm, lr, step}.
  """
  _, record_info = pretrain_input.get_input_fn(**data, global_batch_size=train["train_batch_size"])
  log_fn(f"Found {len(record_info['filenames'])} record files, {record_info['num_batch']} batches of "
         f"{data['bsz_per_host']} rows.")
  optimizer_args = {k: train[k] for k in ("learning_rate", "train_steps", "warmup_steps", "decay_method",
                                         "min_lr_ratio", "weight_decay", "adam_epsilon")}
  trainer = training.Trainer(
      strategy, lambda: XLNetModel(xlnet_config, run_config), pretrain_task.PretrainTask(), model_dir, optimizer_args,
      clip=train["clip"], lr_layer_decay_rate=train["lr_layer_decay_rate"],
      global_batch_size=train["train_batch_size"], mem_len=run_config.mem_len, mems_reset=train["mems_reset"],
      iterations=train["iterations"], save_steps=train["save_steps"], max_save=train["max_save"],
      jit_compile=train["jit_compile"], tokens_per_example=data["seq_len"])
  start = trainer.restore_or_init(init_checkpoint)
  log_fn(f"Training from step {start} to {train['train_steps']} on {strategy.num_replicas_in_sync} replica(s).")
  result = trainer.train(_dataset_fn(data, train["train_batch_size"]), log_fn=log_fn)
  log_fn(f"Checkpoints: {model_dir} (latest {trainer.manager.latest_checkpoint}); TensorBoard: "
         f"tensorboard --logdir {model_dir}")
  return result


def _dataset_fn(data, global_batch_size):
  def dataset_fn(input_context, start_step):
    input_fn, _ = pretrain_input.get_input_fn(**data, global_batch_size=global_batch_size, start_step=start_step)
    return input_fn(input_context)
  return dataset_fn


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  fv = absl_flags.FLAGS
  logging.set_verbosity(logging.INFO)
  training.keep_freed_memory()
  try:
    if fv.deterministic:
      tf.config.experimental.enable_op_determinism()
    if fv.seed is not None:
      keras.utils.set_random_seed(fv.seed)
    strategy = training.make_strategy(flags.strategy_name(fv), fv.num_core_per_host, fv.tpu, fv.tpu_zone,
                                      fv.gcp_project)
    training.warn_if_emulated_bfloat16(fv.use_bfloat16, strategy)
    validate(fv, strategy.num_replicas_in_sync)
    xlnet_config = build_xlnet_config(fv)
    run_config = RunConfig(is_training=True, use_tpu=fv.use_tpu, use_bfloat16=fv.use_bfloat16, dropout=fv.dropout,
                           dropatt=fv.dropatt, init=fv.init, init_range=fv.init_range, init_std=fv.init_std,
                           mem_len=fv.mem_len, reuse_len=fv.reuse_len, bi_data=fv.bi_data, clamp_len=fv.clamp_len,
                           same_length=fv.same_length)
    data = dict(record_info_dir=fv.record_info_dir, split="train", bsz_per_host=fv.train_batch_size // fv.num_hosts,
                seq_len=fv.seq_len, reuse_len=fv.reuse_len, bi_data=fv.bi_data, perm_size=fv.perm_size,
                mask_alpha=fv.mask_alpha, mask_beta=fv.mask_beta, uncased=fv.uncased, num_predict=fv.num_predict,
                use_bfloat16=fv.use_bfloat16, seed=fv.seed)
    train = dict(learning_rate=fv.learning_rate, train_steps=fv.train_steps, warmup_steps=fv.warmup_steps,
                 decay_method=fv.decay_method, min_lr_ratio=fv.min_lr_ratio, weight_decay=fv.weight_decay,
                 adam_epsilon=fv.adam_epsilon, clip=fv.clip, lr_layer_decay_rate=fv.lr_layer_decay_rate,
                 train_batch_size=fv.train_batch_size, iterations=fv.iterations, save_steps=fv.save_steps,
                 max_save=fv.max_save, mems_reset=fv.mems_reset, jit_compile=fv.jit_compile)
    if training.is_chief(strategy):
      training.write_run_files(fv.model_dir, xlnet_config, fv.flag_values_dict())
    run(xlnet_config, run_config, data, train, strategy, fv.model_dir, fv.init_checkpoint,
        log_fn=lambda line: print(line, flush=True))
  except (ValueError, FileNotFoundError, FloatingPointError) as e:
    sys.exit(f"run_pretrain.py: error: {e}")


if __name__ == "__main__":
  flags.define_run_config_flags(dropout=0.0, dropatt=0.0)
  flags.define_optimizer_flags(learning_rate=1e-4, train_steps=100000, min_lr_ratio=0.001)
  flags.define_hardware_flags(num_core_per_host=8, iterations=1000, max_save=100000)
  flags.define_pretrain_flags()
  app.run(main)
