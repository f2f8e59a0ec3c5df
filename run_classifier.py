"""XLNet classification / regression fine-tuning, eval and prediction: the original `run_classifier.py`.

  python run_classifier.py --do_train=True --do_eval=False --task_name=sts-b --data_dir=${GLUE_DIR}/STS-B \\
      --output_dir=proc_data/sts-b --model_dir=exp/sts-b --uncased=False \\
      --spiece_model_file=${LARGE_DIR}/spiece.model --model_config_path=${LARGE_DIR}/xlnet_config.json \\
      --init_checkpoint=${LARGE_DIR}/xlnet_model.ckpt --max_seq_length=128 --train_batch_size=8 --num_hosts=1 \\
      --num_core_per_host=4 --learning_rate=5e-5 --train_steps=1200 --warmup_steps=120 --save_steps=600 \\
      --is_regression=True
  python run_classifier.py --do_train=False --do_eval=True --eval_all_ckpt=True --task_name=sts-b ... \\
      --eval_batch_size=8 --num_core_per_host=1 --is_regression=True

Every flag of the original keeps its name and default. Semantics:
- `--train_batch_size` is per replica (per GPU), as the original's GPU path; with --strategy=tpu (--use_tpu) it is
  the global batch, as the original's TPU path. The global batch is train_batch_size x replicas otherwise.
- --num_core_per_host is the number of replicas (GPUs) per host, as the original's MirroredStrategy(num_gpus=...):
  the command above runs 4 replicas, global batch 32. A machine with fewer GPUs gets a one-line error. Unset (our
  default, where the original's 8 silently asked for 8 GPUs): one device, the first GPU or the CPU.
- --init_checkpoint takes a released checkpoint (the new head keeps its initialisation), a checkpoint fine-tuned
  by the original code (head included), or a run_pretrain.py / run_classifier.py output (prefix or directory).
  A model_dir that already holds a checkpoint resumes from it instead (as the original's Estimator).
- Predict and export read --predict_ckpt, else model_dir's latest checkpoint, else --init_checkpoint (as the
  original's Estimator, which starts from it where model_dir holds none; run_race.py and run_squad.py the same).
- The label list a fine-tuning run trained with (label id = index) is kept in model_dir/run_flags.json
  (`label_list`): eval, predict, export or a resume with other labels, or the same in another order, is refused
  (its scores would name the wrong classes); a csv/tsv task without --labels takes that list.
- Eval reads every checkpoint in model_dir (--eval_all_ckpt) or the last one; a checkpoint without a `-step`
  suffix is evaluated too. With --do_eval, prediction also writes rows for the eval padding examples, as the
  original (--predict_eval_padding=False leaves them out).
- New: --strategy, --jit_compile, --seed, --deterministic, the generic csv/tsv task flags (--text_a_column, ...),
  --sorted_file_order (imdb's files sorted by name, not in the directory's order), --predict_eval_padding,
  --glue_metrics (STS-B's eval_spearmanr, which the original did not report)
  and --export_dir (a SavedModel that classifies raw text; see xlnet_tf/tasks/classifier/serving.py).
- `-v 1` (absl's --verbosity=1) logs the first five examples' features, id by id, as the original did at INFO, and
  shows TensorFlow's C++ start-up and compilation lines that are filtered otherwise (see cli.filter_stderr).
"""

import contextlib
import json
import os

import cli  # first: start_script() runs before anything imports TensorFlow
import flag_configs
if __name__ == "__main__":
  cli.start_script()
import flags
import run_files
import run_start
import numpy as np
import tensorflow as tf
from absl import flags as absl_flags

from xlnet_tf import checkpoint
from xlnet_tf import fileio
from xlnet_tf import hf_checkpoint
from xlnet_tf import locks
from xlnet_tf import training
from xlnet_tf.config import is_head_name
from xlnet_tf.data import records
from xlnet_tf.data import token_checks
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.classifier import data as classifier_data
from xlnet_tf.tasks.classifier import evaluation as classifier_eval
from xlnet_tf.tasks.classifier import features as classifier_features
from xlnet_tf.tasks.classifier import metrics as classifier_metrics
from xlnet_tf.tasks.classifier import serving
from xlnet_tf.tasks.classifier import task as classifier_task


def define_flags(flag_values=absl_flags.FLAGS):
  """This script's flags: the original `run_classifier.py` ones with their defaults, and the new ones."""
  flags.define_run_config_flags(dropout=0.1, dropatt=0.1, flag_values=flag_values)
  flags.define_optimizer_flags(learning_rate=1e-5, train_steps=1000, min_lr_ratio=0.0, flag_values=flag_values)
  flags.define_hardware_flags(iterations=1000, max_save=0, flag_values=flag_values)
  flags.define_classifier_flags(flag_values=flag_values)


def validate(o, num_replicas=1, strategy="one_device"):
  """One-line errors for flag values the run cannot use (before anything heavy starts)."""
  if not (o.do_train or o.do_eval or o.do_predict or o.export_dir):
    raise cli.FlagError("At least one of --do_train, --do_eval, --do_predict (or --export_dir) must be True.")
  if not o.task_name:
    raise cli.FlagError(f"--task_name is required: one of {', '.join(classifier_data.TASK_NAMES)}.")
  if o.task_name.lower() not in classifier_data.TASK_NAMES:
    raise cli.FlagError(f"Unknown --task_name {o.task_name!r}. Known tasks: {', '.join(classifier_data.TASK_NAMES)}.")
  if o.cls_scope and not is_head_name(o.cls_scope):  # it names a TensorFlow scope
    raise cli.FlagError(f"--cls_scope={o.cls_scope!r} cannot name the head's variable scope (classification_"
                        f"{o.cls_scope}): use letters, digits, '_', '.' and '-' only, as the checkpoint's head has.")
  flag_configs.require_model_config(o)
  flag_configs.require_spiece_model(o)
  run_files.require_model_dir(o, ("predict_ckpt", "init_checkpoint"))  # its prediction falls back to the latter
  if o.do_train or o.do_eval or o.do_predict:
    if not o.data_dir or not fileio.isdir(o.data_dir):
      raise cli.FlagError(f"--data_dir {o.data_dir!r} is not a directory. Pass the directory of the task's data files.")
    if not o.output_dir:
      raise cli.FlagError("--output_dir is required: where the cached tfrecords go.")
  if o.do_predict and not o.predict_dir:
    raise cli.FlagError(f"--do_predict needs --predict_dir: where {o.task_name}.tsv and {o.task_name}.logits.json go.")
  flag_configs.require_output_dirs(o, "model_dir", "output_dir", "predict_dir")
  if o.do_predict:  # a directory there was found by the write, after the whole prediction (sweep 25, C3)
    fileio.check_file_names(o.predict_dir, classifier_metrics.prediction_file_names(o.task_name), "--predict_dir",
                            "prediction")
  if o.export_dir:  # replaced whole: a SavedModel holding nothing else (its assets.extra/ is carried over)
    try:
      serving.check_export_dir(o.export_dir, "--export_dir")
    except ValueError as e:
      raise cli.FlagError(str(e)) from None
  if o.export_dir and os.path.islink(o.export_dir.rstrip("/")):  # the link would be replaced, its target kept
    raise cli.FlagError(f"--export_dir {o.export_dir} is a symbolic link (to {os.path.realpath(o.export_dir)}): the "
                        "SavedModel replaces its directory whole, which would put a directory in the link's place and "
                        "leave the model it points to as it was. Pass the link's target, then point the link at it.")
  if o.export_dir and fileio.exists(o.export_dir.rstrip("/") + ".index"):
    raise cli.FlagError(f"--export_dir {o.export_dir} is named like the checkpoint beside it "
                        f"({o.export_dir.rstrip('/')}.index): the SavedModel's directory would be taken for that "
                        "checkpoint, or it for the SavedModel. Pass another --export_dir.")
  for name in ("model_dir", "output_dir", "predict_dir", "data_dir", "init_checkpoint"):
    if o.export_dir and getattr(o, name) and fileio.is_within(getattr(o, name), o.export_dir, links=True):  # (sweep 28)
      raise cli.FlagError(f"--export_dir {o.export_dir} is (or holds) --{name} {getattr(o, name)}, and the "
                          "SavedModel replaces its directory whole. Pass another --export_dir.")
  try:
    classifier_features.check_max_seq_length(o.max_seq_length, is_pair=False)
  except ValueError as e:
    raise cli.FlagError(str(e)) from None
  flag_configs.require_positive(o, "num_hosts", "train_batch_size", "eval_batch_size", "predict_batch_size",
                                "num_passes", "shuffle_buffer", "iterations")
  if o.is_regression and o.predict_threshold:  # unused without a word (sweep 26, C5)
    raise cli.FlagError(f"--predict_threshold={o.predict_threshold} decides between 2 classes, but --is_regression="
                        "True predicts one number per example. Drop --predict_threshold.")
  if o.do_train:
    flag_configs.check_training_flags(o, num_replicas, strategy)


def processor_options(o):
  """The csv/tsv task options and --sorted_file_order (imdb) that were set (get_processor rejects them for the
  other tasks)."""
  options = dict(text_a_column=o.text_a_column, text_b_column=o.text_b_column, label_column=o.label_column,
                 labels=o.labels, has_header=o.has_header, sorted_file_order=o.sorted_file_order or None)
  if (o.task_name or "").lower() in ("csv", "tsv"):
    options.update(is_regression=o.is_regression or None, data_dir=o.data_dir or None)
  return options



def trained_labels(directory, flag="--model_dir"):
  """(the file that records the label list `directory`'s checkpoints were fine-tuned with, that file's dict, the
  list: label id = index; None for a regression), or (None, None, None) where none is recorded (a run of the
  original code, of another tool, or of a version that did not record it; an HF model without named labels). The
  file: the run_flags.json of the run_classifier.py run that wrote them (beside a conversion's or an export's
  checkpoint too, which has no `checkpoint` state file), or an HF model's config.json (its id2label). `flag` names
  `directory` in the remedy of a damaged run_flags.json."""
  if not directory:  # a prediction without --model_dir whose checkpoint is unusable: it says so (sweep 32, U7)
    return None, None, None
  if hf_checkpoint.is_hf_directory(directory):
    try:
      config = hf_checkpoint.read_config(directory)
    except ValueError as e:
      raise cli.FlagError(str(e)) from None
    labels = hf_checkpoint.named_labels(config)
    return (os.path.join(directory, hf_checkpoint.CONFIG_FILE), config, labels) if labels else (None, None, None)
  if not (checkpoint.latest_checkpoint(directory) or checkpoint.checkpoint_prefixes(directory)):
    return None, None, None
  there = run_files.run_flags(directory, flag)
  if not there or "label_list" not in there:
    return None, None, None
  return os.path.join(directory, "run_flags.json"), there, there["label_list"]


def _hf_names(source, there):
  """Whether the labels `trained_labels` found are an HF model's own names for its classes (its config.json's
  id2label, or a conversion's run_flags.json that took them from there), which a run may name otherwise."""
  return source is not None and (source.endswith(hf_checkpoint.CONFIG_FILE) or there.get("labels_from") == "id2label")


def checkpoint_dir(o):
  """The directory whose run_flags.json describes the checkpoints this run reads: that of the checkpoint a run
  that only predicts or exports reads (`run_files.predict_checkpoint`; absolute), else --model_dir; and the flag
  that names it."""
  if not (o.do_train or o.do_eval):
    with contextlib.suppress(FileNotFoundError):  # none at all: said where the prediction chooses it
      ckpt, flag = run_files.predict_checkpoint(o)
      if flag != "--model_dir":
        return checkpoint.directory_of(ckpt), flag
  return o.model_dir, "--model_dir"


def check_trained_labels(directory, label_list, o, flag="--model_dir"):
  """FlagError where `directory`'s checkpoints were fine-tuned with other labels, or in another order, than
  `label_list`: their logit i is the class that run called label_list[i], and evaluating, predicting or resuming
  with another list would name the wrong classes, silently (e.g. `--labels=pos,neg` after training with
  `neg,pos`)."""
  source, there, trained = trained_labels(directory, flag)
  if source is None or trained == json.loads(json.dumps(label_list)):
    return
  hf_names = _hf_names(source, there)
  def folded(labels):
    return [str(label).casefold() for label in labels or []]
  if hf_names and (sorted(folded(trained)) != sorted(folded(label_list)) or folded(trained) == folded(label_list)):
    return  # an HF model's own names for the classes (NEGATIVE, POSITIVE for sst-2's 0, 1): no order to compare;
  # names differing in case only (POS, NEG for neg, pos) are the same classes, in their order (sweep 33, A2)
  order = trained  # the labels to pass: an HF model's order in this run's spelling
  if hf_names:
    order = [next(label for label in label_list if str(label).casefold() == name) for name in folded(trained)]
  def described(labels):
    return "a regression task (float labels)" if labels is None else f"the labels {labels}, in that order"
  generic = o.task_name.lower() in ("csv", "tsv")  # the other tasks fix their labels and --is_regression
  if generic and (trained is None) != (label_list is None):  # one side regression: --labels cannot make up for it
    fix = f"Pass --is_regression={trained is None} (as it was trained)"
  elif generic:
    fix = f"Pass --labels={','.join(order)}"
  elif hf_names:  # the task's labels in the model's own order (transformers' run_glue.py orders MNLI otherwise)
    fix = (f"Read the data as --task_name=tsv with the task's columns (--text_a_column, --text_b_column, "
           f"--label_column) and --labels={','.join(order)}, the model's order")
  else:
    fix = (f"Pass the --task_name ({there.get('task_name', there.get('finetuning_task'))} there), --labels and "
           "--is_regression it was trained with")
  raise cli.FlagError(f"The checkpoints in {directory} were fine-tuned with {described(trained)} "
                      f"({source}); this run's are {described(label_list)}: "
                      f"its scores would name the wrong classes. {fix}, or another {flag}.")


def build_model_args(o, label_list):
  """`classifier_task.build_model`'s arguments (head scope, n_class, summary) from the options and the label list
  (None for regression)."""
  return dict(scope=classifier_task.head_scope(o.task_name, o.cls_scope, o.is_regression),
              n_class=None if label_list is None else len(label_list), summary_type=o.summary_type,
              use_summ_proj=o.use_summ_proj)


def _write_records(examples, label_list, o, tokenize_fn, mode, log_fn, n_token, num_passes=1):
  """The cached records of `examples` in --output_dir (written unless cached), their ids checked."""
  path = records.cache_path(o.output_dir, classifier_features.record_file_name(o.spiece_model_file, o.max_seq_length,
                                                                              mode, o.eval_split))
  ordered = mode != "train" or o.seed is not None  # a seeded run's shuffle is one order: a cache must hold it
  fingerprint = classifier_features.examples_fingerprint(examples, label_list, o.max_seq_length, num_passes,
                                                         o.spiece_model_file, o.uncased, ordered=ordered)
  written = classifier_features.file_based_convert_examples_to_features(
      examples, label_list, o.max_seq_length, tokenize_fn, path, num_passes=num_passes,
      overwrite_data=o.overwrite_data, fingerprint=fingerprint)
  if written is None:
    log_fn(f"Reusing the cached {path}, made from the same examples, labels, SentencePiece model, --uncased and "
           "num_passes (or by a run that did not record them: then pass --overwrite_data=True if any changed).")
  else:
    log_fn(f"Wrote {written} examples to {path}.")
  token_checks.check_fine_tuning_ids(path, n_token, o.spiece_model_file)
  if written is None and label_list is not None:  # records written here hold ids of label_list by construction
    token_checks.check_label_ids(path, len(label_list))
  return path


def _no_examples(o, processor, split):
  """The FlagError of a task that found no `split` examples, naming the file where the task reads one file a split
  (csv, tsv): it named --data_dir alone (sweep 33, C7; sweep 34, S5)."""
  name = "training" if split == "train" else split
  if file := getattr(processor, "files", {}).get(split):
    return cli.FlagError(f"Task {o.task_name.lower()!r} found no {name} examples in {os.path.join(o.data_dir, file)}: "
                         f"it holds no row of one (a header alone?). Put the {name} examples there.")
  return cli.FlagError(f"Task {o.task_name.lower()!r} found no {name} examples in --data_dir {o.data_dir}.")


def _train(o, strategy, processor, label_list, tokenize_fn, xlnet_config, model_args, log_fn):
  """Fine-tunes (the --do_train part of `run`; `model_args`: `build_model_args`); returns the last training loop's
  loss, lr and step."""
  scope = model_args["scope"]
  train_examples = processor.get_train_examples(o.data_dir)
  if not train_examples:
    raise _no_examples(o, processor, "train")
  rng = np.random.RandomState(o.seed) if o.seed is not None else np.random
  rng.shuffle(train_examples)
  log_fn(f"Num of train samples: {len(train_examples)}")
  train_file = _write_records(train_examples, label_list, o, tokenize_fn, "train", log_fn,
                              xlnet_config.n_token, o.num_passes)
  trainer, start, global_batch, per_replica = run_start.fine_tuning_trainer(
      o, strategy, lambda run_config: classifier_task.build_model(xlnet_config, run_config, **model_args),
      classifier_task.ClassifierTask(scope), xlnet_config, o.max_seq_length, log_fn,
      resolved={"label_list": label_list}, data_files=[train_file])
  log_fn(f"Training {scope} from step {start} to {o.train_steps}: global batch {global_batch} "
         f"({per_replica} per replica x {strategy.num_replicas_in_sync} replica(s)).")
  return trainer.train(
      classifier_task.classifier_dataset_fn(train_file, o.max_seq_length, per_replica, o.is_regression,
                                            o.shuffle_buffer, o.seed, xlnet_config.n_token),
      log_fn=log_fn, data_files=[train_file])


def run(o, strategy, log_fn=print):
  """Fine-tunes, evaluates, predicts and/or exports as the options `o` (this script's flags: `cli.values` or
  `cli.defaults(define_flags, ...)`) say, on `strategy` for training: `flag_configs.start(o)`'s, which also applies
  --seed (the fresh weights' initialisation), --deterministic and --use_tf32, as the command line does.

  Returns:
    dict: `train` (the last training loop's loss, lr, step), `eval` (per-checkpoint results), `best`, `predict`
    ((tsv, json) paths) and `export` (the SavedModel directory), for the modes that ran.
  """
  on_tpu = isinstance(strategy, tf.distribute.TPUStrategy)
  num_replicas = strategy.num_replicas_in_sync
  validate(o, num_replicas, "tpu" if on_tpu else None)
  task_name = o.task_name.lower()
  options = processor_options(o)
  trained_dir, trained_flag = checkpoint_dir(o)
  source, there, trained = trained_labels(trained_dir, trained_flag)
  if task_name in ("csv", "tsv") and o.labels is None and not o.is_regression and trained:
    renamed = ("; or pass --labels naming its classes as the data does, in their order" if _hf_names(source, there)
               else "")
    options.update(labels=trained, labels_source=f"of the checkpoints in {trained_dir} ({source}{renamed})")
    log_fn(f"Labels (those the checkpoints in {trained_flag} were fine-tuned with): {trained}")
  processor = classifier_data.get_processor(task_name, **options)
  sp_model = flag_configs.sentencepiece(o)
  xlnet_config = flag_configs.model_config(o, sp_model)
  tokenize_fn = tokenization.make_tokenize_fn(sp_model, o.uncased)
  label_list = classifier_data.label_list_for(processor, o.is_regression)
  if o.predict_threshold and label_list is not None and len(label_list) != 2:  # ignored without a word (sweep 27, U8)
    raise cli.FlagError(f"--predict_threshold={o.predict_threshold} decides between 2 classes, but the task has "
                        f"{len(label_list)} ({', '.join(map(str, label_list))}), of which a prediction takes the "
                        "highest score. Drop --predict_threshold.")
  if o.do_train or o.do_eval:
    check_trained_labels(o.model_dir, label_list, o)
    run_files.check_trained_model(o, o.model_dir, xlnet_config)
  model_args = build_model_args(o, label_list)
  scope = model_args["scope"]
  results = {}
  if o.do_eval or o.do_predict:  # read (and checked) first: a bad dev file fails in seconds, not after training
    eval_examples = processor.get_eval_examples(o.data_dir, o.eval_split)
    log_fn(f"Num of eval samples: {len(eval_examples)}")
    if not eval_examples:
      raise _no_examples(o, processor, o.eval_split)
    if o.do_eval and (note := processor.placeholder_labels_note(o.eval_split)):
      log_fn(f"Warning: {note}")  # beside the results it qualifies, not among TensorFlow's log lines

  if o.do_train:
    with locks.directory_lock(o.model_dir if training.is_chief(strategy) else None):
      results["train"] = _train(o, strategy, processor, label_list, tokenize_fn, xlnet_config, model_args, log_fn)

  if not training.is_chief(strategy):
    return results  # Eval, predict and export run on the chief only (the original evaluates on one host).
  if o.do_predict or o.export_dir:
    ckpt, flag = run_files.predict_checkpoint(o, log_fn)
    check_trained_labels(checkpoint.directory_of(ckpt), label_list, o, flag)
    run_files.check_trained_model(o, checkpoint.directory_of(ckpt), xlnet_config, flag)
  if o.do_eval or o.do_predict or o.export_dir:
    inference = classifier_eval.Inference(classifier_task.build_model(
        xlnet_config, flag_configs.create_run_config(o, is_training=False, is_finetune=True), **model_args), scope,
        o.jit_compile)
  if o.do_eval and not o.do_train and (o.predict_ckpt or o.init_checkpoint) and not (
      fileio.isdir(o.model_dir) and checkpoint.checkpoint_prefixes(o.model_dir)):  # it ignored them (sweep 23, C2)
    given = (f"--predict_ckpt {o.predict_ckpt} is read by --do_predict and --export_dir only" if o.predict_ckpt else
             f"--init_checkpoint {o.init_checkpoint} by --do_train only, as its start")
    raise cli.FlagError(f"--do_eval evaluates the checkpoints in --model_dir {o.model_dir}, which holds none (as the "
                        f"original's run_classifier.py); {given}. To evaluate it, pass its directory as --model_dir "
                        "(an HF model converted first: convert_checkpoint.py --to=tf1).")
  if o.do_eval:
    padded = classifier_features.pad_examples(eval_examples, o.eval_batch_size)
    eval_file = _write_records(padded, label_list, o, tokenize_fn, "eval", log_fn, xlnet_config.n_token)
    checkpoints = checkpoint.list_checkpoints(o.model_dir)
    for _, prefix in checkpoints:  # as the original, every checkpoint found, before --eval_all_ckpt picks
      log_fn(f"Add {prefix} to eval list.")
    if not o.eval_all_ckpt:
      checkpoints = checkpoints[-1:]
    results["eval"], results["best"] = classifier_eval.evaluate_checkpoints(
        inference, checkpoints, eval_file, o.max_seq_length, o.eval_batch_size, task_name, log_fn=log_fn,
        model_dir=o.model_dir, glue_metrics=o.glue_metrics)
  if o.do_predict:
    predict_file = _write_records(classifier_features.predict_examples(eval_examples, o.eval_batch_size, o.do_eval),
                                  label_list, o, tokenize_fn, "predict", log_fn, xlnet_config.n_token)
    files = classifier_metrics.PredictionFiles(predict_dir=o.predict_dir, task_name=task_name, label_list=label_list,
                                               predict_threshold=o.predict_threshold)
    # A training run beside may have deleted it since.
    ckpt = checkpoint.chosen_again(ckpt, o.model_dir, o.predict_ckpt, o.init_checkpoint)
    with locks.directory_lock(o.predict_dir, name="predict", what="--predict_dir"):  # one run's files a time
      results["predict"] = classifier_eval.predict(inference, ckpt, predict_file, o.max_seq_length,
                                                   o.predict_batch_size, files, keep_padding=o.predict_eval_padding)
    log_fn(f"Predictions of {ckpt}: {results['predict'][0]}, {results['predict'][1]}")
  if o.export_dir:
    inference.load(ckpt := checkpoint.chosen_again(ckpt, o.model_dir, o.predict_ckpt, o.init_checkpoint))
    results["export"] = serving.export_saved_model(inference.model, o.spiece_model_file, o.export_dir, scope,
                                                   label_list, o.max_seq_length, o.uncased,
                                                   processor.text_replacements, o.predict_threshold)
    log_fn(f"Exported {ckpt} as a SavedModel to {o.export_dir} (signatures serving_default(text_a), "
           "classify_pair(text_a, text_b)).")
  return results


def body(o):
  validate(o)
  run(o, flag_configs.start(o), log_fn=cli.print_line)


if __name__ == "__main__":
  cli.run_script(define_flags, cli.cli_main("run_classifier.py", body))
