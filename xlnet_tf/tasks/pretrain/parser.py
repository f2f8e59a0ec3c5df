"""Parsing one pretraining record: the original `parser`, `_convert_example` and `_local_perm`, which sample the
factorisation order and build its attention mask (`perm_mask`), targets and `target_mapping`."""

import tensorflow as tf

from xlnet_tf.data.records import checked_token_ids
from xlnet_tf.data.tokenization import CLS_ID, SEP_ID


FEATURE_KEYS = ("input", "is_masked", "target", "seg_id", "label")


def sample_block_perm(perm_size, seed=None):
  """Samples the local factorisation order shared by every block of `perm_size` positions.

  Args:
    perm_size: int, block length.
    seed: int [2] or None. Stateless seed; None: stateful random (a new order at every call/record).

  Returns:
    int64 [perm_size], perm[i] = the rank of block position i in the factorisation order.
  """
  rng = tf.range(perm_size, dtype=tf.int64)
  if seed is None:
    return tf.random.shuffle(rng)
  return tf.random.experimental.stateless_shuffle(rng, seed=seed)


def local_perm(inputs, targets, is_masked, perm_size, seq_len, seed=None, perm=None):
  """The original `_local_perm`: a factorisation order and its attention mask for one segment.

  Position `blk*perm_size + i` gets rank `blk*perm_size + perm[i]`: the same local permutation in every block,
  and later blocks always come later. Unmasked tokens get rank -1 (everyone sees them, they see no masked or
  functional token); targets (masked, not SEP/CLS) see masked/functional tokens of strictly smaller rank; SEP/CLS
  see those of rank <= theirs, themselves included.

  Args:
    inputs: int64 [seq_len], token ids.
    targets: int64 [seq_len], the stored next-token targets.
    is_masked: bool [seq_len], True = selected for prediction at preprocessing.
    perm_size: int, block length of the permutation; must divide seq_len.
    seq_len: int, length of this segment.
    seed: int [2] or None, stateless seed of the permutation; None: stateful random. Ignored if `perm` is given.
    perm: int [perm_size] or None, the local order to use (perm[i] = rank of block position i); None: sample it.

  Returns:
    perm_mask: float32 [seq_len, seq_len]. 1 = i may NOT attend to j; 0 = may attend.
    new_targets: int64 [seq_len], current-token targets (`[inputs[0]] + targets[:-1]`, == inputs at targets).
    target_mask: float32 [seq_len], 1 = target (masked and not SEP/CLS).
    inputs_k: int64 [seq_len], = inputs.
    inputs_q: float32 [seq_len], = target_mask.
  """
  if perm is None:
    perm = sample_block_perm(perm_size, seed)
  perm = tf.cast(perm, tf.int64)
  offsets = tf.range(0, seq_len, perm_size, dtype=tf.int64)
  index = tf.reshape(offsets[:, None] + perm[None, :], [seq_len])

  non_func = tf.logical_not(tf.logical_or(tf.equal(inputs, SEP_ID), tf.equal(inputs, CLS_ID)))
  non_mask = tf.logical_and(tf.logical_not(is_masked), non_func)
  masked_or_func = tf.logical_not(non_mask)
  rev_index = tf.where(non_mask, tf.constant(-1, tf.int64), index)
  target_tokens = tf.logical_and(masked_or_func, non_func)
  target_mask = tf.cast(target_tokens, tf.float32)
  self_rev_index = tf.where(target_tokens, rev_index, rev_index + 1)
  perm_mask = tf.logical_and(self_rev_index[:, None] <= rev_index[None, :], masked_or_func[None, :])
  perm_mask = tf.cast(perm_mask, tf.float32)
  new_targets = tf.concat([inputs[0:1], targets[:-1]], axis=0)
  return perm_mask, new_targets, target_mask, inputs, target_mask


def parse_record(serialized, seq_len, reuse_len, perm_size, num_predict=None, use_bfloat16=False, seed=None,
                 n_token=None):
  """The original `parser` + `_convert_example`: one serialized record -> one example dict (unbatched).

  Args:
    serialized: string scalar, a tf.train.Example with int64 features input/is_masked/target/seg_id [seq_len]
      and label [1].
    seq_len, reuse_len, perm_size, num_predict: as `get_input_fn` (which validates them; see `validate_lengths`).
    use_bfloat16: bool, cast the float features to bfloat16.
    seed: int64 [2] or None, stateless seed of this record's permutations; None: stateful random.
    n_token: int or None, the model's vocabulary size: the record's `input` and `target` ids are asserted to lie in
      [0, n_token) (`records.checked_token_ids`; the loss reads `target`, which a writer other than data_utils.py
      need not make of the inputs); None: unchecked.

  Returns:
    dict of seg_id, label, [target_mapping], target, target_mask, perm_mask, input_k, input_q (module docstring
    shapes without the batch dimension).
  """
  spec = {"input": tf.io.FixedLenFeature([seq_len], tf.int64),
          "target": tf.io.FixedLenFeature([seq_len], tf.int64),
          "seg_id": tf.io.FixedLenFeature([seq_len], tf.int64),
          "label": tf.io.FixedLenFeature([1], tf.int64),
          "is_masked": tf.io.FixedLenFeature([seq_len], tf.int64)}
  example = tf.io.parse_single_example(serialized, spec)
  inputs = checked_token_ids(example.pop("input"), n_token, "input")
  target = checked_token_ids(example.pop("target"), n_token, "target")
  is_masked = tf.cast(example.pop("is_masked"), tf.bool)
  non_reuse_len = seq_len - reuse_len
  seeds = (None, None) if seed is None else (tf.random.experimental.stateless_fold_in(seed, 0),
                                              tf.random.experimental.stateless_fold_in(seed, 1))

  pm_0, tgt_0, tm_0, k_0, q_0 = local_perm(inputs[:reuse_len], target[:reuse_len], is_masked[:reuse_len],
                                           perm_size, reuse_len, seed=seeds[0])
  pm_1, tgt_1, tm_1, k_1, q_1 = local_perm(inputs[reuse_len:], target[reuse_len:], is_masked[reuse_len:],
                                           perm_size, non_reuse_len, seed=seeds[1])
  # The reuse part never sees the second part; the second part sees all of the reuse part.
  perm_mask = tf.concat([tf.concat([pm_0, tf.ones([reuse_len, non_reuse_len])], axis=1),
                         tf.concat([tf.zeros([non_reuse_len, reuse_len]), pm_1], axis=1)], axis=0)
  target = tf.concat([tgt_0, tgt_1], axis=0)
  target_mask = tf.concat([tm_0, tm_1], axis=0)
  input_k = tf.concat([k_0, k_1], axis=0)
  input_q = tf.concat([q_0, q_1], axis=0)

  if num_predict is not None:
    is_target = tf.cast(target_mask, tf.bool)
    indices = tf.boolean_mask(tf.range(seq_len, dtype=tf.int64), is_target)
    actual = tf.shape(indices)[0]
    check = tf.debugging.assert_less_equal(
        actual, num_predict, message=f"A record has more targets than num_predict={num_predict}: pass the "
        "--num_predict data_utils.py was run with.")
    with tf.control_dependencies([check]):
      pad_len = num_predict - actual
    target_mapping = tf.concat([tf.one_hot(indices, seq_len, dtype=tf.float32), tf.zeros([pad_len, seq_len])], 0)
    example["target_mapping"] = tf.reshape(target_mapping, [num_predict, seq_len])
    target = tf.concat([tf.boolean_mask(target, is_target), tf.zeros([pad_len], tf.int64)], axis=0)
    example["target"] = tf.reshape(target, [num_predict])
    target_mask = tf.concat([tf.ones([actual]), tf.zeros([pad_len])], axis=0)
    example["target_mask"] = tf.reshape(target_mask, [num_predict])
  else:
    example["target"] = tf.reshape(target, [seq_len])
    example["target_mask"] = tf.reshape(target_mask, [seq_len])
  example["perm_mask"] = tf.reshape(perm_mask, [seq_len, seq_len])
  example["input_k"] = tf.reshape(input_k, [seq_len])
  example["input_q"] = tf.reshape(input_q, [seq_len])

  for key, val in example.items():
    if val.dtype == tf.int64:
      example[key] = tf.cast(val, tf.int32)
    elif use_bfloat16 and val.dtype == tf.float32:
      example[key] = tf.cast(val, tf.bfloat16)
  return example
