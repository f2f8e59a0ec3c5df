"""A `Trainer.train` dataset's per-replica batches against the rows TrainConfig gives each replica: from the
dataset's element_spec where its batch size is known (before the first step), else as each batch is read (`checked`:
a dataset batched without drop_remainder ends in a short batch, which trained silently on fewer rows, or, with
mems, failed deep in the model). The original's input functions all drop the remainder."""

import tensorflow as tf

_MARK = "xlnet-tf: a per-replica batch of other rows than TrainConfig gives"  # in the run-time check's error


def _specs(element_spec):
  """The TensorSpecs of rank 1 or more of a dataset's element (several replicas: a PerReplicaSpec of each one's)."""
  parts = [part for spec in tf.nest.flatten(element_spec)
           for part in (tf.nest.flatten(spec, expand_composites=True) if type(spec).__name__ == "PerReplicaSpec"
                        else [spec])]
  return [spec for spec in parts if isinstance(spec, tf.TensorSpec) and spec.shape.rank]


def checked(dataset, rows):
  """`dataset`, whose batches, where their size is unknown, are checked to have `rows` rows as they are read (an
  error that `is_rows_error` tells), and then have that size in their shape."""
  if all(spec.shape[0] is not None for spec in _specs(dataset.element_spec)):
    return dataset

  def check(*element):
    batched = lambda t: isinstance(t, tf.Tensor) and t.shape.rank
    asserts = [tf.debugging.assert_equal(tf.shape(t)[0], rows, message=_MARK)
               for t in tf.nest.flatten(element) if batched(t) and t.shape[0] is None]
    with tf.control_dependencies(asserts):
      element = tf.nest.map_structure(lambda t: tf.ensure_shape(tf.identity(t), [rows, *t.shape[1:]])
                                      if batched(t) else t, element)
    return element if len(element) > 1 else element[0]

  return dataset.map(check)


def is_rows_error(error):
  return isinstance(error, tf.errors.InvalidArgumentError) and _MARK in str(error)


def rows_error(config, replicas, rows, sizes=None, when=None):
  """The ValueError of batches of other `sizes` than `rows` (known from the element_spec), or of one read `when`."""
  found = (f"have {', '.join(map(str, sorted(sizes)))} rows per replica" if sizes else f"have other rows per "
           f"replica than {rows} ({when}: batched without drop_remainder=True, or by another size?)")
  return ValueError(f"dataset_fn's batches {found}, where TrainConfig.global_batch_size={config.global_batch_size} "
                    f"over {replicas} replica(s) means {rows}. Batch the dataset by "
                    "input_context.get_per_replica_batch_size(global_batch_size)" +
                    (", with drop_remainder=True." if when else "."))


def check(element_spec, config, replicas, rows):
  """`rows_error` where the per-replica batches' size, where known, is not `rows`; a ValueError where they are not a
  dict of features or their token ids are not integers (a tuple, float ids: autograph's or Keras' words, sweep 36)."""
  if not isinstance(element_spec, dict):
    raise ValueError(f"dataset_fn's batches must be dicts of features by name ({{'input_ids': ..., ...}}, as the "
                     f"tasks read them). Received: {type(element_spec).__name__} elements.")
  for name in ("input_ids", "input_k"):  # the fine-tuning batches' ids; the pretraining batches'
    dtypes = {spec.dtype for spec in _specs(element_spec.get(name, ()))}
    if any(not dtype.is_integer for dtype in dtypes):
      raise ValueError(f"dataset_fn's batches hold {name} of {dtypes.pop().name}: token ids are integers.")
  sizes = {spec.shape[0] for spec in _specs(element_spec) if spec.shape[0] is not None}
  if sizes and sizes != {rows}:
    raise rows_error(config, replicas, rows, sizes)
