"""Compares this port's SQuAD path with reference outputs of the ORIGINAL code, part by part.

  python scripts/check_squad.py --golden_dir /work/shared/goldens/squad [--parts features,predictions]

The golden directory has the layout its README.md describes (data/, spm/, features/, head/, predictions/,
crafted/, meta.json). Each part prints its largest differences and PASS/FAIL:
- tokens:      encode_pieces of every paragraph = pieces_{cased,uncased}.json; query ids = query_ids_untruncated;
- features:    every setting x train/eval: every field of every feature identical (matched by unique_id), the
               examples the original drops produce no feature;
- predictions: write_predictions on head/predict.npz: the three JSON files byte-identical, the returned
               evaluation = eval_run_squad.json, the official evaluation = eval_squad_utils.json;
- crafted:     the same on crafted/raw_results.npz;
- head:        ckpt/ loaded by name into the model with the QA head (every variable of each side used), then
               head/train_batch.npz (TRAIN graph: the backbone output, start/end log-probs, cls_logits, the loss
               terms) and head/predict.npz (PREDICT graph: the beam's top-k log-probs and indices, cls_logits, the
               full log-probs) from their inputs. Tolerance: |diff| <= 1e-5 x max(1, max |golden|) (float32
               rounding of different kernels, as tests/test_parity.py), over the positions p_mask leaves; the
               masked positions (about -1e30) must be masked on both sides; top-k indices must be identical.
A part is a function `check_<name>(golden_dir) -> list of (label, max difference, ok)`, listed in PARTS.
"""

import argparse
import json
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=wrong-import-position
from absl import logging  # pylint: disable=wrong-import-position

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorflow as tf  # pylint: disable=wrong-import-position

from xlnet_tf import RunConfig, XLNetConfig  # pylint: disable=wrong-import-position
from xlnet_tf import checkpoint  # pylint: disable=wrong-import-position
from xlnet_tf.data import tokenization  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import data  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import evaluate  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import postprocess  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import records  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import task  # pylint: disable=wrong-import-position

OUTPUTS = ("predictions.json", "nbest_predictions.json", "null_odds.json")


def _load_json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def _settings(golden_dir):
  return _load_json(os.path.join(golden_dir, "meta.json"))["settings"]


def _sp_model(golden_dir):
  return tokenization.load_sentencepiece(os.path.join(golden_dir, "spm", "spiece.model"))


def _data_file(golden_dir, mode):
  return os.path.join(golden_dir, "data", f"{'train' if mode == 'train' else 'dev'}-v2.0.json")


def _num_diff(a, b):
  """Largest |a - b| of two equal-shape arrays (inf when the shapes differ)."""
  a, b = np.asarray(a), np.asarray(b)
  if a.shape != b.shape:
    return float("inf")
  if a.size == 0:
    return 0.0
  return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def _nbest_diff(got, want):
  """Largest difference of probability/start_log_prob/end_log_prob over the n-best lists (inf if texts differ)."""
  keys = ("probability", "start_log_prob", "end_log_prob")
  worst = 0.0
  for qid, entries in want.items():
    mine = got.get(qid, [])
    if [e["text"] for e in mine] != [e["text"] for e in entries]:
      return float("inf")
    worst = max(worst, _num_diff([[e[k] for k in keys] for e in mine], [[e[k] for k in keys] for e in entries]))
  return worst


def check_tokens(golden_dir):
  sp_model = _sp_model(golden_dir)
  rows = []
  for casing in ("cased", "uncased"):
    want = _load_json(os.path.join(golden_dir, "features", f"pieces_{casing}.json"))
    bad = sum(tokenization.encode_pieces(sp_model, tokenization.preprocess_text(p["context"],
                                                                              lower=casing == "uncased"))
              != p["pieces"] for p in want)
    rows.append((f"pieces {casing}: paragraphs differing", bad, bad == 0))
  for setting in _settings(golden_dir):
    for mode in ("train", "eval"):
      examples = _load_json(os.path.join(golden_dir, "features", f"{setting['tag']}_{mode}_examples.json"))
      bad = sum(tokenization.encode_ids(sp_model, tokenization.preprocess_text(
          e["question_text"], lower=setting["uncased"])) != e["query_ids_untruncated"] for e in examples)
      rows.append((f"query ids {setting['tag']} {mode}: questions differing", bad, bad == 0))
  return rows


def check_features(golden_dir):
  sp_model = _sp_model(golden_dir)
  rows = []
  for setting in _settings(golden_dir):
    tag, length = setting["tag"], setting["max_seq_length"]
    for mode in ("train", "eval"):
      examples = data.read_squad_examples(_data_file(golden_dir, mode), is_training=mode == "train")
      features, stats = data.build_features(examples, sp_model, length, setting["doc_stride"],
                                            setting["max_query_length"], mode == "train", setting["uncased"])
      got = records.features_to_arrays(features, length)
      golden_examples = _load_json(os.path.join(golden_dir, "features", f"{tag}_{mode}_examples.json"))
      want_dropped = [e["qas_id"] for e in golden_examples if e["dropped_mismatch"]]
      rows.append((f"{tag} {mode}: dropped {stats.dropped_mismatch} (golden {want_dropped})", 0,
                   stats.dropped_mismatch == want_dropped))
      with np.load(os.path.join(golden_dir, "features", f"{tag}_{mode}.npz")) as golden:
        want = {k: golden[k] for k in golden.files}
      rows.append((f"{tag} {mode}: features {len(features)} (golden {len(want['unique_id'])})", 0,
                   len(features) == len(want["unique_id"])))
      if set(got["unique_id"].tolist()) != set(want["unique_id"].tolist()):
        rows.append((f"{tag} {mode}: unique_ids differ", float("inf"), False))
        continue
      order = np.argsort(got["unique_id"])[np.searchsorted(np.sort(got["unique_id"]), want["unique_id"])]
      diffs = {k: _num_diff(got[k][order], want[k]) if k in got else float("inf") for k in want}
      keys_ok = sorted(got) == sorted(want) and all(got[k].dtype == want[k].dtype for k in want)
      worst = max(diffs.values())
      which = ", ".join(k for k, v in diffs.items() if v > 0) or "none"
      rows.append((f"{tag} {mode}: max |diff| over {len(want)} fields (fields differing: {which})", worst,
                   worst == 0.0 and keys_ok))
  return rows


def _head_eval_features(golden_dir):
  """The examples and evaluation features of dev-v2.0.json in the setting the head ran (meta.json's head)."""
  head_setting = _load_json(os.path.join(golden_dir, "meta.json"))["head"]["setting"]
  setting = next(s for s in _settings(golden_dir) if s["tag"] == head_setting)
  examples = data.read_squad_examples(_data_file(golden_dir, "eval"), is_training=False)
  features, _ = data.build_features(examples, _sp_model(golden_dir), setting["max_seq_length"],
                                    setting["doc_stride"], setting["max_query_length"], False, setting["uncased"])
  return examples, features


def _check_postprocess(golden_dir, results_path, reference_dir, label):
  flags = dict(n_best_size=5, max_answer_length=10, start_n_top=5, end_n_top=5)  # meta.json's base_flags.
  examples, features = _head_eval_features(golden_dir)
  orig_data = data.load_squad_data(_data_file(golden_dir, "eval"))
  with np.load(results_path) as r:
    results = postprocess.raw_results_from_arrays({k: r[k] for k in postprocess.RESULT_KEYS})
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    paths = [os.path.join(tmp, name) for name in OUTPUTS]
    out_eval = postprocess.write_predictions(
        examples, features, results, flags["n_best_size"], flags["max_answer_length"], *paths, orig_data,
        start_n_top=flags["start_n_top"], end_n_top=flags["end_n_top"])
    got = {}
    for name, p in zip(OUTPUTS, paths):
      with open(p, "rb") as f:
        got_bytes = f.read()
      with open(os.path.join(reference_dir, name), "rb") as f:
        want_bytes = f.read()
      got[name] = json.loads(got_bytes)
      want = json.loads(want_bytes)
      if name == "predictions.json":
        diff = sum(got[name].get(k) != v for k, v in want.items()) + len(set(got[name]) - set(want))
        what = "texts differing"
      elif name == "null_odds.json":
        diff = _num_diff([got[name].get(k, np.inf) for k in want], list(want.values()))
        what = "max |diff|"
      else:
        diff = _nbest_diff(got[name], want)
        what = "max |diff| of probabilities/log-probs (inf: texts differ)"
      rows.append((f"{label} {name}: {what}; bytes identical {got_bytes == want_bytes}", diff,
                   got_bytes == want_bytes))
  for name, want, value in (
      ("eval_run_squad.json", _load_json(os.path.join(reference_dir, "eval_run_squad.json")), out_eval),
      ("eval_squad_utils.json", _load_json(os.path.join(reference_dir, "eval_squad_utils.json")),
       evaluate.evaluate(orig_data, got["predictions.json"], got["null_odds.json"]))):
    diff = max(_num_diff(value.get(k, np.inf), v) for k, v in want.items())
    rows.append((f"{label} {name}: max |diff| over {len(want)} values", diff,
                 dict(value) == want and list(value) == list(want)))
  return rows


def check_predictions(golden_dir):
  return _check_postprocess(golden_dir, os.path.join(golden_dir, "head", "predict.npz"),
                            os.path.join(golden_dir, "predictions"), "predictions")


def check_crafted(golden_dir):
  return _check_postprocess(golden_dir, os.path.join(golden_dir, "crafted", "raw_results.npz"),
                            os.path.join(golden_dir, "crafted"), "crafted")


HEAD_ATOL = 1e-5  # times max(1, max |golden|): see the module docstring
_MASKED = -1e29  # log-probs below this are the original's masked positions (about -1e30)


def _head_close(got, want):
  """(max |diff| over the unmasked entries, ok): within HEAD_ATOL x max(1, max |want|) there, masked alike."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  if got.shape != want.shape:
    return float("inf"), False
  real = want > _MASKED
  if not np.array_equal(got > _MASKED, real):
    return float("inf"), False
  diff = _num_diff(got[real], want[real])
  return diff, diff <= HEAD_ATOL * max(1.0, float(np.max(np.abs(want[real]), initial=0.0)))


def _head_model(golden_dir, is_training):
  """The model with the QA head (dropout 0, as the goldens) and ckpt/ loaded into it by name; and the report."""
  config = XLNetConfig(json_path=os.path.join(golden_dir, "ckpt", "xlnet_config.json"))
  run_config = RunConfig(is_training=is_training, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0)
  model = task.build_model(config, run_config)
  return model, checkpoint.load_weights(model, os.path.join(golden_dir, "ckpt", "xlnet_model.ckpt"))


def check_head(golden_dir):
  rows = []
  model, report = _head_model(golden_dir, is_training=True)
  stored = [n for n in checkpoint.checkpoint_arrays(os.path.join(golden_dir, "ckpt", "xlnet_model.ckpt"))
            if n != "global_step"]
  rows.append((f"checkpoint: {len(report['loaded'])} of {len(stored)} variables loaded by name; model variables "
               f"not in it {report['kept_initial']}; checkpoint variables unused {report['unused']}", 0,
               not report["kept_initial"] and not report["unused"] and sorted(report["loaded"]) == sorted(stored)))
  with np.load(os.path.join(golden_dir, "head", "train_batch.npz")) as f:
    want = {k: f[k] for k in f.files}
  inputs = {k: tf.constant(want[k]) for k in ("input_ids", "segment_ids", "input_mask", "p_mask", "cls_index")}
  inputs.update(start_positions=tf.constant(want["start_position"]), end_positions=tf.constant(want["end_position"]),
                is_impossible=tf.constant(want["is_impossible"].astype(np.float32)))
  sequence_output, _ = model(tf.transpose(inputs["input_ids"]), seg_ids=tf.transpose(inputs["segment_ids"]),
                             input_mask=tf.transpose(inputs["input_mask"]), training=True)
  got = {k: v.numpy() for k, v in task.qa_outputs(model, inputs, training=True).items()}
  got["sequence_output"] = sequence_output.numpy()
  losses = dict(zip(("start_loss", "end_loss", "cls_loss"), task.qa_losses(got, inputs)))
  got.update({k: float(np.mean(v)) for k, v in losses.items()})
  got["total_loss"] = float(np.mean(task.qa_loss(got, inputs)))
  for key in ("sequence_output", "start_log_probs", "end_log_probs", "cls_logits", "start_loss", "end_loss",
              "cls_loss", "total_loss"):
    diff, ok = _head_close(got[key], want[key])
    rows.append((f"train_batch {key} {list(np.shape(want[key]))}: max |diff|", diff, ok))
  model, _ = _head_model(golden_dir, is_training=False)
  with np.load(os.path.join(golden_dir, "head", "predict.npz")) as f:
    want = {k: f[k] for k in f.files}
  inputs = {k: tf.constant(want[k]) for k in ("input_ids", "segment_ids", "input_mask", "p_mask", "cls_index")}
  got = {k: v.numpy() for k, v in task.qa_outputs(model, inputs, training=False, start_n_top=5, end_n_top=5).items()}
  for key in ("start_top_index", "end_top_index"):
    bad = int(np.sum(got[key] != want[key])) if got[key].shape == want[key].shape else -1
    rows.append((f"predict {key} {list(want[key].shape)}: entries differing", bad, bad == 0))
  for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits", "start_log_probs", "end_log_probs"):
    if key in want:  # the full log-probs are optional (the tests' copy leaves them out)
      diff, ok = _head_close(got[key], want[key])
      rows.append((f"predict {key} {list(want[key].shape)}: max |diff|", diff, ok))
  # End to end: these outputs through write_predictions give the original's answers and null odds.
  got["unique_ids"] = want["unique_ids"]
  examples, features = _head_eval_features(golden_dir)
  texts, _, null_odds = postprocess.compute_predictions(
      examples, features, postprocess.raw_results_from_arrays(got), 5, 10, start_n_top=5, end_n_top=5)
  want_texts = _load_json(os.path.join(golden_dir, "predictions", "predictions.json"))
  bad = sum(texts.get(k) != v for k, v in want_texts.items()) + len(set(texts) - set(want_texts))
  rows.append(("predict -> write_predictions: predictions.json texts differing", bad, bad == 0))
  want_null = _load_json(os.path.join(golden_dir, "predictions", "null_odds.json"))
  no_feature = [k for k, v in want_null.items() if v == postprocess.NULL_SCORE_NO_FEATURE]  # examples dropped
  scored = [k for k in want_null if k not in no_feature]
  diff, ok = _head_close([null_odds.get(k, np.inf) for k in scored], [want_null[k] for k in scored])
  ok = ok and all(null_odds.get(k) == want_null[k] for k in no_feature)
  rows.append((f"predict -> write_predictions: null_odds.json max |diff| ({len(no_feature)} examples without a "
               "feature: 1000000 on both sides)", diff, ok))
  return rows


PARTS = {
    "tokens": check_tokens,
    "features": check_features,
    "predictions": check_predictions,
    "crafted": check_crafted,
    "head": check_head,
}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--golden_dir", required=True, help="Directory of the original's SQuAD outputs.")
  parser.add_argument("--parts", default=",".join(PARTS), help=f"Comma-separated subset of {','.join(PARTS)}.")
  parser.add_argument("--verbose", action="store_true", help="Show the library's log (e.g. each dropped example).")
  args = parser.parse_args(argv)
  logging.set_verbosity(logging.INFO if args.verbose else logging.ERROR)
  parts = [p for p in args.parts.split(",") if p]
  unknown = [p for p in parts if p not in PARTS]
  if unknown:
    parser.error(f"--parts: unknown {unknown}; choose from {list(PARTS)}.")
  if not os.path.isfile(os.path.join(args.golden_dir, "meta.json")):
    parser.error(f"--golden_dir {args.golden_dir} has no meta.json; pass a directory laid out as the goldens' "
                 "README.md describes.")
  verdicts = {}
  for part in parts:
    rows = PARTS[part](args.golden_dir)
    print(f"== {part}")
    for label, diff, ok in rows:
      print(f"  {'ok  ' if ok else 'FAIL'} {label}: {diff:g}")
    verdicts[part] = all(ok for _, _, ok in rows)
    print(f"{part}: {'PASS' if verdicts[part] else 'FAIL'}")
  print("overall:", "PASS" if all(verdicts.values()) else "FAIL", " ".join(f"{p}={'PASS' if v else 'FAIL'}"
                                                                           for p, v in verdicts.items()))
  return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
  sys.exit(main())
