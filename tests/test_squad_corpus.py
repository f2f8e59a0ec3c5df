"""The SQuAD 2.0 cloze set from IMDB reviews: deterministic, valid SQuAD 2.0 that the reader accepts, answers at
their offsets and locatable from the question, unanswerable questions from other reviews, disjoint splits; and
(slow) fine-tuning from scratch on it reduces the loss and beats the trivial baseline by far."""

import json
import os
import re

import pytest

from helpers import learning
from xlnet_tf.tasks.squad import corpus
from xlnet_tf.tasks.squad import examples as squad_examples

SPM = "tests/testdata/data/spm/spiece.model"


def _qas(doc):
  return [(p["context"], qa) for article in doc["data"] for p in article["paragraphs"] for qa in p["qas"]]


def test_the_set_is_deterministic_valid_squad_and_answerable_by_reading(tmp_path):
  counts = corpus.write_squad_corpus(str(tmp_path / "a"), num_train=40, num_dev=12, seed=5)
  corpus.write_squad_corpus(str(tmp_path / "b"), num_train=40, num_dev=12, seed=5)
  corpus.write_squad_corpus(str(tmp_path / "c"), num_train=40, num_dev=12, seed=6)
  for name in ("train-v2.0.json", "dev-v2.0.json", corpus.MARKER):
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
  assert (tmp_path / "a" / "train-v2.0.json").read_bytes() != (tmp_path / "c" / "train-v2.0.json").read_bytes()
  assert sorted(os.listdir(tmp_path / "a")) == ["dev-v2.0.json", corpus.MARKER, "train-v2.0.json"]
  docs = {}
  for split in corpus.SPLITS:
    path = str(tmp_path / "a" / f"{split}-v2.0.json")
    with open(path, encoding="utf-8") as f:
      docs[split] = json.load(f)
    assert docs[split]["version"] == "v2.0" and len(docs[split]["data"]) == counts[split]["contexts"]
    examples = squad_examples.read_squad_examples(path, is_training=True)  # checks every answer against its offset
    assert len(examples) == counts[split]["questions"] == 3 * counts[split]["contexts"]
    assert sum(e.is_impossible for e in examples) == counts[split]["unanswerable"]
  qas = _qas(docs["train"]) + _qas(docs["dev"])
  unanswerable = [(c, qa) for c, qa in qas if qa["is_impossible"]]
  assert 0.2 < len(unanswerable) / len(qas) < 0.5
  for context, qa in qas:
    assert qa["question"].count("_") == 1 and len(qa["question"].split()) <= 10
    if qa["is_impossible"]:
      assert qa["answers"] == [] and qa["plausible_answers"][0]["text"]
      filled = qa["question"].replace("_", qa["plausible_answers"][0]["text"])
      assert filled not in context  # the question comes from another review
    else:
      (answer,) = qa["answers"]
      assert context[answer["answer_start"]:].startswith(answer["text"])
      assert re.fullmatch(r"[a-z]{4,}( [A-Za-z]+)?", answer["text"])
      # The question is the context around the answer, with the answer blanked.
      before, after = qa["question"].split("_")
      start = answer["answer_start"]
      assert context[:start].endswith(before) and context[start + len(answer["text"]):].startswith(after)
  titles = {split: {a["title"] for a in docs[split]["data"]} for split in docs}
  assert not titles["train"] & titles["dev"]
  with pytest.raises(ValueError, match="num_dev must be an integer >= 1"):
    corpus.write_squad_corpus(str(tmp_path / "d"), num_dev=0)


# The measured run of docs/squad.md, shortened to fit a slow test (about 10 minutes on 2 busy cores).
@pytest.mark.slow
def test_fine_tuning_on_the_set_learns(tmp_path):
  """From random weights, a 3-layer model learns to find the blank: the recipe of docs/squad.md ("Learning on real
  text") with the test SentencePiece model and 3000 steps (about 20 minutes on one CPU core)."""
  results, counts, lines, _, _ = learning.train_squad(tmp_path)
  losses = learning.logged_losses(lines)
  assert losses[-1] < 0.3 * losses[0], losses
  (result,) = results["predict"]
  baseline = 100 * counts["dev"]["unanswerable_share"]  # always "": the best a model that learnt nothing gets
  # Runs of this recipe gave best_f1 62-96 (docs/squad.md lists them): where training takes off from the plateau at
  # loss ~2.3 varies with the seed and with last-bit changes to the arithmetic, so the bound sits below that spread.
  assert result["best_f1"] > baseline + 25, (result, baseline)
  assert result["has_ans_f1"] > 0.6, result
