"""Compares this port's SQuAD path with reference outputs of the ORIGINAL code; the last line is PASS or FAIL.

  python scripts/check_squad.py --golden_dir ../shared/goldens/squad [--parts features,predictions]

The golden directory has the layout its README.md describes (data/, spm/, features/, ckpt/, head/, predictions/,
crafted/, meta.json). Every setting comes from meta.json: the feature settings (max_seq_length, max_query_length,
doc_stride, uncased), the head's setting, and the flags (n_best_size, max_answer_length, start_n_top, end_n_top,
predict_batch_size, dropout, the paths of the SentencePiece model, config and checkpoint). Parts:
- tokens:      encode_pieces of every paragraph = pieces_{cased,uncased}.json; query ids = query_ids_untruncated.
- features:    every setting x train/eval: every field of every feature identical (matched by unique_id), the
               examples the original drops produce no feature.
- predictions: write_predictions on head/predict.npz's outputs: the three JSON files byte-identical, the returned
               evaluation = eval_run_squad.json, the official evaluation = eval_squad_utils.json.
- crafted:     the same on crafted/raw_results.npz.
- head:        ckpt/ loaded by name into the model with the QA head (every variable of each side used);
               head/train_batch.npz: its inputs = our training features at `feature_rows`, then the TRAIN graph on
               them (backbone output, start/end log-probs, cls_logits, the loss terms); head/predict.npz's full
               start/end log-probs (when the golden holds them) from its inputs.
- predict:     the real prediction path: our evaluation features of the head's setting written by
               `records.prepare_eval_features` (the TFRecord and the features file), read back
               (`records.squad_dataset`, `records.load_eval_features`; inputs = head/predict.npz's, exact), run by
               `predict.Inference` with ckpt/ (top-k indices identical, log-probs and cls_logits within
               tolerance) and written by `predict.predict_checkpoint`: predictions.json texts identical,
               nbest_predictions.json texts identical and numbers within tolerance, null_odds.json within
               tolerance, the evaluation within tolerance of eval_run_squad.json.
Tolerance for float32 model outputs: |diff| <= 1e-5 x max(1, max |golden|) (golden_check.REL_TOL; float32
rounding of different kernels, as tests/test_parity.py), over the positions p_mask leaves; the masked positions
(about -1e30) must be masked on both sides. Everything else is exact. On a run of every part, each key of each
golden npz must have been compared, and each npz beside the parts' files listed (scripts/golden_check.py).
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=wrong-import-position

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from xlnet_tf import stderr_filter  # pylint: disable=wrong-import-position  (the standard library only)
if __name__ == "__main__":
  stderr_filter.start()  # TensorFlow's start-up lines off stderr, as the CLIs' (cli.filter_stderr)

import tensorflow as tf  # pylint: disable=wrong-import-position

from scripts import golden_check  # pylint: disable=wrong-import-position
from scripts.golden_check import Part, Row, compare, max_diff  # pylint: disable=wrong-import-position
from xlnet_tf import RunConfig, XLNetConfig  # pylint: disable=wrong-import-position
from xlnet_tf import checkpoint  # pylint: disable=wrong-import-position
from xlnet_tf.data import records as records_lib  # pylint: disable=wrong-import-position
from xlnet_tf.data import tokenization  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import data  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import evaluate  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import examples as squad_examples  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import postprocess  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import predict  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import records  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.squad import task  # pylint: disable=wrong-import-position

OUTPUTS = ("predictions.json", "nbest_predictions.json", "null_odds.json")
EVALS = ("eval_run_squad.json", "eval_squad_utils.json")
MODES = ("train", "eval")
INPUTS = ("input_ids", "segment_ids", "input_mask", "p_mask", "cls_index")
_MASKED = -1e29  # log-probs below this are the original's masked positions (about -1e30)
_NO_FEATURE_LOG_PROB = 1e5  # |n-best log-probs| this large are the original's -1e6 for an example without a feature


# ---------------------------------------------------------------------------------------------------------------
# meta.json


def _flags(meta):
  return meta["flags"]


def _head_setting(meta):
  return next(s for s in meta["settings"] if s["tag"] == meta["head"]["setting"])


def _data_file(mode):
  return f"data/{'train' if mode == 'train' else 'dev'}-v2.0.json"


def _model_files(meta):
  return [_flags(meta)["model_config_path"]] + golden_check.checkpoint_files(_flags(meta)["init_checkpoint"])


def _sp_model(golden):
  return tokenization.load_sentencepiece(golden.path(golden.meta["spm"]))


def _postprocess_options(meta):
  """write_predictions' settings, from meta.json's flags."""
  f = _flags(meta)
  return dict(n_best_size=f["n_best_size"], max_answer_length=f["max_answer_length"], start_n_top=f["start_n_top"],
              end_n_top=f["end_n_top"])


def _answer_options(opts):
  """The `AnswerOptions` of `_postprocess_options`."""
  return postprocess.AnswerOptions(n_best_size=opts["n_best_size"], max_answer_length=opts["max_answer_length"])


def _feature_options(setting):
  """The `FeatureOptions` of one golden setting."""
  return data.FeatureOptions(max_seq_length=setting["max_seq_length"], doc_stride=setting["doc_stride"],
                             max_query_length=setting["max_query_length"], uncased=setting["uncased"])


def _features(golden, setting, mode):
  """(examples, features, stats) of our converter on the golden's data file with one setting."""
  examples = squad_examples.read_squad_examples(golden.path(_data_file(mode)), is_training=mode == "train")
  features, stats = data.build_features(examples, _sp_model(golden), _feature_options(setting), mode == "train")
  return examples, features, stats


# ---------------------------------------------------------------------------------------------------------------
# tokens, features


def files_tokens(meta):
  return ([meta["spm"]] + [f"features/pieces_{c}.json" for c in ("cased", "uncased")] +
          [f"features/{s['tag']}_{mode}_examples.json" for s in meta["settings"] for mode in MODES])


def check_tokens(golden):
  sp_model = _sp_model(golden)
  rows = []
  for casing in ("cased", "uncased"):
    want = golden.json(f"features/pieces_{casing}.json")
    bad = sum(tokenization.encode_pieces(sp_model, tokenization.preprocess_text(p["context"],
                                                                              lower=casing == "uncased"))
              != p["pieces"] for p in want)
    rows.append(Row(f"pieces {casing}: paragraphs differing (of {len(want)})", bad, bad == 0 and len(want) > 0))
  for setting in golden.meta["settings"]:
    for mode in MODES:
      examples = golden.json(f"features/{setting['tag']}_{mode}_examples.json")
      bad = sum(tokenization.encode_ids(sp_model, tokenization.preprocess_text(
          e["question_text"], lower=setting["uncased"])) != e["query_ids_untruncated"] for e in examples)
      rows.append(Row(f"query ids {setting['tag']} {mode}: questions differing (of {len(examples)})", bad,
                      bad == 0 and len(examples) > 0))
  return rows


def files_features(meta):
  return ([meta["spm"]] + [_data_file(mode) for mode in MODES] +
          [f"features/{s['tag']}_{mode}{ext}" for s in meta["settings"] for mode in MODES
           for ext in (".npz", "_examples.json")])


def check_features(golden):
  rows = []
  for setting in golden.meta["settings"]:
    tag, length = setting["tag"], setting["max_seq_length"]
    for mode in MODES:
      _, features, stats = _features(golden, setting, mode)
      got = records.features_to_arrays(features, length)
      golden_examples = golden.json(f"features/{tag}_{mode}_examples.json")
      want_dropped = [e["qas_id"] for e in golden_examples if e["dropped_mismatch"]]
      rows.append(Row(f"{tag} {mode}: dropped {stats.dropped_mismatch} (golden {want_dropped})", 0,
                      stats.dropped_mismatch == want_dropped))
      npz = golden.npz(f"features/{tag}_{mode}.npz")
      want = {k: npz[k] for k in npz.files}
      rows.append(Row(f"{tag} {mode}: features {len(features)} (golden {len(want['unique_id'])})", 0,
                      len(features) == len(want["unique_id"])))
      if set(got["unique_id"].tolist()) != set(want["unique_id"].tolist()):
        rows.append(Row(f"{tag} {mode}: unique_ids differ", float("inf"), False))
        continue
      order = np.argsort(got["unique_id"])[np.searchsorted(np.sort(got["unique_id"]), want["unique_id"])]
      diffs = {k: max_diff(got[k][order], want[k]) if k in got else float("inf") for k in want}
      keys_ok = sorted(got) == sorted(want) and all(got[k].dtype == want[k].dtype for k in want)
      worst = max(diffs.values())
      which = ", ".join(k for k, v in diffs.items() if v > 0) or "none"
      rows.append(Row(f"{tag} {mode}: max |diff| over {len(want)} fields (fields differing: {which})", worst,
                      worst == 0.0 and keys_ok))
  return rows


# ---------------------------------------------------------------------------------------------------------------
# predictions, crafted: post-processing of the original's head outputs


def _eval_inputs(golden):
  """The examples, evaluation features and `data` list of dev-v2.0.json in the head's setting."""
  examples, features, _ = _features(golden, _head_setting(golden.meta), "eval")
  return examples, features, squad_examples.load_squad_data(golden.path(_data_file("eval")))


def _nbest_rows(label, got, want):
  """The n-best lists: texts identical, probabilities and log-probs within tolerance."""
  keys = ("probability", "start_log_prob", "end_log_prob")
  texts_bad = sum([e["text"] for e in got.get(qid, [])] != [e["text"] for e in entries]
                  for qid, entries in want.items()) + len(set(got) - set(want))
  rows = [Row(f"{label} nbest_predictions.json: questions whose n-best texts differ (of {len(want)})", texts_bad,
              texts_bad == 0)]
  if not texts_bad:
    values = lambda d: np.array([[e[k] for k in keys] for qid in want for e in d[qid]], np.float64).reshape([-1, 3])
    got_values, want_values = values(got), values(want)
    sentinel = np.abs(want_values) >= _NO_FEATURE_LOG_PROB  # the -1e6 of an example without a feature: exact
    rows.append(compare(f"{label} nbest_predictions.json: the {int(sentinel.sum())} log-probs of -1e6 (examples "
                        "without a feature)", got_values[sentinel], want_values[sentinel]))
    rows.append(golden_check.close(f"{label} nbest_predictions.json: the other probabilities/log-probs",
                                   got_values[~sentinel], want_values[~sentinel]))
  return rows


def _check_postprocess(golden, results_file, reference_dir, label):
  examples, features, orig_data = _eval_inputs(golden)
  npz = golden.npz(results_file)
  results = postprocess.raw_results_from_arrays({k: npz[k] for k in postprocess.RESULT_KEYS})
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    paths = [os.path.join(tmp, name) for name in OUTPUTS]
    opts = _postprocess_options(golden.meta)
    out_eval = postprocess.write_predictions(
        examples, features, results, _answer_options(opts), paths, orig_data, start_n_top=opts["start_n_top"],
        end_n_top=opts["end_n_top"])
    got = {}
    for name, p in zip(OUTPUTS, paths):
      with open(p, "rb") as f:
        got_bytes = f.read()
      with open(golden.path(f"{reference_dir}/{name}"), "rb") as f:
        want_bytes = f.read()
      got[name], want = json.loads(got_bytes), json.loads(want_bytes)
      if name == "predictions.json":
        diff = sum(got[name].get(k) != v for k, v in want.items()) + len(set(got[name]) - set(want))
        what = "texts differing"
      elif name == "null_odds.json":
        diff = max_diff([got[name].get(k, np.inf) for k in want], list(want.values()))
        what = "max |diff|"
      else:
        diff = max(r.max_diff for r in _nbest_rows(label, got[name], want))
        what = "max |diff| of probabilities/log-probs (inf: texts differ)"
      rows.append(Row(f"{label} {name}: {what}; bytes identical {got_bytes == want_bytes}", diff,
                      got_bytes == want_bytes))
  for name, value in ((EVALS[0], out_eval),
                      (EVALS[1], evaluate.evaluate(orig_data, got["predictions.json"], got["null_odds.json"]))):
    want = golden.json(f"{reference_dir}/{name}")
    diff = max((max_diff(value.get(k, np.inf), v) for k, v in want.items()), default=float("inf"))
    rows.append(Row(f"{label} {name}: max |diff| over {len(want)} values", diff,
                    dict(value) == want and list(value) == list(want)))
  return rows


def files_predictions(meta):
  return ([meta["spm"], _data_file("eval"), "head/predict.npz"] +
          [f"predictions/{name}" for name in OUTPUTS + EVALS])


def check_predictions(golden):
  return _check_postprocess(golden, "head/predict.npz", "predictions", "predictions")


def files_crafted(meta):
  return [meta["spm"], _data_file("eval"), "crafted/raw_results.npz"] + [f"crafted/{n}" for n in OUTPUTS + EVALS]


def check_crafted(golden):
  return _check_postprocess(golden, "crafted/raw_results.npz", "crafted", "crafted")


# ---------------------------------------------------------------------------------------------------------------
# head: the model on the golden inputs


def _head_close(label, got, want):
  """A Row within golden_check.tolerance over the unmasked entries; the masked ones (about -1e30) masked alike."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  if got.shape != want.shape:
    return Row(f"{label}: shape {list(got.shape)} vs golden {list(want.shape)}", float("inf"), False)
  real = want > _MASKED
  if not np.array_equal(got > _MASKED, real):
    return Row(f"{label}: masked positions differ", float("inf"), False)
  return golden_check.close(label, got[real], want[real])


def _head_model(golden, is_training):
  """The model with the QA head (meta.json's flags) and the golden checkpoint loaded by name; (model, report)."""
  f = _flags(golden.meta)
  config = XLNetConfig(json_path=golden.path(f["model_config_path"]))
  run_config = RunConfig(is_training=is_training, use_tpu=False, use_bfloat16=f["use_bfloat16"], dropout=f["dropout"],
                         dropatt=f["dropatt"], init=f["init"], init_std=f["init_std"], init_range=f["init_range"],
                         clamp_len=f["clamp_len"])
  model = task.build_model(config, run_config)
  return model, checkpoint.load_weights(model, golden.checkpoint(f["init_checkpoint"]))


def files_head(meta):
  return [meta["spm"], _data_file("train")] + _model_files(meta) + ["head/train_batch.npz", "head/predict.npz"]


def check_head(golden):
  rows = []
  model, report = _head_model(golden, is_training=True)
  prefix = golden.checkpoint(_flags(golden.meta)["init_checkpoint"])
  stored = [n for n in checkpoint.checkpoint_arrays(prefix) if n != "global_step"]
  rows.append(Row(f"checkpoint: {len(report['loaded'])} of {len(stored)} variables loaded by name; model variables "
                  f"not in it {report['kept_initial']}; checkpoint variables unused {report['unused']}", 0,
                  not report["kept_initial"] and not report["unused"] and sorted(report["loaded"]) == sorted(stored)))
  want = golden.npz("head/train_batch.npz")
  # Its inputs are our training features of the head's setting at feature_rows.
  _, features, _ = _features(golden, _head_setting(golden.meta), "train")
  ours = records.features_to_arrays(features, _head_setting(golden.meta)["max_seq_length"])
  feature_rows = want["feature_rows"]
  for key in ("unique_id",) + INPUTS + ("start_position", "end_position", "is_impossible"):
    rows.append(compare(f"train_batch {key} vs our training features at feature_rows",
                        ours[key][feature_rows] if len(ours[key]) > np.max(feature_rows) else ours[key], want[key]))
  inputs = {k: tf.constant(want[k]) for k in INPUTS}
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
    rows.append(_head_close(f"train_batch {key} {list(np.shape(want[key]))}", got[key], want[key]))
  want = golden.npz("head/predict.npz")
  full = [k for k in ("start_log_probs", "end_log_probs") if k in want]  # the tests' copy leaves them out
  if full:
    model, _ = _head_model(golden, is_training=False)
    opts = _postprocess_options(golden.meta)
    got = task.qa_outputs(model, {k: tf.constant(want[k]) for k in INPUTS}, training=False,
                          start_n_top=opts["start_n_top"], end_n_top=opts["end_n_top"])
    for key in full:
      rows.append(_head_close(f"predict.npz {key} {list(want[key].shape)} from its inputs", got[key].numpy(),
                              want[key]))
  return rows


# ---------------------------------------------------------------------------------------------------------------
# predict: the real prediction path


def files_predict(meta):
  return ([meta["spm"], _data_file("eval")] + _model_files(meta) + ["head/predict.npz"] +
          [f"predictions/{name}" for name in OUTPUTS + EVALS[:1]])


def check_predict(golden):
  rows = []
  setting, f, opts = _head_setting(golden.meta), _flags(golden.meta), _postprocess_options(golden.meta)
  length = setting["max_seq_length"]
  spm = golden.path(golden.meta["spm"])
  want = golden.npz("head/predict.npz")
  model, _ = _head_model(golden, is_training=False)
  inference = predict.Inference(model, start_n_top=opts["start_n_top"], end_n_top=opts["end_n_top"])
  with tempfile.TemporaryDirectory() as tmp:
    examples, _, record, _ = records.prepare_eval_features(
        golden.path(_data_file("eval")), tokenization.load_sentencepiece(spm), spm, tmp,
        _feature_options(setting), overwrite_data=True)
    features = records.load_eval_features(os.path.join(tmp, records.eval_features_name(
        spm, length, setting["max_query_length"])))
    orig_data = squad_examples.load_squad_data(golden.path(_data_file("eval")))
    dataset = records.squad_dataset(record, length, records_lib.ReadConfig(batch_size=f["predict_batch_size"]))
    batches = list(dataset.as_numpy_iterator())
    for key, golden_key in [("unique_ids", "unique_id")] + [(k, k) for k in INPUTS]:
      got = np.concatenate([b[key] for b in batches]) if batches else np.zeros([0])
      rows.append(compare(f"record read back: {key} vs predict.npz {golden_key}", got, want[golden_key]))
    rows.append(compare("features file read back: unique_id", [x.unique_id for x in features], want["unique_id"]))
    inference.load(golden.checkpoint(f["init_checkpoint"]))
    out = inference.run(dataset)
    for key in ("unique_ids", "start_top_index", "end_top_index"):
      rows.append(compare(f"Inference {key}", out[key], want[key]))
    for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
      rows.append(_head_close(f"Inference {key}", out[key], want[key]))
    eval_set = predict.EvalSet(examples, features, record, orig_data, length)
    out_eval = predict.predict_checkpoint(inference, golden.checkpoint(f["init_checkpoint"]), eval_set, tmp,
                                          f["predict_batch_size"], _answer_options(opts))
    got = {}
    for name in OUTPUTS:
      with open(os.path.join(tmp, name), encoding="utf-8") as fp:
        got[name] = json.load(fp)
  want_texts = golden.json("predictions/predictions.json")
  bad = sum(got["predictions.json"].get(k) != v for k, v in want_texts.items()) + len(
      set(got["predictions.json"]) - set(want_texts))
  rows.append(Row(f"predict_checkpoint predictions.json: texts differing (of {len(want_texts)})", bad, bad == 0))
  rows += _nbest_rows("predict_checkpoint", got["nbest_predictions.json"],
                      golden.json("predictions/nbest_predictions.json"))
  want_null = golden.json("predictions/null_odds.json")
  no_feature = [k for k, v in want_null.items() if v == postprocess.NULL_SCORE_NO_FEATURE]  # examples dropped
  null_odds = got["null_odds.json"]
  rows.append(Row(f"predict_checkpoint null_odds.json: {len(no_feature)} examples without a feature: 1000000 on "
                  "both sides", 0, all(null_odds.get(k) == want_null[k] for k in no_feature) and
                  sorted(null_odds) == sorted(want_null)))
  scored = [k for k in want_null if k not in no_feature]
  rows.append(golden_check.close("predict_checkpoint null_odds.json", [null_odds.get(k, np.inf) for k in scored],
                                 [want_null[k] for k in scored]))
  want_eval = golden.json(f"predictions/{EVALS[0]}")
  rows.append(Row(f"predict_checkpoint evaluation keys = {EVALS[0]}'s", 0, list(out_eval) == list(want_eval)))
  rows.append(golden_check.close(f"predict_checkpoint evaluation vs {EVALS[0]}",
                                 [out_eval.get(k, np.inf) for k in want_eval], list(want_eval.values())))
  return rows


PARTS = {
    "tokens": Part(files_tokens, check_tokens),
    "features": Part(files_features, check_features),
    "predictions": Part(files_predictions, check_predictions),
    "crafted": Part(files_crafted, check_crafted),
    "head": Part(files_head, check_head),
    "predict": Part(files_predict, check_predict),
}


def main(argv=None):
  """Runs the checker; returns the exit code (0: PASS, 1: FAIL)."""
  return golden_check.main(argv, __doc__.splitlines()[0], "SQuAD", PARTS,
                           verbose_help="Show the library's log (e.g. each dropped example).",
                           example="tests/testdata/squad")


if __name__ == "__main__":
  sys.exit(main())
