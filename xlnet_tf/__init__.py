"""xlnet-tf: XLNet in TensorFlow 2 / Keras 3, faithful to the original zihangdai/xlnet code."""

from xlnet_tf.config import RunConfig, XLNetConfig, create_run_config

__version__ = "0.1.0"
