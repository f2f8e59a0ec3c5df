"""RACE TFRecords as the original `run_race.py`: cached file names, the writer, and a `tf.data` reader.

One record per example (question), the original's feature names:

    input_ids        int64 [4 * L]   the 4 option sequences one after the other (option c at [c*L, (c+1)*L))
    input_mask       float [4 * L]   1 = padding, 0 = real token
    segment_ids      int64 [4 * L]   0 ctx+<sep>, 1 qa+<sep>, 2 <cls>, 4 padding (0 everywhere in padding examples)
    label_ids        int64 []        the correct option, 0..3
    is_real_example  int64 []        0 for the fake examples that pad an eval set to a multiple of the batch size

The reader casts int64 to int32 and reshapes the flat [4L] to [4, L] (the first step of the original
`get_race_loss`, which then lays the batch out time-major as [L, 4B], column b*4 + c).

The cached name holds only the SentencePiece file's basename, L and the split (as the original): it ignores
max_qa_length, uncased, fix_option_aliasing and sorted_file_order, so pass `overwrite_data=True` when one of them
changes.
"""

import dataclasses
import os
import random

import tensorflow as tf
from absl import logging

from xlnet_tf import fileio
from xlnet_tf import locks
from xlnet_tf.config import check_field_types
from xlnet_tf.data import example_encoder
from xlnet_tf.data import records
from xlnet_tf.tasks.race import data

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")


def record_file_name(spiece_model_file, max_seq_length, split, high_only=False, middle_only=False):
  """The original's cached record name (no directory).

  train: `{spm}.len-{L}.train.tf_record` (as the original, high_only/middle_only filter the training examples
  but do not enter the name); dev/test: `[high.|middle.]{spm}.len-{L}.{split}.tf_record`, spm = the basename of
  the SentencePiece model file.
  """
  if split not in data.SPLITS:
    raise ValueError(f"The RACE split must be one of {data.SPLITS}. Received: {split!r}. Check --eval_split.")
  spm = os.path.basename(spiece_model_file)
  name = f"{spm}.len-{max_seq_length}.{split}.tf_record"
  if split != "train":
    if high_only:
      name = "high." + name
    elif middle_only:
      name = "middle." + name
  return name




def serialize_features(feature):
  """One `InputFeatures` -> a serialized `tf.train.Example` with the original's feature names."""
  features = {
      "input_ids": example_encoder.int_feature(feature.input_ids),
      "input_mask": example_encoder.float_feature(feature.input_mask),
      "segment_ids": example_encoder.int_feature(feature.segment_ids),
      "label_ids": example_encoder.int_feature([feature.label_id]),
      "is_real_example": example_encoder.int_feature([int(feature.is_real_example)]),
  }
  return example_encoder.example_bytes(features)


def write_records(examples, tokenize_fn, output_file, max_seq_length, max_qa_length, fix_option_aliasing=False,
                  overwrite_data=False, fingerprint=None):
  """Converts examples and writes them as one TFRecord file, atomically (the original's cache behaviour).

  Args:
    examples: list of `InputExample` / `PaddingInputExample`, written in order.
    tokenize_fn, max_seq_length, max_qa_length, fix_option_aliasing: as `data.convert_single_example`.
    output_file: str, the record file (local or `gs://...`).
    overwrite_data: rewrite an existing output_file; False keeps it.
    fingerprint: str or None, the inputs' fingerprint, written as `{output_file}.source` together with the records
      (`records.mark_cache`); None writes none.

  Returns:
    The number of records written, or None if an existing file was kept.
  """
  data.check_lengths(max_seq_length, max_qa_length)
  if fileio.exists(output_file) and not overwrite_data:
    logging.info("Keeping the existing tfrecord %s (set --overwrite_data to rebuild it).", output_file)
    return None
  logging.info("Writing tfrecord %s (%d examples).", output_file, len(examples))
  alike = 0  # questions whose distinct options the cut to max_qa_length made alike
  with fileio.atomic_files() as out:
    with tf.io.TFRecordWriter(out.path(output_file)) as writer:
      for ex_index, example in enumerate(examples):
        if ex_index % 10000 == 0:
          logging.info("Writing example %d of %d", ex_index, len(examples))
        feature = data.convert_single_example(example, tokenize_fn, max_seq_length, max_qa_length,
                                              fix_option_aliasing)
        if feature.is_real_example and _distinct_options(feature, max_seq_length) < len(set(example.qa_list)):
          alike += 1
        writer.write(serialize_features(feature))
    if fingerprint is not None:
      records.mark_cache(out, output_file, fingerprint)
  if alike:  # exit 0 without a word (sweep 33, C3)
    logging.warning("--max_qa_length=%d keeps the last %d tokens of each question and option: %d of %d questions in "
                    "%s have options it cut alike, which no model can tell apart. Raise --max_qa_length (the "
                    "original's 128).", max_qa_length, max_qa_length, alike, len(examples), output_file)
  return len(examples)


def _distinct_options(feature, max_seq_length):
  """How many distinct question-and-option token sequences (segment B) the 4 sequences of `feature` hold."""
  ids, segments = feature.input_ids, feature.segment_ids
  return len({tuple(t for t, s in zip(ids[i:i + max_seq_length], segments[i:i + max_seq_length]) if s == data.SEG_ID_B)
              for i in range(0, len(ids), max_seq_length)})


@dataclasses.dataclass
class RecordsInfo:
  """What `prepare_records` produced.

  Attributes:
    path: str, the record file.
    num_real: int, real examples (None when a cached training file was kept: the original does not re-read).
    num_padding: int, fake examples appended for the eval batch size (0 for training).
    written: bool, False when an existing file was kept.
    unanswered: list of str, the files read without `answers` (an eval split's, to be predicted; their questions'
      label_ids are 0, so they cannot be evaluated).
    examples: list of `InputExample`, an eval split's real examples in record order (what a prediction names).
  """
  path: str
  num_real: int
  num_padding: int
  written: bool
  unanswered: list = dataclasses.field(default_factory=list)
  examples: list = dataclasses.field(default_factory=list)

  @property
  def num_records(self):
    return None if self.num_real is None else self.num_real + self.num_padding


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecordsConfig:
  """What `prepare_records` is asked for: run_race.py's flags that decide a split's cached records.

  Attributes:
    data_dir: str, the RACE root.
    spiece_model_file: str, its basename enters the file name.
    output_dir: str, where the records go (created).
    max_seq_length, max_qa_length, fix_option_aliasing: as `data.convert_single_example` (lengths checked here).
    eval_batch_size: int, required for dev/test (the set is padded to a multiple of it).
    high_only, middle_only: read one level only. sorted_file_order: read the files sorted by name, not in the
      directory's order (`data.level_files`).
    overwrite_data: rewrite a cached file. shuffle_seed: the training shuffle's seed (None = unseeded, as the
      original).
    uncased: whether the tokenizer lower-cases the text (only in the cache's fingerprint: the tokenizer is passed).
  """
  data_dir: str
  spiece_model_file: str
  output_dir: str
  max_seq_length: int
  max_qa_length: int
  eval_batch_size: int = None
  high_only: bool = False
  middle_only: bool = False
  fix_option_aliasing: bool = False
  overwrite_data: bool = False
  shuffle_seed: int = None
  sorted_file_order: bool = False
  uncased: bool = False

  def __post_init__(self):
    data.check_lengths(self.max_seq_length, self.max_qa_length)
    check_field_types(self)  # high_only="False" read the high files only (sweep 35)


def _fingerprint(c, split):
  """The `records.cache_fingerprint` of a split's records: the bytes of every file it reads (in reading order), the
  SentencePiece model's, and the settings that change the records, the training shuffle's seed where it is set
  (one order; an unseeded run's records are shuffled anew by each run)."""
  padding = None if split == "train" else c.eval_batch_size  # the evaluation sets are padded to its multiple
  parts = [repr((split, c.max_seq_length, c.max_qa_length, c.fix_option_aliasing, padding, c.uncased))]
  if split == "train" and c.shuffle_seed is not None:
    parts.append(repr(("shuffle_seed", c.shuffle_seed)))
  files = data.split_files(c.data_dir, split, c.high_only, c.middle_only, c.sorted_file_order)
  for path in [c.spiece_model_file] + [p for p, _ in files]:
    with fileio.open_file(path, "rb") as f:
      parts += [os.path.basename(path), f.read()]
  return records.cache_fingerprint(*parts)


def prepare_records(config, split, tokenize_fn):
  """The original `run_race.main`'s data steps for one split: read, shuffle or pad, convert, write (cached).

  train: if the cached file is missing (or overwrite_data), read the examples, shuffle them
  (`random.Random(shuffle_seed)`; None = unseeded, as the original) and write. dev/test: always read the
  examples (the eval step count needs them), pad them with `PaddingInputExample`s to a multiple of
  eval_batch_size, and write unless cached. A cache made from other files, SentencePiece model or settings (its
  fingerprint file says so, `records.reusable_cache`) is written again: the original reused it by name, so
  another --data_dir, or --high_only after both levels, read the first records. This process then holds the
  file's lock until it ends: another run cannot write it meanwhile, and a run here that would write a file another
  live run uses is refused with a ValueError (`locks.cache_lock`).

  Args:
    config: `RecordsConfig`.
    split: "train", "dev" or "test".
    tokenize_fn: text -> list of int (`tokenization.make_tokenize_fn`).

  Returns:
    `RecordsInfo`. Eval steps = info.num_records // eval_batch_size.
  """
  c = config
  path = records.cache_path(c.output_dir, record_file_name(c.spiece_model_file, c.max_seq_length, split, c.high_only,
                                                           c.middle_only))
  try:
    fingerprint = _fingerprint(c, split)
  except FileNotFoundError:  # no files to read: a cached training file is kept by its name, as the original does
    fingerprint = None
  if split != "train" and c.eval_batch_size is None:
    raise ValueError(f"Preparing the {split} records needs eval_batch_size (the set is padded to a multiple of it). "
                     "Pass --eval_batch_size.")
  reusable = lambda: records.reusable_cache(path, fingerprint)
  with locks.cache_lock(path, reusable, c.overwrite_data) as reuse:  # kept from other runs while this one lives
    if split == "train":
      if reuse:
        logging.info("Keeping the existing tfrecord %s (set --overwrite_data to rebuild it).", path)
        return RecordsInfo(path=path, num_real=None, num_padding=0, written=False)
      examples = data.get_examples(c.data_dir, split, c.high_only, c.middle_only, c.sorted_file_order)
      random.Random(c.shuffle_seed).shuffle(examples)
      num_real, unanswered, real_examples = len(examples), [], []
    else:
      real_examples = data.get_examples(c.data_dir, split, c.high_only, c.middle_only, c.sorted_file_order,
                                        answers_required=False)
      num_real = len(real_examples)
      unanswered = list(dict.fromkeys(ex.file for ex in real_examples if ex.label is None))
      examples = data.pad_examples(real_examples, c.eval_batch_size)
    if not examples:
      raise ValueError(f"The RACE {split} split under {c.data_dir} has no questions. Check --data_dir.")
    written = write_records(examples, tokenize_fn, path, c.max_seq_length, c.max_qa_length, c.fix_option_aliasing,
                            not reuse, fingerprint)
  return RecordsInfo(path=path, num_real=num_real, num_padding=len(examples) - num_real,
                     written=written is not None, unanswered=unanswered, examples=real_examples)


def name_to_features(max_seq_length):
  """The parsing spec of one record (see the module docstring)."""
  n = max_seq_length * data.NUM_CHOICES
  return {
      "input_ids": tf.io.FixedLenFeature([n], tf.int64),
      "input_mask": tf.io.FixedLenFeature([n], tf.float32),
      "segment_ids": tf.io.FixedLenFeature([n], tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }


def race_dataset(input_file, max_seq_length, read, input_context=None):
  """Reads RACE records as the original `file_based_input_fn_builder`, batch-major.

  Training shuffles (reshuffled each epoch) and repeats forever; eval reads once in order (`read`: a
  `records.ReadConfig`). The original drops the remainder in both (eval sets are padded to a multiple of the batch
  size). With an input_context (tf.distribute) the records are sharded per input pipeline and read.batch_size is
  per replica.

  Args:
    input_file: str or list of str, record files.
    max_seq_length: int L, as written.
    read: `records.ReadConfig`; its batch_size is B examples, i.e. 4B sequences.
    input_context: a `tf.distribute.InputContext` or None.

  Returns:
    A tf.data.Dataset of dicts: input_ids int32 [B, 4, L]; input_mask float32 [B, 4, L] (1 = padding);
    segment_ids int32 [B, 4, L]; label_ids int32 [B]; is_real_example int32 [B] (0 = padding example).
    `x.reshape([B * 4, L])` gives the model's batch-major rows b*4 + c; its transpose is the original's [L, 4B].
  """
  return records.fine_tuning_dataset(
      input_file, name_to_features(max_seq_length), read, input_context,
      shapes={name: [data.NUM_CHOICES, max_seq_length] for name in ("input_ids", "input_mask", "segment_ids")},
      missing_hint="Write it first (prepare_records) or check --output_dir.")


def race_dataset_fn(train_file, max_seq_length, per_replica_batch_size, shuffle_buffer=2048, seed=None, n_token=None):
  """A `dataset_fn(input_context, start_step)` over the training records for the trainer (resumable with a seed:
  see `records.resumable_dataset_fn`; ids checked against n_token: `records.ReadConfig`)."""
  read = records.ReadConfig.training(per_replica_batch_size, shuffle_buffer, seed, n_token)
  return records.resumable_dataset_fn(
      lambda input_context: race_dataset(train_file, max_seq_length, read, input_context), seed)
