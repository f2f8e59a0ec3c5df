"""run_classifier.py end to end: train/eval/predict on real IMDB reviews, STS-B regression with the README's flags,
original (TF1) fine-tuned checkpoints, our own checkpoints as --init_checkpoint, one-line errors for bad input."""

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from absl import flags as absl_flags

from helpers import cli_forks
import cli
import run_classifier
import run_files
from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
from xlnet_tf import checkpoint
from xlnet_tf import training
from xlnet_tf.data import corpora
from xlnet_tf.data import token_checks
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.classifier import data as classifier_data
from xlnet_tf.tasks.classifier import evaluation as classifier_eval
from xlnet_tf.tasks.classifier import features as classifier_features
from xlnet_tf.tasks.classifier import task as classifier_task
from xlnet_tf.tasks.pretrain import task as pretrain_task

PY = sys.executable
SPM = "tests/testdata/data/spm/spiece.model"
CONFIG = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=24, ff_activation="gelu", untie_r=True,
              n_token=1000)
SEQ_LEN = 48


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  """A tiny aclImdb tree of real reviews, a tiny xlnet_config.json, and an STS-B-format GLUE directory."""
  root = tmp_path_factory.mktemp("data")
  corpora.write_aclimdb(str(root / "aclImdb"), num_train=24, num_dev=12, seed=3)
  config = root / "xlnet_config.json"
  config.write_text(json.dumps(CONFIG))
  # STS-B layout (10 columns, header; test.tsv without the score): pairs of sentences from real reviews.
  sentences = [s for text, _ in corpora.read_movie_reviews()[:40] for s in corpora.split_sentences(text)][:90]
  stsb = root / "STS-B"
  stsb.mkdir()
  header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
  for name, start, n in (("train", 0, 20), ("dev", 40, 10)):
    rows = [f"{i}\tmain-captions\tMSRvid\t2012test\t{i}\tnone\tnone\t{sentences[start + 2 * i]}\t"
            f"{sentences[start + 2 * i + 1]}\t{(i * 7 % 11) * 5 / 10:.3f}\n" for i in range(n)]
    (stsb / f"{name}.tsv").write_text(header + "".join(rows))
  return {"imdb": str(root / "aclImdb"), "config": str(config), "sts-b": str(stsb), "root": root}


def classifier_cmd(files, *extra, task="imdb", data_dir=None):
  return [PY, "run_classifier.py", f"--task_name={task}", f"--data_dir={data_dir or files[task]}",
          f"--spiece_model_file={SPM}", f"--model_config_path={files['config']}", f"--max_seq_length={SEQ_LEN}",
          "--uncased=False", *extra]


def run_cli(cmd):
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout


def eval_lines(stdout, title="Eval result"):
  """{key: value} of every `title | k v | ...` line."""
  results = []
  for line in stdout.splitlines():
    if line.startswith(title + " |"):
      fields = [f.strip() for f in line.split("|")[1:] if f.strip()]
      results.append(dict(f.split(" ", 1) for f in fields))
  return results


def python_logits(model, examples, label_list, scope, uncased=False):
  """Logits of the Python path: processor examples -> convert_single_example -> classifier_task.forward."""
  sp = tokenization.load_sentencepiece(SPM)
  tokenize_fn = tokenization.make_tokenize_fn(sp, uncased)
  feats = [classifier_features.convert_single_example(i, ex, label_list, SEQ_LEN, tokenize_fn)
           for i, ex in enumerate(examples)]
  batch = {"input_ids": tf.constant([f.input_ids for f in feats]),
           "segment_ids": tf.constant([f.segment_ids for f in feats]),
           "input_mask": tf.constant([f.input_mask for f in feats], tf.float32),
           "label_ids": tf.constant([f.label_id for f in feats])}
  return classifier_task.forward(model, batch, scope)[0].numpy()


def inference_model(scope="classification_imdb", n_class=2):
  run_config = RunConfig(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.1, dropatt=0.1)
  return classifier_task.build_model(XLNetConfig(**CONFIG), run_config, scope, n_class)


def original_source_model():
  """A classifier with weights far from the init (so that logits differ visibly)."""
  source = inference_model()
  rng = np.random.RandomState(0)
  for var in source.trainable_variables:
    var.assign(rng.normal(0, 0.5, var.shape).astype(np.float32))
  return source


@pytest.fixture(scope="module")
def cli_runs(files, tmp_path_factory):
  """The two long CLI runs, started together; {name: (returncode, stdout, stderr, output dir)}.

  imdb: model_dir first holds `model.ckpt`, a fine-tuned checkpoint in the ORIGINAL's format (head included, no
    step suffix, global_step 1200). The run initialises from it (--init_checkpoint), trains 6 steps (checkpoints
    ckpt-3 and ckpt-6), evaluates every checkpoint in model_dir (3, 6 and the original's 1200) and predicts with
    the latest (ckpt-6). With --jit_compile=True: XLA compiles the training step (each of its 2 micro-batches:
    --gradient_accumulation_steps=2) and the evaluation and prediction forward (checked against the Python path
    below).
  stsb: the README's STS-B command (paths changed, steps cut), then eval, predict (the 10 real examples only:
    --predict_eval_padding=False) and --export_dir.
  """
  out = {name: tmp_path_factory.mktemp(name) for name in ("imdb", "stsb")}
  original = str(out["imdb"] / "model" / "model.ckpt")
  checkpoint.export_original_checkpoint(original_source_model(), original, global_step=1200)
  os.remove(out["imdb"] / "model" / "xlnet_config.json")  # an original run's bare model.ckpt, fine-tuned in place
  cmds = {
      "imdb": classifier_cmd(
          files, "--do_train=True", "--do_eval=True", "--do_predict=True", "--eval_all_ckpt=True",
          f"--output_dir={out['imdb'] / 'records'}", f"--model_dir={out['imdb'] / 'model'}",
          f"--init_checkpoint={original}", f"--predict_dir={out['imdb'] / 'predict'}", "--train_batch_size=4",
          "--learning_rate=1e-3", "--train_steps=6", "--save_steps=3", "--iterations=2", "--eval_batch_size=5",
          "--predict_batch_size=7", "--seed=1", "--jit_compile=True", "--gradient_accumulation_steps=2"),
      "stsb": classifier_cmd(
          files, "--do_train=True", "--do_eval=True", "--do_predict=True", f"--output_dir={out['stsb'] / 'rec'}",
          f"--model_dir={out['stsb'] / 'model'}", f"--predict_dir={out['stsb'] / 'pred'}",
          f"--export_dir={out['stsb'] / 'export'}", "--train_batch_size=8", "--num_hosts=1", "--num_core_per_host=4",
          "--learning_rate=5e-5", "--train_steps=4", "--warmup_steps=2", "--save_steps=2", "--is_regression=True",
          "--eval_batch_size=8", "--predict_eval_padding=False", task="sts-b"),
  }
  # --num_core_per_host=4 means 4 replicas (the original's MirroredStrategy(num_gpus=4)): 4 logical CPUs here.
  cmds["stsb"] = [PY, "tests/helpers/logical_cpus.py", "4", *cmds["stsb"][1:]]
  procs = {name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for name, cmd in cmds.items()}
  runs = {}
  for name, proc in procs.items():
    stdout, stderr = proc.communicate(timeout=300)
    runs[name] = (proc.returncode, stdout, stderr, out[name])
  return runs


def cli_run(cli_runs, name):
  returncode, stdout, stderr, out = cli_runs[name]
  assert returncode == 0, stderr[-3000:]
  return stdout, out


@pytest.mark.slow  # the default suite's 15 minutes; by default: mirrored fine-tuning, test_classifier_flow
def test_imdb_train_eval_predict(files, cli_runs):
  stdout, out = cli_run(cli_runs, "imdb")
  model_dir = out / "model"
  # ckpt-0: the Estimator's checkpoint of the step a new run starts from (--save_initial_checkpoint)
  assert sorted(p.name for p in model_dir.glob("*.index")) == ["ckpt-0.index", "ckpt-3.index", "ckpt-6.index",
                                                               "model.ckpt.index"]
  assert json.loads((model_dir / "xlnet_config.json").read_text()) == CONFIG
  assert json.loads((model_dir / "run_flags.json").read_text())["label_list"] == ["neg", "pos"]
  assert "Num of train samples: 24" in stdout and "[6] | gnorm" in stdout
  assert "global batch 4 (4 per replica x 1 replica(s))" in stdout
  assert "Gradient accumulation: each update sums 2 micro-batches of 2 rows per replica." in stdout
  assert "kept their initial values: none" in stdout  # the original checkpoint brought the head too
  # The original cached record names, with their fingerprints and locks (`locks.cache_lock`).
  names = ("spiece.model.len-48.dev.eval.tf_record", "spiece.model.len-48.dev.predict.tf_record",
           "spiece.model.len-48.train.tf_record")
  assert sorted(p.name for p in (out / "records").iterdir()) == sorted(
      [f".{name}.lock" for name in names] + [name + source for name in names for source in ("", ".source")])

  results = eval_lines(stdout)
  assert [r["step"] for r in results] == ["0", "3", "6", "1200"]
  assert all(set(r) == {"eval_accuracy", "eval_loss", "global_step", "loss", "path", "step"} for r in results)
  best = eval_lines(stdout, "Best result")
  assert len(best) == 1 and best[0] == max(results, key=lambda r: float(r["eval_accuracy"]))

  examples = classifier_data.ImdbProcessor().get_dev_examples(files["imdb"])
  labels = np.array([["neg", "pos"].index(ex.label) for ex in examples])
  # The original-format checkpoint (no step suffix) was evaluated with its own head.
  expected = python_logits(original_source_model(), examples, ["neg", "pos"], "classification_imdb")
  assert np.std(expected[:, 1] - expected[:, 0]) > 0.1
  assert results[3]["path"].endswith("model.ckpt")
  assert float(results[3]["eval_accuracy"]) == pytest.approx(np.mean(np.argmax(expected, 1) == labels))

  # The predict records hold the 3 eval padding examples too, as the original's (--do_eval padded its list).
  assert sum(1 for _ in tf.data.TFRecordDataset(str(out / "records" / names[1]))) == 15
  # Predictions of the latest checkpoint (ckpt-6): 12 real dev examples in processor order, then the 3 eval
  # padding examples, as the original wrote them (--predict_eval_padding's default; the stsb run leaves them out).
  assert f"Predictions of {model_dir / 'ckpt-6'}" in stdout
  with open(out / "predict" / "imdb.tsv") as f:
    rows = list(csv.reader(f, delimiter="\t"))
  assert rows[0] == ["index", "prediction"] and [r[0] for r in rows[1:]] == [str(i) for i in range(15)]
  logits = np.array(json.loads((out / "predict" / "imdb.logits.json").read_text()))
  assert logits.shape == (15, 2)
  assert [r[1] for r in rows[1:]] == ["pos" if b - a > 0 else "neg" for a, b in logits]
  np.testing.assert_allclose(logits[12], logits[14], rtol=1e-5, atol=1e-6)  # padding: one all-padding input
  logits = logits[:12]
  # Eval of ckpt-6: its accuracy and loss follow from the predicted logits.
  assert float(results[2]["eval_accuracy"]) == pytest.approx(np.mean(np.argmax(logits, 1) == labels))
  log_softmax = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  assert float(results[2]["eval_loss"]) == pytest.approx(-np.mean(log_softmax[np.arange(12), labels]), rel=1e-5)

  # Our fine-tuned checkpoint, loaded by name into a fresh model, gives the same logits (Python path).
  model = inference_model()
  report = checkpoint.load_weights(model, str(model_dir / "ckpt-6"))
  assert report["kept_initial"] == []
  np.testing.assert_allclose(python_logits(model, examples, ["neg", "pos"], "classification_imdb"), logits,
                             rtol=1e-5, atol=1e-5)
  # The --init_checkpoint loader on the original-format checkpoint keeps its head: the same logits.
  model = inference_model()
  report = checkpoint.load_weights(model, str(model_dir / "model.ckpt"))
  assert "model/classification_imdb/logit/kernel" in report["loaded"] and report["kept_initial"] == []
  np.testing.assert_allclose(python_logits(model, examples, ["neg", "pos"], "classification_imdb"), expected,
                             rtol=1e-5, atol=1e-5)


def test_an_init_checkpoint_of_another_activation_than_the_config_is_refused(tmp_path):
  """--init_checkpoint of a released model whose xlnet_config.json says gelu, --model_config_path relu (the same
  shapes): it fine-tuned another function than the weights learned, exit 0 (sweep 21, H6). Refused before anything
  is written; its own config is accepted."""
  config = XLNetConfig(**CONFIG)
  released = tmp_path / "released"
  checkpoint.export_original_checkpoint(XLNetModel(config, RunConfig(is_training=False, use_tpu=False,
                                                                     use_bfloat16=False, dropout=0, dropatt=0)),
                                        str(released / "xlnet_model.ckpt"))
  config.to_json(str(released / "xlnet_config.json"))
  relu = XLNetConfig(**{**CONFIG, "ff_activation": "relu"})
  relu.to_json(str(tmp_path / "relu.json"))
  o = cli.defaults(run_classifier.define_flags, do_train=True, init_checkpoint=str(released / "xlnet_model.ckpt"),
                   model_config_path=str(tmp_path / "relu.json"), model_dir=str(tmp_path / "m"))
  with pytest.raises(cli.FlagError, match=f"^--init_checkpoint {released}/xlnet_model.ckpt is another model than "
                                          f"this run builds from --model_config_path {tmp_path}/relu.json "
                                          f"\\({released}/xlnet_"
                                          r"config.json: ff_activation gelu there, relu here\): its weights would "
                                          f"compute another function. Pass --model_config_path={released}/xlnet_"
                                          "config.json.$"):
    run_files.check_trained_model(o, o.model_dir, relu)
  run_files.check_trained_model(o, o.model_dir, config)
  assert not (tmp_path / "m").exists()


def test_pretraining_checkpoints_initialise_a_classifier(tmp_path):
  """A released (original-format) and one of our pretraining checkpoints (no heads) both load the backbone; the
  summary and the new head keep their initialisation."""
  config = XLNetConfig(**CONFIG)
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0)
  pretrain = XLNetModel(config, run_config)
  checkpoint.export_original_checkpoint(pretrain, str(tmp_path / "released" / "xlnet_model.ckpt"))
  trainer = training.Trainer(
      training.make_strategy("one_device"), lambda: XLNetModel(config, run_config), pretrain_task.PretrainTask(),
      str(tmp_path / "ours"), training.TrainConfig(learning_rate=1e-4, train_steps=1, global_batch_size=2))
  trainer.save()
  backbone = {n: v.numpy() for n, v in checkpoint.original_variable_map(pretrain).items()}
  ours = {n: v.numpy() for n, v in checkpoint.original_variable_map(trainer.model).items()}
  for path, values in ((str(tmp_path / "released" / "xlnet_model.ckpt"), backbone), (str(tmp_path / "ours"), ours)):
    model = inference_model()
    report = checkpoint.load_weights(model, path)
    assert report["kept_initial"] == ["model/classification_imdb/logit/bias", "model/classification_imdb/logit/kernel",
                                      "model/sequnece_summary/summary/bias", "model/sequnece_summary/summary/kernel"]
    table = checkpoint.original_variable_map(model)
    assert len(report["loaded"]) == len(table) - 4
    for name in report["loaded"]:
      np.testing.assert_array_equal(table[name].numpy(), values[name], err_msg=name)
    with pytest.raises(ValueError, match=r"has no fine-tuned model/classification_imdb .*; it holds no "
                                         r"classification head \(a pretrained checkpoint, or another task's\)"):
      classifier_eval.Inference(model, "classification_imdb").load(path)
  # Another task's head: the line names the value the flag takes (it named the scope, which the flag prefixes).
  checkpoint.export_original_checkpoint(inference_model(), str(tmp_path / "imdb" / "xlnet_model.ckpt"))
  with pytest.raises(ValueError, match=r"it holds the classification heads classification_imdb. Use a "
                                       r"fine-tuned checkpoint, or pass the head's name as --cls_scope \(or "
                                       r"--task_name\): imdb.$"):
    classifier_eval.Inference(inference_model("classification_sst-2"), "classification_sst-2").load(
        str(tmp_path / "imdb" / "xlnet_model.ckpt"))


@pytest.mark.slow  # the default suite's 15 minutes; by default: the original's regression step and flow
def test_stsb_regression_with_the_readme_flags(files, cli_runs):
  """The README's STS-B command (paths changed; steps cut to fit a test), then eval, predict and the SavedModel."""
  stdout, out = cli_run(cli_runs, "stsb")
  assert "global batch 32 (8 per replica x 4 replica(s))" in stdout  # --train_batch_size is per GPU, as the original
  results = eval_lines(stdout)
  assert len(results) == 1 and results[0]["step"] == "4"
  assert set(results[0]) == {"eval_pearsonr", "eval_loss", "loss", "global_step", "path", "step"}  # the original's
  assert -1 <= float(results[0]["eval_pearsonr"]) <= 1
  names = checkpoint.named_weight_keys(tf.train.load_checkpoint(str(out / "model" / "ckpt-4")))
  assert "model/regression_sts-b/logit/kernel" in names
  assert not any(n.startswith("model/classification_") for n in names)
  with open(out / "pred" / "sts-b.tsv") as f:
    rows = list(csv.reader(f, delimiter="\t"))
  logits = np.array(json.loads((out / "pred" / "sts-b.logits.json").read_text()))
  assert logits.shape == (10, 1) and len(rows) == 11
  np.testing.assert_allclose([float(r[1]) for r in rows[1:]], logits[:, 0], rtol=1e-6)
  examples = classifier_data.StsbProcessor().get_dev_examples(files["sts-b"])
  scores = np.array([ex.label for ex in examples])
  # The eval and predict passes batch the examples differently, so their float32 predictions x differ by a few ulps
  # (|delta| <= 1e-6 max|x|). After 4 steps x is nearly constant (spread 0.2% of its size), and r then moves by up to
  # 2 |delta| / |x - mean(x)| (~1e-3 here; a fixed 1e-5 failed once by 1.1e-5). Counting the padding examples or
  # mispairing labels moves r by far more.
  x = logits[:, 0]
  r_tol = 2 * np.sqrt(len(x)) * 1e-6 * np.abs(x).max() / np.linalg.norm(x - x.mean())  # 2 |delta| / |x - mean(x)|
  assert float(results[0]["eval_pearsonr"]) == pytest.approx(np.corrcoef(x, scores)[0, 1], abs=max(r_tol, 1e-5))
  assert float(results[0]["eval_loss"]) == pytest.approx(np.mean((x - scores) ** 2), rel=1e-5)

  # The README's eval command (--do_train=False --do_eval=True --eval_all_ckpt=True), through run() in-process.
  options = cli.defaults(
      run_classifier.define_flags,
      do_eval=True, eval_all_ckpt=True, task_name="sts-b", data_dir=files["sts-b"], output_dir=str(out / "rec"),
      model_dir=str(out / "model"), spiece_model_file=SPM, model_config_path=files["config"],
      max_seq_length=SEQ_LEN, eval_batch_size=8, is_regression=True)
  lines = []
  result = run_classifier.run(options, training.make_strategy("one_device"), log_fn=lines.append)
  assert [r["step"] for r in result["eval"]] == [0, 2, 4]
  model = out / "model"
  assert [line for line in lines if line.endswith("to eval list.")] == [
      f"Add {model / f'ckpt-{step}'} to eval list." for step in (0, 2, 4)]  # the original's lines, by step
  assert result["eval"][2]["eval_pearsonr"] == pytest.approx(float(results[0]["eval_pearsonr"]), abs=1e-6)
  assert sum(line.startswith("Eval result | eval_loss") for line in lines) == 3

  import tensorflow_text  # noqa: F401  (registers the SentencePiece op the SavedModel uses)
  loaded = tf.saved_model.load(str(out / "export"))
  scores = loaded.signatures["classify_pair"](text_a=tf.constant([ex.text_a for ex in examples]),
                                              text_b=tf.constant([ex.text_b for ex in examples]))["score"].numpy()
  np.testing.assert_allclose(scores, logits[:, 0], rtol=1e-4, atol=1e-5)


def _bad_input_dirs(files, tmp_path):
  sst = tmp_path / "sst"
  sst.mkdir()
  (sst / "train.tsv").write_text("sentence\tlabel\na fine film\t1\na dull film\t2\n")
  return {"sst": str(sst), "empty": str(tmp_path)}


BAD_INPUT = [  # (extra flags, task, data dir key or None, expected message)
    (["--do_train=True"], "nosuchtask", None, "Unknown --task_name 'nosuchtask'"),
    (["--do_train=True"], "imdb", "empty", "needs the directory"),
    (["--do_train=True"], "sst-2", "sst", "Label '2'"),
    (["--do_train=True", "--max_seq_length=2"], "imdb", None, "--max_seq_length must be at least 3"),
    (["--do_train=True", "--is_regression=True"], "imdb", None, "Remove --is_regression"),
    (["--do_train=True", "--spiece_model_file=nowhere/spiece.model"], "imdb", None,
     "--spiece_model_file=nowhere/spiece.model does not exist"),
]


@pytest.mark.slow  # the default suite's 15 minutes; by default: the sweep's cls cases
def test_bad_input_gives_one_line_errors(files, tmp_path):
  dirs = _bad_input_dirs(files, tmp_path)
  cmds = [classifier_cmd(files, f"--output_dir={tmp_path / f'rec{i}'}", f"--model_dir={tmp_path / f'model{i}'}",
                         *extra, task=task, data_dir=dirs[data] if data else files["imdb"])[1:]
          for i, (extra, task, data, _) in enumerate(BAD_INPUT)]
  (tmp_path / "logs").mkdir()
  for (code, err), (*_, message) in zip(cli_forks.run(cmds, tmp_path / "logs"), BAD_INPUT):
    assert code == 1, message
    last = err.strip().splitlines()[-1]
    assert last.startswith("run_classifier.py: error:") and message in last, err[-2000:]
    assert "Traceback" not in err


ORIGINAL_CLASSIFIER_FLAGS = {  # the original run_classifier.py's 54 flags and defaults
    "model_config_path": None, "dropout": 0.1, "dropatt": 0.1, "clamp_len": -1, "summary_type": "last",
    "use_summ_proj": True, "use_bfloat16": False, "init": "normal", "init_std": 0.02, "init_range": 0.1,
    "overwrite_data": False, "init_checkpoint": None, "output_dir": "", "spiece_model_file": "", "model_dir": None,
    "data_dir": "", "use_tpu": False, "num_hosts": 1, "num_core_per_host": None, "tpu_job_name": None, "tpu": None,
    "tpu_zone": None, "gcp_project": None, "master": None, "iterations": 1000, "do_train": False,
    "train_steps": 1000, "warmup_steps": 0, "learning_rate": 1e-5, "lr_layer_decay_rate": 1.0, "min_lr_ratio": 0.0,
    "clip": 1.0, "max_save": 0, "save_steps": None, "train_batch_size": 8, "weight_decay": 0.0,
    "adam_epsilon": 1e-8, "decay_method": "poly", "do_eval": False, "do_predict": False, "predict_threshold": 0,
    "eval_split": "dev", "eval_batch_size": 128, "predict_batch_size": 128, "predict_dir": None,
    "eval_all_ckpt": False, "predict_ckpt": None, "task_name": None, "max_seq_length": 128, "shuffle_buffer": 2048,
    "num_passes": 1, "uncased": False, "cls_scope": None, "is_regression": False,
}


def test_flags_keep_the_original_names_and_defaults():
  fv = absl_flags.FlagValues()
  run_classifier.define_flags(flag_values=fv)
  assert len(ORIGINAL_CLASSIFIER_FLAGS) == 54
  # model_dir: the original's "" is None here (both mean unset). num_core_per_host: the original's 8 asked for 8
  # GPUs; unset here means one device (docs/training_step.md).
  assert {name: fv[name].default for name in ORIGINAL_CLASSIFIER_FLAGS} == ORIGINAL_CLASSIFIER_FLAGS
  # run() reads the script's flags as a namespace: every flag, nothing else; defaults() rejects unknown names.
  fv(["run_classifier.py"])
  assert vars(cli.values(fv)) == vars(cli.defaults(run_classifier.define_flags)) == {
      name: fv[name].value for name in fv if name in vars(cli.values(fv))}
  assert set(ORIGINAL_CLASSIFIER_FLAGS) <= set(vars(cli.values(fv)))
  with pytest.raises(ValueError, match="No such flag: trian_steps"):
    cli.defaults(run_classifier.define_flags, trian_steps=3)


def test_checkpoint_listing_is_robust_to_names_without_a_step_and_leaves_out_cut_copies(tmp_path, caplog):
  model = inference_model()
  checkpoint.export_original_checkpoint(model, str(tmp_path / "model.ckpt-20"), global_step=20)
  checkpoint.export_original_checkpoint(model, str(tmp_path / "model.ckpt"), global_step=7)
  checkpoint.export_original_checkpoint(model, str(tmp_path / "model.ckpt-3"), global_step=3)
  assert checkpoint.list_checkpoints(str(tmp_path)) == [
      (3, str(tmp_path / "model.ckpt-3")), (7, str(tmp_path / "model.ckpt")), (20, str(tmp_path / "model.ckpt-20"))]
  # A copy cut short (an .index without its .data-*) is left out with a warning: evaluating it ended the run.
  os.remove(str(tmp_path / "model.ckpt-20.data-00000-of-00001"))
  caplog.clear()
  assert checkpoint.list_checkpoints(str(tmp_path))[-1] == (7, str(tmp_path / "model.ckpt"))
  assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
      f"Left out checkpoint {tmp_path}/model.ckpt-20: it has its .index but not every .data-* file it names (a copy "
      "cut short). Copy it again, or delete its files."]
  assert classifier_task.head_scope("STS-B", "ignored", is_regression=True) == "regression_sts-b"
  assert classifier_task.head_scope("MNLI_matched", None) == "classification_mnli_matched"
  assert classifier_task.head_scope("imdb", "mine") == "classification_mine"


def test_num_core_per_host_the_machine_lacks_is_one_line(files, tmp_path):
  """The README's STS-B command asks for 4 GPUs; without them it says so in one line (never a silent 1 replica)."""
  cmd = classifier_cmd(files, "--do_train=True", f"--output_dir={tmp_path / 'rec'}", f"--model_dir={tmp_path / 'm'}",
                       "--train_batch_size=8", "--num_core_per_host=4", "--train_steps=2", "--is_regression=True",
                       task="sts-b")
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
  assert proc.returncode == 1, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and "--num_core_per_host=4 asks for 4 replicas" in lines[0] and "0 GPU(s)" in lines[0]
  assert not (tmp_path / "m").exists() or not any((tmp_path / "m").glob("ckpt-*"))


@pytest.mark.parametrize("ending", [pytest.param("reader_gone", marks=pytest.mark.slow), "hangup",  # 15 minutes
                                    pytest.param("group_stopped", marks=pytest.mark.slow)])
@pytest.mark.usefixtures("stop_signals_default")
def test_a_training_run_whose_output_reader_or_terminal_is_gone_saves_its_step_and_stops(files, tmp_path, ending):
  """`run_classifier.py ... | head -3`, or a `tee` that ended: the run died at its next progress line with
  `[Errno 32] Broken pipe`, rc 1, saving nothing (sweep 21, P1); its terminal or ssh session closing (SIGHUP, not
  under nohup) killed it at once, no line, the steps since the last checkpoint lost (P2); `... 2>&1 | tee log`
  stopped as a group (timeout, scancel): tee gone, the SIGTERM's save was lost to the broken pipe (P3). Each stops
  as on SIGTERM: the step saved, one line on stderr (where it is read), exit 128 + the signal."""
  cmd = classifier_cmd(files, "--do_train=True", f"--output_dir={tmp_path / 'records'}",
                       f"--model_dir={tmp_path / 'm'}", "--train_batch_size=2", "--train_steps=100000",
                       "--iterations=1")
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  for line in proc.stdout:
    if line.startswith("[1] |"):  # the first progress line: the loop runs
      break
  if ending == "hangup":
    proc.send_signal(signal.SIGHUP)
  else:
    proc.stdout.close()  # as `head` or `tee` ends
  if ending == "group_stopped":
    proc.stderr.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    assert tf.train.latest_checkpoint(str(tmp_path / "m")) is not None
    return
  err = proc.stderr.read()
  signum, why = {"reader_gone": (signal.SIGPIPE, " (its standard output cannot be written)"),
                 "hangup": (signal.SIGHUP, "")}[ending]
  assert proc.wait(timeout=120) == 128 + signum, err[-3000:]
  last = err.strip().splitlines()[-1]
  step = int(re.search(r"at step (\d+);", last).group(1))
  assert last == (f"run_classifier.py: stopped by {signum.name}{why} at step {step}; checkpoint {tmp_path}/m/ckpt-"
                  f"{step}. Run the same command again to resume from step {step}.")
  assert tf.train.latest_checkpoint(str(tmp_path / "m")) == f"{tmp_path}/m/ckpt-{step}"


@pytest.mark.slow
def test_kill_9_then_resume_on_two_replicas_is_bit_identical(files, tmp_path):
  """Fine-tuning on 2 replicas (--num_core_per_host=2, 2 logical CPUs), killed after its step-4 checkpoint and
  rerun: the resumed run skips the global batches already seen (2 per step) and ends bit-identical to an
  uninterrupted run."""
  def cmd(name):
    return [PY, "tests/helpers/logical_cpus.py", "2", *classifier_cmd(
        files, "--do_train=True", f"--output_dir={tmp_path / name / 'records'}", f"--model_dir={tmp_path / name}",
        "--train_batch_size=2", "--num_core_per_host=2", "--train_steps=12", "--save_steps=4", "--iterations=1",
        "--learning_rate=1e-3", "--warmup_steps=1", "--seed=2", "--deterministic=True")[1:]]
  full = subprocess.run(cmd("full"), capture_output=True, text=True, timeout=300)
  assert full.returncode == 0, full.stderr[-3000:]
  killed = tmp_path / "killed"
  proc = subprocess.Popen(cmd("killed"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
  deadline = time.time() + 240
  while not tf.train.latest_checkpoint(str(killed)) and proc.poll() is None and time.time() < deadline:
    time.sleep(0.02)
  os.killpg(proc.pid, signal.SIGKILL)
  proc.wait()
  latest = tf.train.latest_checkpoint(str(killed))
  assert latest is not None and not latest.endswith("ckpt-12"), "the kill came too late to test a resume"
  resumed = subprocess.run(cmd("killed"), capture_output=True, text=True, timeout=300)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"from step {latest.rsplit('-', 1)[1]} to 12" in resumed.stdout
  values = {}
  for name in ("full", "killed"):
    reader = tf.train.load_checkpoint(str(tmp_path / name / "ckpt-12"))
    values[name] = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map() if "save_counter" not in n
                    and n != "_CHECKPOINTABLE_OBJECT_GRAPH"}
  assert values["full"].keys() == values["killed"].keys()
  for key, value in values["full"].items():
    np.testing.assert_array_equal(values["killed"][key], value, err_msg=key)


@pytest.mark.slow  # the default suite's 15 minutes; by default: test_optimization's and test_recompute's two replicas
def test_mirrored_fine_tuning_equals_one_device(files, tmp_path):
  """2 replicas (2 logical CPUs) x 2 rows train the same weights as one device x 4 rows (seeded, no dropout), the
  replicas with --recompute_grad (the same gradients); so do 2 replicas x 2 micro-batches of 1 row
  (--gradient_accumulation_steps=2). With --clip_mode=indexed_slices: the clip of the replicas' summed gradient
  (fine-tuning's default, per_replica, clips each replica's own, as the original's Estimator)."""
  common = ["--do_train=True", "--train_steps=4", "--save_steps=4", "--iterations=2", "--learning_rate=1e-3",
            "--warmup_steps=1", "--dropout=0", "--dropatt=0", "--seed=2", "--deterministic=True",
            "--clip_mode=indexed_slices"]
  runs = {"one": ([], ["--train_batch_size=4"]),
          "mirrored": (["tests/helpers/logical_cpus.py", "2"], ["--train_batch_size=2", "--num_core_per_host=2",
                                                                "--recompute_grad=True"]),
          "accumulated": (["tests/helpers/logical_cpus.py", "2"], ["--train_batch_size=2", "--num_core_per_host=2",
                                                                   "--gradient_accumulation_steps=2"])}
  procs = {}
  for name, (wrapper, extra) in runs.items():
    cmd = classifier_cmd(files, f"--output_dir={tmp_path / name / 'records'}",
                         f"--model_dir={tmp_path / name / 'model'}", *common, *extra)
    procs[name] = subprocess.Popen([PY, *wrapper, *cmd[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
  stdout = {}
  for name, proc in procs.items():
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    stdout[name] = out
  assert "global batch 4 (2 per replica x 2 replica(s))" in stdout["mirrored"]
  assert json.loads((tmp_path / "mirrored" / "model" / "run_flags.json").read_text())["recompute_grad"] is True
  values = {}
  for name in runs:
    reader = tf.train.load_checkpoint(str(tmp_path / name / "model" / "ckpt-4"))
    values[name] = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
                    if n.startswith("weights/") or "optimizer" in n}
  assert "each update sums 2 micro-batches of 1 row per replica." in stdout["accumulated"]
  for name in ("mirrored", "accumulated"):
    assert values["one"].keys() == values[name].keys() and len(values["one"]) > 30
    for key, value in values["one"].items():
      np.testing.assert_allclose(values[name][key], value, atol=2e-6, rtol=1e-5, err_msg=f"{name}: {key}")


def _csv_dir(path, files):
  """A csv task's data directory: each of `files` ({name: [(text, label), ...]}) with a `text,label` header."""
  path.mkdir()
  for name, examples in files.items():
    with open(path / name, "w", newline="") as f:
      csv.writer(f).writerows([("text", "label"), *examples])
  return path


@pytest.mark.slow  # the default suite's 15 minutes; by default: the sweep's cls-csv cases
def test_csv_labels_travel_with_the_checkpoint(files, tmp_path):
  """A csv run without --labels trains with the sorted labels of its training file and keeps them in
  run_flags.json: predicting with a directory that holds only test.csv takes them from there; predicting with
  them in another order (which would name the wrong classes) is refused in one line, writing nothing, also where
  the `checkpoint` state file is missing (a copy that left it out), and there training resumes from the highest
  step instead of training over the checkpoints from step 0."""
  texts = [text[:200] for text, _ in corpora.read_movie_reviews()[:12]]
  rows = [(text, ("pos", "neg")[i % 2]) for i, text in enumerate(texts)]
  train_dir = _csv_dir(tmp_path / "train", {"train.csv": rows[:8]})
  test_dir = _csv_dir(tmp_path / "test", {"test.csv": [(text, "") for text in texts[8:]]})
  common = ["run_classifier.py", "--task_name=csv", "--text_a_column=text", "--label_column=label",
            f"--spiece_model_file={SPM}", f"--model_config_path={files['config']}", f"--max_seq_length={SEQ_LEN}",
            "--uncased=False", f"--model_dir={tmp_path / 'model'}"]
  (code, err), = cli_forks.run([[*common, "--do_train=True", f"--data_dir={train_dir}", "--train_batch_size=4",
                                 "--train_steps=1", f"--output_dir={tmp_path / 'records'}"]], tmp_path)
  assert code == 0, err[-3000:]
  assert json.loads((tmp_path / "model" / "run_flags.json").read_text())["label_list"] == ["neg", "pos"]
  for copy in ("copy", "resumed"):
    shutil.copytree(tmp_path / "model", tmp_path / copy)
    (tmp_path / copy / "checkpoint").unlink()
  trained = {p.name: p.read_bytes() for p in (tmp_path / "model").glob("ckpt-1.*")}
  predict = [*common, "--do_predict=True", "--eval_split=test", f"--data_dir={test_dir}"]
  (code, err), (code_reordered, err_reordered), (code_resumed, err_resumed), (code_reg, err_reg) = cli_forks.run(
      [[*predict, f"--output_dir={tmp_path / 'predict_records'}", f"--predict_dir={tmp_path / 'predict'}"],
       [*predict, "--labels=pos,neg", f"--output_dir={tmp_path / 'reordered_records'}",
        f"--predict_dir={tmp_path / 'reordered'}", f"--model_dir={tmp_path / 'copy'}"],
       [*common, "--do_train=True", f"--data_dir={train_dir}", "--train_batch_size=4", "--train_steps=2",
        f"--output_dir={tmp_path / 'records'}", f"--model_dir={tmp_path / 'resumed'}"],
       [*predict, "--is_regression=True", f"--output_dir={tmp_path / 'reg_records'}",
        f"--predict_dir={tmp_path / 'reg'}", f"--model_dir={tmp_path / 'copy'}"]], tmp_path)
  assert code == 0, err[-3000:]
  assert code_resumed == 0, err_resumed[-3000:]
  assert "no `checkpoint` state file" in err_resumed
  assert {p.name: p.read_bytes() for p in (tmp_path / "resumed").glob("ckpt-1.*")} == trained
  assert (tmp_path / "resumed" / "ckpt-2.index").exists()
  with open(tmp_path / "predict" / "csv.tsv") as f:
    predictions = list(csv.reader(f, delimiter="\t"))[1:]
  assert len(predictions) == 4 and {p[1] for p in predictions} <= {"neg", "pos"}
  assert code_reordered == 1, err_reordered[-3000:]
  assert err_reordered.strip().splitlines()[-1] == (
      f"run_classifier.py: error: The checkpoints in {tmp_path / 'copy'} were fine-tuned with the labels "
      f"['neg', 'pos'], in that order ({tmp_path / 'copy' / 'run_flags.json'}); this run's are the labels "
      "['pos', 'neg'], in that order: its scores would name the wrong classes. Pass --labels=neg,pos, or another "
      "--model_dir.")
  assert not (tmp_path / "reordered").exists() or not os.listdir(tmp_path / "reordered")
  # A classifier's checkpoints read as a regressor's: the fix is the flag, not --labels (it said "Pass --labels").
  assert code_reg == 1 and err_reg.strip().splitlines()[-1].endswith(
      "this run's are a regression task (float labels): its scores would name the wrong classes. Pass "
      "--is_regression=False (as it was trained), or another --model_dir."), err_reg[-3000:]


def test_cached_records_with_a_label_id_beyond_the_labels_are_refused(tmp_path):
  """Records written with three labels, read by a two-label task (a cache of the original code carries no record
  of its labels): a label id 2 would train with a zero loss; the host check names the file and the record."""
  examples = [classifier_data.InputExample(guid=str(i), text_a=f"review number {i}", label=label)
              for i, label in enumerate(["a", "b", "c", "a"])]
  sp_model = tokenization.load_sentencepiece(SPM)
  path = str(tmp_path / "train.tf_record")
  classifier_features.file_based_convert_examples_to_features(
      examples, ["a", "b", "c"], 16, tokenization.make_tokenize_fn(sp_model, False), path)
  token_checks.check_label_ids(path, 3)
  with pytest.raises(ValueError, match=r"train.tf_record holds label id 2 \(record 2\), outside the task's 2 labels "
                                       r"\[0, 2\): it was written with another label list; pass --overwrite_data"):
    token_checks.check_label_ids(path, 2)


def test_a_seeded_run_does_not_reuse_training_records_of_another_order(tmp_path):
  """Training records are shuffled before they are written: an unseeded run reuses a cache of the same examples in
  any order, a seeded run (--seed: one order) only a cache in its own order (another seed's, or another
  --sorted_file_order's, is written again)."""
  examples = [classifier_data.InputExample(f"train-{i}", f"{i} {i + 1}", label=("neg", "pos")[i % 2])
              for i in range(4)]
  lines = []
  write = lambda ex, seed: run_classifier._write_records(  # pylint: disable=protected-access
      ex, ["neg", "pos"], cli.defaults(run_classifier.define_flags, output_dir=str(tmp_path), spiece_model_file=SPM,
                                       max_seq_length=8, seed=seed),
      lambda text: [int(w) for w in text.split()], "train", lines.append, 1000)
  write(examples, None)
  write(examples[::-1], None)
  write(examples[::-1], 1)
  write(examples[::-1], 1)
  write(examples, 2)
  assert [line.split()[0] for line in lines] == ["Wrote", "Reusing", "Wrote", "Reusing", "Wrote"]


def test_an_export_dir_named_like_a_checkpoint_is_refused(tmp_path):
  """--export_dir=<model_dir>/ckpt-2 was exported (exit 0); then every tool took that directory for the checkpoint
  (`No checkpoint found in directory .../ckpt-2`) and a resume's advice was to delete the real ckpt-2.*."""
  (tmp_path / "model").mkdir()
  (tmp_path / "model" / "ckpt-2.index").write_bytes(b"")
  o = cli.defaults(run_classifier.define_flags, task_name="imdb", data_dir=str(tmp_path), do_predict=True,
                   model_config_path="tests/testdata/model/ckpt_untied/xlnet_config.json", spiece_model_file=SPM,
                   output_dir=str(tmp_path / "records"), model_dir=str(tmp_path / "model"),
                   predict_dir=str(tmp_path / "pred"), export_dir=str(tmp_path / "model" / "ckpt-2"))
  with pytest.raises(cli.FlagError, match=f"^--export_dir {tmp_path}/model/ckpt-2 is named like the checkpoint "
                                          f"beside it \\({tmp_path}/model/ckpt-2.index\\)"):
    run_classifier.validate(o)


@pytest.mark.parametrize("name", ["predict_dir", "output_dir", "model_dir"])
def test_an_export_dir_that_is_another_output_dir_is_refused_before_the_run(name, tmp_path):
  """The SavedModel replaces --export_dir whole: the same directory as another output flag (or one holding it) was
  refused only after the training or prediction, with a line naming no flag."""
  dirs = dict(output_dir=tmp_path / "records", model_dir=tmp_path / "model", predict_dir=tmp_path / "pred")
  dirs[name] = tmp_path / "export" / ("" if name == "predict_dir" else "inside")
  o = cli.defaults(run_classifier.define_flags, task_name="imdb", data_dir=str(tmp_path), do_predict=True,
                   model_config_path="tests/testdata/model/ckpt_untied/xlnet_config.json", spiece_model_file=SPM,
                   export_dir=str(tmp_path / "export"), **{k: str(v) for k, v in dirs.items()})
  with pytest.raises(cli.FlagError, match=f"--export_dir {tmp_path}/export is \\(or holds\\) --{name} "):
    run_classifier.validate(o)
  o.export_dir = str(tmp_path / "exported")
  run_classifier.validate(o)
  (tmp_path / "exported").mkdir()
  os.symlink(tmp_path / "exported", tmp_path / "current")  # models/current -> models/v3: the link was replaced
  o.export_dir = str(tmp_path / "current")
  with pytest.raises(cli.FlagError, match=f"--export_dir {tmp_path}/current is a symbolic link \\(to "
                                          f"{tmp_path}/exported\\): the SavedModel replaces its directory whole"):
    run_classifier.validate(o)
  # an --export_dir whose parent is reached through a link to the flag's directory's parent (sweep 28): the export
  # was refused after the training, as a directory of other files
  os.symlink(tmp_path, tmp_path / "alias")
  o.export_dir = str(tmp_path / "alias" / "export")
  with pytest.raises(cli.FlagError, match=f"--export_dir {tmp_path}/alias/export is \\(or holds\\) --{name} "):
    run_classifier.validate(o)


def test_a_directory_named_like_a_prediction_file_is_refused_before_the_run(tmp_path):
  """A directory at --predict_dir/sst-2.tsv: `Could not write ... (Is a directory) ... Free space`, after the whole
  prediction (sweep 25, C3)."""
  (tmp_path / "pred" / "sst-2.logits.json").mkdir(parents=True)
  o = cli.defaults(run_classifier.define_flags, task_name="SST-2", data_dir=str(tmp_path), do_predict=True,
                   model_config_path="tests/testdata/model/ckpt_untied/xlnet_config.json", spiece_model_file=SPM,
                   output_dir=str(tmp_path / "records"), model_dir=str(tmp_path / "model"),
                   predict_dir=str(tmp_path / "pred"))
  with pytest.raises(ValueError) as error:
    run_classifier.validate(o)
  assert str(error.value) == (f"--predict_dir {tmp_path}/pred holds a directory named like the prediction file "
                              f"{tmp_path}/pred/sst-2.logits.json: move it away, or pass another --predict_dir.")
  o.do_predict, o.do_eval = False, True  # an evaluation writes no prediction file
  run_classifier.validate(o)


def test_a_model_dir_that_is_a_checkpoint_or_a_saved_model_is_named_as_such(tmp_path):
  """--model_dir=M/ckpt-2 said `not a directory holding checkpoints. Train first`, a SavedModel `No checkpoint`
  (sweep 34, S6)."""
  for name in ("ckpt-2.index", "ckpt-2.data-00000-of-00001", "saved/saved_model.pb"):
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_bytes(b"")
  o = cli.defaults(run_classifier.define_flags, task_name="csv", do_eval=True, model_dir=str(tmp_path / "ckpt-2"))
  with pytest.raises(cli.FlagError, match=rf"^--model_dir {tmp_path}/ckpt-2 is a checkpoint, not a directory of them: "
                                          rf"pass --model_dir={tmp_path} \(or --predict_ckpt={tmp_path}/ckpt-2 to "
                                          r"predict with it\)\.$"):
    run_files.require_model_dir(o)
  o = cli.defaults(run_classifier.define_flags, task_name="csv", do_eval=True, model_dir=str(tmp_path / "saved"))
  with pytest.raises(cli.FlagError, match=rf"^--model_dir {tmp_path}/saved is a SavedModel \(saved_model.pb: an "
                                          r"export, for serving\), not a directory of checkpoints\."):
    run_files.require_model_dir(o)


def test_a_prediction_or_export_from_predict_ckpt_needs_no_model_dir(tmp_path):
  """run_classifier.py and run_race.py required --model_dir to predict with --predict_ckpt (refused as "where the
  fine-tuned checkpoints go"), run_squad.py did not (sweep 25, C1): one rule for the three; training and evaluation
  still need it. A checkpoint without a step is named without `step None` in the result lines."""
  o = cli.defaults(run_classifier.define_flags, task_name="sst-2", data_dir=str(tmp_path), do_predict=True,
                   model_config_path="tests/testdata/model/ckpt_untied/xlnet_config.json", spiece_model_file=SPM,
                   output_dir=str(tmp_path / "records"), predict_dir=str(tmp_path / "pred"),
                   predict_ckpt="tests/testdata/hf/cls_bin")
  run_classifier.validate(o)
  o.do_predict, o.export_dir = False, str(tmp_path / "export")
  run_classifier.validate(o)
  o.predict_ckpt = None
  with pytest.raises(cli.FlagError, match="^--export_dir needs a checkpoint: pass --predict_ckpt, --init_checkpoint "
                                          "or a --model_dir holding one.$"):
    run_classifier.validate(o)
  o.predict_ckpt, o.do_eval = "tests/testdata/hf/cls_bin", True
  with pytest.raises(cli.FlagError, match="^--model_dir is required with --do_eval: the directory whose checkpoints "
                                          "it evaluates.$"):
    run_classifier.validate(o)
  o.model_dir = "tests/testdata/hf/cls_bin"  # an HF directory: said before any records are written (rerun 25, N7)
  with pytest.raises(cli.FlagError, match="^--model_dir tests/testdata/hf/cls_bin is a HuggingFace model directory "
                                          r"\(config.json and weights\), not a fine-tuning run's checkpoints"):
    run_classifier.validate(o)
  assert classifier_eval._format_result("Eval result", dict(eval_accuracy=0.5, step=None, global_step=None,
                                                            path="m")) == "Eval result | eval_accuracy 0.5 | path m | "


def test_a_prediction_falls_back_to_init_checkpoint(files, tmp_path):
  """As the original's Estimator (and run_race.py, run_squad.py): with no --predict_ckpt and no checkpoint in
  --model_dir (or none given), --do_predict predicts with --init_checkpoint's weights. run_classifier.py refused it
  (`--do_predict needs a checkpoint`; rerun 25, N6)."""
  original = str(tmp_path / "original" / "model.ckpt")
  checkpoint.export_original_checkpoint(original_source_model(), original, global_step=1200)
  o = cli.defaults(run_classifier.define_flags, task_name="imdb", data_dir=files["imdb"], do_predict=True,
                   spiece_model_file=SPM, model_config_path=files["config"], max_seq_length=SEQ_LEN, uncased=False,
                   output_dir=str(tmp_path / "records"), predict_dir=str(tmp_path / "pred"), init_checkpoint=original)
  lines = []
  run_classifier.run(o, training.make_strategy("one_device"), log_fn=lines.append)
  assert f"Predictions of {original}: {tmp_path}/pred/imdb.tsv, {tmp_path}/pred/imdb.logits.json" in lines
  examples = classifier_data.ImdbProcessor().get_dev_examples(files["imdb"])
  expected = python_logits(original_source_model(), examples, ["neg", "pos"], "classification_imdb")
  np.testing.assert_allclose(json.loads((tmp_path / "pred" / "imdb.logits.json").read_text()), expected,
                             rtol=1e-5, atol=1e-5)
  o.model_dir = str(tmp_path / "empty")
  assert run_classifier.checkpoint_dir(o) == (str(tmp_path / "original"), "--init_checkpoint")
  checkpoint.export_original_checkpoint(inference_model(), str(tmp_path / "empty" / "model.ckpt"))
  assert run_classifier.checkpoint_dir(o) == (o.model_dir, "--model_dir")  # a checkpoint there comes first


@pytest.mark.parametrize("scope", ["a b", "a:b", "a/b", "é"])
def test_a_cls_scope_no_variable_scope_can_have_is_refused_naming_the_flag(scope, tmp_path):
  """`--cls_scope='a b'` (or `:`, non-ASCII) ended in a 3,000-character traced stack at the first step, after the
  records were written; `a/b` in a line naming no flag."""
  o = cli.defaults(run_classifier.define_flags, task_name="imdb", data_dir=str(tmp_path), do_train=True,
                   model_config_path="tests/testdata/model/ckpt_untied/xlnet_config.json", spiece_model_file=SPM,
                   output_dir=str(tmp_path / "records"), model_dir=str(tmp_path / "model"), cls_scope=scope)
  with pytest.raises(cli.FlagError, match=f"^--cls_scope={scope!r} cannot name the head's variable scope"):
    run_classifier.validate(o)
  o.cls_scope = "my_task-2.v1"
  run_classifier.validate(o)
  o.task_name = None  # said "Unknown --task_name None" (sweep 19, F9)
  with pytest.raises(cli.FlagError, match="^--task_name is required: one of mnli_matched, "):
    run_classifier.validate(o)


def test_a_prediction_without_model_dir_from_an_unusable_checkpoint_checks_no_labels(tmp_path):
  """Predicting or exporting without --model_dir from a --predict_ckpt that is no checkpoint (a typo'd step, a
  SavedModel): `checkpoint_dir` falls back to the absent --model_dir, and the label check ended in `TypeError:
  expected str ... not NoneType` before the prediction's own line (sweep 32, U7)."""
  o = cli.defaults(run_classifier.define_flags, task_name="csv", do_train=False, do_predict=True,
                   predict_ckpt=str(tmp_path / "ckpt-99"))
  assert run_classifier.checkpoint_dir(o) == (None, "--model_dir")
  run_classifier.check_trained_labels(None, ["neg", "pos"], o)  # no labels recorded: the prediction says its line


def test_the_labels_of_an_export_or_an_hf_model_are_checked(tmp_path):
  """A classifier's labels go with its checkpoints, also where they hold no `checkpoint` state file (an export of
  convert_checkpoint.py --to=tf1, a released checkpoint) and in an HF model (config.json's id2label): predicting
  with --predict_ckpt=<export> named every class wrongly after training with --labels=pos,neg, exit 0."""
  export = tmp_path / "export"
  export.mkdir()
  for name in ("xlnet_model.ckpt.index", "xlnet_model.ckpt.data-00000-of-00001", "xlnet_config.json"):
    shutil.copy(f"tests/testdata/model/ckpt_untied/{name}", export)
  (export / "run_flags.json").write_text(json.dumps({"task_name": "csv", "label_list": ["pos", "neg"]}))
  o = cli.defaults(run_classifier.define_flags, task_name="csv")
  assert run_classifier.trained_labels(str(export))[2] == ["pos", "neg"]
  with pytest.raises(cli.FlagError, match=r"fine-tuned with the labels \['pos', 'neg'\], in that order \(.*"
                                          r"export/run_flags.json\).* Pass --labels=pos,neg, or another "
                                          r"--predict_ckpt"):
    run_classifier.check_trained_labels(str(export), ["neg", "pos"], o, "--predict_ckpt")
  hf = tmp_path / "hf"
  shutil.copytree("tests/testdata/hf/cls_bin", hf)
  config = json.loads((hf / "config.json").read_text())
  (hf / "config.json").write_text(json.dumps(dict(config, id2label={"0": "pos", "1": "neg", "2": "mid"})))
  assert run_classifier.trained_labels(str(hf))[2] == ["pos", "neg", "mid"]
  with pytest.raises(cli.FlagError, match=r"\['pos', 'neg', 'mid'\], in that order \(.*hf/config.json\)"):
    run_classifier.check_trained_labels(str(hf), ["mid", "neg", "pos"], o, "--predict_ckpt")
  run_classifier.check_trained_labels(str(hf), ["pos", "neg", "mid"], o, "--predict_ckpt")
  run_classifier.check_trained_labels(str(hf), ["0", "1", "2"], o, "--predict_ckpt")  # other names: no order
  # Names differing in case only are the same classes: they were taken for other names, relabelled in index order
  # (sweep 33, A2); numbers for names were a TypeError traceback (A8).
  (hf / "config.json").write_text(json.dumps(dict(config, id2label={"0": "POS", "1": "NEG", "2": "Mid"})))
  with pytest.raises(cli.FlagError, match=r"\['POS', 'NEG', 'Mid'\], in that order .* Pass --labels=pos,neg,mid, or"):
    run_classifier.check_trained_labels(str(hf), ["mid", "neg", "pos"], o, "--predict_ckpt")
  run_classifier.check_trained_labels(str(hf), ["pos", "neg", "mid"], o, "--predict_ckpt")
  (hf / "config.json").write_text(json.dumps(dict(config, id2label={"0": "pos", "1": "pos", "2": "mid"})))
  assert run_classifier.trained_labels(str(hf)) == (None, None, None)  # a name twice: none (A10), as the export's
  (hf / "config.json").write_text(json.dumps(dict(config, id2label={"0": 1, "1": 0, "2": 2})))
  with pytest.raises(cli.FlagError, match=r"\['1', '0', '2'\], in that order .* Pass --labels=1,0,2, or"):
    run_classifier.check_trained_labels(str(hf), ["0", "1", "2"], o, "--predict_ckpt")
  (hf / "config.json").write_text(json.dumps(config))  # LABEL_i: no names
  assert run_classifier.trained_labels(str(hf)) == (None, None, None)
  # An HF model's names converted to TF1 (labels_from id2label) are its own: sst-2's 0, 1 may name NEGATIVE,
  # POSITIVE (it was refused, advising --labels, which sst-2 refuses); the task's labels in another order are
  # refused with advice that works.
  named = {"label_list": ["NEGATIVE", "POSITIVE"], "labels_from": "id2label"}
  (export / "run_flags.json").write_text(json.dumps(named))
  sst2 = cli.defaults(run_classifier.define_flags, task_name="sst-2")
  run_classifier.check_trained_labels(str(export), ["0", "1"], sst2, "--predict_ckpt")
  (export / "run_flags.json").write_text(json.dumps({"label_list": ["1", "0"], "labels_from": "id2label"}))
  with pytest.raises(cli.FlagError, match=r"Read the data as --task_name=tsv with the task's columns .* "
                                          r"--labels=1,0, the model's order, or another --predict_ckpt"):
    run_classifier.check_trained_labels(str(export), ["0", "1"], sst2, "--predict_ckpt")


def test_a_glue_or_yelp_split_without_examples_names_its_file(tmp_path):
  """An SST-2 dev.tsv of its header alone: `found no dev examples in --data_dir D`, the file unnamed (GLUE's and
  Yelp-5's processors said no files, as the csv tasks do since sweep 34, S5)."""
  original = "tests/testdata/hf/original_dhead4/ckpt"
  (tmp_path / "dev.tsv").write_text("sentence\tlabel\n")
  (tmp_path / "test.csv").write_text("")
  for task, split, file in (("sst-2", "dev", "dev.tsv"), ("yelp5", "test", "test.csv")):
    o = cli.defaults(run_classifier.define_flags, task_name=task, data_dir=str(tmp_path), do_predict=True,
                     eval_split=split, spiece_model_file=SPM, output_dir=str(tmp_path / "records"),
                     predict_dir=str(tmp_path / "pred"), model_config_path=f"{original}/xlnet_config.json",
                     predict_ckpt=f"{original}/xlnet_model.ckpt")  # the model of the SentencePiece model's 1000 ids
    with pytest.raises(cli.FlagError, match=f"^Task '{task}' found no {split} examples in {tmp_path}/{file}: it holds "
                                            r"no row of one \(a header alone\?\)\."):
      run_classifier.run(o, tf.distribute.get_strategy())
