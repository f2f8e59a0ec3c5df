"""data.read_errors: the line that names a damaged record file and record."""

import tensorflow as tf

from xlnet_tf.data import read_errors


def _write_records(path, n):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for i in range(n):
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          "x": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))})).SerializeToString())


def _read_error(paths):
  try:
    for _ in tf.data.TFRecordDataset([str(p) for p in paths]):
      pass
  except read_errors.READ_ERRORS as e:
    return e
  raise AssertionError("every record read")


def test_names_the_file_and_the_record(tmp_path):
  good, bad = tmp_path / "good.tfrecord", tmp_path / "bad.tfrecord"
  _write_records(good, 3)
  _write_records(bad, 4)
  data = bad.read_bytes()
  bad.write_bytes(data[:len(data) - 5])  # the last record cut short
  error = _read_error([good, bad])
  line = read_errors.describe_read_error(error, [str(good), str(bad)])
  assert line.startswith(f"Record file {bad} is unreadable at record 3 (")
  assert line.endswith("Rewrite the file with the tool that wrote it (data_utils.py for pretraining records) or "
                       "remove it")
  # Without the file list, the error's own words.
  assert read_errors.describe_read_error(error, None).startswith("A training record is unreadable (")


def test_an_error_that_is_not_about_a_record_is_not_described():
  assert read_errors.describe_read_error(tf.errors.InvalidArgumentError(None, None, "Incompatible shapes"), []) is None
