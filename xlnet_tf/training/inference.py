"""Running a model over evaluation batches: the loop every task's eval and predict share."""

import numpy as np


def run_batches(step, dataset, feature_keys=()):
  """Runs `step` over every batch of `dataset` and concatenates what comes back, in order.

  Args:
    step: features -> dict of tensors or arrays, each with the batch as its first dimension (e.g. a traced forward
      pass).
    dataset: an iterable of feature dicts (a batched `tf.data.Dataset`).
    feature_keys: features to pass through beside the outputs (e.g. the labels).

  Returns:
    dict name -> numpy array over all examples, the step's outputs and the passed-through features; an empty dict
    when the dataset is empty.
  """
  out = {}
  for features in dataset:
    batch = dict(step(features))
    batch.update((k, features[k]) for k in feature_keys)
    for k, v in batch.items():
      out.setdefault(k, []).append(np.asarray(v))
  return {k: np.concatenate(v) for k, v in out.items()}
