"""Heads on top of the transformer, as the original `modeling.py`: tied LM softmax, sequence summary,
classification and regression logits, and their losses. Variable names follow the original scopes:
`lm_loss/bias`, `sequnece_summary/...` (sic), `classification_{scope}/logit/...`, `regression_{scope}/logit/...`.
"""


import numbers

import keras
import tensorflow as tf

from xlnet_tf.config import fits, is_head_name
from xlnet_tf.modeling import layers
from xlnet_tf.modeling import ops
from xlnet_tf.modeling.rows import dense_rows


SUMMARY_TYPES = ("last", "first", "mean", "attn")


_PACKAGE = "xlnet_tf"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LMLoss(keras.layers.Layer):
  """LM logits with the softmax weight tied to the word embedding; owns `lm_loss/bias` [V] (zeros init)."""

  def __init__(self, n_token, **kwargs):
    kwargs.setdefault("name", "lm_loss")
    super().__init__(**kwargs)
    self.n_token = n_token

  def build(self, input_shape=None):
    self.bias = self.add_weight(name="bias", shape=(self.n_token,), initializer="zeros")

  def call(self, hidden, lookup_table):
    """hidden: float [P, B, H]; lookup_table: float [V, H] -> logits float [P, B, V]."""
    # einsum("ibd,nd->ibn") as one 2-D matmul.
    logits = dense_rows(tf.reshape(hidden, [-1, tf.shape(hidden)[-1]]), lookup_table, self.bias,
                        transpose_kernel=True)
    return tf.reshape(logits, tf.concat([tf.shape(hidden)[:-1], [self.n_token]], 0))

  def get_config(self):
    config = super().get_config()
    config.update(n_token=self.n_token)
    return config


@ops.xla_function
def _cross_entropy_forward(logits, labels):
  """(loss [K], log of the softmax's denominator [K, 1]) of logits float32 [K, V] and labels int32 [K]."""
  log_sum = tf.reduce_max(logits, -1, keepdims=True)
  log_sum += tf.math.log(tf.reduce_sum(tf.exp(logits - log_sum), -1, keepdims=True))
  return log_sum[:, 0] - tf.gather(logits, labels, batch_dims=1), log_sum


@ops.xla_function
def _cross_entropy_backward(logits, labels, log_sum, upstream):
  """d loss / d logits = (softmax - one_hot(labels)) * upstream, from the forward's log_sum: one pass."""
  one_hot = tf.one_hot(labels, tf.shape(logits)[-1], dtype=logits.dtype)
  return (tf.exp(logits - log_sum) - one_hot) * upstream[:, None]


@tf.custom_gradient
def _sparse_cross_entropy(logits, labels):
  loss, log_sum = _cross_entropy_forward(logits, labels)

  def grad(upstream):
    return _cross_entropy_backward(logits, labels, log_sum, upstream), None

  return loss, grad


def lm_loss(logits, target):
  """Per-token cross-entropy, float32: logits [P, B, V], target int [P, B] -> [P, B].

  The function of `tf.nn.sparse_softmax_cross_entropy_with_logits` (equal up to float32 rounding), as two
  XLA-compiled functions: the forward (two passes over the logits) keeps the softmax's log-denominator, so the
  gradient is one pass (faster than TF's kernel: docs/performance.md). Targets must lie in [0, V): an id out of
  range is not checked here (the compiled gather clamps it, a finite loss of another token; TF's kernel raises on
  CPU only). In pretraining they are checked as the records are read (`parser.parse_record`);
  `XLNetModel.get_lm_loss` checks its targets.
  """
  shape = tf.shape(target)
  logits = tf.reshape(tf.cast(logits, tf.float32), [-1, tf.shape(logits)[-1]])
  return tf.reshape(_sparse_cross_entropy(logits, tf.reshape(tf.cast(target, tf.int32), [-1])), shape)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SequenceSummary(keras.layers.Layer):
  """Pools [I, B, H] hidden states to [B, H] (the original `summarize_sequence`).

  summary_type: "last" (hidden[-1], the CLS position in the original's left-padded layout), "first",
    "mean" (over ALL positions, padding included, as the original), or "attn" (a learned query `summary_bias`
    attending over the sequence with `abs_attn`, padding masked).
  use_proj: a tanh dense `summary` [H, H] on top, as in BERT.
  """

  def __init__(self, summary_type, d_model, n_head, d_head, dropout=0.0, dropatt=0.0, use_proj=True,
               kernel_initializer="glorot_uniform", **kwargs):
    kwargs.setdefault("name", "sequnece_summary")
    super().__init__(**kwargs)
    if summary_type not in SUMMARY_TYPES:
      raise ValueError(f"summary_type must be one of {SUMMARY_TYPES}. Received: {summary_type!r}.")
    self.summary_type = summary_type
    self.d_model = d_model
    self.n_head = n_head
    self.d_head = d_head
    self.dropout = dropout
    self.dropatt = dropatt
    self.use_proj = use_proj
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    policy = self.dtype_policy
    self.abs_attn = None
    if summary_type == "attn":
      self.abs_attn = layers.MultiheadAttn(d_model, n_head, d_head, dropout, dropatt, residual=False,
                                           kernel_initializer=self.kernel_initializer, name="abs_attn",
                                           dtype=policy)
    self.summary = None
    if use_proj:
      self.summary = keras.layers.Dense(d_model, activation="tanh", kernel_initializer=self.kernel_initializer,
                                        name="summary", dtype=policy)
    self.drop = layers.Dropout(dropout, name="dropout", dtype=policy)

  def build(self, input_shape=None):
    if self.abs_attn is not None:
      self.summary_bias = self.add_weight(name="summary_bias", shape=(self.d_model,),
                                          initializer=self.kernel_initializer)
      self.abs_attn.build()
    if self.summary is not None:
      self.summary.build((None, self.d_model))

  def call(self, hidden, input_mask=None, training=False):
    """hidden: float [I, B, H]; input_mask: float [I, B] (1 = padding) or None -> float [B, H]."""
    if self.summary_type == "last":
      summary = hidden[-1]
    elif self.summary_type == "first":
      summary = hidden[0]
    elif self.summary_type == "mean":
      summary = tf.reduce_mean(hidden, axis=0)
    else:
      bsz = tf.shape(hidden)[1]
      query = tf.tile(tf.cast(self.summary_bias, hidden.dtype)[None, None], [1, bsz, 1])
      mask = None if input_mask is None else tf.cast(input_mask, hidden.dtype)[None, :, :, None]
      summary = self.abs_attn(query, hidden, hidden, mask, training=training)[0]
    if self.summary is not None:
      summary = self.summary(summary)
    return self.drop(summary, training=training)

  def get_config(self):
    config = super().get_config()
    config.update(summary_type=self.summary_type, d_model=self.d_model, n_head=self.n_head, d_head=self.d_head,
                  dropout=self.dropout, dropatt=self.dropatt, use_proj=self.use_proj,
                  kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LogitHead(keras.layers.Layer):
  """A dense `logit` layer in scope `classification_{scope}` (n_class outputs) or `regression_{scope}` (1).

  Build it with `LogitHead.classification(scope, n_class, ...)` or `LogitHead.regression(scope, ...)`.
  """

  def __init__(self, n_out, d_model, kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.n_out = n_out
    self.d_model = d_model
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.logit = keras.layers.Dense(n_out, kernel_initializer=self.kernel_initializer, name="logit",
                                    dtype=self.dtype_policy)

  @classmethod
  def classification(cls, scope, n_class, d_model, kernel_initializer="glorot_uniform", **kwargs):
    return cls(n_class, d_model, kernel_initializer, name=f"classification_{scope}", **kwargs)

  @classmethod
  def regression(cls, scope, d_model, kernel_initializer="glorot_uniform", **kwargs):
    return cls(1, d_model, kernel_initializer, name=f"regression_{scope}", **kwargs)

  @property
  def is_regression(self):
    return self.name.startswith("regression_")

  def build(self, input_shape=None):
    self.logit.build((None, self.d_model))

  def call(self, summary):
    """summary: float [B, H] -> logits float [B, n_class], or [B] for regression."""
    logits = self.logit(summary)
    return tf.squeeze(logits, -1) if self.is_regression else logits

  def get_config(self):
    config = super().get_config()
    config.update(n_out=self.n_out, d_model=self.d_model,
                  kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config


def classification_loss(logits, labels):
  """Per-example loss -sum(one_hot * log_softmax), float32: logits [B, C], labels int [B] -> [B].

  A label outside [0, C) gets no loss (its one-hot is all zeros), as in the original. The tools map every label
  through the task's label list, so only a hand-made dataset holds one; it is not checked here, where a check on the
  device would cost every step a round trip to the host on a GPU. Float labels are a TypeError (0.7 and 1.9 trained
  as 0 and 1: sweep 35)."""
  labels = tf.convert_to_tensor(labels)
  if not labels.dtype.is_integer:
    raise TypeError(f"Classification labels must be integer class ids (label_ids). Received: {labels.dtype.name} "
                    "(a regression task's labels? its head is regression_*).")
  logits = tf.cast(logits, tf.float32)
  one_hot = tf.one_hot(tf.cast(labels, tf.int32), tf.shape(logits)[-1], dtype=tf.float32)
  return -tf.reduce_sum(tf.nn.log_softmax(logits) * one_hot, -1)


def regression_loss(logits, labels):
  """Per-example squared error, float32: logits [B], labels float [B] -> [B]."""
  return tf.square(tf.cast(logits, tf.float32) - tf.cast(labels, tf.float32))


def finetune_heads(xlnet_config, run_config, summary_type="last", use_summ_proj=True, cls_heads=None,
                   reg_heads=None):
  """The original fine-tuning heads, to pass to `XLNetModel(..., heads=...)`: the sequence summary
  (`sequnece_summary`, as `get_pooled_out(summary_type, use_summ_proj)`) and logit heads
  `classification_{scope}` (n_class logits) / `regression_{scope}` (one value), with the run config's initializer,
  dropout (when training) and precision.

  Args:
    summary_type: "last", "first", "mean", "attn", or None for no summary.
    cls_heads: dict {scope: n_class}, or None.
    reg_heads: list of scopes, or None.
  """
  c, rc = xlnet_config, run_config
  if summary_type is not None and summary_type not in SUMMARY_TYPES:
    raise ValueError(f"--summary_type must be one of {SUMMARY_TYPES}. Received: {summary_type!r}.")
  if not fits(bool, use_summ_proj):  # "False" built the projection (sweep 35)
    raise TypeError(f"use_summ_proj must be True or False. Received: {use_summ_proj!r}.")
  if not isinstance(cls_heads or {}, dict):
    raise TypeError(f"cls_heads must be a dict {{task name: number of classes}}. Received: {cls_heads!r}.")
  if isinstance(reg_heads, str) or not all(map(is_head_name, reg_heads or [])):  # "sts": a head per letter
    raise ValueError(f"reg_heads must be a list of task names (letters, digits, '_', '.', '-'). Received: "
                     f"{reg_heads!r}.")
  initializer = ops.get_initializer(rc.init, rc.init_range, rc.init_std)
  dtype = rc.dtype_policy
  heads = []
  if summary_type is not None:
    heads.append(SequenceSummary(summary_type, c.d_model, c.n_head, c.d_head, rc.dropout if rc.is_training else 0.0,
                                 rc.dropatt if rc.is_training else 0.0, use_summ_proj, initializer, dtype=dtype))
  for scope, n_class in (cls_heads or {}).items():
    if not isinstance(n_class, numbers.Integral) or isinstance(n_class, bool) or n_class < 2 or not is_head_name(scope):
      raise ValueError(f"cls_heads maps a task name (letters, digits, '_', '.', '-') to its number of classes, an "
                       f"integer >= 2. Received: {scope!r}: {n_class!r}.")
    heads.append(LogitHead.classification(scope, n_class, c.d_model, initializer, dtype=dtype))
  for scope in reg_heads or []:
    heads.append(LogitHead.regression(scope, c.d_model, initializer, dtype=dtype))
  return heads
