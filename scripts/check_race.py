"""Compares this port's RACE path with the goldens of the ORIGINAL run_race.py and prints PASS or FAIL.

  python scripts/check_race.py --golden_dir /work/shared/goldens/race

`--golden_dir` has the layout of /work/shared/goldens/race (README.md there): `data/`, `spm/spiece.model`,
`features/<tag>_{train,dev}.npz` (+ `_examples.json`), `head/eval.npz`, `meta.json`. Parts, one function each
(add a part by writing `check_<part>(golden_dir) -> list of Row` and listing it in PARTS):

  features  every setting and split of meta.json: the example order, then input_ids/input_mask/segment_ids/
            label_id of the default (the original's option aliasing) against the goldens, the same with
            fix_option_aliasing=True against the goldens' `unaliased_*`, the padding example, and which option
            sequences the aliasing changes against `differs_from_unaliased` of `_examples.json`.
  records   the dev set of the head setting written by `prepare_records` (padded to eval_batch_size) and read back
            by `race_dataset`, against the inputs of `head/eval.npz`.

Every comparison is exact: the printed max difference must be 0.
"""

import collections
import json
import os
import sys
import tempfile

import numpy as np
from absl import app
from absl import flags
from absl import logging

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from xlnet_tf.data import tokenization  # pylint: disable=g-import-not-at-top,wrong-import-position
from xlnet_tf.tasks.race import data  # pylint: disable=g-import-not-at-top,wrong-import-position
from xlnet_tf.tasks.race import records  # pylint: disable=g-import-not-at-top,wrong-import-position

flags.DEFINE_string("golden_dir", None, "Directory of the RACE goldens (the layout of /work/shared/goldens/race).")
flags.DEFINE_list("parts", None, "Parts to run (default: all): features, records.")
flags.mark_flag_as_required("golden_dir")

Row = collections.namedtuple("Row", ["part", "name", "max_diff", "ok"])


def _compare(part, name, got, want):
  """One Row: max |got - want| over the arrays (inf when the shapes differ)."""
  got, want = np.asarray(got), np.asarray(want)
  if got.shape != want.shape:
    return Row(part, f"{name} shape {got.shape} vs {want.shape}", float("inf"), False)
  diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
  return Row(part, name, diff, diff == 0.0)


def _load(golden_dir):
  with open(os.path.join(golden_dir, "meta.json"), encoding="utf-8") as f:
    meta = json.load(f)
  sp_model = tokenization.load_sentencepiece(os.path.join(golden_dir, "spm", "spiece.model"))
  return meta, sp_model


def check_features(golden_dir):
  """The features part (see the module docstring)."""
  meta, sp_model = _load(golden_dir)
  data_dir = os.path.join(golden_dir, "data")
  rows = []
  for setting in meta["settings"]:
    tag, seq_len, qa_len = setting["tag"], setting["max_seq_length"], setting["max_qa_length"]
    tokenize_fn = tokenization.make_tokenize_fn(sp_model, setting["uncased"])
    for split in ("train", "dev"):
      part = f"features {tag} {split}"
      examples = data.get_examples(data_dir, split)
      files = list(dict.fromkeys(os.path.relpath(ex.file, data_dir) for ex in examples))
      rows.append(Row(part, "file order == meta file_order", 0.0 if files == setting[split]["file_order"]
                      else float("inf"), files == setting[split]["file_order"]))
      golden = np.load(os.path.join(golden_dir, "features", f"{tag}_{split}.npz"))
      for fix, prefix in ((False, ""), (True, "unaliased_")):
        got = data.convert_examples(examples, tokenize_fn, seq_len, qa_len, fix_option_aliasing=fix)
        for key in ("input_ids", "input_mask", "segment_ids"):
          rows.append(_compare(part, f"fix_option_aliasing={fix} {key} vs {prefix}{key}", got[key],
                               golden[prefix + key]))
        rows.append(_compare(part, f"fix_option_aliasing={fix} label_ids vs label_id", got["label_ids"],
                             golden["label_id"]))
        rows.append(_compare(part, f"fix_option_aliasing={fix} is_real_example", got["is_real_example"],
                             golden["is_real_example"]))
      pad = data.features_to_arrays([data.convert_single_example(data.PaddingInputExample(), tokenize_fn,
                                                                 seq_len, qa_len)])
      for key, golden_key in (("input_ids", "input_ids"), ("input_mask", "input_mask"),
                              ("segment_ids", "segment_ids"), ("label_ids", "label_id"),
                              ("is_real_example", "is_real_example")):
        rows.append(_compare(part, f"padding example {key}", pad[key][0], golden[f"padding_example_{golden_key}"]))
      with open(os.path.join(golden_dir, "features", f"{tag}_{split}_examples.json"), encoding="utf-8") as f:
        info = json.load(f)
      default = data.convert_examples(examples, tokenize_fn, seq_len, qa_len)
      fixed = data.convert_examples(examples, tokenize_fn, seq_len, qa_len, fix_option_aliasing=True)
      shape = (len(examples), data.NUM_CHOICES, seq_len)
      got_differ = np.any((default["input_ids"].reshape(shape) != fixed["input_ids"].reshape(shape)) |
                          (default["segment_ids"].reshape(shape) != fixed["segment_ids"].reshape(shape)), axis=-1)
      want_differ = np.array([[opt["differs_from_unaliased"] for opt in ex["options"]] for ex in info])
      rows.append(_compare(part, "aliased option sequences vs differs_from_unaliased", got_differ, want_differ))
  return rows


def check_records(golden_dir):
  """The records part (see the module docstring)."""
  meta, sp_model = _load(golden_dir)
  head = meta["head"]
  setting = next(s for s in meta["settings"] if s["tag"] == head["setting"])
  seq_len, batch_size = setting["max_seq_length"], head["eval_batch_size"]
  golden = np.load(os.path.join(golden_dir, "head", "eval.npz"))
  part = f"records {head['setting']} dev"
  with tempfile.TemporaryDirectory() as out_dir:
    info = records.prepare_records(
        os.path.join(golden_dir, "data"), "dev", tokenization.make_tokenize_fn(sp_model, setting["uncased"]),
        os.path.join(golden_dir, "spm", "spiece.model"), out_dir, seq_len, setting["max_qa_length"],
        eval_batch_size=batch_size)
    rows = [Row(part, f"{info.num_real} real + {info.num_padding} padding examples", 0.0,
                (info.num_real, info.num_padding) == (head["real_examples"], head["padding_examples"]))]
    batches = list(records.race_dataset(info.path, seq_len, batch_size, is_training=False).as_numpy_iterator())
  for key in records.FEATURE_NAMES:
    got = np.concatenate([b[key] for b in batches])
    want = golden[key]
    rows.append(_compare(part, f"{key} {list(got.shape)} (flattened) vs head/eval.npz", got.reshape(want.shape)
                         if got.size == want.size else got, want))
  return rows


PARTS = collections.OrderedDict([("features", check_features), ("records", check_records)])


def run(golden_dir, parts=None):
  """Runs the parts, prints one line per comparison and a PASS/FAIL line per part; returns True if all pass."""
  all_ok = True
  for name in parts or PARTS:
    if name not in PARTS:
      raise ValueError(f"Unknown part {name!r}. Choose from {list(PARTS)}.")
    rows = PARTS[name](golden_dir)
    for row in rows:
      print(f"{'ok  ' if row.ok else 'FAIL'} {row.part:28s} max diff {row.max_diff:<4g} {row.name}")
    ok = all(row.ok for row in rows)
    all_ok &= ok
    print(f"{name}: {'PASS' if ok else 'FAIL'} ({sum(r.ok for r in rows)}/{len(rows)} comparisons, max diff "
          f"{max(r.max_diff for r in rows):g})\n")
  print("PASS" if all_ok else "FAIL")
  return all_ok


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  logging.set_verbosity(logging.WARNING)
  golden_dir = flags.FLAGS.golden_dir
  if not os.path.isfile(os.path.join(golden_dir, "meta.json")):
    sys.exit(f"check_race.py: error: {golden_dir} has no meta.json; pass the RACE goldens directory as "
             f"--golden_dir.")
  try:
    ok = run(golden_dir, flags.FLAGS.parts)
  except (OSError, ValueError) as e:
    sys.exit(f"check_race.py: error: {str(e).strip().splitlines()[0]}")
  sys.exit(0 if ok else 1)


if __name__ == "__main__":
  app.run(main)
