"""The RACE task: the model with its multiple-choice head, the loss, and the dataset for the training loop.

As the original `function_builder.get_race_loss` + `run_race.model_fn`:
- a batch of B questions, each 4 option sequences of L tokens ([B, 4, L] from `records.race_dataset`), runs as
  one time-major XLNet batch [L, 4B] (column b*4 + c = option c of question b; no memory, no permutation);
- the sequence summary (`model/sequnece_summary/summary`, sic; `last` reads the `<cls>` of the left-padded layout)
  gives [4B, H]; one dense unit `logits/dense` (top-level scope, outside `model/`) scores each option -> [B, 4];
- the per-question loss is `-sum(one_hot(label, 4) * log_softmax(logits))`; the training loss is its mean over the
  global batch (`RaceTask` for `training.Trainer`, which reads `records.race_dataset_fn`); in eval the padding
  questions count in the Estimator's `loss` but not in `eval_accuracy` / `eval_loss` (see `evaluation`).
"""

import keras
import tensorflow as tf

from xlnet_tf.modeling import heads as heads_lib
from xlnet_tf.modeling import ops
from xlnet_tf.modeling.xlnet import XLNetModel
from xlnet_tf.tasks.race import data

HEAD_NAME = "logits"  # The original's `tf.variable_scope("logits")`.


@keras.saving.register_keras_serializable(package="xlnet_tf")
class ChoiceLogits(keras.layers.Layer):
  """The RACE head: `logits/dense/{kernel [H, 1], bias [1]}`, one score per option sequence.

  The original creates it outside the `model/` scope (`outside_model_scope`: see `checkpoint.original_variable_map`).
  The kernel takes the model's initializer (`xlnet_model.get_initializer()`), the bias zeros (`tf.layers.dense`).
  """

  outside_model_scope = True

  def __init__(self, d_model, kernel_initializer="glorot_uniform", **kwargs):
    kwargs.setdefault("name", HEAD_NAME)
    super().__init__(**kwargs)
    self.d_model = d_model
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.dense = keras.layers.Dense(1, kernel_initializer=self.kernel_initializer, name="dense",
                                    dtype=self.dtype_policy)

  def build(self, input_shape=None):
    self.dense.build((None, self.d_model))

  def call(self, pooled):
    """pooled: float [4B, H], row b*4 + c = option c of question b -> logits [B, 4]."""
    return tf.reshape(self.dense(pooled), [-1, data.NUM_CHOICES])

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config


def build_model(xlnet_config, run_config, summary_type="last", use_summ_proj=True):
  """An XLNetModel with the sequence summary (`get_pooled_out(summary_type, use_summ_proj)`) and `ChoiceLogits`.

  Args:
    xlnet_config: XLNetConfig.
    run_config: RunConfig (is_training=True for training: dropout on; False for eval and predict).
    summary_type: "last" (the `<cls>` in the left-padded layout), "first", "mean" or "attn".
    use_summ_proj: bool, the tanh projection on the pooled vector.
  """
  if summary_type is None:
    raise ValueError("RACE needs a sequence summary. Set --summary_type (the original's default is `last`).")
  rc = run_config
  model_heads = heads_lib.finetune_heads(xlnet_config, run_config, summary_type, use_summ_proj)
  model_heads.append(ChoiceLogits(xlnet_config.d_model, ops.get_initializer(rc.init, rc.init_range, rc.init_std),
                                  dtype=rc.dtype_policy))
  return XLNetModel(xlnet_config, run_config, heads=model_heads)


def time_major(x):
  """[B, 4, L] (or [B, 4L]) -> [L, 4B], column b*4 + c = option c of question b (the original's layout)."""
  rows = tf.reshape(x, [tf.shape(x)[0] * data.NUM_CHOICES, -1])  # [4B, L], row b*4 + c
  return tf.transpose(rows, [1, 0])


def encode(model, features, training=False):
  """The backbone and the summary of a batch of RACE features.

  Args:
    model: an XLNetModel from `build_model`.
    features: dict of batch-major tensors (see `records.race_dataset`): input_ids int [B, 4, L]; segment_ids int
      [B, 4, L] (article 0, qa 1, `<cls>` 2, padding 4); input_mask float [B, 4, L] (1 = padding, 0 = real).
    training: bool, dropout on.

  Returns:
    (output, pooled): output float [L, 4B, H], the time-major sequence output (column b*4 + c); pooled float
    [4B, H], the summary of each option sequence (row b*4 + c).
  """
  input_mask = time_major(tf.cast(features["input_mask"], tf.float32))
  output, _ = model(time_major(features["input_ids"]), seg_ids=time_major(features["segment_ids"]),
                    input_mask=input_mask, training=training)
  return output, model.get_pooled_out(output, input_mask, training=training)


def forward(model, features, training=False):
  """Logits and the per-question loss of a batch of RACE features (see `encode` for the features; label_ids int
  [B], the correct option 0..3).

  Returns:
    (logits, per_example_loss): float32 [B, 4] and float32 [B].
  """
  _, pooled = encode(model, features, training=training)
  logits = tf.cast(model.get_head_logits(pooled, HEAD_NAME), tf.float32)
  return logits, heads_lib.classification_loss(logits, features["label_ids"])


class RaceTask:
  """The fine-tuning task for `training.Trainer`: the mean per-question loss over the global batch."""

  @tf.autograph.experimental.do_not_convert  # plain Python control flow only: tracing without autograph is faster
  def __call__(self, model, features, mems, training):
    _, loss = forward(model, features, training=training)
    return tf.reduce_sum(loss), tf.cast(tf.shape(loss)[0], tf.float32), None

