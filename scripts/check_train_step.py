"""Replays the ORIGINAL's recorded optimizer steps through xlnet-tf's Trainer and prints PASS or FAIL.

  python scripts/check_train_step.py --golden_dir /work/shared/goldens/train_step [--files=pretrain_adam_gpu]

`--golden_dir` has the layout of /work/shared/goldens/train_step (README.md there): `ckpt/` (a TF1 checkpoint and
its `xlnet_config.json`) and `*.npz` files. For each file: per step the loss, learning rate, pre-clip gnorm, global
step and mems; the first step's gradients; after the last step every variable, Adam slot, beta power and the
global step. Each line gives the worst difference (relative to the golden array's largest magnitude; absolute for
final variables) and the tolerance (`xlnet_tf.training.step_parity.TOLERANCES`, measured figures in
docs/training_step.md).
"""

import glob
import os
import sys

import tensorflow as tf
from absl import app
from absl import flags
from absl import logging

# Two-tower goldens run as two replicas: split the CPU before TensorFlow starts.
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from xlnet_tf.training import step_parity  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

flags.DEFINE_string("golden_dir", None, "Directory of the training-step goldens (layout of "
                    "/work/shared/goldens/train_step).")
flags.DEFINE_list("files", None, "Golden files to check, by name without .npz (default: every *.npz).")
flags.mark_flag_as_required("golden_dir")


def run(golden_dir, names=None):
  paths = sorted(glob.glob(os.path.join(golden_dir, "*.npz")))
  if names:
    wanted = {os.path.join(golden_dir, f"{n}.npz") for n in names}
    unknown = sorted(wanted - set(paths))
    if unknown:
      raise ValueError(f"No such golden file: {', '.join(unknown)} (--files).")
    paths = [p for p in paths if p in wanted]
  if not paths:
    raise ValueError(f"{golden_dir} has no *.npz golden files (--golden_dir).")
  all_ok = True
  for path in paths:
    g, meta, ours = step_parity.replay(path, golden_dir)
    rows = step_parity.compare(g, meta, ours)
    ok = all(r[2] for r in rows.values())
    all_ok &= ok
    print(f"{os.path.basename(path)}: {'PASS' if ok else 'FAIL'}")
    for name, (diff, tol, row_ok) in rows.items():
      print(f"  {'ok  ' if row_ok else 'FAIL'} {name:22s} {diff:9.2e}  (tolerance {tol:.0e})")
    print(f"  per step: loss {_fmt(ours['loss'])} vs {_fmt(g['loss'])}; gnorm {_fmt(ours['gnorm'])} vs "
          f"{_fmt(g['gnorm'])}")
  print("PASS" if all_ok else "FAIL")
  return all_ok


def _fmt(values):
  return "[" + ", ".join(f"{float(v):.6f}" for v in values) + "]"


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  logging.set_verbosity(logging.WARNING)
  golden_dir = flags.FLAGS.golden_dir
  if not os.path.isfile(os.path.join(golden_dir, "ckpt", "xlnet_config.json")):
    sys.exit(f"check_train_step.py: error: {golden_dir} has no ckpt/xlnet_config.json; pass the training-step "
             "goldens directory as --golden_dir.")
  try:
    ok = run(golden_dir, flags.FLAGS.files)
  except (OSError, ValueError) as e:
    sys.exit(f"check_train_step.py: error: {str(e).strip().splitlines()[0]}")
  sys.exit(0 if ok else 1)


if __name__ == "__main__":
  app.run(main)
