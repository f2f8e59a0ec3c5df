"""The one training loop of xlnet-tf, for pretraining and fine-tuning, on any `tf.distribute` strategy.

A task plugs in its loss: `task(model, features, mems, training) -> (loss_sum, weight_sum, new_mems)` (e.g. a
token-weighted LM loss, or a sum over examples). The loss of the global batch is, with
`loss_weighting="replica_mean"` (the original: towers' or cores' mean losses, averaged), the mean over replicas of
`loss_sum / weight_sum`; with `"global_mean"`, `sum(loss_sum) / sum(weight_sum)` over replicas, so that one step on
N replicas equals one step on one device with the same global batch even when replicas hold different numbers of
targets (equal weights give equal losses). Each step computes the per-replica gradient of its share of the loss
and lets `optimization.apply_gradients` sum over replicas once, clip (as the original's path does: `clip_mode`),
layer-scale and apply.

Memory (`mems`) is per-replica state: `n_layer` non-trainable `ON_READ` variables `[mem_len, bsz_per_replica,
d_model]` (each replica keeps its own rows), updated every step with the model's stop-gradient `new_mems`. For
checkpoints they are gathered into one `[n_layer, mem_len, global_bsz, d_model]` variable (replica c's rows at
`[c*b, (c+1)*b)`), and scattered back on restore. `mems_reset="every_loop"` zeroes them at the start of every
host loop of `iterations` steps (the original TPU `train.py`); `"never"` carries them for the whole run (the
original `train_gpu.py`).

A checkpoint (`tf.train.CheckpointManager` in `model_dir`) holds the weights, the optimizer slots and step, the
mems and the dropout RNG state; with a seeded input pipeline that starts at the restored step, a resumed run
repeats exactly what an uninterrupted run would have done (`--deterministic` adds op determinism).
"""

import math
import signal
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf import checkpoint as checkpoint_lib
from xlnet_tf import hf_checkpoint
from xlnet_tf.config import create_run_config
from xlnet_tf.data import records
from xlnet_tf.training.runtime import is_chief, keep_freed_memory_after_input, trainer_args, write_run_files
from xlnet_tf.training import optimization
from xlnet_tf.training import preemption


MEMS_RESET = ("never", "every_loop")


LOSS_WEIGHTINGS = ("replica_mean", "global_mean")


def default_clip_mode(strategy):
  """The original's clipping on this strategy: per core on TPU (CrossShardOptimizer), else IndexedSlices rows."""
  return "per_core" if isinstance(strategy, tf.distribute.TPUStrategy) else "indexed_slices"


class Trainer:
  """Trains `model_fn()` with `task` on a strategy; see the module docstring.

  Args:
    strategy: a tf.distribute.Strategy (see `make_strategy`).
    model_fn: () -> XLNetModel, called inside `strategy.scope()`.
    task: callable (model, features, mems, training) -> (loss_sum, weight_sum, new_mems); a task with
      `is_language_model = True` gets perplexity and bits per character in the log line.
    model_dir: str, checkpoints and TensorBoard logs.
    optimizer_args: dict for `optimization.create_optimizer` (learning_rate, train_steps, warmup_steps,
      decay_method, min_lr_ratio, weight_decay, adam_epsilon).
    clip, lr_layer_decay_rate: as `optimization.apply_gradients`.
    clip_mode: as `optimization.apply_gradients`; None = the original's for the strategy (`default_clip_mode`).
    loss_weighting: "replica_mean" (the original) or "global_mean", see the module docstring.
    skip_bad_records: read damaged record files (`train`'s data_files) only up to their first unreadable record,
      instead of stopping at it (`records.skip_unreadable_records`).
    global_batch_size: int, rows per step over all replicas.
    mem_len: int or None, per-layer memory length (None or 0: no memory).
    mems_reset: "never" or "every_loop".
    iterations: steps per host call (and the logging interval).
    save_steps: checkpoint every N steps (None: only at the end); max_save: checkpoints kept (0 or None: all).
    jit_compile: XLA-compile the per-replica forward and backward.
    tokens_per_example: int, for throughput figures.
  """

  def __init__(self, strategy, model_fn, task, model_dir, optimizer_args, clip=1.0, lr_layer_decay_rate=1.0,
               global_batch_size=None, mem_len=None, mems_reset="never", iterations=1000, save_steps=None,
               max_save=None, jit_compile=False, tokens_per_example=1, clip_mode=None,
               loss_weighting="replica_mean", skip_bad_records=False):
    if mems_reset not in MEMS_RESET:
      raise ValueError(f"--mems_reset must be one of {MEMS_RESET}. Received: {mems_reset!r}.")
    if iterations <= 0:
      raise ValueError(f"--iterations must be positive. Received: {iterations}.")
    num_replicas = strategy.num_replicas_in_sync
    if global_batch_size % num_replicas:
      raise ValueError(f"The global batch size must split evenly over the {num_replicas} replicas. Received: "
                       f"{global_batch_size}. Use a multiple of {num_replicas}.")
    if loss_weighting not in LOSS_WEIGHTINGS:
      raise ValueError(f"--loss_weighting must be one of {LOSS_WEIGHTINGS}. Received: {loss_weighting!r}.")
    self.clip_mode = clip_mode or default_clip_mode(strategy)
    if self.clip_mode not in optimization.CLIP_MODES:
      raise ValueError(f"--clip_mode must be one of {optimization.CLIP_MODES}. Received: {clip_mode!r}.")
    self.loss_weighting = loss_weighting
    self.skip_bad_records = skip_bad_records
    self.strategy = strategy
    self.task = task
    self.model_dir = model_dir
    self.clip = clip
    self.lr_layer_decay_rate = lr_layer_decay_rate
    self.global_batch_size = global_batch_size
    self.bsz_per_replica = global_batch_size // num_replicas
    self.mem_len = mem_len or 0
    self.mems_reset = mems_reset
    self.iterations = iterations
    self.save_steps = save_steps
    self.jit_compile = jit_compile
    self.tokens_per_example = tokens_per_example
    self.train_steps = optimizer_args["train_steps"]

    self._stop = preemption.StopRequest()
    with strategy.scope():
      self.model = model_fn()
      config = self.model.xlnet_config
      self.n_layer, self.d_model = config.n_layer, config.d_model
      self.optimizer = optimization.create_optimizer(**optimizer_args)
      self.optimizer.build(self.model.trainable_variables)  # Keras 3: before the first distributed step
      self.mem_vars = []
      self.mems_global = None
      if self.mem_len:
        sync = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                    aggregation=tf.VariableAggregation.NONE)
        self.mem_vars = [tf.Variable(tf.zeros([self.mem_len, self.bsz_per_replica, self.d_model]),
                                     name=f"mems_{i}", **sync) for i in range(self.n_layer)]
        self.mems_global = tf.Variable(tf.zeros([self.n_layer, self.mem_len, global_batch_size, self.d_model]),
                                       trainable=False, name="mems")
    # Keras does not track the dropout seed generators' states in tf.train.Checkpoint; save them explicitly so a
    # resumed run draws the same dropout masks as an uninterrupted one.
    # `weights` names every trainable variable by its original name: Keras 3 does not track layers held in
    # lists/dicts (the layer stack, the heads) in tf.train.Checkpoint, so `model` alone misses most weights, and
    # `optimizer` holds them only by position. `load_weights` reads them by name into any model.
    items = dict(model=self.model, optimizer=self.optimizer, rng=list(self.model.non_trainable_variables),
                 weights=checkpoint_lib.original_variable_map(self.model))
    if self.mems_global is not None:
      items["mems"] = self.mems_global
    self.checkpoint = tf.train.Checkpoint(**items)
    self.chief = is_chief(strategy)
    self._save_dir = model_dir if self.chief else tempfile.mkdtemp(prefix="xlnet-worker-ckpt-")
    self.manager = tf.train.CheckpointManager(self.checkpoint, self._save_dir, max_to_keep=max_save or None,
                                              step_counter=self.optimizer.iterations, checkpoint_name="ckpt")
    self._writer = tf.summary.create_file_writer(model_dir) if self.chief else tf.summary.create_noop_writer()
    self._loop_fn = None
    self._gather_fn = None
    self._gradients_fn = None

  @property
  def step(self):
    return int(self.optimizer.iterations.numpy())

  # -- initialisation ------------------------------------------------------------------------------------------
  def restore_or_init(self, init_checkpoint=None, init_optimizer_state=False, log_fn=None):
    """Resumes from the latest checkpoint in model_dir; else loads `init_checkpoint` (an original TF1
    checkpoint or one of ours): its weights, and with `init_optimizer_state` also the optimizer's slots and step
    where it has them (the original's `init_from_checkpoint(global_vars=True)`); else keeps the fresh
    initialisation. Says what it did through `log_fn`. Returns the step."""
    log_fn = log_fn or logging.info
    latest = tf.train.latest_checkpoint(self.model_dir)
    if latest:
      try:
        self.checkpoint.restore(latest).assert_existing_objects_matched()
      except (tf.errors.OpError, ValueError, AssertionError) as e:
        reason = " ".join(str(getattr(e, "message", e)).split())[:200]
        raise ValueError(f"Cannot resume from {latest} ({reason}). If this run's flags build another model than "
                         "the run that wrote it (see run_flags.json there; e.g. --dropout or --dropatt 0 there, "
                         "not here, which adds dropout state), rerun with its flags; if it is half-written or "
                         f"damaged, delete its files ({latest}.*) to resume from the checkpoint before it; if it "
                         "belongs to another model, pass another --model_dir.") from None
      self._scatter_mems()
      log_fn(f"Resumed from {latest} at step {self.step}.")
    elif init_checkpoint:
      report = self.load_weights(init_checkpoint)
      log_fn(f"Initialised {len(report['loaded'])} variables from {report.get('source', init_checkpoint)}; kept their "
             "initial values: "
             f"{report['kept_initial'] or 'none'}.")
      if init_optimizer_state:
        log_fn(self.load_optimizer_state(init_checkpoint))
    return self.step

  def load_weights(self, ckpt_path):
    """Weights from an original TF1 checkpoint or from a checkpoint of ours, by name; see `load_weights`."""
    return checkpoint_lib.load_weights(self.model, ckpt_path)

  def load_optimizer_state(self, ckpt_path):
    """The optimizer's slots (m, v) and step from `ckpt_path`, where it holds them; returns a line saying what.

    An original TF1 checkpoint is read by name (`{var}/Adam`, `{var}/Adam_1` or `{var}/adam_m`, `{var}/adam_v`,
    `global_step`; TF1's beta powers follow from the step); one of ours through its `optimizer` object.
    """
    if hf_checkpoint.is_hf_directory(ckpt_path):
      return (f"Optimizer slots: none in HuggingFace directory {ckpt_path} (weights only), so fresh moments; "
              f"step {self.step}.")
    path = checkpoint_lib.resolve_checkpoint_path(ckpt_path)
    reader = tf.train.load_checkpoint(path)
    if reader.has_tensor(checkpoint_lib.OBJECT_GRAPH_KEY):
      tf.train.Checkpoint(optimizer=self.optimizer).read(path).expect_partial()
      return f"Continued the optimizer state (slots, step {self.step}) of {path}."
    slots = optimization.original_slot_map(self.optimizer, checkpoint_lib.original_variable_map(self.model))
    found = [name for name in slots if reader.has_tensor(name)]
    for name in found:
      slots[name].assign(reader.get_tensor(name))
    if reader.has_tensor("global_step"):
      self.optimizer.iterations.assign(int(reader.get_tensor("global_step")))
    if not found:
      return (f"Optimizer slots: none in {path} (a released or weights-only checkpoint), so fresh moments; "
              f"step {self.step}.")
    missing = len(slots) - len(found)
    return (f"Continued the optimizer state of {path}: {len(found)} slots"
            f"{f' ({missing} absent kept at zero)' if missing else ''}, step {self.step}.")

  # -- mems state ----------------------------------------------------------------------------------------------
  def _gather_mems(self):
    """mems_global <- every replica's mem_vars (replica c's rows at [c*b, (c+1)*b))."""
    if self.mems_global is None:
      return
    if self._gather_fn is None:
      @tf.function
      def gather():
        per_replica = self.strategy.run(lambda: tf.stack([v.read_value() for v in self.mem_vars]))
        self.mems_global.assign(self.strategy.gather(per_replica, axis=2))
      self._gather_fn = gather
    self._gather_fn()

  def _scatter_mems(self):
    """Every replica's mem_vars <- its rows of mems_global."""
    if self.mems_global is None:
      return
    b = self.bsz_per_replica

    def fn():
      c = tf.distribute.get_replica_context().replica_id_in_sync_group
      rows = self.mems_global[:, :, c * b:(c + 1) * b]
      for i, v in enumerate(self.mem_vars):
        v.assign(rows[i])

    tf.function(lambda: self.strategy.run(fn))()

  # -- the step --------------------------------------------------------------------------------------------------
  def _forward_backward(self, features, mems):
    """This replica's loss and gradients (no cross-replica communication, so it can be XLA-compiled).

    The gradients are those of this replica's share of the loss (`loss_sum` / `_loss_weight`), as the original
    differentiates its mean loss, except with loss_weighting "global_mean", whose weight needs the other replicas:
    there they are those of `loss_sum`, and `replica_step` divides them (one more pass over every gradient).

    Returns:
      (loss_sum, weight_sum, grads: one per trainable variable, rows: None, or with clip_mode "indexed_slices"
      (gradient of each gathered word-embedding row, the gathered ids), new_mems).
    """
    embedding = self.model.transformer.word_embedding
    with tf.GradientTape() as tape:
      loss_sum, weight_sum, new_mems = self.task(self.model, features, mems, training=True)
      objective = loss_sum
      if self.loss_weighting != "global_mean":
        objective = loss_sum / tf.cast(self._loss_weight(weight_sum), loss_sum.dtype)
    targets = list(self.model.trainable_variables)
    if self.clip_mode == "indexed_slices":
      ids, rows = embedding.last_lookup
      targets.append(rows)
    grads = tape.gradient(objective, targets)
    rows = (grads.pop(), ids) if self.clip_mode == "indexed_slices" else None
    return loss_sum, weight_sum, grads, rows, new_mems

  def _share_gradients(self, grads, rows, weight):
    """grads and rows of `_forward_backward` -> the gradients of this replica's share of the loss (weight: from
    `_loss_weight`)."""
    if self.loss_weighting != "global_mean":
      return grads, rows
    grads = [None if g is None else tf.convert_to_tensor(g) / tf.cast(weight, g.dtype) for g in grads]
    return grads, None if rows is None else (rows[0] / tf.cast(weight, rows[0].dtype), rows[1])

  def _loss_weight(self, weight_sum):
    """What divides this replica's loss_sum so that the replicas' shares sum to the global-batch loss."""
    context = tf.distribute.get_replica_context()
    weight = tf.stop_gradient(tf.cast(weight_sum, tf.float32))
    if self.loss_weighting == "global_mean":
      weight = context.all_reduce(tf.distribute.ReduceOp.SUM, weight)
    else:
      weight = weight * context.num_replicas_in_sync
    return tf.maximum(weight, 1e-12)

  def batch_gradients(self, dataset_fn):
    """What the next step would compute on its batch, without applying it (for checks and tools, e.g.
    scripts/check_train_step.py): each replica's loss and the gradients it would clip. Nothing changes: not the
    weights, the optimizer, the step nor the mems.

    Args:
      dataset_fn: as `train`'s; its batch at the current step is used, with the current mems.

    Returns:
      (losses: list of float, each replica's own loss `loss_sum / weight_sum`; grads: list of numpy arrays, one
      per `model.trainable_variables`: the gradient of the global-batch loss (the replicas' shares summed) before
      clipping, merged to dense, zeros for a variable the loss does not reach).
    """
    dist = self.strategy.distribute_datasets_from_function(lambda ctx: dataset_fn(ctx, self.step))
    if self._gradients_fn is None:
      variables = self.model.trainable_variables
      strategy = self.strategy

      def replica(features):
        mems = [v.read_value() for v in self.mem_vars] if self.mem_vars else None
        loss_sum, weight_sum, grads, _, _ = self._forward_backward(features, mems)
        grads, _ = self._share_gradients(grads, None, self._loss_weight(weight_sum))
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g) for v, g in zip(variables, grads)]
        return loss_sum / tf.maximum(tf.cast(weight_sum, loss_sum.dtype), 1e-12), grads

      @tf.function
      def gradients(features):
        loss, grads = strategy.run(replica, args=(features,))
        return (strategy.experimental_local_results(loss),
                [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in grads])
      self._gradients_fn = gradients
    losses, grads = self._gradients_fn(next(iter(dist)))
    return [float(l) for l in losses], [g.numpy() for g in grads]

  def _build_loop(self):
    strategy = self.strategy
    variables = self.model.trainable_variables
    table_index = [v is self.model.transformer.word_embedding.lookup_table for v in variables].index(True)
    forward_backward = self._forward_backward
    if self.jit_compile:
      forward_backward = tf.function(forward_backward, jit_compile=True)

    def replica_step(features):
      mems = [v.read_value() for v in self.mem_vars] if self.mem_vars else None
      loss_sum, weight_sum, grads, rows, new_mems = forward_backward(features, mems)
      weight = self._loss_weight(weight_sum)
      grads, rows = self._share_gradients(grads, rows, weight)
      if rows is not None:
        rows = (table_index, *rows)
      gnorm, lr = optimization.apply_gradients(self.optimizer, grads, variables, self.clip,
                                               self.lr_layer_decay_rate, self.n_layer, self.clip_mode, rows)
      loss = loss_sum / tf.cast(weight, loss_sum.dtype)
      for v, m in zip(self.mem_vars, new_mems or []):
        v.assign(tf.cast(m, v.dtype))
      return loss, gnorm, tf.cast(lr, tf.float32)

    def reset_mems():
      for v in self.mem_vars:
        v.assign(tf.zeros_like(v))

    multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)

    def stop_requested():
      """Whether a signal asked to stop (on any worker: every worker must stop at the same step). On one worker
      the flag (a host variable) is compared as int32, which TensorFlow computes on the host even on a GPU; a
      float compare could be placed on the GPU's stream, behind the previous step, and each step would wait for
      it (the loop needs the result on the host)."""
      flag = self._stop.flag.read_value()
      if multi_worker:
        flag = tf.cast(flag, tf.float32)
        flag = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(flag)), axis=None)
      return flag > 0

    @tf.function
    def train_loop(iterator, num_steps):
      if self.mems_reset == "every_loop" and self.mem_vars:
        strategy.run(reset_mems)
      loss_total = tf.constant(0.0)
      gnorm = lr = tf.constant(0.0)
      done = tf.constant(0)
      for _ in tf.range(num_steps):
        if stop_requested():
          break
        loss, gnorm_r, lr_r = strategy.run(replica_step, args=(next(iterator),))
        loss_total += strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
        gnorm = strategy.reduce(tf.distribute.ReduceOp.MEAN, gnorm_r, axis=None)
        lr = strategy.reduce(tf.distribute.ReduceOp.MEAN, lr_r, axis=None)
        done += 1
      return loss_total / tf.cast(tf.maximum(done, 1), tf.float32), gnorm, lr, done

    return train_loop

  # -- the loop --------------------------------------------------------------------------------------------------
  def train(self, dataset_fn, train_steps=None, log_fn=print, data_files=None, metrics_fn=None):
    """Trains until `train_steps` (default: the optimizer's), from the current step.

    Args:
      dataset_fn: (input_context, start_step) -> tf.data.Dataset of this pipeline's per-replica batches, as
        `strategy.distribute_datasets_from_function` expects; `start_step` is where a resumed run continues.
      log_fn: where the per-loop log line goes.
      data_files: the record files behind dataset_fn, to name the corrupt one if reading fails.
      metrics_fn: called after every loop with the dict that `train` returns for the last one (full precision).

    Returns:
      dict with the last loop's loss, gnorm, lr and the final step.

    Raises:
      preemption.Interrupted: SIGTERM or SIGINT arrived; the step in progress was finished and saved.
      ValueError: a record could not be read (the message names the file and record); nothing was saved.
    """
    train_steps = train_steps or self.train_steps
    start = self.step
    if start >= train_steps:
      log_fn(f"Nothing to do: step {start} >= train_steps {train_steps}.")
      return {"step": start}
    if self.skip_bad_records and data_files:
      records.skip_unreadable_records(data_files, log_fn)
    dist = self.strategy.distribute_datasets_from_function(lambda ctx: dataset_fn(ctx, start))
    iterator = iter(dist)
    keep_freed_memory_after_input()  # building the iterator reset glibc's mmap threshold
    if self._loop_fn is None:
      self._loop_fn = self._build_loop()
    with self._stop:
      try:
        return self._train_loops(iterator, start, train_steps, log_fn, metrics_fn)
      except (tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError) as e:
        if isinstance(e, tf.errors.InvalidArgumentError) and "Example" not in e.message:
          raise  # not a record that failed to parse
        raise ValueError(self._read_error(e, data_files)) from None

  def _read_error(self, error, data_files):
    found = records.find_corrupt_record(data_files) if data_files else None
    where = (f"Record file {found[0]} is unreadable at record {found[1]} ({found[2]})" if found else
             f"A training record is unreadable ({' '.join(error.message.split())[:300]})")
    return (f"{where}. Rewrite the file with the tool that wrote it (data_utils.py for pretraining records) or "
            f"remove it, then rerun; nothing was saved, the latest checkpoint is {self._latest()}.")

  def _latest(self):
    """The latest checkpoint, or where there is none (for error lines)."""
    return self.manager.latest_checkpoint or f"none (no checkpoint in {self.model_dir})"

  def _train_loops(self, iterator, start, train_steps, log_fn, metrics_fn):
    last = {}
    t_start = time.time()
    while self.step < train_steps:
      step = self.step
      num_steps = min(self.iterations, train_steps - step)
      if self.save_steps:
        num_steps = min(num_steps, self.save_steps - step % self.save_steps)
      t0 = time.time()
      loss, gnorm, lr, done = self._loop_fn(iterator, tf.constant(num_steps))
      loss, gnorm, lr, done = float(loss), float(gnorm), float(lr), int(done)
      elapsed = time.time() - t0
      step = self.step
      if done == 0:  # stopped before this loop's first step
        self._stop_now(step, log_fn)
      if not (math.isfinite(loss) and math.isfinite(gnorm)):
        raise FloatingPointError(
            f"Loss or gradient norm is not finite at step {step} (loss {loss}, gnorm {gnorm}); stopped without "
            f"saving. The last good checkpoint is {self._latest()}. Lower --learning_rate or check the data.")
      steps_per_sec = done / elapsed
      tokens_per_sec = steps_per_sec * self.global_batch_size * self.tokens_per_example
      eta = (train_steps - step) * (time.time() - t_start) / max(step - start, 1)
      lm = (f" | pplx {math.exp(min(loss, 50)):>7.2f}, bpc {loss / math.log(2):>7.4f}"
            if getattr(self.task, "is_language_model", False) else "")
      log_fn(f"[{step}] | gnorm {gnorm:.2f} lr {lr:8.6f} | loss {loss:.4f}{lm} | {steps_per_sec:.2f} steps/s, "
             f"{tokens_per_sec:.0f} tokens/s, ETA {_format_seconds(eta)}")
      with self._writer.as_default(step=step):
        tf.summary.scalar("train/total_loss", loss)
        tf.summary.scalar("train/lr", lr)
        tf.summary.scalar("train/gnorm", gnorm)
        tf.summary.scalar("train/steps_per_sec", steps_per_sec)
        tf.summary.scalar("train/tokens_per_sec", tokens_per_sec)
      self._writer.flush()
      last = dict(loss=loss, gnorm=gnorm, lr=lr, step=step)
      if metrics_fn:
        metrics_fn(last)
      if (self.save_steps and step % self.save_steps == 0) or step >= train_steps:
        self.save()
      if done < num_steps or self._stop.signum is not None:
        self._stop_now(step, log_fn)
    return last

  def _stop_now(self, step, log_fn):
    """Saves the current step (if not saved yet) and raises `preemption.Interrupted`."""
    signum = self._stop.signum or signal.SIGTERM
    name = signal.Signals(signum).name
    latest = self.manager.latest_checkpoint
    path = latest if latest and latest.endswith(f"-{step}") else self.save()
    log_fn(f"Stopped by {name} after step {step}; checkpoint {path}.")
    raise preemption.Interrupted(f"stopped by {name} at step {step}; checkpoint {path}. Run the same command "
                                 f"again to resume from step {step}.", signum)

  def save(self):
    """Writes a checkpoint of the current step (weights, optimizer, mems, RNG state); returns its path.

    Raises:
      OSError: the checkpoint could not be written (e.g. the disk is full). TensorFlow writes the index and the
        `checkpoint` state file last, so the latest checkpoint stays the previous complete one; the message says
        which, and the run can resume from it once there is space.
    """
    self._gather_mems()
    try:
      path = self.manager.save(checkpoint_number=self.step)
    except (tf.errors.OpError, OSError) as e:
      reason = " ".join(str(getattr(e, "message", e)).split())[:200]
      raise OSError(f"Could not write checkpoint {self._save_dir}/ckpt-{self.step} ({reason}). The latest complete "
                    f"checkpoint is still {self._latest()}: free space (or fix the "
                    "directory), then rerun the same command to resume from it.") from None
    if not self.chief:
      shutil.rmtree(self._save_dir, ignore_errors=True)
      return None
    logging.info("Saved checkpoint %s", path)
    return path


def fine_tuning_trainer(options, strategy, build_model, task, xlnet_config, tokens_per_example, log_fn=print):
  """The `Trainer` of a fine-tuning CLI (run_classifier.py, run_race.py, run_squad.py), from its flags.

  `--train_batch_size` is global on TPU and per replica elsewhere (the original's GPU semantics). Writes the run
  files on the chief, then resumes from `--model_dir`'s latest checkpoint or loads `--init_checkpoint` (weights).

  Args:
    options: the script's flag values.
    build_model: run_config -> the task's XLNetModel.
    task: the task's loss (e.g. a `ClassifierTask`).
    xlnet_config: the model's `XLNetConfig`.
    tokens_per_example: int, for the tokens/s of the log line.

  Returns:
    (trainer, the step it starts from, the global batch size, the per-replica batch size).
  """
  o = options
  num_replicas = strategy.num_replicas_in_sync
  if isinstance(strategy, tf.distribute.TPUStrategy):
    global_batch, per_replica = o.train_batch_size, o.train_batch_size // num_replicas
  else:
    global_batch, per_replica = o.train_batch_size * num_replicas, o.train_batch_size
  run_config = create_run_config(is_training=True, is_finetune=True, flags=o)
  trainer = Trainer(strategy, lambda: build_model(run_config), task, o.model_dir, **trainer_args(o),
                    global_batch_size=global_batch,
                    iterations=min(o.iterations, o.save_steps) if o.save_steps else o.iterations,
                    save_steps=o.save_steps, max_save=o.max_save, jit_compile=o.jit_compile,
                    tokens_per_example=tokens_per_example)
  if is_chief(strategy):
    write_run_files(o.model_dir, xlnet_config, vars(o))
  start = trainer.restore_or_init(o.init_checkpoint, log_fn=log_fn)  # weights only when fine-tuning
  return trainer, start, global_batch, per_replica


def _format_seconds(seconds):
  seconds = int(seconds)
  return f"{seconds // 3600}h{seconds // 60 % 60:02d}m{seconds % 60:02d}s"


def numpy_mems(trainer):
  """The current mems as numpy [n_layer, mem_len, global_bsz, d_model] (for tests and tools)."""
  trainer._gather_mems()
  return None if trainer.mems_global is None else np.asarray(trainer.mems_global.numpy())
