"""Tests for xlnet_tf/classifier_data.py: processors on their original file layouts, features, TFRecords."""

import dataclasses
import logging
import os
import re
import zlib

import numpy as np
import pytest
import tensorflow as tf

from helpers import cache_user
from xlnet_tf import fileio
from xlnet_tf import locks
from xlnet_tf.data import records
from xlnet_tf.tasks.classifier import data as classifier_data
from xlnet_tf.tasks.classifier import features as classifier_features
from xlnet_tf.data.records import PaddingInputExample, ReadConfig
from xlnet_tf.tasks.classifier.delimited import DelimitedTask
from xlnet_tf.tasks.classifier.examples import InputExample, check_label


def tokenize(text):
  """Deterministic stand-in for SentencePiece: digit words map to themselves, other words hash to ids >= 9."""
  return [int(w) if w.isdigit() else 9 + zlib.crc32(w.encode()) % 1000 for w in text.split()]


def write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write(text)


def tsv(*rows):
  return "".join("\t".join(row) + "\n" for row in rows)


def triples(examples):
  return [(e.text_a, e.text_b, e.label) for e in examples]


# ---------------------------------------------------------------------------------------------------------------
# convert_single_example against hand-written id lists.


def test_single_sentence_left_padding():
  f = classifier_features.convert_single_example(0, InputExample("g", "11 12 13", label="pos"), ["neg", "pos"], 8, tokenize)
  assert f.input_ids == [0, 0, 0, 11, 12, 13, 4, 3]
  assert f.input_mask == [1, 1, 1, 0, 0, 0, 0, 0]
  assert f.segment_ids == [4, 4, 4, 0, 0, 0, 0, 2]
  assert f.label_id == 1 and f.is_real_example


def test_single_sentence_truncates_a_to_max_minus_2():
  f = classifier_features.convert_single_example(0, InputExample("g", "11 12 13 14 15", label="neg"), ["neg", "pos"], 5, tokenize)
  assert f.input_ids == [11, 12, 13, 4, 3]
  assert f.input_mask == [0, 0, 0, 0, 0]
  assert f.segment_ids == [0, 0, 0, 0, 2]
  assert f.label_id == 0


def test_pair_layout_and_padding():
  f = classifier_features.convert_single_example(0, InputExample("g", "11", "21 22", "b"), ["a", "b", "c"], 8, tokenize)
  assert f.input_ids == [0, 0, 11, 4, 21, 22, 4, 3]
  assert f.input_mask == [1, 1, 0, 0, 0, 0, 0, 0]
  assert f.segment_ids == [4, 4, 0, 0, 1, 1, 1, 2]
  assert f.label_id == 1


def test_pair_truncation_pops_longer_then_b_on_ties():
  # Room for 7 - 3 = 4 text tokens. a is longer: 11 12 13 14 -> 11 12.
  f = classifier_features.convert_single_example(0, InputExample("g", "11 12 13 14", "21 22", "a"), ["a"], 7, tokenize)
  assert f.input_ids == [11, 12, 4, 21, 22, 4, 3]
  assert f.segment_ids == [0, 0, 0, 1, 1, 1, 2]
  # Room for 3: 2 vs 2, the tie pops b.
  f = classifier_features.convert_single_example(0, InputExample("g", "11 12", "21 22", "a"), ["a"], 6, tokenize)
  assert f.input_ids == [11, 12, 4, 21, 4, 3]


def test_empty_text_b_is_a_single_sentence():
  f = classifier_features.convert_single_example(0, InputExample("g", "11", "", "a"), ["a"], 4, tokenize)
  assert f.input_ids == [0, 11, 4, 3]
  assert f.segment_ids == [4, 0, 0, 2]


def test_regression_label_is_float():
  f = classifier_features.convert_single_example(0, InputExample("g", "11", "21", "3.25"), None, 6, tokenize)
  assert f.label_id == 3.25 and isinstance(f.label_id, float)
  assert f.input_ids == [0, 11, 4, 21, 4, 3]


def test_padding_example_features():
  f = classifier_features.convert_single_example(0, PaddingInputExample(), ["a", "b"], 5, tokenize)
  assert (f.input_ids, f.input_mask, f.segment_ids, f.label_id, f.is_real_example) == (
      [0] * 5, [1] * 5, [0] * 5, 0, False)


def test_convert_errors():
  with pytest.raises(ValueError, match=r"--max_seq_length must be at least 3 .*Received: 2"):
    classifier_features.convert_single_example(0, InputExample("g", "11", label="a"), ["a"], 2, tokenize)
  with pytest.raises(ValueError, match=r"--max_seq_length must be at least 5 for a sentence-pair"):
    classifier_features.convert_single_example(0, InputExample("g", "11", "12", label="a"), ["a"], 4, tokenize)
  with pytest.raises(ValueError, match=r"Example dev-3 has label 'x', which is not in the label list \['a'\]"):
    classifier_features.convert_single_example(0, InputExample("dev-3", "11", label="x"), ["a"], 8, tokenize)
  with pytest.raises(ValueError, match=r"regression task needs a number"):
    classifier_features.convert_single_example(0, InputExample("g", "11", label="pos"), None, 8, tokenize)


def test_pad_examples():
  examples = [InputExample(str(i), "11") for i in range(5)]
  padded = classifier_features.pad_examples(examples, 4)
  assert len(padded) == 8 and padded[:5] == examples and len(examples) == 5
  assert all(isinstance(e, PaddingInputExample) for e in padded[5:])
  assert len(classifier_features.pad_examples(examples[:4], 4)) == 4
  with pytest.raises(ValueError, match="--eval_batch_size"):
    classifier_features.pad_examples(examples, 0)


def test_predict_examples_hold_the_eval_padding_with_do_eval():
  # The original padded its one eval list in place, then wrote the predict records from it.
  examples = [InputExample(str(i), "11") for i in range(5)]
  assert classifier_features.predict_examples(examples, 4, do_eval=False) == examples
  padded = classifier_features.predict_examples(examples, 4, do_eval=True)
  assert padded[:5] == examples and len(padded) == 8 and len(examples) == 5
  assert all(isinstance(e, PaddingInputExample) for e in padded[5:])


# ---------------------------------------------------------------------------------------------------------------
# Processors on small files in their original layouts.

MNLI_TRAIN_HEADER = ["index", "promptID", "pairID", "genre", "s1_bp", "s2_bp", "s1_p", "s2_p", "sentence1",
                     "sentence2", "label1", "gold_label"]


def mnli_row(i, a, b, labels):
  return [str(i), "p", "q", "fiction", "(", "(", "(", "(", a, b] + labels


def test_mnli_matched_and_mismatched(tmp_path):
  d = str(tmp_path)
  write(f"{d}/train.tsv", tsv(MNLI_TRAIN_HEADER, mnli_row(0, "a 'quoted", "b", ["neutral", "neutral"]),
                              mnli_row(1, "c", "d", ["entailment", "entailment"])))
  dev_header = MNLI_TRAIN_HEADER[:10] + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
  write(f"{d}/dev_matched.tsv", tsv(dev_header, mnli_row(0, "e", "f", ["neutral"] * 4 + ["contradiction"] * 2)))
  write(f"{d}/dev_mismatched.tsv", tsv(dev_header, mnli_row(0, "g", "h", ["entailment"] * 6)))
  write(f"{d}/test_matched.tsv", tsv(MNLI_TRAIN_HEADER[:10], mnli_row(0, "i", "j", [])))
  p = classifier_data.get_processor("MNLI_Matched")
  train = p.get_train_examples(d)
  assert triples(train) == [("a 'quoted", "b", "neutral"), ("c", "d", "entailment")]
  assert [e.guid for e in train] == ["train-1", "train-2"]
  assert triples(p.get_dev_examples(d)) == [("e", "f", "contradiction")]
  assert triples(p.get_eval_examples(d, "test")) == [("i", "j", "contradiction")]  # Placeholder label.
  assert p.get_labels() == ["contradiction", "entailment", "neutral"]
  assert triples(classifier_data.get_processor("mnli_mismatched").get_dev_examples(d)) == [("g", "h", "entailment")]
  with pytest.raises(FileNotFoundError, match=r"test_mismatched.tsv, which does not exist. Point --data_dir"):
    classifier_data.get_processor("mnli_mismatched").get_test_examples(d)
  with pytest.raises(ValueError, match="--eval_split"):
    p.get_eval_examples(d, "validation")


def test_mnli_unknown_label_names_file_and_line(tmp_path):
  d = str(tmp_path)
  write(f"{d}/train.tsv", tsv(MNLI_TRAIN_HEADER, mnli_row(0, "a", "b", ["neutral", "neutral"]),
                              mnli_row(1, "c", "d", ["-", "-"])))
  with pytest.raises(ValueError, match=r"Label '-' in .*train.tsv line 3 is not one of the labels of task "
                                       r"'mnli_matched'"):
    classifier_data.get_processor("mnli_matched").get_train_examples(d)


def test_stsb_float_labels(tmp_path):
  d = str(tmp_path)
  header = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2"]
  write(f"{d}/train.tsv", tsv(header + ["score"], ["0", "g", "f", "y", "0", "s", "s", "A plane", "An air plane",
                                                   "5.000"],
                              ["1", "g", "f", "y", "1", "s", "s", "x", "y", "0.5"]))
  write(f"{d}/dev.tsv", tsv(header + ["score"], ["0", "g", "f", "y", "0", "s", "s", "x", "y", "high"]))
  write(f"{d}/test.tsv", tsv(header, ["0", "g", "f", "y", "0", "s", "s", "t1", "t2"]))
  p = classifier_data.get_processor("sts-b")
  assert p.is_regression and p.get_labels() == [0.0]
  assert triples(p.get_train_examples(d)) == [("A plane", "An air plane", 5.0), ("x", "y", 0.5)]
  assert triples(p.get_test_examples(d)) == [("t1", "t2", 0.0)]
  assert p.metric_names == ("pearsonr", "spearmanr")
  with pytest.raises(ValueError, match=r"Regression label 'high' in .*dev.tsv line 2 .* is not a number"):
    p.get_dev_examples(d)
  for label in ("nan", "inf", "-Infinity"):  # float() takes them; the loss would not be finite
    write(f"{d}/dev.tsv", tsv(header + ["score"], ["0", "g", "f", "y", "0", "s", "s", "x", "y", "1.0"],
                              ["1", "g", "f", "y", "1", "s", "s", "x", "y", label]))
    with pytest.raises(ValueError, match=rf"^Regression label '{label}' in .*dev.tsv line 3 \(task 'sts-b'\) is not "
                                         r"a finite number\. Fix the file\.$"):
      p.get_dev_examples(d)
  write(f"{d}/dev.tsv", tsv(header + ["score"], ["0", "g", "f", "y", "0", "s", "s", "x", "y", "37.5"]))
  with pytest.raises(ValueError, match=r"^Regression label '37.5' in .*dev.tsv line 2 \(task 'sts-b'\) is outside "
                                       r"STS-B's scale \[0, 5\]\."):
    p.get_dev_examples(d)
  write(f"{d}/dev.tsv", tsv(["0", "g", "f", "y", "0", "s", "s", "x", "y", "2.5"]))  # no header row
  with pytest.raises(ValueError, match=r"dev.tsv line 1 is data, not the header row sts-b files start with"):
    p.get_dev_examples(d)
  assert classifier_data.label_list_for(p, True) is None
  with pytest.raises(ValueError, match=r"'sts-b' is a regression task .*--is_regression=True"):
    classifier_data.label_list_for(p, False)
  with pytest.raises(ValueError, match=r"'imdb' is a classification task .*Remove --is_regression"):
    classifier_data.label_list_for(classifier_data.get_processor("imdb"), True)


# task, train file text, expected train triples, test file text, expected test triples.
GLUE_CASES = [
    ("cola", tsv(["gj04", "1", "", "Our friends won't buy this."], ["gj04", "0", "*", "They drank the pub."]),
     [("Our friends won't buy this.", None, "1"), ("They drank the pub.", None, "0")],
     tsv(["index", "sentence"], ["0", "Bill whistled."]), [("Bill whistled.", None, "0")]),
    ("sst-2", tsv(["sentence", "label"], ["hide new secretions ", "0"], ["a \"great\" film", "1"]),
     [("hide new secretions ", None, "0"), ('a "great" film', None, "1")],
     tsv(["index", "sentence"], ["0", "uneasy mishmash"]), [("uneasy mishmash", None, "0")]),
    ("mrpc", tsv(["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], ["1", "702876", "702977", "s1", "s2"]),
     [("s1", "s2", "1")],
     tsv(["index", "#1 ID", "#2 ID", "#1 String", "#2 String"], ["0", "1089874", "1089925", "t1", "t2"]),
     [("t1", "t2", "0")]),
    ("qqp", tsv(["id", "qid1", "qid2", "question1", "question2", "is_duplicate"], ["0", "1", "2", "q1", "q2", "0"],
                ["1", "3", "4", "broken line"], ["2", "5", "6", "q5", "q6", "1"]),
     [("q1", "q2", "0"), ("q5", "q6", "1")],
     tsv(["id", "question1", "question2"], ["0", "t1", "t2"]), [("t1", "t2", "0")]),
    ("qnli", tsv(["index", "question", "sentence", "label"], ["0", "q?", "s.", "not_entailment"]),
     [("q?", "s.", "not_entailment")],
     tsv(["index", "question", "sentence"], ["0", "t?", "u."]), [("t?", "u.", "entailment")]),
    ("rte", tsv(["index", "sentence1", "sentence2", "label"], ["0", "a", "b", "entailment"]),
     [("a", "b", "entailment")],
     tsv(["index", "sentence1", "sentence2"], ["0", "c", "d"]), [("c", "d", "entailment")]),
    ("wnli", tsv(["index", "sentence1", "sentence2", "label"], ["0", "a", "b", "1"]), [("a", "b", "1")],
     tsv(["index", "sentence1", "sentence2"], ["0", "c", "d"]), [("c", "d", "0")]),
]


@pytest.mark.parametrize("task,train_text,train_expected,test_text,test_expected", GLUE_CASES,
                         ids=[c[0] for c in GLUE_CASES])
def test_glue_processor(tmp_path, task, train_text, train_expected, test_text, test_expected):
  d = str(tmp_path)
  write(f"{d}/train.tsv", train_text)
  write(f"{d}/dev.tsv", train_text)
  write(f"{d}/test.tsv", test_text)
  p = classifier_data.get_processor(task)
  assert not p.is_regression
  assert triples(p.get_train_examples(d)) == train_expected
  assert triples(p.get_dev_examples(d)) == train_expected
  assert triples(p.get_test_examples(d)) == test_expected
  assert classifier_data.label_list_for(p, False) == p.get_labels()
  # A label outside the task's list names the file, the line and the label.
  bad = train_text.rstrip("\n").rsplit("\n", 1)
  last = bad[1].split("\t")
  last[p.label_column] = "maybe"
  write(f"{d}/train.tsv", bad[0] + "\n" + "\t".join(last) + "\n")
  line = len(bad[0].split("\n")) + 1
  with pytest.raises(ValueError, match=rf"Label 'maybe' in .*train.tsv line {line} is not one of the labels"):
    p.get_train_examples(d)
  # A file without its header row lost its first example, skipped as the header, without a word.
  for split, text in (("train", train_text), ("test", test_text))[0 if p.contains_header else 1:]:
    write(f"{d}/{split}.tsv", text.split("\n", 1)[1])
    with pytest.raises(ValueError, match=rf"{split}.tsv line 1 is data, not the header row {task} files start with"):
      getattr(p, f"get_{split}_examples")(d)


def test_a_test_file_whose_index_is_not_its_row_is_named_once(tmp_path, caplog):
  """GLUE test predictions are numbered by row, as the original's: a shard of a test file (indices 100...) got ids
  from 0 without a word. A warning names the first such row; a whole GLUE file says nothing."""
  d = str(tmp_path)
  p = classifier_data.get_processor("sst-2")
  write(f"{d}/test.tsv", tsv(["index", "sentence"], ["0", "a"], ["1", "b"]))
  with caplog.at_level("WARNING"):
    assert len(p.get_test_examples(d)) == 2
  assert "numbered by row" not in caplog.text
  write(f"{d}/test.tsv", tsv(["index", "sentence"], ["100", "a"], ["101", "b"]))
  with caplog.at_level("WARNING"):
    assert triples(p.get_test_examples(d)) == [("a", None, "0"), ("b", None, "0")]
  assert caplog.text.count("numbered by row") == 1
  assert "test.tsv line 2 has the index '100', but the predictions are numbered by row" in caplog.text


def test_a_glue_file_of_another_layout_is_refused(tmp_path):
  """GLUE's files are read by column position: SST-2's test file as HuggingFace datasets exports it (`sentence`,
  `label` = -1, `idx`) was predicted on its column 1, the string "-1" of every row, exit 0. Its header names other
  columns than GLUE's: refused, naming the column."""
  d = str(tmp_path)
  write(f"{d}/test.tsv", tsv(["sentence", "label", "idx"], ["a fine film", "-1", "0"]))
  with pytest.raises(ValueError, match=r"test.tsv line 1 names column 1 'label', where sst-2 reads 'sentence' "
                                       r"\(GLUE's layout\): the file is of another layout"):
    classifier_data.get_processor("sst-2").get_test_examples(d)
  # A test row cut short was skipped (as the original), and every later prediction written one index off, exit 0.
  write(f"{d}/test.tsv", tsv(["index", "sentence"], ["0", "a fine film"], ["1"], ["2", "a dull one"]))
  with pytest.raises(ValueError, match=r"test.tsv line 3 has 1 column\(s\), fewer than sst-2 reads \(2\): a test "
                                       r"file needs every row"):
    classifier_data.get_processor("sst-2").get_test_examples(d)
  write(f"{d}/test.tsv", tsv(["index", "sentence"], ["0", "a fine film"]) + "   \n\t\n")  # blank: no rows
  assert len(classifier_data.get_processor("sst-2").get_test_examples(d)) == 1
  write(f"{d}/dev.tsv", tsv(["sentence", "label"], ["a fine film", "1"], ["cut"], ["a dull one", "0"]))
  assert len(classifier_data.get_processor("sst-2").get_dev_examples(d)) == 2  # skipped, as the original
  write(f"{d}/test.tsv", tsv(["INDEX", "Sentence "], ["0", "a fine film"]))  # names as GLUE's, spaces and case aside
  assert triples(classifier_data.get_processor("sst-2").get_test_examples(d)) == [("a fine film", None, "0")]


@pytest.mark.parametrize("task,options,placeholder", [
    ("sts-b", {}, "0.0"), ("mnli_matched", {}, "'contradiction'"), ("cola", {}, "'0'"),
    ("csv", dict(text_a_column=0, label_column=1, labels=["neg", "pos"]), "'neg'"),
    ("tsv", dict(text_a_column=0, label_column=1, is_regression=True), "0.0"),
    ("imdb", {}, None), ("yelp5", {}, None)])
def test_evaluating_a_test_file_without_labels_is_warned_of(task, options, placeholder):
  """GLUE's and the csv/tsv tasks' test files have no labels: their examples get a placeholder, and an evaluation
  of them (--do_eval --eval_split=test, which the original runs all the same) gets a warning naming it. imdb's and
  yelp5's test files have labels; a dev file always has."""
  p = classifier_data.get_processor(task, **options)
  assert p.placeholder_labels_note("dev") is None
  note = p.placeholder_labels_note("test")
  if placeholder is None:
    assert note is None
  else:
    assert f"placeholder label {placeholder}," in note and note.startswith("--eval_split=test: the test examples"), note


def test_glue_metric_names():
  assert classifier_data.get_processor("mrpc").metric_names == ("accuracy", "f1")
  assert classifier_data.get_processor("qqp").metric_names == ("accuracy", "f1")
  assert classifier_data.get_processor("cola").metric_names == ("accuracy", "matthews_corr")
  assert classifier_data.get_processor("rte").metric_names == ("accuracy",)


def test_imdb_layout(tmp_path):
  d = str(tmp_path / "aclImdb")
  write(f"{d}/train/pos/0_9.txt", "  Great film.<br /><br />Loved it.\n")
  write(f"{d}/train/neg/1_2.txt", "Dull.")
  write(f"{d}/train/neg/2_1.txt", "Awful<br />really.")
  write(f"{d}/train/neg/notes.md", "not a review")
  write(f"{d}/train/unsup/3_0.txt", "unlabelled")
  write(f"{d}/test/pos/0_10.txt", "Fine.")
  write(f"{d}/test/neg/0_1.txt", "Bad.")
  p = classifier_data.get_processor("imdb", sorted_file_order=True)
  assert triples(p.get_train_examples(d)) == [("Dull.", None, "neg"), ("Awful really.", None, "neg"),
                                               ("Great film.  Loved it.", None, "pos")]
  assert triples(p.get_dev_examples(d)) == [("Bad.", None, "neg"), ("Fine.", None, "pos")]
  assert p.get_labels() == ["neg", "pos"]
  with pytest.raises(FileNotFoundError, match=r"train/neg of \*.txt reviews, which does not exist"):
    p.get_train_examples(str(tmp_path))
  os.remove(f"{d}/test/neg/0_1.txt")  # an unpacking cut short: scored 1.0 on the positive class alone (sweep 32, U3)
  write(f"{d}/test/neg/0_1.TXT", "Bad.")
  with pytest.raises(ValueError, match=rf"^Task 'imdb': {re.escape(d)}/test/neg holds no review \(no file name ending "
                                       r"in txt\): an unpacking cut short\? Put aclImdb's test/neg reviews there "
                                       r"\(both classes are read\)\.$"):
    p.get_dev_examples(d)


def test_an_imdb_file_named_in_another_encoding_is_one_line(tmp_path):
  """A review named in Latin-1 (an archive unpacked with another code page): TensorFlow's listing failed with a bare
  "'utf-8' codec can't decode byte 0xe9", naming no file (sweep 25, B5)."""
  d = str(tmp_path)
  write(f"{d}/train/neg/0_3.txt", "Dull.")
  open(os.path.join(os.fsencode(d), b"train/neg/\xe91_2.txt"), "w").close()
  with pytest.raises(fileio.PathError) as error:
    classifier_data.get_processor("imdb").get_train_examples(d)
  assert error.value.named("--data_dir") == (
      f"--data_dir holds {d}/train/neg/\\xe91_2.txt: the name is not UTF-8 (byte 0xe9), which TensorFlow's file "
      "functions cannot take. Rename it to UTF-8 (e.g. convmv -f latin1 -t utf8 --notest) or move it away.")


def test_imdb_reads_the_files_in_the_listing_order_unless_sorted(tmp_path, monkeypatch):
  # The original lists with tf.gfile.ListDirectory: the file system's order, not sorted (docs/design.md).
  d = str(tmp_path)
  for name in ("0_3.txt", "10_2.txt", "2_1.txt"):
    write(f"{d}/train/neg/{name}", name)
  write(f"{d}/train/pos/1_9.txt", "1_9.txt")
  listdir = tf.io.gfile.listdir
  monkeypatch.setattr(tf.io.gfile, "listdir", lambda path: sorted(listdir(path), reverse=True))
  texts = lambda p: [e.text_a for e in p.get_train_examples(d)]
  assert texts(classifier_data.get_processor("imdb")) == ["2_1.txt", "10_2.txt", "0_3.txt", "1_9.txt"]
  sorted_order = ["0_3.txt", "10_2.txt", "2_1.txt", "1_9.txt"]
  assert texts(classifier_data.get_processor("IMDB", sorted_file_order=True)) == sorted_order
  assert texts(classifier_data.ImdbProcessor(sorted_file_order=True)) == sorted_order
  assert classifier_data.get_processor("yelp5", sorted_file_order=False).task_name == "yelp5"
  with pytest.raises(ValueError, match=r"--sorted_file_order only applies to --task_name=imdb"):
    classifier_data.get_processor("yelp5", sorted_file_order=True)


def test_yelp5_csv(tmp_path):
  d = str(tmp_path)
  # The csv reader turns \""no\"" into \"no\", which the original's replace turns into "no".
  write(f"{d}/train.csv", '"5","Best ""tacos"" in town.\\nGo!"\n"1","He said \\""no\\""."\n')
  write(f"{d}/test.csv", '"3","ok"\n')
  p = classifier_data.get_processor("yelp5")
  assert triples(p.get_train_examples(d)) == [('Best "tacos" in town.\\nGo!', None, "5"),
                                               ('He said "no".', None, "1")]
  assert triples(p.get_dev_examples(d)) == [("ok", None, "3")]
  assert p.get_labels() == ["1", "2", "3", "4", "5"]
  write(f"{d}/test.csv", '"3","ok"\n"6","too good"\n')
  with pytest.raises(ValueError, match=r"Label '6' in .*test.csv line 2 is not one of the labels of task 'yelp5'"):
    p.get_dev_examples(d)
  for row in ('"3"', '"3","A title","the review"'):  # more: a title column read as the text
    write(f"{d}/test.csv", row + "\n")
    with pytest.raises(ValueError, match=r"test.csv line 1 must have 2 columns \(label, text\); it has "):
      p.get_dev_examples(d)
  write(f"{d}/test.csv", '\ufeff"3","ok"\n')  # a byte-order mark (Excel's "CSV UTF-8") is no text
  assert triples(p.get_dev_examples(d)) == [("ok", None, "3")]


def test_task_files_drop_carriage_returns_as_the_originals_reader(tmp_path):
  # The original reads GLUE and Yelp files line by line with tf.gfile, whose readline drops every CR: a lone CR
  # inside a field joins its neighbours ("one\rtwo" -> "onetwo", other ids than "one two") and splits nothing.
  d = str(tmp_path)
  dev_header = MNLI_TRAIN_HEADER[:10] + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
  write(f"{d}/dev_matched.tsv", tsv(dev_header, mnli_row(0, "one\rtwo", "b\r", ["neutral"] * 6)).replace("\n", "\r\n"))
  assert triples(classifier_data.get_processor("mnli_matched").get_dev_examples(d)) == [("onetwo", "b", "neutral")]
  write(f"{d}/test.csv", '4,unquoted lone\rreturn\r\n"2","quoted lone\rreturn and\r\nCRLF"\n')
  assert triples(classifier_data.get_processor("yelp5").get_dev_examples(d)) == [
      ("unquoted lonereturn", None, "4"), ("quoted lonereturn and\nCRLF", None, "2")]
  write(f"{d}/pos/0_1.txt", "a lone\rreturn\r\n")  # Reviews are read whole (f.read()): their CRs stay.
  write(f"{d}/neg/0_2.txt", "x")
  assert triples(classifier_data.get_processor("imdb")._create_examples(d)) == [  # pylint: disable=protected-access
      ("x", None, "neg"), ("a lone\rreturn", None, "pos")]


def test_generic_csv_by_header_name(tmp_path):
  d = str(tmp_path)
  write(f"{d}/train.csv", 'id,review,stars\n0,"good, really",10\n1,bad,2\n2,meh,10\n')
  write(f"{d}/dev.csv", "review,stars,id\nfine,2,7\n")
  write(f"{d}/test.csv", "id,review\n0,unknown\n")
  p = classifier_data.get_processor("csv", text_a_column="review", label_column="stars", data_dir=d, text_b_column=None)
  assert p.get_labels() == ["2", "10"]  # Integer labels sort numerically.
  assert triples(p.get_train_examples(d)) == [("good, really", None, "10"), ("bad", None, "2"), ("meh", None, "10")]
  assert triples(p.get_dev_examples(d)) == [("fine", None, "2")]  # Columns found by name in each file.
  assert triples(p.get_test_examples(d)) == [("unknown", None, "2")]
  assert not p.test_has_labels and "placeholder label '2'" in p.placeholder_labels_note("test")
  # A test file with the label column: its labels were never read, and --do_eval --eval_split=test scored the model
  # against the placeholder, exit 0 (sweep 25, B6). Read where every row holds a class; else the placeholder.
  write(f"{d}/test.csv", "id,review,stars\n0,fine,10\n1,poor,2\n")
  assert triples(p.get_test_examples(d)) == [("fine", None, "10"), ("poor", None, "2")]
  assert p.test_has_labels and p.placeholder_labels_note("test") is None
  write(f"{d}/test.csv", "id,review,stars\n0,fine,10\n1,poor,\n")  # one row unlabelled: a set to predict
  assert triples(p.get_test_examples(d)) == [("fine", None, "2"), ("poor", None, "2")]
  assert not p.test_has_labels and p.placeholder_labels_note("test").startswith(  # it said only "no labels"
      f"--eval_split=test: the test examples of task 'csv' lack labels (1 of 2 rows of {d}/test.csv have no label "
      "of the classes in --label_column 'stars'); each one gets the placeholder label '2'")
  assert p.metric_names == ("accuracy",)
  write(f"{d}/dev.csv", "review,stars\nfine,7\n")
  with pytest.raises(ValueError, match=r"Label '7' in .*dev.csv line 2 is not one of the labels of task 'csv'"):
    p.get_dev_examples(d)
  write(f"{d}/dev.csv", "text,stars\nfine,2\n")
  with pytest.raises(ValueError, match=r"text_a_column='review' is not a column of .*dev.csv; its header is"):
    p.get_dev_examples(d)
  # A spreadsheet's "10 " is the class "10" (it was a third class, trained and scored apart, exit 0); a byte-order
  # mark (Excel's "CSV UTF-8") does not hide the first column's name.
  write(f"{d}/train.csv", '\ufeffreview,stars\ngood,10 \nbad, 2\n')
  p = classifier_data.get_processor("csv", text_a_column="review", label_column="stars", data_dir=d)
  assert p.get_labels() == ["2", "10"] and triples(p.get_train_examples(d)) == [("good", None, "10"),
                                                                                 ("bad", None, "2")]
  # `1` and `1.0` (a column pandas wrote as floats in some rows) were two classes; so was the '' of `--labels=a,b,`.
  write(f"{d}/train.csv", "review,stars\ngood,1\nbad,0\nok,1.0\n")
  with pytest.raises(ValueError, match=r"train.csv spells one label two ways \('1' and '1.0'\): each would be a class"):
    classifier_data.get_processor("csv", text_a_column="review", label_column="stars", data_dir=d).get_labels()
  # The dev file's `1.0` was advised `--labels=0,1,1.0`, and that --labels trained two classes 1 (sweep 33, C2).
  write(f"{d}/train.csv", "review,stars\ngood,1\nbad,0\n")
  write(f"{d}/dev.csv", "review,stars\ngood,1.0\n")
  with pytest.raises(ValueError, match=r"dev.csv line 2 .* It is the label '1' spelt otherwise: write every label of "
                                       r"the files one way\.$"):
    classifier_data.get_processor("csv", text_a_column="review", label_column="stars", data_dir=d).get_dev_examples(d)
  with pytest.raises(ValueError, match=r"^--labels spells one label two ways \('1' and '1.0'\): each would be a class "
                                       r"of its own\. Write every label of the files one way, and pass each class"):
    classifier_data.get_processor("csv", text_a_column="review", label_column="stars", labels=["0", "1", "1.0"])
  with pytest.raises(ValueError, match=r"holds an empty label \(a trailing or doubled comma in --labels\?\)\. "
                                       r"Received: \['0', '1', ''\]\. Pass the classes alone, e.g\. --labels=0,1\."):
    classifier_data.get_processor("csv", text_a_column="review", label_column="stars", labels=["0", "1", ""])


def test_a_label_holding_a_tab_or_line_break_is_refused(tmp_path):
  """Such a label cut the prediction file's rows (index TAB prediction): a row in three columns, or on two lines,
  exit 0 (sweep 34, S1)."""
  d = str(tmp_path)
  write(f"{d}/train.csv", 'text,label\ngood,"very\ngood"\nbad,bad\n')
  with pytest.raises(ValueError, match=r"^Label 'very\\ngood' in \S+/train.csv line \d+ holds a tab or a line break, "
                                       r"which the prediction file's rows \(index, tab, prediction\) cannot hold\."):
    classifier_data.get_processor("csv", text_a_column="text", label_column="label", data_dir=d).get_labels()
  with pytest.raises(ValueError, match=r"^Label 'bad\\tone' in --labels holds a tab or a line break"):
    classifier_data.get_processor("csv", text_a_column="text", label_column="label", labels=["good", "bad\tone"])


def test_rows_with_an_empty_text_are_read_and_said_once(tmp_path, caplog):
  """A row whose text is empty is an example of no words, as the original reads it; it was read without a word
  (sweep 33, C8)."""
  d = str(tmp_path)
  write(f"{d}/train.csv", "text,label\ngood,pos\n ,neg\n,pos\nbad,neg\n")
  p = classifier_data.get_processor("csv", text_a_column="text", label_column="label", data_dir=d)
  with caplog.at_level("WARNING"):
    assert [e.text_a for e in p.get_train_examples(d)] == ["good", " ", "", "bad"]
    p.get_train_examples(d)
  assert caplog.text.count("empty text") == 1
  assert "train.csv: 2 of 4 rows have an empty text (line 3 first): they are read as examples of no words" in (
      caplog.text)


@pytest.mark.parametrize("task", ["csv", "sst-2"])
def test_a_field_longer_than_python_s_csv_limit_is_read(tmp_path, task):
  """A review of 200,000 characters (a long document) was refused as a broken file: Python's csv default limit."""
  long = "word " * 40000
  if task == "csv":
    write(f"{tmp_path}/train.csv", f'text,label\n"{long}",pos\nshort,neg\n')
    p = classifier_data.get_processor("csv", text_a_column="text", label_column="label")
  else:
    write(f"{tmp_path}/train.tsv", tsv(["sentence", "label"], [long, "1"], ["short", "0"]))
    p = classifier_data.get_processor(task)
  assert [len(e.text_a) for e in p.get_train_examples(str(tmp_path))] == [len(long), 5]


def test_generic_tsv_by_index_pairs_given_labels_and_regression(tmp_path, caplog):
  d = str(tmp_path)
  write(f"{d}/train.tsv", 'a "x\tb\tyes\nc\td\tno\n')
  # Columns by index and --has_header left true on a file without a header: its first example is skipped as the
  # header, as the flag says, and the log says so (it was dropped without a word).
  with caplog.at_level("WARNING"):
    skipped = classifier_data.get_processor("tsv", text_a_column=0, label_column=2, labels=["no", "yes"])
    assert triples(skipped.get_train_examples(d)) == [("c", None, "no")]
    skipped.get_train_examples(d)
  assert caplog.text.count("is read as the header row") == 1  # once per file
  assert "train.tsv: line 1 (['a \"x', 'b', 'yes']) is read as the header row (--has_header unset: true)" in caplog.text
  caplog.clear()
  with caplog.at_level("WARNING"):  # --has_header=True given: the user said line 1 is the header
    said = classifier_data.get_processor("tsv", text_a_column=0, label_column=2, labels=["no", "yes"], has_header=True)
    assert triples(said.get_train_examples(d)) == [("c", None, "no")]
  assert "is read as the header row" not in caplog.text
  p = classifier_data.get_processor("tsv", text_a_column="0", text_b_column=1, label_column=2, has_header=False,
                       labels=["no", "yes"])
  assert triples(p.get_train_examples(d)) == [('a "x', "b", "yes"), ("c", "d", "no")]
  assert p.get_labels() == ["no", "yes"]
  # --has_header=False on a file with a header: its label column's name became a class of its own, without a word.
  write(f"{d}/header.tsv", "text\tlabel\nc\tno\nd\tyes\ne\tno\n")
  with caplog.at_level("WARNING"):
    h = classifier_data.get_processor("tsv", text_a_column=0, label_column=1, has_header=False, train_file="header.tsv")
    assert h.get_labels(d) == ["label", "no", "yes"]
  assert "header.tsv: the first row's label 'label' is on no other row: is that row a header?" in caplog.text
  write(f"{d}/scores.tsv", "s1\ts2\tscore\nx\ty\t0.25\n")
  r = classifier_data.get_processor("tsv", text_a_column="s1", text_b_column="s2", label_column="score", is_regression=True,
                       train_file="scores.tsv")
  assert r.is_regression and triples(r.get_train_examples(d)) == [("x", "y", 0.25)]
  assert r.metric_names == ("pearsonr", "spearmanr")
  with pytest.raises(ValueError, match=r"collects its labels from the training file; pass data_dir"):
    classifier_data.get_processor("tsv", text_a_column=0, label_column=2, has_header=False).get_labels()
  with pytest.raises(ValueError, match=r"collects its labels from the training file .*nothere/train.tsv, which does "
                                       r"not exist. Pass every class with --labels, in the order"):
    classifier_data.get_processor("tsv", text_a_column=0, has_header=False).get_labels(f"{d}/nothere")
  with pytest.raises(ValueError, match=r"needs the text and label columns"):
    classifier_data.get_processor("csv", label_column="label")
  with pytest.raises(ValueError, match=r"^--labels names classes of task 'tsv', but --is_regression=True fits one "
                                       r"number per example. Drop one of the two.$"):  # --labels was ignored
    classifier_data.get_processor("tsv", text_a_column=0, label_column=2, labels=["0", "1"], is_regression=True)
  # Without --label_column: a test file (whose labels are optional) is read, a training file is not.
  write(f"{d}/test.tsv", "s1\ts2\nx\ty\n")
  unlabelled = classifier_data.get_processor("tsv", text_a_column="s1", labels=["a", "b"])
  assert triples(unlabelled.get_test_examples(d)) == [("x", None, "a")]
  write(f"{d}/test.tsv", "s1\ts2\tscore\nx\ty\t0.5\nz\tw\t2\n")  # regression: numbers read; else 0.0
  assert triples(r.get_test_examples(d)) == [("x", "y", 0.5), ("z", "w", 2.0)]
  write(f"{d}/test.tsv", "s1\ts2\tscore\nx\ty\tnan\nz\tw\t2\n")
  assert triples(r.get_test_examples(d)) == [("x", "y", 0.0), ("z", "w", 0.0)]
  write(f"{d}/test.tsv", "s1\ts2\nx\ty\n")
  with pytest.raises(ValueError, match=r"reads the labels of .*scores.tsv from --label_column, which is unset. Pass "
                                       r"it \(e.g. --label_column=label\); a test file's labels are optional."):
    classifier_data.get_processor("tsv", text_a_column="s1", labels=["a", "b"], train_file="scores.tsv"
                                  ).get_train_examples(d)


def test_generic_csv_labels_that_do_not_fit_name_the_labels_flag(tmp_path):
  """A label outside the label list: the advice is --labels with every class (not --task_name, which fits the tasks
  of fixed labels), saying where the list came from; a training file of one label, without --labels, is refused."""
  d = str(tmp_path)
  write(f"{d}/train.csv", "text,label\na,pos\nb,neg\n")
  write(f"{d}/dev.csv", "text,label\nc,pos\nd,neutral\n")
  p = classifier_data.get_processor("csv", text_a_column="text", label_column="label", data_dir=d)
  with pytest.raises(ValueError, match=r"^Label 'neutral' in .*dev.csv line 3 is not one of the labels of task 'csv': "
                                       r"\['neg', 'pos'\]. Fix the file, or pass every class with "
                                       r"--labels=neg,pos,neutral \(unset, the labels are those of .*train.csv\).$"):
    p.get_dev_examples(d)
  p = classifier_data.get_processor("csv", text_a_column="text", label_column="label", labels=["pos", "neg"])
  with pytest.raises(ValueError, match=r"Fix the file, or pass every class with --labels=pos,neg,neutral.$"):
    p.get_dev_examples(d)
  write(f"{d}/dev.csv", "text,label\nc,pos\nd,Neg\n")  # said as any other label (sweep 28)
  with pytest.raises(ValueError, match=r"^Label 'Neg' in .*dev.csv line 3 is not one of the labels of task 'csv': "
                                       r"\['pos', 'neg'\] \(it differs from 'neg' only in case: labels are compared as "
                                       r"written\)\. Fix the file, or pass every class with"):
    p.get_dev_examples(d)
  write(f"{d}/dev.csv", "text,label\nc,pos\nd,neutral\n")
  p = classifier_data.get_processor("csv", text_a_column="text", label_column="label", labels=["neg", "pos"],
                                    labels_source="of the checkpoints in m (m/run_flags.json)")
  with pytest.raises(ValueError, match=r"\['neg', 'pos'\]. Fix the file: the labels are those of the checkpoints in m "
                                       r"\(m/run_flags.json\).$"):  # other --labels would be refused there
    p.get_dev_examples(d)
  with pytest.raises(ValueError, match=r"pick the task that matches it with --task_name"):  # a task of fixed labels
    check_label("2", ["0", "1"], "f", 1, "cola")
  write(f"{d}/train.csv", "text,label\na,pos\nb,pos\n")
  p = classifier_data.get_processor("csv", text_a_column="text", label_column="label", data_dir=d)
  with pytest.raises(ValueError, match=r"train.csv holds one label only \('pos'\), .* a classifier needs at least 2 "
                                       r"classes. Pass every class with --labels \(--labels=pos,...\), or "
                                       r"--is_regression=True if the labels are scores.$"):
    p.get_labels()


def test_an_empty_label_a_label_column_that_is_a_text_column_and_two_unicode_forms_of_a_label(tmp_path):
  """Sweep 23: rows with an empty label cell trained as a class "" (B2); --label_column naming the text column
  trained a class per row (B6); "café" typed in NFC and in NFD were two classes, and the error line advised both
  (C1)."""
  d = str(tmp_path)
  write(f"{d}/train.tsv", "text\tlabel\ngood film\tpos\nbad film\t \ngreat\tneg\n")
  p = classifier_data.get_processor("tsv", text_a_column="text", label_column="label", data_dir=d)
  with pytest.raises(ValueError, match=r"train.tsv line 3: its label \(column 1\) is empty. Label every row, or remove "
                                       r"the unlabelled ones.$"):
    p.get_labels()
  write(f"{d}/train.tsv", "text\tlabel\ngood film\tpos\nbad film\tneg\n")
  for columns, words in (({"label_column": "text"}, "text_a_column='text' and label_column='text' name one column of "
                          f"{d}/train.tsv: the text would be its own label, a class per row."),
                         ({"label_column": "label", "text_b_column": 0}, "text_a_column='text' and text_b_column=0 "
                          "name one column of .*: each text would be paired with itself.")):
    p = classifier_data.get_processor("tsv", text_a_column="text", data_dir=d, **columns)
    with pytest.raises(ValueError, match=words):
      p.get_train_examples(d)
  nfc, nfd = "caf\u00e9", "cafe\u0301"
  write(f"{d}/train.tsv", f"text\tlabel\ngood\t{nfc}\nbad\tbad\n")
  write(f"{d}/dev.tsv", f"text\tlabel\nfine\t{nfd}\n")
  p = classifier_data.get_processor("tsv", text_a_column="text", label_column="label", data_dir=d)
  assert p.get_labels() == ["bad", nfc] and [e.label for e in p.get_dev_examples(d)] == [nfc]
  assert DelimitedTask(task_name="tsv", text_a_column=0, label_column=1, labels=[nfd, "bad"]).labels == (nfc, "bad")
  # The columns swapped: a class per row (40 classes of 40 rows), trained on, exit 0 (sweep 32, U6); with --labels, so.
  write(f"{d}/train.tsv", "text\tlabel\n" + "".join(f"review number {i}\t{'pos' if i % 2 else 'neg'}\n"
                                                    for i in range(10)))
  p = classifier_data.get_processor("tsv", text_a_column="label", label_column="text", data_dir=d)
  with pytest.raises(ValueError, match=rf"^{d}/train.tsv: each of its 10 rows has a label of its own in --label_column="
                                       r"text \(the first: 'review number 0'\), each a class: is it the text column\? "):
    p.get_labels()
  labels = [f"review number {i}" for i in range(10)]
  assert classifier_data.get_processor("tsv", text_a_column="label", label_column="text", data_dir=d,
                                       labels=labels).get_labels() == labels
  write(f"{d}/train.tsv", "text\tlabel\n" + "".join(f"{i}\tx\n" for i in range(9)))  # a few rows: classes, maybe
  assert len(classifier_data.get_processor("tsv", text_a_column="label", label_column="text",
                                           data_dir=d).get_labels()) == 9


def test_delimited_task_is_checked_once_and_frozen():
  task = DelimitedTask(task_name="tsv", text_a_column=0, label_column=2, labels=[3, 10], has_header=0)
  assert task.labels == ("3", "10") and task.has_header is False and task.is_regression is False
  with pytest.raises(dataclasses.FrozenInstanceError):
    task.labels = ("a",)
  assert classifier_data.get_processor("tsv", text_a_column=0, label_column=2, labels=[3, 10]).get_labels() == ["3", "10"]
  for labels in ([], ["a", "a"]):
    with pytest.raises(ValueError, match=r"labels for task 'tsv' must be a non-empty list without repeats"):
      DelimitedTask(task_name="tsv", text_a_column=0, label_column=2, labels=labels)


def test_get_processor_errors(tmp_path):
  with pytest.raises(ValueError, match=r"Unknown --task_name 'squad'. Known tasks: mnli_matched, .*sst-2.*, csv, tsv"):
    classifier_data.get_processor("squad")
  with pytest.raises(ValueError, match=r"only apply to the csv/tsv tasks"):
    classifier_data.get_processor("rte", label_column="label")
  assert isinstance(classifier_data.get_processor("rte", label_column=None), classifier_data.RteProcessor)
  with pytest.raises(FileNotFoundError, match=r"Task 'sst-2' needs the file .*train.tsv, which does not exist. "
                                              r"Point --data_dir"):
    classifier_data.get_processor("sst-2").get_train_examples(str(tmp_path))
  with pytest.raises(FileNotFoundError, match=r"dev.tsv, which does not exist. Point --data_dir at the directory "
                                              r"holding dev.tsv; to evaluate or predict the test file, pass "
                                              r"--eval_split=test.$"):
    classifier_data.get_processor("sst-2").get_dev_examples(str(tmp_path))
  assert set(classifier_data.TASK_NAMES) == {"mnli_matched", "mnli_mismatched", "sts-b", "imdb", "yelp5", "cola", "sst-2",
                                "mrpc", "qqp", "qnli", "rte", "wnli", "csv", "tsv"}


# ---------------------------------------------------------------------------------------------------------------
# TFRecords.


def test_record_file_names():
  assert classifier_features.record_file_name("/m/spiece.model", 128, "train") == "spiece.model.len-128.train.tf_record"
  assert classifier_features.record_file_name("spiece.model", 512, "eval", "dev") == "spiece.model.len-512.dev.eval.tf_record"
  assert classifier_features.record_file_name("spiece.model", 64, "predict", "test") == "spiece.model.len-64.test.predict.tf_record"
  with pytest.raises(ValueError, match="--eval_split"):
    classifier_features.record_file_name("spiece.model", 64, "eval", "val")


def test_tfrecord_round_trip(tmp_path, monkeypatch):
  examples = [InputExample("a", "11 12", label="pos"), InputExample("b", "13", "14 15", label="neg")]
  examples = classifier_features.pad_examples(examples, 3)
  out = str(tmp_path / "rec" / classifier_features.record_file_name("spiece.model", 8, "train"))
  assert classifier_features.file_based_convert_examples_to_features(examples, ["neg", "pos"], 8, tokenize, out, num_passes=2) == 6
  name = os.path.basename(out)  # No temp file left; the lock stays (`locks.cache_lock`).
  assert len(examples) == 3 and sorted(os.listdir(tmp_path / "rec")) == [f".{name}.lock", name]
  batches = list(classifier_features.classifier_dataset(out, 8, is_regression=False,
                                                        read=ReadConfig(batch_size=4, n_token=16)))  # ids checked
  assert [b["input_ids"].shape[0] for b in batches] == [4, 2]
  got = {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}
  one_pass_ids = [[0, 0, 0, 0, 11, 12, 4, 3], [0, 0, 13, 4, 14, 15, 4, 3], [0] * 8]
  np.testing.assert_array_equal(got["input_ids"], one_pass_ids * 2)
  np.testing.assert_array_equal(got["input_mask"], [[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0], [1] * 8] * 2)
  np.testing.assert_array_equal(got["segment_ids"], [[4, 4, 4, 4, 0, 0, 0, 2], [4, 4, 0, 0, 1, 1, 1, 2],
                                                     [0] * 8] * 2)
  np.testing.assert_array_equal(got["label_ids"], [1, 0, 0] * 2)
  np.testing.assert_array_equal(got["is_real_example"], [1, 1, 0] * 2)
  assert got["input_mask"].dtype == np.float32 and got["input_ids"].dtype == np.int32
  assert got["label_ids"].dtype == np.int32
  # Every record's features in name order: the same bytes in every process (the map was ordered anew in each, so two
  # runs' files differed under cmp, sweep 36).
  for raw in tf.data.TFRecordDataset(out).as_numpy_iterator():
    places = [raw.index(name) for name in (b"input_ids", b"input_mask", b"is_real_example", b"label_ids",
                                           b"segment_ids")]
    assert places == sorted(places)

  # An existing file is kept unless overwrite_data.
  assert classifier_features.file_based_convert_examples_to_features(examples[:1], ["neg", "pos"], 8, tokenize, out) is None
  assert classifier_features.file_based_convert_examples_to_features(examples[:1], ["neg", "pos"], 8, tokenize, out,
                                                    overwrite_data=True) == 1
  # With the inputs' fingerprint: kept for the same examples and SentencePiece model, written again for others.
  spm = "tests/testdata/data/spm/spiece.model"
  write = lambda ex, uncased=False: classifier_features.file_based_convert_examples_to_features(
      ex, ["neg", "pos"], 8, tokenize, out, fingerprint=classifier_features.examples_fingerprint(
          ex, ["neg", "pos"], 8, 1, spm, uncased))
  assert write(examples[1:2]) is None  # a file written without one (the original's): kept by its name, as there
  os.remove(out)
  assert write(examples[:1]) == 1 and write(examples[:1]) is None
  assert write(examples[1:2]) == 1 and write(examples[1:2]) is None
  assert write(examples[1:2], uncased=True) == 1  # the same text lower-cased: other ids (it was reused, cased)
  assert os.path.exists(out + ".source")
  # While another run reads them, other examples do not write them again (`locks.cache_lock`).
  monkeypatch.setattr(locks, "CACHE_LOCK_WAIT_S", 0.2)
  with cache_user.reader(out):
    with pytest.raises(ValueError, match=re.escape(f"--output_dir {tmp_path / 'rec'} is in use: another run reads "
                                                   f"its cached {out}")):
      write(examples[:1])

  # Training: shuffled, repeated, fixed batch shape.
  train = classifier_features.classifier_dataset(out, 8, is_regression=False,
                                                 read=ReadConfig.training(3, shuffle_buffer=4, seed=1))
  batch = next(iter(train))
  assert batch["input_ids"].shape == (3, 8) and batch["label_ids"].shape == (3,)


def test_a_rebuild_cut_short_keeps_the_records_and_their_fingerprint_together(tmp_path, monkeypatch):
  """A full disk at the fingerprint file of rebuilt records: the records and the fingerprint of the run before stay,
  and that run's inputs still reuse them (the new records beside the old fingerprint were reused for them)."""
  examples = [InputExample("a", "11 12", label="pos"), InputExample("b", "13", "14 15", label="neg")]
  out = str(tmp_path / classifier_features.record_file_name("spiece.model", 8, "train"))
  write = lambda ex: classifier_features.file_based_convert_examples_to_features(
      ex, ["neg", "pos"], 8, tokenize, out, fingerprint=classifier_features.examples_fingerprint(
          ex, ["neg", "pos"], 8, 1, "tests/testdata/data/spm/spiece.model", False))
  assert write(examples[:1]) == 1
  before = {path: open(path, "rb").read() for path in (out, out + ".source")}
  open_file = fileio.open_file

  def full_disk_at_the_fingerprint(path, mode="r"):
    if ".source.tmp-" in os.path.basename(path):
      raise OSError(28, "No space left on device")
    return open_file(path, mode)
  with monkeypatch.context() as m:
    m.setattr(fileio, "open_file", full_disk_at_the_fingerprint)
    with pytest.raises(OSError, match=f"^Could not write {out}.source \\(No space left on device\\)"):
      write(examples[1:])
  assert {path: open(path, "rb").read() for path in before} == before
  assert sorted(os.listdir(tmp_path)) == sorted([f".{os.path.basename(out)}.lock"]
                                                + [os.path.basename(path) for path in before])
  assert write(examples[:1]) is None


class _Killed(BaseException):
  """A process killed outright (SIGKILL) in the rename pass: nothing after it runs."""


@pytest.mark.parametrize("killed_at", [1, 2])
def test_a_rebuild_killed_while_renaming_leaves_no_cache_beside_another_fingerprint(tmp_path, monkeypatch, killed_at):
  """kill -9 (the OOM killer, a lost machine) in the rename pass of rebuilt records: whatever it leaves, neither the
  old inputs nor the new ones reuse records of the others (renamed before their fingerprint, the new records were
  reused for the old inputs, exit 0: sweep 27, U3), and a fingerprint that is not UTF-8 is other inputs (U4)."""
  examples = [InputExample("a", "11 12", label="pos"), InputExample("b", "13", "14 15", label="neg")]
  out = str(tmp_path / classifier_features.record_file_name("spiece.model", 8, "train"))
  fingerprint = lambda ex: classifier_features.examples_fingerprint(ex, ["neg", "pos"], 8, 1,
                                                                     "tests/testdata/data/spm/spiece.model", False)
  write = lambda ex: classifier_features.file_based_convert_examples_to_features(
      ex, ["neg", "pos"], 8, tokenize, out, fingerprint=fingerprint(ex))
  assert write(examples[:1]) == 1
  old = open(out, "rb").read()
  renames = []
  rename = fileio.rename

  def killed(src, dst):
    renames.append(dst)
    if len(renames) == killed_at:
      raise _Killed()
    rename(src, dst)
  with monkeypatch.context() as m:
    m.setattr(fileio, "rename", killed)
    with pytest.raises(_Killed):
      write(examples[1:])
  for ex in (examples[:1], examples[1:]):  # reused only where the file there is the one made from them
    if records.reusable_cache(out, fingerprint(ex)):
      assert ex == examples[:1] and open(out, "rb").read() == old
  assert write(examples[1:]) == 1 and write(examples[1:]) is None
  with open(out + ".source", "wb") as f:
    f.write(b"\xff\xfe damaged")
  assert write(examples[1:]) == 1  # written again, not a codec error naming no file
  os.remove(out + ".source")
  os.mkdir(out + ".source")
  with pytest.raises(ValueError, match=rf"^--output_dir {tmp_path} holds a directory named like the cached file "
                                       rf"{out}.source: move it away, or pass another --output_dir.$"):
    write(examples[1:])


@pytest.mark.parametrize("kept", [1, 0])
def test_records_cut_at_a_record_boundary_are_written_again(tmp_path, caplog, kept):
  """A cached record file cut at a record boundary (a copy cut short by a full disk) or emptied reads as whole: it was
  reused, and a prediction lost rows, an evaluation scored part of the split, exit 0 (sweep 32, U2). Its recorded size
  tells; a fingerprint file without one (the versions before) still goes by the fingerprint."""
  examples = [InputExample("a", "11 12", label="pos"), InputExample("b", "13", "14 15", label="neg")]
  out = str(tmp_path / classifier_features.record_file_name("spiece.model", 8, "eval", "dev"))
  fingerprint = classifier_features.examples_fingerprint(examples, ["neg", "pos"], 8, 1,
                                                         "tests/testdata/data/spm/spiece.model", False)
  write = lambda: classifier_features.file_based_convert_examples_to_features(
      examples, ["neg", "pos"], 8, tokenize, out, fingerprint=fingerprint)
  assert write() == 2 and write() is None
  whole = open(out, "rb").read()
  first = list(tf.data.TFRecordDataset(out).take(kept).as_numpy_iterator())
  with tf.io.TFRecordWriter(out) as writer:  # the first `kept` records, as a cut copy leaves them
    for record in first:
      writer.write(record)
  assert records.changed_cache(out) == (f"{out} holds {os.path.getsize(out)} bytes, but {len(whole)} were written: it "
                                        "was cut short or changed since")
  with caplog.at_level(logging.WARNING):
    assert write() == 2
  assert open(out, "rb").read() == whole and "or changed since it was written; writing it again" in caplog.text
  with open(out + ".source", "w", encoding="utf-8") as f:  # as the versions before wrote it: no size
    f.write(fingerprint + "\n")
  open(out, "wb").close()
  assert records.changed_cache(out) is None and write() is None


def test_tfrecord_regression_and_errors(tmp_path):
  out = str(tmp_path / "r.tf_record")
  examples = [InputExample("a", "11", "12", 2.5), PaddingInputExample()]
  classifier_features.file_based_convert_examples_to_features(examples, None, 6, tokenize, out)
  (batch,) = list(classifier_features.classifier_dataset(out, 6, is_regression=True, read=ReadConfig(batch_size=2)))
  np.testing.assert_array_equal(batch["label_ids"].numpy(), np.array([2.5, 0.0], np.float32))
  np.testing.assert_array_equal(batch["input_ids"].numpy()[0], [0, 11, 4, 12, 4, 3])
  # A failing conversion leaves no file behind.
  bad = str(tmp_path / "bad.tf_record")
  with pytest.raises(ValueError, match="not in the label list"):
    classifier_features.file_based_convert_examples_to_features([InputExample("z", "11", label="x")], ["a"], 6, tokenize, bad)
  assert sorted(os.listdir(tmp_path)) == [".bad.tf_record.lock", ".r.tf_record.lock", "r.tf_record"]  # locks stay
  with pytest.raises(FileNotFoundError, match=r"bad.tf_record does not exist"):
    classifier_features.classifier_dataset(bad, 6, is_regression=False, read=ReadConfig(batch_size=2))
  with pytest.raises(ValueError, match="--num_passes"):
    classifier_features.file_based_convert_examples_to_features(examples, None, 6, tokenize, bad, num_passes=0)


def test_every_record_is_checked_against_the_vocabulary_as_it_is_read(tmp_path):
  """`ReadConfig.n_token`: an id beyond it in record 300 (past the first 256 that the tools check before a run)
  stops the fine-tuning reader with the marked error when that record is read; `read_errors.records_named` turns
  it into one line naming the file and the record. Unchecked, the record reads."""
  from xlnet_tf.data import read_errors  # pylint: disable=import-outside-toplevel
  examples = [InputExample(str(i), "5000" if i == 300 else "11 12", label="pos") for i in range(320)]
  out = str(tmp_path / "train.tf_record")
  classifier_features.file_based_convert_examples_to_features(examples, ["neg", "pos"], 8, tokenize, out)
  read = lambda n_token: classifier_features.classifier_dataset(out, 8, False, ReadConfig(batch_size=50,
                                                                                          n_token=n_token))
  assert sum(len(b["input_ids"]) for b in read(None)) == 320
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"Token id outside the vocabulary: feature input_ids, "
                                                           r"n_token=1000\."):
    list(read(1000))
  with pytest.raises(ValueError, match=rf"^{out} holds token id 5000 \(record 300\), outside the model's vocabulary "
                                       r"\[0, n_token=1000\)\. Rewrite it .* or remove it, then rerun\.$"):
    with read_errors.records_named([out]):
      list(read(1000))
  with pytest.raises(ValueError, match="n_token must be None or a positive integer. Received: 0"):
    ReadConfig(batch_size=2, n_token=0)


def test_a_stray_quote_or_an_unquoted_delimiter_in_a_text_is_refused_naming_the_lines(tmp_path, caplog):
  """A stray `"` opened a field that swallowed the lines up to the next quote: a 6-row test file predicted 3 rows,
  misaligned with the file, exit 0 (sweep 26, A1). A row with more fields than the header (an unquoted comma, a tab
  in a tsv text) trained the end of its text as a class, and a test row was predicted on the text cut there (B1).
  Texts quoted whole (line ends, doubled quotes, commas) and trailing empty fields are read."""
  d = str(tmp_path)
  options = dict(text_a_column="sentence", label_column="label", data_dir=d)
  write(f"{d}/train.csv", 'sentence,label\ngood movie,1\n"bad movie,0\nnice film,1\nfine "movie,1\nboring,0\n')
  with pytest.raises(ValueError, match=re.escape(
      f"{d}/train.csv lines 3-5 are not valid csv data (',' expected after '\"'): a field that holds a quote must be "
      'quoted whole, its quotes doubled ("a ""b"" c"). Fix the file.')):
    classifier_data.get_processor("csv", **options).get_labels()
  write(f"{d}/train.csv", 'sentence,label\ngood movie,1\nbad movie,0\n"Great, fun movie",1\n"a ""b""\nc",0,\n')
  p = classifier_data.get_processor("csv", **options)
  assert p.get_labels() == ["0", "1"]
  assert [e.text_a for e in p.get_train_examples(d)] == ["good movie", "bad movie", "Great, fun movie", 'a "b"\nc']
  assert f"{d}/train.csv: 1 row(s) span several lines, the first lines 5-6 (a quoted text holding line ends)" in (
      caplog.text)  # valid, but what two stray quotes make too (rerun 26, N3)
  write(f"{d}/train.csv", "sentence,label\ngood movie,1\nbad movie,0\nGreat, fun movie,1\n")
  with pytest.raises(ValueError, match=re.escape(f"{d}/train.csv line 4 has 3 fields, its header 2: a text holds a "
                                                 'comma: quote it whole ("Great, fun movie"). Fix the file.')):
    classifier_data.get_processor("csv", **options).get_labels()
  write(f"{d}/test.tsv", "good movie\t1\nGreat\tfun movie\t1\n")
  p = classifier_data.get_processor("tsv", text_a_column=0, label_column=1, data_dir=d, has_header=False,
                                   labels=["0", "1"])
  with pytest.raises(ValueError, match=re.escape(f"{d}/test.tsv line 2 has 3 fields, most rows 2: a text holds a tab, "
                                                 "which a tsv file cannot quote. Remove it from the text.")):
    p.get_test_examples(d)
  write(f"{d}/train.csv", "Great, fun movie,1\ngood movie,1\nbad movie,0\n")  # without a header, on line 1 (N1)
  p = classifier_data.get_processor("csv", text_a_column=0, label_column=1, data_dir=d, has_header=False)
  with pytest.raises(ValueError, match=re.escape(f"{d}/train.csv line 1 has 3 fields, most rows 2: a text holds a "
                                                 "comma")):
    p.get_labels()
