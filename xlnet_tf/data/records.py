"""Reading records: the one reader of record files (`record_dataset`, which honours --skip_bad_records), the
fine-tuning records' features and datasets that the classifier, RACE and SQuAD share, finding a damaged record,
and whether a cached file may be reused (`cache_fingerprint`, `reusable_cache`, `mark_cache`).
"""

import dataclasses
import hashlib
import numbers
import os
import re

import tensorflow as tf

from xlnet_tf import fileio
from xlnet_tf import path_errors
from xlnet_tf import stderr_filter
from xlnet_tf.config import check_field_types


class PaddingInputExample:
  """A fake example that pads an eval set to a multiple of the batch size; its features have is_real_example 0."""


@dataclasses.dataclass
class InputFeatures:
  """The features of one fine-tuning example (classifier: lists of length L; RACE: the four option sequences one
  after the other, 4 * L).

  Attributes:
    input_ids: list of int, left padded with 0.
    input_mask: list of int, 1 = padding, 0 = real token (written as floats to the records).
    segment_ids: list of int, the task's segment ids (padding 4).
    label_id: int class id, or float for regression (0 for a padding example).
    is_real_example: bool, False for a `PaddingInputExample` (weight 0 in the metrics).
  """
  input_ids: list
  input_mask: list
  segment_ids: list
  label_id: object
  is_real_example: bool = True


def cache_fingerprint(*parts):
  """A digest of what a cached file is made from: str or bytes parts (an input file's bytes, the SentencePiece
  model's, the settings)."""
  digest = hashlib.sha256()
  for part in parts:
    data = part if isinstance(part, bytes) else str(part).encode("utf-8")
    digest.update(len(data).to_bytes(8, "little") + data)
  return digest.hexdigest()


def cache_path(directory, name):
  """`directory/name`, the path of a cached record file whose name begins with --spiece_model_file's file name, as
  the original's. Where the longest name written beside it (its fingerprint's temporary,
  `{name}.source.tmp-{pid}-{12 hex}`) would pass the file system's 255 bytes, one line naming that flag before the
  file's examples are tokenized, not a write error after it naming a file the user never named (sweep 23, C11)."""
  size, room = len(name.encode("utf-8")), path_errors.temp_name_room() - len(".source")
  if size > room and not fileio.is_remote(directory):
    raise ValueError(f"The cached records' file name {name} is too long ({size} bytes; at most {room} with the "
                     "temporary names beside it): it begins with --spiece_model_file's file name. Give the "
                     "SentencePiece model a shorter file name (a copy or a link) and rerun.")
  return os.path.join(directory, name)


def reusable_cache(path, fingerprint):
  """Whether the cached file `path` may serve a run whose inputs have `fingerprint`: it exists, its fingerprint
  file (`{path}.source`, `mark_cache`) names the same inputs, and it holds the bytes written (`changed_cache`). A
  cache without one (written by the original, or before fingerprints), or a run without a fingerprint (None), goes
  by the name alone, as the original. A cache made from other inputs (another input file or SentencePiece model
  under the same name) is not. Read it under the cache's lock (`locks.cache_lock`, which warns when it is written
  again)."""
  if not fileio.exists(path):
    return False
  if not fileio.exists(path + ".source"):
    return True
  with fileio.open_file(path + ".source", "rb") as f:  # bytes: a damaged one (not UTF-8) names other inputs
    recorded = f.read().split(b"\n")  # (sweep 27, U4)
  return (fingerprint is None or recorded[0].strip() == fingerprint.encode("utf-8")) and not changed_cache(path)


def changed_cache(path):
  """Why the cached file `path` is not what `mark_cache` wrote (a line: its size and the size written), or None
  where it is, or where `{path}.source` records no size (the original's caches, or older ones). A copy of an
  --output_dir cut at a record boundary by a full disk or an interrupted copy, or an empty file, reads as whole:
  reused, it served part of the examples, with exit 0 (sweep 32, U2)."""
  try:
    with fileio.open_file(path + ".source", "rb") as f:
      written = [line[6:] for line in f.read().split(b"\n") if line.startswith(b"bytes=")]
  except (OSError, tf.errors.OpError):
    return None
  held = fileio.size(path) if written and fileio.exists(path) else None
  if held is not None and written[0] != str(held).encode():
    return (f"{path} holds {held} bytes, but {written[0].decode('utf-8', 'replace')} were written: it was cut "
            "short or changed since")
  return None


def mark_cache(files, path, fingerprint):
  """Adds `{path}.source` to `files`, the `fileio.FileSet` that wrote `path` (written by now): the fingerprint of the
  inputs `path` is made from, and its size (`reusable_cache`, `changed_cache`). The two appear together, and even a
  process killed outright (SIGKILL, the OOM killer) while they are renamed leaves no cache beside another's
  fingerprint: the old cache is removed, then the fingerprint renamed, then the cache (`FileSet.write`'s `before`),
  so a cut leaves a fingerprint without its cache, built again. (Written after the cache, a rebuild cut short between
  them, by a full disk or a signal, left the new cache beside the old fingerprint, and a later run with the old inputs
  reused the new cache; killed before the fingerprint's rename, the new cache without one, reused by name for any
  inputs: sweep 27, U3.)"""
  files.write(path + ".source", f"{fingerprint}\nbytes={files.size(path)}\n", before=path)


def is_int_at_least(value, low):
  """Whether value is an integer (python or numpy, not a bool) >= low."""
  return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReadConfig:
  """How a fine-tuning run reads its records (classifier, RACE and SQuAD alike): the batches, and training's
  shuffle. One bundle, so that every reader takes the same values under the same names and checks them once.

  Attributes:
    batch_size: int >= 1, examples per batch; per replica when read under tf.distribute (with an input_context).
    is_training: bool. True: shuffle (reshuffled each epoch) and repeat forever; False: read once, in file order.
    drop_remainder: bool, drop a last, smaller batch (static batch shapes).
    shuffle_buffer: int >= 1, records in training's shuffle buffer (--shuffle_buffer); unused in evaluation.
    seed: int or None, training's shuffle seed: a reproducible order (and a resumable run, see
      `resumable_dataset_fn`); None: a random one.
    n_token: int or None, the model's vocabulary size: every record's `input_ids` are asserted to lie in
      [0, n_token) as they are decoded (`checked_token_ids`); None: not checked.
  """
  batch_size: int
  is_training: bool = False
  drop_remainder: bool = False
  shuffle_buffer: int = 2048
  seed: int = None
  n_token: int = None

  def __post_init__(self):
    if not is_int_at_least(self.batch_size, 1):
      raise ValueError(f"The batch size must be a positive integer. Received: {self.batch_size!r}.")
    check_field_types(self)  # is_training="False" shuffled and repeated an evaluation (sweep 35)
    if self.is_training and not is_int_at_least(self.shuffle_buffer, 1):
      raise ValueError(f"--shuffle_buffer must be a positive integer. Received: {self.shuffle_buffer!r}.")
    if self.n_token is not None and not is_int_at_least(self.n_token, 1):
      raise ValueError(f"n_token must be None or a positive integer. Received: {self.n_token!r}.")

  @classmethod
  def training(cls, batch_size, shuffle_buffer, seed=None, n_token=None):
    """What a trainer's `dataset_fn` reads: shuffled, repeated, full batches of batch_size (per replica)."""
    return cls(batch_size=batch_size, is_training=True, drop_remainder=True, shuffle_buffer=shuffle_buffer,
               seed=seed, n_token=n_token)


# Begins the message of the error `checked_token_ids` raises (no quote mark: TensorFlow escapes it); `read_errors`
# looks for it, with the feature and n_token that follow it, to name the file and record.
BAD_TOKEN_ID = "Token id outside the vocabulary"


def checked_token_ids(ids, n_token, key):
  """`ids`, once it is asserted that each lies in [0, n_token): inside a tf.data map this checks every record as it
  is read, on the host, even when the model runs on a GPU (whose embedding gather returns zeros for an id out of
  range, and the run would train on). Costs a min and a max over the ids.

  Args:
    ids: int Tensor of token ids, any shape.
    n_token: int, the model's vocabulary size; None: `ids` unchecked.
    key: str, the record feature that holds the ids ("input_ids"; pretraining records: "input"), for the message.

  Returns:
    `ids`, unchanged. Raises tf.errors.InvalidArgumentError when evaluated on an id out of range; its message holds
    `BAD_TOKEN_ID`, the feature and n_token.
  """
  if n_token is None:
    return ids
  in_range = tf.logical_and(tf.reduce_min(ids) >= 0, tf.reduce_max(ids) < n_token)
  check = tf.debugging.Assert(in_range, [f"{BAD_TOKEN_ID}: feature {key}, n_token={n_token}."])
  with tf.control_dependencies([check]):
    return tf.identity(ids)


def batch_decoder(name_to_features, n_token=None, shapes=None):
  """The map from a batch of serialized fine-tuning records to its features: parsed by `name_to_features`, int64
  cast to int32, reshaped by `shapes` ({name: per-example shape}), `input_ids` checked against n_token (None: not
  checked; `checked_token_ids`)."""
  shapes = shapes or {}

  @tf.autograph.experimental.do_not_convert  # graph code as written: nothing for AutoGraph to convert
  def decode(serialized):
    parsed = tf.io.parse_example(serialized, name_to_features)
    out = {}
    for name, t in parsed.items():
      t = tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
      t = checked_token_ids(t, n_token, name) if name == "input_ids" else t
      out[name] = tf.reshape(t, [-1, *shapes[name]]) if name in shapes else t
    return out
  return decode


def fine_tuning_dataset(input_file, name_to_features, read, input_context=None, shapes=None,
                        missing_hint="Write it first."):
  """Batches of fine-tuning records, as the original `file_based_input_fn_builder`s read them, batch-major.

  Training shuffles and repeats forever; eval reads once in order (`read`: a `ReadConfig`). With an input_context
  (tf.distribute) the records are sharded per input pipeline and read.batch_size is per replica. With
  read.n_token, every record's `input_ids` are checked as they are decoded (`checked_token_ids`).

  Args:
    input_file: str or list of str, record files.
    name_to_features: the `tf.io.parse_example` spec.
    read: `ReadConfig`, the batch size and training's shuffle.
    input_context: a `tf.distribute.InputContext` or None (one pipeline reads every record).
    shapes: optional {name: per-example shape} to reshape parsed features to (e.g. RACE's [4, L]).
    missing_hint: what the error for a missing file tells the user to do.

  Returns:
    A tf.data.Dataset of dicts of the parsed features, int64 cast to int32.
  """
  files = [input_file] if isinstance(input_file, str) else list(input_file)
  for f in files:
    if not fileio.exists(f):
      raise FileNotFoundError(f"Record file {f} does not exist. {missing_hint}")
  if read.is_training:
    require_a_record(files, "The training records", "an empty file",
                     "Delete them and rerun: the tool writes them again from --data_dir.")
  d = record_dataset(files)
  if input_context is not None:
    d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if read.is_training:
    d = d.shuffle(buffer_size=read.shuffle_buffer, seed=read.seed)
    d = d.repeat()
  d = d.batch(read.batch_size, drop_remainder=read.drop_remainder)
  return decoded_batches(d, batch_decoder(name_to_features, read.n_token, shapes))


def decoded_batches(batches, decode):
  """`batches.map(decode)` in parallel and prefetched, without tf.data's autotuning thread.

  That thread sleeps up to 60 s between its optimization rounds, and destroying an iterator sometimes waited for it
  to wake: a fine-tuning run sat idle for up to a minute after its last step (seen with py-spy in
  UnboundedThreadPool). The map then runs on as many threads as there are cores, and prefetch keeps its own
  buffer tuning; a decoding map of a fine-tuning batch is not where the time goes.
  """
  options = tf.data.Options()
  options.autotune.enabled = False
  d = batches.map(decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
  return d.with_options(options)


def resumable_dataset_fn(make_dataset, seed):
  """A `dataset_fn(input_context, start_step)` for `training.Trainer.train` over `make_dataset(input_context)`.

  With a seed, the shuffled order is reproducible, and a resumed run skips the batches the steps before
  `start_step` consumed, so it sees what an uninterrupted run would have seen. Each step takes one batch per
  replica: a pipeline serving k of the replicas skips `start_step * k` batches.
  """
  def dataset_fn(input_context, start_step):
    d = make_dataset(input_context)
    if seed is not None and start_step:
      per_step = 1
      if input_context is not None:
        per_step = input_context.num_replicas_in_sync // input_context.num_input_pipelines
      d = d.skip(start_step * per_step)
    return d
  return dataset_fn


# --skip_bad_records: {record file: how many records of it are read} for the files found damaged (see
# `skip_unreadable_records`); every reader of records goes through `record_dataset`, which honours it.
_READ_LIMITS = {}


def holds_a_record(files):
  """Whether any of the TFRecord `files` holds a record (read up to the first). Training repeats its files forever:
  over files that hold none, the first batch never comes. A file that cannot be read counts as holding one (the
  training loop's reading reports it by name)."""
  try:
    return bool(list(record_dataset(files).take(1)))
  except tf.errors.DataLossError:
    return True


def require_a_record(files, what, why_empty, advice, rewrite=None):
  """ValueError unless one of the training record `files` holds a record (`holds_a_record`): their reading repeats,
  so over none the run ended in the trainer's "dataset ran out" line for callers of its API (sweep 32, U14). The
  line names the files, `what` they are, and the cause: `why_empty` (then `advice`), or --skip_bad_records leaving
  none readable (then `rewrite`, by default `advice`)."""
  if holds_a_record(files):
    return
  skipped = [f for f in files if f in _READ_LIMITS]
  cause = (f"--skip_bad_records skips every record of {', '.join(skipped)}: unreadable from "
           f"{'its' if len(skipped) == 1 else 'their'} first record on" if skipped else why_empty)
  raise ValueError(f"{what} {', '.join(files)} hold no {'readable ' if skipped else ''}record ({cause}), so training "
                   f"would have no batch. {(rewrite or advice) if skipped else advice}")


def record_dataset(files):
  """`tf.data.TFRecordDataset(files)`; a file found damaged by `skip_unreadable_records` is read only up to its
  first unreadable record."""
  if isinstance(files, tf.Tensor):  # one path inside a tf.data function (e.g. `interleave`)
    if not _READ_LIMITS:
      return tf.data.TFRecordDataset(files)
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        list(_READ_LIMITS), tf.constant(list(_READ_LIMITS.values()), tf.int64)), default_value=-1)
    return tf.data.TFRecordDataset(files).take(table.lookup(files))
  files = [files] if isinstance(files, str) else list(files)
  if not any(f in _READ_LIMITS for f in files):
    return tf.data.TFRecordDataset(files)
  limits = [_READ_LIMITS.get(f, -1) for f in files]
  return tf.data.Dataset.from_tensor_slices((files, tf.constant(limits, tf.int64))).flat_map(
      lambda path, limit: tf.data.TFRecordDataset(path).take(limit))


# Begins the message of the error `counted_record_dataset` raises; `read_errors` looks for it, with the file and the
# counts that follow it.
WRONG_RECORD_COUNT = "A record file holds another number of records than its record_info says"


def counted_record_dataset(files, num_batch, bsz_per_host):
  """`tf.data.TFRecordDataset(files)` of pretraining records, asserting as it reads that file i holds exactly
  `num_batch[i]` steps of `bsz_per_host` records, as its record_info says. TensorFlow reads a file cut short at a
  record boundary (a copy interrupted there) as one that ends there, and the trainer, which reads the files as one
  stream of bsz_per_host-row steps, then shifted the rows of every later step (each row's mems from another row),
  exit 0. Checked per step, not per record (as cheap as the plain reader).

  A file found damaged by `skip_unreadable_records` is read up to the last whole step before its first unreadable
  record (`read_steps`): its readable part, not a multiple of the step, shifted the rows of every later step.

  Raises tf.errors.InvalidArgumentError where a file ends early, inside a step, or holds more: its message holds
  `WRONG_RECORD_COUNT`, the file, num_batch, bsz_per_host, the step and the rows read there."""
  files = list(files)
  steps_of = read_steps(files, num_batch, bsz_per_host)
  takes = [steps * bsz_per_host if f in _READ_LIMITS else -1 for f, steps in zip(files, steps_of)]  # -1: all

  def one_file(path, steps, take):
    stream = tf.data.TFRecordDataset(path).take(take).batch(bsz_per_host).map(lambda rows: (rows, False))
    end = tf.data.Dataset.from_tensors((tf.zeros([0], tf.string), True))

    def check(step, element):
      rows, is_end = element
      ok = tf.where(is_end, tf.equal(step, steps),
                    tf.logical_and(tf.less(step, steps), tf.equal(tf.size(rows), bsz_per_host)))
      check = tf.debugging.Assert(ok, [f"{WRONG_RECORD_COUNT}:", path, steps, bsz_per_host, step, tf.size(rows)])
      with tf.control_dependencies([check]):
        return tf.identity(rows), is_end

    checked = stream.concatenate(end).enumerate().map(check).filter(lambda rows, is_end: tf.logical_not(is_end))
    return checked.map(lambda rows, is_end: rows).unbatch()

  return tf.data.Dataset.from_tensor_slices((files, tf.constant(steps_of, tf.int64), tf.constant(takes, tf.int64))
                                            ).flat_map(one_file)


def read_steps(files, num_batch, bsz_per_host):
  """The steps of bsz_per_host records `counted_record_dataset` reads of each file: num_batch, or a damaged file's
  whole steps before its first unreadable record (`skip_unreadable_records`)."""
  return [_READ_LIMITS[f] // bsz_per_host if f in _READ_LIMITS else n for f, n in zip(files, num_batch)]


def skip_unreadable_records(files, log_fn):
  """--skip_bad_records: reads every record of `files` once; a file with an unreadable record is from then on read
  only up to it (TFRecord files cannot be resynchronised after a bad record). Logs one line per damaged file and a
  total. Returns the number of damaged files."""
  damaged = 0
  for path in files:
    found = find_corrupt_record([path])
    if found:
      damaged += 1
      _READ_LIMITS[path] = found[1]
      log_fn(f"--skip_bad_records: {path} is unreadable from record {found[1]} on ({found[2][:120]}); reading its "
             f"first {found[1]} records only.")
  if damaged:
    log_fn(f"--skip_bad_records: skipping the unreadable end of {damaged} of {len(files)} record files.")
  return damaged


def find_corrupt_record(files):
  """The first unreadable record of `files`: (file, record index, reason), or None if every record reads.

  Reads every record, so call it after a read failed, to say where.
  """
  for path in files:
    index = 0
    try:
      for _ in tf.data.TFRecordDataset(path):
        index += 1
    except tf.errors.OpError as e:  # the reason without TensorFlow's function and op names around it
      reason = stderr_filter.error_text(e.message)
      return path, index, re.sub(r"(at \d+)' failed", r"\1 failed", reason)  # TensorFlow's stray quote
  return None
