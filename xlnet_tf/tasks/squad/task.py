"""The SQuAD 2.0 head, its loss and the training task, as the original `function_builder.get_qa_outputs` and the
`model_fn` of `run_squad.py`.

On the backbone's output h (time-major [L, B, H]), p_mask (1 = not an answer position) and cls_index:
- start: z_s = `start_logits/dense`(h) [B, L], masked z_s (1 - p) - 1e30 p, log-softmax over L;
- end: `end_logits/dense_0` (tanh) -> `end_logits/LayerNorm` (eps 1e-12) -> `end_logits/dense_1` on
  concat(h_l, h_start): in training h_start is h at the GOLD start; in inference at each of the start_n_top best
  starts, and the end_n_top best ends are kept per start, flattened start-major (entry i * end_n_top + j);
- answer class: `answer_class/dense_0` (tanh) -> dropout -> `answer_class/dense_1` (no bias) on
  concat(sum_l softmax(z_s)_l h_l, h_cls), the EXPECTED start (the gradient flows into the start logits), in
  training and inference alike;
- loss per example: 0.5 (CE_start + CE_end) + 0.5 sigmoid-xent(is_impossible, cls_logits); its batch mean is the
  original's total_loss.
The head's variables are top-level scopes in the original (`start_logits/...`, not `model/start_logits/...`):
the layers set `outside_model_scope`, which `checkpoint.original_variable_map` reads. Initialisation as the
original: the run config's initializer for the kernels, zeros for the biases, LayerNorm gamma 1 and beta 0.
"""

import keras
import tensorflow as tf

from xlnet_tf.data import records as records_lib
from xlnet_tf.modeling import layers
from xlnet_tf.modeling import ops
from xlnet_tf.modeling.rows import LAYER_NORM_EPS
from xlnet_tf.modeling.xlnet import XLNetModel
from xlnet_tf.tasks.squad import records

_PACKAGE = "xlnet_tf"
HEAD_SCOPES = ("start_logits", "end_logits", "answer_class")
_MASK_VALUE = 1e30  # masked logits: z (1 - p) - 1e30 p, as the original


class _QAHead(keras.layers.Layer):
  """A head layer named as its original top-level scope; `dense_*` sublayers of d_model or 1 outputs."""

  outside_model_scope = True  # the original creates it outside `model/` (see checkpoint.original_variable_map)

  def __init__(self, d_model, kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.kernel_initializer = keras.initializers.get(kernel_initializer)

  def _dense(self, units, name, activation=None, use_bias=True):
    return keras.layers.Dense(units, activation=activation, use_bias=use_bias, name=name,
                              kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy)

  def get_config(self):
    config = super().get_config()
    config.update(d_model=self.d_model, kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class StartLogits(_QAHead):
  """`start_logits/dense/{kernel [H, 1], bias [1]}`: one logit per position."""

  def __init__(self, d_model, kernel_initializer="glorot_uniform", **kwargs):
    kwargs.setdefault("name", "start_logits")
    super().__init__(d_model, kernel_initializer, **kwargs)
    self.dense = self._dense(1, "dense")

  def build(self, input_shape=None):
    self.dense.build((None, self.d_model))

  def call(self, output):
    """output: float [L, B, H] -> float [L, B]."""
    return tf.squeeze(self.dense(output), -1)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class EndLogits(_QAHead):
  """`end_logits/dense_0/{kernel [2H, H], bias}` (tanh), `end_logits/LayerNorm/{gamma, beta}`,
  `end_logits/dense_1/{kernel [H, 1], bias}`: one logit per position given a start."""

  def __init__(self, d_model, kernel_initializer="glorot_uniform", **kwargs):
    kwargs.setdefault("name", "end_logits")
    super().__init__(d_model, kernel_initializer, **kwargs)
    self.dense_0 = self._dense(d_model, "dense_0", activation="tanh")
    self.layer_norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPS, name="LayerNorm",
                                                      dtype=self.dtype_policy)
    self.dense_1 = self._dense(1, "dense_1")

  def build(self, input_shape=None):
    self.dense_0.build((None, 2 * self.d_model))
    self.layer_norm.build((None, self.d_model))
    self.dense_1.build((None, self.d_model))

  def call(self, end_input):
    """end_input: float [..., 2H], concat(h_l, h_start) -> float [...]."""
    return tf.squeeze(self.dense_1(self.layer_norm(self.dense_0(end_input))), -1)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AnswerClass(_QAHead):
  """`answer_class/dense_0/{kernel [2H, H], bias}` (tanh), dropout, `answer_class/dense_1/kernel [H, 1]` (no
  bias): the no-answer logit."""

  def __init__(self, d_model, kernel_initializer="glorot_uniform", dropout=0.0, **kwargs):
    kwargs.setdefault("name", "answer_class")
    super().__init__(d_model, kernel_initializer, **kwargs)
    self.dropout = dropout
    self.dense_0 = self._dense(d_model, "dense_0", activation="tanh")
    self.drop = layers.Dropout(dropout, name="dropout", dtype=self.dtype_policy)
    self.dense_1 = self._dense(1, "dense_1", use_bias=False)

  def build(self, input_shape=None):
    self.dense_0.build((None, 2 * self.d_model))
    self.dense_1.build((None, self.d_model))

  def call(self, ans_feature, training=False):
    """ans_feature: float [B, 2H], concat(expected start feature, cls feature) -> float [B]."""
    return tf.squeeze(self.dense_1(self.drop(self.dense_0(ans_feature), training=training)), -1)

  def get_config(self):
    config = super().get_config()
    config.update(dropout=self.dropout)
    return config


def qa_heads(xlnet_config, run_config):
  """The three head layers, with the run config's initializer, dropout (when training) and precision."""
  rc = run_config
  initializer = ops.get_initializer(rc.init, rc.init_range, rc.init_std)
  dtype = rc.dtype_policy
  d_model = xlnet_config.d_model
  return [StartLogits(d_model, initializer, dtype=dtype), EndLogits(d_model, initializer, dtype=dtype),
          AnswerClass(d_model, initializer, rc.dropout if rc.is_training else 0.0, dtype=dtype)]


def build_model(xlnet_config, run_config):
  """An XLNetModel with the QA head (run_config.is_training: dropout on for training)."""
  return XLNetModel(xlnet_config, run_config, heads=qa_heads(xlnet_config, run_config))


def _masked(logits, p_mask):
  """float32 logits with the positions of p_mask (1 = not an answer position) at -1e30, as the original."""
  return logits * (1.0 - p_mask) - _MASK_VALUE * p_mask


def qa_outputs(model, features, training=False, start_n_top=5, end_n_top=5):
  """The head's outputs on a batch of SQuAD features (the original `get_qa_outputs`).

  Args:
    model: an XLNetModel with the QA head (`build_model`).
    features: dict of batch-major tensors (`records.squad_dataset`): input_ids int [B, L]; segment_ids int [B, L]
      (P 0, Q 1, CLS 2, pad 3); input_mask float [B, L] (1 = padding); p_mask float [B, L] (1 = not an answer
      position); cls_index int [B]; training also start_positions int [B].
    training: True = the original's TRAIN graph (the end on the gold start, dropout on); False = PREDICT (beam).
    start_n_top, end_n_top: the inference beam (ints, at most L).

  Returns:
    dict of float32/int32 tensors. Training: start_log_probs [B, L], end_log_probs [B, L] (given the gold start),
    cls_logits [B]. Inference: start_top_log_probs, start_top_index [B, start_n_top]; end_top_log_probs,
    end_top_index [B, start_n_top * end_n_top] (start-major); cls_logits [B]; and the full start_log_probs
    [B, L] and end_log_probs [B, start_n_top, L]. Log-probs are log-softmax values; masked positions about -1e30.
  """
  heads = model.heads
  input_ids = tf.transpose(features["input_ids"], [1, 0])
  seg_ids = tf.transpose(features["segment_ids"], [1, 0])
  input_mask = tf.transpose(tf.cast(features["input_mask"], tf.float32), [1, 0])
  p_mask = tf.cast(features["p_mask"], tf.float32)
  output, _ = model(input_ids, seg_ids=seg_ids, input_mask=input_mask, training=training)  # [L, B, H]
  seq_len = tf.shape(output)[0]
  start_logits = tf.transpose(tf.cast(heads["start_logits"](output), tf.float32), [1, 0])  # [B, L]
  start_logits_masked = _masked(start_logits, p_mask)
  start_log_probs = tf.nn.log_softmax(start_logits_masked, -1)
  out = {}
  if training:
    start_index = tf.one_hot(features["start_positions"], seq_len, axis=-1, dtype=output.dtype)  # [B, L]
    start_features = tf.einsum("lbh,bl->bh", output, start_index)
    end_input = tf.concat([output, tf.tile(start_features[None], [seq_len, 1, 1])], -1)  # [L, B, 2H]
    end_logits = tf.transpose(tf.cast(heads["end_logits"](end_input), tf.float32), [1, 0])  # [B, L]
    out["start_log_probs"] = start_log_probs
    out["end_log_probs"] = tf.nn.log_softmax(_masked(end_logits, p_mask), -1)
  else:
    start_top_log_probs, start_top_index = tf.math.top_k(start_log_probs, k=start_n_top)  # [B, K]
    start_index = tf.one_hot(start_top_index, seq_len, axis=-1, dtype=output.dtype)  # [B, K, L]
    start_features = tf.einsum("lbh,bkl->bkh", output, start_index)
    end_input = tf.concat([tf.tile(output[:, :, None], [1, 1, start_n_top, 1]),
                           tf.tile(start_features[None], [seq_len, 1, 1, 1])], -1)  # [L, B, K, 2H]
    end_logits = tf.transpose(tf.cast(heads["end_logits"](end_input), tf.float32), [1, 2, 0])  # [B, K, L]
    end_log_probs = tf.nn.log_softmax(_masked(end_logits, p_mask[:, None]), -1)
    end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, k=end_n_top)  # [B, K, K2]
    out.update(start_top_log_probs=start_top_log_probs, start_top_index=start_top_index,
               end_top_log_probs=tf.reshape(end_top_log_probs, [-1, start_n_top * end_n_top]),
               end_top_index=tf.reshape(end_top_index, [-1, start_n_top * end_n_top]),
               start_log_probs=start_log_probs, end_log_probs=end_log_probs)
  # The answer class on the expected start (no dependency on the end: one cls_logits per feature) and <cls>.
  cls_feature = tf.einsum("lbh,bl->bh", output, tf.one_hot(features["cls_index"], seq_len, axis=-1,
                                                          dtype=output.dtype))
  start_p = tf.nn.softmax(start_logits_masked, -1)
  start_feature = tf.einsum("lbh,bl->bh", output, tf.cast(start_p, output.dtype))
  ans_feature = tf.concat([start_feature, cls_feature], -1)
  out["cls_logits"] = tf.cast(heads["answer_class"](ans_feature, training=training), tf.float32)
  return out


def qa_losses(outputs, features):
  """The three per-example terms of the original loss, float32 [B] each, from training `outputs` of `qa_outputs`
  and features start_positions, end_positions int [B], is_impossible float [B] (1 = no answer in the window).

  Returns:
    (start_loss, end_loss, cls_loss): -log p(gold start), -log p(gold end | gold start) and the sigmoid
    cross-entropy of cls_logits against is_impossible; their batch means are the original's terms.
  """
  seq_len = tf.shape(outputs["start_log_probs"])[-1]

  def cross_entropy(log_probs, positions):
    return -tf.reduce_sum(tf.one_hot(positions, seq_len, dtype=tf.float32) * log_probs, -1)

  start_loss = cross_entropy(outputs["start_log_probs"], features["start_positions"])
  end_loss = cross_entropy(outputs["end_log_probs"], features["end_positions"])
  cls_loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(features["is_impossible"], tf.float32),
                                                     logits=outputs["cls_logits"])
  return start_loss, end_loss, cls_loss


def qa_loss(outputs, features):
  """The original loss per example, float32 [B]: 0.5 (start_loss + end_loss) + 0.5 cls_loss (`qa_losses`); its
  mean over the batch is the original's total_loss."""
  start_loss, end_loss, cls_loss = qa_losses(outputs, features)
  return (start_loss + end_loss) * 0.5 + cls_loss * 0.5


class SquadTask:
  """The fine-tuning task for `training.Trainer`: the mean per-example `qa_loss` over the global batch."""

  @tf.autograph.experimental.do_not_convert  # plain Python control flow only: tracing without autograph is faster
  def __call__(self, model, features, mems, training):
    loss = qa_loss(qa_outputs(model, features, training=training), features)
    return tf.reduce_sum(loss), tf.cast(tf.shape(loss)[0], tf.float32), None


def squad_dataset_fn(train_files, max_seq_length, per_replica_batch_size, shuffle_buffer, seed=None, n_token=None):
  """A `dataset_fn(input_context, start_step)` for `Trainer.train` over the training records (a path, glob or
  list; resumable with a seed: see `records.resumable_dataset_fn`; ids checked against n_token:
  `records.ReadConfig`)."""
  read = records_lib.ReadConfig.training(per_replica_batch_size, shuffle_buffer, seed, n_token)
  return records_lib.resumable_dataset_fn(
      lambda input_context: records.squad_dataset(train_files, max_seq_length, read, input_context), seed)
