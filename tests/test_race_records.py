"""RACE TFRecords: the original's names and feature names, the cache, the reader's layout, the goldens' eval inputs."""

import dataclasses
import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from helpers import cache_user
from xlnet_tf import locks
from xlnet_tf.data import tokenization
from xlnet_tf.data.records import ReadConfig
from xlnet_tf.tasks.race import data
from xlnet_tf.tasks.race import records

GOLDEN = "tests/testdata/race"
DATA = os.path.join(GOLDEN, "data")
SPM = os.path.join(GOLDEN, "spm", "spiece.model")


@pytest.fixture(scope="module")
def tokenize_fn():
  return tokenization.make_tokenize_fn(tokenization.load_sentencepiece(SPM), uncased=False)


def test_record_file_names():
  assert records.record_file_name("/x/spiece.model", 512, "train") == "spiece.model.len-512.train.tf_record"
  assert records.record_file_name("/x/spiece.model", 512, "train", high_only=True) == (
      "spiece.model.len-512.train.tf_record")
  assert records.record_file_name("sp.model", 64, "dev") == "sp.model.len-64.dev.tf_record"
  assert records.record_file_name("sp.model", 64, "test", high_only=True) == "high.sp.model.len-64.test.tf_record"
  assert records.record_file_name("sp.model", 64, "dev", middle_only=True) == "middle.sp.model.len-64.dev.tf_record"
  with pytest.raises(ValueError, match="--eval_split"):
    records.record_file_name("sp.model", 64, "valid")


def test_eval_records_equal_the_goldens_head_inputs(tmp_path, tokenize_fn):
  # The goldens' file order (meta.json `file_order`, the original's directory order) is the sorted one.
  config = records.RecordsConfig(data_dir=DATA, spiece_model_file=SPM, output_dir=str(tmp_path), max_seq_length=64,
                                 max_qa_length=16, eval_batch_size=5, sorted_file_order=True)
  info = records.prepare_records(config, "dev", tokenize_fn)
  assert (info.num_real, info.num_padding, info.num_records, info.written) == (8, 2, 10, True)
  assert sorted(os.listdir(tmp_path)) == [".spiece.model.len-64.dev.tf_record.lock",  # held till the process ends
                                          "spiece.model.len-64.dev.tf_record",
                                          "spiece.model.len-64.dev.tf_record.source"]
  read = ReadConfig(batch_size=5, drop_remainder=True, n_token=1200)  # ids checked (1200 pieces): the same batches
  batches = list(records.race_dataset(info.path, 64, read).as_numpy_iterator())
  assert len(batches) == 2
  golden = np.load(os.path.join(GOLDEN, "head", "eval.npz"))
  for key in records.FEATURE_NAMES:
    got = np.concatenate([b[key] for b in batches])
    assert got.dtype == (np.float32 if key == "input_mask" else np.int32), key
    assert got.shape == ((10, 4, 64) if key in ("input_ids", "input_mask", "segment_ids") else (10,)), key
    np.testing.assert_array_equal(got.reshape(golden[key].shape), golden[key], err_msg=key)
  # The reader's [B, 4, L] is the flat [4L] record split per option: option c = positions [c*L, (c+1)*L).
  np.testing.assert_array_equal(batches[0]["input_ids"][1, 2], golden["input_ids"][1, 128:192])


def test_records_hold_the_original_features(tmp_path, tokenize_fn):
  examples = data.get_examples(DATA, "train") + [data.PaddingInputExample()]
  path = str(tmp_path / "r.tf_record")
  assert records.write_records(examples, tokenize_fn, path, 64, 16, fix_option_aliasing=True) == 5
  want = data.convert_examples(examples, tokenize_fn, 64, 16, fix_option_aliasing=True)
  parsed = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
  assert sorted(parsed[0].features.feature) == sorted(records.FEATURE_NAMES)
  for i, example in enumerate(parsed):
    feature = example.features.feature
    assert list(feature["input_ids"].int64_list.value) == want["input_ids"][i].tolist()
    assert list(feature["input_mask"].float_list.value) == want["input_mask"][i].tolist()
    assert list(feature["segment_ids"].int64_list.value) == want["segment_ids"][i].tolist()
    assert list(feature["label_ids"].int64_list.value) == [want["label_ids"][i]]
    assert list(feature["is_real_example"].int64_list.value) == [int(i < 4)]


def test_cache_is_kept_unless_overwritten(tmp_path, tokenize_fn, monkeypatch):
  kwargs = dict(data_dir=DATA, spiece_model_file=SPM, output_dir=str(tmp_path), max_seq_length=64, max_qa_length=16)
  config = records.RecordsConfig(shuffle_seed=3, **kwargs)
  first = records.prepare_records(config, "train", tokenize_fn)
  assert (first.num_real, first.num_padding, first.written) == (4, 0, True)
  mtime = os.stat(first.path).st_mtime_ns
  again = records.prepare_records(config, "train", tokenize_fn)
  assert (again.path, again.num_real, again.written) == (first.path, None, False)
  assert os.stat(first.path).st_mtime_ns == mtime
  whole = open(first.path, "rb").read()  # emptied (a copy cut short): written again, not trained on (sweep 32, U2)
  open(first.path, "wb").close()
  assert records.prepare_records(config, "train", tokenize_fn).written and open(first.path, "rb").read() == whole
  # The seed makes one order: another seed's records, or an unseeded run's, are written again; an unseeded run
  # reuses the records of the same inputs (shuffled anew by each run: any order is one it could have drawn).
  assert records.prepare_records(dataclasses.replace(config, shuffle_seed=4), "train", tokenize_fn).written
  assert records.prepare_records(records.RecordsConfig(**kwargs), "train", tokenize_fn).written
  assert not records.prepare_records(records.RecordsConfig(**kwargs), "train", tokenize_fn).written
  assert records.prepare_records(records.RecordsConfig(uncased=True, **kwargs), "train", tokenize_fn).written  # reused cased before
  assert records.prepare_records(dataclasses.replace(config, overwrite_data=True), "train", tokenize_fn).written
  assert sorted(os.listdir(tmp_path)) == [".spiece.model.len-64.train.tf_record.lock",  # no temporary file left
                                          "spiece.model.len-64.train.tf_record",
                                          "spiece.model.len-64.train.tf_record.source"]
  # Training: shuffled with the seed, repeated forever, full batches.
  d = records.race_dataset(first.path, 64, ReadConfig.training(3, shuffle_buffer=2048, seed=1))
  labels = np.concatenate([b["label_ids"] for b in d.take(4).as_numpy_iterator()])
  assert labels.shape == (12,) and sorted(labels[:4].tolist()) == [0, 0, 1, 3]
  # Another --data_dir (or level, SentencePiece model, setting) under the same cache name: written again (the
  # original kept the first records), then kept for it.
  other = tmp_path / "race_b"
  shutil.copytree(DATA, other)
  (middle,) = [p for p in sorted((other / "train" / "middle").iterdir())][:1]
  article = json.loads(middle.read_text())
  middle.write_text(json.dumps({k: v[:-1] if isinstance(v, list) else v for k, v in article.items()}))  # a question less
  moved = records.prepare_records(records.RecordsConfig(**dict(kwargs, data_dir=str(other))), "train", tokenize_fn)
  assert moved.written and moved.num_real < 4
  assert not records.prepare_records(records.RecordsConfig(**dict(kwargs, data_dir=str(other))), "train",
                                     tokenize_fn).written
  # While another run reads them, neither other inputs nor overwrite_data write them again (`locks.cache_lock`).
  monkeypatch.setattr(locks, "CACHE_LOCK_WAIT_S", 0.2)
  with cache_user.reader(moved.path):
    for config in (records.RecordsConfig(**kwargs), records.RecordsConfig(**dict(kwargs, data_dir=str(other),
                                                                                   overwrite_data=True))):
      with pytest.raises(ValueError, match=re.escape(f"--output_dir {tmp_path} is in use: another run reads its "
                                                     f"cached {moved.path}")):
        records.prepare_records(config, "train", tokenize_fn)


def test_errors(tmp_path, tokenize_fn):
  with pytest.raises(FileNotFoundError, match="does not exist. Write it first"):
    records.race_dataset(str(tmp_path / "none.tf_record"), 64, ReadConfig(batch_size=2, drop_remainder=True))
  with pytest.raises(ValueError, match="needs eval_batch_size"):
    records.prepare_records(records.RecordsConfig(data_dir=DATA, spiece_model_file=SPM, output_dir=str(tmp_path),
                                                  max_seq_length=64, max_qa_length=16), "dev", tokenize_fn)
  with pytest.raises(ValueError, match="--max_qa_length"):
    records.RecordsConfig(data_dir=DATA, spiece_model_file=SPM, output_dir=str(tmp_path), max_seq_length=64,
                          max_qa_length=61, eval_batch_size=2)
  path = str(tmp_path / "r.tf_record")
  records.write_records([data.PaddingInputExample()], tokenize_fn, path, 8, 2)
  with pytest.raises(ValueError, match="batch size must be a positive integer"):
    ReadConfig(batch_size=0, drop_remainder=True)
  with pytest.raises(ValueError, match="--shuffle_buffer must be a positive integer"):
    ReadConfig.training(2, shuffle_buffer=0)
  assert ReadConfig(batch_size=2, shuffle_buffer=0).shuffle_buffer == 0  # Evaluation does not shuffle.
  assert os.listdir(tmp_path) == ["r.tf_record"]


def test_options_cut_alike_by_max_qa_length_are_said(tmp_path, tokenize_fn, caplog):
  """--max_qa_length=1 keeps each question and option's last piece: questions whose four options became one
  sequence were trained and evaluated, exit 0, without a word (sweep 33, C3)."""
  examples = data.get_examples(DATA, "train")
  records.write_records(examples, tokenize_fn, str(tmp_path / "a.tf_record"), 64, 16)
  assert not [r for r in caplog.records if r.levelname == "WARNING"]
  records.write_records(examples, tokenize_fn, str(tmp_path / "b.tf_record"), 64, 1)
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert len(warnings) == 1 and re.match(
      rf"--max_qa_length=1 keeps the last 1 tokens of each question and option: [1-9]\d* of {len(examples)} "
      r"questions in .*b.tf_record have options it cut alike, which no model can tell apart\. Raise --max_qa_length",
      warnings[0]), warnings


def test_dataset_fn_resumes(tmp_path, tokenize_fn):
  path = str(tmp_path / "r.tf_record")
  records.write_records(data.get_examples(DATA, "train"), tokenize_fn, path, 64, 16)
  fn = records.race_dataset_fn(path, 64, 2, shuffle_buffer=8, seed=5)
  full = [b["label_ids"].tolist() for b in fn(None, 0).take(6).as_numpy_iterator()]
  resumed = [b["label_ids"].tolist() for b in fn(None, 2).take(4).as_numpy_iterator()]
  assert resumed == full[2:]
