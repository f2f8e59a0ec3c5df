"""Reads a TFRecord file of `tf.train.Example`s back as it was written: every record, in file order."""

import numpy as np
import tensorflow as tf

# The features of a fine-tuning task's records (run_classifier.py, run_race.py).
FEATURES = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")


def read_records(path, features=None):
  """({feature: array [R, width], or [R] where the width is 1}, {feature: its kind, e.g. "int64_list"}), or
  ({}, None) for an empty file. Every record must hold exactly `features` (default: those of the first record),
  each of one kind throughout the file."""
  rows, kinds = {}, None
  for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
    feature = tf.train.Example.FromString(raw).features.feature
    assert features is None or sorted(feature) == sorted(features), sorted(feature)
    record_kinds = {k: feature[k].WhichOneof("kind") for k in feature}
    assert kinds in (None, record_kinds)  # the same features, each of the same kind, in every record
    kinds = record_kinds
    for k in feature:
      rows.setdefault(k, []).append(list(getattr(feature[k], kinds[k]).value))
  return {k: np.array(v)[:, 0] if len(v[0]) == 1 else np.array(v) for k, v in rows.items()}, kinds
