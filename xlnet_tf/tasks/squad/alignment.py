"""Character alignment between a raw SQuAD paragraph and its SentencePiece pieces, as the original.

`preprocess_text` collapses whitespace, maps ``` `` ```/`''` to `"`, strips accents (NFKD) and may lower-case, so
the pieces of a paragraph no longer spell the raw text. The original (`run_squad.convert_examples_to_features`)
recovers, for every piece, the span of raw characters it covers with a longest-common-subsequence over a
diagonal band:

- O = the raw paragraph (N characters); T = the pieces concatenated with `▁` read as a space (M characters).
- A raw character i matches T[j] when `preprocess_text(O[i], lower=uncased, remove_space=False) == T[j]`
  (so a character whose normal form is not exactly one character, such as a ligature or `…`, never matches).
- For i in 0..N-1 and j in [i-d, i+d) ∩ [0, M): f[i,j] = f[i-1,j] with pointer UP (only if i > 0); then if j > 0
  and f[i,j-1] is STRICTLY greater: f[i,j-1], pointer LEFT; then if O[i] matches T[j] and f[i-1,j-1] + 1 is
  STRICTLY greater: that, pointer DIAG (f[i-1,j-1] = 0 when i = 0 or j = 0). Cells outside the band hold 0 and no
  pointer; a row-0 cell that neither matches nor improves on its left neighbour has no pointer either.
- d = |N - M| + 5; when f[N-1,M-1] <= 0.8 N the match is rerun once with 2d.
- Backtracking from (N-1, M-1) until a cell has no pointer links O[i] <-> T[j] at every DIAG cell.
- The paragraph is dropped ("MISMATCH DETECTED!") when nothing aligns or f[N-1,M-1] < 0.8 N.

The original runs this in Python, O(N d) interpreted steps (each calling `preprocess_text`) per question. Here
each raw character is normalised once; f is computed row by row with the same recurrence written as
f[i] = running max along the row of max(f[i-1, j], (f[i-1, j-1] + 1) * match(i, j)), in a plain Python loop for
narrow bands and with numpy for wide ones; no pointer is stored: a pointer depends only on three neighbouring f
values and the match, so it is recomputed, in the original's tie order, for the cells of the backtracking path
alone. `tests/test_squad_alignment.py` checks this against a plain transcription of the original's rule.
"""

import dataclasses

import numpy as np

from xlnet_tf.data import tokenization

SPIECE_UNDERLINE = "▁"
UP, LEFT, DIAG = 0, 1, 2  # The original's pointer codes; None = no pointer.
NO_MATCH = -1  # Code of a raw character whose normal form is not exactly one character.


def text_codes(text):
  """int64 [len(text)], the code point of every character."""
  return np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.int64)


def normalized_char_codes(text, uncased):
  """int64 [len(text)]: code point of `preprocess_text(c, lower=uncased, remove_space=False)` for each character c,
  or NO_MATCH where that is not exactly one character (a combining mark, a ligature, `…`)."""
  table = {}
  for c in set(text):
    s = tokenization.preprocess_text(c, lower=uncased, remove_space=False)
    table[c] = ord(s) if len(s) == 1 else NO_MATCH
  return np.fromiter((table[c] for c in text), dtype=np.int64, count=len(text))


@dataclasses.dataclass
class BandLcs:
  """The banded LCS of one run.

  score: int, f[N-1, M-1] (0 when N or M is 0).
  orig_to_chartok: int64 [N], the T index matched to each raw character, -1 = none.
  chartok_to_orig: int64 [M], the raw index matched to each character of T, -1 = none.
  """
  score: int
  orig_to_chartok: np.ndarray
  chartok_to_orig: np.ndarray


NUMPY_MIN_BAND = 96  # Bands at least this wide (2 d) are computed with numpy rows, narrower ones in Python.


def _band_bounds(n, m, max_dist):
  """Row i covers columns [lo[i], hi[i]) = [i - d, i + d) ∩ [0, M); offsets[i] = where row i starts in `vals`."""
  rows = np.arange(n)
  lo = np.clip(rows - max_dist, 0, m)
  hi = np.maximum(np.clip(rows + max_dist, 0, m), lo)
  offsets = np.concatenate([[0], np.cumsum(hi - lo)])
  return lo.tolist(), hi.tolist(), offsets.tolist()


# Both fills keep two full rows indexed by column + 1 (slot 0 is column -1); columns outside a row's band hold 0,
# as in the original. Bands only move right, so what an older row left in a buffer lies left of anything read.


def _fill_python(orig, tok, lo, hi, offsets):
  """f over the band, row by row in plain Python (fastest for narrow bands). Returns a flat list."""
  m = len(tok)
  tok = tok.tolist()
  prev, cur = [0] * (m + 1), [0] * (m + 1)
  vals = []
  for i, code in enumerate(orig.tolist()):
    a, b = lo[i], hi[i]
    left = 0  # f[i, a - 1]: outside the band.
    for j in range(a, b):
      v = prev[j + 1]  # f[i-1, j]
      if left > v:
        v = left
      if tok[j] == code:
        d = prev[j] + 1  # f[i-1, j-1] + 1
        if d > v:
          v = d
      cur[j + 1] = left = v
    vals += cur[a + 1:b + 1]
    prev, cur = cur, prev
  return vals


def _fill_numpy(orig, tok, lo, hi, offsets):
  """f over the band, one numpy pass per row (fastest for wide bands). Returns a flat int32 array."""
  m = len(tok)
  vals = np.empty(offsets[-1], np.int32)
  prev, cur = np.zeros(m + 1, np.int32), np.zeros(m + 1, np.int32)
  for i, code in enumerate(orig.tolist()):
    a, b = lo[i], hi[i]
    row = prev[a:b] + 1  # f[i-1, j-1] + 1 ...
    row *= tok[a:b] == code  # ... where O[i] matches T[j], else 0;
    np.maximum(row, prev[a + 1:b + 1], out=row)  # or f[i-1, j];
    np.maximum.accumulate(row, out=cur[a + 1:b + 1])  # or f[i, j-1]: the running max along the row.
    vals[offsets[i]:offsets[i + 1]] = cur[a + 1:b + 1]
    prev, cur = cur, prev
  return vals


def band_lcs(orig, tok, max_dist, fill=None):
  """One run of the original's banded LCS (`_lcs_match(max_dist)` and the backtracking after it).

  Args:
    orig: int64 [N], `normalized_char_codes` of the raw paragraph.
    tok: int64 [M], `text_codes` of the concatenated pieces (with `▁` replaced by a space).
    max_dist: int d, the half-width of the band: row i covers columns [i - d, i + d).
    fill: None (choose by band width), "python" or "numpy": how f is computed (the result is the same).

  Returns:
    A BandLcs.
  """
  n, m = len(orig), len(tok)
  orig_to_chartok = np.full(n, -1, np.int64)
  chartok_to_orig = np.full(m, -1, np.int64)
  if n == 0 or m == 0:
    return BandLcs(0, orig_to_chartok, chartok_to_orig)
  lo, hi, offsets = _band_bounds(n, m, max_dist)
  if fill is None:
    fill = "numpy" if min(2 * max_dist, m) >= NUMPY_MIN_BAND else "python"
  vals = {"python": _fill_python, "numpy": _fill_numpy}[fill](orig, tok, lo, hi, offsets)

  # Backtracking from (N-1, M-1). A cell's pointer is recomputed from f in the original's order: UP (i > 0), LEFT
  # if f[i, j-1] is strictly greater, DIAG on a match if f[i-1, j-1] + 1 is strictly greater; f = 0 off the band.
  orig_l, tok_l = orig.tolist(), tok.tolist()
  score = int(vals[offsets[n - 1] + m - 1 - lo[n - 1]]) if lo[n - 1] <= m - 1 < hi[n - 1] else 0
  i, j = n - 1, m - 1
  while i >= 0 and j >= 0:
    a = lo[i]
    if j < a or j >= hi[i]:
      break  # Outside the band: no pointer.
    if i > 0:
      pa, pb, po = lo[i - 1], hi[i - 1], offsets[i - 1] - lo[i - 1]
      pointer, value = UP, (vals[po + j] if pa <= j < pb else 0)
      diag = vals[po + j - 1] if pa <= j - 1 < pb else 0
    else:
      pointer, value, diag = None, 0, 0
    if j > a:  # f[i, j-1] inside the band (at j == a it is 0 and never wins).
      left = vals[offsets[i] + j - 1 - a]
      if left > value:
        pointer, value = LEFT, left
    if orig_l[i] == tok_l[j] and diag + 1 > value:
      pointer = DIAG
    if pointer is None:
      break
    if pointer == DIAG:
      orig_to_chartok[i] = j
      chartok_to_orig[j] = i
      i, j = i - 1, j - 1
    elif pointer == LEFT:
      j -= 1
    else:
      i -= 1
  return BandLcs(score, orig_to_chartok, chartok_to_orig)


def convert_index(index, positions, size=None, is_start=True):
  """The original's `_convert_index` for many positions at once.

  Maps positions of one string to the other through a partial alignment. An aligned position maps to its partner.
  Otherwise let front/rear be the nearest aligned positions before/after it (their partners F, R):
  - none before: start -> 0 if R >= 1 else R; end -> R - 1 if R >= 1 else R;
  - none after: if size is given and F < size - 1: start -> F + 1, end -> size - 1; else F;
  - both: if R > F + 1: start -> F + 1, end -> R - 1; else start -> R, end -> F.

  Args:
    index: int [K], the partner of each position, -1 = not aligned.
    positions: int [P], positions in [0, K) to convert.
    size: int or None, the length of the other string (the original's `M`; None for the answer's characters).
    is_start: bool, convert as the start (True) or end (False) of a span.

  Returns:
    int64 [P].
  """
  index = np.asarray(index, np.int64)
  positions = np.asarray(positions, np.int64)
  k = len(index)
  slots = np.arange(k)
  aligned = index >= 0
  front_slot = np.maximum.accumulate(np.where(aligned, slots, -1))[positions]
  rear_slot = np.minimum.accumulate(np.where(aligned, slots, k)[::-1])[::-1][positions]
  front = np.where(front_slot >= 0, index[np.maximum(front_slot, 0)], -1)
  rear = np.where(rear_slot < k, index[np.minimum(rear_slot, k - 1)], -1)
  if np.any((front < 0) & (rear < 0)):
    raise ValueError("convert_index needs at least one aligned position. Received an alignment with none; such a "
                     "paragraph is dropped as a mismatch before any conversion.")
  gap = rear > front + 1
  if is_start:
    none_before = np.where(rear >= 1, 0, rear)
    none_after = np.where(front < size - 1, front + 1, front) if size is not None else front
    both = np.where(gap, front + 1, rear)
  else:
    none_before = np.where(rear >= 1, rear - 1, rear)
    none_after = np.where(front < size - 1, size - 1, front) if size is not None else front
    both = np.where(gap, rear - 1, front)
  return np.where(front < 0, none_before, np.where(rear < 0, none_after, both))


@dataclasses.dataclass
class Alignment:
  """How the pieces of one paragraph cover its raw text.

  pieces: list of P str pieces, `encode_pieces(sp, preprocess_text(paragraph, lower=uncased))`.
  score: int, the LCS length f[N-1, M-1].
  orig_to_chartok: int64 [N]; chartok_to_orig: int64 [M] (-1 = not aligned).
  chartok_to_tok: int64 [M], the piece holding each character of T.
  tok_start_to_orig, tok_end_to_orig: int64 [P], the first and last raw character each piece covers (inclusive).
  """
  pieces: list
  score: int
  orig_to_chartok: np.ndarray
  chartok_to_orig: np.ndarray
  chartok_to_tok: np.ndarray
  tok_start_to_orig: np.ndarray
  tok_end_to_orig: np.ndarray

  def answer_token_span(self, start_char, end_char):
    """(first piece, last piece) of the raw characters [start_char, end_char] (inclusive, in [0, N)), as the
    original: each end through `convert_index` (size None) to T, then to the piece holding that character."""
    start_chartok = convert_index(self.orig_to_chartok, [start_char], None, is_start=True)[0]
    end_chartok = convert_index(self.orig_to_chartok, [end_char], None, is_start=False)[0]
    return int(self.chartok_to_tok[start_chartok]), int(self.chartok_to_tok[end_chartok])


def align_pieces(paragraph_text, pieces, uncased):
  """Aligns a raw paragraph with its pieces as the original; None when the original drops it (MISMATCH).

  Args:
    paragraph_text: str, the raw context (N characters).
    pieces: list of str, its pieces.
    uncased: bool, the `--uncased` flag (lower-casing also applies to the character match).

  Returns:
    An Alignment, or None when nothing aligns or fewer than 80 % of the N characters do.
  """
  tok_cat_text = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
  n, m = len(paragraph_text), len(tok_cat_text)
  orig = normalized_char_codes(paragraph_text, uncased)
  tok = text_codes(tok_cat_text)
  max_dist = abs(n - m) + 5
  for _ in range(2):
    lcs = band_lcs(orig, tok, max_dist)
    if lcs.score > 0.8 * n:
      break
    max_dist *= 2
  if not np.any(lcs.orig_to_chartok >= 0) or lcs.score < 0.8 * n:
    return None
  lengths = np.array([len(p) for p in pieces], np.int64)
  ends = np.cumsum(lengths)
  return Alignment(
      pieces=list(pieces),
      score=lcs.score,
      orig_to_chartok=lcs.orig_to_chartok,
      chartok_to_orig=lcs.chartok_to_orig,
      chartok_to_tok=np.repeat(np.arange(len(pieces), dtype=np.int64), lengths),
      tok_start_to_orig=convert_index(lcs.chartok_to_orig, ends - lengths, n, is_start=True),
      tok_end_to_orig=convert_index(lcs.chartok_to_orig, ends - 1, n, is_start=False))
