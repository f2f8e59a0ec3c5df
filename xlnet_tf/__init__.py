"""xlnet-tf: XLNet in TensorFlow 2 / Keras 3, faithful to the original zihangdai/xlnet code."""

from xlnet_tf.config import RunConfig, XLNetConfig, create_run_config

__version__ = "0.1.0"
from xlnet_tf.checkpoint import export_original_checkpoint, load_original_checkpoint
from xlnet_tf.layers import PositionwiseFFN, RelMultiheadAttn, TwoStreamRelAttention
from xlnet_tf.transformer_xl import TransformerXL, XLNetModel
