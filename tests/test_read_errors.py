"""data.read_errors: the line that names a damaged record file and record, or the record holding a token id
outside the vocabulary."""

import pytest
import tensorflow as tf

from xlnet_tf.data import example_encoder, read_errors, records


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


def _parse_error(path, spec):
  try:
    for _ in tf.data.TFRecordDataset(str(path)).batch(2).map(lambda r: tf.io.parse_example(r, spec)):
      pass
  except read_errors.READ_ERRORS as e:
    return e
  raise AssertionError("every record parsed")


def test_records_of_another_task_are_not_called_unreadable(tmp_path):
  """Whole records whose features differ from the spec (cached records of a classification task, integer labels,
  read by a regression task under the same file name): the file, the feature, and --overwrite_data; not damage."""
  path = tmp_path / "spiece.model.len-32.train.tf_record"
  _write_records(path, 3)
  error = _parse_error(path, {"x": tf.io.FixedLenFeature([], tf.float32)})
  line = read_errors.describe_read_error(error, [str(path)])
  assert line.startswith(f"The records in {path} do not hold the features this run reads (feature x: Data types "
                         "don't match. Data type: int64 but expected type: float): they were written for another "
                         "task or other settings"), line
  assert "pass --overwrite_data=True" in line and "unreadable" not in line, line
  line = read_errors.describe_read_error(_parse_error(path, {"y": tf.io.FixedLenFeature([], tf.int64)}), None)
  assert line.startswith("The records do not hold the features this run reads (feature y: missing)"), line
  with pytest.raises(ValueError, match=r"\(feature x: Number of int64 values != expected\. Values size: 1 but "
                                       r"output shape: \[2\]\).*, then rerun\.$"):
    with read_errors.records_named([str(path)]):
      raise _parse_error(path, {"x": tf.io.FixedLenFeature([2], tf.int64)})


def test_an_error_that_is_not_about_a_record_is_not_described():
  assert read_errors.describe_read_error(tf.errors.InvalidArgumentError(None, None, "Incompatible shapes"), []) is None


def _bad_id_error(n_token):
  """The error the input pipeline raises on a token id >= n_token (`records.checked_token_ids`)."""
  try:
    records.checked_token_ids(tf.constant([3, 5]), n_token, "input_ids")
  except read_errors.READ_ERRORS as e:
    return e
  raise AssertionError("no error")


def test_names_the_record_holding_a_token_id_outside_the_vocabulary(tmp_path):
  good, bad = tmp_path / "good.tfrecord", tmp_path / "bad.tfrecord"
  for path, rows in ((good, [[1, 2]] * 3), (bad, [[1, 2]] * 2 + [[1, 7]] + [[4, 2]])):
    with tf.io.TFRecordWriter(str(path)) as writer:
      for ids in rows:
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "input_ids": example_encoder.int_feature(ids)})).SerializeToString())
  error = _bad_id_error(5)
  assert error.message.count(f"{records.BAD_TOKEN_ID}: feature input_ids, n_token=5.") == 1, error.message
  line = read_errors.describe_read_error(error, [str(good), str(bad)])
  assert line.startswith(f"{bad} holds token id 7 (record 2), outside the model's vocabulary [0, n_token=5). "
                         "Rewrite it with the SentencePiece model"), line
  assert read_errors.describe_read_error(error, None).startswith(
      "A record holds a token id outside the model's vocabulary [0, n_token=5) (")
  with pytest.raises(ValueError, match=rf"^{bad} holds token id 7 \(record 2\), .* or remove it; then\.$"):
    with read_errors.records_named([str(good), str(bad)], then=lambda: "; then"):
      raise error
  with pytest.raises(tf.errors.InvalidArgumentError, match="Incompatible shapes"):  # not about a record
    with read_errors.records_named([str(good)]):
      raise tf.errors.InvalidArgumentError(None, None, "Incompatible shapes")
  assert records.checked_token_ids(tf.constant([0, 4]), 5, "input_ids").numpy().tolist() == [0, 4]
  assert records.checked_token_ids(tf.constant([-1]), None, "input_ids").numpy().tolist() == [-1]  # unchecked
  assert "n_token=5" in _bad_id_error(5).message and _bad_id_error(4) is not None
