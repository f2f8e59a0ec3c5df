"""Compares this port's RACE path with the goldens of the ORIGINAL run_race.py; the last line is PASS or FAIL.

  python scripts/check_race.py --golden_dir ../shared/goldens/race [--parts features,head,predict]

`--golden_dir` has the layout of the RACE goldens (README.md there): `data/`, `spm/`, `features/<tag>_{train,dev}.npz`
(+ `_examples.json`), `ckpt/`, `head/eval.npz`, `meta.json`. Every setting comes from meta.json: the settings
(max_seq_length, max_qa_length, uncased) and their file order, the head's setting and eval_batch_size, the model
flags (summary_type, use_summ_proj, dropout, ...) and the paths of the SentencePiece model and the checkpoint.
The golden's files are read in meta.json's `file_order` (the order the original's `tf.gfile.ListDirectory` gave on
its machine), whatever order this machine's directory listing has. Parts:

  features  every setting and split: the files the directory holds = meta's; per example (file, question index,
            level, label, the four question/option strings, token counts) against `_examples.json`;
            input_ids/input_mask/segment_ids/label_id/is_real_example of the default (the original's option
            aliasing) against the npz, of fix_option_aliasing=True against `unaliased_*`, the padding example
            against `padding_example_*`, and which options alias against `differs_from_unaliased`. Exact.
  head      `ckpt/` loaded by name into the RACE model (every model variable from the checkpoint, every checkpoint
            variable used); the inputs of `head/eval.npz` in batches of eval_batch_size: the time-major sequence
            output of batch 0 and the summary (`pooled`, row b*4 + c).
  predict   the dev set of the head's setting, padded to eval_batch_size, written by `records.write_records`,
            read back by `evaluation.eval_dataset` (inputs against `head/eval.npz`'s, exact), and predicted by
            `evaluation.Inference` with `ckpt/`: `logits`, `per_example_loss`, each batch's total loss, and the
            eval numbers (`eval_accuracy`, `eval_loss`, the Estimator's `loss`).

Float32 outputs of the model pass within 1e-5 x max(1, max |golden|) (golden_check.REL_TOL, as
tests/test_parity.py: another operation order than the original's); everything else is exact. On a run of every
part, each key of each golden npz must have been compared, and each npz beside the parts' files listed
(scripts/golden_check.py).
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=wrong-import-position

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from xlnet_tf import stderr_filter  # pylint: disable=wrong-import-position  (the standard library only)
if __name__ == "__main__":
  stderr_filter.start()  # TensorFlow's start-up lines off stderr, as the CLIs' (cli.filter_stderr)

from scripts import golden_check  # pylint: disable=wrong-import-position
from scripts.golden_check import Part, Row, close, compare  # pylint: disable=wrong-import-position
from xlnet_tf import RunConfig, XLNetConfig  # pylint: disable=wrong-import-position
from xlnet_tf import checkpoint  # pylint: disable=wrong-import-position
from xlnet_tf.data import tokenization  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.race import data  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.race import evaluation  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.race import records  # pylint: disable=wrong-import-position
from xlnet_tf.tasks.race import task  # pylint: disable=wrong-import-position

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


# ---------------------------------------------------------------------------------------------------------------
# meta.json


def _splits(setting):
  return [split for split in data.SPLITS if split in setting]


def _head_setting(meta):
  return next(s for s in meta["settings"] if s["tag"] == meta["head"]["setting"])


def _ckpt_prefix(meta):
  return meta["flags"]["init_checkpoint"]


def _model_files(meta):
  return [meta["flags"]["model_config_path"]] + golden_check.checkpoint_files(_ckpt_prefix(meta))


def _examples(golden, setting, split):
  """The split's examples, files in meta's `file_order` (the original's), each read by `data.read_race_file`."""
  return [ex for rel in setting[split]["file_order"]
          for ex in data.read_race_file(golden.path(os.path.join("data", rel)), rel.split("/")[1])]


def _tokenize_fn(golden, setting):
  return tokenization.make_tokenize_fn(tokenization.load_sentencepiece(golden.path(golden.meta["spm"])),
                                       setting["uncased"])


# ---------------------------------------------------------------------------------------------------------------
# features


def files_features(meta):
  files = [meta["spm"]]
  for s in meta["settings"]:
    for split in _splits(s):
      files += [os.path.join("data", rel) for rel in s[split]["file_order"]]
      files += [f"features/{s['tag']}_{split}.npz", f"features/{s['tag']}_{split}_examples.json"]
  return list(dict.fromkeys(files))


def check_features(golden):
  """The features part (see the module docstring)."""
  rows = []
  data_dir = os.path.join(golden.root, "data")
  for setting in golden.meta["settings"]:
    tag, seq_len, qa_len = setting["tag"], setting["max_seq_length"], setting["max_qa_length"]
    tokenize_fn = _tokenize_fn(golden, setting)
    for split in _splits(setting):
      part = f"{tag} {split}"
      want_files = setting[split]["file_order"]
      listed = [os.path.relpath(ex.file, data_dir) for ex in data.get_examples(data_dir, split)]
      listed = list(dict.fromkeys(listed))
      rows.append(Row(f"{part}: the directory's files (listed here as {listed}) = meta file_order {want_files} "
                      f"as sets", 0.0 if sorted(listed) == sorted(want_files) else float("inf"),
                      sorted(listed) == sorted(want_files)))
      examples = _examples(golden, setting, split)
      info = golden.json(f"features/{tag}_{split}_examples.json")
      rows.append(compare(f"{part}: examples {len(examples)} vs golden {len(info)} (meta {setting[split]['examples']})",
                          [len(examples), len(examples)], [len(info), setting[split]["examples"]]))
      got_info = [(os.path.relpath(ex.file, data_dir), ex.question_index, ex.level, ex.label, ex.qa_list,
                   len(tokenize_fn(ex.context)), [len(tokenize_fn(qa)) for qa in ex.qa_list]) for ex in examples]
      want_info = [(e["file"], e["question_index"], e["level"], e["label"], [o["qa"] for o in e["options"]],
                    e["context_tokens"], [o["qa_tokens"] for o in e["options"]]) for e in info]
      bad = sum(g != w for g, w in zip(got_info, want_info)) + abs(len(got_info) - len(want_info))
      rows.append(Row(f"{part}: examples differing from _examples.json (file, question_index, level, label, qa, "
                      f"token counts)", bad, bad == 0))
      golden_npz = golden.npz(f"features/{tag}_{split}.npz")
      got = {}
      for fix, prefix in ((False, ""), (True, "unaliased_")):
        got[fix] = data.convert_examples(examples, tokenize_fn, seq_len, qa_len, fix_option_aliasing=fix)
        for key in INPUT_KEYS:
          rows.append(compare(f"{part}: fix_option_aliasing={fix} {key} vs {prefix}{key}", got[fix][key],
                              golden_npz[prefix + key]))
      rows.append(compare(f"{part}: label_ids vs label_id", got[False]["label_ids"], golden_npz["label_id"]))
      rows.append(compare(f"{part}: is_real_example", got[False]["is_real_example"], golden_npz["is_real_example"]))
      pad = data.features_to_arrays([data.convert_single_example(data.PaddingInputExample(), tokenize_fn, seq_len,
                                                                 qa_len)])
      for key, golden_key in (("input_ids", "input_ids"), ("input_mask", "input_mask"),
                              ("segment_ids", "segment_ids"), ("label_ids", "label_id"),
                              ("is_real_example", "is_real_example")):
        rows.append(compare(f"{part}: padding example {key}", pad[key][0], golden_npz[f"padding_example_{golden_key}"]))
      shape = (len(examples), data.NUM_CHOICES, seq_len)
      got_differ = np.any((got[False]["input_ids"].reshape(shape) != got[True]["input_ids"].reshape(shape)) |
                          (got[False]["segment_ids"].reshape(shape) != got[True]["segment_ids"].reshape(shape)),
                          axis=-1)
      want_differ = np.array([[opt["differs_from_unaliased"] for opt in ex["options"]] for ex in info])
      rows.append(compare(f"{part}: aliased option sequences vs differs_from_unaliased", got_differ, want_differ))
  return rows


# ---------------------------------------------------------------------------------------------------------------
# head


def head_model(golden):
  """The RACE model of meta.json's flags for inference with the golden checkpoint loaded; (model, load report)."""
  f = golden.meta["flags"]
  run_config = RunConfig(is_training=False, use_tpu=False, use_bfloat16=f["use_bfloat16"], dropout=f["dropout"],
                         dropatt=f["dropatt"], init=f["init"], init_std=f["init_std"], init_range=f["init_range"],
                         clamp_len=f["clamp_len"])
  config = XLNetConfig(json_path=golden.path(f["model_config_path"]))
  model = task.build_model(config, run_config, f["summary_type"], f["use_summ_proj"])
  return model, checkpoint.load_weights(model, golden.checkpoint(_ckpt_prefix(golden.meta)))


def files_head(meta):
  return _model_files(meta) + ["head/eval.npz"]


def check_head(golden):
  """The head part (see the module docstring)."""
  head = golden.meta["head"]
  seq_len, batch_size = _head_setting(golden.meta)["max_seq_length"], head["eval_batch_size"]
  want = golden.npz("head/eval.npz")
  model, report = head_model(golden)
  rows = [Row(f"checkpoint: {len(report['loaded'])} variables loaded by name, kept initial "
              f"{report['kept_initial']}, unused {report['unused']}", 0.0,
              not report["kept_initial"] and not report["unused"])]
  inputs = {key: want[key] for key in INPUT_KEYS}
  outputs, pooled = [], []
  for start in range(0, len(inputs["input_ids"]), batch_size):
    features = {key: v[start:start + batch_size].reshape([-1, data.NUM_CHOICES, seq_len]) for key, v in inputs.items()}
    output, summary = task.encode(model, features)
    outputs.append(output.numpy())
    pooled.append(summary.numpy())
  rows.append(close("sequence_output_batch0 [L, 4B, H] from head/eval.npz's inputs", outputs[0],
                    want["sequence_output_batch0"]))
  rows.append(close("pooled [4N, H] from head/eval.npz's inputs", np.concatenate(pooled), want["pooled"]))
  return rows


# ---------------------------------------------------------------------------------------------------------------
# predict


def files_predict(meta):
  return ([meta["spm"]] + [os.path.join("data", rel) for rel in _head_setting(meta)["dev"]["file_order"]] +
          _model_files(meta) + ["head/eval.npz"])


def check_predict(golden):
  """The predict part (see the module docstring)."""
  head = golden.meta["head"]
  setting = _head_setting(golden.meta)
  seq_len, batch_size = setting["max_seq_length"], head["eval_batch_size"]
  want = golden.npz("head/eval.npz")
  examples = _examples(golden, setting, "dev")
  padded = data.pad_examples(examples, batch_size)
  rows = [compare(f"{len(examples)} real + {len(padded) - len(examples)} padding examples vs meta's head",
                  [len(examples), len(padded) - len(examples)], [head["real_examples"], head["padding_examples"]])]
  model, _ = head_model(golden)
  inference = evaluation.Inference(model)
  with tempfile.TemporaryDirectory() as out_dir:
    path = os.path.join(out_dir, records.record_file_name(golden.meta["spm"], seq_len, "dev"))
    records.write_records(padded, _tokenize_fn(golden, setting), path, seq_len, setting["max_qa_length"])
    dataset = evaluation.eval_dataset(path, seq_len, batch_size)
    batches = list(dataset.as_numpy_iterator())
    for key in INPUT_KEYS + ("label_ids", "is_real_example"):
      got = np.concatenate([b[key] for b in batches]) if batches else np.zeros([0])
      rows.append(compare(f"records read back: {key} {list(got.shape)} vs head/eval.npz", got.reshape(
          want[key].shape) if got.size == want[key].size else got, want[key]))
    inference.load(golden.checkpoint(_ckpt_prefix(golden.meta)))
    out = inference.run(dataset)
  rows.append(close("Inference logits", out["logits"], want["logits"]))
  rows.append(close("Inference per_example_loss", out["loss"], want["per_example_loss"]))
  rows.append(close("Inference batch losses vs batch_total_loss", out["batch_loss"], want["batch_total_loss"]))
  metrics = evaluation.eval_metrics(out["logits"], out["loss"], out["label_ids"], out["is_real_example"],
                                    out["batch_loss"])
  for key, golden_key in (("eval_accuracy", "eval_accuracy"), ("eval_loss", "eval_loss"),
                          ("loss", "estimator_loss")):
    rows.append(close(f"{key} {metrics[key]:.6f} vs {golden_key} {float(want[golden_key]):.6f}", metrics[key],
                      want[golden_key]))
  return rows


PARTS = {
    "features": Part(files_features, check_features),
    "head": Part(files_head, check_head),
    "predict": Part(files_predict, check_predict),
}


def main(argv=None):
  """Runs the checker; returns the exit code (0: PASS, 1: FAIL)."""
  return golden_check.main(argv, __doc__.splitlines()[0], "RACE", PARTS, example="tests/testdata/race")


if __name__ == "__main__":
  sys.exit(main())
