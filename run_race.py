"""XLNet on RACE (multiple-choice reading comprehension): the original `run_race.py`, plus a predict mode.

  python run_race.py --do_train=True --do_eval=True --data_dir=${RACE_DIR} --output_dir=proc_data/race \\
      --model_dir=exp/race --spiece_model_file=${LARGE_DIR}/spiece.model \\
      --model_config_path=${LARGE_DIR}/xlnet_config.json --init_checkpoint=${LARGE_DIR}/xlnet_model.ckpt \\
      --uncased=False --max_seq_length=512 --max_qa_length=128 --train_batch_size=8 --learning_rate=2e-5 \\
      --train_steps=12000 --warmup_steps=1000 --save_steps=1000 --adam_epsilon=1e-6 --eval_batch_size=32
  python run_race.py --do_eval=True --eval_all_ckpt=True --do_predict=True --predict_dir=exp/race/pred ...

Every flag of the original keeps its name and default. Semantics:
- One question is one example of 4 sequences (the article with each option): `--train_batch_size=8` is 8 questions,
  32 sequences, per replica (the original's GPU path); with --strategy=tpu (--use_tpu) it is the global batch.
- Features are the original's by default, including its option aliasing (an option that fits grows the article
  the next options see); `--fix_option_aliasing=True` gives every option the article alone. See docs/race.md.
- --init_checkpoint takes a released checkpoint (the new head keeps its initialisation), a checkpoint fine-tuned by
  the original run_race.py (head included), or one of ours. Training uses it when model_dir holds no checkpoint yet
  (a model_dir with one resumes instead). Eval and predict use it when model_dir holds none, as the original's
  Estimator did.
- Eval reads the last checkpoint of model_dir (the original's), or all of them with --eval_all_ckpt (new), and logs
  the original's `Eval | eval_accuracy ... | eval_loss ... | loss ... | global_step ... |` per checkpoint:
  eval_accuracy and eval_loss over the real questions, loss the Estimator's (the padding questions included),
  global_step the step the checkpoint records (the Estimator's, not the number in the file name).
- New: --strategy, --jit_compile, --seed (also seeds the shuffle of the training questions; unset: unseeded like
  the original), --deterministic, --fix_option_aliasing, --eval_all_ckpt, and the predict mode (--do_predict,
  --predict_dir, --predict_ckpt): `[high.|middle.]{eval_split}.predictions.json` with each question's chosen option
  and the probabilities of the four.
"""

import os

import cli  # first: start_script() runs before anything imports TensorFlow
import flag_configs
if __name__ == "__main__":
  cli.start_script()
import flags
import run_files
import run_start
import tensorflow as tf
from absl import flags as absl_flags

from xlnet_tf import checkpoint
from xlnet_tf import fileio
from xlnet_tf import locks
from xlnet_tf import training
from xlnet_tf.data import token_checks
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.race import data as race_data
from xlnet_tf.tasks.race import evaluation as race_eval
from xlnet_tf.tasks.race import records as race_records
from xlnet_tf.tasks.race import task as race_task


def define_flags(flag_values=absl_flags.FLAGS):
  """This script's flags: the original `run_race.py` ones with their defaults, and the new ones."""
  flags.define_run_config_flags(dropout=0.1, dropatt=0.1, flag_values=flag_values)
  flags.define_optimizer_flags(learning_rate=2e-5, train_steps=12000, min_lr_ratio=0.0, adam_epsilon=1e-6,
                               flag_values=flag_values)
  flags.define_hardware_flags(iterations=1000, max_save=0, flag_values=flag_values)
  flags.define_race_flags(flag_values=flag_values)


def validate(o, num_replicas=1, strategy="one_device"):
  """One-line errors for flag values the run cannot use (before anything heavy starts)."""
  if not (o.do_train or o.do_eval or o.do_predict):
    raise cli.FlagError("At least one of --do_train, --do_eval or --do_predict must be True.")
  flag_configs.require_model_config(o)
  flag_configs.require_spiece_model(o)
  run_files.require_model_dir(o, ("predict_ckpt", "init_checkpoint"))  # its prediction falls back to the latter
  if not o.data_dir or not fileio.isdir(o.data_dir):
    raise cli.FlagError(f"--data_dir {o.data_dir!r} is not a directory. Pass the RACE directory (with "
                        "{train,dev,test}/{middle,high}/).")
  if not o.output_dir:
    raise cli.FlagError("--output_dir is required: where the cached tfrecords go.")
  if o.do_predict and not o.predict_dir:
    raise cli.FlagError("--do_predict needs --predict_dir: where the predictions file goes.")
  flag_configs.require_output_dirs(o, "output_dir", "model_dir", "predict_dir")
  if o.do_predict:  # a directory there was found by the write, after the whole prediction (sweep 25, C3)
    fileio.check_file_names(o.predict_dir, [predictions_name(o)], "--predict_dir", "prediction")
  dirs = [os.path.join(o.data_dir, split, level) for split in race_data.SPLITS for level in race_data.LEVELS]
  for name in ("output_dir", "model_dir", "predict_dir"):  # the reader takes every file there for an article
    # a link to (or in) the data is the data
    if getattr(o, name) and (inside := [d for d in dirs if fileio.is_within(getattr(o, name), d, links=True)]):
      raise cli.FlagError(f"--{name} {getattr(o, name)} is inside --data_dir {o.data_dir}'s {inside[0]}, whose every "
                          "file is read as a RACE article: the run's own files there would be read as articles. "
                          f"Pass a --{name} outside --data_dir's {{split}}/{{level}} directories.")
  if o.high_only and o.middle_only:
    raise cli.FlagError("--high_only and --middle_only exclude each other (together they select nothing). Pass at "
                        "most one.")
  try:
    race_data.check_lengths(o.max_seq_length, o.max_qa_length)
  except ValueError as e:
    raise cli.FlagError(str(e)) from None
  flag_configs.require_positive(o, "num_hosts", "train_batch_size", "eval_batch_size", "shuffle_buffer", "iterations")
  if o.do_train:
    flag_configs.check_training_flags(o, num_replicas, strategy)


def _model_files(o):
  """(XLNetConfig, tokenize_fn) of --model_config_path and --spiece_model_file, checked against each other."""
  sp_model = flag_configs.sentencepiece(o)
  xlnet_config = flag_configs.model_config(o, sp_model)
  return xlnet_config, tokenization.make_tokenize_fn(sp_model, o.uncased)


def _prepare(o, split, tokenize_fn, n_token, log_fn):
  """The split's cached records (`race_records.prepare_records`), logged as the original; their ids checked."""
  config = race_records.RecordsConfig(
      data_dir=o.data_dir, spiece_model_file=o.spiece_model_file, output_dir=o.output_dir,
      max_seq_length=o.max_seq_length, max_qa_length=o.max_qa_length, eval_batch_size=o.eval_batch_size,
      high_only=o.high_only, middle_only=o.middle_only, fix_option_aliasing=o.fix_option_aliasing,
      overwrite_data=o.overwrite_data, shuffle_seed=o.seed, sorted_file_order=o.sorted_file_order, uncased=o.uncased)
  info = race_records.prepare_records(config, split, tokenize_fn)
  if info.num_real is not None:
    log_fn(f"Num of {split} samples: {info.num_real}" + (f" (+{info.num_padding} padding)" if info.num_padding else ""))
  if info.written:
    log_fn(f"Wrote {info.num_records} examples to {info.path}.")
  else:
    log_fn(f"Reusing the cached {info.path}, made from the same files, SentencePiece model and settings, --uncased "
           "included (or by a run that did not record them: then pass --overwrite_data=True if any changed).")
  token_checks.check_fine_tuning_ids(info.path, n_token, o.spiece_model_file)
  return info


def _model_dir_checkpoints(o):
  return checkpoint.list_checkpoints(o.model_dir) if fileio.isdir(o.model_dir) else []


def build_model_args(o):
  """`race_task.build_model`'s arguments (the sequence summary) from the options."""
  return dict(summary_type=o.summary_type, use_summ_proj=o.use_summ_proj)


def train(o, strategy, xlnet_config, tokenize_fn, model_args, log_fn):
  """Fine-tunes on the training split as the original; returns the last training loop's loss, lr, step."""
  num_replicas = strategy.num_replicas_in_sync
  info = _prepare(o, "train", tokenize_fn, xlnet_config.n_token, log_fn)
  trainer, start, global_batch, per_replica = run_start.fine_tuning_trainer(
      o, strategy, lambda run_config: race_task.build_model(xlnet_config, run_config, **model_args),
      race_task.RaceTask(), xlnet_config, race_data.NUM_CHOICES * o.max_seq_length, log_fn, data_files=[info.path])
  log_fn(f"Training RACE from step {start} to {o.train_steps}: global batch {global_batch} questions "
         f"({per_replica} per replica x {num_replicas} replica(s)), {race_data.NUM_CHOICES * global_batch} "
         "sequences.")
  return trainer.train(race_records.race_dataset_fn(info.path, o.max_seq_length, per_replica, o.shuffle_buffer,
                                                    o.seed, xlnet_config.n_token),
                       log_fn=log_fn, data_files=[info.path])


def run(o, strategy, log_fn=print):
  """Fine-tunes, evaluates and/or predicts as the options `o` (this script's flags: `cli.values` or
  `cli.defaults(define_flags, ...)`) say, on `strategy` for training: `flag_configs.start(o)`'s, which also applies
  --seed (the fresh weights' initialisation), --deterministic and --use_tf32, as the command line does.

  Returns:
    dict: `train` (the last training loop's loss, lr, step), `eval` (per-checkpoint results) and `best`, `predict`
    (path, accuracy, num_questions), for the modes that ran.
  """
  on_tpu = isinstance(strategy, tf.distribute.TPUStrategy)
  validate(o, strategy.num_replicas_in_sync, "tpu" if on_tpu else None)
  xlnet_config, tokenize_fn = _model_files(o)
  model_args = build_model_args(o)
  run_files.check_trained_model(o, o.model_dir, xlnet_config)
  results = {}
  evaluates = training.is_chief(strategy) and (o.do_eval or o.do_predict)  # on the chief only, as the original
  if evaluates:  # read (and checked) first: a bad evaluation file fails in seconds, not after training
    info = _prepare(o, o.eval_split, tokenize_fn, xlnet_config.n_token, log_fn)
    if o.do_eval and info.unanswered:
      raise cli.FlagError(f"--do_eval needs the answers of the {o.eval_split} split, and {len(info.unanswered)} of its "
                          f"files have no `answers` ({', '.join(info.unanswered[:2])}"
                          f"{' ...' if len(info.unanswered) > 2 else ''}). Add them, or predict the split alone "
                          "(--do_eval=False --do_predict).")
  if o.do_train:
    with locks.directory_lock(o.model_dir if training.is_chief(strategy) else None):
      results["train"] = train(o, strategy, xlnet_config, tokenize_fn, model_args, log_fn)
  if not evaluates:
    return results

  run_config = flag_configs.create_run_config(o, is_training=False, is_finetune=True)
  inference = race_eval.Inference(race_task.build_model(xlnet_config, run_config, **model_args), o.jit_compile)
  if o.do_eval:
    checkpoints = _model_dir_checkpoints(o)
    if not o.eval_all_ckpt:
      checkpoints = checkpoints[-1:]
    # As the Estimator's: the global_step each checkpoint records (the number in its name where it records none).
    checkpoints = [(checkpoint.recorded_step(path, default=step), path) for step, path in checkpoints]
    if not checkpoints and o.init_checkpoint:
      checkpoints = [(0, checkpoint.named_checkpoint(o.init_checkpoint))]
      run_files.check_trained_model(o, checkpoint.directory_of(checkpoints[0][1]), xlnet_config, "--init_checkpoint")
      log_fn(f"No checkpoint in --model_dir {o.model_dir}: evaluating --init_checkpoint {checkpoints[0][1]} (as the "
             "original's Estimator).")
    results["eval"], results["best"] = race_eval.evaluate_checkpoints(
        inference, checkpoints, info.path, o.max_seq_length, o.eval_batch_size, log_fn=log_fn, model_dir=o.model_dir)
  if o.do_predict:
    ckpt, flag = run_files.predict_checkpoint(o, log_fn)
    directory = checkpoint.directory_of(ckpt)
    if flag != "--model_dir":  # --model_dir's was checked with the run's start
      run_files.check_trained_model(o, directory, xlnet_config, flag)
    output_file = os.path.join(o.predict_dir, predictions_name(o))
    with locks.directory_lock(o.predict_dir, name="predict", what="--predict_dir"):  # one run's files a time
      results["predict"] = race_eval.predict(inference, ckpt, info.path, o.max_seq_length, o.eval_batch_size,
                                             info.examples, o.data_dir, output_file)  # those the records hold
    accuracy = results["predict"]["accuracy"]
    log_fn(f"Predictions of {ckpt}: {output_file} ({results['predict']['num_questions']} questions, "
           + ("without answers to score)." if info.unanswered else f"accuracy {accuracy:.4f})."))
  return results


def predictions_name(o):
  """The predictions file's name: `[high.|middle.]{eval_split}.predictions.json`."""
  level = "high." if o.high_only else "middle." if o.middle_only else ""
  return f"{level}{o.eval_split}.predictions.json"


def body(o):
  validate(o)
  run(o, flag_configs.start(o), log_fn=cli.print_line)


if __name__ == "__main__":
  cli.run_script(define_flags, cli.cli_main("run_race.py", body))
