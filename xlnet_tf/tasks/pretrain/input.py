"""Pretraining input pipeline: records of the original `data_utils.py` -> permutation-LM batches.

The TF2 counterpart of the original `get_input_fn` -> `get_dataset` -> `parser` -> `_local_perm`. It reads
records written by the original `data_utils.py` (or ours) unchanged and gives exactly the original's features.

Typical use::

  spec = PretrainDataSpec(bsz_per_host=32, seq_len=512, reuse_len=256, bi_data=True, mask_alpha=6, mask_beta=1,
                          uncased=True, num_predict=85)
  input_fn, record_info = get_input_fn("proc_data/tfrecords", "train", spec, perm_size=256, seed=1,
                                       start_step=step)
  dist_ds = strategy.distribute_datasets_from_function(input_fn)   # distributed: input_fn(input_context)
  ds = input_fn()                                                  # one device: [bsz_per_host, ...] per step

Each element is a dict, batch-major like the original input_fn (the trainer transposes to time-major):

  input_k         int32 [b, seq_len]             token ids (content stream).
  seg_id          int32 [b, seq_len]             0 = reuse prefix and A (and its SEP), 1 = B (and its SEP), 2 = CLS.
  input_q         float [b, seq_len]             1 = prediction target (query stream input), 0 = not.
  perm_mask       float [b, seq_len, seq_len]    1 = position i may NOT attend to j; 0 = may attend.
  target_mapping  float [b, num_predict, seq_len] one-hot target positions, then zero rows of padding. Only when
                                                 num_predict is not None.
  target          int32 [b, num_predict]         the target token ids (== input_k at their positions), 0 padding.
                                                 [b, seq_len] when num_predict is None.
  target_mask     float [b, num_predict]         1 = real target, 0 = padding. [b, seq_len] when num_predict is None.
  label           int32 [b, 1]                   1 if B continues A; unused by the pretraining loss.
"float" is float32, or bfloat16 with use_bfloat16. All shapes are static (`drop_remainder=True`).

Row layout and sharding. The records hold, step after step, `bsz_per_host` rows in row order; record t+1 of a
row continues record t, which is what the memory (`mems`) relies on. So there is no sample-level shuffle, and
every replica must always receive the same rows. Per-replica batch b = global_batch_size / num_replicas_in_sync:
  * `global_batch_size == bsz_per_host` (default; one host, or several workers sharing one set of files): every
    input pipeline reads all files and keeps only its rows; replica c (global id, pipeline-major) receives rows
    [c*b, (c+1)*b) of every step, in step order.
  * `global_batch_size == bsz_per_host * num_input_pipelines` (the original multi-host setup, PER_HOST_V2): each
    pipeline reads a contiguous slice of the record files (the last one takes the remainder; needs at least as
    many files as pipelines) and local replica l of pipeline p receives rows [l*b, (l+1)*b) of its steps, i.e.
    global rows [c*b, (c+1)*b) of the concatenation of the pipelines' steps.
A pipeline yields per-replica batches in row order: consecutive elements go to consecutive local replicas, as
`distribute_datasets_from_function` assigns them. Without an InputContext, `input_fn(batch_size=k)` yields
consecutive k-row chunks of each step (the original per-core batches); k defaults to bsz_per_host.
With `bi_data`, each replica's rows must be one writer core's [forward | backward] rows: b must equal the
`bsz_per_host // num_core_per_host` of the writer (checked against `corpus_info.json` when it is found).

Randomness. The masked positions are fixed in the records; the factorisation order is sampled while parsing.
Without `seed` it is random (like the original, new orders every epoch). With `seed`, the order of a record is a
stateless function of (seed, the record's position in its pipeline's stream, counted across epochs), so a run
restarted with `start_step=k` gets exactly the batches of steps k, k+1, ... of an uninterrupted run. In the
shared-files mode the position is the global one, so the batches do not depend on the number of pipelines.

Deviation from the original: the `num_passes` option is not offered, because the original's filter never skips
a file (it reads every record_info file that matches), which is what this module does.
"""

import random

import numpy as np
import tensorflow as tf

from xlnet_tf.data.record_files import find_record_info, read_corpus_info
from xlnet_tf.data.records import has_read_limits, record_dataset
from xlnet_tf.data.tokenization import CLS_ID, SEP_ID


FEATURE_KEYS = ("input", "is_masked", "target", "seg_id", "label")


def validate_lengths(seq_len, reuse_len, perm_size, num_predict=None):
  """Checks the length settings the parser can satisfy; raises a one-line ValueError naming the flag."""
  for name, value in (("seq_len", seq_len), ("reuse_len", reuse_len), ("perm_size", perm_size)):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
      raise ValueError(f"--{name} must be a positive integer. Received: {name}={value!r}.")
  if reuse_len >= seq_len:
    raise ValueError(f"--reuse_len must be smaller than --seq_len (both halves are permuted separately). "
                     f"Received: reuse_len={reuse_len}, seq_len={seq_len}. Use the values of data_utils.py "
                     "(usually reuse_len = seq_len / 2).")
  non_reuse_len = seq_len - reuse_len
  if reuse_len % perm_size or non_reuse_len % perm_size:
    raise ValueError(f"--perm_size must divide both reuse_len and seq_len - reuse_len. Received: perm_size="
                     f"{perm_size}, reuse_len={reuse_len}, seq_len - reuse_len={non_reuse_len}. Use e.g. "
                     f"--perm_size={int(np.gcd(reuse_len, non_reuse_len))}.")
  if num_predict is not None and (not isinstance(num_predict, (int, np.integer)) or isinstance(num_predict, bool)
                                  or not 0 < num_predict <= seq_len):
    raise ValueError(f"--num_predict must be None or an integer in [1, seq_len={seq_len}]. Received: "
                     f"num_predict={num_predict!r}. Use the value data_utils.py was run with.")


def sample_block_perm(perm_size, seed=None):
  """Samples the local factorisation order shared by every block of `perm_size` positions.

  Args:
    perm_size: int, block length.
    seed: int [2] or None. Stateless seed; None: stateful random (a new order at every call/record).

  Returns:
    int64 [perm_size], perm[i] = the rank of block position i in the factorisation order.
  """
  rng = tf.range(perm_size, dtype=tf.int64)
  if seed is None:
    return tf.random.shuffle(rng)
  return tf.random.experimental.stateless_shuffle(rng, seed=seed)


def local_perm(inputs, targets, is_masked, perm_size, seq_len, seed=None, perm=None):
  """The original `_local_perm`: a factorisation order and its attention mask for one segment.

  Position `blk*perm_size + i` gets rank `blk*perm_size + perm[i]`: the same local permutation in every block,
  and later blocks always come later. Unmasked tokens get rank -1 (everyone sees them, they see no masked or
  functional token); targets (masked, not SEP/CLS) see masked/functional tokens of strictly smaller rank; SEP/CLS
  see those of rank <= theirs, themselves included.

  Args:
    inputs: int64 [seq_len], token ids.
    targets: int64 [seq_len], the stored next-token targets.
    is_masked: bool [seq_len], True = selected for prediction at preprocessing.
    perm_size: int, block length of the permutation; must divide seq_len.
    seq_len: int, length of this segment.
    seed: int [2] or None, stateless seed of the permutation; None: stateful random. Ignored if `perm` is given.
    perm: int [perm_size] or None, the local order to use (perm[i] = rank of block position i); None: sample it.

  Returns:
    perm_mask: float32 [seq_len, seq_len]. 1 = i may NOT attend to j; 0 = may attend.
    new_targets: int64 [seq_len], current-token targets (`[inputs[0]] + targets[:-1]`, == inputs at targets).
    target_mask: float32 [seq_len], 1 = target (masked and not SEP/CLS).
    inputs_k: int64 [seq_len], = inputs.
    inputs_q: float32 [seq_len], = target_mask.
  """
  if perm is None:
    perm = sample_block_perm(perm_size, seed)
  perm = tf.cast(perm, tf.int64)
  offsets = tf.range(0, seq_len, perm_size, dtype=tf.int64)
  index = tf.reshape(offsets[:, None] + perm[None, :], [seq_len])

  non_func = tf.logical_not(tf.logical_or(tf.equal(inputs, SEP_ID), tf.equal(inputs, CLS_ID)))
  non_mask = tf.logical_and(tf.logical_not(is_masked), non_func)
  masked_or_func = tf.logical_not(non_mask)
  rev_index = tf.where(non_mask, tf.constant(-1, tf.int64), index)
  target_tokens = tf.logical_and(masked_or_func, non_func)
  target_mask = tf.cast(target_tokens, tf.float32)
  self_rev_index = tf.where(target_tokens, rev_index, rev_index + 1)
  perm_mask = tf.logical_and(self_rev_index[:, None] <= rev_index[None, :], masked_or_func[None, :])
  perm_mask = tf.cast(perm_mask, tf.float32)
  new_targets = tf.concat([inputs[0:1], targets[:-1]], axis=0)
  return perm_mask, new_targets, target_mask, inputs, target_mask


def parse_record(serialized, seq_len, reuse_len, perm_size, num_predict=None, use_bfloat16=False, seed=None):
  """The original `parser` + `_convert_example`: one serialized record -> one example dict (unbatched).

  Args:
    serialized: string scalar, a tf.train.Example with int64 features input/is_masked/target/seg_id [seq_len]
      and label [1].
    seq_len, reuse_len, perm_size, num_predict: as `get_input_fn` (which validates them; see `validate_lengths`).
    use_bfloat16: bool, cast the float features to bfloat16.
    seed: int64 [2] or None, stateless seed of this record's permutations; None: stateful random.

  Returns:
    dict of seg_id, label, [target_mapping], target, target_mask, perm_mask, input_k, input_q (module docstring
    shapes without the batch dimension).
  """
  spec = {"input": tf.io.FixedLenFeature([seq_len], tf.int64),
          "target": tf.io.FixedLenFeature([seq_len], tf.int64),
          "seg_id": tf.io.FixedLenFeature([seq_len], tf.int64),
          "label": tf.io.FixedLenFeature([1], tf.int64),
          "is_masked": tf.io.FixedLenFeature([seq_len], tf.int64)}
  example = tf.io.parse_single_example(serialized, spec)
  inputs = example.pop("input")
  target = example.pop("target")
  is_masked = tf.cast(example.pop("is_masked"), tf.bool)
  non_reuse_len = seq_len - reuse_len
  seeds = (None, None) if seed is None else (tf.random.experimental.stateless_fold_in(seed, 0),
                                              tf.random.experimental.stateless_fold_in(seed, 1))

  pm_0, tgt_0, tm_0, k_0, q_0 = local_perm(inputs[:reuse_len], target[:reuse_len], is_masked[:reuse_len],
                                           perm_size, reuse_len, seed=seeds[0])
  pm_1, tgt_1, tm_1, k_1, q_1 = local_perm(inputs[reuse_len:], target[reuse_len:], is_masked[reuse_len:],
                                           perm_size, non_reuse_len, seed=seeds[1])
  # The reuse part never sees the second part; the second part sees all of the reuse part.
  perm_mask = tf.concat([tf.concat([pm_0, tf.ones([reuse_len, non_reuse_len])], axis=1),
                         tf.concat([tf.zeros([non_reuse_len, reuse_len]), pm_1], axis=1)], axis=0)
  target = tf.concat([tgt_0, tgt_1], axis=0)
  target_mask = tf.concat([tm_0, tm_1], axis=0)
  input_k = tf.concat([k_0, k_1], axis=0)
  input_q = tf.concat([q_0, q_1], axis=0)

  if num_predict is not None:
    is_target = tf.cast(target_mask, tf.bool)
    indices = tf.boolean_mask(tf.range(seq_len, dtype=tf.int64), is_target)
    actual = tf.shape(indices)[0]
    check = tf.debugging.assert_less_equal(
        actual, num_predict, message=f"A record has more targets than num_predict={num_predict}: pass the "
        "--num_predict data_utils.py was run with.")
    with tf.control_dependencies([check]):
      pad_len = num_predict - actual
    target_mapping = tf.concat([tf.one_hot(indices, seq_len, dtype=tf.float32), tf.zeros([pad_len, seq_len])], 0)
    example["target_mapping"] = tf.reshape(target_mapping, [num_predict, seq_len])
    target = tf.concat([tf.boolean_mask(target, is_target), tf.zeros([pad_len], tf.int64)], axis=0)
    example["target"] = tf.reshape(target, [num_predict])
    target_mask = tf.concat([tf.ones([actual]), tf.zeros([pad_len])], axis=0)
    example["target_mask"] = tf.reshape(target_mask, [num_predict])
  else:
    example["target"] = tf.reshape(target, [seq_len])
    example["target_mask"] = tf.reshape(target_mask, [seq_len])
  example["perm_mask"] = tf.reshape(perm_mask, [seq_len, seq_len])
  example["input_k"] = tf.reshape(input_k, [seq_len])
  example["input_q"] = tf.reshape(input_q, [seq_len])

  for key, val in example.items():
    if val.dtype == tf.int64:
      example[key] = tf.cast(val, tf.int32)
    elif use_bfloat16 and val.dtype == tf.float32:
      example[key] = tf.cast(val, tf.bfloat16)
  return example


def _record_stream(file_names, file_num_batch, bsz_per_host, first_pos, cache):
  """Raw records repeated forever, starting at stream position `first_pos` (records, counted across epochs)."""
  full = record_dataset(file_names)
  if cache:
    full = full.cache()  # raw serialized records in memory, as the original
  counts = None
  if file_num_batch is not None and all(n is not None for n in file_num_batch) and not has_read_limits():
    counts = [n * bsz_per_host for n in file_num_batch]
  if first_pos == 0:
    return full.repeat()
  if counts is None:  # per-file sizes unknown: skip record by record (cheap, nothing is parsed)
    return full.repeat().skip(first_pos)
  offset = first_pos % sum(counts)
  file_idx = 0
  while offset >= counts[file_idx]:
    offset -= counts[file_idx]
    file_idx += 1
  head = record_dataset(file_names[file_idx:]).skip(offset)  # the rest of the current epoch
  return head.concatenate(full.repeat())


def get_dataset(file_names, spec, perm_size, batch_size, row_begin=0, row_end=None, use_bfloat16=False, seed=None,
                seed_shard=0, start_step=0, file_num_batch=None, cache=True, shuffle_files=True):
  """One input pipeline: record files -> parsed batches of `batch_size` rows (the original `get_dataset`).

  The files are read as one stream of steps of `bsz_per_host` rows; rows [row_begin, row_end) of every step are
  kept, parsed and batched by `batch_size` in row order (so consecutive batches are consecutive row chunks).

  Args:
    file_names: list of str, record files (each holds whole steps).
    spec: `PretrainDataSpec` of the records (its bsz_per_host rows per step, seq_len, reuse_len, num_predict).
    perm_size, use_bfloat16: as `get_input_fn`.
    batch_size: int, rows per yielded batch; must divide row_end - row_begin.
    row_begin, row_end: int, the rows of each step this pipeline keeps; row_end None = bsz_per_host.
    seed: int or None, see the module docstring; also fixes the file order.
    seed_shard: int, folded into the per-record seed (distinguishes pipelines that read different files).
    start_step: int, first step to yield (steps of bsz_per_host records of this pipeline's stream).
    file_num_batch: list of int/None per file (steps per file) or None; lets `start_step` skip whole files.
    cache: bool, keep the raw serialized records in memory after the first epoch (as the original).
    shuffle_files: bool, read the files in a random order (seeded by `seed`), fixed for the whole run.

  Returns:
    tf.data.Dataset of dicts (module docstring), batch-major, repeated forever.
  """
  validate_lengths(spec.seq_len, spec.reuse_len, perm_size, spec.num_predict)
  return _dataset(file_names, spec, perm_size, batch_size, row_begin, row_end, use_bfloat16, seed, seed_shard,
                  start_step, file_num_batch, cache, shuffle_files)


def _dataset(file_names, spec, perm_size, batch_size, row_begin, row_end, use_bfloat16, seed, seed_shard,
             start_step, file_num_batch, cache, shuffle_files):
  """`get_dataset` on validated lengths."""
  bsz_per_host, seq_len, reuse_len, num_predict = spec.bsz_per_host, spec.seq_len, spec.reuse_len, spec.num_predict
  row_end = bsz_per_host if row_end is None else row_end
  if not 0 <= row_begin < row_end <= bsz_per_host:
    raise ValueError(f"Rows [{row_begin}, {row_end}) must lie within a step of bsz_per_host={bsz_per_host} rows.")
  if batch_size <= 0 or (row_end - row_begin) % batch_size:
    raise ValueError(f"The batch size must divide the {row_end - row_begin} rows this pipeline reads per step. "
                     f"Received: batch_size={batch_size}, bsz_per_host={bsz_per_host}.")
  if not isinstance(start_step, (int, np.integer)) or start_step < 0:
    raise ValueError(f"start_step must be a non-negative integer. Received: {start_step!r}.")
  if not file_names:
    raise ValueError("get_dataset needs at least one record file; received none. Check --record_info_dir.")
  file_names = list(file_names)
  file_num_batch = list(file_num_batch) if file_num_batch is not None else [None] * len(file_names)
  if shuffle_files and len(file_names) > 1:
    order = (np.random.RandomState(seed).permutation(len(file_names)) if seed is not None
             else random.sample(range(len(file_names)), len(file_names)))
    file_names = [file_names[i] for i in order]
    file_num_batch = [file_num_batch[i] for i in order]

  first_pos = int(start_step) * bsz_per_host
  records = _record_stream(file_names, file_num_batch, bsz_per_host, first_pos, cache)
  dataset = tf.data.Dataset.zip((tf.data.Dataset.counter(start=first_pos), records))
  if (row_begin, row_end) != (0, bsz_per_host):
    dataset = dataset.filter(
        lambda pos, _: tf.logical_and(pos % bsz_per_host >= row_begin, pos % bsz_per_host < row_end))

  def parse(pos, serialized):
    record_seed = None
    if seed is not None:
      record_seed = tf.stack([tf.constant(seed, tf.int64), pos])
      if seed_shard:
        record_seed = tf.random.experimental.stateless_fold_in(record_seed, seed_shard)
    return parse_record(serialized, seq_len, reuse_len, perm_size, num_predict, use_bfloat16, record_seed)

  dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  dataset = dataset.batch(batch_size, drop_remainder=True)
  return dataset.prefetch(tf.data.AUTOTUNE)


def _writer_bsz_per_core(record_dir, bsz_per_host, seq_len):
  """data_utils.py's bsz_per_host // num_core_per_host from its `corpus_info.json`, or None if unknown."""
  info = read_corpus_info(record_dir)
  try:
    if int(info["bsz_per_host"]) != bsz_per_host or int(info["seq_len"]) != seq_len or not info["bi_data"]:
      return None
    return bsz_per_host // int(info["num_core_per_host"])
  except (ValueError, KeyError, TypeError):
    return None


def get_input_fn(record_info_dir, split, spec, perm_size, global_batch_size=None, use_bfloat16=False, seed=None,
                 start_step=0, cache=True):
  """The original `get_input_fn`: finds the records and returns `(input_fn, record_info)`.

  Args:
    record_info_dir: str, data_utils.py's `<save_dir>/tfrecords` (comma-separated directories allowed).
    split: str, "train" usually.
    spec: `PretrainDataSpec`, the data_utils.py flags the records were written with (bsz_per_host, seq_len,
      reuse_len, bi_data, mask_alpha, mask_beta, uncased, num_predict). num_predict None: no target_mapping,
      full-length target/target_mask.
    perm_size: int, block length of the factorisation order; must divide reuse_len and seq_len - reuse_len
      (the original recipe uses perm_size = reuse_len).
    global_batch_size: int or None (= bsz_per_host). bsz_per_host: the pipelines share the files and split the
      rows; bsz_per_host * num_input_pipelines: each pipeline reads its own slice of files. See module docstring.
    use_bfloat16: bool, cast float features to bfloat16 (as the original on TPU).
    seed: int or None. Stateless per-record permutations and a fixed file order; None: random like the original.
    start_step: int, the first training step to yield (resume); with a seed the batches equal an uninterrupted run.
    cache: bool, keep raw records in memory (the original always does).

  Returns:
    input_fn(input_context=None, batch_size=None, start_step=None) -> tf.data.Dataset (start_step None: the
    `start_step` given here). With a `tf.distribute.InputContext` (as
    `strategy.distribute_datasets_from_function` passes) it yields this pipeline's per-replica batches; without,
    batches of `batch_size` rows (default bsz_per_host) in row order. record_info: dict from `find_record_info`.
  """
  bsz_per_host, seq_len, bi_data = spec.bsz_per_host, spec.seq_len, spec.bi_data
  validate_lengths(seq_len, spec.reuse_len, perm_size, spec.num_predict)
  global_batch_size = bsz_per_host if global_batch_size is None else global_batch_size
  record_info = find_record_info(record_info_dir, split, spec)
  writer_bsz_per_core = None
  if bi_data:
    found = {_writer_bsz_per_core(d, bsz_per_host, seq_len) for d in str(record_info_dir).split(",") if d}
    found.discard(None)
    writer_bsz_per_core = found.pop() if len(found) == 1 else None
  file_names, file_num_batch = record_info["filenames"], record_info["file_num_batch"]
  common = dict(spec=spec, perm_size=perm_size, use_bfloat16=use_bfloat16, seed=seed, cache=cache, seed_shard=0,
                row_begin=0, row_end=None, shuffle_files=True)
  first_step = start_step

  def check_rows(rows):
    if bi_data and rows % 2:
      raise ValueError(f"bi_data needs an even number of rows per replica. Received: {rows} rows. Use a batch "
                       "size with an even number of rows per replica.")
    if bi_data and writer_bsz_per_core is not None and rows != writer_bsz_per_core:
      raise ValueError(f"With bi_data each replica must get one writer core's [forward | backward] rows: the "
                       f"records were written with bsz_per_host // num_core_per_host = {writer_bsz_per_core} rows "
                       f"per core, but each replica would get {rows}. Rewrite the records with data_utils.py "
                       "--num_core_per_host equal to the number of replicas per host, or change the batch size.")

  def input_fn(input_context=None, batch_size=None, start_step=None):
    args = {**common, "start_step": first_step if start_step is None else start_step}
    if input_context is None:
      rows = bsz_per_host if batch_size is None else batch_size
      if not isinstance(rows, (int, np.integer)) or rows <= 0 or bsz_per_host % rows:
        raise ValueError(f"batch_size must divide bsz_per_host={bsz_per_host} (each step's rows are split in "
                         f"consecutive chunks). Received: batch_size={batch_size!r}.")
      check_rows(rows)
      return _dataset(file_names, batch_size=rows, file_num_batch=file_num_batch, **args)
    if batch_size is not None:
      raise ValueError("With an InputContext the batch size comes from global_batch_size; don't pass batch_size.")
    num_pipes, pipe = input_context.num_input_pipelines, input_context.input_pipeline_id
    num_replicas = input_context.num_replicas_in_sync
    if num_replicas % num_pipes:
      raise ValueError(f"The {num_replicas} replicas must split evenly over {num_pipes} input pipelines.")
    rows = input_context.get_per_replica_batch_size(global_batch_size)
    check_rows(rows)
    local_rows = rows * (num_replicas // num_pipes)
    if global_batch_size == bsz_per_host:  # shared files: pipeline p keeps its rows of every step
      # Unseeded random file orders would differ between pipelines; then keep the listed order.
      return _dataset(file_names, batch_size=rows, file_num_batch=file_num_batch,
                      **{**args, "row_begin": pipe * local_rows, "row_end": (pipe + 1) * local_rows,
                         "shuffle_files": seed is not None or num_pipes == 1})
    if num_pipes > 1 and global_batch_size == bsz_per_host * num_pipes:  # a contiguous slice of files per pipeline
      if len(file_names) < num_pipes:
        raise ValueError(f"global_batch_size={global_batch_size} = bsz_per_host * {num_pipes} pipelines means one "
                         f"slice of record files per pipeline, but there are only {len(file_names)} files. Write "
                         f"at least {num_pipes} files (data_utils.py --num_task) or use "
                         f"global_batch_size={bsz_per_host} (pipelines share the files).")
      per = len(file_names) // num_pipes
      end = len(file_names) if pipe == num_pipes - 1 else (pipe + 1) * per
      return _dataset(file_names[pipe * per:end], batch_size=rows, file_num_batch=file_num_batch[pipe * per:end],
                      **{**args, "seed_shard": pipe + 1})
    raise ValueError(f"global_batch_size must be bsz_per_host={bsz_per_host} (pipelines share the files) or "
                     f"bsz_per_host * num_input_pipelines={bsz_per_host * num_pipes} (one file slice per "
                     f"pipeline). Received: {global_batch_size}. Match --train_batch_size to the records.")

  return input_fn, record_info
