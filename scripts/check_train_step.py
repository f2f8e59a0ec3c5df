"""Replays the ORIGINAL's recorded optimizer steps through xlnet-tf's Trainer and prints PASS or FAIL.

  python scripts/check_train_step.py --golden_dir /work/shared/goldens/train_step [--files=pretrain_adam_gpu]
  python scripts/check_train_step.py --golden_dir tests/testdata/task_step/squad   # or .../race

`--golden_dir` has the layout of /work/shared/goldens/train_step (README.md there): `ckpt/` (a TF1 checkpoint and its
`xlnet_config.json`), `*.npz` files, and the list of files it must hold: a MANIFEST (one name a line), else the table
under README.md's `## Files`. A listed file that is missing, or an unlisted one, fails the check. Each file is
replayed with the Trainer its CLI (run_pretrain.py, run_classifier.py, run_squad.py, run_race.py) builds from the
golden's own flags (scripts/step_parity.py) and every quantity the golden holds is compared: per step the loss (tower
losses; the head's logits and per-example losses, SQuAD's start/end log-probs and cls_logits), learning rate, pre-clip
gnorm, global step and mems; the first step's gradients; after the last step every variable (relative to its own
update), optimizer slot, beta power and the global step. Tolerances: `step_parity.TOLERANCES`, measured figures in
docs/training_step.md. The last line is PASS (exit 0) or FAIL (exit 1). A --golden_dir that is unset, missing or
without `ckpt/xlnet_model.ckpt.index` ends it before TensorFlow loads, with one line on stderr, exit 2.
"""

import functools
import os
import sys

from absl import app
from absl import flags as absl_flags
from absl import logging

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from xlnet_tf import stderr_filter  # noqa: E402  pylint: disable=wrong-import-position  (the standard library only)
if __name__ == "__main__":
  stderr_filter.start()  # TensorFlow's start-up lines off stderr, as the CLIs' (cli.filter_stderr)
import golden_check  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position  (numpy and absl only)

absl_flags.DEFINE_string("golden_dir", None, "Directory of the training-step goldens (layout of "
                         "/work/shared/goldens/train_step).")
absl_flags.DEFINE_list("files", None, "Golden files to replay, by name without .npz (default: every listed file). "
                       "The folder is checked for missing or unlisted files either way.")


@functools.lru_cache(maxsize=None)
def _replay_modules():
  """(step_parity, xlnet_tf.checkpoint), imported once the CPU is split into two logical devices (two-tower goldens
  run as two replicas), which must come before TensorFlow starts; not at import, so that a bad --golden_dir is told
  before TensorFlow loads."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                             [tf.config.LogicalDeviceConfiguration()] * 2)
  import step_parity  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from xlnet_tf import checkpoint  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return step_parity, checkpoint


def run(golden_dir, names=None, print_fn=print):
  """Checks the folder's file list, replays and compares; returns True if everything passed."""
  step_parity, checkpoint_lib = _replay_modules()
  expected, source = step_parity.expected_files(golden_dir)
  present = sorted(f[:-len(".npz")] for f in os.listdir(golden_dir) if f.endswith(".npz"))
  all_ok = True
  for name in sorted(set(expected) - set(present)):
    print_fn(f"{name}.npz: FAIL (listed in {source}, not in {golden_dir})")
    all_ok = False
  for name in sorted(set(present) - set(expected)):
    print_fn(f"{name}.npz: FAIL (in {golden_dir}, not listed in {source}: list it there)")
    all_ok = False
  wanted = expected
  if names:
    unknown = sorted(set(names) - set(expected))
    if unknown:
      raise ValueError(f"--files names golden files {source} does not list: {', '.join(unknown)}.")
    wanted = sorted(names)
  initial = checkpoint_lib.checkpoint_arrays(os.path.join(golden_dir, "ckpt", "xlnet_model.ckpt"))
  replayed = 0
  for name in wanted:
    path = os.path.join(golden_dir, f"{name}.npz")
    if not os.path.isfile(path):
      continue
    try:
      g, meta, ours = step_parity.replay(path, golden_dir)
      rows = step_parity.compare(g, meta, ours, initial)
    except Exception as e:  # pylint: disable=broad-except  (a file that cannot be replayed fails; the rest go on)
      print_fn(f"{name}.npz: FAIL ({type(e).__name__}: {' '.join(str(e).split())[:400]})")
      all_ok = False
      continue
    replayed += 1
    ok = all(r[2] for r in rows.values())
    all_ok &= ok
    print_fn(f"{name}.npz: {'PASS' if ok else 'FAIL'}")
    for row, (diff, tol, row_ok, note) in rows.items():
      figures = "" if diff is None else f"{diff:9.2e}  (tolerance {tol:.0e})"
      print_fn(f"  {'ok  ' if row_ok else 'FAIL'} {row:22s} {figures}{'  ' if figures and note else ''}{note}")
    print_fn(f"  per step: loss {_fmt(ours['loss'])} vs {_fmt(g['loss'])}; gnorm {_fmt(ours['gnorm'])} vs "
             f"{_fmt(g['gnorm'])}")
  print_fn(f"Replayed {replayed} of {len(wanted)} files ({len(expected)} listed in {source}, {len(present)} present).")
  return all_ok and replayed == len(wanted)


def _fmt(values):
  shown = [f"{float(v):.6f}" for v in values]
  return "[" + ", ".join(shown if len(shown) <= 6 else shown[:3] + ["..."] + shown[-2:]) + "]"


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  problem = golden_check.golden_dir_problem(absl_flags.FLAGS.golden_dir, "the training-step goldens",
                                            os.path.join("ckpt", "xlnet_model.ckpt.index"), "tests/testdata/train_step")
  if problem:
    print(f"check_train_step.py: error: {problem}", file=sys.stderr, flush=True)
    sys.exit(2)
  logging.set_verbosity(logging.WARNING)
  try:
    ok = run(absl_flags.FLAGS.golden_dir, absl_flags.FLAGS.files)
  except (OSError, ValueError) as e:
    print(f"check_train_step.py: error: {' '.join(str(e).split())}", flush=True)
    ok = False
  print("PASS" if ok else "FAIL", flush=True)
  sys.exit(0 if ok else 1)


if __name__ == "__main__":
  app.run(main)
