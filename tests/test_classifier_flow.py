"""run_classifier.py's eval and predict against the ORIGINAL run_classifier.py `main()` (tests/testdata/classifier_flow,
written by tests/testdata/generate_classifier_flow_goldens.py): over the same checkpoints (--eval_all_ckpt or the
last), the `Eval result | ...` and `Best result | ...` lines (keys, order, formatting; accuracy, steps and paths
exactly, losses within 2e-6 or 1e-6 relative, Pearson within PEARSON_ATOL), the returned metrics, and the
prediction files (`{task}.tsv` labels exactly, regression values and `{task}.logits.json` within 1e-5)."""

import json
import os
import shutil

import pytest

import cli
import run_classifier
from xlnet_tf import training

GOLDEN = "tests/testdata/classifier_flow"
TESTDATA = "tests/testdata"
META = json.loads(open(os.path.join(GOLDEN, "meta.json"), encoding="utf-8").read())
EXACT = ("eval_accuracy", "global_step", "path", "step")
# The original's eval_pearsonr is tf.contrib's streaming float32 (batch-wise co-moment updates); ours is float64
# over all examples: on the original's own logits at most 4.4e-8 apart here. The rest is the forward pass: our logits
# differ from the original model_fn's by float32 rounding (at most 1.4e-6 on these regression logits of about 4),
# which moves Pearson by up to 1.1e-6 and the squared-error losses (about 5.5) by up to 2.4e-6 (4.4e-7 relative).
PEARSON_ATOL = 3e-6
LOSS_ATOL, LOSS_RTOL = 2e-6, 1e-6
LINES = ("Num of eval samples", "=", "Eval result", "Best result")


def options_for(config, tmp_path):
  flags = dict(META["base_flags"], **config["flags"])
  model_dir = tmp_path / "model"
  shutil.copytree(os.path.join(GOLDEN, "ckpt", config["ckpt_dir"]), model_dir)
  predict_ckpt = flags["predict_ckpt"] and str(model_dir / flags["predict_ckpt"])
  options = dict(
      task_name=config["task_name"], data_dir=os.path.join(TESTDATA, config["data_dir"]),
      spiece_model_file=os.path.join(TESTDATA, META["spm"]), model_config_path=os.path.join(TESTDATA,
                                                                                             META["model_config"]),
      model_dir=str(model_dir), output_dir=str(tmp_path / "out"), predict_dir=str(tmp_path / "predict"),
      predict_ckpt=predict_ckpt, dropout=0.0, dropatt=0.0, is_regression=flags.get("is_regression", False),
      sorted_file_order=True if config["task_name"] == "imdb" else None)
  for k in ("do_train", "do_eval", "do_predict", "eval_split", "eval_batch_size", "predict_batch_size",
            "eval_all_ckpt", "predict_threshold", "uncased", "max_seq_length", "cls_scope", "summary_type",
            "use_summ_proj"):
    options[k] = flags[k]
  return cli.defaults(run_classifier.define_flags, **options)


def fields(line):
  """`Eval result | k v | k v | ` -> (title, [(k, v)])."""
  title, *rest = line.split(" | ")
  assert rest[-1] == ""
  return title, [tuple(f.split(" ", 1)) for f in rest[:-1]]


def assert_results_equal(got, want, where):
  assert [k for k, _ in got] == [k for k, _ in want], where
  for (k, g), (_, w) in zip(got, want):
    if k in EXACT:
      assert g == w, (where, k)
    else:
      tolerance = dict(abs=PEARSON_ATOL) if k == "eval_pearsonr" else dict(abs=LOSS_ATOL, rel=LOSS_RTOL)
      assert float(g) == pytest.approx(float(w), **tolerance), (where, k)


SLOW_CONFIGS = ("mnli_mismatched_last_uncased", "sts-b_all")  # the default suite's 15 minutes: each task once


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CONFIGS else n
                                  for n in sorted(META["configs"])])
def test_eval_and_predict_equal_the_original_main(name, tmp_path):
  config = META["configs"][name]
  o = options_for(config, tmp_path)
  lines = []
  result = run_classifier.run(o, training.make_strategy("one_device"), log_fn=lines.append)

  # The lines: Num of eval samples, then per checkpoint ===... and Eval result, then ===... and Best result.
  got = [line.replace(o.model_dir, "<model_dir>") for line in lines if line.startswith(LINES)]
  want = [line for line in config["lines"] if line.startswith(LINES)]
  assert len(got) == len(want), (got, want)
  for g, w in zip(got, want):
    if g.startswith(("Eval result", "Best result")):
      (g_title, g_fields), (w_title, w_fields) = fields(g), fields(w)
      assert g_title == w_title
      assert_results_equal(g_fields, w_fields, g)
    else:
      assert g == w

  # The returned metrics, per evaluated checkpoint.
  if config["eval_results"] is not None:
    assert len(result["eval"]) == len(config["eval_results"])
    for g, w in zip(result["eval"], config["eval_results"]):
      assert sorted(k for k in g if k not in ("step", "path")) == sorted(w)
      assert_results_equal([(k, g[k]) for k in sorted(w)], sorted(w.items()), g["path"])

  # The prediction files: a row per predicted example (eval padding included after --do_eval), the labels of the
  # original's decision rule, the logits.
  task = config["task_name"]
  if o.do_predict:
    assert sorted(os.listdir(o.predict_dir)) == sorted(config["predictions"])
    with open(os.path.join(o.predict_dir, f"{task}.tsv"), encoding="utf-8") as f:
      got_rows = [line.split("\t") for line in f.read().splitlines()]
    want_rows = [line.split("\t") for line in config["predictions"][f"{task}.tsv"].splitlines()]
    assert len(got_rows) == len(want_rows) and got_rows[0] == want_rows[0] == ["index", "prediction"]
    for g, w in zip(got_rows[1:], want_rows[1:]):
      assert g[0] == w[0]
      if o.is_regression:
        assert float(g[1]) == pytest.approx(float(w[1]), abs=1e-5)
      else:
        assert g[1] == w[1]
    with open(os.path.join(o.predict_dir, f"{task}.logits.json"), encoding="utf-8") as f:
      got_logits = json.load(f)
    want_logits = json.loads(config["predictions"][f"{task}.logits.json"])
    assert len(got_logits) == len(want_logits)
    for g, w in zip(got_logits, want_logits):
      assert g == pytest.approx(w, abs=1e-5)
