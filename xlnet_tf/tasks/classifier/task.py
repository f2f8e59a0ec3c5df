"""The classification / regression task: the model with its heads, the loss, and the dataset for the training loop.

As the original `run_classifier.py` + `function_builder.get_{classification,regression}_loss`:
- the model is `XLNetModel` on `[L, B]` inputs (no memory, no permutation), pooled by the sequence summary
  (`sequnece_summary/summary`), with one head `model/classification_{scope}/logit` (n_class logits, per-example loss
  `-sum(one_hot * log_softmax)`) or `model/regression_{task}/logit` (one value, loss `(logit - label)^2`);
- the training loss is the mean over the global batch (`ClassifierTask` for `training.Trainer`);
- eval runs every checkpoint of model_dir (or the last), weights the metrics by `is_real_example` and logs
  `Eval result | key value | ...` per checkpoint and `Best result | ...` (by eval_accuracy or eval_pearsonr);
- predict writes `{task}.tsv` (GLUE submission format) and `{task}.logits.json`.
"""


import tensorflow as tf

from xlnet_tf.data import records
from xlnet_tf.modeling import heads as heads_lib
from xlnet_tf.modeling.xlnet import XLNetModel
from xlnet_tf.tasks.classifier import features as classifier_data


def head_scope(task_name, cls_scope=None, is_regression=False):
  """The head's variable scope, as the original: `regression_{task}` (cls_scope is not used for regression, as
  in the original), else `classification_{cls_scope or task}` (task lower-cased)."""
  task = task_name.lower()
  if is_regression:
    return f"regression_{task}"
  return f"classification_{cls_scope or task}"


def build_model(xlnet_config, run_config, scope, n_class=None, summary_type="last", use_summ_proj=True):
  """An XLNetModel with the sequence summary and one head.

  Args:
    xlnet_config: XLNetConfig.
    run_config: RunConfig (is_training=True for training: dropout on; False for eval, predict and serving).
    scope: str, `head_scope(...)`: `classification_{name}` or `regression_{name}`.
    n_class: int, number of classes (classification only).
    summary_type: "last" (the CLS token in the left-padded layout), "first", "mean" or "attn".
    use_summ_proj: bool, the tanh projection on the pooled vector.
  """
  if scope.startswith("regression_"):
    heads = heads_lib.finetune_heads(xlnet_config, run_config, summary_type, use_summ_proj,
                                     reg_heads=[scope[len("regression_"):]])
  elif not scope.startswith("classification_"):
    raise ValueError(f"A head scope starts with 'classification_' or 'regression_'. Received: {scope!r}.")
  elif not n_class or n_class < 2:
    raise ValueError(f"A classification head needs at least 2 classes. Received: n_class={n_class!r}.")
  else:
    heads = heads_lib.finetune_heads(xlnet_config, run_config, summary_type, use_summ_proj,
                                     cls_heads={scope[len("classification_"):]: n_class})
  return XLNetModel(xlnet_config, run_config, heads=heads)


def forward(model, features, scope, training=False):
  """Logits and the per-example loss of a batch of classifier features.

  Args:
    model: an XLNetModel with the head `scope` (see `build_model`).
    features: dict of batch-major tensors (see `classifier_data.classifier_dataset`): input_ids int [B, L];
      segment_ids int [B, L] (A 0, B 1, CLS 2, padding 4); input_mask float [B, L] (1 = padding, 0 = real);
      label_ids int [B] (class ids) or float [B] (regression).
    scope: str, the head scope.
    training: bool, dropout on.

  Returns:
    (logits, per_example_loss): logits float32 [B, n_class] (classification) or [B] (regression); loss float32 [B].
  """
  input_ids = tf.transpose(features["input_ids"], [1, 0])
  seg_ids = tf.transpose(features["segment_ids"], [1, 0])
  input_mask = tf.transpose(tf.cast(features["input_mask"], tf.float32), [1, 0])
  output, _ = model(input_ids, seg_ids=seg_ids, input_mask=input_mask, training=training)
  pooled = model.get_pooled_out(output, input_mask, training=training)
  logits = tf.cast(model.get_head_logits(pooled, scope), tf.float32)
  if scope.startswith("regression_"):
    loss = heads_lib.regression_loss(logits, features["label_ids"])
  else:
    loss = heads_lib.classification_loss(logits, features["label_ids"])
  return logits, loss


class ClassifierTask:
  """The fine-tuning task for `training.Trainer`: the mean per-example loss over the global batch."""

  def __init__(self, scope):
    self.scope = scope

  @tf.autograph.experimental.do_not_convert  # plain Python control flow only: tracing without autograph is faster
  def __call__(self, model, features, mems, training):
    _, loss = forward(model, features, self.scope, training=training)
    return tf.reduce_sum(loss), tf.cast(tf.shape(loss)[0], tf.float32), None


def classifier_dataset_fn(train_file, max_seq_length, per_replica_batch_size, is_regression, shuffle_buffer,
                          seed=None, n_token=None):
  """A `dataset_fn(input_context, start_step)` for `Trainer.train` over the training records (resumable with a
  seed: see `records.resumable_dataset_fn`; ids checked against n_token: `records.ReadConfig`)."""
  read = records.ReadConfig.training(per_replica_batch_size, shuffle_buffer, seed, n_token)
  return records.resumable_dataset_fn(lambda input_context: classifier_data.classifier_dataset(
      train_file, max_seq_length, is_regression, read, input_context), seed)
