"""From the tools' flags to the library: the one-line checks of flag values a run makes before it reads or writes
anything, and the plain configs the library takes (`RunConfig`, `TrainConfig`, the `XLNetConfig` and SentencePiece
model, the strategy of `start`), built from the options namespace `o` that `cli.values()` (or `cli.defaults(...)`)
makes. A bad value is a `FlagError` naming the flag; library code in `xlnet_tf/` never reads flags.

Importing this module has no side effects and no TensorFlow: a CLI imports it before `cli.start_script()`.
"""

import os

from absl import logging

import flags
from flags import FlagError  # the tools raise it as cli.FlagError



def require_file(path, flag, what, directory_ok=False):
  """FlagError unless --{flag} names an existing file (or, with directory_ok, directory); `what`: what the user
  should pass."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top  (light to import)
  if not path:
    raise FlagError(f"--{flag} is required: {what}.")
  if not fileio.exists(path):
    if os.path.islink(path):  # to nowhere (an unmounted disk?), or looping: its end is a link again
      target = os.path.realpath(path)
      why = (f"a symbolic link that loops ({path} -> {os.readlink(path)})" if os.path.lexists(target) else
             f"a symbolic link to {target}, which does not exist")
      raise FlagError(f"--{flag}={path} is {why}. Pass {what}.")
    raise FlagError(f"--{flag}={path} does not exist. Pass {what}.")
  if not directory_ok and fileio.isdir(path):
    raise FlagError(f"--{flag}={path} is a directory. Pass {what}.")


def require_spiece_model(o):
  """FlagError unless --spiece_model_file names a file (a directory passes: its loader's line names the file to
  pass). Unset where the model to start from has a spiece.model beside it (a released checkpoint's directory, a
  HuggingFace model directory): the line names that file."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  what = "the SentencePiece model (spiece.model) of the model"
  if not o.spiece_model_file and o.init_checkpoint:
    directory = o.init_checkpoint if fileio.isdir(o.init_checkpoint) else os.path.dirname(o.init_checkpoint)
    if fileio.exists(os.path.join(directory, "spiece.model")):
      what += f", such as {os.path.join(directory, 'spiece.model')} beside --init_checkpoint"
  require_file(o.spiece_model_file, "spiece_model_file", what, directory_ok=True)


def require_output_dirs(o, *names, marker=None):
  """FlagError unless every named flag of the options `o` that is set names a directory this run may write: never
  an existing file; with `marker` (the directory is replaced whole) an empty directory or one holding `marker`
  (`fileio.check_output_dir`); for --model_dir, a name without glob wildcards. --model_dir is checked only for a
  run that trains: evaluation, prediction and export only read it (a read-only one was refused); so is --output_dir
  where it may hold the cached records they read (a read-only one was refused; one that must be written fails on
  the write, naming the file)."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  for name in (n for n in names if n != "model_dir" or getattr(o, "do_train", True)):
    if name == "model_dir" and o.model_dir and any(c in o.model_dir for c in "[]*?"):
      raise FlagError(f"--model_dir {o.model_dir} has [ ] * or ? in its name, which TensorFlow's checkpoint code "
                      "reads as wildcards (its clean-up of old checkpoints would delete those of another directory, "
                      "such as m1 for m[1]). Pass a name without them.")
    if getattr(o, name):
      try:
        fileio.check_output_dir(getattr(o, name), f"--{name}", marker,
                                writable=name != "output_dir" or getattr(o, "do_train", True))
      except ValueError as e:
        raise FlagError(str(e)) from None


def model_source(o):
  """(path, flag) of the checkpoint whose HuggingFace config.json gives the model where --model_config_path is
  unset: --init_checkpoint, else --predict_ckpt (a run that predicts or exports a HuggingFace model directory);
  (None, None) where neither is set."""
  if o.init_checkpoint:
    return o.init_checkpoint, "--init_checkpoint"
  if getattr(o, "predict_ckpt", None):
    return o.predict_ckpt, "--predict_ckpt"
  return None, None


def require_model_config(o):
  """FlagError unless --model_config_path names a file, or is omitted and `model_source` is a HuggingFace model
  directory (its config.json then gives the model); where it is omitted and that source is neither a path nor a
  checkpoint prefix (a typo, a link to an unmounted disk), the line says so (it asked for a config the user has not
  got: sweep 27, U11)."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  source, flag = model_source(o)
  if not o.model_config_path and source and fileio.exists(os.path.join(source, "config.json")):
    return
  if not o.model_config_path and source and not fileio.exists(source) and not fileio.exists(source + ".index"):
    require_file(source, flag[2:], "a HuggingFace model directory (its config.json then gives the model), or a TF1 "
                 "checkpoint with --model_config_path", directory_ok=True)
  require_file(o.model_config_path, "model_config_path", "the xlnet_config.json of the model (it may be omitted when "
               "--init_checkpoint, or --predict_ckpt, is a HuggingFace model directory with config.json)")


MAX_BATCH_SIZE = 65536  # examples a batch: far beyond an accelerator's memory at XLNet's lengths


def require_positive(o, *names):
  """FlagError unless every named flag of the options `o` is at least 1 (a batch size also at most MAX_BATCH_SIZE:
  an evaluation set is padded to a multiple of its batch in host memory, and --eval_batch_size=100000000 had the
  process killed for memory without a word, as the original)."""
  for name in names:
    if getattr(o, name) < 1:
      raise FlagError(f"--{name} must be a positive integer. Received: {getattr(o, name)}.")
    if name.endswith("batch_size") and getattr(o, name) > MAX_BATCH_SIZE:
      raise FlagError(f"--{name}={getattr(o, name)} is more than {MAX_BATCH_SIZE} examples a batch, beyond any "
                      f"accelerator's memory at XLNet's lengths. Pass a smaller --{name}.")


def check_accumulation(o, bsz_per_replica, bi_data=False):
  """FlagError unless --gradient_accumulation_steps is positive and splits the per-replica batch into equal
  micro-batches (with bi_data, of paired forward and backward rows: `training.accumulation.check_split`)."""
  from xlnet_tf.training import accumulation  # pylint: disable=g-import-not-at-top
  require_positive(o, "gradient_accumulation_steps")
  try:
    accumulation.check_split(bsz_per_replica, o.gradient_accumulation_steps, 2 if bi_data else 1)
  except ValueError as e:
    raise FlagError(str(e)) from None


def check_precision(o):
  """FlagError for --use_fp16 with --use_bfloat16."""
  if o.use_fp16 and o.use_bfloat16:
    raise FlagError("--use_fp16 and --use_bfloat16 are both set: pick one precision (--use_bfloat16 where the "
                    "device computes bfloat16: TPU, A100 and newer GPUs; --use_fp16 on GPUs without it: T4, V100).")


def check_configs(o, is_finetune, **fields):
  """The one-line errors of the run's plain configs (`create_run_config`: --dropout, --mem_len, ...;
  `train_config`: --clip, --save_steps, --max_save, ...; `fields` as there) from the options `o`, before any data
  is read or written: the CLIs build the same configs again once they know the batch."""
  check_precision(o)
  require_positive(o, "num_hosts")  # the fine-tuning tools do not use it, but took -2 without a word
  create_run_config(o, is_training=True, is_finetune=is_finetune)
  train_config(o, global_batch_size=1, tokens_per_example=1, **fields)


_WARNED = set()


def check_schedule(o):
  """--warmup_steps: at least 0; at or past --train_steps a warning (every step trains at the warm-up rate, and the
  decay never starts, as in the original, which took it without a word; refused here until 2026-12-01). Likewise a
  --min_lr_ratio above 1: the rate rises to --learning_rate x the ratio (refused here until sweep 35)."""
  if o.warmup_steps < 0:
    raise FlagError(f"--warmup_steps must be at least 0. Received: {o.warmup_steps}.")
  if o.warmup_steps >= o.train_steps and (o.warmup_steps, o.train_steps) not in _WARNED:  # the fine-tuning tools
    _WARNED.add((o.warmup_steps, o.train_steps))  # validate twice: one line
    logging.warning("--warmup_steps=%d is not below --train_steps=%d: every step trains at the warm-up rate, below "
                    "--learning_rate, and the decay never starts (as the original).", o.warmup_steps, o.train_steps)
  ratio = o.min_lr_ratio
  if ratio > 1 and ("min_lr_ratio", ratio) not in _WARNED:
    _WARNED.add(("min_lr_ratio", ratio))
    logging.warning("--min_lr_ratio=%g is above 1: after the warm-up the learning rate rises from --learning_rate "
                    "to %g x --learning_rate at --train_steps, instead of decaying (as the original).", ratio, ratio)


def check_training_flags(o, num_replicas=1, strategy="one_device"):
  """The --do_train checks the fine-tuning CLIs share: positive --train_steps, --warmup_steps and --min_lr_ratio
  (`check_schedule`), on TPU a --train_batch_size (global there) that splits over the cores, a
  --gradient_accumulation_steps that splits the per-replica batch, and the configs' values (`check_configs`)."""
  require_positive(o, "train_steps")
  check_schedule(o)
  if strategy == "tpu" and o.train_batch_size % num_replicas:
    raise FlagError(f"On TPU --train_batch_size is the global batch and must be divisible by the {num_replicas} "
                    f"cores. Received: {o.train_batch_size}.")
  check_accumulation(o, o.train_batch_size // num_replicas if strategy == "tpu" else o.train_batch_size)
  check_configs(o, is_finetune=True)


# -- from flags to the library's plain configs (xlnet_tf/ never reads flags) --------------------------------------
def sentencepiece(o):
  """The SentencePiece model of --spiece_model_file; FlagError naming the flag where it cannot be used."""
  from xlnet_tf.data import tokenization  # pylint: disable=g-import-not-at-top  (light to import)
  try:
    return tokenization.load_sentencepiece(o.spiece_model_file, flag="--spiece_model_file")
  except ValueError as e:
    raise FlagError(f"--spiece_model_file: {e}") from None


def model_config(o, sp_model):
  """The XLNetConfig of --model_config_path (or of the HuggingFace model directory `model_source` names), checked
  against the SentencePiece model: a piece id past the model's n_token would be an embedding row it does not have."""
  from xlnet_tf import hf_checkpoint  # pylint: disable=g-import-not-at-top
  source, flag = model_source(o)
  xlnet_config = hf_checkpoint.model_config(o.model_config_path, source, flag, clamp_len=getattr(o, "clamp_len", None))
  if sp_model.GetPieceSize() > xlnet_config.n_token:
    raise FlagError(f"The SentencePiece model {o.spiece_model_file} has {sp_model.GetPieceSize()} pieces, more than "
                    f"the model's n_token={xlnet_config.n_token} ({o.model_config_path or source}). "
                    "Pass the spiece.model the model was trained with.")
  return xlnet_config


def check_tpu(o):
  """FlagError for --tpu, --tpu_zone or --gcp_project in a run that uses no TPU: as in the original, --use_tpu
  (or --strategy=tpu) switches the TPU on and these flags only say which one, so a run given them without the
  switch would silently train on this machine instead. FlagError for --use_tpu=True with a --strategy other than
  tpu (or the default), which --use_tpu would silently override."""
  if o.use_tpu and o.strategy not in ("tpu", flags.DEFAULT_STRATEGY):
    raise FlagError(f"--use_tpu=True means --strategy=tpu, but --strategy={o.strategy} was passed. Drop --use_tpu "
                    f"to run with --strategy={o.strategy}, or drop --strategy to run on the TPU.")
  named = [name for name in ("tpu", "tpu_zone", "gcp_project") if getattr(o, name)]
  if named and not o.use_tpu and o.strategy != "tpu":
    given = " ".join(f"--{name}={getattr(o, name)}" for name in named)
    raise FlagError(f"{given} {'is' if len(named) == 1 else 'are'} for a Cloud TPU, but the run uses none "
                    f"(--use_tpu=False, --strategy={o.strategy}). Pass --use_tpu=True to run on it, or drop "
                    f"{' and '.join(f'--{name}' for name in named)}.")


def start(o):
  """`training.start` (the start-up of every training CLI; returns the strategy) with the options `o`'s hardware
  and run flags; `--use_tpu` means `--strategy=tpu`, as the original's switch. FlagError for --use_fp16 with
  --use_bfloat16 and for a TPU named without --use_tpu (`check_tpu`), checked here, before any data is read: every
  training CLI starts with it."""
  check_precision(o)
  check_tpu(o)
  if o.num_core_per_host is not None:  # 0 or -1 ran on one device, the flag ignored
    require_positive(o, "num_core_per_host")
  from xlnet_tf import training  # pylint: disable=g-import-not-at-top  (light to import)
  return training.start(strategy="tpu" if o.use_tpu else o.strategy, num_core_per_host=o.num_core_per_host,
                        seed=o.seed, deterministic=o.deterministic, use_tf32=o.use_tf32,
                        use_bfloat16=o.use_bfloat16, cloud_tpu=training.CloudTPU(o.tpu, o.tpu_zone, o.gcp_project),
                        xla_cache_dir=o.xla_cache_dir, trains=getattr(o, "do_train", True))


def create_run_config(o, is_training, is_finetune):
  """The model's `RunConfig` from the options `o`'s run-config flags (`define_run_config_flags`), as the original
  `xlnet.create_run_config`: fine-tuning never uses mems, reuse_len, bi_data or same_length (pretraining flags)."""
  from xlnet_tf.config import RunConfig  # pylint: disable=g-import-not-at-top
  kwargs = dict(is_training=is_training, use_tpu=o.use_tpu, use_bfloat16=o.use_bfloat16, dropout=o.dropout,
                dropatt=o.dropatt, init=o.init, init_range=o.init_range, init_std=o.init_std, clamp_len=o.clamp_len,
                use_fp16=o.use_fp16, recompute_grad=o.recompute_grad, float32_positions=o.float32_positions)
  if not is_finetune:
    kwargs.update(mem_len=o.mem_len, reuse_len=o.reuse_len, bi_data=o.bi_data, same_length=o.same_length)
  return RunConfig(**kwargs)


def train_config(o, global_batch_size, tokens_per_example, **fields):
  """The `training.TrainConfig` of a training CLI's options `o`: the optimizer flags (`define_optimizer_flags`)
  and the hardware flags the loop uses (`define_hardware_flags`); `fields` set the rest (or replace a flag's)."""
  from xlnet_tf.training import TrainConfig  # pylint: disable=g-import-not-at-top  (light to import)
  values_ = dict(learning_rate=o.learning_rate, train_steps=o.train_steps, warmup_steps=o.warmup_steps,
                 decay_method=o.decay_method, min_lr_ratio=o.min_lr_ratio, weight_decay=o.weight_decay,
                 adam_epsilon=o.adam_epsilon, clip=o.clip, lr_layer_decay_rate=o.lr_layer_decay_rate,
                 clip_mode=None if o.clip_mode == "auto" else o.clip_mode, loss_weighting=o.loss_weighting,
                 skip_bad_records=o.skip_bad_records, iterations=o.iterations, save_steps=o.save_steps,
                 max_save=o.max_save, jit_compile=o.jit_compile,
                 gradient_accumulation_steps=o.gradient_accumulation_steps)
  values_.update(fields)
  return TrainConfig(global_batch_size=global_batch_size, tokens_per_example=tokens_per_example, **values_)
