"""Reads a fine-tuning task's TFRecord file back as the original wrote it: every record, in file order."""

import numpy as np
import tensorflow as tf

FEATURES = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")


def read_records(path):
  """({feature: array [R, ...]; label_ids and is_real_example [R]}, {feature: its kind, e.g. "int64_list"}); every
  record must hold exactly FEATURES, each of one kind throughout the file."""
  rows, kinds = {k: [] for k in FEATURES}, None
  for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
    feature = tf.train.Example.FromString(raw).features.feature
    assert sorted(feature) == sorted(FEATURES)
    record_kinds = {k: feature[k].WhichOneof("kind") for k in FEATURES}
    assert kinds in (None, record_kinds)
    kinds = record_kinds
    for k in FEATURES:
      rows[k].append(list(getattr(feature[k], kinds[k]).value))
  arrays = {k: np.array(v) for k, v in rows.items()}
  for k in ("label_ids", "is_real_example"):
    arrays[k] = arrays[k][:, 0]
  return arrays, kinds
