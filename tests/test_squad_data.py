"""SQuAD reading, features and records against the original's goldens (tests/testdata/squad, see copy_goldens.py)."""

import json
import logging
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from helpers import cache_user
from xlnet_tf import locks
from xlnet_tf.data import records as records_lib
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.squad import data
from xlnet_tf.tasks.squad import examples as squad_examples
from xlnet_tf.tasks.squad import records

TESTDATA = "tests/testdata/squad"
SETTINGS = {  # tag: (max_seq_length, max_query_length, doc_stride, uncased), as the goldens' meta.json.
    "L64_Q16_S24_cased": (64, 16, 24, False),
    "L64_Q16_S24_uncased": (64, 16, 24, True),
    "L48_Q8_S40_cased": (48, 8, 40, False),
    "L48_Q8_S40_uncased": (48, 8, 40, True),
}
DROPPED = ["v07_mandb", "v07_translator"]  # Hangul paragraph: the original's MISMATCH DETECTED.


@pytest.fixture(scope="module")
def sp_model():
  return tokenization.load_sentencepiece(f"{TESTDATA}/spm/spiece.model")


@pytest.fixture(scope="module")
def meta():
  with open(f"{TESTDATA}/meta.json", encoding="utf-8") as f:
    return {s["tag"]: s for s in json.load(f)["settings"]}


def _opts(max_seq_length, doc_stride, max_query_length, uncased=False):
  """`FeatureOptions` in the order of the original's `convert_examples_to_features` arguments."""
  return data.FeatureOptions(max_seq_length=max_seq_length, doc_stride=doc_stride, max_query_length=max_query_length,
                             uncased=uncased)


def _examples(mode):
  return squad_examples.read_squad_examples(f"{TESTDATA}/data/{'train' if mode == 'train' else 'dev'}-v2.0.json",
                                  is_training=mode == "train")


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("tag", list(SETTINGS))
def test_features_equal_goldens(sp_model, meta, tag, mode):
  max_seq_length, max_query_length, doc_stride, uncased = SETTINGS[tag]
  features, stats = data.build_features(_examples(mode), sp_model,
                                        _opts(max_seq_length, doc_stride, max_query_length, uncased),
                                        is_training=mode == "train")
  got = records.features_to_arrays(features, max_seq_length)
  with np.load(f"{TESTDATA}/features/{tag}_{mode}.npz") as golden:
    assert sorted(golden.files) == sorted(got)
    for key in golden.files:
      assert golden[key].dtype == got[key].dtype, key
      np.testing.assert_array_equal(got[key], golden[key], err_msg=f"{tag} {mode} {key}")
  want = meta[tag][mode]
  assert stats.num_examples == want["examples"] == 38
  assert stats.num_features == want["features"]
  assert stats.num_neg == want["impossible_features"]
  assert stats.queries_truncated == want["queries_truncated"]
  assert stats.dropped_mismatch == want["dropped_mismatch"] == DROPPED


def test_shuffled_order(sp_model):
  examples = _examples("train")
  want, _ = data.build_features(examples, sp_model, _opts(64, 24, 16), is_training=True)
  order = np.random.default_rng(0).permutation(len(examples))
  got, _ = data.build_features([examples[k] for k in order], sp_model, _opts(64, 24, 16), is_training=True)
  ignore = ("unique_id", "source_example")

  def by_question(features, names):
    return {(names[f.source_example], f.doc_span_index): {k: v for k, v in vars(f).items() if k not in ignore}
            for f in features}

  assert by_question(got, [examples[k].qas_id for k in order]) == by_question(want, [e.qas_id for e in examples])
  assert [f.unique_id for f in got] == list(range(data.FIRST_UNIQUE_ID, data.FIRST_UNIQUE_ID + len(got)))


def test_a_hand_built_answer_not_at_its_start_is_refused(sp_model):
  """SquadExample("b", "when?", P, "1999", start_position=0), built in code: "The" (the text at 0) trained as the
  answer; the JSON reader checks this, the features did not (sweep 36)."""
  paragraph = "The film came out in 1999 and did well."
  example = squad_examples.SquadExample("b", "When?", paragraph, orig_answer_text="1999", start_position=0)
  with pytest.raises(ValueError, match=r"^Example b: its answer '1999' is not the text at start_position 0 of its "
                                       r"paragraph; fix start_position or orig_answer_text\.$"):
    data.build_features([example], sp_model, _opts(64, 24, 16), is_training=True)
  example.start_position = paragraph.index("1999")
  features, _ = data.build_features([example], sp_model, _opts(64, 24, 16), is_training=True)
  assert len(features) == 1 and features[0].start_position != features[0].cls_index


def test_mismatch_drops_are_logged(sp_model, caplog):
  with caplog.at_level(logging.WARNING):
    data.build_features(_examples("eval"), sp_model, _opts(64, 24, 16), is_training=False)
  text = caplog.text
  assert "Dropped example v07_mandb" in text and "Dropped example v07_translator" in text
  assert "2 of 38 examples were dropped" in text


def test_read_examples_train_and_eval():
  train = _examples("train")
  assert len(train) == 38
  first = train[0]
  assert (first.qas_id, first.orig_answer_text, first.start_position, first.is_impossible) == (
      "v00_start", "The GNU General Public License", 0, False)
  impossible = [e for e in train if e.is_impossible]
  assert len(impossible) == 11 and all(e.orig_answer_text == "" and e.start_position == -1 for e in impossible)
  dev = _examples("eval")
  assert all(e.orig_answer_text is None and e.start_position is None and not e.is_impossible for e in dev)


def _write_json(tmp_path, obj, name="squad.json"):
  path = tmp_path / name
  path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
  return str(path)


def _squad(qas, context="The cat sat on the mat."):
  return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_squad_v1_without_is_impossible(tmp_path):
  path = _write_json(tmp_path, _squad([{"id": "q1", "question": "Where?", "answers": [
      {"text": "the mat", "answer_start": 15}]}]))
  (example,) = squad_examples.read_squad_examples(path, is_training=True)
  assert (example.is_impossible, example.orig_answer_text, example.start_position) == (False, "the mat", 15)


# HuggingFace datasets' squad layout: "every answer needs a 'text' string" in evaluation (sweep 32, U20)
HF_ANSWERS = (r"qas\[0\]: question 'q1': 'answers' is \{\"text\": \[\"the mat\"\], \"answer_start\": \[15\]\} \(the "
              r"HuggingFace datasets layout: lists of texts and starts\), not SQuAD's list of one \{\"text\": \.\.\., "
              r"\"answer_start\": \.\.\.\} object per answer\. Convert the file to SQuAD's layout\.$")


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    (_squad([{"id": "q1", "question": "Where\ud83d?", "answers": []}]),  # valid JSON, a traceback (sweep 23, B1)
     r"is not text: data\[0\].paragraphs\[0\].qas\[0\].question holds a lone surrogate \(\\ud83d at character 5\)"),
    ({"data": {"paragraphs": []}}, "expected an object with a 'data' list"),
    (_squad([{"id": "q1", "question": "Where?", "answers": [{"text": "the hat", "answer_start": 15}]}]),
     "is not the text at answer_start 15"),
    (_squad([{"id": "q1", "question": "Where?", "answers": [{"text": "the mat", "answer_start": 99}]}]),
     "is not the text at answer_start 99"),
    (_squad([{"id": "q1", "question": "Where?", "answers": []}]),  # a SQuAD 2.0 file without is_impossible (sweep 28)
     r"needs exactly 1 answer, it has 0 and no is_impossible: true\. .* or mark an unanswerable question "
     r"\"is_impossible\": true \(SQuAD 2\.0\)\.$"),
    (_squad([{"id": "q1", "question": "Where?", "answers": [{"text": "a", "answer_start": 0}] * 2}]),
     r"needs exactly 1 answer, it has 2\. Use a training file \(dev files with several answers are read with "
     r"is_training=False\)\.$"),
    (_squad([{"id": "q1", "question": "Where?", "is_impossible": "no", "answers": []}]), "must be true or false"),
    (_squad([{"question": "Where?", "answers": []}]), "'id'"),
    (_squad([{"id": "q1", "question": "Where?", "answers": {"text": ["the mat"], "answer_start": [15]}}]),
     HF_ANSWERS),  # "needs exactly 1 answer, it has {...}" (sweep 32, U20)
])
def test_bad_input_is_one_line_naming_the_file(tmp_path, content, message):
  path = _write_json(tmp_path, content)
  with pytest.raises(ValueError, match=message) as info:
    squad_examples.read_squad_examples(path, is_training=True)
  assert path in str(info.value) and "\n" not in str(info.value)


def test_a_file_with_a_byte_order_mark_is_read(tmp_path):
  """A SQuAD file saved with a UTF-8 byte-order mark was refused as not JSON; RACE's were read (sweep 23, C9)."""
  path = tmp_path / "bom.json"
  path.write_text("\ufeff" + json.dumps(_squad([{"id": "q1", "question": "Where?", "answers": [
      {"text": "the mat", "answer_start": 15}]}])), encoding="utf-8")
  assert [e.qas_id for e in squad_examples.read_squad_examples(str(path), is_training=True)] == ["q1"]


def test_an_empty_question_is_read_and_said(tmp_path, caplog):
  """A blank question is read as one of no words, as the original reads it; it was read without a word (sweep 33,
  C8)."""
  answer = {"text": "the mat", "answer_start": 15}
  path = _write_json(tmp_path, _squad([{"id": "q1", "question": "Where?", "answers": [answer]},
                                       {"id": "q2", "question": " ", "answers": [answer]}]))
  with caplog.at_level("WARNING"):
    assert [e.qas_id for e in squad_examples.read_squad_examples(path, is_training=True)] == ["q1", "q2"]
  assert f"{path}: 1 of 2 questions are empty (id 'q2' first): they are read as questions of no words" in caplog.text


def test_dev_file_in_training_mode_is_rejected():
  with pytest.raises(ValueError, match="exactly 1 answer"):
    squad_examples.read_squad_examples(f"{TESTDATA}/data/dev-v2.0.json", is_training=True)


def test_missing_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="does not exist"):
    squad_examples.read_squad_examples(str(tmp_path / "nope.json"), is_training=False)


def test_a_file_without_answers_is_predicted_without_evaluation(tmp_path):
  path = _write_json(tmp_path, _squad([{"id": "q1", "question": "Where?"}, {"id": "q2", "question": "Who?"}]))
  assert len(squad_examples.read_squad_examples(path, is_training=False)) == 2
  assert not squad_examples.has_answers(squad_examples.load_squad_data(path))


def test_evaluation_ignores_answers(tmp_path):
  path = _write_json(tmp_path, _squad([{"id": "q1", "question": "Where?", "answers": [
      {"text": "the hat", "answer_start": 3}, {"text": "x", "answer_start": 0}]}]))
  (example,) = squad_examples.read_squad_examples(path, is_training=False)
  assert example.orig_answer_text is None


@pytest.mark.parametrize("qas, message", [
    ([{"id": "q1", "question": "Where?", "answers": [{"answer_start": 15}]}],
     r"data\[0\]\.paragraphs\[0\]\.qas\[0\]: question 'q1': every answer needs a 'text' string"),
    ([{"id": "q1", "question": "Where?", "answers": [{"text": "the mat", "answer_start": 15}]},
      {"id": "q2", "question": "Who?", "answers": []}, {"id": "q1", "question": "What?", "answers": []}],
     r"data\[0\]\.paragraphs\[0\]\.qas\[2\]: question id 'q1' is also the id of data\[0\]\.paragraphs\[0\]\.qas\[0\]: "
     r"predictions are keyed by id, so one of the two would be lost\. Give each question its own id\.$"),
    ([{"id": "q1", "question": "Where?", "answers": [{"text": "the mat", "answer_start": 15}]},
      {"id": "q2", "question": "Who?", "is_impossible": True}],
     r"qas\[1\]: question 'q2' has no 'answers' list, which the evaluation reads for every question of a file that "
     r"has answers"),
    ([{"id": 1.0, "question": "Where?", "answers": []}, {"id": True, "question": "Who?", "answers": []}],
     r"qas\[0\]: question id 1\.0 is a float: predictions are keyed by id, and ids must be strings \(as SQuAD's\) or "
     r"integers\. Fix the file\.$"),  # 1.0 and true passed as '1.0' and 'True', then were one key: a question lost
    ([{"id": "q1", "question": "Where?", "answers": {"text": ["the mat"], "answer_start": [15]}}], HF_ANSWERS),
])
def test_evaluation_needs_answer_texts_and_distinct_ids(tmp_path, qas, message):
  """What the evaluation reads from a file to predict: an answer's text (else a KeyError after the model ran), and
  ids that differ (predictions.json is keyed by id: a second question of the same id would silently replace the
  first's prediction, as in the original)."""
  path = _write_json(tmp_path, _squad(qas))
  with pytest.raises(ValueError, match=message) as info:
    squad_examples.read_squad_examples(path, is_training=False)
  assert str(info.value).startswith(f"SQuAD file {path}: ") and "\n" not in str(info.value)


@pytest.mark.parametrize("kwargs, flag", [
    (dict(max_seq_length=19, max_query_length=16, doc_stride=24), "max_seq_length"),
    (dict(max_seq_length=64, max_query_length=16, doc_stride=0), "doc_stride"),
    (dict(max_seq_length=64, max_query_length=-1, doc_stride=8), "max_query_length"),
    (dict(max_seq_length=64, max_query_length=0, doc_stride=8), "max_query_length"),  # every question cut away
    (dict(max_seq_length=64.0, max_query_length=16, doc_stride=8), "max_seq_length"),
])
def test_option_errors_name_the_flag(kwargs, flag):
  with pytest.raises(ValueError, match=f"--{flag}") as info:
    data.FeatureOptions(**kwargs)
  assert "\n" not in str(info.value)


def test_non_overlapping_windows_warn(caplog):
  with caplog.at_level(logging.WARNING):
    data.check_options(48, 8, 40)
  assert "windows do not overlap" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    data.check_options(64, 16, 24)
  assert "overlap" not in caplog.text


def test_doc_spans_and_max_context_by_hand():
  # 10 tokens, windows of 6, stride 3: [0,6), [3,9), [6,10). Token 4: span 0 scores min(4,1)+.06 = 1.06, span 1
  # min(1,4)+.06 = 1.06: tie, the earlier span wins. Token 5: 0.06 vs min(2,3)+.06 = 2.06: span 1. Token 7:
  # span 1 min(4,1)+.06 = 1.06, span 2 min(1,2)+.04 = 1.04: the longer span wins. Token 8: .06 vs 1.04: span 2.
  spans = data.doc_spans(10, 6, 3)
  assert spans == [(0, 6), (3, 6), (6, 4)]
  assert data.max_context_spans(spans, 10) == [0, 0, 0, 0, 0, 1, 1, 1, 2, 2]
  assert data.doc_spans(10, 6, 8) == [(0, 6), (6, 4)]  # The shift is capped at the window: no token is skipped.
  assert data.doc_spans(3, 6, 2) == [(0, 3)]


def test_feature_layout_by_hand(sp_model):
  example = squad_examples.SquadExample("q", "Who?", "Alice met Bob.", "Bob", 10, False)
  (feature,), _ = data.build_features([example], sp_model, _opts(24, 8, 8), is_training=True)
  w, q = feature.paragraph_len, feature.cls_index - feature.paragraph_len - 2
  ids = feature.input_ids
  assert ids[w] == tokenization.SEP_ID and ids[w + q + 1] == tokenization.SEP_ID
  assert ids[feature.cls_index] == tokenization.CLS_ID and set(ids[feature.cls_index + 1:]) == {0}
  assert feature.segment_ids == [0] * (w + 1) + [1] * (q + 1) + [2] + [3] * (24 - w - q - 3)
  assert feature.p_mask == [0.0] * w + [1.0] * (q + 2) + [0.0] + [1.0] * (24 - w - q - 3)
  assert feature.input_mask == [0.0] * (w + q + 3) + [1.0] * (24 - w - q - 3)
  assert example.paragraph_text[feature.tok_start_to_orig_index[feature.start_position]:
                                feature.tok_end_to_orig_index[feature.end_position] + 1].strip() == "Bob"
  assert feature.unique_id == data.FIRST_UNIQUE_ID and feature.example_index is None and not feature.is_impossible


def _read_all(path, seq_length, is_training):
  """Every record of one file, in file order, as `squad_dataset` decodes them (training: without the shuffle)."""
  if not is_training:
    d = records.squad_dataset(path, seq_length, records_lib.ReadConfig(batch_size=1000, n_token=1200))  # ids checked
    return {k: v.numpy() for k, v in next(iter(d)).items()}
  parsed = tf.io.parse_example(next(iter(tf.data.TFRecordDataset(path).batch(1000))),
                               records.name_to_features(seq_length, True))
  return {k: (tf.cast(v, tf.int32) if v.dtype == tf.int64 else v).numpy() for k, v in parsed.items()}


@pytest.mark.parametrize("is_training", [True, False])
def test_records_round_trip(sp_model, tmp_path, is_training):
  features, _ = data.build_features(_examples("train" if is_training else "eval"), sp_model, _opts(64, 24, 16),
                                    is_training=is_training)
  path = str(tmp_path / "out[1].tf_record")  # a name that reads as a glob pattern is read as the name it is
  with records.FeatureWriter(path, is_training) as writer:
    for f in features:
      writer.process_feature(f)
  assert writer.num_features == len(features) == 316
  assert os.listdir(tmp_path) == ["out[1].tf_record"]
  got = _read_all(path, 64, is_training)
  want = records.features_to_arrays(features, 64)
  np.testing.assert_array_equal(got["unique_ids"], want["unique_id"])  # In file order.
  names = {"unique_ids": "unique_id", "input_ids": "input_ids", "input_mask": "input_mask", "p_mask": "p_mask",
           "segment_ids": "segment_ids", "cls_index": "cls_index"}
  if is_training:
    names.update(start_positions="start_position", end_positions="end_position", is_impossible="is_impossible")
  assert sorted(got) == sorted(names)
  for key, field in names.items():
    assert got[key].dtype == (np.float32 if key in ("input_mask", "p_mask", "is_impossible") else np.int32), key
    np.testing.assert_array_equal(got[key], want[field].astype(got[key].dtype), err_msg=key)


def test_feature_writer_leaves_nothing_on_error(tmp_path):
  with pytest.raises(RuntimeError):
    with records.FeatureWriter(str(tmp_path / "x.tf_record"), True):
      raise RuntimeError("boom")
  assert not os.listdir(tmp_path)


def test_training_dataset_repeats_and_shuffles(sp_model, tmp_path):
  features, _ = data.build_features(_examples("train")[:3], sp_model, _opts(64, 24, 16), is_training=True)
  for k in range(2):
    with records.FeatureWriter(str(tmp_path / f"spiece.model.{k}.slen-64.qlen-16.train.tf_record"), True) as w:
      for f in features[k::2]:
        w.process_feature(f)
  d = records.squad_dataset(str(tmp_path / records.train_record_glob("spiece.model", 64, 16)), 64,
                            records_lib.ReadConfig.training(len(features), shuffle_buffer=100, seed=3))
  batches = list(d.take(10))
  assert all(b["start_positions"].shape == (len(features),) and b["is_impossible"].dtype == tf.float32
             for b in batches)
  ids = np.concatenate([b["unique_ids"].numpy() for b in batches]).tolist()
  assert set(ids) == {f.unique_id for f in features}  # Both files, repeated.
  assert ids[:len(features)] != sorted(ids[:len(features)])  # Shuffled (seeded: deterministic).


def test_one_training_file_reads_every_feature_once_an_epoch(sp_model, tmp_path):
  """One record file (--num_proc=1, the default) is shuffled, then repeated, as the original's one-file path: each
  epoch is every feature once. Ours read it as several files (repeat, then a record shuffle), and the buffer mixed
  the next epoch's start into each one (faith 18, B1: about 750 of 2048 features missed an epoch)."""
  features, _ = data.build_features(_examples("train"), sp_model, _opts(64, 24, 16), is_training=True)
  path = str(tmp_path / "spiece.model.0.slen-64.qlen-16.train.tf_record")
  with records.FeatureWriter(path, True) as w:
    for f in features:
      w.process_feature(f)
  n = len(features)
  d = records.squad_dataset(path, 64, records_lib.ReadConfig.training(1, shuffle_buffer=2048, seed=3))
  ids = [int(b["unique_ids"][0]) for b in d.take(3 * n)]
  for epoch in range(3):
    assert sorted(ids[epoch * n:(epoch + 1) * n]) == sorted(f.unique_id for f in features), epoch
  assert ids[:n] != ids[n:2 * n] and ids[:n] != sorted(ids[:n])  # reshuffled each epoch


@pytest.mark.parametrize("num_files, pipelines", [(4, 2), (3, 4)])
def test_input_pipelines_read_apart(sp_model, tmp_path, num_files, pipelines):
  """Several input pipelines (workers, TPU hosts) without a seed: each read every file in its own random order and
  sharded that, so their shares overlapped and about a third of the features went unread an epoch (faith 19, B1).
  Each reads its own files now (as the original's hosts), or, with fewer files than pipelines, its shard of them
  in file order."""
  features, _ = data.build_features(_examples("train"), sp_model, _opts(64, 24, 16), is_training=True)
  for k in range(num_files):
    with records.FeatureWriter(str(tmp_path / f"spiece.model.{k}.slen-64.qlen-16.train.tf_record"), True) as w:
      for f in features[k::num_files]:
        w.process_feature(f)
  read = records_lib.ReadConfig.training(1, shuffle_buffer=1, seed=None)  # a buffer of 1: who reads what
  shares = []
  for pipe in range(pipelines):
    d = records.squad_dataset(str(tmp_path / records.train_record_glob("spiece.model", 64, 16)), 64, read,
                              tf.distribute.InputContext(pipelines, pipe, pipelines))
    shares.append({int(b["unique_ids"][0]) for b in d.take(3 * len(features) // pipelines)})
  assert sum(map(len, shares)) == len(set().union(*shares)) == len(features)  # apart, and every feature read


def test_dataset_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="matches no file"):
    records.squad_dataset(str(tmp_path / "*.tf_record"), 64, records_lib.ReadConfig(batch_size=8))


def test_record_names():
  assert records.train_record_name("/m/spiece.model", 3, 512, 64) == "spiece.model.3.slen-512.qlen-64.train.tf_record"
  assert records.train_record_glob("spiece.model", 512, 64) == "spiece.model.*.slen-512.qlen-64.train.tf_record"
  assert records.eval_record_name("gs://b/spiece.model", 512, 64) == "spiece.model.slen-512.qlen-64.eval.tf_record"
  assert records.eval_features_name("spiece.model", 512, 64) == "spiece.model.slen-512.qlen-64.eval.features.npz"


def test_a_training_record_fingerprint_that_cannot_be_read_is_named(tmp_path):
  """A training record's `.source` that is not UTF-8, a directory or says no num_proc: one line naming it (a bare
  codec or errno line before: sweep 27, U4); none: the original's record, read by its name."""
  record = str(tmp_path / "spiece.model.0.slen-64.qlen-16.train.tf_record")
  assert records.recorded_fingerprint(record) is None
  with open(record + ".source", "w", encoding="utf-8") as f:
    f.write("abc num_proc=2\n")
  assert records.recorded_fingerprint(record) == ("abc", 2)
  for damage in (b"\xff\xfe num_proc=2", b"abc", None):
    os.remove(record + ".source")
    if damage is None:
      os.mkdir(record + ".source")
    else:
      with open(record + ".source", "wb") as f:
        f.write(damage)
    with pytest.raises(ValueError, match=rf"^{re.escape(record)}.source, the fingerprint of the training record "
                                         r"beside it, cannot be read.*\. Delete it \(the record is then read by its "
                                         r"name alone, as the original's\), or delete both and rerun "
                                         r"--do_prepro=True\.$"):
      records.recorded_fingerprint(record)
  with open(record, "wb") as f:  # a record cut at a record boundary trained on part of the data (sweep 32, U2)
    f.write(b"x" * 10)
  os.rmdir(record + ".source")
  with open(record + ".source", "w", encoding="utf-8") as f:
    f.write("abc num_proc=2\nbytes=20\n")
  with pytest.raises(ValueError, match=rf"^The SQuAD training record {re.escape(record)} holds 10 bytes, but 20 were "
                                       r"written: it was cut short or changed since\. Delete it and rerun "
                                       r"--do_prepro=True for its --proc_id \(2 processes in all\)\.$"):
    records.recorded_fingerprint(record)
  with open(record, "ab") as f:
    f.write(b"x" * 10)
  assert records.recorded_fingerprint(record) == ("abc", 2)


def test_arrays_round_trip(sp_model):
  for mode in ("train", "eval"):
    features, _ = data.build_features(_examples(mode)[:6], sp_model, _opts(48, 40, 8), is_training=mode == "train")
    assert records.features_from_arrays(records.features_to_arrays(features, 48)) == features


def test_prepare_eval_features_caches(sp_model, tmp_path, caplog, monkeypatch):
  args = (f"{TESTDATA}/data/dev-v2.0.json", sp_model, f"{TESTDATA}/spm/spiece.model", str(tmp_path),
          _opts(64, 24, 16))
  examples, features, record, stats = records.prepare_eval_features(*args)
  assert stats.num_features == len(features) == 316 and len(examples) == 38
  npz = "spiece.model.slen-64.qlen-16.eval.features.npz"
  tf_record = "spiece.model.slen-64.qlen-16.eval.tf_record"
  assert sorted(os.listdir(tmp_path)) == [f".{npz}.lock", npz, npz + ".source",  # the lock: `locks.cache_lock`
                                          tf_record, tf_record + ".source"]
  _, cached, record2, stats2 = records.prepare_eval_features(*args)
  assert stats2 is None and record2 == record and cached == features
  written = (tmp_path / tf_record).read_bytes()  # cut at a record boundary: it served a part, then "No head result
  (tmp_path / tf_record).write_bytes(written[:12 + int.from_bytes(written[:8], "little") + 4])  # for feature N"
  assert records.prepare_eval_features(*args)[3] is not None  # built again (sweep 32, U20)
  assert (tmp_path / tf_record).read_bytes() == written
  _, _, _, stats3 = records.prepare_eval_features(*args, overwrite_data=True)
  assert stats3 is not None
  # Another file to predict under the same cache names: written again (the original reused the first file's
  # features for it: wrong answers under the new file's ids).
  dev = json.load(open(args[0], encoding="utf-8"))
  other = tmp_path / "other.json"
  other.write_text(json.dumps(dict(dev, data=dev["data"][:1])), encoding="utf-8")
  examples4, features4, _, stats4 = records.prepare_eval_features(str(other), *args[1:])
  assert stats4 is not None and len(examples4) < len(examples)
  assert max(f.example_index for f in features4) == len(examples4) - 1
  assert "made from other inputs or settings" in caplog.text
  # A cache without its fingerprint (the original's, or an earlier version's) is reused by its name, as there.
  for name in (npz, tf_record):
    os.remove(tmp_path / (name + ".source"))
  _, cached5, _, stats5 = records.prepare_eval_features(*args)
  assert stats5 is None and cached5 == features4
  # A rebuild that fails after the record (a full disk at the features file) leaves no features file: the next run
  # builds the pair again, never pairs one file's record with another's features.
  def full_disk(*unused):
    raise OSError("File too large")
  with monkeypatch.context() as m:
    m.setattr(records, "save_eval_features", full_disk)
    with pytest.raises(OSError):
      records.prepare_eval_features(*args, overwrite_data=True)
  assert not os.path.exists(tmp_path / npz)
  _, features6, _, stats6 = records.prepare_eval_features(*args)
  assert stats6 is not None and features6 == features
  # Damaged: cut short (a copy), not of the size written: built again (sweep 32, U2); where no size was recorded (the
  # versions before), or bytes flipped, one line naming the file and what rebuilds it, not a zipfile traceback.
  whole = bytearray((tmp_path / npz).read_bytes())
  with open(tmp_path / npz, "r+b") as f:
    f.truncate(os.path.getsize(tmp_path / npz) // 2)
  _, features7, _, stats7 = records.prepare_eval_features(*args)
  assert stats7 is not None and features7 == features and (tmp_path / npz).read_bytes() == whole
  source = (tmp_path / (npz + ".source")).read_text(encoding="utf-8")
  (tmp_path / (npz + ".source")).write_text(source.split("\n")[0] + "\n", encoding="utf-8")
  with open(tmp_path / npz, "r+b") as f:
    f.truncate(os.path.getsize(tmp_path / npz) // 2)
  with pytest.raises(ValueError, match=rf"^The cached evaluation features {re.escape(str(tmp_path / npz))} cannot be "
                                       r"read \(BadZipFile: .*\)\. Remove the file, or rerun with "
                                       r"--overwrite_data=True, to build them again\.$"):
    records.prepare_eval_features(*args)
  central = whole.index(b"PK\x01\x02")  # an entry's compression method, as flipped bytes make it (sweep 28, A6)
  whole[central + 10:central + 12] = (99).to_bytes(2, "little")
  (tmp_path / npz).write_bytes(bytes(whole))
  with pytest.raises(ValueError, match=r"cannot be read \(NotImplementedError: That compression method is not "
                                       r"supported\)\. Remove the file"):
    records.prepare_eval_features(*args)
  # While another run reads them, another file to predict does not write them again (`locks.cache_lock`).
  monkeypatch.setattr(locks, "CACHE_LOCK_WAIT_S", 0.2)
  with cache_user.reader(tmp_path / npz):
    with pytest.raises(ValueError, match=re.escape(f"--output_dir {tmp_path} is in use: another run reads its cached "
                                                   f"{tmp_path / npz}")):
      records.prepare_eval_features(str(other), *args[1:])


def test_prepare_train_records(sp_model, tmp_path):
  # A --do_prepro killed outright (kill -9) left its partial record for good (sweep 32, U13): a rerun of that --proc_id
  # removes it; another --proc_id's, and a live process's, stay.
  left = ["spiece.model.1.slen-64.qlen-16.train.tf_record.tmp-999999999-0123456789ab",
          "spiece.model.1.slen-64.qlen-16.train.tf_record.source.tmp-999999999-0123456789ab"]
  kept = ["spiece.model.0.slen-64.qlen-16.train.tf_record.tmp-999999999-0123456789ab",
          f"spiece.model.1.slen-64.qlen-16.train.tf_record.tmp-{os.getpid()}-0123456789ab"]
  for name in left + kept:
    (tmp_path / name).write_bytes(b"part")
  path, stats = records.prepare_train_records(f"{TESTDATA}/data/train-v2.0.json", sp_model, "spiece.model",
                                              str(tmp_path), _opts(64, 24, 16), num_proc=2, proc_id=1,
                                              shuffle_seed=0)
  assert os.path.basename(path) == "spiece.model.1.slen-64.qlen-16.train.tf_record"
  assert stats.num_examples == 19
  assert sum(1 for _ in tf.data.TFRecordDataset(path)) == stats.num_features
  assert sorted(os.listdir(tmp_path)) == sorted(kept + [os.path.basename(path), os.path.basename(path) + ".source"])
  with pytest.raises(ValueError, match="--proc_id"):
    records.prepare_train_records(f"{TESTDATA}/data/train-v2.0.json", sp_model, "spiece.model", str(tmp_path),
                                  _opts(64, 24, 16), num_proc=2, proc_id=2)
