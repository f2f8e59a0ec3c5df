"""RACE reading and features: the original's goldens (tests/testdata/race), the option aliasing, bad inputs."""

import dataclasses
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import fileio
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.race import data

GOLDEN = "tests/testdata/race"
DATA = os.path.join(GOLDEN, "data")
META = json.load(open(os.path.join(GOLDEN, "meta.json"), encoding="utf-8"))
SETTINGS = {s["tag"]: s for s in META["settings"]}
CASES = [(tag, split) for tag in SETTINGS for split in ("train", "dev")]


@pytest.fixture(scope="module")
def sp_model():
  return tokenization.load_sentencepiece(os.path.join(GOLDEN, "spm", "spiece.model"))


def _golden(tag, split):
  npz = np.load(os.path.join(GOLDEN, "features", f"{tag}_{split}.npz"))
  with open(os.path.join(GOLDEN, "features", f"{tag}_{split}_examples.json"), encoding="utf-8") as f:
    return npz, json.load(f)


def _examples(split):
  """The split's examples in the order the original read its files (meta.json `file_order`, the same in each
  setting): the directory's order on the goldens' machine, which another file system may list differently."""
  order = META["settings"][0][split]["file_order"]
  return [ex for rel in order for ex in data.read_race_file(os.path.join(DATA, rel), rel.split("/")[1])]


def _convert(sp_model, tag, split, fix):
  s = SETTINGS[tag]
  examples = _examples(split)
  return data.convert_examples(examples, tokenization.make_tokenize_fn(sp_model, s["uncased"]), s["max_seq_length"],
                               s["max_qa_length"], fix_option_aliasing=fix)


def test_join_qa():
  assert data.join_qa("Wget downloads files _ .", "by hand") == "Wget downloads files by hand ."
  assert data.join_qa("_ and _ are", "X") == "X and X are"
  assert data.join_qa("What is Wget?", "A game.") == "What is Wget? A game."


@pytest.mark.parametrize("tag,split", CASES)
def test_examples_match_the_original(tag, split):
  examples = _examples(split)
  _, info = _golden(tag, split)
  assert len(examples) == len(info) == SETTINGS[tag][split]["examples"]
  files = lambda exs: list(dict.fromkeys(os.path.relpath(ex.file, DATA) for ex in exs))
  assert files(data.get_examples(DATA, split, sorted_file_order=True)) == SETTINGS[tag][split]["file_order"]
  assert sorted(files(data.get_examples(DATA, split))) == sorted(SETTINGS[tag][split]["file_order"])
  for ex, want in zip(examples, info):
    assert (os.path.relpath(ex.file, DATA), ex.question_index, ex.level, ex.label) == (
        want["file"], want["question_index"], want["level"], want["label"])
    assert ex.qa_list == [opt["qa"] for opt in want["options"]]


@pytest.mark.parametrize("tag,split", CASES)
def test_default_features_equal_the_goldens(sp_model, tag, split):
  got = _convert(sp_model, tag, split, fix=False)
  npz, _ = _golden(tag, split)
  for key in ("input_ids", "input_mask", "segment_ids"):
    np.testing.assert_array_equal(got[key], npz[key], err_msg=key)
  assert got["input_ids"].dtype == np.int32 and got["input_mask"].dtype == np.float32
  np.testing.assert_array_equal(got["label_ids"], npz["label_id"])
  np.testing.assert_array_equal(got["is_real_example"], npz["is_real_example"])


@pytest.mark.parametrize("tag,split", CASES)
def test_fixed_features_equal_the_unaliased_goldens(sp_model, tag, split):
  got = _convert(sp_model, tag, split, fix=True)
  npz, _ = _golden(tag, split)
  for key in ("input_ids", "input_mask", "segment_ids"):
    np.testing.assert_array_equal(got[key], npz["unaliased_" + key], err_msg=key)


@pytest.mark.parametrize("tag,split", CASES)
def test_aliasing_stats_match_the_goldens(sp_model, tag, split):
  s = SETTINGS[tag]
  _, info = _golden(tag, split)
  stats = data.aliasing_stats(_examples(split), tokenization.make_tokenize_fn(sp_model, s["uncased"]),
                              s["max_seq_length"], s["max_qa_length"])
  differ = [[opt["differs_from_unaliased"] for opt in ex["options"]] for ex in info]
  assert stats["items"] == len(info) and stats["sequences"] == 4 * len(info)
  assert stats["sequences_differ"] == sum(map(sum, differ))
  assert stats["items_differ"] == sum(map(any, differ))
  assert stats["items_differ"] == len(s[split]["aliasing_visible"])


def test_padding_example_equals_the_golden(sp_model):
  npz, _ = _golden("L64_QA16_cased", "dev")
  feature = data.convert_single_example(data.PaddingInputExample(), None, 64, 16)
  got = data.features_to_arrays([feature])
  for key, golden_key in (("input_ids", "input_ids"), ("input_mask", "input_mask"), ("segment_ids", "segment_ids"),
                          ("label_ids", "label_id"), ("is_real_example", "is_real_example")):
    np.testing.assert_array_equal(got[key][0], npz["padding_example_" + golden_key], err_msg=key)
  padded = data.pad_examples(list(range(8)), 5)
  assert len(padded) == 10 and all(isinstance(p, data.PaddingInputExample) for p in padded[8:])
  assert len(data.pad_examples(list(range(10)), 5)) == 10


# A tokenizer over space-separated integers, so the layouts below can be written out by hand.
def _ids(text):
  return [int(w) for w in text.split()]


# ctx 3 tokens; qa lengths 2, 3, 1 and 5 (cut to its last 4); L = 12, so the budget for ctx is 9 - len(qa).
HAND_EXAMPLE = data.InputExample(context="11 12 13", qa_list=["21 22", "31 32 33", "41", "51 52 53 54 55"],
                                 label=2, level="middle")
P, S, C = 0, 4, 3  # pad id, <sep>, <cls>
HAND_FIXED = [  # Every option sees the article alone.
    ([P] * 4 + [11, 12, 13, S, 21, 22, S, C], [4] * 4 + [0, 0, 0, 0, 1, 1, 1, 2]),
    ([P] * 3 + [11, 12, 13, S, 31, 32, 33, S, C], [4] * 3 + [0, 0, 0, 0, 1, 1, 1, 1, 2]),
    ([P] * 5 + [11, 12, 13, S, 41, S, C], [4] * 5 + [0, 0, 0, 0, 1, 1, 2]),
    ([P] * 2 + [11, 12, 13, S, 52, 53, 54, 55, S, C], [4] * 2 + [0, 0, 0, 0, 1, 1, 1, 1, 1, 2]),
]
HAND_ORIGINAL = [
    # Option 0 fits: the article list grows to 11 12 13 <sep> 21 22 <sep> <cls>.
    HAND_FIXED[0],
    # Option 1 does not fit (8 + 3 > 9): a copy of the grown list cut to 6 tokens; the growth stops.
    ([11, 12, 13, S, 21, 22, S, 31, 32, 33, S, C], [0] * 7 + [1] * 4 + [2]),
    # Option 2 fits (8 + 1 <= 9): the grown list, and it grows again to 12 tokens.
    ([11, 12, 13, S, 21, 22, S, C, S, 41, S, C], [0] * 9 + [1] * 2 + [2]),
    # Option 3 (qa cut to 4): the 12-token list cut to 5.
    ([11, 12, 13, S, 21, S, 52, 53, 54, 55, S, C], [0] * 6 + [1] * 5 + [2]),
]


@pytest.mark.parametrize("fix,expected", [(True, HAND_FIXED), (False, HAND_ORIGINAL)])
def test_features_by_hand(fix, expected):
  feature = data.convert_single_example(HAND_EXAMPLE, _ids, 12, 4, fix_option_aliasing=fix)
  assert feature.input_ids == [i for ids, _ in expected for i in ids]
  assert feature.segment_ids == [s for _, segs in expected for s in segs]
  assert feature.input_mask == [int(s == 4) for _, segs in expected for s in segs]
  assert (feature.label_id, feature.is_real_example) == (2, True)
  stats = data.aliasing_stats([HAND_EXAMPLE], _ids, 12, 4)
  assert (stats["items_differ"], stats["sequences_differ"]) == (1, 3)


def test_long_articles_never_alias():
  example = data.InputExample(context=" ".join(map(str, range(100, 120))), qa_list=["1", "2 2", "3 3 3", "4"],
                              label=0, level="high")
  default = data.convert_single_example(example, _ids, 12, 4)
  assert default == data.convert_single_example(example, _ids, 12, 4, fix_option_aliasing=True)
  assert default.input_ids[:12] == list(range(100, 108)) + [S, 1, S, C]  # ctx cut to 12 - 3 - 1, no padding.


# ---------------------------------------------------------------------------------------------------------------
# The layout and bad inputs.


def _write(root, rel, obj):
  path = os.path.join(root, rel)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(obj if isinstance(obj, str) else json.dumps(obj))
  return path


def _article(answers=("B",), options=(("a", "b", "c", "d"),), questions=("q _ ?",)):
  return {"article": "text", "questions": list(questions), "options": [list(o) for o in options],
          "answers": list(answers)}


def test_an_empty_article_is_read_and_said(tmp_path, caplog):
  """An article file whose article is empty: its questions are read with the options alone, as the original reads
  them; it was read without a word (sweep 33, C8)."""
  root = str(tmp_path)
  _write(root, "dev/middle/1.txt", _article())
  _write(root, "dev/middle/2.txt", dict(_article(), article=" "))
  with caplog.at_level("WARNING"):
    assert [ex.context for ex in data.get_examples(root, "dev", middle_only=True, sorted_file_order=True)] == [
        "text", " "]
  assert caplog.text.count("empty article") == 1
  assert re.search(r"1 article files of the dev split have an empty article \(\S+/dev/middle/2.txt first\)",
                   caplog.text)


def test_levels_order_and_filters(tmp_path):
  root = str(tmp_path)
  for rel in ("dev/high/2.txt", "dev/high/10.txt", "dev/middle/b.txt", "dev/middle/a.txt"):
    _write(root, rel, _article())
  order = [os.path.relpath(ex.file, root) for ex in data.get_examples(root, "dev", sorted_file_order=True)]
  assert order == ["dev/middle/a.txt", "dev/middle/b.txt", "dev/high/10.txt", "dev/high/2.txt"]
  assert [ex.level for ex in data.get_examples(root, "dev", high_only=True)] == ["high", "high"]
  assert [ex.level for ex in data.get_examples(root, "dev", middle_only=True)] == ["middle", "middle"]
  ex = data.get_examples(root, "dev")[0]
  assert (ex.qa_list, ex.label) == (["q a ?", "q b ?", "q c ?", "q d ?"], 1)


def test_a_file_with_a_byte_order_mark_is_read(tmp_path):
  """A file saved with a UTF-8 byte-order mark (a Windows editor's) was refused as 'not JSON'; csv/tsv files and
  xlnet_config.json with one are read, and so is this."""
  root = str(tmp_path)
  _write(root, "dev/high/1.txt", _article())
  _write(root, "dev/middle/1.txt", "\ufeff" + json.dumps(_article(answers=("C",))))
  assert [ex.label for ex in data.get_examples(root, "dev")] == [2, 1]


def test_an_article_named_in_another_encoding_is_one_line(tmp_path):
  """An article file named in Latin-1: a bare "'utf-8' codec can't decode byte 0xe9", naming no file (sweep 25, B5)."""
  root = str(tmp_path)
  _write(root, "dev/high/1.txt", _article())
  open(os.path.join(os.fsencode(root), b"dev/high/\xe92.txt"), "w").close()
  with pytest.raises(fileio.PathError, match=f"^{root}/dev/high/\\\\xe92.txt: the name is not UTF-8 \\(byte 0xe9\\)"):
    data.level_files(root, "dev", "high")


def test_file_order_is_the_directory_listing_unless_sorted(tmp_path):
  # The original reads tf.gfile.ListDirectory's order (the file system's); --sorted_file_order sorts by name.
  root = str(tmp_path)
  for rel in ("dev/middle/9.txt", "dev/middle/11.txt", "dev/middle/.hidden.txt", "dev/high/2.txt"):
    _write(root, rel, _article())
  listed = tf.io.gfile.listdir(os.path.join(root, "dev", "middle"))
  assert sorted(listed) == [".hidden.txt", "11.txt", "9.txt"]  # hidden names are listed, and read, as the original
  want_middle = [os.path.join("dev/middle", name) for name in listed]
  order = [os.path.relpath(ex.file, root) for ex in data.get_examples(root, "dev")]
  assert order == want_middle + ["dev/high/2.txt"]
  order = [os.path.relpath(ex.file, root) for ex in data.get_examples(root, "dev", sorted_file_order=True)]
  assert order == ["dev/middle/.hidden.txt", "dev/middle/11.txt", "dev/middle/9.txt", "dev/high/2.txt"]
  assert data.level_files(root, "dev", "middle") == [os.path.join(root, rel) for rel in want_middle]


@pytest.mark.parametrize("content,message", [
    ("{not json", "not valid JSON (line 1 column 2"),
    ("[1, 2]", "not an object"),
    (json.dumps(_article(options=(("a", "Free\ud800dom", "c", "d"),))),  # valid JSON, a traceback (sweep 23, B1)
     "not text: options[0][1] holds a lone surrogate (\\ud800 at character 4), which is no character"),
    (_article(answers=("E",)), "answer 0 is 'E'"),
    (_article(answers=("b",)), "answer 0 is 'b'"),
    (_article(options=(("a", "b", "c"),)), "needs a list of 4 option strings"),
    (_article(options=(("a", "b", "c", "d", "e"),)), "needs a list of 4 option strings"),
    (_article(answers=("A", "B")), "equally many"),
    ({"article": "x", "questions": [], "options": []}, "missing key(s) ['answers']"),
])
def test_bad_file(tmp_path, content, message):
  _write(str(tmp_path), "dev/high/1.txt", _article())
  bad = _write(str(tmp_path), "dev/middle/1.txt", content)
  with pytest.raises(ValueError) as e:
    data.get_examples(str(tmp_path), "dev")
  text = str(e.value)
  assert message in text and bad in text and "\n" not in text


def test_bad_layout_and_flags(tmp_path):
  root = str(tmp_path)
  _write(root, "dev/middle/1.txt", _article())
  with pytest.raises(FileNotFoundError, match="dev/high does not exist.*--data_dir"):
    data.get_examples(root, "dev")
  assert len(data.get_examples(root, "dev", middle_only=True)) == 1
  os.makedirs(os.path.join(root, "dev", "high"))  # there, but empty: the middle level alone was evaluated
  with pytest.raises(ValueError, match=r"dev/high holds no article file \(an unpacking cut short\?\)\. Put "
                                              r"RACE's dev/high files there, or pass --middle_only"):
    data.get_examples(root, "dev")
  with pytest.raises(FileNotFoundError, match="train/middle does not exist"):
    data.get_examples(root, "train")
  with pytest.raises(FileNotFoundError, match=r"train/middle does not exist: --middle_only reads train/middle of "
                                              r"--data_dir \(RACE's layout\)\. Check --data_dir and the split\.$"):
    data.get_examples(root, "train", middle_only=True)  # it advised --middle_only (sweep 33, C5)
  with pytest.raises(ValueError, match="exclude each other"):
    data.get_examples(root, "dev", high_only=True, middle_only=True)
  with pytest.raises(ValueError, match="--eval_split"):
    data.get_examples(root, "valid")
  os.makedirs(os.path.join(root, "dev", "middle", "sub"))
  with pytest.raises(ValueError, match="is a directory"):
    data.get_examples(root, "dev", middle_only=True)


@pytest.mark.parametrize("seq_len,qa_len", [(64, 61), (64, 70), (64, 0), (4, 1), (64, 16.0), (True, 1)])
def test_bad_lengths(seq_len, qa_len):
  with pytest.raises(ValueError, match="--max_"):
    data.convert_single_example(HAND_EXAMPLE, _ids, seq_len, qa_len)


def test_lengths_at_the_limit():
  feature = data.convert_single_example(HAND_EXAMPLE, _ids, 12, 8)  # max_qa_length = L - 4: ctx keeps >= 1.
  assert len(feature.input_ids) == 48


def test_wrong_number_of_options_or_a_label_out_of_range():
  """Hand-built examples: a label of 7 or -1 was written and trained on without a loss; qa_list "abcd" was four
  options of a letter each (sweep 36)."""
  example = data.InputExample(context="1", qa_list=["2", "3"], label=0, level="middle", file="f.txt")
  with pytest.raises(ValueError, match=r"needs a list of 4 question/option strings. Received \['2', '3'\] "
                                       r"\(file f.txt, question 0\)"):
    data.convert_single_example(example, _ids, 12, 4)
  with pytest.raises(ValueError, match="needs a list of 4 question/option strings. Received 'abcd'"):
    data.convert_single_example(dataclasses.replace(example, qa_list="abcd"), _ids, 12, 4)
  for label in (7, -1, "B", 1.0):
    with pytest.raises(ValueError, match=f"label is the index of its answer, 0 to 3 \\(None: unknown\\). Received: "
                                         f"{re.escape(repr(label))} \\(file f.txt"):
      data.convert_single_example(dataclasses.replace(example, qa_list=list("abcd"), label=label), _ids, 12, 4)


def test_answers_null_or_empty_are_no_answers_when_predicting(tmp_path):
  """A file to predict with `"answers": null` or `[]` was refused (`must be lists` / `0 answers`), where the key left
  out is read (sweep 16, N8), and so was a null for each question: read as no answers (labels None); where answers
  are needed the line says the file may be predicted."""
  root = str(tmp_path)
  for name, answers in (("1.txt", None), ("2.txt", []), ("3.txt", "leave out"), ("4.txt", [None, None])):
    article = dict(_article(), questions=["q0", "q1"], options=[["a", "b", "c", "d"]] * 2)
    article.pop("answers") if answers == "leave out" else article.update(answers=answers)
    _write(root, f"test/middle/{name}", article)
  _write(root, "test/high/1.txt", _article())
  examples = data.get_examples(root, "test", answers_required=False, sorted_file_order=True)
  assert [ex.label for ex in examples] == [None] * 8 + [1]
  for name, shown in (("1.txt", "null"), ("2.txt", "[]"), ("4.txt", "[null, null]")):
    with pytest.raises(ValueError, match=re.escape(f"`answers` is {shown}: it has no answers (a file to predict may "
                                                   "lack `answers`, or have them null, [] or a null each: "
                                                   "--do_predict alone reads it)")):
      data.read_race_file(os.path.join(root, "test", "middle", name), "middle")
  _write(root, "test/middle/5.txt", dict(_article(), questions=["q0", "q1"], answers=[None]))  # still counted
  with pytest.raises(ValueError, match="2 questions, 1 option lists and 1 answers"):
    data.read_race_file(os.path.join(root, "test", "middle", "5.txt"), "middle", answers_required=False)
