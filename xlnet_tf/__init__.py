"""xlnet-tf: XLNet in TensorFlow 2 / Keras 3, faithful to the original zihangdai/xlnet code.

The public names below are imported on first use, so that tools which need no TensorFlow model code (e.g. the
tokenizer or the corpus helpers) start fast.
"""

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "XLNetConfig": "xlnet_tf.config",
    "RunConfig": "xlnet_tf.config",
    "PositionwiseFFN": "xlnet_tf.modeling.layers",
    "RelMultiheadAttn": "xlnet_tf.modeling.layers",
    "TwoStreamRelAttention": "xlnet_tf.modeling.layers",
    "MultiheadAttn": "xlnet_tf.modeling.layers",
    "TransformerXL": "xlnet_tf.modeling.transformer_xl",
    "XLNetModel": "xlnet_tf.modeling.xlnet",
    "load_original_checkpoint": "xlnet_tf.checkpoint",
    "export_original_checkpoint": "xlnet_tf.checkpoint",
    "load_weights": "xlnet_tf.checkpoint",
    "load_checkpoint": "xlnet_tf.checkpoint",
    "finetune_heads": "xlnet_tf.modeling.heads",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name):
  if name in _PUBLIC:
    return getattr(importlib.import_module(_PUBLIC[name]), name)
  raise AttributeError(f"module 'xlnet_tf' has no attribute {name!r}")
