"""XLNet SQuAD 2.0 fine-tuning, prediction and evaluation: the original `run_squad.py`.

  python run_squad.py --do_prepro=True --num_proc=1 --proc_id=0 --train_file=${SQUAD_DIR}/train-v2.0.json \\
      --output_dir=proc_data/squad --spiece_model_file=${LARGE_DIR}/spiece.model --uncased=False \\
      --max_seq_length=512
  python run_squad.py --do_train=True --do_predict=True --use_tpu=False --num_core_per_host=1 \\
      --model_config_path=${LARGE_DIR}/xlnet_config.json --spiece_model_file=${LARGE_DIR}/spiece.model \\
      --init_checkpoint=${LARGE_DIR}/xlnet_model.ckpt --output_dir=proc_data/squad --model_dir=exp/squad \\
      --predict_dir=exp/squad/pred --train_file=${SQUAD_DIR}/train-v2.0.json \\
      --predict_file=${SQUAD_DIR}/dev-v2.0.json --max_seq_length=512 --train_batch_size=4 \\
      --learning_rate=2e-5 --train_steps=12000 --warmup_steps=1000 --save_steps=1000

Every flag of the original keeps its name and default (`--do_train` is True by default, as there). Modes:
- `--do_prepro`: the training records of examples [proc_id::num_proc] of --train_file, shuffled (seeded by
  --seed when set), named `{spm}.{proc_id}.slen-{L}.qlen-{Q}.train.tf_record` in --output_dir; nothing else runs.
- `--do_train`: reads every `{spm}.*.slen-{L}.qlen-{Q}.train.tf_record` of --output_dir. New: when none exists
  and --train_file is given, it is preprocessed first (as --do_prepro with one process).
- `--do_predict`: the evaluation record and features of --predict_file (cached in --output_dir unless
  --overwrite_data), the head's beam, predictions.json, nbest_predictions.json and null_odds.json in
  --predict_dir, and the evaluation (`Result | best_exact ... |`) when the file has answers. The checkpoint:
  --predict_ckpt; else model_dir's latest (as the original); else --init_checkpoint (which the original ignores
  there, predicting from fresh weights: xlnet#56), as run_classifier.py and run_race.py; --predict_all_ckpt predicts
  with every checkpoint of model_dir (each into predict_dir/<checkpoint name>/) and logs the best by
  --target_eval_key.
- --train_batch_size is per replica (per GPU) except on TPU, where it is global, as in run_classifier.py.
- New: --strategy, --jit_compile, --seed, --deterministic, --predict_ckpt, --predict_all_ckpt, and the
  corrections of the original's oddities --allow_last_token, --allow_empty_prediction (+ --null_threshold);
  docs/squad.md explains them.
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
from xlnet_tf import hf_checkpoint
from xlnet_tf import locks
from xlnet_tf import training
from xlnet_tf.data import token_checks
from xlnet_tf.tasks.squad import data as squad_data
from xlnet_tf.tasks.squad import examples as squad_examples
from xlnet_tf.tasks.squad import postprocess as squad_postprocess
from xlnet_tf.tasks.squad import predict as squad_predict
from xlnet_tf.tasks.squad import records as squad_records
from xlnet_tf.tasks.squad import task as squad_task

EVAL_KEYS = ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh", "has_ans_exact", "has_ans_f1")


def define_flags(flag_values=absl_flags.FLAGS):
  """This script's flags: the original `run_squad.py` ones with their defaults, and the new ones."""
  flags.define_run_config_flags(dropout=0.1, dropatt=0.1, flag_values=flag_values)
  flags.define_optimizer_flags(learning_rate=3e-5, train_steps=8000, min_lr_ratio=0.0, adam_epsilon=1e-6,
                               lr_layer_decay_rate=0.75, flag_values=flag_values)
  flags.define_hardware_flags(iterations=1000, max_save=5, flag_values=flag_values)
  flags.define_squad_flags(flag_values=flag_values)


def validate(o, num_replicas=1, strategy="one_device"):
  """One-line errors for flag values the run cannot use (before anything heavy starts)."""
  if not (o.do_prepro or o.do_train or o.do_predict):
    raise cli.FlagError("At least one of --do_prepro, --do_train and --do_predict must be True.")
  flag_configs.require_spiece_model(o)
  flag_configs.require_positive(o, "num_hosts")  # a prediction took 0 where the other tools refuse it (sweep 24, N-C3)
  if not o.output_dir:
    raise cli.FlagError("--output_dir is required: where the tfrecords (and the cached evaluation features) go.")
  try:
    flag_configs.require_output_dirs(o, "output_dir", "model_dir", "predict_dir")
  except cli.FlagError as e:  # --do_train is True by default here (the original's): a run that only predicts says so
    trains = o.do_train and not cli.given("do_train") and "--model_dir" in str(e)
    raise cli.FlagError(str(e) + (" (--do_train is True by default in run_squad.py: pass --do_train=False to only "
                                  "predict)" if trains else "")) from None
  try:
    squad_data.check_options(o.max_seq_length, o.max_query_length, o.doc_stride)
  except ValueError as e:
    raise cli.FlagError(str(e)) from None
  window = o.max_seq_length - o.max_query_length - 3
  if o.doc_stride >= window:  # the original accepts it and silently loses the answers across window boundaries
    raise cli.FlagError(
        f"--doc_stride={o.doc_stride} is not below the paragraph window ({window} tokens: --max_seq_length "
        f"{o.max_seq_length} - --max_query_length {o.max_query_length} - 3), so windows would not overlap and an "
        f"answer across a window boundary would be in none. " + (f"Pass --doc_stride below {window}." if window > 1 else
        f"No --doc_stride can be: pass a --max_seq_length above {o.max_query_length + 4}, or a smaller "
        "--max_query_length."))
  if o.do_prepro:
    flag_configs.require_file(o.train_file, "train_file", "the SQuAD training JSON to preprocess")
    flag_configs.require_positive(o, "num_proc")  # "--proc_id must be in [0, 0)" (sweep 33, C6)
    if not 0 <= o.proc_id < o.num_proc:
      raise cli.FlagError(f"--proc_id must be in [0, --num_proc). Received: --proc_id={o.proc_id}, "
                          f"--num_proc={o.num_proc}.")
    return
  flag_configs.require_model_config(o)
  if o.do_predict and o.predict_all_ckpt and not o.model_dir:
    raise cli.FlagError("--predict_all_ckpt needs --model_dir: the directory whose checkpoints are predicted.")
  run_files.require_model_dir(o, ("predict_ckpt", "init_checkpoint"))
  if o.do_train and o.do_predict and not cli.given("do_train") and o.model_dir:  # a prediction command, as the other
    # tools take it, resumed a finished run's training to the default 8000 steps at batch 48 (sweep 28, A1)
    trained_to = (run_files.run_flags(o.model_dir) or {}).get("train_steps")
    if isinstance(trained_to, int) and trained_to != o.train_steps and checkpoint.latest_checkpoint(o.model_dir):
      raise cli.FlagError(f"--do_train is True by default in run_squad.py (the original's): this run would train "
                          f"the model in --model_dir {o.model_dir} on to --train_steps={o.train_steps} (its run's "
                          f"was {trained_to}) before predicting. Pass --do_train=False to only predict, or "
                          "--do_train=True to train on.")
  if o.do_train:
    flag_configs.require_positive(o, "train_batch_size", "shuffle_buffer", "iterations")
    flag_configs.check_training_flags(o, num_replicas, strategy)
  if o.do_predict:
    flag_configs.require_file(o.predict_file, "predict_file", "the SQuAD JSON to predict")
    if not o.predict_dir:
      raise cli.FlagError("--predict_dir is required with --do_predict: where predictions.json, "
                          "nbest_predictions.json and null_odds.json go.")
    flag_configs.require_positive(o, "predict_batch_size", "n_best_size", "max_answer_length", "start_n_top",
                                  "end_n_top")
    if o.null_threshold is not None and not o.allow_empty_prediction:  # it was ignored without a word
      raise cli.FlagError(f"--null_threshold={o.null_threshold} is used only with --allow_empty_prediction=True (the "
                          "original never predicts \"\"). Pass both, or drop --null_threshold.")
    for name in ("start_n_top", "end_n_top"):
      if getattr(o, name) > o.max_seq_length:
        raise cli.FlagError(f"--{name} must be at most --max_seq_length ({o.max_seq_length}). Received: "
                            f"{getattr(o, name)}.")
    if o.target_eval_key not in EVAL_KEYS:
      raise cli.FlagError(f"--target_eval_key must be one of {', '.join(EVAL_KEYS)}. Received: "
                          f"{o.target_eval_key!r}.")
    if o.predict_all_ckpt and fileio.real_path(o.predict_dir) == fileio.real_path(o.model_dir):  # a link too
      raise cli.FlagError(f"--predict_dir {o.predict_dir} is --model_dir: --predict_all_ckpt writes each checkpoint's "
                          "predictions into --predict_dir/<checkpoint name>/, a directory named like the checkpoint "
                          "beside it (ckpt-2/ beside ckpt-2.index). Pass another --predict_dir.")
    if not o.predict_all_ckpt:  # (which writes into a directory per checkpoint) a directory there was found by the
      # write, after the whole prediction (sweep 25, C3)
      fileio.check_file_names(o.predict_dir, squad_predict.OUTPUT_FILES, "--predict_dir", "prediction")
      written = {fileio.real_path(os.path.join(o.predict_dir, name)): name for name in squad_predict.OUTPUT_FILES}
      for flag in ("predict_file", "train_file"):  # replaced by the predictions, exit 0 (sweep 33, C1)
        if getattr(o, flag) and fileio.real_path(getattr(o, flag)) in written:
          raise cli.FlagError(f"--{flag} {getattr(o, flag)} is the {written[fileio.real_path(getattr(o, flag))]} "
                              "the prediction writes into --predict_dir: the predictions would replace it. Pass "
                              "another --predict_dir, or rename the file.")


def _train_records(o, sp_model, log_fn):
  """The training record files; preprocesses --train_file first when there are none."""
  name = squad_records.train_record_glob(o.spiece_model_file, o.max_seq_length, o.max_query_length)
  pattern = os.path.join(o.output_dir, name)
  found = fileio.glob_in(o.output_dir, name)
  if found:
    _check_train_records(o, sp_model, found, log_fn)
    return found
  if not o.train_file:  # a prediction command was sent to prepare a training run (sweep 28, A1)
    default = (" (--do_train is True by default in run_squad.py: pass --do_train=False to only predict)"
               if o.do_predict and not cli.given("do_train") else "")
    raise cli.FlagError(f"No training records match {pattern}. Run with --do_prepro=True --train_file=... first, "
                        "with the same --output_dir, --spiece_model_file, --max_seq_length and --max_query_length"
                        f"{default}.")
  flag_configs.require_file(o.train_file, "train_file", "the SQuAD training JSON")
  log_fn(f"No training records match {pattern}: preprocessing --train_file first (as --do_prepro).")
  _prepro(o, sp_model, log_fn, num_proc=1, proc_id=0)
  return fileio.glob_in(o.output_dir, name)


def _check_train_records(o, sp_model, found, log_fn):
  """The training records already in --output_dir, which --do_train reads as the original (not --train_file): a
  FlagError where what was recorded beside them (`squad_records.recorded_fingerprint`) shows that they are not of
  one --do_prepro run (another run's beside them), or (with --train_file) not of this --train_file, SentencePiece
  model and feature flags; a log line where some --proc_id's record is missing (the original trains on the rest);
  records without a fingerprint (the original's) are read by their names alone, with a log line."""
  made = [squad_records.recorded_fingerprint(path) for path in found]
  known = [m for m in made if m is not None]
  problem = None
  if len(set(known)) > 1:
    problem = ("were made by different --do_prepro runs (another --train_file, SentencePiece model, feature flag "
               "or --num_proc)")
  if known and o.train_file and not problem:
    flag_configs.require_file(o.train_file, "train_file", "the SQuAD training JSON")
    if squad_records.train_fingerprint(o.train_file, sp_model, feature_options(o)) != known[0][0]:
      problem = (f"were not made from --train_file {o.train_file} with this run's SentencePiece model, --uncased, "
                 "--doc_stride and --max_query_length")
  if problem:
    raise cli.FlagError(f"The training records in --output_dir {o.output_dir} "
                        f"({', '.join(os.path.basename(p) for p in found)}) {problem}. Delete them and rerun "
                        "--do_prepro=True for every --proc_id with this run's flags, or pass another --output_dir.")
  if known and len(known) == len(found) < known[0][1]:  # the original trains on them too
    log_fn(f"Training on {len(found)} of the {known[0][1]} records of a --do_prepro --num_proc={known[0][1]} run "
           f"(in --output_dir: {', '.join(os.path.basename(p) for p in found)}): part of the data. Run --do_prepro "
           "for the other --proc_id first to train on all of it.")
  if o.train_file and len(known) < len(found):
    log_fn(f"Training on the records already in --output_dir ({', '.join(found)}), as the original: --train_file "
           f"{o.train_file} is not read. If they came from another --train_file, SentencePiece model, --uncased "
           "or --doc_stride, rerun --do_prepro=True (or delete them) first.")
  elif o.train_file:
    log_fn(f"Training on the records already in --output_dir ({', '.join(found)}), made from --train_file "
           f"{o.train_file} with these flags (as the original, it is not preprocessed again).")


def feature_options(o):
  """The `FeatureOptions` of the options: how examples become features."""
  return squad_data.FeatureOptions(max_seq_length=o.max_seq_length, doc_stride=o.doc_stride,
                                   max_query_length=o.max_query_length, uncased=o.uncased)


def _prepro(o, sp_model, log_fn, num_proc, proc_id):
  path, stats = squad_records.prepare_train_records(o.train_file, sp_model, o.spiece_model_file, o.output_dir,
                                                    feature_options(o), num_proc=num_proc, proc_id=proc_id,
                                                    shuffle_seed=o.seed)
  log_fn(f"Wrote {stats.num_features} training features ({stats.num_pos} with an answer in the window, "
         f"{stats.num_neg} without) of {stats.num_examples} examples to {path}; dropped for an alignment mismatch: "
         f"{len(stats.dropped_mismatch)}.")
  return path


def _predict_checkpoints(o, xlnet_config, log_fn=print):
  """[(step, prefix)] to predict with (see the module docstring), fine-tuned as this run's model
  (`run_files.check_trained_model`)."""
  if o.predict_all_ckpt:
    found = checkpoint.list_checkpoints(o.model_dir)
    if not found:
      raise FileNotFoundError(checkpoint.no_checkpoint_line(o.model_dir, (
          "No checkpoint to predict with: no complete checkpoint (*.index and its .data-* files) in --model_dir "
          f"{o.model_dir}. Train first (--do_train=True), or pass --predict_ckpt or --init_checkpoint.")))
    run_files.check_trained_model(o, o.model_dir, xlnet_config)
    return found
  path, flag = run_files.predict_checkpoint(o, log_fn)
  if hf_checkpoint.is_hf_directory(path):  # read as the other tools read it (`checkpoint.load_weights`)
    run_files.check_trained_model(o, path, xlnet_config, flag)
    return [(None, path)]
  path = checkpoint.resolve_checkpoint_path(path)
  run_files.check_trained_model(o, checkpoint.directory_of(path), xlnet_config, flag)
  return [(checkpoint.checkpoint_step(path), path)]


def run(o, strategy, log_fn=print):
  """Preprocesses, fine-tunes and/or predicts as the options `o` (this script's flags: `cli.values` or
  `cli.defaults(define_flags, ...)`) say, on `strategy` for training: `flag_configs.start(o)`'s, which also applies
  --seed (the fresh weights' initialisation), --deterministic and --use_tf32, as the command line does.

  Returns:
    dict: `prepro` (the record written), `train` (the last training loop's loss, lr, step), `predict`
    (per-checkpoint results, each the evaluation with step, path and predict_dir) and `best`, for the modes that
    ran.
  """
  on_tpu = isinstance(strategy, tf.distribute.TPUStrategy)
  num_replicas = strategy.num_replicas_in_sync
  validate(o, num_replicas, "tpu" if on_tpu else None)
  sp_model = flag_configs.sentencepiece(o)
  fileio.makedirs(o.output_dir)
  results = {}
  if o.do_prepro:
    results["prepro"] = _prepro(o, sp_model, log_fn, o.num_proc, o.proc_id)
    return results
  xlnet_config = flag_configs.model_config(o, sp_model)
  if o.do_train:
    run_files.check_trained_model(o, o.model_dir, xlnet_config)
  # Resolved first when no training comes first, so that a missing checkpoint fails before anything is written.
  predict_ckpts = _predict_checkpoints(o, xlnet_config, log_fn) if o.do_predict and not o.do_train else None
  eval_set = None
  if o.do_predict:  # Read and convert --predict_file before training: its errors then cost no training.
    examples, features, record, _ = squad_records.prepare_eval_features(
        o.predict_file, sp_model, o.spiece_model_file, o.output_dir, feature_options(o), o.overwrite_data)
    if not features:  # before training: nothing to predict at its end
      raise cli.FlagError(f"--predict_file {o.predict_file} holds no question to predict. Pass a SQuAD file with "
                          "questions (e.g. dev-v2.0.json).")
    orig_data = squad_examples.load_squad_data(o.predict_file)
    orig_data = orig_data if squad_examples.has_answers(orig_data) else None
    if orig_data is None and o.allow_empty_prediction and o.null_threshold is None:
      raise cli.FlagError(f"--allow_empty_prediction needs --null_threshold: --predict_file {o.predict_file} has "
                          "no answers to find the threshold on. Pass the best_f1_thresh of a dev set.")
    token_checks.check_fine_tuning_ids(record, xlnet_config.n_token, o.spiece_model_file)
    eval_set = squad_predict.EvalSet(examples, features, record, orig_data, o.max_seq_length)
    log_fn(f"Num of eval examples: {len(examples)}, features: {len(features)} ({record}).")

  if o.do_train:
    train_files = _train_records(o, sp_model, log_fn)
    token_checks.check_fine_tuning_ids(train_files, xlnet_config.n_token, o.spiece_model_file,
                                  rewrite="delete it and rerun (or rerun --do_prepro=True)")
    with locks.directory_lock(o.model_dir if training.is_chief(strategy) else None):
      trainer, start, global_batch, per_replica = run_start.fine_tuning_trainer(
          o, strategy, lambda run_config: squad_task.build_model(xlnet_config, run_config), squad_task.SquadTask(),
          xlnet_config, o.max_seq_length, log_fn, data_files=train_files)
      log_fn(f"Training the SQuAD head from step {start} to {o.train_steps}: global batch {global_batch} "
             f"({per_replica} per replica x {num_replicas} replica(s)).")
      results["train"] = trainer.train(
          squad_task.squad_dataset_fn(train_files, o.max_seq_length, per_replica, o.shuffle_buffer, o.seed,
                                      xlnet_config.n_token),
          log_fn=log_fn, data_files=train_files)

  if o.do_predict and training.is_chief(strategy):  # Prediction runs on the chief only.
    predict_ckpts = predict_ckpts or _predict_checkpoints(o, xlnet_config, log_fn)
    run_config = flag_configs.create_run_config(o, is_training=False, is_finetune=True)
    inference = squad_predict.Inference(squad_task.build_model(xlnet_config, run_config), o.start_n_top, o.end_n_top,
                                        o.jit_compile)
    options = squad_postprocess.AnswerOptions(
        n_best_size=o.n_best_size, max_answer_length=o.max_answer_length, allow_last_token=o.allow_last_token,
        allow_empty_prediction=o.allow_empty_prediction, null_threshold=o.null_threshold)
    with locks.directory_lock(o.predict_dir, name="predict", what="--predict_dir"):  # one run's files a time
      results["predict"], results["best"] = squad_predict.predict_checkpoints(
          inference, predict_ckpts, eval_set, o.predict_dir, o.predict_batch_size, options,
          o.target_eval_key, log_fn=log_fn, dir_each=o.predict_all_ckpt)
  return results


def body(o):
  validate(o)
  run(o, flag_configs.start(o), log_fn=cli.print_line)


if __name__ == "__main__":
  cli.run_script(define_flags, cli.cli_main("run_squad.py", body))
