"""Classifier features, as the original `classifier_utils.py`: examples -> `A <sep> B <sep> <cls>` LEFT-padded ids,
segment ids and input mask; the cached TFRecords (`record_file_name`) and their `tf.data` reader.
"""

import collections
import os

import tensorflow as tf
from absl import logging

from xlnet_tf import fileio
from xlnet_tf import locks
from xlnet_tf.data import example_encoder
from xlnet_tf.data import records
from xlnet_tf.data.records import InputFeatures, PaddingInputExample
from xlnet_tf.data.tokenization import CLS_ID, SEP_ID
from xlnet_tf.tasks.classifier.examples import EVAL_SPLITS


SEG_ID_A = 0


SEG_ID_B = 1


SEG_ID_CLS = 2


SEG_ID_SEP = 3  # Defined by the original, never used by the classifier.


SEG_ID_PAD = 4


def check_max_seq_length(max_seq_length, is_pair):
  """A sequence needs room for one token of each text plus SEP (x2 for pairs) and CLS."""
  need = 5 if is_pair else 3
  if not records.is_int_at_least(max_seq_length, need):
    kind = "sentence-pair" if is_pair else "single-sentence"
    raise ValueError(f"--max_seq_length must be at least {need} for a {kind} task (room for "
                     f"{'A SEP B SEP CLS' if is_pair else 'A SEP CLS'}). Received: {max_seq_length!r}. "
                     "Use a larger --max_seq_length (the original's default is 128).")


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Pops tokens from the end of the longer list (b on ties) until the pair fits into max_length, in place."""
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenize_fn):
  """Converts one `InputExample` (or `PaddingInputExample`) into `InputFeatures`, as the original.

  Args:
    ex_index: int, the example's position; the first 5 are logged at DEBUG level (the CLI shows them with `-v 1`;
      the original logged them at INFO).
    example: InputExample or PaddingInputExample.
    label_list: list of labels (label_id = index in it), or None for regression (label_id = float(label)).
    max_seq_length: int, the fixed sequence length L.
    tokenize_fn: callable, text -> list of int SentencePiece ids.

  Returns:
    InputFeatures with input_ids int [L] (left padded with 0), input_mask [L] (1 = padding, 0 = real token),
    segment_ids [L] (A and its SEP 0, B and its SEP 1, CLS 2, padding 4), label_id and is_real_example.
  """
  if isinstance(example, PaddingInputExample):
    check_max_seq_length(max_seq_length, is_pair=False)
    return InputFeatures(input_ids=[0] * max_seq_length, input_mask=[1] * max_seq_length,
                         segment_ids=[0] * max_seq_length, label_id=0.0 if label_list is None else 0,
                         is_real_example=False)

  tokens_a = list(tokenize_fn(example.text_a))
  tokens_b = list(tokenize_fn(example.text_b)) if example.text_b else None
  check_max_seq_length(max_seq_length, is_pair=bool(tokens_b))
  if tokens_b:
    _truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
  else:
    tokens_a = tokens_a[:max_seq_length - 2]

  input_ids = tokens_a + [SEP_ID]
  segment_ids = [SEG_ID_A] * len(input_ids)
  if tokens_b:
    input_ids += tokens_b + [SEP_ID]
    segment_ids += [SEG_ID_B] * (len(tokens_b) + 1)
  input_ids.append(CLS_ID)
  segment_ids.append(SEG_ID_CLS)

  delta = max_seq_length - len(input_ids)
  input_mask = [1] * delta + [0] * len(input_ids)
  input_ids = [0] * delta + input_ids
  segment_ids = [SEG_ID_PAD] * delta + segment_ids

  if label_list is None:
    try:
      label_id = float(example.label)
    except (TypeError, ValueError):
      raise ValueError(f"Example {example.guid} has label {example.label!r}, but a regression task needs a number. "
                       "Fix the data, or drop --is_regression for a classification task.") from None
  else:
    if example.label not in label_list:
      raise ValueError(f"Example {example.guid} has label {example.label!r}, which is not in the label list "
                       f"{list(label_list)}. Fix the data or the task (--task_name).")
    label_id = list(label_list).index(example.label)

  if ex_index < 5:
    logging.debug("*** Example *** guid: %s", example.guid)
    logging.debug("input_ids: %s", " ".join(map(str, input_ids)))
    logging.debug("input_mask: %s", " ".join(map(str, input_mask)))
    logging.debug("segment_ids: %s", " ".join(map(str, segment_ids)))
    logging.debug("label: %s (id = %s)", example.label, label_id)
  return InputFeatures(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids, label_id=label_id)


def pad_examples(examples, batch_size):
  """Returns a new list: `examples` plus `PaddingInputExample`s up to a multiple of batch_size (original eval)."""
  if not records.is_int_at_least(batch_size, 1):
    raise ValueError(f"The eval batch size must be a positive integer. Received: {batch_size!r}. "
                     "Set --eval_batch_size.")
  return list(examples) + [PaddingInputExample() for _ in range(-len(examples) % batch_size)]


def predict_examples(eval_examples, eval_batch_size, do_eval):
  """The examples of the predict records, as the original's: with --do_eval, the eval examples `pad_examples` padded
  (the original padded its one example list in place before writing the predict records), else the examples alone.
  Their predictions end the prediction files, as the original's, unless --predict_eval_padding=False."""
  return pad_examples(eval_examples, eval_batch_size) if do_eval else list(eval_examples)


def record_file_name(spiece_model_file, max_seq_length, mode, eval_split="dev"):
  """The original's cached record file name (without directory).

  train: `{spm}.len-{L}.train.tf_record`; eval: `{spm}.len-{L}.{eval_split}.eval.tf_record`;
  predict: `{spm}.len-{L}.{eval_split}.predict.tf_record`, where spm is the basename of the SentencePiece model.
  As the original, neither the task nor num_passes is part of the name: pass overwrite_data when they change.
  """
  spm = os.path.basename(spiece_model_file)
  if mode == "train":
    return f"{spm}.len-{max_seq_length}.train.tf_record"
  if mode not in ("eval", "predict"):
    raise ValueError(f"mode must be 'train', 'eval' or 'predict'. Received: {mode!r}.")
  if eval_split not in EVAL_SPLITS:
    raise ValueError(f"--eval_split must be one of {EVAL_SPLITS}. Received: {eval_split!r}.")
  return f"{spm}.len-{max_seq_length}.{eval_split}.{mode}.tf_record"


def examples_fingerprint(examples, label_list, max_seq_length, num_passes, spiece_model_file, uncased, ordered=True):
  """The `records.cache_fingerprint` of cached records: the examples (guid, texts, label; in their order where
  `ordered`: evaluation and prediction, and training with --seed, whose shuffle then makes one order; as a set for
  the training records of an unseeded run, shuffled anew by each run), the labels, the length, num_passes, the
  SentencePiece model's bytes (its file name alone is in the records' name) and `uncased` (the text lower-cased)."""
  with fileio.open_file(spiece_model_file, "rb") as f:
    spm = f.read()
  rows = [repr(tuple(getattr(e, k, None) for k in ("guid", "text_a", "text_b", "label"))) for e in examples]
  return records.cache_fingerprint(repr(rows if ordered else sorted(rows)), repr(label_list), max_seq_length,
                                   num_passes, spm, f"uncased={bool(uncased)}")


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenize_fn, output_file,
                                            num_passes=1, overwrite_data=False, fingerprint=None):
  """Converts examples and writes them as TFRecords (atomically), as the original.

  Features: input_ids int64 [L], input_mask float [L] (1 = padding), segment_ids int64 [L], label_ids int64 []
  (float [] when label_list is None), is_real_example int64 [].

  Args:
    examples: list of InputExample / PaddingInputExample; not modified.
    label_list, max_seq_length, tokenize_fn: as `convert_single_example`.
    output_file: str, the record file.
    num_passes: int >= 1, the example list is written this many times in a row.
    overwrite_data: bool, rewrite an existing output_file; False keeps it (the original's cache behaviour) unless
      it was made from other inputs than `fingerprint` says.
    fingerprint: str or None, `examples_fingerprint` of this run's inputs (`records.reusable_cache`).

  Returns:
    The number of records written, or None if an existing file was kept. Either way this process holds the file's
    lock until it ends (`locks.cache_lock`).

  Raises:
    ValueError: the file is to be written and another live run uses it.
  """
  if not records.is_int_at_least(num_passes, 1):
    raise ValueError(f"--num_passes must be a positive integer. Received: {num_passes!r}.")
  reusable = lambda: records.reusable_cache(output_file, fingerprint)
  with locks.cache_lock(output_file, reusable, overwrite_data) as reuse:  # kept from other runs while this one lives
    if reuse:
      logging.info("Keeping the existing tfrecord %s (set --overwrite_data to rebuild it).", output_file)
      return None
    logging.info("Creating tfrecord %s.", output_file)
    all_examples = list(examples) * num_passes
    with fileio.atomic_files() as out:  # the records and their fingerprint file, together (`records.mark_cache`)
      with tf.io.TFRecordWriter(out.path(output_file)) as writer:
        for ex_index, example in enumerate(all_examples):
          if ex_index % 10000 == 0:
            logging.info("Writing example %d of %d", ex_index, len(all_examples))
          feature = convert_single_example(ex_index, example, label_list, max_seq_length, tokenize_fn)
          features = collections.OrderedDict()
          features["input_ids"] = example_encoder.int_feature(feature.input_ids)
          features["input_mask"] = example_encoder.float_feature(feature.input_mask)
          features["segment_ids"] = example_encoder.int_feature(feature.segment_ids)
          if label_list is not None:
            features["label_ids"] = example_encoder.int_feature([feature.label_id])
          else:
            features["label_ids"] = example_encoder.float_feature([float(feature.label_id)])
          features["is_real_example"] = example_encoder.int_feature([int(feature.is_real_example)])
          writer.write(example_encoder.example_bytes(features))
      if fingerprint:
        records.mark_cache(out, output_file, fingerprint)
  return len(all_examples)


def classifier_dataset(input_file, seq_length, is_regression, read, input_context=None):
  """Reads classifier TFRecords as `file_based_input_fn_builder` does, batch-major.

  Training shuffles (reshuffled each epoch) and repeats forever; eval reads once in order (`read`: a
  `records.ReadConfig`). With an input_context (tf.distribute) the records are sharded per input pipeline and
  read.batch_size is the per-replica batch size.

  Returns:
    A tf.data.Dataset of dicts: input_ids int32 [B, L]; input_mask float32 [B, L] (1 = padding, 0 = real);
    segment_ids int32 [B, L]; label_ids int32 [B] (float32 [B] when is_regression); is_real_example int32 [B]
    (0 = padding example, to be weighted out of metrics).
  """
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.float32),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }
  return records.fine_tuning_dataset(
      input_file, name_to_features, read, input_context,
      missing_hint="Write it first (file_based_convert_examples_to_features) or check --output_dir.")
