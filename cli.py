"""What the command-line tools share at start-up, beyond their flags (`flags.py` defines those): the filter of
TensorFlow's C++ noise, the one-line flag errors and checks, the turn from flags into the library's plain configs,
and the `main` of every CLI.

One pattern for every CLI: `main = cli.cli_main(prog, body)`, where `body` receives `values()`, the script's flags
as a plain namespace, and turns them into the plain configs its `run(...)` takes. Tests and Python callers build
the same namespace with `defaults(script.define_flags, **overrides)`. Library code in `xlnet_tf/` never reads
flags.

Importing this module has no side effects. A CLI calls `start_script()` before it imports TensorFlow, so that
TensorFlow's C++ noise stays off its stderr (`-v 1` shows everything) and a signal while it starts ends it with one
line.
"""

import atexit
import gc
import json
import math
import os
import signal
import sys
import types

from absl import app
from absl import flags as absl_flags
from absl import logging

import flags
from xlnet_tf import stderr_filter


def filter_stderr(argv=None):
  """Keeps TensorFlow's C++ lines that say nothing about the run (`xlnet_tf.stderr_filter.NOISE`: start-up, and
  the first steps' tracing and compilation) off stderr for the rest of the process; `run_script` waits for the
  last line at the end. A CLI calls it first, before anything imports TensorFlow, when run as a script.

  With `-v 1` (absl's --verbosity=1, which also shows DEBUG logs) on the command line `argv` (default sys.argv), or
  XLNET_TF_STARTUP_LOG=1 in the environment, nothing is filtered.
  """
  if _verbosity(sys.argv if argv is None else argv) >= 1 or os.environ.get("XLNET_TF_STARTUP_LOG"):
    return
  stderr_filter.start()


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


_WHEN = {False: "while starting; nothing was written.",
         True: "after its run ended; what the run wrote is whole."}
_main_ended = [False]  # whether a `cli_main` body has ended (then a signal no longer interrupts the start)


def _exit_on_signal(signum, frame):
  del frame
  line = (f"{os.path.basename(sys.argv[0])}: stopped by {signal.Signals(signum).name} "
          f"{_WHEN[_main_ended[0]]}")
  os.write(2, line.encode() + b"\n")  # not print: the interrupted code may be inside a write to sys.stderr
  os._exit(128 + signum)  # pylint: disable=protected-access


def start_script(argv=None):
  """What a CLI run as a script does first, before it imports TensorFlow: `filter_stderr(argv)`, and SIGINT or
  SIGTERM outside its `main`'s body (imports, flags: nothing written yet; or the end, after the body) end it with
  one line, exit 128 + signal."""
  filter_stderr(argv)
  for signum in _SIGNALS:
    signal.signal(signum, _exit_on_signal)


def _verbosity(argv):
  """absl's -v/--verbosity as the command line sets it, read before the flags are parsed (-1 when unset)."""
  flag_values = absl_flags.FlagValues()
  absl_flags.DEFINE_integer("verbosity", -1, "Logging verbosity.", short_name="v", flag_values=flag_values)
  try:
    flag_values(list(argv), known_only=True)
  except absl_flags.Error:  # the real parse reports it
    return -1
  return flag_values.verbosity


class FlagError(ValueError):
  """A flag value the run cannot use; `cli_main` prints it as one line."""


def require_file(path, flag, what, directory_ok=False):
  """FlagError unless --{flag} names an existing file (or, with directory_ok, directory); `what`: what the user
  should pass."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top  (cli.py stays light to import)
  if not path:
    raise FlagError(f"--{flag} is required: {what}.")
  if not fileio.exists(path):
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
  (`fileio.check_output_dir`); for --model_dir, a name without glob wildcards."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  for name in names:
    if name == "model_dir" and o.model_dir and any(c in o.model_dir for c in "[]*?"):
      raise FlagError(f"--model_dir {o.model_dir} has [ ] * or ? in its name, which TensorFlow's checkpoint code "
                      "reads as wildcards (its clean-up of old checkpoints would delete those of another directory, "
                      "such as m1 for m[1]). Pass a name without them.")
    if getattr(o, name):
      try:
        fileio.check_output_dir(getattr(o, name), f"--{name}", marker)
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
  directory (its config.json then gives the model)."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  source, _ = model_source(o)
  if not o.model_config_path and source and fileio.exists(os.path.join(source, "config.json")):
    return
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
  create_run_config(o, is_training=True, is_finetune=is_finetune)
  train_config(o, global_batch_size=1, tokens_per_example=1, **fields)


def check_training_flags(o, num_replicas=1, strategy="one_device"):
  """The --do_train checks the fine-tuning CLIs share: positive --train_steps, warm-up ending before training
  does, on TPU a --train_batch_size (global there) that splits over the cores, a --gradient_accumulation_steps
  that splits the per-replica batch, and the configs' values (`check_configs`)."""
  require_positive(o, "train_steps")
  if not 0 <= o.warmup_steps < o.train_steps:
    raise FlagError(f"--warmup_steps must be at least 0 and below --train_steps (warm-up must end before training "
                    f"does). Received: --warmup_steps={o.warmup_steps}, --train_steps={o.train_steps}.")
  if strategy == "tpu" and o.train_batch_size % num_replicas:
    raise FlagError(f"On TPU --train_batch_size is the global batch and must be divisible by the {num_replicas} "
                    f"cores. Received: {o.train_batch_size}.")
  check_accumulation(o, o.train_batch_size // num_replicas if strategy == "tpu" else o.train_batch_size)
  check_configs(o, is_finetune=True)


# -- from flags to the library's plain configs (xlnet_tf/ never reads flags) --------------------------------------
def sentencepiece(o):
  """The SentencePiece model of --spiece_model_file; FlagError naming the flag where it cannot be used."""
  from xlnet_tf.data import tokenization  # pylint: disable=g-import-not-at-top  (cli.py stays light to import)
  try:
    return tokenization.load_sentencepiece(o.spiece_model_file, flag="--spiece_model_file")
  except ValueError as e:
    raise FlagError(f"--spiece_model_file: {e}") from None


def model_config(o, sp_model):
  """The XLNetConfig of --model_config_path (or of the HuggingFace model directory `model_source` names), checked
  against the SentencePiece model: a piece id past the model's n_token would be an embedding row it does not have."""
  from xlnet_tf import hf_checkpoint  # pylint: disable=g-import-not-at-top
  source, flag = model_source(o)
  xlnet_config = hf_checkpoint.model_config(o.model_config_path, source, flag)
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
  from xlnet_tf import training  # pylint: disable=g-import-not-at-top  (cli.py stays light to import)
  return training.start(strategy="tpu" if o.use_tpu else o.strategy, num_core_per_host=o.num_core_per_host,
                        seed=o.seed, deterministic=o.deterministic, use_tf32=o.use_tf32,
                        use_bfloat16=o.use_bfloat16, cloud_tpu=training.CloudTPU(o.tpu, o.tpu_zone, o.gcp_project),
                        xla_cache_dir=o.xla_cache_dir)


def create_run_config(o, is_training, is_finetune):
  """The model's `RunConfig` from the options `o`'s run-config flags (`define_run_config_flags`), as the original
  `xlnet.create_run_config`: fine-tuning never uses mems, reuse_len, bi_data or same_length (pretraining flags)."""
  from xlnet_tf.config import RunConfig  # pylint: disable=g-import-not-at-top
  kwargs = dict(is_training=is_training, use_tpu=o.use_tpu, use_bfloat16=o.use_bfloat16, dropout=o.dropout,
                dropatt=o.dropatt, init=o.init, init_range=o.init_range, init_std=o.init_std, clamp_len=o.clamp_len,
                use_fp16=o.use_fp16, recompute_grad=o.recompute_grad)
  if not is_finetune:
    kwargs.update(mem_len=o.mem_len, reuse_len=o.reuse_len, bi_data=o.bi_data, same_length=o.same_length)
  return RunConfig(**kwargs)


def train_config(o, global_batch_size, tokens_per_example, **fields):
  """The `training.TrainConfig` of a training CLI's options `o`: the optimizer flags (`define_optimizer_flags`)
  and the hardware flags the loop uses (`define_hardware_flags`); `fields` set the rest (or replace a flag's)."""
  from xlnet_tf.training import TrainConfig  # pylint: disable=g-import-not-at-top  (cli.py stays light to import)
  values_ = dict(learning_rate=o.learning_rate, train_steps=o.train_steps, warmup_steps=o.warmup_steps,
                 decay_method=o.decay_method, min_lr_ratio=o.min_lr_ratio, weight_decay=o.weight_decay,
                 adam_epsilon=o.adam_epsilon, clip=o.clip, lr_layer_decay_rate=o.lr_layer_decay_rate,
                 clip_mode=None if o.clip_mode == "auto" else o.clip_mode, loss_weighting=o.loss_weighting,
                 skip_bad_records=o.skip_bad_records, iterations=o.iterations, save_steps=o.save_steps,
                 max_save=o.max_save, jit_compile=o.jit_compile,
                 gradient_accumulation_steps=o.gradient_accumulation_steps)
  values_.update(fields)
  return TrainConfig(global_batch_size=global_batch_size, tokens_per_example=tokens_per_example, **values_)


_NOT_COMPARED = ("train_steps", "iterations", "save_steps", "max_save", "verbosity")


def run_flags(directory):
  """The `run_flags.json` a training run wrote in `directory` (its flags, and what the run resolved from them, e.g.
  run_classifier.py's `label_list`) as a dict; None where there is none (a run of the original code); a damaged
  one is a FlagError (`training.read_run_flags`)."""
  from xlnet_tf import training  # pylint: disable=g-import-not-at-top
  try:
    return training.read_run_flags(directory)
  except ValueError as e:
    raise FlagError(str(e)) from None


# Another value loads the same weights and pools otherwise (summary_type, use_summ_proj) or reads other tokens.
_TRAINED_WITH = ("summary_type", "use_summ_proj", "uncased")
# run_flags.json's digest of the SentencePiece model a fine-tuning run read (`spiece_digest`): its path alone may name
# another model later (a file replaced, or another machine), which turns the same text into other ids.
_SPIECE_DIGEST = "spiece_model_sha256"
# run_flags.json's record of the flags a resumed run changed, and from which step (`restore_or_init`).
_CHANGED = "changed_on_resume"
# What a run keeps beside its flags in its run_flags.json (`restore_or_init`'s `resolved`, the digest, the changes).
_RESOLVED = {"label_list", _SPIECE_DIGEST, "record_sizes", _CHANGED, "num_replicas"}


def spiece_digest(o):
  """The sha256 of --spiece_model_file's bytes; None for a tool without that flag."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  return fileio.sha256(o.spiece_model_file) if getattr(o, "spiece_model_file", None) else None


def check_trained_model(o, directory, xlnet_config, flag="--model_dir"):
  """FlagError where the checkpoints in `directory` (`flag` names it) were fine-tuned as another model than the
  options `o` build: another xlnet_config.json (`training.check_run_files`), or another pooling or casing
  (`_TRAINED_WITH` in its run_flags.json), or another SentencePiece model (its sha256 there); for a HuggingFace
  directory, another pooling than its config.json's. All load without a shape mismatch: an evaluation, a prediction,
  an export or a resume went on with other numbers, exit 0."""
  from xlnet_tf import checkpoint, fileio, hf_checkpoint, training  # pylint: disable=g-import-not-at-top
  if directory and hf_checkpoint.is_hf_directory(directory):
    _check_hf_pooling(o, directory, flag)
    return
  if not directory or not (checkpoint.latest_checkpoint(directory) or fileio.glob_in(directory, "*.index")):
    return  # no checkpoint (yet): nothing to check
  try:
    training.check_run_files(directory, xlnet_config, flag)
  except ValueError as e:
    raise FlagError(str(e)) from None
  there = run_flags(directory) or {}
  changed = [f"--{k}={there[k]} there, {getattr(o, k)} here" for k in _TRAINED_WITH if k in there and hasattr(o, k)
             and there[k] != getattr(o, k)]
  recorded = there.get(_SPIECE_DIGEST)
  if recorded and getattr(o, "spiece_model_file", None) and recorded != spiece_digest(o):
    changed.append(f"--spiece_model_file={there.get('spiece_model_file')} there, {o.spiece_model_file} here: another "
                   "SentencePiece model (its sha256 differs)")
  if changed:
    raise FlagError(f"The checkpoints in {flag} {directory} were fine-tuned with other flags "
                    f"({'; '.join(changed)}; {os.path.join(directory, 'run_flags.json')}): the same weights would "
                    f"pool otherwise or read other tokens, and score other numbers. Pass the values there, or another "
                    f"{flag}.")


def _check_hf_pooling(o, directory, flag):
  """FlagError where the HuggingFace classification or multiple-choice model in `directory` pools otherwise than the
  options `o` say (its config.json's summary_type and summary_use_proj): its head ran on another summary, exit 0."""
  from xlnet_tf import hf_checkpoint  # pylint: disable=g-import-not-at-top
  try:
    config = hf_checkpoint.read_config(directory)
  except ValueError as e:
    raise FlagError(str(e)) from None
  if hf_checkpoint.architecture_of(config, {}) not in ("XLNetForSequenceClassification", "XLNetForMultipleChoice"):
    return
  there = {"summary_type": config.get("summary_type", "last"), "use_summ_proj": config.get("summary_use_proj", True)}
  changed = [k for k in there if hasattr(o, k) and there[k] != getattr(o, k)]
  if changed:
    shown = "; ".join(f"{'summary_use_proj' if k == 'use_summ_proj' else k} {there[k]} there, --{k}={getattr(o, k)} "
                      "here" for k in changed)
    raise FlagError(f"{flag} {directory} pools otherwise ({shown}; {os.path.join(directory, hf_checkpoint.CONFIG_FILE)}"
                    "): its head would read another summary and score other numbers. Pass "
                    f"{' '.join(f'--{k}={there[k]}' for k in changed)}.")


def flag_changes(o, training_only=False, there=None):
  """'name X there, Y here' for each flag of the options `o` whose value differs from the run_flags.json in
  --model_dir (the run that wrote its checkpoints; `there`: that file's dict, where read already), paths and the
  loop's length and saving left out; with `training_only`, also the flags that leave the training steps' numbers as
  they are (`_NOT_TRAINING`)."""
  there = run_flags(o.model_dir) if there is None else there
  if there is None:
    return []
  here = json.loads(json.dumps(vars(o), default=str))  # as run_files wrote them
  skipped = set(_NOT_COMPARED)
  if training_only:
    skipped |= _NOT_TRAINING
    if "every_loop" in (here.get("mems_reset"), there.get("mems_reset")):
      skipped.discard("iterations")  # it says where the mems are zeroed
    if "record_info_dir" in here:  # pretraining pools nothing
      skipped |= {"summary_type", "use_summ_proj"}
  return [f"{k} {there[k]} there, {here[k]} here" for k in sorted(set(there) & set(here))
          if there[k] != here[k] and k not in skipped and not k.endswith(("_dir", "_file", "_path", "_ckpt",
                                                                          "checkpoint"))
          and not (training_only and k.startswith(("do_", "eval_", "predict_")))]


# Flags that leave a training step's numbers as they are: evaluation, prediction and export; data preparation and
# reading; where the run runs (compared as the number of replicas it resolves to, `restore_or_init`); the same updates
# by other means (documented and tested: recomputation, accumulation, XLA).
_NOT_TRAINING = {"export_dir", "target_eval_key", "n_best_size", "max_answer_length", "start_n_top", "end_n_top",
                 "null_threshold", "allow_empty_prediction", "allow_last_token", "glue_metrics", "track_mean",
                 "overwrite_data", "num_proc", "proc_id", "skip_bad_records", "tpu", "master", "gcp_project",
                 "tpu_zone", "tpu_job_name", "strategy", "num_core_per_host", "num_hosts", "use_tpu",
                 "init_global_vars", "init_optimizer_state", "recompute_grad", "gradient_accumulation_steps",
                 "jit_compile"}


def restore_or_init(o, trainer, xlnet_config, log_fn, resolved=None, **kwargs):
  """Starts a training run in --model_dir: the chief checks that the checkpoints there are of this model
  (`training.check_run_files`), `trainer.restore_or_init(o.init_checkpoint, ..., log_fn)` resumes or initialises,
  and the chief writes the run files (xlnet_config.json; run_flags.json with `resolved` beside the flags: what the
  run resolved from them and a later run must match, such as run_classifier.py's `label_list`) before the run's
  first checkpoint (`trainer.before_first_save`): they describe the checkpoints, and a run that fails before it
  saves (a refused flag, records the replicas cannot split, a bad token id at step 300) leaves the earlier run's.
  A run that resumed keeps the earlier run's --init_checkpoint there: the weights came from it, and this run's was
  not read. Where --model_dir's checkpoint cannot be resumed and this run's
  flags differ from the run that wrote it (`flag_changes`), the error names them. Returns the step."""
  from xlnet_tf import checkpoint, training  # pylint: disable=g-import-not-at-top
  _check_apart_from_init_checkpoint(o)
  chief = training.is_chief(trainer.strategy)
  if chief:
    training.check_run_files(o.model_dir, xlnet_config)
  resuming = bool(checkpoint.latest_checkpoint(o.model_dir))
  there = (run_flags(o.model_dir) or {}) if resuming and chief else {}  # the run that wrote the checkpoints
  there = _with_old_auto_resolved(there, getattr(o, "clip_mode", None))
  changes = flag_changes(o, training_only=True, there=there) if there else []
  replicas = trainer.strategy.num_replicas_in_sync
  if there.get("num_replicas", replicas) != replicas:  # --strategy / --num_core_per_host resolved otherwise
    changes.append(f"replicas {there['num_replicas']} there, {replicas} here")
  start = _restore_or_init(o, trainer, log_fn, **kwargs)
  if not resuming and start and start >= getattr(o, "train_steps", start + 1):  # trained nothing, exit 0
    raise FlagError(f"--init_checkpoint {o.init_checkpoint} brings its optimizer's step {start} "
                    f"(--init_optimizer_state), already at --train_steps={o.train_steps} or past it: nothing would be "
                    f"trained. Pass a --train_steps above {start} (the total, counted from that step), or "
                    "--init_optimizer_state=False to start the count at 0.")
  if chief:
    flags_dict = {**vars(o), **(resolved or {}), "num_replicas": replicas}
    if digest := spiece_digest(o):
      flags_dict[_SPIECE_DIGEST] = digest
    if resuming:  # this run has saved nothing yet
      flags_dict["init_checkpoint"] = there.get("init_checkpoint")
      if changes or _CHANGED in there:
        flags_dict[_CHANGED] = there.get(_CHANGED, []) + [f"step {start}: {change}" for change in changes]
    if changes:  # the run goes on, as it may (a lower learning rate, say), and says so
      log_fn(f"Warning: resumed with other flags than the run that wrote the checkpoints ({'; '.join(changes[:6])}"
             f"{'; ...' if len(changes) > 6 else ''}): the steps from {start} on train with this run's values. "
             f"{os.path.join(o.model_dir, 'run_flags.json')} records the change ({_CHANGED}) with this run's first "
             "checkpoint.")
    trainer.before_first_save = lambda: training.write_run_files(o.model_dir, xlnet_config, flags_dict)
  return start


def _with_old_auto_resolved(there, clip_mode):
  """A run_flags.json of before 2026-11-29 keeps --clip_mode=auto, which meant per_core on TPU and indexed_slices
  elsewhere (fine-tuning's auto is per_replica since, the same numbers on one replica): compared as that."""
  if there.get("clip_mode") != "auto" or clip_mode in (None, "auto"):
    return there
  old = "per_core" if there.get("use_tpu") or there.get("strategy") == "tpu" else "indexed_slices"
  if old == "indexed_slices" and clip_mode == "per_replica" and there.get("num_replicas", 1) == 1:
    old = clip_mode
  return dict(there, clip_mode=old)


def _check_apart_from_init_checkpoint(o):
  """FlagError where a run that starts from --init_checkpoint would train in the directory of a model as released
  (its xlnet_config.json beside it) or downloaded (HuggingFace): the run would rewrite that config and write its
  checkpoints beside the model, which the original's README warns against. A bare checkpoint there (an original
  run's model.ckpt) is allowed, as by the original; a --model_dir already holding this tool's checkpoints resumes
  them and reads no --init_checkpoint."""
  from xlnet_tf import checkpoint  # pylint: disable=g-import-not-at-top
  if not o.init_checkpoint or checkpoint.latest_checkpoint(o.model_dir):
    return
  try:
    init_dir = checkpoint.directory_of(o.init_checkpoint)
  except FileNotFoundError:  # said by the trainer, naming --init_checkpoint
    return
  # xlnet_config.json: a released model; config.json: a HuggingFace model directory (it has one whenever it is one).
  held = [name for name in ("xlnet_config.json", "config.json") if os.path.exists(os.path.join(init_dir, name))]
  if init_dir == os.path.abspath(o.model_dir) and held:
    raise FlagError(f"--model_dir {o.model_dir} is the directory of --init_checkpoint {o.init_checkpoint}, which "
                    f"holds the model's {' and '.join(held)}: the run would write over "
                    f"{'them' if len(held) != 1 else 'it'} and put its checkpoints beside the model it starts from. "
                    "Pass a separate --model_dir.")


def _restore_or_init(o, trainer, log_fn, **kwargs):
  from xlnet_tf import run_checkpoint  # pylint: disable=g-import-not-at-top
  try:
    return trainer.restore_or_init(o.init_checkpoint, log_fn=log_fn, **kwargs)
  except run_checkpoint.CannotResume as e:
    foreign = sorted(set(run_flags(o.model_dir) or {}) - set(vars(o)) - _RESOLVED)
    if foreign:
      raise FlagError(f"Cannot resume from {e.latest}: --model_dir {o.model_dir} holds the checkpoints of another "
                      f"tool (its run_flags.json has flags this one lacks: {', '.join(foreign[:4])}"
                      f"{', ...' if len(foreign) > 4 else ''}). Pass another --model_dir.") from None
    changes = flag_changes(o)
    if not changes:
      raise
    raise FlagError(f"Cannot resume from {e.latest} ({e.reason}): it was written with other flags "
                    f"({'; '.join(changes[:6])}{'; ...' if len(changes) > 6 else ''}; {o.model_dir}/run_flags.json). "
                    "Rerun with that run's values, or pass another --model_dir.") from None


def fine_tuning_trainer(o, strategy, build_model, task, xlnet_config, tokens_per_example, log_fn=print,
                        resolved=None):
  """The `Trainer` of a fine-tuning CLI (run_classifier.py, run_race.py, run_squad.py) from its options `o`
  ready to train: `--train_batch_size` is global on TPU and per replica elsewhere (the original's GPU semantics);
  it resumes from `--model_dir`'s latest checkpoint or loads `--init_checkpoint`'s weights, then the chief writes
  the run files (xlnet_config.json, run_flags.json; a run that fails before leaves the earlier run's).

  Args:
    build_model: run_config -> the task's XLNetModel.
    task: the task's loss (e.g. a `ClassifierTask`).
    xlnet_config: the model's `XLNetConfig`.
    tokens_per_example: int, for the tokens/s of the log line.
    resolved: optional dict written into run_flags.json beside the flags: what the run resolved from them and a
      later run must match (run_classifier.py's `label_list`).

  Returns:
    (trainer, the step it starts from, the global batch size, the per-replica batch size).
  """
  from xlnet_tf import training  # pylint: disable=g-import-not-at-top
  from xlnet_tf.training import optimization  # pylint: disable=g-import-not-at-top
  global_batch, per_replica = training.fine_tuning_batch_sizes(strategy, o.train_batch_size)
  run_config = create_run_config(o, is_training=True, is_finetune=True)
  if o.clip_mode == "auto":  # resolved, as run_flags.json keeps it (what auto means has changed before)
    o = types.SimpleNamespace(**dict(vars(o), clip_mode=optimization.default_clip_mode(strategy, fine_tuning=True)))
  config = train_config(o, global_batch, tokens_per_example,
                        iterations=min(o.iterations, o.save_steps) if o.save_steps else o.iterations)
  trainer = training.Trainer(strategy, lambda: build_model(run_config), task, o.model_dir, config)
  start = restore_or_init(o, trainer, xlnet_config, log_fn, resolved)  # weights only when fine-tuning
  return trainer, start, global_batch, per_replica


_PATH_FLAG_SUFFIXES = ("_dir", "_file", "_path", "_glob", "checkpoint", "_ckpt")


def _expand_user(name, value):
  """A path flag's `~` (or `~user`) as the user's home, in each comma-separated part: a shell leaves the `~` of
  `--model_dir=~/exp` as it is, and the tools made a directory named `~` in the working directory."""
  if isinstance(value, str) and "~" in value and (name == "input" or name.endswith(_PATH_FLAG_SUFFIXES)):
    return ",".join(os.path.expanduser(part) for part in value.split(","))
  return value


def values(flag_values=absl_flags.FLAGS):
  """The script's own flags (every flag `flags.py` defined) as a plain namespace: what its `run` takes; a path
  flag's leading `~` is the user's home (`_expand_user`), a HuggingFace hub cache directory given as the model to
  read its snapshot (`_hub_snapshot`). A float flag that is nan or infinite is a FlagError (absl takes
  `--learning_rate=nan`; a run trained to its first non-finite loss, and wrote a run_flags.json that is no json)."""
  own = flag_values.get_flags_for_module(flags)
  for f in own:
    if isinstance(f.value, float) and not math.isfinite(f.value):
      raise FlagError(f"--{f.name} must be a finite number. Received: {f.value}.")
  options = types.SimpleNamespace(**{f.name: _expand_user(f.name, f.value) for f in own})
  for name in ("init_checkpoint", "predict_ckpt", "input"):
    if getattr(options, name, None):
      setattr(options, name, _hub_snapshot(name, getattr(options, name)))
  return options


def _hub_snapshot(name, path):
  """--{name}=path, or the model directory inside it where it is a HuggingFace hub cache directory
  (`hf_checkpoint.hub_snapshot`: ~/.cache/huggingface/hub/models--xlnet--xlnet-base-cased, what `from_pretrained`
  downloaded), with a log line naming it."""
  if not os.path.isdir(os.path.join(path, "snapshots")):  # local only: a hub cache is on the user's disk
    return path
  from xlnet_tf import hf_checkpoint  # pylint: disable=g-import-not-at-top  (cli.py stays light to import)
  snapshot = hf_checkpoint.hub_snapshot(path)
  if snapshot is None:
    return path
  logging.info("--%s %s is a HuggingFace hub cache directory: reading its model %s.", name, path, snapshot)
  return snapshot


def defaults(define_flags, **overrides):
  """`values()` of a fresh flag set made by `define_flags(flag_values=...)`: every default, then `overrides`.

  Raises:
    ValueError: an override names no flag of that script.
  """
  flag_values = absl_flags.FlagValues()
  define_flags(flag_values=flag_values)
  flag_values.mark_as_parsed()
  options = values(flag_values)
  unknown = sorted(set(overrides) - set(vars(options)))
  if unknown:
    raise ValueError(f"No such flag: {', '.join(unknown)}.")
  vars(options).update(overrides)
  return options


_OUT_OF_MEMORY = ("Out of memory (%s): the device cannot hold what the run needs. Make its batches or sequences "
                  "smaller, or run on a device with more memory.")


def _failed_allocation(error):
  """What a TensorFlow out-of-memory error could not allocate (`out_of_memory.allocation`), or None."""
  if "tensorflow" not in sys.modules:
    return None
  from xlnet_tf.training import out_of_memory  # pylint: disable=g-import-not-at-top
  return out_of_memory.allocation(error)


def cli_main(prog, body):
  """The absl `main` of a CLI: rejects stray arguments, logs at INFO, runs `body(values())`, and ends a bad flag,
  file or value, a failed write, or a device out of memory (ValueError, OSError, FloatingPointError, MemoryError,
  TensorFlow's out-of-memory ResourceExhaustedError) with one line `{prog}: error: ...`,
  exit 1; a run stopped by a signal with one line and exit 128 + signal: in the training loop after saving (an
  exception with `exit_code`, `training.Interrupted`), elsewhere where it was (`preemption.stops_raised`), or at
  the end where the code it landed in lost it."""
  def main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    logging.set_verbosity(max(logging.INFO, logging.get_verbosity()))  # INFO, or DEBUG with -v 1
    from xlnet_tf.training import preemption  # pylint: disable=g-import-not-at-top  (cli.py stays light to import)
    noted = []
    try:
      with preemption.stops_raised() as noted:
        body(values())
      if not noted:
        return
      name = signal.Signals(noted[0]).name  # lost where it landed (`preemption.check_stop` saw no step after it)
      line, code = (f"{prog}: stopped by {name} late: the code it landed in lost it, and the run went on to its end; "
                    "what the run wrote is whole."), 128 + noted[0]
    except BaseException as e:  # pylint: disable=broad-except
      if hasattr(e, "exit_code"):  # e.g. training.Interrupted: stopped by a signal after saving
        line, code = f"{prog}: {e}", e.exit_code
      elif (signum := preemption.stop_signal(e, noted)) is not None:
        line, code = (f"{prog}: stopped by {signal.Signals(signum).name}; files are written whole or not at all, "
                      "so none was left half-written. Run the same command again."), 128 + signum
      elif isinstance(e, (ValueError, OSError, FloatingPointError, MemoryError)):
        line, code = f"{prog}: error: " + (" ".join(str(e).split()) or _OUT_OF_MEMORY % "Python's MemoryError"), 1
      elif (allocation := _failed_allocation(e)) is not None:  # outside the steps, which name their flags
        line, code = f"{prog}: error: " + _OUT_OF_MEMORY % allocation, 1
      else:
        raise
    finally:
      _main_ended[0] = True
    gc.collect()  # TensorFlow objects of the failed run log their teardown now, not after our last line
    print(line, file=sys.stderr, flush=True)
    sys.exit(code)
  return main


def _parse_flags(argv):
  """absl's parsing of `argv` (an unknown flag or a bad value: one line `{tool}: error: ...`, exit 1), then what
  must come before TensorFlow's runtime starts, which absl's start-up callbacks do before `main` (tf.distribute's
  lists the GPUs): XLA's cache setting (`xla_cache.set_flags`)."""
  try:
    rest = absl_flags.FLAGS(argv)
  except absl_flags.Error as e:  # absl's own report ends with a help hint, not the error (app.parse_flags_with_usage)
    line = " ".join(str(e).split())
    print(f"{os.path.basename(argv[0])}: error: {line}. Pass --helpshort or --helpfull to see the flags.",
          file=sys.stderr, flush=True)
    sys.exit(1)
  if getattr(absl_flags.FLAGS, "xla_cache_dir", None):
    from xlnet_tf.training import xla_cache  # pylint: disable=g-import-not-at-top  (cli.py stays light to import)
    xla_cache.set_flags(absl_flags.FLAGS.xla_cache_dir)
  return rest


def run_script(define_flags, main):
  """`define_flags()`, --helpshort listing them, then `app.run(main)`: the `__main__` of every CLI. Its exit ends
  the process at once (`_end_process`)."""
  define_flags()
  for flag in absl_flags.FLAGS.get_flags_for_module(flags):  # key flags of the script, which --helpshort lists
    absl_flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  try:
    app.run(main, flags_parser=_parse_flags)
  except SystemExit as e:
    code = e.code
  else:
    code = 0
  finally:
    stderr_filter.stop()  # every line out before the process ends (also where it ends with os._exit)
  _end_process(code)


def _end_process(code):
  """Ends the process with `code` (SystemExit's: None is 0, a message is printed and is 1) as Python's shutdown
  would, but without its teardown. Python sets SIGINT and SIGTERM back to their default actions before it tears the
  modules down, and TensorFlow's teardown takes about half a second: a signal then killed the process without its
  line (`_exit_on_signal`). So the atexit functions (logging's flush among them) run here, under that handler, the
  standard streams are flushed, and `os._exit` ends the process; the tools close or flush every file they write
  (the TensorBoard writer after each report) before."""
  if code is None:
    code = 0
  elif not isinstance(code, int):
    print(code, file=sys.stderr)
    code = 1
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
      pass
  os._exit(code)  # pylint: disable=protected-access
