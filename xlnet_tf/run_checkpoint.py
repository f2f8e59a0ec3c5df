"""The checkpoints a training run writes in its `model_dir` and resumes from (`ckpt-{step}`, through a
`tf.train.CheckpointManager`), and the optimizer state a run continues from its --init_checkpoint
(`load_optimizer_state`). Loading weights by original name into any model is `checkpoint.py`'s."""

import contextlib
import glob
import os
import re
import shutil
import tempfile
import textwrap

import tensorflow as tf
from absl import logging

from xlnet_tf import checkpoint as checkpoint_lib
from xlnet_tf import checkpoint_paths
from xlnet_tf import fileio
from xlnet_tf import hf_checkpoint
from xlnet_tf import stderr_filter


def load_optimizer_state(optimizer, slots, ckpt_path):
  """Continues the optimizer state (slots m, v and step) of `ckpt_path` where it holds one; returns a line saying
  what was loaded.

  An original TF1 checkpoint is read by name (`{var}/Adam`, `{var}/Adam_1` or `{var}/adam_m`, `{var}/adam_v`,
  `global_step`; TF1's beta powers follow from the step): slots it lacks keep their values (zero in a fresh
  optimizer). A checkpoint written by `Trainer` is read through its `optimizer` object.

  Args:
    optimizer: a built Keras optimizer.
    slots: {original TF1 slot name: slot variable of `optimizer`}, e.g. `slot_names.original_slot_map(optimizer,
      checkpoint.original_variable_map(model))`.
    ckpt_path: a checkpoint prefix, a directory (its latest checkpoint) or `<dir>/latest`, or a HuggingFace model
      directory (which holds no optimizer state).
  """
  def step():
    return int(optimizer.iterations.numpy())

  if hf_checkpoint.is_hf_directory(ckpt_path):
    return (f"Optimizer slots: none in HuggingFace directory {ckpt_path} (weights only), so fresh moments; "
            f"step {step()}.")
  path = checkpoint_lib.resolve_checkpoint_path(ckpt_path)
  reader = checkpoint_lib.Reader(path)

  if reader.has_tensor(checkpoint_lib.OBJECT_GRAPH_KEY):
    with checkpoint_lib.reading(path):
      tf.train.Checkpoint(optimizer=optimizer).read(path).expect_partial()
    return f"Continued the optimizer state (slots, step {step()}) of {path}."
  found = [name for name in slots if reader.has_tensor(name)]
  for name in found:
    slots[name].assign(reader.get_tensor(name))
  if reader.has_tensor("global_step"):
    optimizer.iterations.assign(int(reader.get_tensor("global_step")))
  if not found:
    return f"Optimizer slots: none in {path} (a released or weights-only checkpoint), so fresh moments; step {step()}."
  missing = len(slots) - len(found)
  return (f"Continued the optimizer state of {path}: {len(found)} slots"
          f"{f' ({missing} absent kept at zero)' if missing else ''}, step {step()}.")


def _variable_names(reason):
  """TensorFlow's reason with each variable it lists as its name (`<tf.Variable 'scale:0' shape=() dtype=float32,
  numpy=32768.0>`, `<Variable path=seed_generator_4/seed_generator_state, ...>`: scale, seed_generator_4/...), and
  its sentence about unmatched objects as what it means here."""
  reason = re.sub(r"<tf\.Variable '([^':]+)(?::\d+)?'[^>]*>", r"\1", reason)
  reason = re.sub(r"<Variable path=([^,>]+)[^>]*>", r"\1", reason)
  return re.sub(r"^Found (\d+) Python objects that were not bound to checkpointed values, likely due to changes in "
                r"the Python program\. Showing \d+ of \d+ unmatched objects: \[(.*)\]",
                r"it lacks \1 of this run's variables: \2", reason, flags=re.S)


class CannotResume(ValueError):
  """model_dir's latest checkpoint does not fit this run's objects or cannot be read (`RunCheckpoint.restore_latest`);
  `latest` is its path, `reason` TensorFlow's; `damaged`: its files cannot be read whole (no flag would read it)."""

  def __init__(self, message, latest, reason, damaged=False):
    super().__init__(message)
    self.latest, self.reason, self.damaged = latest, reason, damaged


class RunCheckpoint:
  """What a run saves and resumes from: the model, its weights by original name, the optimizer's slots and step,
  the dropout RNG state, the mems and (float16) the loss scale.

  Keras does not track the dropout seed generators' states in tf.train.Checkpoint; they are saved explicitly
  (`rng`) so a resumed run draws the same dropout masks as an uninterrupted one. `weights` names every trainable
  variable by its original name: Keras 3 does not track layers held in lists/dicts (the layer stack, the heads) in
  tf.train.Checkpoint, so `model` alone misses most weights, and `optimizer` holds them only by position;
  `checkpoint.load_weights` reads them by name into any model.

  Args:
    model: the run's XLNetModel.
    optimizer: its built optimizer; its `iterations` is the step.
    mems_variable: the mems as checkpoints hold them (`Mems.global_variable`), or None without memory.
    model_dir: str.
    chief: bool. Every worker takes part in a save; one that is not the chief writes into a temporary directory,
      then deletes it.
    max_save: checkpoints kept (0 or None: all).
    loss_scale: the float16 run's `loss_scale.DynamicLossScale` (its scale, good steps and skipped steps), or
      None.
  """

  def __init__(self, model, optimizer, mems_variable, model_dir, chief, max_save, loss_scale=None):
    items = dict(model=model, optimizer=optimizer, rng=list(model.non_trainable_variables),
                 weights=checkpoint_lib.original_variable_map(model))
    if mems_variable is not None:
      items["mems"] = mems_variable
    if loss_scale is not None:
      items["loss_scale"] = loss_scale
    self.checkpoint = tf.train.Checkpoint(**items)
    self._items = items
    self.model_dir = model_dir
    self.chief = chief
    if chief and fileio.exists(model_dir) and not fileio.isdir(model_dir):  # a Trainer of the Python API trained
      raise ValueError(f"Cannot use model_dir {model_dir}: it is a file, left as it is. Pass a directory (made if "
                       "missing).")  # every step, then failed at the first save (sweep 35)
    self._save_dir = model_dir if chief else tempfile.mkdtemp(prefix="xlnet-worker-ckpt-")
    if chief:  # --max_save prunes only this directory's own checkpoints, oldest first (sweep 34, R1, R2)
      checkpoint_paths.keep_own_state(model_dir)
    with checkpoint_paths.state_read_once(self._save_dir):  # an empty state file: our line, not TensorFlow's
      self.manager = tf.train.CheckpointManager(self.checkpoint, self._save_dir, max_to_keep=max_save or None,
                                                step_counter=optimizer.iterations, checkpoint_name="ckpt")
    # The latest complete checkpoint: the one resumed from, then each one saved. Not the manager's latest, which is
    # the one its state file names until the first save, where that one's files may be gone (`restore_latest`).
    self.latest_path = None
    self.fresh = {}  # {item: why} of what the resume left as it starts (`restore_latest`)

  def latest(self):
    """The latest checkpoint written, or where there is none (for error lines)."""
    return self.latest_path or f"none (no checkpoint in {self.model_dir})"

  def restore_latest(self):
    """Restores model_dir's latest complete checkpoint (`checkpoint.latest_checkpoint`: where the state file names
    one whose files are gone, the one before it, with a warning); returns its path, or None if there is none.

    Raises:
      CannotResume: it does not fit this run's objects, or cannot be read; the message says what to do.
      FileNotFoundError: the state file names a checkpoint whose files are gone, and none there is complete (a copy
        cut short): the run started again from step 0 and wrote over the state file.
    """
    latest = checkpoint_lib.latest_checkpoint(self.model_dir)
    state = None if latest else checkpoint_paths.read_state(self.model_dir)
    if state is not None:
      raise FileNotFoundError(f"Cannot resume: {os.path.join(self.model_dir, 'checkpoint')} names "
                              f"{state.model_checkpoint_path} as the latest checkpoint, but its files are gone and "
                              "there is no complete checkpoint in --model_dir (a copy cut short?). Copy the "
                              "checkpoint's files again; to train from step 0 there, delete that state file; or "
                              "pass another --model_dir.")
    if latest:
      try:
        self.fresh = self._fresh_items(checkpoint_lib.Reader(latest).get_variable_to_shape_map())
        restored = (tf.train.Checkpoint(**{k: v for k, v in self._items.items() if k not in self.fresh})
                    if self.fresh else self.checkpoint)
        with checkpoint_lib.reading(latest):  # a cut .data file: the reader's IndexError, a traceback before
          restored.restore(latest).assert_existing_objects_matched()
      except checkpoint_lib.DamagedCheckpointError as e:  # a run's own: its files cannot be read whole
        advice = (f"delete its files ({latest}.*) to resume from the checkpoint before it, or pass another "
                  "--model_dir" if checkpoint_paths.is_run_checkpoint(latest) else "copy its files again, or pass "
                  "another --model_dir")
        raise CannotResume(f"Cannot resume from {latest}: its files are incomplete or damaged ({e.reason}); "
                           f"{advice}.", latest, e.reason, damaged=True) from None
      except (tf.errors.OpError, ValueError, AssertionError) as e:
        reason = textwrap.shorten(_variable_names(stderr_filter.error_text(str(getattr(e, "message", e)))), 300,
                                  placeholder=" ...")
        if heads := self._heads_it_lacks(latest):  # a good checkpoint was advised deleted (sweep 34, R6)
          raise CannotResume(f"Cannot resume from {latest}: it holds the model's backbone but not this run's "
                             f"{', '.join(heads)} (a pretraining run's checkpoint, or another task's). Pass it as "
                             "--init_checkpoint (the head then starts afresh) and another --model_dir.",
                             latest, reason) from None
        # Deleting is advised for a run's own checkpoint only, never for another's (an original run's model.ckpt-N).
        damaged = (f"if it is half-written or damaged, delete its files ({latest}.*) to resume from the checkpoint "
                   "before it; " if checkpoint_paths.is_run_checkpoint(latest) else "")
        raise CannotResume(f"Cannot resume from {latest} ({reason}). If this run's flags build another model than "
                           "the run that wrote it (see run_flags.json there; e.g. --dropout or --dropatt 0 there, "
                           f"not here, which adds dropout state), rerun with its flags; {damaged}if it "
                           "belongs to another model, pass another --model_dir.", latest, reason) from None
    self.latest_path = latest
    return latest

  def _heads_it_lacks(self, path):
    """The task heads (`model/{head}`) of this run's model that checkpoint `path` lacks where it holds the whole
    backbone (a pretraining run's checkpoint, or another task's); [] otherwise."""
    held = {key[len("weights/"):].split("/.ATTRIBUTES")[0].replace(".S", "/")
            for key in checkpoint_lib.Reader(path).get_variable_to_shape_map() if key.startswith("weights/")}
    missing = [name for name in self._items["weights"] if name not in held]
    if not held or not missing or any(name.startswith("model/transformer/") for name in missing):
      return []
    return sorted({"/".join(name.split("/")[:2]) for name in missing})

  def _fresh_items(self, held):
    """{item: the sentence that says so} of what a resume from a checkpoint holding `held` ({name: shape}) leaves
    as a run starts it, else refused listing every changed flag (sweep 25, C2, C4): the loss scale a float32 run's
    checkpoint lacks, resumed with --use_fp16 (as the README advises a run out of memory); mems of another shape
    (another --mem_len), or none (--mem_len=0), which the original's train_gpu.py keeps out of its checkpoints,
    starting every resume's afresh."""
    fresh = {}
    if "loss_scale" in self._items and not any(name.startswith("loss_scale/") for name in held):
      fresh["loss_scale"] = "It holds no loss scale (a float32 or bfloat16 run's): float16's starts afresh."
    shape = held.get("mems/.ATTRIBUTES/VARIABLE_VALUE")
    if "mems" in self._items and shape is None:
      fresh["mems"] = "It holds no mems (a --mem_len=0 run's): this run's start afresh."
    elif "mems" in self._items and list(shape) != self._items["mems"].shape.as_list():
      fresh["mems"] = (f"Its mems are of shape {list(shape)}, this run's {self._items['mems'].shape.as_list()} "
                       "(another --mem_len or batch): they start afresh, as every resume of the original's.")
    return fresh

  def save(self, step):
    """Writes the checkpoint of `step`; returns its path (None on a worker that is not the chief).

    Raises:
      OSError: the checkpoint could not be written (e.g. the disk is full). TensorFlow writes the index and the
        `checkpoint` state file last, so the latest checkpoint stays the previous complete one (an index cut short
        is removed: `_remove_if_damaged`); the message says which, and the run can resume from it once there is
        space.
    """
    try:
      path = self.manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as e:
      try:  # TensorFlow's own temporary directory of the save, left behind (empty)
        tf.io.gfile.rmtree(os.path.join(self._save_dir, f"ckpt-{step}_temp"))
      except tf.errors.OpError:
        pass
      # TensorFlow's "{{function_node ...}} {its temporary file}; No space left on device [Op:SaveV2]": the reason.
      reason = stderr_filter.error_text(str(getattr(e, "message", e))).rpartition("; ")[2][:200]
      saved = os.path.join(self._save_dir, f"ckpt-{step}")
      state = None
      with contextlib.suppress(ValueError):  # a state file cut short: no save
        state = checkpoint_paths.read_state(self._save_dir) if self.chief else None
      if state is not None and state.model_checkpoint_path == saved and checkpoint_paths.is_complete(saved):
        # Written and named; deleting an older one (--max_save) failed. It was "Could not write checkpoint", the run
        # stopped and its run files were put back (sweep 34, R4).
        logging.warning("Saved checkpoint %s, but an older one could not be deleted for --max_save (%s): it is kept; "
                        "delete it by hand.", saved, reason)
        self.latest_path = saved
        return saved
      if isinstance(e, tf.errors.ResourceExhaustedError) and "space" not in reason:
        reason += "; the disk may be full"
      self._remove_if_damaged(os.path.join(self._save_dir, f"ckpt-{step}"))
      # What a rerun resumes from: also this one where only TensorFlow's state file could not be written after it.
      resumed = checkpoint_paths.latest_checkpoint(self._save_dir) if self.chief else None
      if resumed == saved:  # the state file named the one before: said as this checkpoint not written (sweep 34)
        raise OSError(f"Wrote checkpoint {saved}, but not the state file {self._save_dir}/checkpoint that names it "
                      f"({reason}). Fix the directory (free space, permissions), then rerun the same command to "
                      "resume from it.") from None
      raise OSError(f"Could not write checkpoint {self._save_dir}/ckpt-{step} ({reason}). The latest complete "
                    f"checkpoint is {'still ' * (resumed in (None, self.latest_path))}{resumed or self.latest()}: "
                    "free space (or fix the directory), then rerun the same command to "
                    f"{'resume from it' if resumed or self.latest_path else 'start again from step 0'}.") from None
    if not self.chief:
      shutil.rmtree(self._save_dir, ignore_errors=True)
      return None
    self.latest_path = path
    logging.info("Saved checkpoint %s", path)
    return path

  def discard(self, path):
    """Removes the checkpoint `path`, the only one this directory's run has written (a run's checkpoint of its start,
    whose training then failed before the next save: a rerun resumed from it, its --init_* flags unread), and the
    state file naming it alone."""
    if not self.chief:
      return
    state = checkpoint_paths.read_state(self._save_dir)
    if state is not None and list(state.all_model_checkpoint_paths) in ([], [path]):
      tf.io.gfile.remove(os.path.join(self._save_dir, "checkpoint"))
    for part in tf.io.gfile.glob(glob.escape(path) + ".*"):
      tf.io.gfile.remove(part)
    self.latest_path = None

  def _remove_if_damaged(self, prefix):
    """Removes the files of the checkpoint `prefix` a failed save left where they cannot be read: TensorFlow merges
    the `.index` under its final name, and a full disk there left it cut short beside a whole `.data` file, which
    the line then named as the latest complete checkpoint, and the rerun refused as damaged (sweep 28, A4); a data
    part without its `.index` (no inode left for it) stayed for good, model-sized (sweep 30, U13)."""
    if not self.chief:
      return
    if not tf.io.gfile.exists(prefix + ".index"):
      for path in tf.io.gfile.glob(glob.escape(prefix) + ".data-*"):
        tf.io.gfile.remove(path)
      return
    try:
      checkpoint_lib.Reader(prefix)
    except checkpoint_lib.DamagedCheckpointError:
      for path in tf.io.gfile.glob(glob.escape(prefix) + ".*"):
        tf.io.gfile.remove(path)
