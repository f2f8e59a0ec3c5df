"""SQuAD features as the original's TFRecords (`FeatureWriter`, `input_fn_builder`), and their cached files.

Record features (one tf.train.Example per InputFeatures, L = max_seq_length):
  unique_ids int64 [1], input_ids int64 [L], input_mask float [L] (1 = padding), p_mask float [L] (1 = not an
  answer position), segment_ids int64 [L], cls_index int64 [1]; training also start_positions int64 [1],
  end_positions int64 [1], is_impossible float [1].
File names (as the original; spm = basename of the SentencePiece model; the key ignores doc_stride, uncased and
the input file, so pass overwrite_data after changing those):
  train: {spm}.{proc_id}.slen-{L}.qlen-{Q}.train.tf_record (read back with the glob {spm}.*.slen-...);
  eval:  {spm}.slen-{L}.qlen-{Q}.eval.tf_record, and the evaluation features {spm}.slen-{L}.qlen-{Q}.eval.features.npz
         (the original pickles its InputFeatures objects into .eval.features.pkl; here an npz, see
         `features_to_arrays`).
"""

import contextlib
import glob as glob_lib
import os
import random
import zipfile
import zlib

import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf import fileio
from xlnet_tf import locks
from xlnet_tf.data import example_encoder
from xlnet_tf.data import records
from xlnet_tf.tasks.squad import data
from xlnet_tf.tasks.squad import examples as examples_lib

# npz layout of a list of features (F features, L = max_seq_length); the goldens' layout.
ARRAY_DTYPES = {
    "unique_id": np.int64, "example_index": np.int32, "source_example": np.int32, "doc_span_index": np.int32,
    "paragraph_len": np.int32, "cls_index": np.int32, "start_position": np.int32, "end_position": np.int32,
    "is_impossible": np.int8, "input_ids": np.int32, "segment_ids": np.int32, "input_mask": np.float32,
    "p_mask": np.float32, "tok_start_to_orig_index": np.int32, "tok_end_to_orig_index": np.int32,
    "token_is_max_context": np.int8,
}
_SCALARS = ("unique_id", "example_index", "source_example", "doc_span_index", "paragraph_len", "cls_index",
            "start_position", "end_position", "is_impossible")
_SEQUENCES = ("input_ids", "segment_ids", "input_mask", "p_mask")
_PARAGRAPH = ("tok_start_to_orig_index", "tok_end_to_orig_index", "token_is_max_context")


def _spm_name(spiece_model_file):
  return os.path.basename(spiece_model_file)


def train_record_name(spiece_model_file, proc_id, max_seq_length, max_query_length):
  return f"{_spm_name(spiece_model_file)}.{proc_id}.slen-{max_seq_length}.qlen-{max_query_length}.train.tf_record"


def train_record_glob(spiece_model_file, max_seq_length, max_query_length):
  return f"{_spm_name(spiece_model_file)}.*.slen-{max_seq_length}.qlen-{max_query_length}.train.tf_record"


def eval_record_name(spiece_model_file, max_seq_length, max_query_length):
  return f"{_spm_name(spiece_model_file)}.slen-{max_seq_length}.qlen-{max_query_length}.eval.tf_record"


def eval_features_name(spiece_model_file, max_seq_length, max_query_length):
  return f"{_spm_name(spiece_model_file)}.slen-{max_seq_length}.qlen-{max_query_length}.eval.features.npz"


# ---------------------------------------------------------------------------------------------------------------
# Writing and reading records.



def serialize_feature(feature, is_training):
  """One InputFeatures as a serialized tf.train.Example with the original's names (see the module docstring)."""
  features = {
      "unique_ids": example_encoder.int_feature([feature.unique_id]),
      "input_ids": example_encoder.int_feature(feature.input_ids),
      "input_mask": example_encoder.float_feature(feature.input_mask),
      "p_mask": example_encoder.float_feature(feature.p_mask),
      "segment_ids": example_encoder.int_feature(feature.segment_ids),
      "cls_index": example_encoder.int_feature([feature.cls_index]),
  }
  if is_training:
    features["start_positions"] = example_encoder.int_feature([feature.start_position])
    features["end_positions"] = example_encoder.int_feature([feature.end_position])
    features["is_impossible"] = example_encoder.float_feature([1.0 if feature.is_impossible else 0.0])
  return example_encoder.example_bytes(features)


class FeatureWriter:
  """Writes InputFeatures to a TFRecord file atomically: `with FeatureWriter(path, is_training) as w:
  w.process_feature(f)`. The file appears under its name only when the block ends without error; with `files` (a
  `fileio.FileSet`), as one file of that set, when the whole set does."""

  def __init__(self, filename, is_training, files=None):
    self.filename = filename
    self.is_training = is_training
    self.num_features = 0
    self._files = files
    self._atomic = self._writer = None

  def __enter__(self):
    self._atomic = fileio.atomic_files() if self._files is None else contextlib.nullcontext(self._files)
    self._writer = tf.io.TFRecordWriter(self._atomic.__enter__().path(self.filename))
    return self

  def process_feature(self, feature):
    self._writer.write(serialize_feature(feature, self.is_training))
    self.num_features += 1

  def __exit__(self, *exc_info):
    self._writer.close()
    return self._atomic.__exit__(*exc_info)


def name_to_features(seq_length, is_training):
  """The parsing spec of the original `input_fn_builder`."""
  spec = {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.float32),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "cls_index": tf.io.FixedLenFeature([], tf.int64),
      "p_mask": tf.io.FixedLenFeature([seq_length], tf.float32),
  }
  if is_training:
    spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
    spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
    spec["is_impossible"] = tf.io.FixedLenFeature([], tf.float32)
  return spec


def squad_dataset(input_files, seq_length, read, input_context=None, num_threads=8):
  """Reads SQuAD records as the original `input_fn_builder`, batch-major.

  Training reads one file as `records.fine_tuning_dataset` (records shuffled, then repeated: every feature once an
  epoch) and several by shuffling the files, interleaving up to num_threads of them, repeating and shuffling
  records, the original's two paths; evaluation reads the files in order, once (`read`: a `records.ReadConfig`).
  With an input_context (tf.distribute) read.batch_size is per replica, and each input pipeline reads its own
  files (every pipes-th; the original's hosts take contiguous slices, which a file count the host count does not
  divide leaves uneven: 4/4/2 of 10 files), or, with fewer files than pipelines (or a share without records), its
  shard of the records read in file order: the pipelines' randomly ordered streams were sharded, and their shards
  overlapped.

  Args:
    input_files: a path, a glob or a list of them.
    seq_length: int L, as written.
    read: `records.ReadConfig`, the batch size, training's shuffle and the n_token input_ids are checked against.
    input_context: a `tf.distribute.InputContext` or None.
    num_threads: int, training files read at once.

  Returns:
    tf.data.Dataset of dicts: unique_ids int32 [B]; input_ids int32 [B, L]; input_mask float32 [B, L] (1 = pad);
    segment_ids int32 [B, L]; cls_index int32 [B]; p_mask float32 [B, L] (1 = not an answer position); training
    also start_positions int32 [B], end_positions int32 [B], is_impossible float32 [B].
  """
  patterns = [input_files] if isinstance(input_files, str) else list(input_files)
  files = []
  for pattern in patterns:
    found = [pattern] if fileio.exists(pattern) else fileio.glob(pattern)  # a file's name may hold [ ] * ?
    if not found:
      raise FileNotFoundError(f"SQuAD record {pattern} matches no file. Write the records first "
                              "(prepare_train_records / prepare_eval_features) or check --output_dir.")
    files.extend(found)
  decode = records.batch_decoder(name_to_features(seq_length, read.is_training), read.n_token)
  if read.is_training:
    records.require_a_record(files, "The SQuAD training records", "a --train_file without questions was preprocessed",
                             "Preprocess a --train_file that has questions: --do_prepro=True --train_file=..., with "
                             "the same --output_dir.",
                             "Delete them and rerun with --do_prepro=True: they are written again from --train_file.")
  pipes, pipe = (input_context.num_input_pipelines, input_context.input_pipeline_id) if input_context else (1, 0)
  if read.is_training and pipes > 1 and len(files) >= pipes and all(
      records.holds_a_record(files[p::pipes]) for p in range(pipes)):
    files, pipes = files[pipe::pipes], 1  # each pipeline its own files, as the original's hosts (no record shard)
  interleaved = read.is_training and len(files) > 1 and pipes == 1
  if interleaved:
    d = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files), seed=read.seed).repeat()
    d = d.interleave(records.record_dataset, cycle_length=min(num_threads, len(files)),
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=read.seed is not None)
  else:  # in file order: the pipelines' shards of it are apart
    d = records.record_dataset(files)
  if pipes > 1:
    d = d.shard(pipes, pipe)
  if read.is_training:
    d = d.shuffle(read.shuffle_buffer, seed=read.seed)
    d = d if interleaved else d.repeat()  # one stream: repeated after its shuffle, so no epoch mixes into the next
  d = d.batch(read.batch_size, drop_remainder=read.drop_remainder)
  return records.decoded_batches(d, decode)


# ---------------------------------------------------------------------------------------------------------------
# Features <-> arrays (the evaluation cache and the goldens' npz layout).


def features_to_arrays(features, max_seq_length):
  """dict of numpy arrays (ARRAY_DTYPES): scalars [F], sequences [F, L]; per-token paragraph fields [F, L] with -1
  after paragraph_len; None (example_index in training, positions in evaluation) stored as -1."""
  num, length = len(features), max_seq_length
  out = {k: np.zeros((num,) if k in _SCALARS else (num, length), ARRAY_DTYPES[k]) for k in ARRAY_DTYPES}
  for k in _PARAGRAPH:
    out[k][:] = -1
  for r, f in enumerate(features):
    for k in _SCALARS:
      value = getattr(f, k)
      out[k][r] = -1 if value is None else value
    for k in _SEQUENCES:
      out[k][r] = getattr(f, k)
    for k in _PARAGRAPH:
      out[k][r, :f.paragraph_len] = getattr(f, k)
  return out


def features_from_arrays(arrays):
  """The inverse of `features_to_arrays`: list of InputFeatures."""
  missing = [k for k in ARRAY_DTYPES if k not in arrays]
  if missing:
    raise ValueError(f"Feature arrays need the keys {sorted(ARRAY_DTYPES)}; missing {missing}. Write them with "
                     "features_to_arrays / save_eval_features.")
  cols = {k: np.asarray(arrays[k]).tolist() for k in ARRAY_DTYPES}
  features = []
  for r in range(len(cols["unique_id"])):
    w = cols["paragraph_len"][r]
    scalar = {k: cols[k][r] for k in _SCALARS}
    for k in ("example_index", "start_position", "end_position"):
      if scalar[k] == -1:
        scalar[k] = None
    scalar["is_impossible"] = bool(scalar["is_impossible"])
    features.append(data.InputFeatures(
        **scalar, **{k: cols[k][r] for k in _SEQUENCES},
        tok_start_to_orig_index=cols["tok_start_to_orig_index"][r][:w],
        tok_end_to_orig_index=cols["tok_end_to_orig_index"][r][:w],
        token_is_max_context=[bool(x) for x in cols["token_is_max_context"][r][:w]]))
  return features


def save_eval_features(path, features, max_seq_length, files):
  """Writes features as an npz (`features_to_arrays`) to `path`, as one file of `files` (a `fileio.FileSet`)."""
  with fileio.open_file(files.path(path), "wb") as f:
    np.savez(f, **features_to_arrays(features, max_seq_length))


def load_eval_features(path):
  if not fileio.exists(path):
    raise FileNotFoundError(f"Evaluation features {path} do not exist. Build them with prepare_eval_features.")
  with fileio.open_file(path, "rb") as f:
    with np.load(f) as arrays:
      return features_from_arrays({k: arrays[k] for k in arrays.files})


# ---------------------------------------------------------------------------------------------------------------
# The original's preprocessing steps.


def prepare_train_records(train_file, sp_model, spiece_model_file, output_dir, options, num_proc=1, proc_id=0,
                          shuffle_seed=None):
  """The original `--do_prepro` step: examples[proc_id::num_proc], shuffled, converted, written to
  `output_dir/train_record_name(...)` (always rewritten, as the original), with its fingerprint
  (`train_fingerprint`) and num_proc in `{record}.source`.

  options: `data.FeatureOptions`. shuffle_seed: int or None (None = unseeded, as the original's `random.shuffle`).

  Returns:
    (record path, data.ConversionStats).
  """
  if not isinstance(num_proc, int) or num_proc < 1 or not isinstance(proc_id, int) or not 0 <= proc_id < num_proc:
    raise ValueError(f"--proc_id must be in [0, --num_proc). Received: proc_id={proc_id!r}, num_proc={num_proc!r}.")
  examples = examples_lib.read_squad_examples(train_file, is_training=True)[proc_id::num_proc]
  random.Random(shuffle_seed).shuffle(examples)
  path = records.cache_path(output_dir, train_record_name(spiece_model_file, proc_id, options.max_seq_length,
                                                          options.max_query_length))
  # Only this --proc_id writes this name, under no lock: a killed run's record and fingerprint went (sweep 32, U13)
  locks.remove_stale_temporaries(output_dir, [glob_lib.escape(os.path.basename(path)) + suffix
                                              for suffix in (".tmp-*", ".source.tmp-*")], only_dead=True)
  logging.info("Writing %d training examples to %s", len(examples), path)
  with fileio.atomic_files() as out:  # the record and its fingerprint together
    with FeatureWriter(path, is_training=True, files=out) as writer:
      stats = data.convert_examples_to_features(examples, sp_model, options, True, writer.process_feature)
    records.mark_cache(out, path, f"{train_fingerprint(train_file, sp_model, options)} num_proc={num_proc}")
  return path, stats


def train_fingerprint(train_file, sp_model, options):
  """What `prepare_train_records` makes a record from (`records.cache_fingerprint`): the bytes of the training JSON,
  the SentencePiece model and the `data.FeatureOptions`."""
  with fileio.open_file(train_file, "rb") as f:
    return records.cache_fingerprint(f.read(), sp_model.serialized_model_proto(), repr(options))


def recorded_fingerprint(path):
  """(`train_fingerprint`, num_proc) that `prepare_train_records` wrote beside the record `path`, or None (a record
  of the original's `--do_prepro`, or of a version that wrote none). ValueError naming it where it cannot be read
  (a directory, not UTF-8: a bare errno or codec line before, sweep 27, U4) or does not say both, or where the record
  is not of the size written (`records.changed_cache`: cut at a record boundary, it trained on part of the data)."""
  source = path + ".source"
  if not fileio.exists(source):
    return None
  try:
    with fileio.open_file(source, "rb") as f:
      fingerprint, _, num_proc = f.read().decode("utf-8").split("\n")[0].strip().partition(" num_proc=")
  except (OSError, UnicodeDecodeError) as e:
    fingerprint, num_proc = e, ""
  if not num_proc.isdigit():
    why = f" ({fingerprint})" if isinstance(fingerprint, Exception) else ""
    raise ValueError(f"{source}, the fingerprint of the training record beside it, cannot be read{why}. Delete it "
                     "(the record is then read by its name alone, as the original's), or delete both and rerun "
                     "--do_prepro=True.")
  changed = records.changed_cache(path)
  if changed:
    raise ValueError(f"The SQuAD training record {changed}. Delete it and rerun --do_prepro=True for its --proc_id "
                     f"({num_proc} processes in all).")
  return fingerprint, int(num_proc)


def prepare_eval_features(predict_file, sp_model, spiece_model_file, output_dir, options, overwrite_data=False):
  """The original's evaluation preprocessing with its cache: the record and the features file are reused when
  both exist, overwrite_data is False and they were made from this predict_file, SentencePiece model and options
  (`records.reusable_cache`: the original reused them by name alone, for another --predict_file too), else
  rebuilt. options: `data.FeatureOptions`. This process then holds the features file's lock (for the three files)
  until it ends: another run cannot write them meanwhile, and a run here that would write them while another live
  run uses them is refused with a ValueError (`locks.cache_lock`).

  Returns:
    (examples, features, record path, data.ConversionStats or None when the cache was used).
  """
  examples = examples_lib.read_squad_examples(predict_file, is_training=False)
  max_seq_length, max_query_length = options.max_seq_length, options.max_query_length
  record = records.cache_path(output_dir, eval_record_name(spiece_model_file, max_seq_length, max_query_length))
  feature_file = records.cache_path(output_dir, eval_features_name(spiece_model_file, max_seq_length,
                                                                   max_query_length))
  with fileio.open_file(predict_file, "rb") as f, fileio.open_file(spiece_model_file, "rb") as g:
    fingerprint = records.cache_fingerprint(f.read(), g.read(), repr(options))
  # The record's size too: one cut at a record boundary predicted a part, then "No head result for feature unique_id
  # N", naming no file (sweep 32, U20).
  reusable = lambda: all(records.reusable_cache(path, fingerprint) for path in (record, feature_file))
  with locks.cache_lock(feature_file, reusable, overwrite_data) as reuse:  # the three files' lock: see the docstring
    if reuse:
      logging.info("Loading evaluation features from %s (set --overwrite_data to rebuild).", feature_file)
      try:
        return examples, load_eval_features(feature_file), record, None
      except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile, NotImplementedError, OverflowError,
              zlib.error) as e:  # a traceback (sweep 27, U2; sweep 28, A6)
        raise ValueError(f"The cached evaluation features {feature_file} cannot be read ({type(e).__name__}: {e}). "
                         "Remove the file, or rerun with --overwrite_data=True, to build them again.") from None
    for path in (feature_file + ".source", feature_file):  # a rebuild cut short leaves no features: built again
      fileio.remove(path)
    features = []
    with fileio.atomic_files() as out:  # the record, the features and their fingerprint: the three of one run
      with FeatureWriter(record, is_training=False, files=out) as writer:

        def append(feature):
          features.append(feature)
          writer.process_feature(feature)

        stats = data.convert_examples_to_features(examples, sp_model, options, False, append)
      save_eval_features(feature_file, features, max_seq_length, out)
      for path in (record, feature_file):
        records.mark_cache(out, path, fingerprint)
  return examples, features, record, stats
