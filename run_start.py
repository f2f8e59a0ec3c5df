"""The start of a training run in its --model_dir (every training CLI): resume from the run's latest checkpoint or
start from --init_checkpoint, warn of a resume with other flags or on other records, and write the run files
(`run_files.py`'s) with the first checkpoint; and a fine-tuning CLI's `Trainer`, ready to train."""

import itertools
import os
import types

from flag_configs import FlagError, create_run_config, train_config
import run_files


def restore_or_init(o, trainer, xlnet_config, log_fn, resolved=None, data_files=None, **kwargs):
  """Starts a training run in --model_dir: the chief checks that the checkpoints there are of this model
  (`training.check_run_files`), `trainer.restore_or_init(o.init_checkpoint, ..., log_fn)` resumes or initialises, and
  the chief writes the run files (xlnet_config.json; run_flags.json with `resolved` beside the flags: what the run
  resolved from them and a later run must match, such as run_classifier.py's `label_list`) before the run's first
  checkpoint (`trainer.before_first_save`): they describe the checkpoints, and a run that fails before it saves (a
  refused flag, records the replicas cannot split, a bad token id at step 300) leaves the earlier run's. A run that
  resumed keeps the earlier run's --init_checkpoint there: the weights came from it, and this run's was not read. A
  resume with other training flags (`run_files.flag_changes`) is warned of where it trains a step, and so is one on
  other records (`data_files`, the record files the run reads: their names and sizes, kept in run_flags.json as
  `record_sizes`); where --model_dir's checkpoint cannot be resumed and this run's flags differ, the error names them.
  Returns the step."""
  from xlnet_tf import checkpoint, fileio, training  # pylint: disable=g-import-not-at-top
  run_files.check_apart_from_init_checkpoint(o)
  chief = training.is_chief(trainer.strategy)
  if chief:
    training.check_run_files(o.model_dir, xlnet_config)
  resuming = bool(checkpoint.latest_checkpoint(o.model_dir))
  there = (run_files.run_flags(o.model_dir) or {}) if resuming and chief else {}  # the run that wrote the checkpoints
  run_files.check_spiece(there, o, "record_info_dir", (resolved or {}).get(run_files.SPIECE_DIGEST), "--model_dir",
                         o.model_dir)
  if not resuming and chief:
    run_files.check_init_checkpoint(o, xlnet_config, resolved)
  replicas = trainer.strategy.num_replicas_in_sync
  there = _clip_mode_compared(there, getattr(o, "clip_mode", None), replicas)
  changes = run_files.flag_changes(o, training_only=True, there=there) if there else []
  if _replicas_of(there) not in (None, replicas):  # --strategy / --num_core_per_host resolved otherwise
    changes.append(f"replicas {_replicas_of(there)} there, {replicas} here")
  if data_files:  # [name, size] of the record files in the order read (their directories may move; order counts)
    resolved = dict(resolved or {}, record_sizes=[[os.path.basename(f), fileio.size(f)] for f in data_files])
  start = _restore_or_init(o, trainer, log_fn, **kwargs)
  before, sizes = there.get("record_sizes"), (resolved or {}).get("record_sizes")
  if before is not None and not (isinstance(before, list) and all(
      isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in before)):
    log_fn(f"Warning: record_sizes in {os.path.join(o.model_dir, 'run_flags.json')} is damaged (not the [name, size] "
           "pairs of the record files it read): whether the records changed since its checkpoints cannot be told.")
    before = None  # ignored without a word (sweep 27), or a TypeError in the comparison
  if start and start < getattr(o, "train_steps", start + 1) and before is not None and sizes and (
      before != sizes):  # rewritten, added, removed or reordered
    changed = [new[0] if new else old[0] for old, new in itertools.zip_longest(before, sizes) if old != new]
    log_fn(f"Warning: the records changed since the checkpoints in --model_dir were written ({len(changed)} of "
           f"{max(len(before), len(sizes))} files other, added, removed or in another order: {', '.join(changed[:3])}"
           f"{', ...' if len(changed) > 3 else ''}): the resumed run reads them as they are now, from the position "
           "its step counts in them, so its batches are not those of an uninterrupted run.")
  if not resuming and start and start >= getattr(o, "train_steps", start + 1):  # trained nothing, exit 0
    raise FlagError(f"--init_checkpoint {o.init_checkpoint} brings its optimizer's step {start} "
                    f"(--init_optimizer_state), already at --train_steps={o.train_steps} or past it: nothing would be "
                    f"trained. Pass a --train_steps above {start} (the total, counted from that step), or "
                    "--init_optimizer_state=False to start the count at 0.")
  if resuming and start > getattr(o, "train_steps", start):  # "Nothing to do", exit 0 (sweep 34, R7)
    raise FlagError(f"--train_steps={o.train_steps} is below the step of --model_dir's latest checkpoint ({start}): it "
                    f"is the run's total, not the steps to add, and nothing would be trained. Pass a --train_steps "
                    f"above {start} to train on, or another --model_dir.")
  if chief:
    flags_dict = {**vars(o), **(resolved or {}), "num_replicas": replicas}
    if digest := run_files.spiece_digest(o):
      flags_dict[run_files.SPIECE_DIGEST] = digest
    if resuming:  # this run has saved nothing yet
      flags_dict["init_checkpoint"] = there.get("init_checkpoint")
      if changes or run_files.CHANGED in there:
        flags_dict[run_files.CHANGED] = there.get(run_files.CHANGED, []) + [f"step {start}: {change}"
                                                                            for change in changes]
    if changes and start < getattr(o, "train_steps", start + 1):  # it goes on, as it may (a lower rate), and says so
      log_fn(f"Warning: resumed with other flags than the run that wrote the checkpoints ({'; '.join(changes[:6])}"
             f"{'; ...' if len(changes) > 6 else ''}): the steps from {start} on train with this run's values. "
             f"{os.path.join(o.model_dir, 'run_flags.json')} records the change ({run_files.CHANGED}) with this run's "
             "first checkpoint.")
    trainer.before_first_save = lambda: training.write_run_files(o.model_dir, xlnet_config, flags_dict)
  return start


# Clip modes that take the same norm and make the same update on one replica (`optimization.apply_gradients`).
_SAME_ON_ONE_REPLICA = {"per_replica": "indexed_slices", "per_core": "dense"}


def _clip_mode_compared(there, clip_mode, replicas):
  """`there` (the run_flags.json of the run that wrote the checkpoints) with its --clip_mode made comparable with
  this run's (resolved) `clip_mode`: a file of before 2026-11-29 keeps `auto`, which meant per_core on TPU and
  indexed_slices elsewhere (fine-tuning's auto is per_replica since); and two modes that give the same numbers on
  one replica, where both runs have one, are no change."""
  stored = there.get("clip_mode")
  if stored is None or clip_mode in (None, "auto"):
    return there
  if stored == "auto":
    stored = "per_core" if there.get("use_tpu") or there.get("strategy") == "tpu" else "indexed_slices"
  if _replicas_of(there) == replicas == 1 and (_SAME_ON_ONE_REPLICA.get(stored, stored) ==
                                               _SAME_ON_ONE_REPLICA.get(clip_mode, clip_mode)):
    stored = clip_mode
  return dict(there, clip_mode=stored)


def _replicas_of(there):
  """The number of replicas of the run whose run_flags.json is `there`: its num_replicas, kept since 2026-11-29; for
  an older file, what its --strategy and --num_core_per_host resolve to where that needs no machine (auto,
  one_device; mirrored with a count); None where it cannot be told (all local GPUs, several workers, a TPU)."""
  if "num_replicas" in there:
    return there["num_replicas"]
  strategy, cores = there.get("strategy"), there.get("num_core_per_host")
  if there.get("use_tpu") or strategy not in ("auto", "one_device", "mirrored"):
    return None
  if strategy == "mirrored":
    return cores or None
  return cores if strategy == "auto" and cores and cores > 1 else 1


def _restore_or_init(o, trainer, log_fn, **kwargs):
  from xlnet_tf import run_checkpoint  # pylint: disable=g-import-not-at-top
  try:
    return trainer.restore_or_init(o.init_checkpoint, log_fn=log_fn, **kwargs)
  except run_checkpoint.CannotResume as e:
    run_files.check_same_tool(o, e.latest)
    # Flags that could build other variables: damaged files were blamed on any changed, --do_eval too (sweep 32, U10).
    changes = [c for c in run_files.flag_changes(o, training_only=True) if not c.startswith("train_steps ")]
    if e.damaged or not changes:
      raise
    raise FlagError(f"Cannot resume from {e.latest} ({e.reason}): it was written with other flags "
                    f"({'; '.join(changes[:6])}{'; ...' if len(changes) > 6 else ''}; {o.model_dir}/run_flags.json). "
                    "Rerun with that run's values, or pass another --model_dir.") from None


def fine_tuning_trainer(o, strategy, build_model, task, xlnet_config, tokens_per_example, log_fn=print,
                        resolved=None, data_files=None):
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
    data_files: the training record files: a resume on other ones is warned of (`restore_or_init`).

  Returns:
    (trainer, the step it starts from, the global batch size, the per-replica batch size).
  """
  from xlnet_tf import training  # pylint: disable=g-import-not-at-top
  from xlnet_tf.training import optimization  # pylint: disable=g-import-not-at-top
  global_batch, per_replica = training.fine_tuning_batch_sizes(strategy, o.train_batch_size)
  run_config = create_run_config(o, is_training=True, is_finetune=True)
  if o.clip_mode == "auto":  # resolved, as run_flags.json keeps it (what auto means has changed before)
    o = types.SimpleNamespace(**dict(vars(o), clip_mode=optimization.default_clip_mode(strategy, fine_tuning=True)))
  config = train_config(o, global_batch, tokens_per_example, save_at_start=o.save_initial_checkpoint,
                        iterations=min(o.iterations, o.save_steps) if o.save_steps else o.iterations)
  trainer = training.Trainer(strategy, lambda: build_model(run_config), task, o.model_dir, config)
  start = restore_or_init(o, trainer, xlnet_config, log_fn, resolved, data_files)  # weights only when fine-tuning
  return trainer, start, global_batch, per_replica
