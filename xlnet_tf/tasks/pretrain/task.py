"""The pretraining task: the permutation LM loss for `training.Trainer`.
"""


import tensorflow as tf

from xlnet_tf.modeling import heads


class PretrainTask:
  """The original `two_stream_loss`: the permutation LM loss on the query stream, averaged over real targets.

  Features are the pretraining input pipeline's batch-major dicts (see `xlnet_tf.tasks.pretrain.input`).
  """

  is_language_model = True  # the trainer's log line adds perplexity and bits per character

  def __call__(self, model, features, mems, training):
    transpose = lambda name: tf.transpose(features[name], [1, 0])
    transpose3 = lambda name: tf.transpose(features[name], [1, 2, 0])
    target_mapping = transpose3("target_mapping") if "target_mapping" in features else None
    output, new_mems = model(transpose("input_k"), seg_ids=transpose("seg_id"), mems=mems,
                             perm_mask=transpose3("perm_mask"), target_mapping=target_mapping,
                             inp_q=transpose("input_q"), training=training)
    # The targets are input tokens of the records, whose ids are checked as they are read: no check in the step.
    lm_loss = heads.lm_loss(model.get_lm_logits(output), transpose("target"))
    target_mask = tf.cast(transpose("target_mask"), tf.float32)
    return tf.reduce_sum(lm_loss * target_mask), tf.reduce_sum(target_mask), new_mems

  def tokens_per_example(self, features_spec):
    return int(features_spec["input_k"].shape[-1])
