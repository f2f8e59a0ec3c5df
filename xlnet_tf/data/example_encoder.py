"""Writing records: a fast, deterministic `tf.train.Example` encoder for int64 features (pretraining records) and
the `tf.train.Feature` builders of the fine-tuning writers."""

import numpy as np
import tensorflow as tf


def _varint(n):
  """Protobuf varint of a non-negative int."""
  out = bytearray()
  while n > 0x7F:
    out.append((n & 0x7F) | 0x80)
    n >>= 7
  out.append(n)
  return bytes(out)


_SMALL_VARINTS = []


def _length_varint(n):
  """`_varint(n)`, from a table for n < 2**14 (lengths inside an Example)."""
  if not _SMALL_VARINTS:
    _SMALL_VARINTS.extend(_varint(i) for i in range(1 << 14))
  return _SMALL_VARINTS[n] if n < (1 << 14) else _varint(n)


def _varints(values):
  """Protobuf varints of int64 [n] (negatives in the 10-byte two's complement form) -> (bytes, int64 [n] sizes)."""
  if values.size and values.min() >= 0 and values.max() < (1 << 21):  # At most 3 bytes each: vectorised.
    x = values.astype(np.uint32)
    two, three = x >= (1 << 7), x >= (1 << 14)
    words = ((x & 0x7F) | (two.astype(np.uint32) << 7) | (((x >> 7) & 0x7F) << 8) | (three.astype(np.uint32) << 15)
             | ((x >> 14) << 16))  # The varint's bytes, little-endian.
    keep = np.empty([x.size, 4], bool)
    keep[:, 0], keep[:, 1], keep[:, 2], keep[:, 3] = True, two, three, False
    return words.astype("<u4").view(np.uint8).reshape(-1, 4)[keep].tobytes(), 1 + two.astype(np.int64) + three
  encoded = [_varint(v & 0xFFFFFFFFFFFFFFFF) for v in values.tolist()]
  return b"".join(encoded), np.array([len(e) for e in encoded], np.int64)


def serialize_examples(examples):
  """`tf.train.Example`s of int64 features, serialised deterministically (keys sorted) without building protos.

  Each result equals `tf.train.Example(...).SerializeToString(deterministic=True)` (checked in the tests); the
  varints of all examples are encoded in one vectorised pass.

  Args:
    examples: list of dicts str -> int64 [n] array or list of ints.

  Returns:
    List of bytes, one per example.
  """
  keys = [sorted(features) for features in examples]
  arrays = [np.asarray(features[k], dtype=np.int64).reshape(-1) for features, ks in zip(examples, keys) for k in ks]
  if not arrays:
    return [b"\x0a\x00"] * len(examples)  # An empty `features` message.
  packed, nbytes = _varints(np.concatenate(arrays))
  value_offsets = np.cumsum([0] + [a.size for a in arrays])
  offsets = np.concatenate([[0], np.cumsum(nbytes)])[value_offsets].tolist()
  varint = _length_varint
  out, j = [], 0
  for ks in keys:
    body = []
    for key in ks:
      data = packed[offsets[j]:offsets[j + 1]]
      int64_list = b"\x0a" + varint(len(data)) + data if arrays[j].size else b""
      j += 1
      feature = b"\x1a" + varint(len(int64_list)) + int64_list
      key_bytes = key.encode("utf-8")
      entry = b"\x0a" + varint(len(key_bytes)) + key_bytes + b"\x12" + varint(len(feature)) + feature
      body.append(b"\x0a" + varint(len(entry)) + entry)
    features_bytes = b"".join(body)
    out.append(b"\x0a" + varint(len(features_bytes)) + features_bytes)
  return out


def serialize_example(features):
  """One example: `serialize_examples([features])[0]`."""
  return serialize_examples([features])[0]


def int_feature(values):
  """A `tf.train.Feature` of int64 values."""
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values):
  """A `tf.train.Feature` of float values."""
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def example_bytes(features):
  """{name: `tf.train.Feature`} as a serialized `tf.train.Example`, its features sorted by name: the same bytes in
  every process (the default serialization ordered the map anew in each, so two runs' record files differed under
  `cmp` while their records were equal; sweep 36)."""
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString(deterministic=True)
