"""run_squad.py end to end: sharded preprocessing, training and prediction on a tiny model; prediction from the
original's fine-tuned checkpoint (--init_checkpoint honoured) reproducing its predictions.json; one-line errors for
bad input with nothing half-written; the original's flags and defaults."""

import json
import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
from absl import flags as absl_flags

import cli
import flag_configs
import run_files
import run_squad
from xlnet_tf import XLNetConfig
from xlnet_tf import convert
from xlnet_tf import locks
from xlnet_tf import training
from xlnet_tf.data import records as records_lib
from xlnet_tf.tasks.squad import predict as squad_predict
from xlnet_tf.tasks.squad import records
from xlnet_tf.tasks.squad import task as squad_task

PY = sys.executable
TESTDATA = "tests/testdata/squad"
SPM = f"{TESTDATA}/spm/spiece.model"
TRAIN = f"{TESTDATA}/data/train-v2.0.json"
DEV = f"{TESTDATA}/data/dev-v2.0.json"
CKPT = f"{TESTDATA}/ckpt/xlnet_model.ckpt"
WINDOW = ["--max_seq_length=64", "--max_query_length=16", "--doc_stride=24"]
TINY = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=24, ff_activation="gelu", untie_r=True, n_token=1200)


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
  path = tmp_path_factory.mktemp("config") / "xlnet_config.json"
  path.write_text(json.dumps(TINY))
  return str(path)


def _dev_ids():
  with open(DEV, encoding="utf-8") as f:
    return [qa["id"] for article in json.load(f)["data"] for p in article["paragraphs"] for qa in p["qas"]]


def _check_prediction_files(predict_dir):
  ids = _dev_ids()
  with open(os.path.join(predict_dir, "predictions.json"), encoding="utf-8") as f:
    predictions = json.load(f)
  with open(os.path.join(predict_dir, "nbest_predictions.json"), encoding="utf-8") as f:
    nbest = json.load(f)
  with open(os.path.join(predict_dir, "null_odds.json"), encoding="utf-8") as f:
    null_odds = json.load(f)
  assert list(predictions) == list(nbest) == list(null_odds) == ids
  assert all(isinstance(v, str) for v in predictions.values())
  assert all(1 <= len(v) <= 5 and abs(sum(e["probability"] for e in v) - 1) < 1e-6 for v in nbest.values())
  assert all(isinstance(v, (int, float)) for v in null_odds.values())
  assert not [n for n in os.listdir(predict_dir) if "tmp" in n]


@pytest.mark.slow  # the default suite's 15 minutes; by default: the original's predictions, test_squad_flow
def test_prepro_train_predict(tiny_config, tmp_path):
  # The original's sharded preprocessing (here in this process, to save two start-ups): one record per shard,
  # named as the original's, with its fingerprint (.source); the shards split the examples.
  lines = []
  for i in range(2):
    o = cli.defaults(run_squad.define_flags, do_prepro=True, train_file=TRAIN, num_proc=2, proc_id=i, seed=3,
                     spiece_model_file=SPM, output_dir=str(tmp_path / "out"), max_seq_length=64,
                     max_query_length=16, doc_stride=24)
    run_squad.run(o, training.make_strategy("one_device"), log_fn=lines.append)
  assert sorted(os.listdir(tmp_path / "out")) == sorted(records.train_record_name(SPM, i, 64, 16) + suffix
                                                         for i in range(2) for suffix in ("", ".source"))
  assert [line.split(" of ")[1].split(" ")[0] for line in lines] == ["19", "19"]  # of 38 examples
  common = [PY, "run_squad.py", f"--spiece_model_file={SPM}", f"--output_dir={tmp_path / 'out'}", *WINDOW]
  proc = subprocess.run(
      [*common, "--do_train=True", "--do_predict=True", f"--model_config_path={tiny_config}",
       f"--model_dir={tmp_path / 'model'}", f"--predict_dir={tmp_path / 'pred'}", f"--predict_file={DEV}",
       "--train_batch_size=8", "--train_steps=4", "--save_steps=2", "--learning_rate=1e-3", "--seed=1",
       "--save_initial_checkpoint=False"],
      capture_output=True, text=True, timeout=180)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "[4] | gnorm" in proc.stdout
  result = [line for line in proc.stdout.splitlines() if line.startswith("Result | ")]
  assert len(result) == 1 and "best_f1 " in result[0] and "path " + str(tmp_path / "model" / "ckpt-4") in result[0]
  _check_prediction_files(tmp_path / "pred")
  # Every checkpoint of model_dir (here in this process): one directory each, the best by --target_eval_key; with
  # --jit_compile=True, XLA compiles the forward and the beam.
  o = cli.defaults(run_squad.define_flags, do_train=False, do_predict=True, predict_all_ckpt=True, jit_compile=True,
                   model_config_path=tiny_config, spiece_model_file=SPM, predict_file=DEV,
                   output_dir=str(tmp_path / "out"), model_dir=str(tmp_path / "model"),
                   predict_dir=str(tmp_path / "all"), max_seq_length=64, max_query_length=16, doc_stride=24)
  lines = []
  out = run_squad.run(o, training.make_strategy("one_device"), log_fn=lines.append)
  assert [r["step"] for r in out["predict"]] == [2, 4] and sorted(os.listdir(tmp_path / "all")) == ["ckpt-2", "ckpt-4"]
  assert out["best"] in out["predict"] and lines[-1].startswith("Best result | ")
  for name in ("ckpt-2", "ckpt-4"):
    _check_prediction_files(tmp_path / "all" / name)
  # A model_dir of one checkpoint (--max_save=1, say): its own directory too, where a script looks for it.
  shutil.copytree(tmp_path / "model", tmp_path / "one")
  for path in (tmp_path / "one").glob("ckpt-2.*"):
    path.unlink()
  run_squad.run(types.SimpleNamespace(**dict(vars(o), model_dir=str(tmp_path / "one"),
                                             predict_dir=str(tmp_path / "one_pred"))),
                training.make_strategy("one_device"), log_fn=lambda line: None)
  assert os.listdir(tmp_path / "one_pred") == ["ckpt-4"]
  _check_prediction_files(tmp_path / "one_pred" / "ckpt-4")
  # The head's outputs with and without XLA agree to float32 rounding on this checkpoint (its predicted texts need
  # not: 1 of 38 differs, a near-tie in the beam that the rounding resolves the other way).
  outputs = []
  for jit_compile in (False, True):
    inference = squad_predict.Inference(squad_task.build_model(
        XLNetConfig(json_path=tiny_config), flag_configs.create_run_config(o, is_training=False, is_finetune=True)),
        jit_compile=jit_compile)
    inference.load(str(tmp_path / "model" / "ckpt-4"))
    outputs.append(inference.run(records.squad_dataset(
        str(tmp_path / "out" / records.eval_record_name(SPM, 64, 16)), 64, records_lib.ReadConfig(batch_size=8))))
  for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
    np.testing.assert_allclose(outputs[1][key], outputs[0][key], rtol=1e-5, atol=1e-5)
  assert sorted(os.listdir(tmp_path / "out")) == sorted([records.train_record_name(SPM, i, 64, 16) + suffix
                                                         for i in range(2) for suffix in ("", ".source")]
                                                        + [records.eval_features_name(SPM, 64, 16),
                                                           records.eval_features_name(SPM, 64, 16) + ".source",
                                                           f".{records.eval_features_name(SPM, 64, 16)}.lock",
                                                           records.eval_record_name(SPM, 64, 16),
                                                           records.eval_record_name(SPM, 64, 16) + ".source"])


def test_predict_honours_init_checkpoint_and_reproduces_the_original(tmp_path):
  """The original's checkpoint (QA head included) in predict mode: its predictions.json, byte for byte."""
  o = cli.defaults(run_squad.define_flags, do_train=False, do_predict=True, init_checkpoint=CKPT,
                   model_config_path=f"{TESTDATA}/ckpt/xlnet_config.json", spiece_model_file=SPM,
                   predict_file=DEV, output_dir=str(tmp_path / "out"), predict_dir=str(tmp_path / "pred"),
                   max_seq_length=64, max_query_length=16, doc_stride=24, max_answer_length=10)
  lines = []
  out = run_squad.run(o, training.make_strategy("one_device"), log_fn=lines.append)
  with open(tmp_path / "pred" / "predictions.json", "rb") as got, open(
      f"{TESTDATA}/predictions/predictions.json", "rb") as want:
    assert got.read() == want.read()
  with open(f"{TESTDATA}/predictions/eval_run_squad.json", encoding="utf-8") as f:
    want_eval = json.load(f)
  (result,) = out["predict"]
  assert result["path"] == CKPT and result["best_exact"] == want_eval["best_exact"]
  assert abs(result["best_f1_thresh"] - want_eval["best_f1_thresh"]) < 1e-5
  _check_prediction_files(tmp_path / "pred")
  # The same model as a HuggingFace directory (XLNetForQuestionAnswering), as every tool reads one: it was refused
  # as "no checkpoint found", asking for a prefix that does not exist.
  convert.convert_to_hf(CKPT, str(tmp_path / "hf"), allow_d_head_override=True, log_fn=lines.append)
  hf = cli.defaults(run_squad.define_flags, **dict(vars(o), init_checkpoint=None, model_config_path=None,
                                                   predict_ckpt=str(tmp_path / "hf"),
                                                   predict_dir=str(tmp_path / "pred_hf")))
  run_squad.run(hf, training.make_strategy("one_device"), log_fn=lines.append)
  predictions = [(tmp_path / name / "predictions.json").read_bytes() for name in ("pred", "pred_hf")]
  assert predictions[0] == predictions[1]
  # The corrected behaviours: empty predictions where the null odds pass the threshold.
  o.allow_empty_prediction, o.null_threshold = True, 0.0
  run_squad.run(o, training.make_strategy("one_device"), log_fn=lines.append)
  with open(tmp_path / "pred" / "predictions.json", encoding="utf-8") as f:
    predictions = json.load(f)
  with open(tmp_path / "pred" / "null_odds.json", encoding="utf-8") as f:
    null_odds = json.load(f)
  assert all((text == "") == (null_odds[q] > 0.0) for q, text in predictions.items())


def _bad_files(tmp_path):
  broken = tmp_path / "broken.json"
  broken.write_text('{"data": [')
  with open(TRAIN, encoding="utf-8") as f:
    doc = json.load(f)
  qa = next(q for q in doc["data"][0]["paragraphs"][0]["qas"] if not q.get("is_impossible"))
  qa["answers"][0]["answer_start"] += 3
  offset = tmp_path / "offset.json"
  offset.write_text(json.dumps(doc))
  return str(broken), str(offset)


def _nothing_written(tmp_path, i):
  for name in ("out", "model", "pred"):  # an empty output_dir at most
    assert not os.path.exists(tmp_path / f"{name}{i}") or not os.listdir(tmp_path / f"{name}{i}"), (name, i)


def _bad_input_args(tiny_config, tmp_path, i):
  return dict(spiece_model_file=SPM, model_config_path=tiny_config, max_seq_length=64, max_query_length=16,
              doc_stride=24, output_dir=str(tmp_path / f"out{i}"), model_dir=str(tmp_path / f"model{i}"),
              predict_dir=str(tmp_path / f"pred{i}"))


@pytest.mark.slow  # the default suite's 15 minutes; by default: the sweep's squad cases
def test_bad_input_gives_one_line_errors_and_writes_nothing(tiny_config, tmp_path):
  """The command line: exit status 1, no traceback, the last line `run_squad.py: error: ...`."""
  broken, offset = _bad_files(tmp_path)
  cases = [
      (["--do_train=False", "--do_predict=True", f"--predict_file={broken}", f"--init_checkpoint={CKPT}",
        f"--model_config_path={TESTDATA}/ckpt/xlnet_config.json"], f"SQuAD file {broken} is not valid JSON"),
      (["--do_train=True", f"--train_file={offset}"], "is not the text at answer_start"),
      (["--do_prepro=True", f"--train_file={TRAIN}", "--max_seq_length=18"],
       "--max_seq_length must hold the question"),
      (["--do_train=False", "--do_predict=True", f"--predict_file={DEV}", f"--predict_ckpt={tmp_path / 'no.ckpt'}"],
       "no.ckpt not found"),
  ]
  procs = []
  for i, (extra, message) in enumerate(cases):
    cmd = [PY, "run_squad.py", *[f"--{k}={v}" for k, v in _bad_input_args(tiny_config, tmp_path, i).items()],
           *extra]
    procs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), message, i))
  for proc, message, i in procs:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, message
    last = err.strip().splitlines()[-1]
    assert last.startswith("run_squad.py: error:") and message in last, err[-2000:]
    assert "Traceback" not in err
    _nothing_written(tmp_path, i)


@pytest.mark.parametrize("overrides, error, message", [
    (dict(do_prepro=True, train_file=TRAIN, doc_stride=0), ValueError, "--doc_stride must be an integer >= 1"),
    (dict(do_prepro=True, train_file="nowhere/train.json"), ValueError, "--train_file=nowhere/train.json does not"),
    (dict(do_prepro=True, train_file=TRAIN, proc_id=2, num_proc=2), ValueError, "--proc_id must be in"),
    (dict(do_prepro=True, train_file=TRAIN, proc_id=0, num_proc=0), ValueError,  # "must be in [0, 0)" (sweep 33, C6)
     "^--num_proc must be a positive integer. Received: 0.$"),
    (dict(do_prepro=True, train_file=TRAIN, max_seq_length=20, doc_stride=1), ValueError,  # "below 1" (sweep 33, C4)
     "No --doc_stride can be: pass a --max_seq_length above 20, or a smaller --max_query_length.$"),
    (dict(do_train=False, do_predict=True, predict_file=DEV, init_checkpoint=f"{TESTDATA}/ckpt/missing"),
     FileNotFoundError, "ckpt/missing not found"),
    (dict(do_train=False, do_predict=True, predict_file="nowhere/dev.json"), ValueError, "--predict_file="),
    (dict(do_train=False, do_predict=True, predict_file=DEV, init_checkpoint=CKPT, start_n_top=65), ValueError,
     "--start_n_top must be at most --max_seq_length"),
    (dict(do_train=False, do_predict=True, predict_file=DEV, init_checkpoint=CKPT, null_threshold=5.0), ValueError,
     "--null_threshold=5.0 is used only with --allow_empty_prediction=True"),  # ignored before (sweep 19, F9.4)
    (dict(do_train=True, train_file=TRAIN, model_dir=None), ValueError, "--model_dir is required"),
])
def test_bad_flags_are_refused_before_anything_is_written(tiny_config, tmp_path, overrides, error, message):
  o = cli.defaults(run_squad.define_flags, **{**_bad_input_args(tiny_config, tmp_path, 0), **overrides})
  with pytest.raises(error, match=message):
    run_squad.run(o, training.make_strategy("one_device"))
  _nothing_written(tmp_path, 0)


def test_a_file_to_predict_named_as_a_prediction_file_is_refused(tiny_config, tmp_path):
  """--predict_file=D/predictions.json --predict_dir=D: the predictions replaced the SQuAD file, exit 0 (sweep 33,
  C1)."""
  (tmp_path / "pred0").mkdir()
  dev = tmp_path / "pred0" / "predictions.json"
  shutil.copy(DEV, dev)
  o = cli.defaults(run_squad.define_flags, **{**_bad_input_args(tiny_config, tmp_path, 0), "do_train": False,
                                               "do_predict": True, "predict_file": str(dev), "init_checkpoint": CKPT})
  with pytest.raises(cli.FlagError, match=f"^--predict_file {dev} is the predictions.json the prediction writes into "
                                          "--predict_dir: the predictions would replace it. Pass another "
                                          "--predict_dir, or rename the file.$"):
    run_squad.validate(o)
  assert dev.read_bytes() == open(DEV, "rb").read()


def test_predict_all_ckpt_into_the_model_dir_is_refused(tiny_config, tmp_path):
  """--predict_all_ckpt --predict_dir=<model_dir> made ckpt-1/ beside ckpt-1.index, one per checkpoint, which every
  tool then took for the checkpoint (`No checkpoint found in directory .../ckpt-1`)."""
  args = _bad_input_args(tiny_config, tmp_path, 0)
  o = cli.defaults(run_squad.define_flags, **dict(args, predict_dir=args["model_dir"] + "/"), do_train=False,
                   do_predict=True, predict_file=DEV, predict_all_ckpt=True)
  with pytest.raises(cli.FlagError, match=f"^--predict_dir {tmp_path}/model0/ is --model_dir: --predict_all_ckpt "
                                          "writes each checkpoint's predictions into --predict_dir/<checkpoint "):
    run_squad.validate(o)
  os.makedirs(args["model_dir"])
  os.symlink(args["model_dir"], tmp_path / "alias")  # the same directory by another name passed (sweep 28, A3)
  o.predict_dir = str(tmp_path / "alias")
  with pytest.raises(cli.FlagError, match=f"^--predict_dir {tmp_path}/alias is --model_dir: "):
    run_squad.validate(o)
  o.predict_all_ckpt = False  # one checkpoint: its files go into --predict_dir itself
  run_squad.validate(o)


def test_a_directory_named_like_a_prediction_file_is_refused_before_the_run(tiny_config, tmp_path):
  """A directory at --predict_dir/null_odds.json: `Could not write ... (Is a directory) ... Free space`, after the
  whole prediction (sweep 25, C3). --predict_all_ckpt writes into a directory per checkpoint instead."""
  args = _bad_input_args(tiny_config, tmp_path, 0)
  (tmp_path / "pred" / "null_odds.json").mkdir(parents=True)
  o = cli.defaults(run_squad.define_flags, **dict(args, predict_dir=str(tmp_path / "pred")), do_train=False,
                   do_predict=True, predict_file=DEV)
  with pytest.raises(ValueError, match=f"^--predict_dir {tmp_path}/pred holds a directory named like the prediction "
                                       f"file {tmp_path}/pred/null_odds.json: move it away, or pass another "
                                       "--predict_dir.$"):
    run_squad.validate(o)
  o.predict_all_ckpt = True
  run_squad.validate(o)


def test_the_result_line_of_a_model_without_a_step_leaves_the_step_out():
  """An HF directory as --predict_ckpt: `Result | ... | step None | path ...` (sweep 25, C1)."""
  assert squad_predict.format_result("Result", dict(best_f1=50.0, step=None, path="hf")) == (
      "Result | best_f1 50.0 | path hf | ")
  assert squad_predict.format_result("Result", dict(best_f1=50.0, step=2, path="m/ckpt-2")) == (
      "Result | best_f1 50.0 | step 2 | path m/ckpt-2 | ")


def test_a_predict_file_without_questions_is_refused_before_training(tiny_config, tmp_path):
  """A --predict_file that gives no feature ended, after the training, in `The evaluation record holds no feature`
  (no flag, no file); it is refused as soon as it is read, before any training."""
  empty = tmp_path / "empty.json"
  empty.write_text(json.dumps({"version": "v2.0", "data": []}))
  o = cli.defaults(run_squad.define_flags, **_bad_input_args(tiny_config, tmp_path, 0), train_file=TRAIN,
                   do_predict=True, predict_file=str(empty), train_steps=2, iterations=1)
  with pytest.raises(ValueError, match=f"--predict_file {empty} holds no question to predict"):
    run_squad.run(o, training.make_strategy("one_device"))
  assert not os.path.exists(o.model_dir)


def test_training_on_records_already_there_says_that_the_train_file_is_not_read(tiny_config, tmp_path):
  """As the original, --do_train reads the training records in --output_dir when there are some; a --train_file
  given beside them was dropped without a word (another file's records trained, exit 0)."""
  o = cli.defaults(run_squad.define_flags, **_bad_input_args(tiny_config, tmp_path, 0), train_file=DEV)
  os.makedirs(o.output_dir)
  cached = os.path.join(o.output_dir, records.train_record_name(SPM, 0, 64, 16))
  open(cached, "wb").close()
  lines = []
  assert run_squad._train_records(o, None, lines.append) == [cached]  # pylint: disable=protected-access
  assert lines == [f"Training on the records already in --output_dir ({cached}), as the original: --train_file {DEV} "
                   "is not read. If they came from another --train_file, SentencePiece model, --uncased or "
                   "--doc_stride, rerun --do_prepro=True (or delete them) first."]


def test_training_records_made_from_other_data_are_refused(tiny_config, tmp_path):
  """The training records --do_prepro wrote carry a fingerprint of what they were made from and its --num_proc:
  --do_train with another --train_file or --doc_stride than theirs (the original trained on them, exit 0), with the
  stale record of another --do_prepro beside them (mixed in), is refused; a --proc_id's record missing is said (the
  original trains on part of the data); the same flags train on them."""
  prepro, train_records = run_squad._prepro, run_squad._train_records  # pylint: disable=protected-access
  other = json.load(open(TRAIN, encoding="utf-8"))
  other["data"] = other["data"][1:]
  (tmp_path / "other.json").write_text(json.dumps(other), encoding="utf-8")
  other = str(tmp_path / "other.json")
  o = cli.defaults(run_squad.define_flags, **_bad_input_args(tiny_config, tmp_path, 0), train_file=TRAIN)
  sp_model = flag_configs.sentencepiece(o)
  os.makedirs(o.output_dir)
  prepro(o, sp_model, print, num_proc=1, proc_id=0)
  lines = []
  found = train_records(o, sp_model, lines.append)
  assert len(found) == 1 and lines == [f"Training on the records already in --output_dir ({found[0]}), made from "
                                       f"--train_file {TRAIN} with these flags (as the original, it is not "
                                       "preprocessed again)."]
  for change in (dict(train_file=other), dict(doc_stride=16)):
    with pytest.raises(cli.FlagError, match=f"^The training records in --output_dir {o.output_dir} "
                                            rf"\({os.path.basename(found[0])}\) were not made from --train_file "):
      train_records(types.SimpleNamespace(**{**vars(o), **change}), sp_model, print)
  prepro(types.SimpleNamespace(**{**vars(o), "train_file": other}), sp_model, print, num_proc=2, proc_id=1)
  for train_file in (TRAIN, None):
    with pytest.raises(cli.FlagError, match="were made by different --do_prepro runs"):
      train_records(types.SimpleNamespace(**{**vars(o), "train_file": train_file}), sp_model, print)
  half = types.SimpleNamespace(**{**vars(o), "output_dir": str(tmp_path / "half")})
  os.makedirs(half.output_dir)
  prepro(half, sp_model, print, num_proc=2, proc_id=0)  # proc_id 1 never ran
  lines = []
  train_records(half, sp_model, lines.append)
  assert lines[0] == ("Training on 1 of the 2 records of a --do_prepro --num_proc=2 run (in --output_dir: "
                      "spiece.model.0.slen-64.qlen-16.train.tf_record): part of the data. Run --do_prepro for the "
                      "other --proc_id first to train on all of it.")
  prepro(half, sp_model, print, num_proc=2, proc_id=1)
  lines = []
  assert len(train_records(half, sp_model, lines.append)) == 2 and not any("part of the data" in l for l in lines)


def test_a_second_training_run_in_the_same_model_dir_refuses_to_start(tiny_config, tmp_path):
  """While a run trains in --model_dir (here: this process holds its lock), another training run there stops with
  one line before it restores or writes anything, as run_pretrain.py and run_classifier.py do."""
  o = cli.defaults(run_squad.define_flags, **_bad_input_args(tiny_config, tmp_path, 0), train_file=TRAIN,
                   train_steps=2, iterations=1)
  with locks.directory_lock(o.model_dir):
    with pytest.raises(ValueError, match=f"--model_dir {o.model_dir} is in use by process {os.getpid()}"):
      run_squad.run(o, training.make_strategy("one_device"))
  assert os.listdir(o.model_dir) == []


def test_predicting_with_checkpoints_fine_tuned_otherwise_is_refused(tmp_path, tiny_config):
  """run_squad.py predicted with checkpoints fine-tuned on uncased text (their run_flags.json says so) given cased
  text, or with another SentencePiece model, exit 0: refused as run_classifier.py and run_race.py refuse it."""
  config = XLNetConfig(json_path=tiny_config)
  config.to_json(str(tmp_path / "xlnet_config.json"))
  (tmp_path / "ckpt-4.index").write_bytes(b"")
  (tmp_path / "run_flags.json").write_text('{"uncased": true}')
  o = cli.defaults(run_squad.define_flags, spiece_model_file=SPM, model_dir=str(tmp_path), do_predict=True,
                   do_train=False)
  with pytest.raises(cli.FlagError, match=r"^The checkpoints in --model_dir .* fine-tuned with other flags "
                                          r"\(--uncased=True there, False here; "):
    run_squad._predict_checkpoints(o, config)  # pylint: disable=protected-access
  o.uncased, o.predict_ckpt = True, str(tmp_path / "ckpt-4")
  found = run_squad._predict_checkpoints(o, config)  # pylint: disable=protected-access
  assert found == [(4, str(tmp_path / "ckpt-4"))]
  # --init_checkpoint beside newer fine-tuned checkpoints in --model_dir: the latter, as the original and the other
  # two tools (it took --init_checkpoint first; sweep 26, B4), with a line; --init_checkpoint where there is none.
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\n')
  o.predict_ckpt, o.init_checkpoint, lines = None, CKPT, []
  assert run_squad._predict_checkpoints(o, config, lines.append) == found  # pylint: disable=protected-access
  assert lines == [f"Reading {tmp_path}/ckpt-4, --model_dir's latest checkpoint, as the original; --init_checkpoint "
                   f"is read where --model_dir holds none. Pass --predict_ckpt={CKPT} to read it instead."]
  o.model_dir = str(tmp_path / "empty")
  assert run_files.predict_checkpoint(o, lines.append) == (CKPT, "--init_checkpoint") and len(lines) == 1


ORIGINAL_SQUAD_FLAGS = {  # the original run_squad.py's 55 flags and defaults
    "do_prepro": False, "num_proc": 1, "proc_id": 0, "model_config_path": None, "dropout": 0.1, "dropatt": 0.1,
    "clamp_len": -1, "summary_type": "last", "use_bfloat16": False, "init": "normal", "init_std": 0.02,
    "init_range": 0.1, "overwrite_data": False, "init_checkpoint": None, "init_global_vars": False,
    "output_dir": "", "predict_dir": "", "spiece_model_file": "", "model_dir": None, "train_file": "",
    "predict_file": "", "max_seq_length": 512, "max_query_length": 64, "doc_stride": 128, "max_answer_length": 64,
    "uncased": False, "use_tpu": False, "num_hosts": 1, "num_core_per_host": None, "tpu_job_name": None, "tpu": None,
    "tpu_zone": None, "gcp_project": None, "master": None, "iterations": 1000, "do_train": True,
    "train_batch_size": 48, "train_steps": 8000, "warmup_steps": 0, "save_steps": None, "max_save": 5,
    "shuffle_buffer": 2048, "learning_rate": 3e-5, "min_lr_ratio": 0.0, "clip": 1.0, "weight_decay": 0.0,
    "adam_epsilon": 1e-6, "decay_method": "poly", "lr_layer_decay_rate": 0.75, "do_predict": False,
    "predict_batch_size": 32, "n_best_size": 5, "start_n_top": 5, "end_n_top": 5, "target_eval_key": "best_f1",
}


def test_flags_keep_the_original_names_and_defaults():
  fv = absl_flags.FlagValues()
  run_squad.define_flags(flag_values=fv)
  assert len(ORIGINAL_SQUAD_FLAGS) == 55
  # model_dir: the original's "" is None here (both mean unset). num_core_per_host: the original's 8 asked for 8
  # GPUs; unset here means one device (docs/training_step.md).
  assert {name: fv[name].default for name in ORIGINAL_SQUAD_FLAGS} == ORIGINAL_SQUAD_FLAGS
  new = set(vars(cli.defaults(run_squad.define_flags))) - set(ORIGINAL_SQUAD_FLAGS)
  assert new == {"strategy", "jit_compile", "use_tf32", "seed", "deterministic", "clip_mode", "loss_weighting",
                 "gradient_accumulation_steps", "recompute_grad", "use_fp16", "float32_positions", "xla_cache_dir",
                 "skip_bad_records", "predict_ckpt", "predict_all_ckpt", "save_initial_checkpoint",
                 "allow_last_token", "allow_empty_prediction", "null_threshold"}


def test_a_prediction_command_does_not_train_a_finished_run_on_by_default(tmp_path):
  """`--do_predict=True --predict_all_ckpt=True --model_dir=M` (how the other tools predict) on a run fine-tuned to
  step 3 resumed its training to the default --train_steps=8000 at batch 48 before predicting, as --do_train is
  True by default (sweep 28, A1). Without --do_train given, a run in --model_dir that trained to other
  --train_steps is refused; the same --train_steps (a rerun of the command that trains) or --do_train=False pass."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  model_dir = tmp_path / "m"
  tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(model_dir / "ckpt-3"))
  (model_dir / "run_flags.json").write_text(json.dumps({"train_steps": 3}))
  o = cli.defaults(run_squad.define_flags, do_predict=True, predict_all_ckpt=True, spiece_model_file=SPM,
                   model_config_path=f"{TESTDATA}/ckpt/xlnet_config.json", output_dir=str(tmp_path / "out"),
                   model_dir=str(model_dir), predict_file=DEV, predict_dir=str(tmp_path / "p"))
  with pytest.raises(cli.FlagError, match=rf"^--do_train is True by default in run_squad\.py \(the original's\): "
                                          rf"this run would train the model in --model_dir {model_dir} on to "
                                          r"--train_steps=8000 \(its run's was 3\) before predicting\. Pass "
                                          r"--do_train=False to only predict, or --do_train=True to train on\.$"):
    run_squad.validate(o)
  for changes in ({"train_steps": 3}, {"do_train": False}):
    run_squad.validate(types.SimpleNamespace(**dict(vars(o), **changes)))
  # A prediction without training records was told to prepare a training run, the default unsaid.
  with pytest.raises(cli.FlagError, match=r"No training records match .* first, with the same --output_dir, "
                                          r"--spiece_model_file, --max_seq_length and --max_query_length \(--do_train "
                                          r"is True by default in run_squad\.py: pass --do_train=False to only "
                                          r"predict\)\.$"):
    run_squad._train_records(o, None, print)  # pylint: disable=protected-access


def test_a_read_only_model_dir_says_that_do_train_is_true_by_default(tmp_path, monkeypatch):
  """run_squad.py trains by default (--do_train True, as the original): a run asked only to --do_predict from a
  read-only --model_dir was refused as "not writable", which read as the bug it had been (sweep 20, N3)."""
  from xlnet_tf import fileio  # pylint: disable=import-outside-toplevel
  (tmp_path / "ro").mkdir()
  monkeypatch.setattr(fileio.os, "access", lambda path, mode: str(path) != str(tmp_path / "ro"))
  o = cli.defaults(run_squad.define_flags, do_predict=True, spiece_model_file=SPM, output_dir=str(tmp_path / "out"),
                   model_dir=str(tmp_path / "ro"), predict_dir=str(tmp_path / "p"))
  with pytest.raises(cli.FlagError, match=r"Pass a writable directory\. \(--do_train is True by default in "
                                          r"run_squad\.py: pass --do_train=False to only predict\)$"):
    run_squad.validate(o)
  o.do_train = False
  with pytest.raises(cli.FlagError) as error:  # past the directory check, another flag's line
    run_squad.validate(o)
  assert "--model_dir" not in str(error.value)
