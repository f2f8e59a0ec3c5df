"""run_squad.py's data flow against the ORIGINAL run_squad.py `main()` (tests/testdata/squad_flow, README.md there):
--do_prepro per proc_id (which examples, the shuffle, the record names and contents), the files --do_train reads,
--do_predict's evaluation record and features cache, the three prediction files and the logged evaluation. The
model is not under test here: training is a stand-in that records the files it is given, and the head is the
goldens' recorded one, looked up by the unique_ids of the records our prediction reads."""

import json
import os

import numpy as np
import pytest

from helpers.example_records import read_records
import cli
import run_start
import run_squad
from xlnet_tf import training
from xlnet_tf.tasks.squad import predict as squad_predict
from xlnet_tf.tasks.squad import records
from xlnet_tf.tasks.squad import task as squad_task

GOLDENS = "tests/testdata/squad_flow"
SQUAD = "tests/testdata/squad"
with open(f"{GOLDENS}/meta.json", encoding="utf-8") as _f:
  META = json.load(_f)
HEAD_KEYS = ("unique_ids", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
             "cls_logits")


class StandInTrainer:
  """Records the training files run_squad.py hands to the loop."""
  data_files = []

  def train(self, dataset_fn, log_fn=print, data_files=None):
    del dataset_fn, log_fn
    self.data_files.append(list(data_files))
    return {}


class RecordedHead:
  """`squad_predict.Inference` with the goldens' head: outputs looked up by the unique_ids of the records read."""
  head = None

  def __init__(self, model, start_n_top=5, end_n_top=5, jit_compile=False):
    del model, jit_compile
    self.start_n_top, self.end_n_top, self.n_token = start_n_top, end_n_top, 1200

  def load(self, path):
    del path

  def run_records(self, dataset, files, batch_flag="--eval_batch_size"):
    del files, batch_flag
    unique_ids = np.concatenate([batch["unique_ids"].numpy() for batch in dataset])
    row = {int(u): r for r, u in enumerate(self.head["unique_ids"])}
    assert sorted(row) == sorted(unique_ids.tolist())
    rows = [row[int(u)] for u in unique_ids]
    return {k: self.head[k][rows] for k in HEAD_KEYS}


@pytest.fixture
def stand_ins(monkeypatch):
  monkeypatch.setattr(run_start, "fine_tuning_trainer", lambda o, *a, **k: (StandInTrainer(), 0, o.train_batch_size,
                                                                       o.train_batch_size))
  monkeypatch.setattr(squad_task, "build_model", lambda *a, **k: None)
  monkeypatch.setattr(squad_predict, "Inference", RecordedHead)
  monkeypatch.setattr(run_squad, "_predict_checkpoints",
                      lambda o, xlnet_config, log_fn: [(None, "stand-in")])  # no checkpoint


@pytest.mark.parametrize("name", sorted(META["settings"]))
def test_flow_equals_the_originals(name, stand_ins, tmp_path):
  golden = META["settings"][name]
  with np.load(f"{GOLDENS}/{name}.npz") as f:
    arrays = {k: f[k] for k in f.files}
  flags = golden["flags"]
  common = dict(spiece_model_file=f"{SQUAD}/spm/spiece.model", output_dir=str(tmp_path / "out"),
                max_seq_length=flags["max_seq_length"], max_query_length=flags["max_query_length"],
                doc_stride=flags["doc_stride"], uncased=flags["uncased"], seed=golden["seed"])
  strategy = training.make_strategy("one_device")
  for proc_id in golden["proc_ids"]:
    o = cli.defaults(run_squad.define_flags, do_prepro=True, train_file=f"{SQUAD}/data/train-v2.0.json",
                     num_proc=flags["num_proc"], proc_id=proc_id, **common)
    run_squad.run(o, strategy, log_fn=lambda line: None)
  # The original's files, each training record with its fingerprint (`records.train_fingerprint`).
  assert sorted(os.listdir(tmp_path / "out")) == sorted(golden["prepro_files"] +
                                                        [f + ".source" for f in golden["prepro_files"]])

  base = META["base_flags"]
  o = cli.defaults(run_squad.define_flags, do_train=True, do_predict=True, predict_file=f"{SQUAD}/data/dev-v2.0.json",
                   model_config_path=f"{SQUAD}/ckpt/xlnet_config.json", model_dir=str(tmp_path / "model"),
                   predict_dir=str(tmp_path / "pred"), train_batch_size=base["train_batch_size"],
                   **{k: flags.get(k, base[k]) for k in ("predict_batch_size", "n_best_size", "start_n_top",
                                                         "end_n_top", "max_answer_length")}, **common)
  RecordedHead.head = {k: arrays[f"head/{k}"] for k in HEAD_KEYS}
  StandInTrainer.data_files = []
  lines = []
  out = run_squad.run(o, strategy, log_fn=lines.append)

  # The files --do_train reads: the original's glob, every proc_id's record.
  ((pattern, files),) = golden["train_glob"]
  assert records.train_record_glob(o.spiece_model_file, o.max_seq_length, o.max_query_length) == pattern
  assert StandInTrainer.data_files == [[str(tmp_path / "out" / f) for f in files]]
  # output_dir: the original's files, with the evaluation features as an npz (+ its fingerprint and lock) where
  # the original pickles them, and the evaluation record's fingerprint.
  (pkl,) = [f for f in golden["output_dir"] if f.endswith(".pkl")]
  npz = pkl[:-len(".pkl")] + ".npz"
  eval_record = records.eval_record_name(o.spiece_model_file, o.max_seq_length, o.max_query_length)
  assert sorted(os.listdir(tmp_path / "out")) == sorted(
      [f for f in golden["output_dir"] if f != pkl] + [npz, npz + ".source", f".{npz}.lock", eval_record + ".source"] +
      [f + ".source" for f in golden["prepro_files"]])
  for f, want in golden["records"].items():
    values, kinds = read_records(str(tmp_path / "out" / f))
    assert kinds == want["kinds"], f
    assert sorted(values) == sorted(want["kinds"] or {}), f
    for k, v in values.items():
      np.testing.assert_array_equal(v, arrays[f"{f}/{k}"], err_msg=f"{f} {k}")
  with np.load(tmp_path / "out" / npz) as cached:
    for k in [k[len("pkl/"):] for k in arrays if k.startswith("pkl/")]:
      np.testing.assert_array_equal(cached[k], arrays[f"pkl/{k}"], err_msg=k)
  # predict_dir: the three files, byte for byte; the evaluation returned and logged.
  assert sorted(os.listdir(tmp_path / "pred")) == golden["predict_dir"]
  for f in golden["predict_dir"]:
    with open(tmp_path / "pred" / f, "rb") as got, open(f"{GOLDENS}/{name}/{f}", "rb") as want:
      assert got.read() == want.read(), f
  (result,) = out["predict"]
  assert {k: result[k] for k in golden["returned"]} == golden["returned"]
  assert list(result)[:len(golden["returned"])] == list(golden["returned"])
  (want_line,) = golden["result_lines"]
  assert [line for line in lines if line.startswith("Result | ")] == [
      want_line + "path stand-in | predict_dir " + str(tmp_path / "pred") + " | "]  # a stand-in: no step
  # Predicting again reads the cached features and writes the same files, as the original from its pickle.
  o.do_train = False
  written = os.stat(tmp_path / "out" / npz).st_mtime_ns
  run_squad.run(o, strategy, log_fn=lines.append)
  assert os.stat(tmp_path / "out" / npz).st_mtime_ns == written
  for f in golden["predict_dir"]:
    with open(tmp_path / "pred" / f, "rb") as got, open(f"{GOLDENS}/{name}/{f}", "rb") as want:
      assert got.read() == want.read(), f
