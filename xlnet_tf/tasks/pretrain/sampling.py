"""The pretraining writer's sampling algorithms, as the original `data_utils.py`: the A/B split (`_split_a_and_b`)
and the span masks (`_sample_mask`).

Quirks of the original kept by default and `span_sampling="word"`: see `xlnet_tf.tasks.pretrain.data`.
"""

import bisect
import dataclasses
import random

import numpy as np



def sentence_starts(sent_ids):
  """int64 [k]: positions b > 0 with sent_ids[b] != sent_ids[b-1] (sentence starts), ascending."""
  return np.flatnonzero(sent_ids[1:] != sent_ids[:-1]) + 1


def _trim_lengths(a_len, b_len, tot_len):
  """The original's trimming loop in closed form: while a+b > tot_len, shorten the longer (ties shorten B)."""
  excess = a_len + b_len - tot_len
  if excess <= 0:
    return a_len, b_len
  if a_len > b_len:
    step = min(a_len - b_len, excess)
    a_len -= step
  else:
    step = min(b_len - a_len + 1, excess)
    b_len -= step
  if excess > step:  # Now balanced: the loop alternates B, A, ... and ends with A = B or A = B + 1.
    a_len, b_len = (tot_len + 1) // 2, tot_len // 2
  return a_len, b_len


def _split_a_and_b(data, sent_ids, begin_idx, tot_len, extend_target=False, rng=random, starts=None):
  """Picks segments A and B (`tot_len` tokens in all) from a row, starting A at `begin_idx` (original algorithm).

  With probability 1/2 (or if A cannot end at a sentence start) B is a random span of the row (label 0),
  otherwise the true continuation (label 1).

  Args:
    data: int64 [T], one row.
    sent_ids: bool [T], its sentence ids.
    begin_idx: where A starts.
    tot_len: len(A) + len(B).
    extend_target: also return the next-token targets of A and B; fail if they would pass the row end.
    rng: a `random.Random` (the original used the module `random`).
    starts: optional `sentence_starts(sent_ids)`, precomputed.

  Returns:
    None when the row is too short, else [a, b, label, new_begin(, a_target, b_target)], a_target int64
    [len(a)] and b_target int64 [len(b)+1] (the first SEP's target, then B's).
  """
  data_len = data.shape[0]
  if begin_idx + tot_len >= data_len:
    return None
  if starts is None:
    starts = sentence_starts(sent_ids)
  lo = int(np.searchsorted(starts, begin_idx + 1))
  hi = int(np.searchsorted(starts, begin_idx + tot_len))
  cut_points = starts[lo:hi].tolist()  # Sentence starts that leave A shorter than tot_len.
  end_idx = int(starts[hi]) if hi < len(starts) else data_len

  a_begin = begin_idx
  if not cut_points or rng.random() < 0.5:
    label = 0
    a_end = rng.choice(cut_points) if cut_points else end_idx
    b_len = max(1, tot_len - (a_end - a_begin))
    b_begin = rng.randint(0, data_len - 1 - b_len)  # `data_len - 1` leaves room for the extended target.
    b_end = b_begin + b_len
    k = int(np.searchsorted(starts, b_begin, side="right"))  # Move b_begin back to its sentence start.
    b_begin = int(starts[k - 1]) if k > 0 else 0
    if b_end < data_len - 1:  # Move b_end forward to the next sentence start, at most data_len - 1.
      k = int(np.searchsorted(starts, b_end))
      b_end = min(int(starts[k]) if k < len(starts) else data_len - 1, data_len - 1)
    new_begin = a_end
  else:
    label = 1
    a_end = rng.choice(cut_points)
    b_begin = a_end
    b_end = end_idx
    new_begin = b_end

  a_len, b_len = _trim_lengths(a_end - a_begin, b_end - b_begin, tot_len)
  a_end, b_end = a_begin + a_len, b_begin + b_len
  ret = [data[a_begin:a_end], data[b_begin:b_end], label, new_begin]
  if extend_target:
    if a_end >= data_len or b_end >= data_len:
      return None
    ret.extend([data[a_begin + 1:a_end + 1], data[b_begin:b_end + 1]])
  return ret


def _legacy_randint(rng):
  """A function `high -> rng.randint(0, high)` (same value, same stream position), several times cheaper.

  numpy's legacy `RandomState.randint(0, high)` (and `choice(high)`) draws 32-bit MT19937 outputs, masks them to the
  bit width of `high - 1` and rejects values above it; `high == 1` draws nothing. The tests check the equality.
  """
  bitgen = getattr(rng, "_bit_generator", None)
  if not isinstance(bitgen, np.random.MT19937):
    return lambda high: int(rng.randint(0, high))
  raw = bitgen.random_raw

  def randint(high):
    top = high - 1
    if top == 0:
      return 0
    mask = (1 << top.bit_length()) - 1
    while True:
      value = raw() & mask
      if value <= top:
        return value
  return randint


_NGRAM_CDF = {}


def _ngram_cdf(max_gram):
  """The cumulative distribution numpy's `choice(arange(1, max_gram+1), p=1/n normalised)` searches."""
  if max_gram not in _NGRAM_CDF:
    pvals = 1. / np.arange(1, max_gram + 1)
    pvals /= pvals.sum(keepdims=True)
    cdf = pvals.cumsum()
    cdf /= cdf[-1]
    _NGRAM_CDF[max_gram] = cdf.tolist()
  return _NGRAM_CDF[max_gram]


@dataclasses.dataclass(frozen=True, kw_only=True)
class MaskSampling:
  """How `_sample_mask` draws its spans, the same for every record of a writer run (so one value, not four).

  Attributes:
    mask_alpha, mask_beta: int, the context size per masked token (the original's flags, in `PretrainDataSpec`).
    max_gram: int, the longest span (the original's 5).
    span_sampling: "original" (spans of n tokens, the released bug) or "word" (spans of n words, the last cut to
      the remaining budget); checked with the writer's options by `validate_options`.
  """
  mask_alpha: int
  mask_beta: int
  max_gram: int = 5
  span_sampling: str = "original"


def _sample_mask(seg, start_table, rng, sampling, *, reverse=False, goal_num_predict=None):
  """Samples the positions to predict in one half of a record (the original `_sample_mask`).

  Spans of n ~ 1/n (n <= max_gram) start at a start piece after a random left context; each span and its
  context use about n*mask_alpha/mask_beta tokens. Random single tokens then fill up to `goal_num_predict`.
  numpy draws are those of the original (`choice(ngrams, p)`, `choice(ctx_size)`, `randint(seg_len)`), done with
  equivalent cheaper calls on the same stream.

  Args:
    seg: int64 [L] token ids.
    start_table: bool [vocab_size], `tokenization.start_piece_table(sp)`.
    rng: numpy RandomState.
    sampling: `MaskSampling`: mask_alpha, mask_beta, max_gram and span_sampling.
    reverse: `seg` is a backward row: flip it for the word-start search and flip the mask back.
    goal_num_predict: exact number of masked positions; None: no limit and no random fill.

  Returns:
    bool [L], True = predict this position.
  """
  mask_alpha, mask_beta = sampling.mask_alpha, sampling.mask_beta
  seg_len = len(seg)
  mask = np.zeros([seg_len], dtype=bool)
  if reverse:
    seg = seg[::-1]
  is_start = start_table[seg].tolist()
  cdf = _ngram_cdf(sampling.max_gram)
  word_spans = sampling.span_sampling == "word"
  randint = _legacy_randint(rng)
  num_predict = 0
  cur_len = 0
  while cur_len < seg_len:
    if goal_num_predict is not None and num_predict >= goal_num_predict:
      break
    n = bisect.bisect_right(cdf, rng.random_sample()) + 1  # == rng.choice(ngrams, p=pvals)
    if goal_num_predict is not None:
      n = min(n, goal_num_predict - num_predict)
    ctx_size = (n * mask_alpha) // mask_beta
    l_ctx = randint(ctx_size)  # == rng.choice(ctx_size)
    r_ctx = ctx_size - l_ctx

    beg = cur_len + l_ctx
    while beg < seg_len and not is_start[beg]:
      beg += 1
    if beg >= seg_len:
      break
    if word_spans:
      end, cnt_ngram = beg + 1, 1
      while end < seg_len:
        if is_start[end]:
          cnt_ngram += 1
          if cnt_ngram > n:
            break
        end += 1
    else:
      end = beg + n  # The original tests seg[beg] (always a start piece) when looking for the n+1-th word.
    if end >= seg_len:
      break
    if word_spans and goal_num_predict is not None:
      end = min(end, beg + goal_num_predict - num_predict)
    mask[beg:end] = True
    num_predict += end - beg
    cur_len = end + r_ctx

  while goal_num_predict is not None and num_predict < goal_num_predict:
    i = randint(seg_len)  # == rng.randint(seg_len)
    if not mask[i]:
      mask[i] = True
      num_predict += 1
  if reverse:
    mask = mask[::-1]
  return mask
