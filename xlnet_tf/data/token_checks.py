"""Checking records before a run uses them: their token ids must lie in the model's vocabulary (and a
classification record's label id among the task's labels).

Two checks share the wording here: every tool checks the first records on the host before it starts
(`check_token_ids`), and every record is checked as the input pipeline reads it (`records.checked_token_ids`),
after whose failure `read_errors` scans the files (`bad_token_id_line`) to name the record.
"""

import numpy as np
import tensorflow as tf

from xlnet_tf.data.records import record_dataset

_CHUNK = 1024  # records parsed at once by a scan


def bad_token_id_line(files, n_token, fix, key="input_ids", num_records=256, damaged="Write it again."):
  """The line that names a record of `files` holding a token id outside [0, n_token) (the one with the largest such
  id among the first records parsed together that hold one), or None if the records checked hold none. Reading
  stops at an unreadable record (the reader names it when it gets there).

  Args:
    files: str or list of str, record files, read in order.
    n_token: int, the model's vocabulary size.
    fix: str, the sentence that ends the line: which flag or file to change.
    key: the int64 feature of token ids ("input_ids"; pretraining records: "input", and "target", which the line
      names: "target token id").
    num_records: how many records to check, over all files; None: all of them.
    damaged: str, the sentence that ends the line where the id is negative (no vocabulary's: a damaged file, not
      another vocabulary's, which `fix` would blame; sweep 27).

  Returns:
    str or None: "{file} holds token id {id} (record {index in the file}), outside the model's vocabulary
    [0, n_token={n_token}). {fix}", the id being the largest out of range among the records parsed with it.
  """
  what = "target token id" if key == "target" else "token id"
  files = [files] if isinstance(files, str) else list(files)
  left = num_records
  for path in files:
    if left is not None and left <= 0:
      return None
    found, read, complete = _scan(path, n_token, key, left)
    if found:
      value, record = found
      if value < 0:
        return (f"{path} holds {what} {value} (record {record}), which no vocabulary has: the file is damaged, "
                f"or was not written as records of these tools. {damaged}")
      return (f"{path} holds {what} {value} (record {record}), outside the model's vocabulary "
              f"[0, n_token={n_token}). {fix}")
    if not complete:
      return None
    left = None if left is None else left - read
  return None


def _scan(path, n_token, key, limit):
  """Parses the records of `path` (the first `limit`; None: all) in chunks, stopping at the first chunk with an id
  outside [0, n_token). Returns ((largest bad id, its record), records read, True) on one; (None, records read,
  whether every record was read and parsed) otherwise."""
  spec = {key: tf.io.VarLenFeature(tf.int64)}
  dataset = record_dataset([path]) if limit is None else record_dataset([path]).take(limit)
  records, first, complete = iter(dataset), 0, True
  while True:
    chunk = []
    try:
      for record in records:
        chunk.append(record)
        if len(chunk) == _CHUNK:
          break
    except tf.errors.OpError:
      complete = False  # an unreadable record: check what was read before it
    if not chunk:
      return None, first, complete
    try:
      ids = tf.io.parse_example(tf.stack(chunk), spec)[key]
    except tf.errors.OpError:
      return None, first, False  # not Examples: the reader says so
    values, rows = ids.values.numpy(), ids.indices[:, 0].numpy()
    bad = (values < 0) | (values >= n_token)
    if bad.any():
      i = int(np.argmax(np.where(bad, np.abs(values), -1)))
      return (values[i], first + rows[i]), first + len(chunk), True
    first += len(chunk)
    if not complete or len(chunk) < _CHUNK:
      return None, first, complete


def check_token_ids(files, n_token, fix, key="input_ids", num_records=256, damaged="Write it again."):
  """Checks that the token ids of the first `num_records` records of `files` are in [0, n_token).

  An embedding lookup checks its ids on the CPU only (a GPU gathers zeros for an id out of range, and the run
  trains on), so every tool checks its first records here, on the host, before training or predicting with them;
  the input pipeline then checks every record as it reads it (`records.checked_token_ids`).

  Args: as `bad_token_id_line`.

  Raises:
    ValueError: one line naming the file, the record, the largest bad id and n_token, then `fix`.
  """
  line = bad_token_id_line(files, n_token, fix, key, num_records, damaged)
  if line:
    raise ValueError(line)


def check_fine_tuning_ids(files, n_token, spiece_model_file, rewrite="pass --overwrite_data=True to rewrite it"):
  """`check_token_ids` for a fine-tuning tool's cached records: ids beyond n_token mean they were written with
  another SentencePiece model than `spiece_model_file`; `rewrite` says how to write them again."""
  check_token_ids(files, n_token, fix=(
      f"It was written with another SentencePiece model than --spiece_model_file {spiece_model_file}: {rewrite}, "
      "or pass the --model_config_path of the model it was written for."),
      damaged=f"{rewrite[:1].upper()}{rewrite[1:]}.")


def check_label_ids(path, n_class, rewrite="pass --overwrite_data=True to rewrite it"):
  """Checks that every record of the classification records `path` holds a `label_ids` in [0, n_class): records
  written with a longer label list (e.g. by the original code, whose cache carries no record of its labels)
  would train with a zero loss on those examples (a one-hot of an id out of range is all zeros).

  Raises:
    ValueError: one line naming the file, the record, the largest bad label id and n_class; `rewrite` says how to
      write the records again.
  """
  found, _, _ = _scan(path, n_class, "label_ids", None)
  if found:
    value, record = found
    raise ValueError(f"{path} holds label id {value} (record {record}), outside the task's {n_class} labels "
                     f"[0, {n_class}): it was written with another label list; {rewrite}.")
