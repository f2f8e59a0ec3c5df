"""XLNet pretraining: the original `train.py` and `train_gpu.py` in one tf.distribute loop.

  python run_pretrain.py --record_info_dir=proc_data/tfrecords --model_dir=exp/pretrain --train_batch_size=32 \\
      --seq_len=512 --reuse_len=256 --mem_len=384 --perm_size=256 --n_layer=24 --d_model=1024 --d_embed=1024 \\
      --n_head=16 --d_head=64 --d_inner=4096 --untie_r=True --mask_alpha=6 --mask_beta=1 --num_predict=85 \\
      --train_steps=500000 --warmup_steps=40000 --learning_rate=1e-4 --save_steps=10000 --iterations=1000

Every flag of the original scripts is accepted with its name and default (see README: `use_tpu` defaults to
False and means `--strategy=tpu`; `train_batch_size` is global). New (docs/design.md, New flags): --strategy,
--mems_reset, --jit_compile, --xla_cache_dir, --seed, --deterministic, --model_config_path, --clip_mode,
--loss_weighting, --lr_layer_decay_rate, --init_optimizer_state, --skip_bad_records, --gradient_accumulation_steps,
--recompute_grad, --use_fp16, --use_tf32. Restarting the same command resumes from the latest checkpoint.
"""

import cli  # first: start_script() runs before anything imports TensorFlow
import flag_configs
if __name__ == "__main__":
  cli.start_script()
import types

import flags
import run_start
from absl import flags as absl_flags
from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf import locks
from xlnet_tf import hf_checkpoint
from xlnet_tf import training
from xlnet_tf.config import CONFIG_KEYS
from xlnet_tf.data import pretrain_spec
from xlnet_tf.data.record_files import missing_tasks, read_corpus_info
from xlnet_tf.data.token_checks import check_token_ids
from xlnet_tf.tasks.pretrain import input as pretrain_input
from xlnet_tf.tasks.pretrain import task as pretrain_task
from xlnet_tf.training import optimization

DEFAULT_N_TOKEN = 32000


def define_flags(flag_values=absl_flags.FLAGS):
  """This script's flags: the original `train.py`/`train_gpu.py` ones with their defaults, and the new ones."""
  flags.define_run_config_flags(dropout=0.0, dropatt=0.0, flag_values=flag_values)
  flags.define_optimizer_flags(learning_rate=1e-4, train_steps=100000, min_lr_ratio=0.001, flag_values=flag_values)
  flags.define_hardware_flags(iterations=1000, max_save=100000, flag_values=flag_values)
  flags.define_pretrain_flags(flag_values=flag_values)


def validate(o, num_replicas=1, num_workers=None):
  """One-line errors for flag combinations the run cannot satisfy (before anything heavy starts); `num_workers`:
  the strategy's input pipelines (hosts, workers), where known."""
  if not o.record_info_dir:
    raise cli.FlagError("--record_info_dir is required: data_utils.py's <save_dir>/tfrecords directory.")
  if not o.model_dir:
    raise cli.FlagError("--model_dir is required: where checkpoints and logs go (a rerun resumes from it).")
  flag_configs.require_output_dirs(o, "model_dir")
  if o.seq_len <= 0:
    raise cli.FlagError(f"--seq_len must be > 0 (the data_utils.py value). Received: {o.seq_len}.")
  if o.perm_size is None or o.perm_size <= 0:
    raise cli.FlagError(f"--perm_size must be set (> 0; usually --reuse_len). Received: {o.perm_size}.")
  if o.reuse_len <= 0 or o.reuse_len >= o.seq_len:
    raise cli.FlagError(f"--reuse_len must be in (0, seq_len); usually seq_len / 2. Received: reuse_len={o.reuse_len}, "
                        f"seq_len={o.seq_len}.")
  if o.mem_len and o.reuse_len > o.seq_len:
    raise cli.FlagError(f"--reuse_len ({o.reuse_len}) may not exceed --seq_len ({o.seq_len}) with --mem_len.")
  flag_configs.require_positive(o, "train_batch_size", "num_hosts", "num_passes",  # 0: the original read no pass
                                "train_steps",  # 0 or below: "Nothing to do", exit 0 (sweep 33, B4)
                                *(["n_token"] if o.n_token is not None else []))
  flag_configs.check_schedule(o)
  if o.train_batch_size % o.num_hosts:
    raise cli.FlagError(f"--train_batch_size ({o.train_batch_size}) must be divisible by --num_hosts "
                        f"({o.num_hosts}).")
  if num_workers is not None and o.num_hosts not in (1, num_workers):  # the batch's files split over absent hosts
    raise cli.FlagError(f"--num_hosts={o.num_hosts} splits each batch over {o.num_hosts} hosts, one input pipeline "
                        f"and its record files each (the original's TPU hosts), but this run has {num_workers} "
                        f"worker(s). Drop --num_hosts, or start {o.num_hosts} workers (--strategy="
                        "multi_worker_mirrored with a TF_CONFIG cluster of that many).")
  if o.train_batch_size % num_replicas:
    raise cli.FlagError(f"--train_batch_size ({o.train_batch_size}) must be divisible by the {num_replicas} "
                        "replicas.")
  bsz_per_replica = o.train_batch_size // num_replicas
  if o.bi_data and bsz_per_replica % 2:
    raise cli.FlagError(f"bi_data needs an even per-replica batch size. Received: bsz_per_replica={bsz_per_replica} "
                        f"(--train_batch_size={o.train_batch_size} over {num_replicas} replicas). Use an even "
                        "per-replica batch or --bi_data=False (with records written that way).")
  flag_configs.check_accumulation(o, bsz_per_replica, o.bi_data)
  if o.model_config_path:
    flag_configs.require_file(o.model_config_path, "model_config_path", "the xlnet_config.json of the model, or "
                              "leave it unset (--n_layer, --d_model, ... then give the model)")
  flag_configs.check_configs(o, is_finetune=False, mems_reset=o.mems_reset)


def build_xlnet_config(o, log_fn=print):
  """The model's XLNetConfig: --model_config_path's (or an HF --init_checkpoint's), which overrides the model flags
  (--n_layer, ...: one set to another value, or given at its default, is named in a warning), else those flags."""
  if o.model_config_path or hf_checkpoint.is_hf_directory(o.init_checkpoint):
    config = hf_checkpoint.model_config(o.model_config_path, o.init_checkpoint, clamp_len=o.clamp_len)
    unset = cli.defaults(define_flags)
    ignored = [k for k in CONFIG_KEYS if (getattr(o, k) != getattr(unset, k) or cli.given(k))
               and getattr(o, k) != getattr(config, k)]
    if ignored:
      log_fn(f"Warning: {' '.join(f'--{k}={getattr(o, k)}' for k in ignored)} ignored: the model is "
             f"{o.model_config_path or o.init_checkpoint}'s ({', '.join(f'{k} {getattr(config, k)}' for k in ignored)}"
             "), which overrides the model flags. Drop them.")
    return config
  n_token = o.n_token or (read_corpus_info(o.record_info_dir) or {}).get("vocab_size") or DEFAULT_N_TOKEN
  fields = {k: getattr(o, k) for k in CONFIG_KEYS if k != "n_token"}
  return XLNetConfig(n_token=n_token, **fields)


def check_vocabulary(o, xlnet_config, record_files):
  """One-line errors, before training, for records whose token ids the model's n_token cannot embed: the
  vocabulary in corpus_info.json, then the ids of the first records (for records without that file)."""
  n_token = xlnet_config.n_token
  hf_init = not o.model_config_path and hf_checkpoint.is_hf_directory(o.init_checkpoint)  # not --n_token (C4)
  source = (f"the n_token of --model_config_path {o.model_config_path}" if o.model_config_path else
            f"the vocab_size of --init_checkpoint {o.init_checkpoint} (its config.json)" if hf_init else "--n_token")
  vocab_size = (read_corpus_info(o.record_info_dir) or {}).get("vocab_size")
  if vocab_size and vocab_size > n_token:
    fix = (f"Pass an --init_checkpoint of at least {vocab_size} ids, or records written with its spiece.model"
           if hf_init else
           f"Pass {source} of at least {vocab_size}{'' if o.model_config_path else ' or leave it unset'}")
    raise cli.FlagError(f"The records of --record_info_dir {o.record_info_dir} were written with a vocabulary of "
                        f"{vocab_size} ids (vocab_size in its corpus_info.json), more than the model's "
                        f"n_token={n_token} ({source}). {fix}.")
  for key in ("input", "target"):  # the loss reads the stored targets
    check_token_ids(record_files, n_token, key=key, fix=(
        f"Pass {source} of the vocabulary the records were written with (data_utils.py's --sp_path), or records "
        f"written with a SentencePiece model of at most {n_token} pieces."))


def warn_of_missing_tasks(record_info, log_fn):
  """One warning line per data_utils.py pass whose --num_task split lacks the records of some task
  (`record_files.missing_tasks`): the run trains on part of the text, as it did without a word. Where the writer
  files do not give the number of text files (records of an older data_utils.py), the line says that a task may
  have had none, and how to tell."""
  named = zip(record_info["filenames"], record_info["writers"])  # `find_record_info`'s
  for pass_id, (num_task, tasks, known) in sorted(missing_tasks(named).items(), key=str):
    head = (f"Warning: the records are those of a data_utils.py --num_task={num_task} split (--pass_id={pass_id}), "
            f"but task(s) {', '.join(map(str, tasks))} have no record_info here")
    write = (f"write them with data_utils.py --num_task={num_task} --task={tasks[0]} --pass_id={pass_id} (and the "
             "other flags of that run), or go on without them.")
    if known:
      log_fn(f"{head}: their text is not trained on (a worker that failed or has not run). W{write[1:]}")
    else:
      log_fn(f"{head}. If they had no text file (a --num_task above the number of text files: data_utils.py said "
             f"`Exit: task {tasks[0]} has no file to process.`), nothing is missing; records written by this "
             "data_utils.py give the number of text files, and then this warning is left out (rewrite them to "
             "silence it). Otherwise their text is not trained on (a worker that failed or has not run): " + write)


def input_args(o, n_token=None):
  """`pretrain_input.get_input_fn` arguments from the options (the `PretrainDataSpec` of data_utils.py's naming
  flags, the `ReaderOptions` of the others; n_token: the model's, every record's ids are checked against it)."""
  spec = pretrain_spec.PretrainDataSpec(
      bsz_per_host=o.train_batch_size // o.num_hosts, seq_len=o.seq_len, reuse_len=o.reuse_len, bi_data=o.bi_data,
      mask_alpha=o.mask_alpha, mask_beta=o.mask_beta, uncased=o.uncased, num_predict=o.num_predict)
  options = pretrain_input.ReaderOptions(perm_size=o.perm_size, use_bfloat16=o.use_bfloat16, seed=o.seed,
                                         n_token=n_token)
  return dict(record_info_dir=o.record_info_dir, split="train", spec=spec, options=options,
              global_batch_size=o.train_batch_size, batch_flag=lambda bsz_per_host: _batch_flag(o, bsz_per_host))


def _batch_flag(o, bsz_per_host):
  """This script's flag that reads records of data_utils.py's --bsz_per_host (bsz_per_host = --train_batch_size /
  --num_hosts), for the line that says the records were written with another batch size."""
  if o.num_hosts == 1:
    return f"--train_batch_size={bsz_per_host}"
  return (f"--train_batch_size={bsz_per_host * o.num_hosts} (the records' bsz_per_host {bsz_per_host} x "
          f"--num_hosts={o.num_hosts})")


def for_strategy(o, strategy):
  """The options `o` with `--mems_reset=auto` and `--clip_mode=auto` made the original's on `strategy`
  (`training.default_mems_reset`, `optimization.default_clip_mode`): what the run trains with and its
  run_flags.json keeps."""
  resolved = {}
  if o.mems_reset == "auto":
    resolved["mems_reset"] = training.default_mems_reset(strategy)
  if o.clip_mode == "auto":
    resolved["clip_mode"] = optimization.default_clip_mode(strategy)
  return types.SimpleNamespace(**dict(vars(o), **resolved)) if resolved else o


def run(o, strategy, log_fn=print):
  """Pretrains as the options `o` (this script's flags, see `cli.values`/`cli.defaults`) say, on `strategy`:
  `flag_configs.start(o)`'s, which also applies --seed (the fresh weights' initialisation), --deterministic and
  --use_tf32, as the command line does.

  Returns:
    The last loop's {loss, gnorm, lr, step}.
  """
  o = for_strategy(o, strategy)
  validate(o, strategy.num_replicas_in_sync, training.input_pipelines(strategy))
  with locks.directory_lock(o.model_dir if training.is_chief(strategy) else None):
    return _run(o, strategy, log_fn)


def build_trainer(o, strategy, xlnet_config):
  """The pretraining `Trainer` of the options `o` on `strategy`, not yet initialised (`restore_or_init` next)."""
  o = for_strategy(o, strategy)
  run_config = flag_configs.create_run_config(o, is_training=True, is_finetune=False)
  return training.Trainer(
      strategy, lambda: XLNetModel(xlnet_config, run_config), pretrain_task.PretrainTask(), o.model_dir,
      flag_configs.train_config(o, o.train_batch_size, o.seq_len, mems_reset=o.mems_reset))


def _run(o, strategy, log_fn):
  xlnet_config = build_xlnet_config(o, log_fn)
  data = input_args(o, xlnet_config.n_token)
  input_fn, record_info = pretrain_input.get_input_fn(**data)
  log_fn(f"Found {len(record_info['filenames'])} record files, {record_info['num_batch']} batches of "
         f"{data['spec'].bsz_per_host} rows.")
  warn_of_missing_tasks(record_info, log_fn)
  check_vocabulary(o, xlnet_config, record_info["filenames"])
  trainer = build_trainer(o, strategy, xlnet_config)
  resolved = {}
  # The SentencePiece model the records were written with (their writer files; one, `check_writers`): a resume on
  # records of another one is refused (`run_start.restore_or_init`).
  digests = {(info or {}).get("sp_model_sha256") for info in record_info["writers"]} - {None}
  if len(digests) == 1:
    resolved["spiece_model_sha256"] = digests.pop()
  start = run_start.restore_or_init(o, trainer, xlnet_config, log_fn, resolved=resolved,
                                    data_files=record_info["filenames"], init_optimizer_state=o.init_optimizer_state)
  log_fn(f"Training from step {start} to {o.train_steps} on {strategy.num_replicas_in_sync} replica(s).")

  result = trainer.train(lambda input_context, start_step: input_fn(input_context, start_step=start_step),
                         log_fn=log_fn, data_files=record_info["filenames"])
  if training.is_chief(strategy):
    log_fn(f"Checkpoints: {o.model_dir} (latest {trainer.checkpoints.latest()}); TensorBoard: "
           f"tensorboard --logdir {o.model_dir}")
  else:  # its own copy went to a temporary directory, gone now
    log_fn(f"Done: the chief wrote the checkpoints (its --model_dir {o.model_dir}).")
  return result


def body(o):
  run(o, flag_configs.start(o), log_fn=cli.print_line)


if __name__ == "__main__":
  cli.run_script(define_flags, cli.cli_main("run_pretrain.py", body))
