"""The RACE-format IMDB set: readable by the RACE reader, deterministic, questions built as documented."""

import hashlib
import json
import os

import pytest

import cli
import flag_configs
import run_race
from helpers import learning
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.race import corpus
from xlnet_tf.tasks.race import data

SIZES = dict(num_train=6, num_dev=3, num_test=2)
# The slow test's recipe (docs/race.md, "The pretrained backbone").
PRETRAIN_STEPS, RACE_STEPS, RACE_LR, MIN_ACCURACY = 10000, 6000, 1e-4, 0.33


def _digest(root):
  h = hashlib.sha256()
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for name in sorted(filenames):
      path = os.path.join(dirpath, name)
      h.update(os.path.relpath(path, root).encode())
      with open(path, "rb") as f:
        h.update(f.read())
  return h.hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("race_imdb") / "race")
  return root, corpus.write_race_corpus(root, seed=0, **SIZES)


def test_layout_is_read_by_the_race_reader(built):
  root, summary = built
  assert sorted(os.listdir(root)) == ["dev", corpus.MARKER, "test", "train"]
  for split, num in (("train", 6), ("dev", 3), ("test", 2)):
    assert sorted(os.listdir(os.path.join(root, split))) == ["high", "middle"]
    assert summary[split]["middle"]["articles"] == (num + 1) // 2
    assert summary[split]["high"]["articles"] == num // 2
    examples = data.get_examples(root, split)
    assert len(examples) == sum(v["questions"] for v in summary[split].values())
    assert [ex.level for ex in examples] == sorted((ex.level for ex in examples), key=data.LEVELS.index)
    assert len(data.get_examples(root, split, high_only=True)) == summary[split]["high"]["questions"]
  with open(os.path.join(root, corpus.MARKER), encoding="utf-8") as f:
    assert json.load(f)["settings"]["seed"] == 0


def test_articles_and_questions(built):
  root, _ = built
  rows = {}
  for split in data.SPLITS:
    for level in data.LEVELS:
      for path in data.level_files(root, split, level):
        with open(path, encoding="utf-8") as f:
          article = json.load(f)
        assert article["id"] == os.path.relpath(path, root)
        rows.setdefault(split, set()).add(os.path.basename(path))
        words = len(article["article"].split())
        assert words <= 250 and (words <= 120) == (level == "middle")
        questions, options, answers = article["questions"], article["options"], article["answers"]
        assert questions[0] == corpus.CONTINUATION_QUESTION and 1 <= len(questions) <= 3
        next_sentence = options[0]["ABCD".index(answers[0])]
        assert next_sentence not in article["article"]
        for question, opts, answer in zip(questions[1:], options[1:], answers[1:]):
          assert question.count("_") == 1 and len(set(opts)) == 4
          filled = data.join_qa(question, opts["ABCD".index(answer)])
          assert filled in article["article"]
          assert all(o.isalpha() and o.islower() and len(o) >= 4 for o in opts)
  assert not rows["train"] & rows["dev"] and not rows["train"] & rows["test"] and not rows["dev"] & rows["test"]


def test_deterministic_and_seeded(built, tmp_path):
  root, _ = built
  same = str(tmp_path / "same")
  corpus.write_race_corpus(same, seed=0, **SIZES)
  assert _digest(same) == _digest(root)
  corpus.write_race_corpus(same, seed=1, **SIZES)  # Rewrites a directory it wrote before.
  assert _digest(same) != _digest(root)
  assert len(os.listdir(os.path.join(same, "train", "middle"))) == 3  # Replaced as a whole, nothing stale.


def test_features_of_the_set(built):
  root, _ = built
  sp_model = tokenization.load_sentencepiece("tests/testdata/race/spm/spiece.model")
  examples = data.get_examples(root, "dev")
  arrays = data.convert_examples(examples, tokenization.make_tokenize_fn(sp_model), 128, 32)
  assert arrays["input_ids"].shape == (len(examples), 512)
  assert (arrays["input_ids"].reshape(-1, 4, 128)[:, :, -1] == tokenization.CLS_ID).all()


def test_bad_arguments(tmp_path):
  foreign = tmp_path / "foreign"
  foreign.mkdir()
  (foreign / "notes.txt").write_text("mine")
  with pytest.raises(ValueError, match="not written by this tool \\(no race_imdb.json\\)"):
    corpus.write_race_corpus(str(foreign), **SIZES)
  assert os.listdir(foreign) == ["notes.txt"]
  with pytest.raises(ValueError, match="num_dev must be an integer >= 2. Received: 1"):
    corpus.write_race_corpus(str(tmp_path / "x"), num_train=4, num_dev=1, num_test=2)
  with pytest.raises(ValueError, match="middle_max_words < max_article_words"):
    corpus.write_race_corpus(str(tmp_path / "x"), max_article_words=100, middle_max_words=100, **SIZES)
  assert not os.path.exists(tmp_path / "x")


@pytest.mark.slow
def test_fine_tuning_on_the_set_beats_chance(tmp_path):
  """The recipe of docs/race.md ("The pretrained backbone"): an 8000-piece SentencePiece model trained as the demo's,
  the small model pretrained with run_pretrain.py on the demo's records (the first PRETRAIN_STEPS steps of a
  20000-step schedule), then fine-tuned on a 6000-article set with the original's RACE head and loss: dev accuracy
  far above chance (0.25; 587 dev questions, so one standard error at chance is 0.018, and MIN_ACCURACY is 4.5 of
  them above it). With learning rate 3e-4 it passed twice 2026-11-25 (0.438, 0.424; 20 and 19 minutes on 2 cores
  of an AVX-512 CPU) and failed 2026-11-26 (0.320: that backbone sat at chance for 4000 RACE steps); with 1e-4 the
  same backbone gave 0.371 and 0.421 (RACE seeds 1, 2), another 0.477."""
  spm = learning.demo_sentencepiece(tmp_path)
  config, backbone, pretrain_lines = learning.pretrain_small(tmp_path, spm, train_steps=PRETRAIN_STEPS,
                                                             schedule_steps=20000)
  assert learning.logged_losses(pretrain_lines)[-1] < 4.5, pretrain_lines[-3:]
  corpus.write_race_corpus(str(tmp_path / "race"), num_train=6000, num_dev=200, num_test=100, max_article_words=50,
                           middle_max_words=35)
  o = cli.defaults(
      run_race.define_flags, do_train=True, do_eval=True, data_dir=str(tmp_path / "race"), model_config_path=config,
      spiece_model_file=spm, init_checkpoint=backbone, output_dir=str(tmp_path / "race_out"),
      model_dir=str(tmp_path / "race_model"), max_seq_length=112, max_qa_length=40, train_batch_size=8,
      eval_batch_size=32, train_steps=RACE_STEPS, warmup_steps=RACE_STEPS // 10, iterations=100,
      learning_rate=RACE_LR, lr_layer_decay_rate=1.0, dropout=0.0, dropatt=0.0, seed=1, strategy="one_device")
  lines = []
  results = run_race.run(o, flag_configs.start(o), log_fn=lines.append)  # as the CLI: seeded initialisation
  (result,) = results["eval"]
  assert result["eval_accuracy"] > MIN_ACCURACY, result
