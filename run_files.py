"""A training run's --model_dir: the run files it keeps beside its checkpoints (xlnet_config.json, run_flags.json:
its flags and what it resolved from them), what a later run checks against them (a resume, an evaluation, a
prediction, an export; where a training run may start: `check_apart_from_init_checkpoint`). The start itself is
`run_start.py`'s. Flag namespaces in, `cli.FlagError` out, as `flag_configs.py`'s checks.
"""

import json
import os

from absl import logging

from flag_configs import FlagError

_NOT_COMPARED = ("train_steps", "iterations", "save_steps", "max_save", "save_initial_checkpoint", "verbosity")


def run_flags(directory, flag="--model_dir"):
  """The `run_flags.json` a training run wrote in `directory` (its flags, and what the run resolved from them, e.g.
  run_classifier.py's `label_list`) as a dict; None where there is none (a run of the original code); a damaged
  one is a FlagError (`training.read_run_flags`) whose remedy names `flag`, the flag that names `directory`."""
  from xlnet_tf import training  # pylint: disable=g-import-not-at-top
  try:
    return training.read_run_flags(directory, use="which this run checks. Restore it from a copy of that run, or "
                                                  f"pass another {flag}.")
  except ValueError as e:
    raise FlagError(str(e)) from None


def require_model_dir(o, sources=("predict_ckpt",)):
  """FlagError where --model_dir is missing and the run trains, evaluates, or predicts or exports with none of
  `sources` (the flags a tool predicts from) set: one rule for the fine-tuning tools (sweep 25, C1); and where a run
  that does not train is given an HF model directory as --model_dir (said after its records were written); and where
  --predict_ckpt is given to a run that evaluates and reads it nowhere (it evaluated --model_dir's checkpoints,
  without a word: sweep 32, U5)."""
  readers = [flag for flag in ("do_predict", "export_dir") if hasattr(o, flag)]
  if getattr(o, "do_eval", False) and o.predict_ckpt and not any(getattr(o, flag) for flag in readers):
    raise FlagError(f"--predict_ckpt {o.predict_ckpt} is read by {' and '.join('--' + f for f in readers)} only, "
                    f"which this run does not do: --do_eval evaluates the checkpoints in --model_dir {o.model_dir}, "
                    "as the original's. To evaluate it, pass its directory as --model_dir (an HF model converted "
                    "first: convert_checkpoint.py --to=tf1); to predict with it, add --do_predict=True.")
  _require_predict_ckpt(o)
  _require_a_directory_of_checkpoints(o.model_dir)
  if o.model_dir and not o.do_train:
    from xlnet_tf import checkpoint, hf_checkpoint  # pylint: disable=g-import-not-at-top
    if hf_checkpoint.is_hf_directory(o.model_dir) and not checkpoint.checkpoint_prefixes(o.model_dir):
      raise FlagError(checkpoint.no_checkpoint_line(o.model_dir, ""))
  if o.model_dir:
    return
  if o.do_train or getattr(o, "do_eval", False):
    raise FlagError("--model_dir is required with " + (
        "--do_train: where the fine-tuned checkpoints go." if o.do_train else
        "--do_eval: the directory whose checkpoints it evaluates."))
  if not any(getattr(o, name) for name in sources):
    mode = "--do_predict" if o.do_predict else "--export_dir"
    raise FlagError(f"{mode} needs a checkpoint: pass {', '.join(f'--{name}' for name in sources)} or a --model_dir "
                    "holding one.")


def _require_a_directory_of_checkpoints(model_dir):
  """FlagError where --model_dir names a checkpoint (its prefix: said as no checkpoint, `Train first`, or trained
  into a new directory of its name) or a SavedModel (said as no checkpoint) (sweep 34, S6)."""
  from xlnet_tf import checkpoint_paths, fileio  # pylint: disable=g-import-not-at-top
  if model_dir and not fileio.isdir(model_dir) and fileio.exists(model_dir + ".index"):
    raise FlagError(f"--model_dir {model_dir} is a checkpoint, not a directory of them: pass --model_dir="
                    f"{os.path.dirname(model_dir) or '.'} (or --predict_ckpt={model_dir} to predict with it).")
  if model_dir and checkpoint_paths.is_saved_model(model_dir):
    raise FlagError(f"--model_dir {model_dir} is a SavedModel (saved_model.pb: an export, for serving), not a "
                    "directory of checkpoints. Pass the --model_dir it was exported from.")


def _require_predict_ckpt(o):
  """FlagError where a prediction or export is to read a --predict_ckpt that is not there, before anything runs
  (after the whole training before: sweep 32, U11), unless the run trains into the directory it names (a step it
  saves, e.g. --predict_ckpt=D/ckpt-1000 with --model_dir=D)."""
  if not (o.predict_ckpt and (o.do_predict or getattr(o, "export_dir", None))):
    return
  named = os.path.abspath(o.predict_ckpt.removesuffix("/latest"))
  if o.do_train and o.model_dir and os.path.abspath(o.model_dir) in (named, os.path.dirname(named)):
    return
  from xlnet_tf import checkpoint  # pylint: disable=g-import-not-at-top
  try:
    checkpoint.named_checkpoint(o.predict_ckpt)
  except FileNotFoundError as e:
    raise FlagError(f"--predict_ckpt: {e}") from None


def predict_checkpoint(o, log_fn=None):
  """(The checkpoint a prediction or export reads, the flag naming it), one rule for the fine-tuning tools:
  --predict_ckpt, else --model_dir's latest (the original's Estimator), else --init_checkpoint (where the original
  started from it or, run_squad.py, predicted from fresh weights: xlnet#56). With `log_fn`, a line where a run
  that does not train is given an --init_checkpoint it does not read. FileNotFoundError where there is none."""
  from xlnet_tf import checkpoint  # pylint: disable=g-import-not-at-top
  ckpt = checkpoint.choose_checkpoint(o.model_dir, o.predict_ckpt, o.init_checkpoint)
  in_model_dir = bool(o.model_dir) and checkpoint.directory_of(ckpt) == os.path.abspath(o.model_dir)
  flag = ("--predict_ckpt" if o.predict_ckpt else "--init_checkpoint" if o.init_checkpoint and not in_model_dir
          else "--model_dir")
  if log_fn and flag == "--model_dir" and o.init_checkpoint and not o.do_train:
    log_fn(f"Reading {ckpt}, --model_dir's latest checkpoint, as the original; --init_checkpoint is read where "
           f"--model_dir holds none. Pass --predict_ckpt={o.init_checkpoint} to read it instead.")
  return ckpt, flag


# Another value loads the same weights and pools otherwise (summary_type, use_summ_proj), reads other tokens (uncased)
# or takes other relative positions (clamp_len).
_TRAINED_WITH = ("summary_type", "use_summ_proj", "uncased", "clamp_len")
# run_flags.json's digest of the SentencePiece model a fine-tuning run read (`spiece_digest`): its path alone may name
# another model later (a file replaced, or another machine), which turns the same text into other ids.
SPIECE_DIGEST = "spiece_model_sha256"
# run_flags.json's record of the flags a resumed run changed, and from which step (`run_start.restore_or_init`).
CHANGED = "changed_on_resume"
# What a run keeps beside its flags in its run_flags.json (`run_start.restore_or_init`'s `resolved`, the digest, the changes).
_RESOLVED = {"label_list", "labels_from", SPIECE_DIGEST, "record_sizes", CHANGED, "num_replicas"}


def spiece_digest(o):
  """The sha256 of --spiece_model_file's bytes; None for a tool without that flag."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  return fileio.sha256(o.spiece_model_file) if getattr(o, "spiece_model_file", None) else None


def check_trained_model(o, directory, xlnet_config, flag="--model_dir"):
  """FlagError where the checkpoints in `directory` (`flag` names it) were fine-tuned as another model than the
  options `o` build: another xlnet_config.json (`training.check_run_files`), or another pooling or casing
  (`_TRAINED_WITH` in its run_flags.json), or another SentencePiece model (its sha256 there); for a HuggingFace
  directory, another pooling than its config.json's, another casing than its tokenizer_config.json's. All load
  without a shape mismatch: an evaluation, a prediction, an export or a resume went on with other numbers, exit 0."""
  from xlnet_tf import checkpoint, hf_checkpoint, training  # pylint: disable=g-import-not-at-top
  if flag == "--model_dir" and getattr(o, "do_train", False):  # before records are written
    check_apart_from_init_checkpoint(o)
    check_init_checkpoint(o, xlnet_config)
  if directory and hf_checkpoint.is_hf_directory(directory):
    _check_hf_pooling(o, directory, flag)
    there = run_flags(directory, flag) or {}
    _check_spiece_beside(o, directory, flag, there)  # an HF model's own tokenizer (sweep 23, A1)
    _check_started_with(o, directory, flag, there)  # its casing (sweep 23, B7)
    return
  if not directory or not (checkpoint.latest_checkpoint(directory) or checkpoint.checkpoint_prefixes(directory)):
    return  # no checkpoint (yet): nothing to check
  try:
    training.check_run_files(directory, xlnet_config, flag)
  except ValueError as e:
    raise FlagError(str(e)) from None
  there = run_flags(directory, flag) or {}
  changed = _changes(there, o, _TRAINED_WITH)
  if getattr(o, "spiece_model_file", None) and (change := _spiece_change(there, o, "spiece_model_file",
                                                                        spiece_digest(o))):
    changed.append(change)
  elif not there.get(SPIECE_DIGEST):  # a released model, a conversion: its spiece.model (sweep 23, A1)
    _check_spiece_beside(o, directory, flag, there)
  if changed:
    raise FlagError(f"The checkpoints in {flag} {directory} were fine-tuned with other flags "
                    f"({'; '.join(changed)}; {os.path.join(directory, 'run_flags.json')}): the same weights would "
                    f"pool, read or place tokens otherwise, and score other numbers. Pass the values there, or another "
                    f"{flag}.")


def _spiece_change(there, o, flag, digest):
  """'--flag=X there, Y here: another SentencePiece model (its sha256 differs)' where the run_flags.json `there`
  records the sha256 of another SentencePiece model than `digest` (of the options `o`'s --flag: the model itself,
  or for pretraining the records written with it); None where it records none, or the same. Where `there` is of
  the other kind of run (a pretraining run's --record_info_dir, a fine-tuning run's --spiece_model_file), both flags
  are named."""
  recorded = there.get(SPIECE_DIGEST)
  if not recorded or not digest or recorded == digest:
    return None
  there_flag = "record_info_dir" if "record_info_dir" in there else "spiece_model_file"
  here = getattr(o, flag) if flag == there_flag else f"--{flag}={getattr(o, flag)}"
  return (f"--{there_flag}={there.get(there_flag)} there, {here} here: "
          f"{'records of ' if flag == 'record_info_dir' else ''}another SentencePiece model (its sha256 differs)")


def check_spiece(there, o, flag, digest, dir_flag, directory):
  """FlagError where the run_flags.json `there` of the checkpoints in `directory` (`dir_flag` names it: a resume's
  --model_dir, or --init_checkpoint's) records another SentencePiece model than `digest` (`_spiece_change`)."""
  if change := _spiece_change(there, o, flag, digest):
    fix = ("records written with that run's SentencePiece model (data_utils.py --sp_path)" if flag == "record_info_dir"
           else "that run's SentencePiece model as --spiece_model_file (a pretraining run's: the --sp_path its "
                "records were written with)")
    raise FlagError(f"The checkpoints in {dir_flag} {directory} were trained with other flags ({change}; "
                    f"{os.path.join(directory, 'run_flags.json')}): the same ids would mean other pieces, and every "
                    f"embedding learned so far another piece. Pass {fix}, or another {dir_flag}.")


def check_init_checkpoint(o, xlnet_config, resolved=None):
  """The checks of --init_checkpoint's run against this one where this run starts from it: its SentencePiece model
  (`_check_spiece_beside`), its casing and clamp (`_check_started_with`) and its model (`_check_init_config`).
  Nothing where --model_dir holds a run to resume (it reads no --init_checkpoint); one where the checkpoint is not
  found (the trainer's line)."""
  from xlnet_tf import checkpoint  # pylint: disable=g-import-not-at-top
  if not getattr(o, "init_checkpoint", None) or checkpoint.latest_checkpoint(o.model_dir):
    return
  try:
    directory = checkpoint.directory_of(o.init_checkpoint)
  except FileNotFoundError as e:  # the trainer's line, before the records are written (sweep 23, C6)
    raise FlagError(f"--init_checkpoint: {e}") from None
  there = run_flags(directory, "--init_checkpoint") or {}
  _check_spiece_beside(o, directory, "--init_checkpoint", there, resolved)
  _check_started_with(o, directory, "--init_checkpoint", there)
  _check_init_config(o, directory, xlnet_config)


def _check_started_with(o, directory, flag, there):
  """FlagError where the checkpoints in `directory` (`flag` names it: --init_checkpoint, or an HF directory a run
  reads) were trained on text cased otherwise than the options `o` read (--uncased), or with relative positions
  clamped otherwise (--clamp_len): the values of their run_flags.json (`there`; a pretraining run's --uncased: its
  records'), an HF directory's tokenizer_config.json's do_lower_case (its clamp_len: `hf_checkpoint.check_clamp_len`).
  Nothing where neither is recorded (a released model, an original run's). Fine-tuning changes the head, not the
  text read."""
  from xlnet_tf import convert, hf_checkpoint  # pylint: disable=g-import-not-at-top
  hf = hf_checkpoint.is_hf_directory(directory)
  source = os.path.join(directory, convert.TOKENIZER_CONFIG if hf else "run_flags.json")
  there = {"uncased": convert.tokenizer_lowercases(directory)} if hf else there
  there = {k: there[k] for k in ("uncased", "clamp_len") if isinstance(there.get(k), (bool, int, float))}
  keys = [k for k in there if _changes(there, o, (k,))]
  if not keys:
    return
  changed = ([f"do_lower_case {json.dumps(there['uncased'])} there, --uncased={o.uncased} here"] if hf else
             _changes(there, o, keys))  # the file's own name for it
  learned = [f"the pieces of {'lower-cased' if there[k] else 'cased'} text" if k == "uncased" else
             f"relative positions {f'clamped at {there[k]}' if _acting(k, there[k]) > 0 else 'unclamped'}"
             for k in keys]
  fix = " ".join(f"--{k}={there[k]}" for k in keys)
  if getattr(o, "record_info_dir", None) and "uncased" in keys:  # run_pretrain: --uncased picks the records (N-C6)
    fix = f"records written by data_utils.py with --uncased={there['uncased']} (and {fix})"
  raise FlagError(f"{flag} {directory} was trained with other flags ({'; '.join(changed)}; {source}): its weights "
                  f"learned {' and '.join(learned)}, which this run would read otherwise. Pass {fix}, or another "
                  f"{flag}.")


def _changes(there, o, names):
  """'--name=X there, Y here' for each of `names` whose value in `there` (a run_flags.json's dict) acts otherwise
  (`_acting`) than the options `o`'s."""
  return [f"--{k}={there[k]} there, {getattr(o, k)} here" for k in names if k in there and hasattr(o, k)
          and _acting(k, there[k]) != _acting(k, getattr(o, k))]


def _check_init_config(o, directory, xlnet_config):
  """FlagError where the xlnet_config.json beside --init_checkpoint (in `directory`: a released model's, a run's)
  describes another model than this run builds (`xlnet_config`; None: not checked): the same shapes load (another
  ff_activation), and the run fine-tuned another function than the weights learned, exit 0."""
  from xlnet_tf import XLNetConfig  # pylint: disable=g-import-not-at-top
  beside = os.path.join(directory, "xlnet_config.json")
  try:
    there = XLNetConfig(json_path=beside) if xlnet_config is not None and os.path.exists(beside) else None
  except ValueError:  # damaged: unused (this run's model comes from its own flags)
    return
  diff = [f"{k} {a} there, {b} here" for k, a, b in there.differences(xlnet_config)] if there else []
  if diff:
    given = getattr(o, "model_config_path", None)
    source = f"--model_config_path {given}" if given else "the model flags"
    raise FlagError(f"--init_checkpoint {o.init_checkpoint} is another model than this run builds from {source} "
                    f"({beside}: {'; '.join(diff)}): its weights would compute another function. Pass "
                    f"--model_config_path={beside}.")


def _check_spiece_beside(o, directory, dir_flag, there, resolved=None):
  """`_check_spiece` for the run of the checkpoints in `directory` (`dir_flag` names it: --init_checkpoint's, a
  pretraining run fine-tuned or a fine-tuning run continued; or the checkpoint an evaluation, prediction or export
  reads; `there` its run_flags.json): against --spiece_model_file, or (pretraining) its records' model (`resolved`'s
  digest). Where the checkpoint has no run_flags.json recording one (a released or HuggingFace model, a conversion,
  an original run), against the `spiece.model` beside it, the model's own."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  flag, digest = (("spiece_model_file", spiece_digest(o)) if getattr(o, "spiece_model_file", None) else
                  ("record_info_dir", (resolved or {}).get(SPIECE_DIGEST)))
  beside = os.path.join(directory, "spiece.model")
  other = not (there.get(SPIECE_DIGEST) or not digest or not fileio.exists(beside) or fileio.sha256(beside) == digest)
  if other and not _is_sentencepiece(beside):  # e.g. a Git LFS pointer left for the model: nothing to compare with
    logging.warning("%s beside %s is no SentencePiece model (a Git LFS pointer, a copy cut short?): --%s is not "
                    "checked against the model's own.", beside, dir_flag, flag)
    other = False
  if not other:
    check_spiece(there, o, flag, digest, dir_flag, directory)
    return
  given = (f"--spiece_model_file {o.spiece_model_file} is" if flag == "spiece_model_file" else
           f"The records of --record_info_dir {o.record_info_dir} were written with")
  fix = (f"Pass --spiece_model_file={beside}" if flag == "spiece_model_file" else
         f"Write the records with it (data_utils.py --sp_path={beside})")
  raise FlagError(f"{given} another SentencePiece model than the one beside {dir_flag} ({beside}: its sha256 "
                  "differs): the same ids would mean other pieces than the model learned. "
                  f"{fix}, or move that file away if the vocabulary is meant to change.")


def _is_sentencepiece(path):
  """Whether `path` is an XLNet SentencePiece model the tools can read (not, e.g., a Git LFS pointer)."""
  from xlnet_tf.data import tokenization  # pylint: disable=g-import-not-at-top
  try:
    tokenization.load_sentencepiece(path)
  except (ValueError, OSError, RuntimeError):
    return False
  return True


def _acting(name, value):
  """A recorded flag's value as it acts: --clamp_len's values that clamp nothing (0, -1, ...) are one."""
  from xlnet_tf import hf_checkpoint  # pylint: disable=g-import-not-at-top
  return hf_checkpoint.clamp_of(value) if name == "clamp_len" else value


def _check_hf_pooling(o, directory, flag):
  """FlagError where the HuggingFace classification or multiple-choice model in `directory` pools otherwise than the
  options `o` say (its config.json's summary_type and summary_use_proj): its head ran on another summary, exit 0."""
  from xlnet_tf import hf_checkpoint  # pylint: disable=g-import-not-at-top
  try:
    config = hf_checkpoint.read_config(directory)
  except ValueError as e:
    raise FlagError(str(e)) from None
  if hf_checkpoint.architecture_of(config, {}) not in hf_checkpoint.POOLING:
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
  they are (`_NOT_TRAINING`), and --train_steps is compared: the learning rate's decay runs to it."""
  there = run_flags(o.model_dir) if there is None else there
  if there is None:
    return []
  here = json.loads(json.dumps(vars(o), default=str))  # as training.write_run_files wrote them
  if "float32_positions" not in there and "float32_positions" in here:  # a run of before the flag: bfloat16 runs
    there = dict(there, float32_positions=bool(there.get("use_bfloat16")) or here["float32_positions"])  # had them
  skipped = set(_NOT_COMPARED)
  if training_only:
    skipped = (skipped | _NOT_TRAINING) - {"train_steps"}  # the horizon of the decay: every later step's rate
    if "every_loop" in (here.get("mems_reset"), there.get("mems_reset")):
      skipped.discard("iterations")  # it says where the mems are zeroed
    if "record_info_dir" in here:  # pretraining pools nothing
      skipped |= {"summary_type", "use_summ_proj"}
  return [f"{k} {there[k]} there, {here[k]} here" for k in sorted(set(there) & set(here))
          if there[k] != here[k] and k not in skipped and not k.endswith(("_dir", "_file", "_path", "_ckpt",
                                                                          "checkpoint"))
          and not (training_only and k.startswith(("do_", "eval_", "predict_")))]


# Flags that leave a training step's numbers as they are: evaluation, prediction and export; data preparation and
# reading; where the run runs (compared as the number of replicas it resolves to, `run_start.restore_or_init`); the same updates
# by other means (documented and tested: recomputation, accumulation, XLA); a resume's new weights' spread (it reads
# its weights from the checkpoint: a warning said its steps trained with this run's --init_std, sweep 36).
_NOT_TRAINING = {"init", "init_std", "init_range", "export_dir", "target_eval_key", "n_best_size", "max_answer_length",
                 "start_n_top", "end_n_top",
                 "null_threshold", "allow_empty_prediction", "allow_last_token", "glue_metrics", "track_mean",
                 "overwrite_data", "num_proc", "proc_id", "skip_bad_records", "tpu", "master", "gcp_project",
                 "tpu_zone", "tpu_job_name", "strategy", "num_core_per_host", "num_hosts", "use_tpu",
                 "init_global_vars", "init_optimizer_state", "recompute_grad", "gradient_accumulation_steps",
                 "jit_compile"}


def check_apart_from_init_checkpoint(o):
  """FlagError where a training run would write into the directory of a model to start from, as released (its
  xlnet_config.json beside it) or downloaded (HuggingFace): the run would rewrite that config and write its
  checkpoints beside the model, which the original's README warns against. Refused where --model_dir is the
  directory of --init_checkpoint (a bare checkpoint there, an original run's model.ckpt, is allowed, as by the
  original), and where --model_dir holds such a model and no checkpoints of a run (`_model_to_start_from`): the
  run trained from random weights into it, exit 0. Refused too where --model_dir's latest checkpoint, or with none,
  any checkpoint there, is not a run's `ckpt-N` (an original run's model.ckpt-N, with or without its `checkpoint`
  state file): the run trained from random weights beside it, or failed to resume it advising to delete it. A
  --model_dir already holding this tool's checkpoints resumes them and reads no --init_checkpoint."""
  from xlnet_tf import checkpoint, fileio  # pylint: disable=g-import-not-at-top
  latest = checkpoint.latest_checkpoint(o.model_dir)
  if latest and checkpoint.is_run_checkpoint(latest):
    check_same_tool(o, latest)  # before the records are written: they were, then the run refused (sweep 25, C4)
    return
  init_dir = None
  try:
    init_dir = checkpoint.directory_of(o.init_checkpoint) if getattr(o, "init_checkpoint", None) else None
  except FileNotFoundError:  # said by the trainer, naming --init_checkpoint
    pass
  # xlnet_config.json: a released model; config.json: a HuggingFace model directory (it has one whenever it is one).
  held = [name for name in ("xlnet_config.json", "config.json")
          if init_dir and os.path.exists(os.path.join(init_dir, name))]
  # Links followed: a --model_dir linked to that directory was told to pass it as --init_checkpoint (sweep 32, U19).
  in_init_dir = bool(init_dir) and fileio.real_path(init_dir) == fileio.real_path(o.model_dir)
  if in_init_dir and held:
    raise FlagError(f"--model_dir {o.model_dir} is the directory of --init_checkpoint {o.init_checkpoint}, which "
                    f"holds the model's {' and '.join(held)}: the run would write over "
                    f"{'them' if len(held) != 1 else 'it'} and put its checkpoints beside the model it starts from. "
                    "Pass a separate --model_dir.")
  if model := _model_to_start_from(o.model_dir):
    raise FlagError(f"--model_dir {o.model_dir} holds a model to start from ({model}); pass it as --init_checkpoint "
                    "and another --model_dir.")
  # An original run's model_dir (model.ckpt-N, its `checkpoint` state file, config.json): not resumable here, and a run
  # from random weights beside it shadowed it. A bare checkpoint there as --init_checkpoint is allowed (above) while no
  # state file names it: this run would then resume from it, and its CheckpointManager prune what the file lists.
  foreign = latest or _other_checkpoint(o.model_dir)
  if foreign and (latest or not in_init_dir):
    slots = (" (its Adam slots and step come with it: --init_optimizer_state)" if hasattr(o, "init_optimizer_state")
             else "")  # the fine-tuning tools start from its weights alone, at step 0
    raise FlagError(f"--model_dir {o.model_dir} holds the checkpoint {foreign}, not one of this tool's training runs "
                    f"(ckpt-N): pass it as --init_checkpoint{slots} and another --model_dir.")


def check_same_tool(o, latest):
  """FlagError where --model_dir's run_flags.json has flags the options `o` lack: another tool's (`latest` the last)."""
  foreign = sorted(set(run_flags(o.model_dir) or {}) - set(vars(o)) - _RESOLVED)
  if foreign:
    raise FlagError(f"Cannot resume from {latest}: --model_dir {o.model_dir} holds the checkpoints of another "
                    f"tool (its run_flags.json has flags this one lacks: {', '.join(foreign[:4])}"
                    f"{', ...' if len(foreign) > 4 else ''}). Pass another --model_dir.")


def _other_checkpoint(directory):
  """The prefix of the first checkpoint in `directory` not named as a training run's (`ckpt-N`); None if none."""
  from xlnet_tf import checkpoint  # pylint: disable=g-import-not-at-top
  return next((p for p in checkpoint.checkpoint_prefixes(directory) if not checkpoint.is_run_checkpoint(p)), None)


def _model_to_start_from(directory):
  """The files of a model in `directory` that no training run wrote, e.g. "config.json, model.safetensors": a
  HuggingFace model (config.json and weights), in a hub cache directory its snapshot's ("snapshots/C/config.json,
  ..."; `from_pretrained` downloads there, and --init_checkpoint reads it), or a released or exported TF1 one
  (xlnet_config.json and a checkpoint not named as a run's `ckpt-N`); None where it holds none."""
  from xlnet_tf import fileio, hf_checkpoint  # pylint: disable=g-import-not-at-top
  try:
    snapshot = hf_checkpoint.hub_snapshot(directory)
  except ValueError:  # several snapshots, none named by refs/main: a hub cache all the same
    snapshot = os.path.join(directory, "snapshots", sorted(fileio.listdir(os.path.join(directory, "snapshots")))[0])
  if snapshot and (model := _model_to_start_from(snapshot)):
    return ", ".join(os.path.join(os.path.relpath(snapshot, directory), name) for name in model.split(", "))
  if hf_checkpoint.is_hf_directory(directory):
    weights = [name for name in hf_checkpoint.WEIGHT_FILES if fileio.exists(os.path.join(directory, name))]
    return ", ".join([hf_checkpoint.CONFIG_FILE, *weights[:1]])
  if not fileio.exists(os.path.join(directory, "xlnet_config.json")):
    return None
  other = _other_checkpoint(directory)
  return f"xlnet_config.json, {os.path.basename(other)}.index" if other else None
