"""One optimizer step of the original `model_utils.get_train_op`: `create_optimizer` and `apply_gradients`.

One training step of the original does, in this order:
  1. lr = warm-up (`lr * step / warmup_steps` while step < warmup_steps), then `poly` or `cos` decay, where
     `step` is the global step BEFORE this step's increment (so the first step uses lr(0), 0 with warm-up);
  2. gradients of the loss, averaged over towers/cores (here: summed over replicas, see `apply_gradients`);
  3. `clip_by_global_norm(grads, clip)`; the reported `gnorm` is the norm BEFORE clipping (on TPU, and in the
     fine-tuning scripts under MirroredStrategy, each core or replica clips its own gradient before the sum of 2:
     `clip_mode` per_core / per_replica);
  4. if `lr_layer_decay_rate != 1`: the CLIPPED gradient of every variable under `transformer/layer_{l}/` is
     multiplied by `lr_layer_decay_rate ** (n_layer - 1 - l)`; embeddings, `r_*_bias`, `seg_embed`, `mask_emb`
     and the heads are not scaled;
  5. `weight_decay == 0`: TF1 `AdamOptimizer` (bias-corrected, "epsilon hat"); `weight_decay > 0`: the original
     `AdamWeightDecayOptimizer` (no bias correction, decoupled decay, `r_*_bias` decayed, LayerNorm and other
     biases not); the step counter advances by exactly 1 in both cases.

Use `create_optimizer` for the optimizer and `apply_gradients` for steps 2-5. The pieces: the schedule
(`schedule.py`, step 1), the optimizers (`adam.py`, step 5), clipping and layer scaling (`clipping.py`, steps 3
and 4), the optimizer state under TF1 names (`slot_names.py`).
"""

import tensorflow as tf

from xlnet_tf.training.adam import _CALLER_SUMMED, _SummedGradientsMixin, AdamWeightDecay, XLNetAdam
from xlnet_tf.training.clipping import clip_and_scale_gradients, embedding_rows_square_norm
from xlnet_tf.training.schedule import lr_schedule


def create_optimizer(learning_rate, train_steps, warmup_steps=0, decay_method="poly", min_lr_ratio=0.0,
                     weight_decay=0.0, adam_epsilon=1e-8):
  """The original optimizer with the original schedule. Under a strategy, call it inside `strategy.scope()`
  and `optimizer.build(model.trainable_variables)` there before the first `strategy.run`.

  Args:
    learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio: as `lr_schedule`.
    weight_decay: 0 = TF1 Adam (the default of every original script); > 0 = AdamWeightDecay (--weight_decay).
    adam_epsilon: epsilon of either optimizer (--adam_epsilon).

  Returns:
    An `XLNetAdam` or `AdamWeightDecay`, to be stepped with `apply_gradients`.
  """
  schedule = check_optimizer_args(learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio, weight_decay)
  if weight_decay == 0:
    return XLNetAdam(learning_rate=schedule, beta_1=0.9, beta_2=0.999, epsilon=adam_epsilon)
  return AdamWeightDecay(schedule, weight_decay_rate=weight_decay, beta_1=0.9, beta_2=0.999, epsilon=adam_epsilon)


def check_optimizer_args(learning_rate, train_steps, warmup_steps=0, decay_method="poly", min_lr_ratio=0.0,
                         weight_decay=0.0, adam_epsilon=None):
  """The schedule of `create_optimizer`'s arguments (`lr_schedule`, which checks its own), a ValueError naming the
  flag where one cannot be used; `TrainConfig` calls it before a run reads or writes data (a --learning_rate=-0.1
  was refused only after the training records were written: sweep 23, C6)."""
  del adam_epsilon  # TrainConfig's own check
  schedule = lr_schedule(learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio)
  if not weight_decay >= 0:
    raise ValueError(f"weight_decay must be >= 0 (--weight_decay). Received: {weight_decay}.")
  return schedule


CLIP_MODES = ("indexed_slices", "dense", "per_core", "per_replica")


def default_clip_mode(strategy, fine_tuning=False):
  """The original's clipping on this strategy: per core on TPU (CrossShardOptimizer); elsewhere IndexedSlices rows,
  of the towers' averaged gradient in pretraining (`train_gpu.py`), of each replica's own gradient in fine-tuning
  (the Estimator scripts: their `model_fn`, and so `get_train_op`'s clip, runs once per MirroredStrategy replica)."""
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return "per_core"
  return "per_replica" if fine_tuning else "indexed_slices"


def _sum_over_replicas(context, values):
  """All-reduces the non-None entries of `values` (SUM) when there is more than one replica."""
  if context.num_replicas_in_sync == 1:
    return list(values)
  values = list(values)
  present = [i for i, v in enumerate(values) if v is not None]
  summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [values[i] for i in present])
  for i, value in zip(present, summed):
    values[i] = value
  return values


ROW_CLIP_MODES = ("indexed_slices", "per_replica")  # the modes that count the word-embedding gradient as rows


def _norm_with_rows(grads, index, table_square):
  """The global norm of `grads` with the word-embedding table's (grads[index]) squared norm taken as table_square."""
  squares = [table_square] + [tf.reduce_sum(tf.square(tf.cast(g, tf.float32)))
                              for i, g in enumerate(grads) if g is not None and i != index]
  return tf.sqrt(tf.add_n(squares))


def apply_gradients(optimizer, grads, variables, clip, lr_layer_decay_rate=1.0, n_layer=None, clip_mode="dense",
                    embedding_rows=None):
  """One optimizer step of the original, the same on one device and inside `strategy.run`.

  The gradients are summed across replicas exactly once (here, not again inside Keras), clipped, layer-scaled,
  then applied. For the sum to be the gradient of the global-batch loss, each replica's loss must be its share of
  it (the original: each tower's/core's mean loss divided by the number of towers/cores). How the global norm is
  taken and where the clip applies follows the original's path (`clip_mode`):
    "indexed_slices": the original on GPU/CPU (`train_gpu.py`, one-GPU `run_classifier.py`): towers are averaged,
      then clipped by a global norm in which the word-embedding gradient counts as its un-merged IndexedSlices
      rows (`embedding_rows_square_norm`; each replica's rows separately). Needs `embedding_rows`.
    "dense": the same, with every gradient merged to dense first (the original's `use_tpu` embedding math on the
      GPU optimizer; what most ports do).
    "per_core": the original on TPU (`CrossShardOptimizer`): each replica clips its OWN gradient by its own norm,
      then the clipped gradients are summed; the reported gnorm is the mean of the replicas' norms (the TPU host
      call's `reduce_mean`). On one replica it equals "dense".
    "per_replica": the original's fine-tuning scripts on GPUs (`run_classifier.py`, `run_squad.py`, `run_race.py`
      under the Estimator's MirroredStrategy, whose `model_fn` runs per replica): as "per_core", with each
      replica's norm taken as "indexed_slices" takes it (its word-embedding gradient as its gathered rows). Needs
      `embedding_rows`. On one replica it equals "indexed_slices".

  Args:
    optimizer: from `create_optimizer`; under a strategy, created and built in `strategy.scope()`.
    grads: list of float Tensor / tf.IndexedSlices, one per variable and shaped like it: this replica's gradient.
      None = no gradient for that variable. IndexedSlices are made dense (the original's Adam updates every row,
      which equals the dense update).
    variables: the trainable variables, in the order of `grads`.
    clip, lr_layer_decay_rate, n_layer: as `clip_and_scale_gradients`.
    clip_mode: one of CLIP_MODES (--clip_mode).
    embedding_rows: with "indexed_slices": (index of the word-embedding table in `variables`, this replica's
      gradient of the gathered rows [..., D], the gathered ids [...]), as `embedding_rows_square_norm` takes them.

  Returns:
    (gnorm: float32 [] pre-clip global norm, learning_rate: float32 [] lr of this step).
  """
  if not isinstance(optimizer, _SummedGradientsMixin):
    raise TypeError(f"apply_gradients needs an optimizer from xlnet_tf.training.optimization.create_optimizer. "
                    f"Received: {type(optimizer).__name__}.")
  if clip_mode not in CLIP_MODES:
    raise ValueError(f"--clip_mode must be one of {CLIP_MODES}. Received: {clip_mode!r}.")
  if clip_mode in ROW_CLIP_MODES and embedding_rows is None:
    raise ValueError(f"clip_mode={clip_mode!r} needs embedding_rows (the gradient of the gathered embedding rows).")
  context = tf.distribute.get_replica_context()
  if context is None:
    raise RuntimeError("apply_gradients must run in a replica context: call it inside strategy.run(...).")
  if context.num_replicas_in_sync > 1 and not optimizer.built:
    raise RuntimeError("Under a distribution strategy the optimizer must be built before the first step: call "
                       "optimizer.build(model.trainable_variables) inside strategy.scope().")
  grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
  learning_rate = optimizer.learning_rate  # lr(iterations) before this step's increment: the lr the update uses.
  if clip_mode in ("per_core", "per_replica"):
    use_norm = None
    if clip_mode == "per_replica":
      index, rows_grad, ids = embedding_rows
      use_norm = _norm_with_rows(grads, index, embedding_rows_square_norm(grads[index], rows_grad, ids))
    clipped, gnorm = clip_and_scale_gradients(grads, variables, clip, lr_layer_decay_rate, n_layer, use_norm)
    clipped = _sum_over_replicas(context, clipped)
    gnorm = _sum_over_replicas(context, [gnorm])[0] / context.num_replicas_in_sync
  else:
    use_norm = None
    if clip_mode == "indexed_slices":
      index, rows_grad, ids = embedding_rows
      table_square = embedding_rows_square_norm(grads[index], rows_grad, ids)
      *grads, table_square = _sum_over_replicas(context, grads + [table_square])
      use_norm = _norm_with_rows(grads, index, table_square)
    else:
      grads = _sum_over_replicas(context, grads)
    clipped, gnorm = clip_and_scale_gradients(grads, variables, clip, lr_layer_decay_rate, n_layer, use_norm)
  _CALLER_SUMMED.active = True
  # The step count moves after the gradients exist: its increment reads no gradient, and it ran where an op of the
  # step failed (a token id beyond the vocabulary), so a Trainer used again went on one step ahead.
  deps = [g for g in clipped if g is not None]
  try:  # variables without a gradient (e.g. lm_loss/bias when fine-tuning) are left out, as TF1's Adam did
    with tf.control_dependencies(deps):
      optimizer.apply_gradients([(g, v) for g, v in zip(clipped, variables) if g is not None])
  finally:
    _CALLER_SUMMED.active = False
  return gnorm, learning_rate
