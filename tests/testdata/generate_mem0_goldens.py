"""Writes training-step goldens of the ORIGINAL train_gpu.py at its default --mem_len=0 (no memory), 40 steps each.

  python tests/testdata/generate_mem0_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/train_step_mem0 --perturbed_reruns=2

`generate_train_step_goldens.py` (its checkpoint, records, stand-ins and file layout) with two changes: mem_len 0,
clamp_len -1, and the original's graph built as train_gpu.py builds it when mem_len is 0: `get_loss` gets `mems={}`
(no placeholders) and the model caches nothing (its new mems are None per layer), stored as `last_new_mems` of
length 0. Optimizer flags no other golden uses (about four minutes on two cores with their reruns):

  pre_mem0_poly_minlr05      Adam, poly decay to min_lr_ratio 0.5 without warm-up, adam_epsilon 1e-3, clip 0.25
  pre_mem0_adamwd_cos_lrl08  AdamWeightDecay 0.02, cos decay to 0.3 after 5 warm-up steps, adam_epsilon 1e-4,
                             clip 2, lr_layer_decay_rate 0.8 in pretraining (get_train_op reads it by getattr)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_train_step_goldens as g  # noqa: E402  pylint: disable=wrong-import-position

g.__file__ = os.path.abspath(__file__)  # its reruns (oneDNN switched, perturbed) run this file again
g.BASE_FLAGS.update(mem_len=0, clamp_len=-1)
g.GOLDENS.clear()
g.GOLDENS.update({
    "pre_mem0_poly_minlr05": dict(steps=40, batches=20, flags=dict(
        train_steps=40, warmup_steps=0, min_lr_ratio=0.5, adam_epsilon=1e-3, clip=0.25, learning_rate=5e-3)),
    "pre_mem0_adamwd_cos_lrl08": dict(steps=40, batches=20, flags=dict(
        train_steps=40, warmup_steps=5, decay_method="cos", min_lr_ratio=0.3, weight_decay=0.02, adam_epsilon=1e-4,
        clip=2.0, learning_rate=5e-3, lr_layer_decay_rate=0.8)),
})
_import_original = g.import_original


def import_original(xlnet_src):
  tf, data_utils, function_builder, model_utils = _import_original(xlnet_src)
  get_loss = function_builder.get_loss

  def get_loss_without_mems(flags, features, labels, mems, is_training):
    del mems  # train_gpu.py with mem_len 0: `mems_i = {}`
    loss, new_mems, monitor = get_loss(flags, features, labels, {}, is_training)
    assert all(m is None for m in new_mems["mems"]), new_mems
    bsz = features["input_k"].shape[0]
    return loss, {"mems": [tf.zeros([0, bsz, g.CONFIG["d_model"]]) for _ in range(g.CONFIG["n_layer"])]}, monitor

  function_builder.get_loss = get_loss_without_mems
  return tf, data_utils, function_builder, model_utils


g.import_original = import_original

if __name__ == "__main__":
  g.main()
