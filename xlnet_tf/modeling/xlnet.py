"""The public `XLNetModel` (the original `xlnet.XLNetModel`): the network, its tied LM head and a task's heads.

Variable paths end like the original checkpoint names: an `XLNetModel` named "model" holds the network's
`model/transformer/...` (`xlnet_tf.modeling.transformer_xl`), `model/lm_loss/bias`, and the optional fine-tuning
heads `model/sequnece_summary/...`, `model/classification_{scope}/logit/...`, `model/regression_{scope}/logit/...`.
"""

import keras
import tensorflow as tf

from xlnet_tf.modeling import heads as heads_lib
from xlnet_tf.modeling.transformer_xl import TransformerXL
from xlnet_tf.config import as_configs


_PACKAGE = "xlnet_tf"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class XLNetModel(keras.Model):
  """XLNet as the original `xlnet.XLNetModel` (scope `model`), with its tied LM head and the heads a task gives.

  The model owns the network (`transformer`) and the LM softmax tied to its word embedding (`lm_loss/bias`, in
  every released checkpoint). It knows no task: a task builds its heads (Keras layers named as the original's TF1
  scopes, e.g. `sequnece_summary`, `classification_imdb`, see `xlnet_tf.modeling.heads.finetune_heads`) and
  passes them in, so their variables are `model/<head name>/...` as in the original checkpoints.

  Args:
    xlnet_config: XLNetConfig (or its dict).
    run_config: RunConfig (or its dict).
    attn_type: "bi" (the original XLNetModel's) or "uni".
    heads: list of Keras layers (each with a unique name, the TF1 scope below `model/`; `build()` without an
      input shape), or None.

  Mixed precision: with `run_config.use_bfloat16` (or `use_fp16`), the layers compute in bfloat16 (float16) with
  float32 variables (the Keras "mixed_bfloat16" / "mixed_float16" policy, `run_config.dtype_policy`); losses are
  float32.
  """

  def __init__(self, xlnet_config, run_config, attn_type="bi", heads=None, **kwargs):
    kwargs.setdefault("name", "model")
    xlnet_config, run_config = as_configs(xlnet_config, run_config)
    if run_config.dtype_policy:
      kwargs.setdefault("dtype", run_config.dtype_policy)
    super().__init__(**kwargs)
    self.xlnet_config = xlnet_config
    self.run_config = run_config
    self.attn_type = attn_type
    policy = self.dtype_policy
    self.transformer = TransformerXL(xlnet_config, run_config, attn_type, name="transformer", dtype=policy)
    self.lm_loss_layer = heads_lib.LMLoss(xlnet_config.n_token, name="lm_loss", dtype=policy)
    self.head_list = list(heads or [])
    if len(self.heads) != len(self.head_list) or "transformer" in self.heads or "lm_loss" in self.heads:
      raise ValueError(f"Heads need unique names other than 'transformer' and 'lm_loss'. Received: "
                       f"{[head.name for head in self.head_list]}.")
    other = [h.name for h in self.head_list if getattr(h, "d_model", xlnet_config.d_model) != xlnet_config.d_model]
    if other:  # it failed at the first call, deep in Keras
      raise ValueError(f"The heads {other} were built for another d_model than this model's {xlnet_config.d_model}. "
                       "Build them with this model's XLNetConfig (finetune_heads(config, ...)).")
    self.build()

  @property
  def heads(self):
    """{name: layer} of the task heads."""
    return {head.name: head for head in self.head_list}

  def build(self, input_shape=None):
    self.transformer.build()
    self.lm_loss_layer.build()
    for head in self.head_list:
      head.build()
    self.built = True

  def call(self, input_ids, seg_ids=None, input_mask=None, mems=None, perm_mask=None, target_mapping=None,
           inp_q=None, training=False):
    """Runs XLNet on time-major inputs with the original layouts and polarities.

    Args:
      input_ids: int [I, B], token ids.
      seg_ids: int [I, B] or None, segment ids (only equality matters; memory counts as segment 0).
        None: no segment term.
      input_mask: float [I, B] or None. 1 = padding (no query attends it), 0 = real token. None: no padding.
      mems: list of n_layer float [M, B, H], or None (no memory).
      perm_mask: float [I, I, B] or None. 1 = i may NOT attend to j in batch b; 0 = may attend.
        None: attend to all.
      target_mapping: float [P, I, B] or None. 1 = prediction slot p is on token i (partial prediction). Each row
        one-hot (distinct positions) or all zero (a padding slot: zero attention output, as the original),
        as the data pipeline builds it; see `attention.attention_context`. None: the query stream covers every
        position.
      inp_q: float [I, B] or None. 1 = target token (query stream input is mask_emb). None: no query stream
        (fine-tuning).
      training: bool, dropout on.

    Returns:
      (output, new_mems): output float [P, B, H] (query stream, with target_mapping), [I, B, H] (query stream
      without target_mapping, or content stream when inp_q is None); new_mems a list of n_layer float
      [min(mem_len, M + (reuse_len or I)), B, H] (no gradient), or None when run_config.mem_len is unset.
    """
    return self.transformer(input_ids, seg_ids, input_mask, mems, perm_mask, target_mapping, inp_q,
                            training=training)

  def get_embedding_table(self):
    """float variable [V, H], the word embedding (tied to the LM softmax)."""
    return self.transformer.word_embedding.lookup_table

  def get_pooled_out(self, output, input_mask=None, training=False):
    """The sequence summary (head `sequnece_summary`) of a content-stream output [I, B, H] -> float [B, H]."""
    if input_mask is not None and not output.shape[:2].is_compatible_with(tf.TensorShape(input_mask.shape)):
      raise ValueError(f"get_pooled_out: output has shape {output.shape.as_list()}, input_mask "
                       f"{tf.TensorShape(input_mask.shape).as_list()}: the output must be time-major [len, bsz, "
                       "d_model] as the model returns it, over the input_mask [len, bsz].")
    return self._head("sequnece_summary")(output, input_mask, training=training)

  def get_head_logits(self, pooled, scope_name):
    """Logits of head `classification_{scope}` [B, C] or `regression_{scope}` [B] on a pooled output [B, H]."""
    return self._head(scope_name)(pooled)

  def _head(self, name):
    if name not in self.heads:
      raise ValueError(f"This XLNetModel has no head {name!r}; its heads are {sorted(self.heads)}. Pass it in "
                       "`heads` (see xlnet_tf.modeling.heads.finetune_heads).")
    return self.heads[name]

  def get_lm_logits(self, output):
    """LM logits float [P, B, V] of a query-stream output [P, B, H], tied to the embedding, + lm_loss/bias."""
    return self.lm_loss_layer(output, self.get_embedding_table())

  def get_lm_loss(self, output, target):
    """Per-token LM loss float32 [P, B] for targets int [P, B], each in [0, n_token) (an InvalidArgumentError
    otherwise: the compiled loss would read another token's logit, a finite loss of nothing)."""
    n_token = self.xlnet_config.n_token
    target = tf.convert_to_tensor(target)
    if target.dtype.is_floating:
      raise TypeError(f"get_lm_loss: target must hold integer token ids. Received: {target.dtype.name}.")
    check = tf.debugging.assert_equal(
        tf.logical_and(tf.reduce_all(target >= 0), tf.reduce_all(target < n_token)), True,
        message=f"get_lm_loss: every target id must lie in [0, n_token={n_token})")
    with tf.control_dependencies([check]):
      return heads_lib.lm_loss(self.get_lm_logits(output), tf.identity(target))

  def get_config(self):
    return {"xlnet_config": self.xlnet_config.to_dict(), "run_config": self.run_config.to_dict(),
            "attn_type": self.attn_type, "heads": [keras.saving.serialize_keras_object(h) for h in self.head_list],
            "name": self.name}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    # Unbuilt, so that their variables are created under the model's name scope (`model/<head>/...`).
    config["heads"] = [keras.saving.deserialize_keras_object({k: v for k, v in h.items() if k != "build_config"})
                       for h in config.get("heads") or []]
    return cls(**config)
