"""xlnet-tf: XLNet in TensorFlow 2 / Keras 3, faithful to the original zihangdai/xlnet code.

The public names below are imported on first use, so that tools which need no TensorFlow model code (e.g. the
tokenizer or the corpus helpers) start fast.
"""

import importlib
import sys

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


def _refuse_run_by_name():
  """`python -m xlnet_tf.<module>` imports this package while it looks the module up (sys.argv[0] is "-m" until
  then). No module here is a tool: run so, each did nothing and exited 0 (sweeps 21-22: M1, N9)."""
  args = sys.orig_argv
  flag = next((a for a in args[1:] if a.startswith("-m")), "") if sys.argv[:1] == ["-m"] else ""
  name = (flag[2:] or args[args.index(flag) + 1]) if flag else ""
  if name.split(".")[0] != "xlnet_tf":
    return
  tools = ("convert_checkpoint.py --input=... --output_dir=..." if name.rpartition(".")[2] in _CONVERTER else
           "one of run_pretrain.py, run_classifier.py, run_squad.py, run_race.py, data_utils.py, convert_checkpoint.py")
  raise SystemExit(f"{name} is library code, not a tool: run {tools} from the repository root (--helpshort lists "
                   "a tool's flags).")


_CONVERTER = ("convert", "hf_checkpoint", "hf_export", "hf_weights", "torch_pickle")
_refuse_run_by_name()


def __getattr__(name):
  if name in _PUBLIC:
    return getattr(importlib.import_module(_PUBLIC[name]), name)
  raise AttributeError(f"module 'xlnet_tf' has no attribute {name!r}")
