"""Checking records before a run uses them: their token ids must lie in the model's vocabulary."""

import numpy as np
import tensorflow as tf

from xlnet_tf.data.records import record_dataset


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
