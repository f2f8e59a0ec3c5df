"""Pretraining input pipeline: records of the original `data_utils.py` -> permutation-LM batches.

The TF2 counterpart of the original `get_input_fn` -> `get_dataset` -> `parser` -> `_local_perm`. It reads
records written by the original `data_utils.py` (or ours) unchanged and gives exactly the original's features.

Typical use::

  spec = PretrainDataSpec(bsz_per_host=32, seq_len=512, reuse_len=256, bi_data=True, mask_alpha=6, mask_beta=1,
                          uncased=True, num_predict=85)
  input_fn, record_info = get_input_fn("proc_data/tfrecords", "train", spec, ReaderOptions(perm_size=256, seed=1),
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
`bsz_per_host // num_core_per_host` of the writer (checked against the writer files data_utils.py writes beside
its records, `record_files.check_writers`, else against `corpus_info.json` when it is found).

Randomness. The masked positions are fixed in the records; the factorisation order is sampled while parsing.
Without `seed` it is random (like the original, new orders every epoch). With `seed`, the order of a record is a
stateless function of (seed, the record's position in its pipeline's stream, counted across epochs), so a run
restarted with `start_step=k` gets exactly the batches of steps k, k+1, ... of an uninterrupted run. In the
shared-files mode the position is the global one, so the batches do not depend on the number of pipelines. The
files are read in one order for the run, random as the original's (`seed`: fixed by it); pipelines that share the
files without a seed, which cannot draw one together, take one from the files' names.

Deviation from the original: the `num_passes` option is not offered, because the original's filter never skips
a file (it reads every record_info file that matches), which is what this module does.
"""

import dataclasses
import os
import random
import zlib

import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf.config import check_field_types

from xlnet_tf.data.record_files import check_writers, find_record_info, read_corpus_info
from xlnet_tf.data.records import counted_record_dataset, read_steps, record_dataset
from xlnet_tf.tasks.pretrain.parser import parse_record


@dataclasses.dataclass(frozen=True)
class ReaderOptions:
  """How a run reads pretraining records, beyond what names them (the `PretrainDataSpec`): run_pretrain.py's flags.

  Attributes:
    perm_size: int, block length of the factorisation order; must divide reuse_len and seq_len - reuse_len
      (the original recipe uses perm_size = reuse_len). Checked with the spec by `validate_lengths`.
    use_bfloat16: bool, cast float features to bfloat16 (as the original on TPU).
    seed: int or None. Stateless per-record permutations and a fixed file order; None: random like the original.
    cache: bool, keep the raw serialized records in memory after the first epoch (the original always does).
    n_token: int or None, the model's vocabulary size: every record's token ids (`input` and `target`) are
      asserted to lie in [0, n_token) as it is parsed (`records.checked_token_ids`); None: not checked.
  """
  perm_size: int
  use_bfloat16: bool = False
  seed: int = None
  cache: bool = True
  n_token: int = None

  def __post_init__(self):
    check_field_types(self)  # use_bfloat16="False" gave bfloat16 batches (sweep 35)


@dataclasses.dataclass(frozen=True)
class PipelineShare:
  """What one input pipeline takes of the records, where several read them (see the module docstring).

  Attributes:
    row_begin, row_end: int, the rows of each step this pipeline keeps; row_end None = bsz_per_host.
    seed_shard: int, folded into the per-record seed (distinguishes pipelines that read different files).
    files_seed: int or None, the seed of the files' order where the reader has none (pipelines that share the
      files, in other processes: one order for all of them); None: the reader's seed, or random. The files are read
      in that order, fixed for the whole run (as the original's one shuffle of the file names).
  """
  row_begin: int = 0
  row_end: int = None
  seed_shard: int = 0
  files_seed: int = None



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


def _record_stream(file_names, file_num_batch, bsz_per_host, first_pos, cache):
  """Raw records repeated forever, starting at stream position `first_pos` (records, counted across epochs). Where
  each file's steps are known (`file_num_batch`), every file is checked to hold them (`counted_record_dataset`)."""
  counts = None
  if file_num_batch is not None and all(n is not None for n in file_num_batch):
    counts = [n * bsz_per_host for n in read_steps(file_names, file_num_batch, bsz_per_host)]
    if not sum(counts):
      raise ValueError(f"The record files hold no whole step of {bsz_per_host} readable records (--skip_bad_records "
                       "read each damaged one up to its first unreadable record). Write them again with data_utils.py.")
  read = (lambda first: counted_record_dataset(file_names[first:], file_num_batch[first:], bsz_per_host)) if counts \
      else (lambda first: record_dataset(file_names[first:]))
  full = read(0)
  if cache:
    full = full.cache()  # raw serialized records in memory, as the original
  if first_pos == 0:
    return full.repeat()
  if counts is None:  # per-file sizes unknown: skip record by record (cheap, nothing is parsed)
    return full.repeat().skip(first_pos)
  offset = first_pos % sum(counts)
  file_idx = 0
  while offset >= counts[file_idx]:
    offset -= counts[file_idx]
    file_idx += 1
  head = read(file_idx).skip(offset)  # the rest of the current epoch
  return head.concatenate(full.repeat())


def get_dataset(file_names, spec, options, batch_size, share=PipelineShare(), start_step=0, file_num_batch=None):
  """One input pipeline: record files -> parsed batches of `batch_size` rows (the original `get_dataset`).

  The files are read as one stream of steps of `bsz_per_host` rows; rows [row_begin, row_end) of every step are
  kept, parsed and batched by `batch_size` in row order (so consecutive batches are consecutive row chunks).

  Args:
    file_names: list of str, record files (each holds whole steps).
    spec: `PretrainDataSpec` of the records (its bsz_per_host rows per step, seq_len, reuse_len, num_predict).
    options: `ReaderOptions` (perm_size, use_bfloat16, seed: see the module docstring, also fixing the file order;
      cache).
    batch_size: int, rows per yielded batch; must divide the rows of `share`.
    share: `PipelineShare`, the rows of each step this pipeline keeps, its seed shard, its files' order.
    start_step: int, first step to yield (steps of bsz_per_host records of this pipeline's stream); without a seed,
      over several files (another random order), the stream's first.
    file_num_batch: list of int/None per file (steps per file) or None; lets `start_step` skip whole files.

  Returns:
    tf.data.Dataset of dicts (module docstring), batch-major, repeated forever.
  """
  validate_lengths(spec.seq_len, spec.reuse_len, options.perm_size, spec.num_predict)
  return _dataset(file_names, spec, options, batch_size, share, start_step, file_num_batch)


def _dataset(file_names, spec, options, batch_size, share, start_step, file_num_batch):
  """`get_dataset` on validated lengths."""
  bsz_per_host, seq_len, reuse_len, num_predict = spec.bsz_per_host, spec.seq_len, spec.reuse_len, spec.num_predict
  perm_size, use_bfloat16, seed, cache = options.perm_size, options.use_bfloat16, options.seed, options.cache
  row_begin, seed_shard = share.row_begin, share.seed_shard
  files_seed = seed if seed is not None else share.files_seed
  row_end = bsz_per_host if share.row_end is None else share.row_end
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
  if len(file_names) > 1:
    order = (np.random.RandomState(files_seed).permutation(len(file_names)) if files_seed is not None
             else random.sample(range(len(file_names)), len(file_names)))
    file_names = [file_names[i] for i in order]
    file_num_batch = [file_num_batch[i] for i in order]

  # A resume skips to the step's position in the files' order where the run keeps it (a seed, one file, or one order
  # for the pipelines); an unseeded one over several files drew another, where that position read some records twice
  # and others not that epoch: it starts at the top of the new order, as the original's restart.
  first_pos = int(start_step) * bsz_per_host if files_seed is not None or len(file_names) == 1 else 0
  records = _record_stream(file_names, file_num_batch, bsz_per_host, first_pos, cache)
  dataset = tf.data.Dataset.zip((tf.data.Dataset.counter(start=first_pos), records))
  if (row_begin, row_end) != (0, bsz_per_host):
    dataset = dataset.filter(
        lambda pos, _: tf.logical_and(pos % bsz_per_host >= row_begin, pos % bsz_per_host < row_end))

  @tf.autograph.experimental.do_not_convert  # graph code as written: nothing for AutoGraph to convert
  def parse(pos, serialized):
    record_seed = None
    if seed is not None:
      record_seed = tf.stack([tf.constant(seed, tf.int64), pos])
      if seed_shard:
        record_seed = tf.random.experimental.stateless_fold_in(record_seed, seed_shard)
    return parse_record(serialized, seq_len, reuse_len, perm_size, num_predict, use_bfloat16, record_seed,
                        options.n_token)

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


def get_input_fn(record_info_dir, split, spec, options, global_batch_size=None, start_step=0, batch_flag=None):
  """The original `get_input_fn`: finds the records and returns `(input_fn, record_info)`.

  Args:
    record_info_dir: str, data_utils.py's `<save_dir>/tfrecords` (comma-separated directories allowed).
    split: str, "train" usually.
    spec: `PretrainDataSpec`, the data_utils.py flags the records were written with (bsz_per_host, seq_len,
      reuse_len, bi_data, mask_alpha, mask_beta, uncased, num_predict). num_predict None: no target_mapping,
      full-length target/target_mask.
    options: `ReaderOptions` (perm_size, use_bfloat16, seed, cache).
    global_batch_size: int or None (= bsz_per_host). bsz_per_host: the pipelines share the files and split the
      rows; bsz_per_host * num_input_pipelines: each pipeline reads its own slice of files. See module docstring.
    start_step: int, the first training step to yield (resume); with a seed the batches equal an uninterrupted run.
    batch_flag: None or int -> str, how the caller's flags give the records' bsz_per_host when no record file
      matches (`find_record_info`).

  Returns:
    input_fn(input_context=None, batch_size=None, start_step=None) -> tf.data.Dataset (start_step None: the
    `start_step` given here). With a `tf.distribute.InputContext` (as
    `strategy.distribute_datasets_from_function` passes) it yields this pipeline's per-replica batches; without,
    batches of `batch_size` rows (default bsz_per_host) in row order. record_info: dict from `find_record_info`.
  """
  bsz_per_host, seq_len, bi_data = spec.bsz_per_host, spec.seq_len, spec.bi_data
  validate_lengths(seq_len, spec.reuse_len, options.perm_size, spec.num_predict)
  global_batch_size = bsz_per_host if global_batch_size is None else global_batch_size
  record_info = find_record_info(record_info_dir, split, spec, batch_flag)
  writer_cores = check_writers(list(zip(record_info["filenames"], record_info["writers"])), bi_data)
  writer_bsz_per_core = None
  if bi_data and writer_cores:
    writer_bsz_per_core = bsz_per_host // writer_cores
  elif bi_data:  # the original's records: corpus_info.json, which the last data_utils.py run of task 0 wrote
    found = {_writer_bsz_per_core(d, bsz_per_host, seq_len) for d in str(record_info_dir).split(",") if d}
    found.discard(None)
    writer_bsz_per_core = found.pop() if len(found) == 1 else None
    if writer_bsz_per_core is None:
      logging.warning("bi_data: the records' --num_core_per_host is unknown (no writer file beside them, no "
                      "corpus_info.json of their settings): each replica must get one writer core's [forward | "
                      "backward] rows, bsz_per_host // num_core_per_host, which cannot be checked here.")
  file_names, file_num_batch = record_info["filenames"], record_info["file_num_batch"]
  first_step = start_step

  def check_rows(rows, num_replicas=1, num_pipes=1):
    if bi_data and rows % 2:
      raise ValueError(f"bi_data needs an even number of rows per replica. Received: {rows} rows. Use a batch "
                       "size with an even number of rows per replica.")
    if bi_data and writer_bsz_per_core is not None and rows != writer_bsz_per_core:
      # The batch size names the record files: only the replicas, the hosts, or the records can change.
      cores, hosts = bsz_per_host // writer_bsz_per_core, global_batch_size // bsz_per_host
      if hosts > 1 and hosts != num_pipes:
        fixes = [f"pass --num_hosts={num_pipes}: the run has {num_pipes} worker(s), not the {hosts} hosts "
                 f"--num_hosts={hosts} splits the batch over"]
      else:
        fixes = [f"run {cores} replica(s) per worker (--num_core_per_host={cores})"]
        if bsz_per_host % rows == 0:
          fixes.append(f"rewrite the records with data_utils.py --num_core_per_host={bsz_per_host // rows} (without "
                       "--use_tpu=False, which lays them out for one core)")
        if num_pipes > 1 and hosts == 1:
          fixes.append(f"pass --num_hosts={num_pipes} with records written with --bsz_per_host="
                       f"{global_batch_size // num_pipes}, at least one file per worker")
      raise ValueError(f"With bi_data each replica must get one writer core's [forward | backward] rows: the "
                       f"records were written with bsz_per_host // num_core_per_host = {writer_bsz_per_core} rows "
                       f"per core ({cores} core(s) per host), but each of the run's {num_replicas} replica(s) "
                       f"({num_replicas // num_pipes} per worker, {num_pipes} worker(s)) would get {rows}. Either "
                       f"{'; or '.join(fixes)}.")

  def input_fn(input_context=None, batch_size=None, start_step=None):
    step = first_step if start_step is None else start_step
    if input_context is None:
      rows = bsz_per_host if batch_size is None else batch_size
      if not isinstance(rows, (int, np.integer)) or rows <= 0 or bsz_per_host % rows:
        raise ValueError(f"batch_size must divide bsz_per_host={bsz_per_host} (each step's rows are split in "
                         f"consecutive chunks). Received: batch_size={batch_size!r}.")
      check_rows(rows)
      return _dataset(file_names, spec, options, rows, PipelineShare(), step, file_num_batch)
    if batch_size is not None:
      raise ValueError("With an InputContext the batch size comes from global_batch_size; don't pass batch_size.")
    num_pipes, pipe = input_context.num_input_pipelines, input_context.input_pipeline_id
    num_replicas = input_context.num_replicas_in_sync
    if num_replicas % num_pipes:
      raise ValueError(f"The {num_replicas} replicas must split evenly over {num_pipes} input pipelines.")
    rows = input_context.get_per_replica_batch_size(global_batch_size)
    check_rows(rows, num_replicas, num_pipes)
    local_rows = rows * (num_replicas // num_pipes)
    if global_batch_size == bsz_per_host:  # shared files: pipeline p keeps its rows of every step
      # Unseeded random file orders would differ between pipelines: one order from the files' names (the sorted
      # listing read the passes of a task, the same text, one after the other).
      names = "\n".join(os.path.basename(f) for f in file_names)
      share = PipelineShare(row_begin=pipe * local_rows, row_end=(pipe + 1) * local_rows,
                            files_seed=None if num_pipes == 1 else zlib.crc32(names.encode()))
      return _dataset(file_names, spec, options, rows, share, step, file_num_batch)
    if num_pipes > 1 and global_batch_size == bsz_per_host * num_pipes:  # a contiguous slice of files per pipeline
      if len(file_names) < num_pipes:
        raise ValueError(f"global_batch_size={global_batch_size} = bsz_per_host * {num_pipes} pipelines means one "
                         f"slice of record files per pipeline, but there are only {len(file_names)} files. Write "
                         f"at least {num_pipes} files (data_utils.py --num_task) or use "
                         f"global_batch_size={bsz_per_host} (pipelines share the files).")
      per = len(file_names) // num_pipes
      end = len(file_names) if pipe == num_pipes - 1 else (pipe + 1) * per
      return _dataset(file_names[pipe * per:end], spec, options, rows, PipelineShare(seed_shard=pipe + 1), step,
                      file_num_batch[pipe * per:end])
    raise ValueError(f"global_batch_size must be bsz_per_host={bsz_per_host} (pipelines share the files) or "
                     f"bsz_per_host * num_input_pipelines={bsz_per_host * num_pipes} (one file slice per "
                     f"pipeline). Received: {global_batch_size}. Match --train_batch_size to the records.")

  return input_fn, record_info
