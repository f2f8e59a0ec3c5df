"""run_race.py end to end: train/eval/predict on the RACE-format IMDB set, the goldens' checkpoint evaluated as the
original's Estimator evaluates it, one-line errors for bad input, the original's flags, and (slow) learning."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from absl import flags as absl_flags

import cli
import run_race
from xlnet_tf import locks
from xlnet_tf import training
from xlnet_tf.tasks.race import corpus
from xlnet_tf.tasks.race import evaluation as race_eval

PY = sys.executable
GOLDEN = "tests/testdata/race"
SPM = "tests/testdata/data/spm/spiece.model"  # 1000 pieces, trained on IMDB text
TINY = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=24, ff_activation="gelu", untie_r=True, n_token=1000)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  """A small RACE-format IMDB set (short articles) and a tiny xlnet_config.json."""
  root = tmp_path_factory.mktemp("race")
  corpus.write_race_corpus(str(root / "race"), num_train=4, num_dev=2, num_test=2, max_article_words=60,
                           middle_max_words=40)
  (root / "xlnet_config.json").write_text(json.dumps(TINY))
  return {"data": str(root / "race"), "config": str(root / "xlnet_config.json"), "root": root}


def race_cmd(files, *extra, data_dir=None):
  return [PY, "run_race.py", f"--data_dir={data_dir or files['data']}", f"--spiece_model_file={SPM}",
          f"--model_config_path={files['config']}", "--max_seq_length=64", "--max_qa_length=16", *extra]


def eval_lines(stdout, title="Eval"):
  """[{key: value}] of every `title | k v | ...` line."""
  results = []
  for line in stdout.splitlines():
    if line.startswith(title + " |"):
      fields = [f.strip() for f in line.split("|")[1:] if f.strip()]
      results.append(dict(f.split(" ", 1) for f in fields))
  return results


@pytest.mark.slow  # the default suite's 15 minutes; by default: test_race_flow.py and the sweep's race cases
def test_train_eval_predict(files, tmp_path):
  out = tmp_path
  cmd = race_cmd(files, "--do_train=True", "--do_eval=True", "--do_predict=True", "--eval_all_ckpt=True",
                 f"--output_dir={out / 'records'}", f"--model_dir={out / 'model'}", f"--predict_dir={out / 'pred'}",
                 "--train_batch_size=2", "--learning_rate=1e-3", "--train_steps=4", "--save_steps=2",
                 "--save_initial_checkpoint=False",
                 "--eval_batch_size=4", "--seed=1")
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  stdout = proc.stdout
  assert "global batch 2 questions (2 per replica x 1 replica(s)), 8 sequences" in stdout
  assert "[4] | gnorm" in stdout
  model_dir = out / "model"
  assert sorted(p.name for p in model_dir.glob("*.index")) == ["ckpt-2.index", "ckpt-4.index"]
  assert json.loads((model_dir / "xlnet_config.json").read_text()) == TINY
  assert json.loads((model_dir / "run_flags.json").read_text())["fix_option_aliasing"] is False
  names = ("spiece.model.len-64.dev.tf_record", "spiece.model.len-64.train.tf_record")
  assert sorted(p.name for p in (out / "records").iterdir()) == sorted(  # with their locks (`locks.cache_lock`)
      [f".{name}.lock" for name in names] + [name + source for name in names for source in ("", ".source")])
  num_dev = int(re.search(r"Num of dev samples: (\d+) \(\+(\d+) padding\)", stdout).group(1))
  assert num_dev >= 4

  # The original's Eval line, per checkpoint (--eval_all_ckpt), then the best.
  results = eval_lines(stdout)
  assert [list(r) for r in results] == [["eval_accuracy", "eval_loss", "loss", "global_step"]] * 2
  assert [r["global_step"] for r in results] == ["2", "4"]
  for r in results:
    assert 0 <= float(r["eval_accuracy"]) <= 1 and np.isfinite(float(r["eval_loss"])) and np.isfinite(float(r["loss"]))
  assert len(eval_lines(stdout, "Best")) == 1

  # Predictions of the last checkpoint: one entry per real dev question, in the reader's order.
  assert f"Predictions of {model_dir / 'ckpt-4'}" in stdout
  entries = json.loads((out / "pred" / "dev.predictions.json").read_text())
  assert len(entries) == num_dev
  for e in entries:
    assert set(e) == {"file", "question_index", "level", "prediction", "probabilities", "logits", "answer", "correct"}
    assert e["file"].startswith(f"dev/{e['level']}/") and e["prediction"] in "ABCD" and e["answer"] in "ABCD"
    probs = np.array(e["probabilities"])
    assert probs.shape == (4,) and abs(probs.sum() - 1) < 1e-5 and "ABCD"[int(np.argmax(e["logits"]))] == e["prediction"]
    assert e["correct"] == (e["prediction"] == e["answer"])
  assert np.mean([e["correct"] for e in entries]) == pytest.approx(float(results[1]["eval_accuracy"]), abs=1e-6)
  assert not list((out / "pred").glob("*tmp*"))


def golden_options(tmp_path, **overrides):
  """The goldens' --do_eval run: their data, vocabulary, config and checkpoint (as --init_checkpoint)."""
  return cli.defaults(
      run_race.define_flags, **{**dict(
          do_eval=True, data_dir=os.path.join(GOLDEN, "data"),
          spiece_model_file=os.path.join(GOLDEN, "spm", "spiece.model"),
          model_config_path=os.path.join(GOLDEN, "ckpt", "xlnet_config.json"),
          init_checkpoint=os.path.join(GOLDEN, "ckpt", "xlnet_model.ckpt"), output_dir=str(tmp_path / "records"),
          model_dir=str(tmp_path / "model"), max_seq_length=64, max_qa_length=16, eval_batch_size=5, dropout=0.0,
          dropatt=0.0, sorted_file_order=True), **overrides})  # the goldens' file order (meta.json) is the sorted one


def test_eval_of_the_original_checkpoint_equals_the_goldens(tmp_path):
  """The goldens' run: --do_eval with --init_checkpoint and an empty model_dir (the original Estimator then
  evaluates the initial, i.e. init_checkpoint's, weights)."""
  meta = json.loads(open(os.path.join(GOLDEN, "meta.json")).read())["head"]
  options = golden_options(tmp_path)
  lines = []
  result = run_race.run(options, training.make_strategy("one_device"), log_fn=lines.append)
  (got,) = result["eval"]
  assert got["eval_accuracy"] == meta["eval_accuracy"] == 0.125
  assert got["eval_loss"] == pytest.approx(meta["eval_loss"], abs=1e-5)
  assert got["loss"] == pytest.approx(meta["estimator_loss"], abs=1e-5)
  assert got["global_step"] == 0
  assert any(line.startswith("Eval | eval_accuracy 0.125 | eval_loss 1.3881") for line in lines)
  # --init_checkpoint given as its directory: the lines name the checkpoint read, not the directory.
  lines.clear()
  result = run_race.run(golden_options(tmp_path, init_checkpoint=os.path.join(GOLDEN, "ckpt")),
                        training.make_strategy("one_device"), log_fn=lines.append)
  prefix = os.path.join(GOLDEN, "ckpt", "xlnet_model.ckpt")
  assert result["eval"][0]["path"] == prefix
  assert f"No checkpoint in --model_dir {tmp_path}/model: evaluating --init_checkpoint {prefix} (as the original's " \
         "Estimator)." in lines


def test_a_split_without_answers_is_predicted_and_not_evaluated(tmp_path):
  """A set to predict has no answers (RACE's format with `answers` left out): --do_predict alone predicts it, the
  same choices as with its answers, `answer`/`correct` null; --do_eval is refused naming the files (it refused
  every file with "fix or remove the file" before)."""
  data = tmp_path / "data"
  shutil.copytree(os.path.join(GOLDEN, "data"), data)
  predict = dict(do_eval=False, do_predict=True, predict_ckpt=os.path.join(GOLDEN, "ckpt", "xlnet_model.ckpt"))
  strategy = training.make_strategy("one_device")
  labelled = run_race.run(golden_options(tmp_path / "a", predict_dir=str(tmp_path / "p1"), **predict), strategy,
                          log_fn=lambda line: None)
  for path in data.glob("dev/*/*.txt"):
    article = json.loads(path.read_text())
    del article["answers"]
    path.write_text(json.dumps(article))
  with pytest.raises(cli.FlagError, match=r"--do_eval needs the answers of the dev split, and 4 of its files have "
                                          r"no `answers` \(.*\.txt, .*\.txt \.\.\.\)\. Add them, or predict the "
                                          r"split alone"):
    run_race.run(golden_options(tmp_path / "b", data_dir=str(data)), strategy, log_fn=lambda line: None)
  lines = []
  unlabelled = run_race.run(golden_options(tmp_path / "c", data_dir=str(data), predict_dir=str(tmp_path / "p2"),
                                           **predict), strategy, log_fn=lines.append)
  assert np.isnan(unlabelled["predict"]["accuracy"]) and not np.isnan(labelled["predict"]["accuracy"])
  assert any(line.endswith("questions, without answers to score).") for line in lines)
  one, two = (json.loads((tmp_path / p / "dev.predictions.json").read_text()) for p in ("p1", "p2"))
  assert [e["prediction"] for e in one] == [e["prediction"] for e in two] and len(two) == 8
  assert {e["answer"] for e in two} == {None} and {e["correct"] for e in two} == {None}
  np.testing.assert_allclose([e["logits"] for e in one], [e["logits"] for e in two], atol=1e-6)


def test_a_second_run_predicting_into_the_same_predict_dir_is_refused(tmp_path):
  """Two runs predicting into one --predict_dir at once both said they wrote their files, and one set replaced the
  other; the second now stops with one line (the three tools take the same lock)."""
  predict_dir = tmp_path / "pred"
  options = golden_options(tmp_path, do_eval=False, do_predict=True, predict_dir=str(predict_dir),
                           predict_ckpt=os.path.join(GOLDEN, "ckpt", "xlnet_model.ckpt"))
  with locks.directory_lock(str(predict_dir), name="predict", what="--predict_dir"):
    with pytest.raises(ValueError, match=f"--predict_dir {predict_dir} is in use by process {os.getpid()}"):
      run_race.run(options, training.make_strategy("one_device"), log_fn=lambda line: None)
  assert not (predict_dir / "dev.predictions.json").exists()
  run_race.run(options, training.make_strategy("one_device"), log_fn=lambda line: None)
  assert sorted(os.listdir(predict_dir)) == ["dev.predictions.json"]  # the lock goes with the run


def test_eval_reports_the_global_step_the_checkpoint_records(tmp_path):
  """As the original's Estimator: `global_step` is the checkpoint's variable, not the number in its file name (the
  goldens' checkpoint records 0; here it lies in --model_dir as `model.ckpt-7`)."""
  model_dir = tmp_path / "model"
  model_dir.mkdir()
  source = os.path.join(GOLDEN, "ckpt", "xlnet_model.ckpt")
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(source + suffix, model_dir / ("model.ckpt-7" + suffix))
  lines = []
  result = run_race.run(golden_options(tmp_path, init_checkpoint=None), training.make_strategy("one_device"),
                        log_fn=lines.append)
  (got,) = result["eval"]
  assert got["path"] == str(model_dir / "model.ckpt-7") and got["global_step"] == 0
  assert got["eval_accuracy"] == 0.125
  assert any(line.startswith("Eval | eval_accuracy 0.125 |") and line.endswith("| global_step 0 | ") for line in lines)


def _bad_data(files, tmp_path):
  """RACE trees with one defect each (copies of the good dev split plus the defect)."""
  def tree(name, text=None):
    root = tmp_path / name
    for split in ("train", "dev"):
      for level in ("middle", "high"):
        (root / split / level).mkdir(parents=True)
    good = json.dumps({"article": "A short article. It has two sentences.", "questions": ["Which one?"],
                       "options": [["a", "b", "c", "d"]], "answers": ["B"]})
    (root / "train" / "middle" / "1.txt").write_text(good)
    (root / "dev" / "middle" / "1.txt").write_text(good)
    if text is not None:
      (root / "train" / "high" / "bad.txt").write_text(text)
    return str(root)

  missing = tree("missing")
  os.rmdir(os.path.join(missing, "train", "high"))
  return {
      "missing": missing,
      "not_json": tree("not_json", "article: not json"),
      "letter": tree("letter", json.dumps({"article": "x", "questions": ["q"], "options": [["a", "b", "c", "d"]],
                                           "answers": ["E"]})),
      "options": tree("options", json.dumps({"article": "x", "questions": ["q"], "options": [["a", "b", "c"]],
                                             "answers": ["A"]})),
  }


BAD_INPUT = [  # (extra flags, data key or None, expected message, run as a subprocess)
    ([], "missing", "train/high does not exist", True),
    ([], "not_json", "bad.txt is not a RACE article file: not valid JSON", True),
    (["--max_qa_length=61"], None, "--max_qa_length must be an integer in [1, max_seq_length - 3)", True),
    ([], "letter", "answer 0 is 'E', not one of the letters A, B, C, D", False),
    ([], "options", "question 0 needs a list of 4 option strings", False),
    (["--high_only=True", "--middle_only=True"], None, "--high_only and --middle_only exclude each other", False),
]


@pytest.mark.slow  # the default suite's 15 minutes; by default: the sweep's race cases
def test_bad_input_gives_one_line_errors(files, tmp_path):
  """Three cases through the CLI (exit status, one line, no traceback), the others through run() in-process: the
  same exception `cli.cli_main` prints as that one line."""
  dirs = _bad_data(files, tmp_path)
  procs = []
  for i, (extra, data, message, as_subprocess) in enumerate(BAD_INPUT):
    args = race_cmd(files, "--do_train=True", f"--output_dir={tmp_path / f'rec{i}'}",
                    f"--model_dir={tmp_path / f'model{i}'}", *extra, data_dir=dirs[data] if data else None)
    if as_subprocess:
      procs.append((subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), message))
      continue
    fv = absl_flags.FlagValues()
    run_race.define_flags(flag_values=fv)
    fv(args[1:])  # the same command line, parsed in-process
    with pytest.raises((ValueError, FileNotFoundError), match=re.escape(message)):
      run_race.run(cli.values(fv), training.make_strategy("one_device"), log_fn=lambda line: None)
  for proc, message in procs:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, message
    last = err.strip().splitlines()[-1]
    assert last.startswith("run_race.py: error:") and message in last, err[-2000:]
    assert "Traceback" not in err


def test_a_second_training_run_in_the_same_model_dir_refuses_to_start(files, tmp_path):
  """While a run trains in --model_dir (here: this process holds its lock), another training run there stops with
  one line before it restores or writes anything, as run_pretrain.py and run_classifier.py do."""
  fv = absl_flags.FlagValues()
  run_race.define_flags(flag_values=fv)
  model_dir = tmp_path / "model"
  fv(race_cmd(files, "--do_train=True", "--train_steps=2", "--iterations=1", f"--output_dir={tmp_path / 'rec'}",
              f"--model_dir={model_dir}")[1:])
  with locks.directory_lock(str(model_dir)):
    with pytest.raises(ValueError, match=f"--model_dir {model_dir} is in use by process {os.getpid()}"):
      run_race.run(cli.values(fv), training.make_strategy("one_device"), log_fn=lambda line: None)
  assert os.listdir(model_dir) == []


def test_an_output_flag_inside_a_level_directory_is_refused(files, tmp_path):
  """--output_dir, --model_dir or --predict_dir inside --data_dir's {split}/{level}: the run wrote its lock (a hidden
  file), records or predictions there, then refused them as "not a RACE article file" (sweep 14, B5)."""
  flags_ = dict(data_dir=files["data"], spiece_model_file=SPM, model_config_path=files["config"], do_eval=True,
                do_predict=True, output_dir=str(tmp_path / "rec"), model_dir=str(tmp_path / "model"),
                predict_dir=str(tmp_path / "pred"))
  run_race.validate(cli.defaults(run_race.define_flags, **dict(flags_, output_dir=files["data"])))  # no level dir
  before = sorted(os.walk(files["data"]))
  for name, inside in (("output_dir", "dev/high"), ("model_dir", "train/middle/m"), ("predict_dir", "dev/middle")):
    o = cli.defaults(run_race.define_flags, **dict(flags_, **{name: f"{files['data']}/{inside}"}))
    with pytest.raises(cli.FlagError) as error:
      run_race.validate(o)
    level = f"{files['data']}/{inside}" if name != "model_dir" else f"{files['data']}/train/middle"
    assert str(error.value) == (
        f"--{name} {files['data']}/{inside} is inside --data_dir {files['data']}'s {level}, whose every file is read "
        f"as a RACE article: the run's own files there would be read as articles. Pass a --{name} outside "
        "--data_dir's {split}/{level} directories.")
  assert sorted(os.walk(files["data"])) == before


def test_a_directory_named_like_the_predictions_file_is_refused_before_the_run(files, tmp_path):
  """A directory at --predict_dir/high.dev.predictions.json: `Could not write ... (Is a directory) ... Free space`,
  after the whole prediction (sweep 25, C3)."""
  (tmp_path / "pred" / "high.dev.predictions.json").mkdir(parents=True)
  o = cli.defaults(run_race.define_flags, data_dir=files["data"], spiece_model_file=SPM, high_only=True,
                   model_config_path=files["config"], do_predict=True, output_dir=str(tmp_path / "rec"),
                   model_dir=str(tmp_path / "model"), predict_dir=str(tmp_path / "pred"))
  with pytest.raises(ValueError, match=f"^--predict_dir {tmp_path}/pred holds a directory named like the prediction "
                                       f"file {tmp_path}/pred/high.dev.predictions.json: move it away, or pass "
                                       "another --predict_dir.$"):
    run_race.validate(o)
  o.high_only = False  # dev.predictions.json
  run_race.validate(o)


def test_a_prediction_from_predict_ckpt_needs_no_model_dir(files, tmp_path):
  """--model_dir was required to predict with --predict_ckpt (run_squad.py's needed none; sweep 25, C1)."""
  o = cli.defaults(run_race.define_flags, data_dir=files["data"], spiece_model_file=SPM,
                   model_config_path=files["config"], do_predict=True, output_dir=str(tmp_path / "rec"),
                   predict_dir=str(tmp_path / "pred"), predict_ckpt=str(tmp_path / "ckpt-2"))
  with pytest.raises(cli.FlagError, match=f"^--predict_ckpt: Checkpoint {tmp_path}/ckpt-2 not found "):
    run_race.validate(o)  # refused up front, not after the work before it (sweep 32, U11)
  (tmp_path / "ckpt-2.index").touch()
  run_race.validate(o)
  o.predict_ckpt = None
  with pytest.raises(cli.FlagError, match="^--do_predict needs a checkpoint: pass --predict_ckpt, --init_checkpoint "
                                          "or a --model_dir holding one.$"):
    run_race.validate(o)
  o.init_checkpoint, o.do_train = str(tmp_path / "ckpt-2"), True
  with pytest.raises(cli.FlagError, match="^--model_dir is required with --do_train: where the fine-tuned "):
    run_race.validate(o)
  assert race_eval.format_result("Eval", dict(eval_accuracy=0.5, eval_loss=1.0, loss=1.0, global_step=None)) == (
      "Eval | eval_accuracy 0.5 | eval_loss 1.0 | loss 1.0 | ")


def test_an_output_flag_inside_a_level_directory_through_a_link_is_refused(files, tmp_path):
  """The same check by real path: --data_dir a link to the data, or an output flag through a link into it, passed
  the check by name and wrote the lock among the articles (sweep 16, N10)."""
  (tmp_path / "link").symlink_to(files["data"])
  flags_ = dict(data_dir=files["data"], spiece_model_file=SPM, model_config_path=files["config"], do_eval=True,
                output_dir=str(tmp_path / "rec"), model_dir=str(tmp_path / "model"))
  for data_dir, output_dir in ((f"{tmp_path}/link/", f"{files['data']}/dev/high"),
                               (files["data"], f"{tmp_path}/link/dev/middle/new")):
    o = cli.defaults(run_race.define_flags, **dict(flags_, data_dir=data_dir, output_dir=output_dir))
    with pytest.raises(cli.FlagError, match=f"^--output_dir {output_dir} is inside --data_dir {data_dir}'s "):
      run_race.validate(o)
  run_race.validate(cli.defaults(run_race.define_flags, **dict(flags_, data_dir=f"{tmp_path}/link",
                                                               output_dir=f"{tmp_path}/link/out")))  # beside: fine
  assert not os.path.exists(f"{files['data']}/dev/middle/new")


ORIGINAL_RACE_FLAGS = {  # the original run_race.py's 47 flags and defaults
    "model_config_path": None, "dropout": 0.1, "dropatt": 0.1, "clamp_len": -1, "summary_type": "last",
    "use_summ_proj": True, "use_bfloat16": False, "init": "normal", "init_std": 0.02, "init_range": 0.1,
    "overwrite_data": False, "init_checkpoint": None, "output_dir": "", "spiece_model_file": "", "model_dir": None,
    "data_dir": "", "use_tpu": False, "num_hosts": 1, "num_core_per_host": None, "tpu_job_name": None, "tpu": None,
    "tpu_zone": None, "gcp_project": None, "master": None, "iterations": 1000, "do_train": False,
    "train_steps": 12000, "warmup_steps": 0, "learning_rate": 2e-5, "lr_layer_decay_rate": 1.0, "min_lr_ratio": 0.0,
    "clip": 1.0, "max_save": 0, "save_steps": None, "train_batch_size": 8, "weight_decay": 0.0,
    "adam_epsilon": 1e-6, "decay_method": "poly", "do_eval": False, "eval_split": "dev", "eval_batch_size": 32,
    "max_seq_length": 512, "max_qa_length": 128, "shuffle_buffer": 2048, "uncased": False, "high_only": False,
    "middle_only": False,
}


def test_flags_keep_the_original_names_and_defaults():
  fv = absl_flags.FlagValues()
  run_race.define_flags(flag_values=fv)
  assert len(ORIGINAL_RACE_FLAGS) == 47
  # model_dir: the original's "" is None here (both mean unset). num_core_per_host: the original's 8 asked for 8
  # GPUs; unset here means one device (docs/training_step.md).
  assert {name: fv[name].default for name in ORIGINAL_RACE_FLAGS} == ORIGINAL_RACE_FLAGS
  new = set(vars(cli.defaults(run_race.define_flags))) - set(ORIGINAL_RACE_FLAGS)
  assert new == {"strategy", "jit_compile", "use_tf32", "seed", "deterministic", "clip_mode", "loss_weighting",
                 "gradient_accumulation_steps", "recompute_grad", "use_fp16", "float32_positions", "xla_cache_dir",
                 "skip_bad_records", "fix_option_aliasing", "sorted_file_order", "eval_all_ckpt",
                 "do_predict", "predict_dir", "predict_ckpt", "save_initial_checkpoint"}
  assert fv["fix_option_aliasing"].default is False
  assert fv["sorted_file_order"].default is False  # the original's directory order
  with pytest.raises(ValueError, match="No such flag: max_qa_len"):
    cli.defaults(run_race.define_flags, max_qa_len=3)
