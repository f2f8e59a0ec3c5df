"""The one training loop of xlnet-tf, for pretraining and fine-tuning, on any `tf.distribute` strategy.

A task plugs in its loss: `task(model, features, mems, training) -> (loss_sum, weight_sum, new_mems)` (e.g. a
token-weighted LM loss, or a sum over examples). The loss of the global batch is, with
`loss_weighting="replica_mean"` (the original: towers' or cores' mean losses, averaged), the mean over replicas of
`loss_sum / weight_sum`; with `"global_mean"`, `sum(loss_sum) / sum(weight_sum)` over replicas, so that one step on
N replicas equals one step on one device with the same global batch even when replicas hold different numbers of
targets (equal weights give equal losses). Each step computes the per-replica gradient of its share of the loss
and lets `optimization.apply_gradients` sum over replicas once, clip (as the original's path does: `clip_mode`),
layer-scale and apply.

With `gradient_accumulation_steps` N > 1 each replica's batch is split into N micro-batches, run one after the
other, whose summed gradients (of `loss_sum`, divided once by the whole batch's weight) make the one update
(`accumulation`): the same loss, gradient norm, clip, Adam and learning-rate step as the whole batch, less memory.

Memory (`mems`) is per-replica state (`mems.Mems`), updated every step with the model's stop-gradient `new_mems`.
`mems_reset="every_loop"` zeroes it before every step that is a multiple of `iterations` (the original TPU `train.py`
zeroes it at every host loop of `iterations` steps): host loops end at those steps, so where the loops are cut (a
save point, a stop and its resume) does not move the zeroing; `"never"` carries it for the whole run (the original
`train_gpu.py`). Each loop's figures go to `reporting.Progress` (the log line, TensorBoard, the peak memory).

A model that computes in float16 (`RunConfig.use_fp16`) trains with dynamic loss scaling: the Trainer then owns a
`loss_scale.DynamicLossScale`, scales the objective, unscales the gradients and skips (counts) a step whose
gradients overflow on any replica (see that module).

A checkpoint (`run_checkpoint.RunCheckpoint`, in `model_dir`) holds the weights, the optimizer slots and step, the
mems, the dropout RNG state and the loss scale; with a seeded input pipeline that starts at the restored step, a
resumed run repeats exactly what an uninterrupted run would have done (`--deterministic` adds op determinism).
"""

import contextlib
import math
import signal
import time

import tensorflow as tf
from absl import logging

from xlnet_tf import checkpoint as checkpoint_lib
from xlnet_tf import config as config_lib
from xlnet_tf import fileio
from xlnet_tf.data import read_errors, records
from xlnet_tf.run_checkpoint import RunCheckpoint, load_optimizer_state
from xlnet_tf.training import accumulation, batches, optimization, out_of_memory, preemption
from xlnet_tf.training.config import TrainConfig
from xlnet_tf.training.loss_scale import DynamicLossScale, loss_scale_for
from xlnet_tf.training.mems import Mems
from xlnet_tf.training.reporting import Progress, memory_device
from xlnet_tf.training.runtime import is_chief, keep_freed_memory_after_input
from xlnet_tf.training.slot_names import original_slot_map


class Trainer:
  """Trains `model_fn()` with `task` on a strategy; see the module docstring.

  Args:
    strategy: a tf.distribute.Strategy (see `make_strategy`).
    model_fn: () -> XLNetModel, called inside `strategy.scope()`; its `run_config.mem_len` is the length of the
      mems the loop carries (None or 0: no memory).
    task: callable (model, features, mems, training) -> (loss_sum, weight_sum, new_mems); a task with
      `is_language_model = True` gets perplexity and bits per character in the log line.
    model_dir: str (or a pathlib.Path; a leading `~` is the home directory), checkpoints and TensorBoard logs.
    config: a `TrainConfig` (the optimizer and its schedule, clipping, the loop's settings).
  """

  def __init__(self, strategy, model_fn, task, model_dir, config):
    if not isinstance(config, TrainConfig):  # a dict: `'dict' object has no attribute 'global_batch_size'`
      raise TypeError(f"Trainer's config must be a TrainConfig. Received: {type(config).__name__}.")
    if not callable(model_fn) or not isinstance(model_fn, type) and hasattr(model_fn, "trainable_variables"):
      # a model: called as one, its input_ids missing
      raise TypeError("Trainer's model_fn must be a function that builds the model (it is called inside the "
                      f"strategy's scope), e.g. lambda: XLNetModel(...). Received: {type(model_fn).__name__}.")
    num_replicas = strategy.num_replicas_in_sync
    global_batch_size = config.global_batch_size
    if global_batch_size % num_replicas:
      raise ValueError(f"The global batch size must split evenly over the {num_replicas} replicas. Received: "
                       f"{global_batch_size}. Use a multiple of {num_replicas}.")
    self.config = config
    self.clip_mode = config.clip_mode or optimization.default_clip_mode(strategy)
    self.strategy = strategy
    self.task = task
    self.model_dir = model_dir = fileio.api_path(model_dir)
    self.bsz_per_replica = global_batch_size // num_replicas
    # Whether `_forward_backward` differentiates loss_sum and `_share_gradients` divides the gradients once, by a
    # weight it cannot know alone: the other replicas' ("global_mean") or the other micro-batches' (accumulation).
    self._divide_after = self.config.loss_weighting == "global_mean" or self.config.gradient_accumulation_steps > 1

    self._stop = preemption.StopRequest()
    # () -> None, run once before this run's first checkpoint is written (the CLIs write their run files there,
    # which describe the checkpoints: a run that fails before it saves leaves the earlier run's as they were).
    self.before_first_save = self._at_start = self._undo_run_files = None  # and the start's checkpoint, its undo
    with strategy.scope():
      self.model = model_fn()
      self.n_layer = self.model.xlnet_config.n_layer
      self._row_groups = 2 if self.model.run_config.bi_data else 1  # [forward | backward] rows stay paired
      accumulation.check_split(self.bsz_per_replica, self.config.gradient_accumulation_steps, self._row_groups)
      self.optimizer = optimization.create_optimizer(**config.optimizer_args())
      self.optimizer.build(self.model.trainable_variables)  # Keras 3: before the first distributed step
      mem_len = self.model.run_config.mem_len
      with out_of_memory.reported(f"holding the mems ({self.n_layer} x [{mem_len}, {self.bsz_per_replica}, "
                                  f"{self.model.xlnet_config.d_model}] floats a replica)", "Pass a smaller --mem_len"):
        self.mems = Mems(strategy, self.n_layer, mem_len, self.bsz_per_replica, self.model.xlnet_config.d_model)
      self.loss_scale = loss_scale_for(self.model, self.optimizer)
    self.chief = is_chief(strategy)
    self.checkpoints = RunCheckpoint(self.model, self.optimizer, self.mems.global_variable, model_dir, self.chief,
                                     config.max_save, self.loss_scale)
    self.progress = Progress(model_dir, self.chief, global_batch_size * config.tokens_per_example,
                             language_model=getattr(task, "is_language_model", False),
                             memory_device=memory_device(strategy))
    self._loop_fn = None
    self._loop_steps = None  # (first, last) step of the loop call running (`_steps_in_flight`)
    self._gradients_fn = None

  @property
  def step(self):
    return int(self.optimizer.iterations.numpy())

  # -- initialisation ------------------------------------------------------------------------------------------
  def restore_or_init(self, init_checkpoint=None, init_optimizer_state=False, log_fn=None):
    """Resumes from the latest checkpoint in model_dir; else loads `init_checkpoint` (an original TF1
    checkpoint or one of ours): its weights, and with `init_optimizer_state` also the optimizer's slots and step
    where it has them (the original's `init_from_checkpoint(global_vars=True)`); else keeps the fresh
    initialisation. Says what it did through `log_fn`. Returns the step.

    Raises:
      checkpoint.DamagedCheckpointError: `init_checkpoint`'s files cannot be read whole; the message names it as
        --init_checkpoint.
      FileNotFoundError: there is no checkpoint at `init_checkpoint`; the message names --init_checkpoint.
    """
    log_fn = log_fn or logging.info
    latest = self.checkpoints.restore_latest()
    if latest:
      self.mems.scatter()
      fresh = "".join(f" {why}" for why in self.checkpoints.fresh.values())  # left as a run starts it
      log_fn(f"Resumed from {latest} at step {self.step}.{fresh}" + (
          f" --init_checkpoint {init_checkpoint} is not read: a --model_dir holding checkpoints continues them (as "
          "the original's Estimator); pass a new --model_dir to start from it." if init_checkpoint else ""))
    elif init_checkpoint:
      try:
        report = checkpoint_lib.load_weights(self.model, init_checkpoint)
        log_fn(f"Initialised {len(report['loaded'])} variables from {report.get('source', init_checkpoint)}; kept "
               f"their initial values: {report['kept_initial'] or 'none'}.")
        if init_optimizer_state:
          slots = original_slot_map(self.optimizer, checkpoint_lib.original_variable_map(self.model))
          log_fn(load_optimizer_state(self.optimizer, slots, init_checkpoint))
      except checkpoint_lib.DamagedCheckpointError as e:
        raise e.named("--init_checkpoint") from None
      except FileNotFoundError as e:  # the message names the path, not the flag
        raise FileNotFoundError(f"--init_checkpoint: {e}") from None
    return self.step

  # -- the loop: host side, then the steps it runs on the replicas ---------------------------------------------
  def train(self, dataset_fn, train_steps=None, log_fn=print, data_files=None, metrics_fn=None):
    """Trains until `train_steps` (default: the optimizer's), from the current step.

    Args:
      dataset_fn: (input_context, start_step) -> tf.data.Dataset of this pipeline's per-replica batches, as
        `strategy.distribute_datasets_from_function` expects; `start_step` is where a resumed run continues.
      log_fn: where the per-loop log line goes.
      data_files: the record files behind dataset_fn, to name the corrupt one if reading fails.
      metrics_fn: called after every loop with the dict that `train` returns for the last one (full precision).

    Returns: dict with the last loop's loss, gnorm, lr and the final step.

    Raises:
      preemption.Interrupted: SIGTERM or SIGINT arrived; the step in progress was finished and saved.
      ValueError: a record could not be read, or holds a token id outside the vocabulary (named with its file and
        record); MemoryError: a step ran out of memory (the message says which flags make it fit). Nothing saved.
    """
    if train_steps is not None and not (config_lib.fits(int, train_steps) and train_steps >= 1):  # 0: the config's
      raise ValueError(f"train_steps must be a positive integer or None. Received: {train_steps!r}.")  # (sweep 36)
    train_steps = train_steps or self.config.train_steps
    if train_steps > self.config.train_steps:  # the Python API's call (the tools pass the config's)
      log_fn(f"Warning: training to step {train_steps}, past the learning rate schedule's end at "
             f"TrainConfig.train_steps={self.config.train_steps}: the steps after it use its final learning rate "
             f"(learning_rate x min_lr_ratio = {self.config.learning_rate * self.config.min_lr_ratio:g}).")
    start = self.step
    if start >= train_steps:
      log_fn(f"Nothing to do: step {start} >= train_steps {train_steps}.")
      return {"step": start}
    if self.config.skip_bad_records and data_files:
      records.skip_unreadable_records(data_files, log_fn)
    micro_batches = self.config.gradient_accumulation_steps
    if micro_batches > 1:
      rows = self.bsz_per_replica // micro_batches
      log_fn(f"Gradient accumulation: each update sums {micro_batches} micro-batches of {rows} "
             f"row{'s' if rows > 1 else ''} per replica.")
    replicas, per_replica = self.strategy.num_replicas_in_sync, self.bsz_per_replica  # (not the micro-batch's rows)
    dist = self.strategy.distribute_datasets_from_function(
        lambda ctx: batches.checked(dataset_fn(ctx, start), per_replica))
    batches.check(dist.element_spec, self.config, replicas, per_replica)
    iterator = iter(dist)
    keep_freed_memory_after_input()  # building the iterator reset glibc's mmap threshold
    if self._loop_fn is None:
      self._loop_fn = self._build_loop()
    self._loop_steps = (start + 1, start + 1)
    nothing_saved = lambda: f"nothing was saved, the latest checkpoint is {self.checkpoints.latest()}"
    with self._stop, read_errors.records_named(data_files, lambda: f", then rerun; {nothing_saved()}"), \
        out_of_memory.reported(self._steps_in_flight, self._memory_fixes(),
                               lambda: f"; {nothing_saved()}"):
      try:
        return self._train_loops(iterator, start, train_steps, log_fn, metrics_fn)
      except tf.errors.OutOfRangeError as e:  # a dataset of the API's caller that ends (the tools' repeat)
        if "End of sequence" not in e.message:
          raise
        raise ValueError(f"The dataset ran out at step {self.step + 1}: dataset_fn's dataset must give a batch for "
                         f"every step up to train_steps {train_steps} (end it with .repeat()). The steps before it "
                         f"were applied; {nothing_saved()}.") from None
      except tf.errors.InvalidArgumentError as e:
        if not batches.is_rows_error(e):
          raise
        raise batches.rows_error(self.config, replicas, per_replica, when=self._steps_in_flight()) from None

  def _steps_in_flight(self):
    """The steps of the loop call that failed, as its error line names them ("at step 5", "in steps 5-8")."""
    first, last = self._loop_steps
    return f"at step {first}" if first == last else f"in steps {first}-{last}"

  def _memory_fixes(self):
    """The sentence of the out-of-memory line (`out_of_memory.reported`): the flags that make this run's step
    fit, those it does not use yet first."""
    run_config = self.model.run_config
    fixes = []
    more = out_of_memory.larger_accumulation(self.bsz_per_replica // self._row_groups,
                                             self.config.gradient_accumulation_steps)
    if more:
      fixes.append(f"--gradient_accumulation_steps={more} (the same updates from fewer rows at a time)")
    if not run_config.recompute_grad:
      fixes.append("--recompute_grad (each layer's activations computed again in the backward pass)")
    if not (run_config.use_bfloat16 or run_config.use_fp16):
      fixes.append(out_of_memory.HALF_PRECISION)
    if getattr(self.task, "is_language_model", False):
      fixes.append("a smaller --mem_len or records of a shorter --seq_len (data_utils.py)")
    else:
      fixes.append("a smaller --max_seq_length or --train_batch_size")
    listed = fixes[0] if len(fixes) == 1 else ", ".join(fixes[:-1]) + " or " + fixes[-1]
    return f"The step needs more memory than the device has: pass {listed}"

  def _train_loops(self, iterator, start, train_steps, log_fn, metrics_fn):
    last = {}
    self.progress.begin(start, train_steps, log_fn)
    if self.config.save_at_start and self.config.save_steps and self.checkpoints.latest_path is None:
      self._at_start = self.save()  # the start's: dropped if the run fails before its next save (`_drop_the_start`)
    try:
      while self.step < train_steps:
        step = self.step
        # To the next multiple of `iterations` (where every_loop zeroes the mems), save point or end.
        num_steps = min(self.config.iterations - step % self.config.iterations, train_steps - step)
        if self.config.save_steps:
          num_steps = min(num_steps, self.config.save_steps - step % self.config.save_steps)
        t0 = time.time()
        self._loop_steps = (step + 1, step + num_steps)
        loss, gnorm, lr, done = self._loop_fn(iterator, tf.constant(num_steps),
                                              tf.constant(step % self.config.iterations == 0))
        loss, gnorm, lr, done = float(loss), float(gnorm), float(lr), int(done)
        elapsed = time.time() - t0
        step = self.step
        if done == 0:  # stopped before this loop's first step
          self._stop_now(step, log_fn)
        preemption.check_finite(step, loss, gnorm, self.loss_scale, getattr(self.model, "run_config", None),
                                self._last_good)
        scaling = self.loss_scale.report() if self.loss_scale else {}
        self.progress.report(step, loss, gnorm, lr, done, elapsed, **scaling)
        last = dict(loss=loss, gnorm=gnorm, lr=lr, step=step)
        if metrics_fn:
          metrics_fn(last)
        if (self.config.save_steps and step % self.config.save_steps == 0) or step >= train_steps:
          self.save()
        if done < num_steps or self._stop.signum is not None:
          self._stop_now(step, log_fn)
    except Exception as e:  # but a stop, whose step was saved
      if not isinstance(e, preemption.Interrupted):
        self._drop_the_start()
      raise
    return last

  def _last_good(self):
    """The checkpoint a rerun of the failed run resumes from, the start's dropped first (`_drop_the_start`)."""
    self._drop_the_start()
    return self.checkpoints.latest()

  def _drop_the_start(self):
    """Drops the start's checkpoint and run files of a run failed before its next save (a rerun resumed it)."""
    if self._at_start and self.checkpoints.latest_path == self._at_start:
      self.checkpoints.discard(self._at_start)
      if callable(self._undo_run_files):
        self._undo_run_files()
    self._at_start = None

  def _build_loop(self):
    strategy = self.strategy
    variables = self.model.trainable_variables
    table_index = [v is self.model.transformer.word_embedding.lookup_table for v in variables].index(True)
    forward_backward = self._forward_backward
    if self.config.jit_compile:
      forward_backward = tf.function(forward_backward, jit_compile=True,  # per micro-batch with accumulation
                                     autograph=False)
    forward_backward = self._whole_batch(forward_backward)

    def replica_gradients(features):
      """This replica's loss and gradients (shares of the global batch's); the mems move on."""
      loss_sum, weight_sum, grads, rows, new_mems = forward_backward(features, self.mems.read())
      weight = self._loss_weight(weight_sum)
      grads, rows = self._share_gradients(grads, rows, weight)
      self.mems.assign(new_mems if self.loss_scale is None else self.loss_scale.finite_mems(new_mems))
      return loss_sum / tf.cast(weight, loss_sum.dtype), grads, rows

    def replica_apply(grads, rows):
      if rows is not None:
        rows = (table_index, *rows)
      gnorm, lr = optimization.apply_gradients(self.optimizer, grads, variables, self.config.clip,
                                               self.config.lr_layer_decay_rate, self.n_layer, self.clip_mode, rows)
      return gnorm, tf.cast(lr, tf.float32)

    def replica_step(features):
      loss, grads, rows = replica_gradients(features)
      return (loss, *replica_apply(grads, rows))

    def replica_gradients_checked(features):
      loss, grads, rows = replica_gradients(features)
      return loss, grads, rows, DynamicLossScale.finite(grads, rows)

    # Graph code as written: AutoGraph converts only the loop (converting model, optimizer, loss took half the tracing)
    @tf.autograph.experimental.do_not_convert
    def step(features):
      """One step from the cross-replica context -> (summed loss, gnorm, lr, applied: bool [])."""
      if self.loss_scale is not None:  # applied only if no replica's gradients overflowed
        return self.loss_scale.step(strategy, replica_gradients_checked, replica_apply, self.optimizer.iterations,
                                    lambda: self.optimizer.learning_rate, features)
      loss, gnorm, lr = strategy.run(replica_step, args=(features,))
      return (strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
              strategy.reduce(tf.distribute.ReduceOp.MEAN, gnorm, axis=None),
              strategy.reduce(tf.distribute.ReduceOp.MEAN, lr, axis=None), tf.constant(True))

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
    def train_loop(iterator, num_steps, at_loop_start):
      """num_steps steps (fewer on a stop); at_loop_start: the first is a multiple of `iterations`."""
      if self.config.mems_reset == "every_loop" and self.mems.variables:
        strategy.run(self.mems.reset, args=(at_loop_start,))
      loss_total = tf.constant(0.0)
      gnorm = lr = tf.constant(0.0)
      done = applied = tf.constant(0)
      for _ in tf.range(num_steps):
        if stop_requested():
          break
        loss, gnorm_step, lr, step_applied = step(next(iterator))
        loss_total += tf.where(step_applied, loss, 0.0)  # a skipped step (float16 overflow) is left out
        gnorm = tf.where(step_applied, gnorm_step, gnorm)
        applied += tf.cast(step_applied, tf.int32)
        done += 1
      loss = tf.where(applied > 0, loss_total / tf.cast(tf.maximum(applied, 1), tf.float32), float("nan"))
      return loss, tf.where(applied > 0, gnorm, float("nan")), lr, done

    return train_loop

  # -- the step on one replica ---------------------------------------------------------------------------------
  def _whole_batch(self, forward_backward):
    """`forward_backward` (`_forward_backward` or its compiled form) over the replica's whole batch: itself, or
    with gradient accumulation the sums over the micro-batches (`accumulation.accumulate`)."""
    if self.config.gradient_accumulation_steps == 1:
      return forward_backward
    return lambda features, mems: accumulation.accumulate(forward_backward, features, mems,
                                                          self.config.gradient_accumulation_steps, self._row_groups)

  def _forward_backward(self, features, mems):
    """This replica's loss and gradients (no cross-replica communication, so it can be XLA-compiled).

    The gradients (with loss scaling: unscaled again, float32) are those of this replica's share of the loss
    (`loss_sum` / `_loss_weight`), as the original differentiates its mean loss, except with loss_weighting
    "global_mean", whose weight needs the other replicas, and with gradient accumulation, whose weight needs the
    other micro-batches: there they are those of `loss_sum`, and `_share_gradients` divides them once.

    Returns:
      (loss_sum, weight_sum, grads: one per trainable variable, rows: None, or with a clip_mode of `ROW_CLIP_MODES`
      (gradient of each gathered word-embedding row, the gathered ids), new_mems).
    """
    embedding = self.model.transformer.word_embedding
    divisor = None
    with tf.GradientTape() as tape:
      loss_sum, weight_sum, new_mems = self.task(self.model, features, mems, training=True)
      objective = loss_sum
      if not self._divide_after:
        objective = loss_sum / tf.cast(self._loss_weight(weight_sum), loss_sum.dtype)
      if self.loss_scale is not None:
        if self._divide_after:  # a sum, scaled as the whole step's mean (all micro-batches and replicas): as a
          # micro-batch's, its rows' float16 gradients were N times larger, more steps skipped (faith 21, B1)
          whole = self.config.gradient_accumulation_steps * tf.distribute.get_replica_context().num_replicas_in_sync
          divisor = _power_of_two_at_least(tf.cast(weight_sum, tf.float32) * whole)  # divided, multiplied back
          objective = objective / divisor
        objective = self.loss_scale.scale_objective(objective)
    targets = list(self.model.trainable_variables)
    if self.clip_mode in optimization.ROW_CLIP_MODES:
      ids, rows = embedding.last_lookup
      targets.append(rows)
    grads = tape.gradient(objective, targets)
    rows = (grads.pop(), ids) if self.clip_mode in optimization.ROW_CLIP_MODES else None
    if self.loss_scale is not None:
      grads, rows = self.loss_scale.unscale(grads, rows, times=divisor)
    return loss_sum, weight_sum, grads, rows, new_mems

  def _loss_weight(self, weight_sum):
    """What divides this replica's loss_sum so that the replicas' shares sum to the global-batch loss."""
    context = tf.distribute.get_replica_context()
    weight = tf.stop_gradient(tf.cast(weight_sum, tf.float32))
    if self.config.loss_weighting == "global_mean":
      weight = context.all_reduce(tf.distribute.ReduceOp.SUM, weight)
    else:
      weight = weight * context.num_replicas_in_sync
    return tf.maximum(weight, 1e-12)

  def _share_gradients(self, grads, rows, weight):
    """grads and rows of `_forward_backward` -> the gradients of this replica's share of the loss (weight: from
    `_loss_weight`)."""
    if not self._divide_after:
      return grads, rows
    grads = [None if g is None else tf.convert_to_tensor(g) / tf.cast(weight, g.dtype) for g in grads]
    return grads, None if rows is None else (rows[0] / tf.cast(weight, rows[0].dtype), rows[1])

  # -- checks and tools ----------------------------------------------------------------------------------------
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

      forward_backward = self._whole_batch(self._forward_backward)

      def replica(features):
        loss_sum, weight_sum, grads, _, _ = forward_backward(features, self.mems.read())
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

  # -- stopping and saving -------------------------------------------------------------------------------------
  def _stop_now(self, step, log_fn):
    """Saves the current step (if not saved yet) and raises `preemption.Interrupted`."""
    signum = self._stop.signum or signal.SIGTERM
    name = preemption.stop_name(signum)
    latest = self.checkpoints.latest_path
    path = latest if latest and latest.endswith(f"-{step}") else self.save()
    log_fn(f"Stopped by {name} after step {step}; checkpoint {path}.")
    raise preemption.stopped(signum, step, path)

  def save(self):
    """Writes a checkpoint of the current step (weights, optimizer, mems, RNG state; `RunCheckpoint.save`);
    returns its path. Before the first, `before_first_save()` (the run files), whose result, where callable, undoes
    it if that save fails: a resume whose save failed left flags of steps never saved beside the checkpoints."""
    before, self.before_first_save = self.before_first_save, None
    undo = before() if before is not None else None
    self.mems.gather()
    try:
      path = self.checkpoints.save(self.step)
      self._undo_run_files = undo if before is not None else self._undo_run_files
      return path
    except BaseException:
      if callable(undo):
        self.before_first_save = before  # again before the next save
        with contextlib.suppress(Exception):  # as much as can be put back (a full disk): the save's error is the line
          undo()
      raise


def _power_of_two_at_least(weight):
  """float32 []: a power of two of about `weight` (at least it, and 1): dividing by it and multiplying back is exact."""
  return tf.pow(2.0, tf.math.ceil(tf.math.log(tf.maximum(tf.cast(weight, tf.float32), 1.0)) / math.log(2.0)))
