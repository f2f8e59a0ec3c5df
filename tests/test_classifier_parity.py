"""run_classifier.py's data path against the ORIGINAL's (tests/testdata/classifier, generate_classifier_goldens.py):
processors, example order, truncation, ids, padding, label ids, eval padding, record file names and feature kinds."""

import hashlib
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from helpers.example_records import FEATURES, read_records
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.classifier import data as classifier_data
from xlnet_tf.tasks.classifier import features as classifier_features

GOLDEN = "tests/testdata/classifier"
META = json.load(open(os.path.join(GOLDEN, "meta.json"), encoding="utf-8"))
SPM = os.path.join("tests/testdata", META["spm"])


@pytest.fixture(scope="module")
def sp_model():
  return tokenization.load_sentencepiece(SPM)


def example_key(example):
  """`generate_classifier_goldens.example_key`: 12 hex digits of (text_a, text_b, label), or `<pad>`."""
  if not hasattr(example, "text_a"):
    return "<pad>"
  text = json.dumps([example.text_a, example.text_b, example.label])
  return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def write_ours(config, sp_model, out_dir):
  """Our records of one configuration, made as run_classifier.py makes them: {kind: (file name, example keys)}."""
  flags = dict(META["base_flags"], **config["flags"])
  data_dir = os.path.join(GOLDEN, config["data_dir"])
  processor = classifier_data.get_processor(config["task_name"])
  label_list = classifier_data.label_list_for(processor, processor.is_regression)
  tokenize_fn = tokenization.make_tokenize_fn(sp_model, flags["uncased"])
  L = flags["max_seq_length"]
  written = {}

  def write(examples, kind, num_passes=1):
    name = classifier_features.record_file_name(SPM, L, kind, flags["eval_split"])
    classifier_features.file_based_convert_examples_to_features(examples, label_list, L, tokenize_fn,
                                                                os.path.join(out_dir, name), num_passes=num_passes)
    written[kind] = (name, [example_key(e) for e in examples] * num_passes)

  if flags["do_train"]:
    train = processor.get_train_examples(data_dir)
    np.random.RandomState(config["np_seed"]).shuffle(train)  # run_classifier's shuffle with --seed=np_seed.
    write(train, "train", flags["num_passes"])
  eval_examples = processor.get_eval_examples(data_dir, flags["eval_split"])
  if flags["do_eval"]:
    write(classifier_features.pad_examples(eval_examples, flags["eval_batch_size"]), "eval")
  if flags["do_predict"]:
    write(classifier_features.predict_examples(eval_examples, flags["eval_batch_size"], flags["do_eval"]), "predict")
  return written


@pytest.fixture
def sorted_listdir(monkeypatch):
  """Directories list sorted by name, as they did for the goldens (the original lists in the file system's order)."""
  listdir = tf.io.gfile.listdir
  monkeypatch.setattr(tf.io.gfile, "listdir", lambda path: sorted(listdir(path)))


@pytest.mark.usefixtures("sorted_listdir")
@pytest.mark.parametrize("name", sorted(META["configs"]))
def test_records_equal_the_original(name, sp_model, tmp_path):  # pylint: disable=redefined-outer-name
  config = META["configs"][name]
  golden = np.load(os.path.join(GOLDEN, f"{name}.npz"))
  written = write_ours(config, sp_model, str(tmp_path))
  assert sorted(written) == sorted(config["files"])
  assert sorted(os.path.basename(p) for p in tf.io.gfile.glob(os.path.join(tmp_path, "*.tf_record"))) == sorted(
      f["name"] for f in config["files"].values())
  for kind, expected in config["files"].items():
    file_name, keys = written[kind]
    assert file_name == expected["name"]
    assert keys == expected["examples"], f"{kind}: the examples (or their order) differ"
    arrays, kinds = read_records(os.path.join(tmp_path, file_name), FEATURES)
    assert kinds == expected["feature_kinds"], kind
    for k in FEATURES:
      want = golden[f"{kind}_{k}"]
      assert arrays[k].shape == want.shape, (kind, k)
      np.testing.assert_array_equal(arrays[k], want, err_msg=f"{kind} {k}")
