"""run_race.py's data flow and eval against the ORIGINAL run_race.py `main()` (tests/testdata/race_flow, written by
tests/testdata/generate_race_flow_goldens.py): per configuration the record files (names, every record in file
order, feature kinds), the examples in the order written, and the metrics of the `Eval | ...` line."""

import hashlib
import json
import os
import random

import numpy as np
import pytest

from helpers.example_records import FEATURES, read_records
import cli
import run_race
from xlnet_tf import training
from xlnet_tf.tasks.race import data as race_data

GOLDEN = "tests/testdata/race_flow"
TESTDATA = "tests/testdata"
META = json.loads(open(os.path.join(GOLDEN, "meta.json"), encoding="utf-8").read())


def example_key(example):
  """generate_race_flow_goldens.example_key for ours."""
  if not hasattr(example, "qa_list"):
    return "<pad>"
  text = json.dumps([example.context, list(example.qa_list), example.label, example.level])
  return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def options_for(config, tmp_path):
  flags = dict(dict(eval_batch_size=META["base_flags"]["eval_batch_size"]), **config["flags"])
  return cli.defaults(
      run_race.define_flags, do_eval=True, data_dir=os.path.join(TESTDATA, config["data_dir"]),
      spiece_model_file=os.path.join(TESTDATA, META["spm"]),
      model_config_path=os.path.join(TESTDATA, META["ckpt"], "xlnet_config.json"),
      init_checkpoint=os.path.join(TESTDATA, META["ckpt"], "xlnet_model.ckpt"), output_dir=str(tmp_path / "out"),
      model_dir=str(tmp_path / "model"), do_predict=True, predict_dir=str(tmp_path / "pred"), dropout=0.0, dropatt=0.0, sorted_file_order=True, seed=config["seed"],
      **flags)  # --seed: random.seed(seed) + random.shuffle


@pytest.mark.parametrize("name", sorted(META["configs"]))
def test_records_and_eval_equal_the_original_main(name, tmp_path):
  config = META["configs"][name]
  o = options_for(config, tmp_path)
  lines = []
  # pylint: disable=protected-access
  xlnet_config, tokenize_fn = run_race._model_files(o)
  run_race._prepare(o, "train", tokenize_fn, xlnet_config.n_token, lines.append)  # the records train() writes first
  result = run_race.run(o, training.make_strategy("one_device"), log_fn=lines.append)

  # The record files: the same names, every record equal, in the same order.
  written = sorted(n for n in os.listdir(o.output_dir) if n.endswith(".tf_record"))
  assert written == sorted(f["name"] for f in config["files"].values())
  with np.load(os.path.join(GOLDEN, f"{name}.npz")) as golden:
    for kind, file in config["files"].items():
      got, kinds = read_records(os.path.join(o.output_dir, file["name"]), FEATURES)
      assert kinds == file["feature_kinds"], kind
      for k in FEATURES:
        np.testing.assert_array_equal(got[k], golden[f"{kind}_{k}"], err_msg=f"{kind} {k}")

  # The examples in the order written: the split in file order (padded for eval), the training set shuffled by
  # random.Random(seed) as the original's random.shuffle after random.seed(seed).
  train = race_data.get_examples(o.data_dir, "train", o.high_only, o.middle_only, sorted_file_order=True)
  random.Random(config["seed"]).shuffle(train)
  assert [example_key(e) for e in train] == config["files"]["train"]["examples"]
  evaluated = race_data.pad_examples(race_data.get_examples(o.data_dir, o.eval_split, o.high_only, o.middle_only,
                                                            sorted_file_order=True), o.eval_batch_size)
  assert [example_key(e) for e in evaluated] == config["files"]["eval"]["examples"]

  # The model_fn's logits of the real questions (ours: the predictions file of the same checkpoint).
  with np.load(os.path.join(GOLDEN, f"{name}.npz")) as golden:
    real = golden["eval_is_real_example"] == 1
    want_logits = golden["eval_logits"][real]
  with open(result["predict"]["path"], encoding="utf-8") as f:
    np.testing.assert_allclose([e["logits"] for e in json.load(f)], want_logits, atol=1e-5)

  # The metrics the original logs: eval_accuracy and eval_loss over the real questions, the Estimator's loss.
  (got,) = result["eval"]
  want = config["eval_results"]
  assert got["eval_accuracy"] == want["eval_accuracy"]
  assert got["eval_loss"] == pytest.approx(want["eval_loss"], abs=2e-6)
  assert got["loss"] == pytest.approx(want["loss"], abs=2e-6)
  assert got["global_step"] == want["global_step"] == 0
  (line,) = [line for line in lines if line.startswith("Eval | ")]
  assert line.split(" | eval_loss")[0] == config["eval_line"].split(" | eval_loss")[0]
  assert [f.split(" ")[0] for f in line.split(" | ")[1:-1]] == ["eval_accuracy", "eval_loss", "loss", "global_step"]
