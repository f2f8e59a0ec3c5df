"""What failed when a run could not read its records: the damaged file and record, the record holding a token id
outside the model's vocabulary, or whole records that do not hold the features the run reads (written for another
task or settings), for the one error line."""

import contextlib
import os
import re

import tensorflow as tf

from xlnet_tf.data import records
from xlnet_tf.data import token_checks


# What reading or parsing records raises when a file is damaged, truncated or gone, or holds a token id out of
# range (`records.checked_token_ids`).
READ_ERRORS = (tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)

_BAD_TOKEN_ID = re.compile(re.escape(records.BAD_TOKEN_ID) + r": feature (\w+), n_token=(\d+)\.")
_WRONG_RECORD_COUNT = re.compile(re.escape(records.WRONG_RECORD_COUNT) +
                                 r":\] \[(.*?)\] \[(\d+)\] \[(\d+)\] \[(\d+)\] \[(\d+)\]")
# What tf.io.parse_example (and parse_single_example: no Index) says of a whole record whose features differ from
# the spec it is parsed with: a feature of another type or length ("Key: label_ids, Index: 0. Data types don't
# match. ...", "Key: target.  Can't parse serialized Example: ..."), or one it lacks.
_OTHER_FEATURES = re.compile(r"Key: (\w+)(?:, Index: \d+)?\.\s+(.*?)\s*(?:\[\[|$)|"
                             r"Feature: (\w+) \(data type: \w+\) is required but could not be found", re.S)


def describe_read_error(error, files):
  """The start of the line that reports `error` (one of `READ_ERRORS`, raised while reading `files`): it names
  the unreadable file and record (`records.find_corrupt_record`), or the record holding a token id outside the
  vocabulary (`token_checks.bad_token_id_line`), or, where every record reads, says that they hold other features
  than the run parses (cached records of another task); and says how to fix it. Every record of `files` is read
  again. None if `error` is about no record (an InvalidArgumentError that is neither a failed Example parse nor a
  bad id).

  Args:
    error: the tf.errors.OpError the input pipeline raised.
    files: list of str, the record files behind the pipeline; None or empty: name none, quote the error.
  """
  quoted = " ".join(error.message.split())[:300]
  bad_id = _BAD_TOKEN_ID.search(error.message)
  if bad_id:
    key, n_token = bad_id.group(1), int(bad_id.group(2))
    fix = ("Rewrite it with the SentencePiece model of the model's vocabulary (data_utils.py for pretraining "
           "records), give the model the vocabulary it was written with, or remove it")
    found = token_checks.bad_token_id_line(files, n_token, fix, key, num_records=None) if files else None
    return found or (f"A record holds a token id outside the model's vocabulary [0, n_token={n_token}) ({quoted}). "
                     f"{fix}")
  wrong_count = _WRONG_RECORD_COUNT.search(error.message)
  if wrong_count:
    return _wrong_count_line(*wrong_count.groups())
  if isinstance(error, tf.errors.InvalidArgumentError) and "Example" not in error.message:
    return None
  found = records.find_corrupt_record(files) if files else None
  other = _OTHER_FEATURES.search(error.message)
  if other and not found:
    return _other_features_line(other, files)
  where = (f"Record file {found[0]} is unreadable at record {found[1]} ({found[2]})" if found else
           f"A training record is unreadable ({quoted})")
  return f"{where}. Rewrite the file with the tool that wrote it (data_utils.py for pretraining records) or remove it"


def _wrong_count_line(path, steps, bsz, step, rows):
  """The line for a pretraining record file of another length than its record_info says
  (`records.counted_record_dataset`'s assertion: the step it failed at and the rows read there)."""
  steps, bsz, step, rows = int(steps), int(bsz), int(step), int(rows)
  held = f"more than {steps * bsz}" if step >= steps and rows else str(step * bsz + rows)
  return (f"Record file {path} holds {held} records, but its record_info says {steps} batches of {bsz} "
          f"({steps * bsz}): it was cut short (a copy or a write that stopped?) or changed after data_utils.py wrote "
          "it, and the rows of every later step would be shifted. Copy it again, or write it again with "
          "data_utils.py")


def _other_features_line(match, files):
  """The line for whole records that do not hold the features the run parses (`_OTHER_FEATURES`'s `match`)."""
  key, why = (match.group(1), " ".join(match.group(2).split()).rstrip(".")) if match.group(1) else (
      match.group(3), "missing")
  if not files:
    which = "The records"
  else:
    which = f"The records in {files[0]}" + (f" (and {len(files) - 1} more files)" if len(files) > 1 else "")
  pretraining = files and all(".seqlen-" in os.path.basename(f) for f in files)  # data_utils.py's names
  example = ("pretraining records of another --seq_len, --reuse_len or --num_predict than this run's: their file "
             "names say theirs" if pretraining else "the integer labels of a classification task, read as the float "
             "labels of a regression task, under the same file name")
  return (f"{which} do not hold the features this run reads (feature {key}: {why}): they were written for another "
          f"task or other settings (e.g. {example}). Write them again: pass --overwrite_data=True (cached "
          "fine-tuning records), or run data_utils.py with this run's settings (pretraining records)")


@contextlib.contextmanager
def records_named(files, then=lambda: ", then rerun"):
  """Turns a `READ_ERRORS` raised inside (reading `files`) into a ValueError of one line (`describe_read_error`)
  that ends with `then()` and a full stop; an error about no record passes through.

  Args:
    files: list of str, the record files being read.
    then: () -> str, what the line says after the fix (called after the failure, e.g. to name the latest
      checkpoint).
  """
  try:
    yield
  except READ_ERRORS as e:
    where = describe_read_error(e, files)
    if where is None:
      raise  # not a record that failed to read, parse or check
    raise ValueError(f"{where}{then()}.") from None
