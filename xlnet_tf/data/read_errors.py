"""What failed when a training run could not read its records: the damaged file and record, for the error line."""

import tensorflow as tf

from xlnet_tf.data import records


# What reading or parsing records raises when a file is damaged, truncated or gone.
READ_ERRORS = (tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)


def describe_read_error(error, files):
  """The start of the line that reports `error` (one of `READ_ERRORS`, raised while reading `files`): it names
  the unreadable file and record (`records.find_corrupt_record`; every record of `files` is read again) and says
  how to fix it. None if `error` is not about a record (an InvalidArgumentError that is not a failed Example parse).

  Args:
    error: the tf.errors.OpError the input pipeline raised.
    files: list of str, the record files behind the pipeline; None or empty: name none, quote the error.
  """
  if isinstance(error, tf.errors.InvalidArgumentError) and "Example" not in error.message:
    return None
  found = records.find_corrupt_record(files) if files else None
  where = (f"Record file {found[0]} is unreadable at record {found[1]} ({found[2]})" if found else
           f"A training record is unreadable ({' '.join(error.message.split())[:300]})")
  return f"{where}. Rewrite the file with the tool that wrote it (data_utils.py for pretraining records) or remove it"
