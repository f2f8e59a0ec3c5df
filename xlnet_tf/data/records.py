"""Record files: finding pretraining `record_info` files by the original's file names
(`pretrain_spec.PretrainDataSpec.filename`) and a fast, deterministic `tf.train.Example` encoder for int64 features.
"""

import dataclasses
import json
import numbers
import os
import re

import numpy as np
import tensorflow as tf

from xlnet_tf import fileio



def _varint(n):
  """Protobuf varint of a non-negative int."""
  out = bytearray()
  while n > 0x7F:
    out.append((n & 0x7F) | 0x80)
    n >>= 7
  out.append(n)
  return bytes(out)


_SMALL_VARINTS = []


def _length_varint(n):
  """`_varint(n)`, from a table for n < 2**14 (lengths inside an Example)."""
  if not _SMALL_VARINTS:
    _SMALL_VARINTS.extend(_varint(i) for i in range(1 << 14))
  return _SMALL_VARINTS[n] if n < (1 << 14) else _varint(n)


def _varints(values):
  """Protobuf varints of int64 [n] (negatives in the 10-byte two's complement form) -> (bytes, int64 [n] sizes)."""
  if values.size and values.min() >= 0 and values.max() < (1 << 21):  # At most 3 bytes each: vectorised.
    x = values.astype(np.uint32)
    two, three = x >= (1 << 7), x >= (1 << 14)
    words = ((x & 0x7F) | (two.astype(np.uint32) << 7) | (((x >> 7) & 0x7F) << 8) | (three.astype(np.uint32) << 15)
             | ((x >> 14) << 16))  # The varint's bytes, little-endian.
    keep = np.empty([x.size, 4], bool)
    keep[:, 0], keep[:, 1], keep[:, 2], keep[:, 3] = True, two, three, False
    return words.astype("<u4").view(np.uint8).reshape(-1, 4)[keep].tobytes(), 1 + two.astype(np.int64) + three
  encoded = [_varint(v & 0xFFFFFFFFFFFFFFFF) for v in values.tolist()]
  return b"".join(encoded), np.array([len(e) for e in encoded], np.int64)


def serialize_examples(examples):
  """`tf.train.Example`s of int64 features, serialised deterministically (keys sorted) without building protos.

  Each result equals `tf.train.Example(...).SerializeToString(deterministic=True)` (checked in the tests); the
  varints of all examples are encoded in one vectorised pass.

  Args:
    examples: list of dicts str -> int64 [n] array or list of ints.

  Returns:
    List of bytes, one per example.
  """
  keys = [sorted(features) for features in examples]
  arrays = [np.asarray(features[k], dtype=np.int64).reshape(-1) for features, ks in zip(examples, keys) for k in ks]
  if not arrays:
    return [b"\x0a\x00"] * len(examples)  # An empty `features` message.
  packed, nbytes = _varints(np.concatenate(arrays))
  value_offsets = np.cumsum([0] + [a.size for a in arrays])
  offsets = np.concatenate([[0], np.cumsum(nbytes)])[value_offsets].tolist()
  varint = _length_varint
  out, j = [], 0
  for ks in keys:
    body = []
    for key in ks:
      data = packed[offsets[j]:offsets[j + 1]]
      int64_list = b"\x0a" + varint(len(data)) + data if arrays[j].size else b""
      j += 1
      feature = b"\x1a" + varint(len(int64_list)) + int64_list
      key_bytes = key.encode("utf-8")
      entry = b"\x0a" + varint(len(key_bytes)) + key_bytes + b"\x12" + varint(len(feature)) + feature
      body.append(b"\x0a" + varint(len(entry)) + entry)
    features_bytes = b"".join(body)
    out.append(b"\x0a" + varint(len(features_bytes)) + features_bytes)
  return out


def serialize_example(features):
  """One example: `serialize_examples([features])[0]`."""
  return serialize_examples([features])[0]


# Naming fields of record_info files, in file-name order: (argument, flag to change).
_NAME_FIELDS = ("split", "bsz_per_host", "seq_len", "reuse_len", "uncased", "bi_data", "mask_alpha", "mask_beta",
                "num_predict")


_NAME_RE = re.compile(
    r"^record_info-(?P<split>[^-.]+)-(?P<task_pass>[^.]*)\.bsz-(?P<bsz_per_host>[^.]+)\.seqlen-(?P<seq_len>[^.]+)\."
    r"(?:reuse-(?P<reuse_len>[^.]+)\.)?(?P<uncased>uncased\.)?(?P<bi_data>bi|uni)\.alpha-(?P<mask_alpha>[^.]+)"
    r"\.beta-(?P<mask_beta>[^.]+)\.(?:fnp-(?P<num_predict>[^.]+)\.)?json$")


def record_info_glob(split, spec):
  """The original's record_info glob of a `PretrainDataSpec`: `record_info-{split}-*.bsz-...[.fnp-N].json`."""
  return spec.filename(f"record_info-{split}-*", "json")


def _name_fields(split, spec):
  """The naming fields of `split` and a `PretrainDataSpec` as the file name spells them (None = field absent)."""
  return {"split": str(split), "bsz_per_host": str(spec.bsz_per_host), "seq_len": str(spec.seq_len),
          "reuse_len": str(spec.reuse_len), "uncased": bool(spec.uncased), "bi_data": bool(spec.bi_data),
          "mask_alpha": str(spec.mask_alpha), "mask_beta": str(spec.mask_beta),
          "num_predict": None if spec.num_predict is None else str(spec.num_predict)}


def _show(field, value):
  if field == "uncased":
    return "uncased" if value else "cased (no 'uncased.')"
  if field == "bi_data":
    return "bi" if value else "uni"
  if field == "reuse_len" and value is None:
    return "None (no 'reuse-')"
  if field == "num_predict":
    return "None (no 'fnp-')" if value is None else f"fnp-{value}"
  return str(value)


def _mismatch_message(record_dir, pattern, asked):
  """One line: which record_info files are in `record_dir` and how their naming fields differ from `asked`."""
  found = sorted(os.path.basename(p) for p in tf.io.gfile.glob(os.path.join(record_dir, "record_info-*.json")))
  head = f"No record_info file in --record_info_dir {record_dir!r} matches {pattern!r}."
  if not found:
    sub = os.path.join(record_dir, "tfrecords")
    if tf.io.gfile.glob(os.path.join(sub, "record_info-*.json")):
      return f"{head} It has no record_info-*.json at all, but {sub!r} does: pass --record_info_dir={sub}."
    return (f"{head} It has no record_info-*.json at all: run data_utils.py and pass its <save_dir>/tfrecords "
            "as --record_info_dir.")
  parts, best = [], None
  for name in found:
    m = _NAME_RE.match(name)
    if m is None:
      parts.append(f"{name} (unparsable name)")
      continue
    have = dict(m.groupdict())
    have["uncased"] = have["uncased"] is not None
    have["bi_data"] = have["bi_data"] == "bi"
    diffs = [f for f in _NAME_FIELDS if have[f] != asked[f]]
    parts.append(f"{name}: " + "; ".join(f"{f}: files have {_show(f, have[f])}, you asked {_show(f, asked[f])}"
                                         for f in diffs))
    if best is None or len(diffs) < len(best[1]):
      best = (have, diffs)
  shown = " | ".join(parts[:5]) + (f"; ... ({len(parts) - 5} more)" if len(parts) > 5 else "")
  fix = ""
  if best is not None:
    flags = []
    for f in best[1]:
      v = best[0][f]
      if f == "num_predict" and v is None:
        flags.append("--num_predict=None (unset)")
      elif f == "reuse_len" and v is None:
        flags.append("--reuse_len=None (unset)")
      else:
        flags.append(f"--{f}={v}")
    fix = " Pass the values data_utils.py was run with, e.g. " + " ".join(flags) + (
        " (bsz_per_host is the per-host batch size)." if "bsz_per_host" in best[1] else ".")
  return f"{head} Found {len(found)} record_info file(s): {shown}.{fix}"


def find_record_info(record_info_dir, split, spec):
  """Finds the record files written by `data_utils.py` with these settings, as the original `get_input_fn`.

  Globs `record_info-{split}-*.<fmt>.json` (sorted) in each comma-separated directory; each listed file keeps
  only its basename and is looked up in that directory (so a copied record directory still works).

  Args:
    record_info_dir: str, directory (or comma-separated directories) holding `record_info-*.json` and the
      `.tfrecords` files, i.e. data_utils.py's `<save_dir>/tfrecords`.
    split: str, data_utils.py's --split. spec: `PretrainDataSpec`, the data_utils.py flags the records were written
      with (they are part of the file names).

  Returns:
    dict with `filenames` (list of str, record files in order), `num_batch` (int, total steps of bsz_per_host
    records) and `file_num_batch` (list, steps per file; None where a record_info lists several files).

  Raises:
    FileNotFoundError: a directory or a listed record file does not exist.
    ValueError: no record_info file matches (the message lists what is there and which fields differ).
  """
  pattern = record_info_glob(split, spec)
  asked = _name_fields(split, spec)
  info = {"filenames": [], "num_batch": 0, "file_num_batch": []}
  for record_dir in [d for d in str(record_info_dir).split(",") if d]:
    if not tf.io.gfile.isdir(record_dir):
      raise FileNotFoundError(f"--record_info_dir {record_dir!r} is not a directory. Pass data_utils.py's "
                              "<save_dir>/tfrecords (comma-separate several directories).")
    paths = sorted(tf.io.gfile.glob(os.path.join(record_dir, pattern)))
    if not paths:
      raise ValueError(_mismatch_message(record_dir, pattern, asked))
    for path in paths:
      try:
        with tf.io.gfile.GFile(path) as f:
          content = json.load(f)
        names, num_batch = list(content["filenames"]), int(content["num_batch"])
      except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"record_info file {path} must be json with 'filenames' and 'num_batch' (as "
                         f"data_utils.py writes); reading it failed: {e!r}. Rewrite it with data_utils.py.") from None
      for name in names:
        local = os.path.join(record_dir, os.path.basename(name))
        if not tf.io.gfile.exists(local):
          raise FileNotFoundError(f"record_info file {path} lists {name!r}, but {local} does not exist. Keep the "
                                  ".tfrecords files next to their record_info file.")
        info["filenames"].append(local)
        info["file_num_batch"].append(num_batch if len(names) == 1 else None)
      info["num_batch"] += num_batch
  if info["num_batch"] <= 0 or not info["filenames"]:
    raise ValueError(f"The record_info files matching {pattern!r} in {record_info_dir!r} list no records "
                     f"(num_batch {info['num_batch']}, {len(info['filenames'])} files). Write more text with "
                     "data_utils.py (each row needs at least seq_len + reuse_len tokens).")
  return info


def read_corpus_info(record_dir):
  """data_utils.py's `corpus_info.json` for a records directory, or None if there is none or it is unreadable.

  `data_utils.py` writes it in `<save_dir>`, the parent of the `tfrecords/` directory the trainer is given; a copy
  beside the records is found too. `record_dir` may be comma-separated (the first one with a file wins).
  """
  for one_dir in str(record_dir).split(","):
    for path in (os.path.join(one_dir, "corpus_info.json"),
                 os.path.join(os.path.dirname(os.path.normpath(one_dir)), "corpus_info.json")):
      try:
        if fileio.exists(path):
          with fileio.open_file(path) as f:
            return json.load(f)
      except (OSError, ValueError):
        return None
  return None


# ---------------------------------------------------------------------------------------------------------------
# Fine-tuning records: what the classifier, RACE and SQuAD writers and readers share.


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


def is_int_at_least(value, low):
  """Whether value is an integer (python or numpy, not a bool) >= low."""
  return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low


def int_feature(values):
  """A `tf.train.Feature` of int64 values."""
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values):
  """A `tf.train.Feature` of float values."""
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def fine_tuning_dataset(input_file, name_to_features, batch_size, is_training, drop_remainder, shuffle_buffer=2048,
                        seed=None, input_context=None, shapes=None, missing_hint="Write it first."):
  """Batches of fine-tuning records, as the original `file_based_input_fn_builder`s read them, batch-major.

  Training shuffles (buffer shuffle_buffer, reshuffled each epoch, `seed` for a reproducible order) and repeats
  forever; eval reads once in order. With an input_context (tf.distribute) the records are sharded per input
  pipeline and batch_size is per replica.

  Args:
    input_file: str or list of str, record files.
    name_to_features: the `tf.io.parse_example` spec.
    shapes: optional {name: per-example shape} to reshape parsed features to (e.g. RACE's [4, L]).
    missing_hint: what the error for a missing file tells the user to do.

  Returns:
    A tf.data.Dataset of dicts of the parsed features, int64 cast to int32.
  """
  files = [input_file] if isinstance(input_file, str) else list(input_file)
  for f in files:
    if not fileio.exists(f):
      raise FileNotFoundError(f"Record file {f} does not exist. {missing_hint}")
  if not is_int_at_least(batch_size, 1):
    raise ValueError(f"The batch size must be a positive integer. Received: {batch_size!r}.")
  if is_training and not is_int_at_least(shuffle_buffer, 1):
    raise ValueError(f"--shuffle_buffer must be a positive integer. Received: {shuffle_buffer!r}.")
  shapes = shapes or {}

  def decode(serialized):
    parsed = tf.io.parse_example(serialized, name_to_features)
    out = {}
    for name, t in parsed.items():
      t = tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
      out[name] = tf.reshape(t, [-1, *shapes[name]]) if name in shapes else t
    return out

  d = record_dataset(files)
  if input_context is not None:
    d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if is_training:
    d = d.shuffle(buffer_size=shuffle_buffer, seed=seed)
    d = d.repeat()
  d = d.batch(batch_size, drop_remainder=drop_remainder)
  return decoded_batches(d, decode)


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


def check_token_ids(files, n_token, fix, key="input_ids", num_records=256):
  """Checks that the token ids of the first `num_records` records of `files` are in [0, n_token).

  An embedding lookup checks its ids on the CPU only (a GPU gathers zeros for an id out of range, and the run
  trains on), so every tool checks its records here, on the host, before training or predicting with them.
  Reading stops at an unreadable record (the reader names it when it gets there).

  Args:
    files: str or list of str, record files, read in order.
    n_token: int, the model's vocabulary size.
    fix: str, the sentence that ends the error: which flag or file to change.
    key: the int64 feature of token ids ("input_ids"; pretraining records: "input").
    num_records: how many records to check, over all files.

  Raises:
    ValueError: one line naming the file, the record, the largest bad id and n_token, then `fix`.
  """
  files = [files] if isinstance(files, str) else list(files)
  spec = {key: tf.io.VarLenFeature(tf.int64)}
  left = num_records
  for path in files:
    if left <= 0:
      return
    serialized = []
    try:
      for record in record_dataset([path]).take(left):
        serialized.append(record)
    except tf.errors.OpError:
      left = 0  # an unreadable record: check what was read before it
    if not serialized:
      continue
    left -= len(serialized)
    try:
      ids = tf.io.parse_example(tf.stack(serialized), spec)[key]
    except tf.errors.OpError:
      return  # not Examples: the reader says so
    values, rows = ids.values.numpy(), ids.indices[:, 0].numpy()
    bad = (values < 0) | (values >= n_token)
    if bad.any():
      i = int(np.argmax(np.where(bad, np.abs(values), -1)))
      raise ValueError(f"{path} holds token id {values[i]} (record {rows[i]}), outside the model's vocabulary "
                       f"[0, n_token={n_token}). {fix}")


def check_fine_tuning_ids(files, n_token, spiece_model_file, rewrite="pass --overwrite_data=True to rewrite it"):
  """`check_token_ids` for a fine-tuning tool's cached records: ids beyond n_token mean they were written with
  another SentencePiece model than `spiece_model_file`; `rewrite` says how to write them again."""
  check_token_ids(files, n_token, fix=(
      f"It was written with another SentencePiece model than --spiece_model_file {spiece_model_file}: {rewrite}, "
      "or pass the --model_config_path of the model it was written for."))


def has_read_limits():
  return bool(_READ_LIMITS)


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
    except tf.errors.OpError as e:
      return path, index, " ".join(e.message.split())
  return None
