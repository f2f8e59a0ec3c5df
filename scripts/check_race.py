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
  head      `ckpt/` loaded by name into the RACE model (every variable of the model from the checkpoint, every
            checkpoint variable used), then the inputs of `head/eval.npz` in batches of eval_batch_size: the
            time-major sequence output of batch 0, the summary (`pooled`, row b*4 + c), `logits`,
            `per_example_loss`, each batch's total loss, and the eval numbers (`eval_accuracy`, `eval_loss`, the
            Estimator's `loss`) against the goldens.

The features and records comparisons are exact (the printed max difference must be 0). The head's are float32
computations in another order than the original's: they pass within 1e-5 x max(1, max |golden|) (HEAD_ATOL, as
tests/test_parity.py).
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
from xlnet_tf import checkpoint  # pylint: disable=g-import-not-at-top,wrong-import-position
from xlnet_tf import RunConfig, XLNetConfig  # pylint: disable=g-import-not-at-top,wrong-import-position
from xlnet_tf.data import tokenization  # pylint: disable=g-import-not-at-top,wrong-import-position
from xlnet_tf.tasks.race import data  # pylint: disable=g-import-not-at-top,wrong-import-position
from xlnet_tf.tasks.race import evaluation  # pylint: disable=g-import-not-at-top,wrong-import-position
from xlnet_tf.tasks.race import records  # pylint: disable=g-import-not-at-top,wrong-import-position
from xlnet_tf.tasks.race import task  # pylint: disable=g-import-not-at-top,wrong-import-position

flags.DEFINE_string("golden_dir", None, "Directory of the RACE goldens (the layout of /work/shared/goldens/race).")
flags.DEFINE_list("parts", None, "Parts to run (default: all): features, records, head.")
flags.mark_flag_as_required("golden_dir")

Row = collections.namedtuple("Row", ["part", "name", "max_diff", "ok"])

HEAD_ATOL = 1e-5  # times max(1, max |golden|): float32 results of another operation order (see the docstring)


def _compare(part, name, got, want, atol=0.0):
  """One Row: max |got - want| over the arrays (inf when the shapes differ); ok when it is at most `atol`."""
  got, want = np.asarray(got), np.asarray(want)
  if got.shape != want.shape:
    return Row(part, f"{name} shape {got.shape} vs {want.shape}", float("inf"), False)
  diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
  return Row(part, name, diff, diff <= atol)


def _close(part, name, got, want):
  """`_compare` within HEAD_ATOL x max(1, max |want|)."""
  atol = HEAD_ATOL * max(1.0, float(np.max(np.abs(want))) if np.size(want) else 1.0)
  return _compare(part, f"{name} (atol {atol:.1e})", got, want, atol)


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


def head_model(golden_dir):
  """The RACE model of the goldens' flags (inference, dropout 0) with `ckpt/` loaded; (model, load report)."""
  meta, _ = _load(golden_dir)
  f = meta["flags"]
  run_config = RunConfig(is_training=False, use_tpu=False, use_bfloat16=f["use_bfloat16"], dropout=f["dropout"],
                         dropatt=f["dropatt"], init=f["init"], init_std=f["init_std"], init_range=f["init_range"],
                         clamp_len=f["clamp_len"])
  config = XLNetConfig(json_path=os.path.join(golden_dir, "ckpt", "xlnet_config.json"))
  model = task.build_model(config, run_config, f["summary_type"], f["use_summ_proj"])
  return model, checkpoint.load_weights(model, os.path.join(golden_dir, "ckpt", "xlnet_model.ckpt"))


def check_head(golden_dir):
  """The head part (see the module docstring)."""
  meta, _ = _load(golden_dir)
  head = meta["head"]
  seq_len = next(s for s in meta["settings"] if s["tag"] == head["setting"])["max_seq_length"]
  batch_size = head["eval_batch_size"]
  golden = np.load(os.path.join(golden_dir, "head", "eval.npz"))
  part = f"head {head['setting']} dev"
  model, report = head_model(golden_dir)
  rows = [Row(part, f"checkpoint: {len(report['loaded'])} variables loaded by name, kept initial "
                    f"{report['kept_initial']}, unused {report['unused']}", 0.0,
              not report["kept_initial"] and not report["unused"])]
  got = collections.defaultdict(list)
  for start in range(0, len(golden["label_ids"]), batch_size):
    rows_of = slice(start, start + batch_size)
    features = {key: golden[key][rows_of].reshape([-1, data.NUM_CHOICES, seq_len])
                for key in ("input_ids", "input_mask", "segment_ids")}
    features["label_ids"] = golden["label_ids"][rows_of]
    output, pooled = task.encode(model, features)
    logits, loss = task.forward(model, features)
    got["sequence_output"].append(output.numpy())
    got["pooled"].append(pooled.numpy())
    got["logits"].append(logits.numpy())
    got["per_example_loss"].append(loss.numpy())
    got["batch_total_loss"].append(np.mean(loss.numpy(), keepdims=True))
  rows.append(_close(part, "sequence_output_batch0 [L, 4B, H]", got["sequence_output"][0],
                     golden["sequence_output_batch0"]))
  for key in ("pooled", "logits", "per_example_loss", "batch_total_loss"):
    rows.append(_close(part, key, np.concatenate(got[key]), golden[key]))
  metrics = evaluation.eval_metrics(np.concatenate(got["logits"]), np.concatenate(got["per_example_loss"]),
                                    golden["label_ids"], golden["is_real_example"],
                                    np.concatenate(got["batch_total_loss"]))
  for key, golden_key in (("eval_accuracy", "eval_accuracy"), ("eval_loss", "eval_loss"),
                          ("loss", "estimator_loss")):
    rows.append(_close(part, f"{key} {metrics[key]:.6f} vs {golden_key} {float(golden[golden_key]):.6f}",
                       metrics[key], golden[golden_key]))
  return rows


PARTS = collections.OrderedDict([("features", check_features), ("records", check_records), ("head", check_head)])


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
