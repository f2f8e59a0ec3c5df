"""SQuAD examples -> features, as the original `run_squad.py`'s `convert_examples_to_features` (the examples are
`examples.read_squad_examples`').

A feature is one window of a paragraph with its question, laid out `P <sep> Q <sep> <cls>` and RIGHT-padded to
`max_seq_length` (ids 0): segment ids P and the first `<sep>` 0, Q and the second `<sep>` 1, `<cls>` 2, padding 3;
`p_mask` 1 where no answer can start or end (`<sep>`s, Q, padding), 0 on P and `<cls>`; `input_mask` 1 on padding.
Windows hold `max_tokens_for_doc = max_seq_length - len(Q) - 3` paragraph tokens and start `doc_stride` tokens
apart (the shift, not the overlap). Training labels: the answer's first/last token relative to the window, or
`cls_index` (with is_impossible) for an unanswerable question or an answer not wholly inside the window.
"""

import collections
import dataclasses

import numpy as np
from absl import logging

from xlnet_tf.config import check_field_types
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.squad import alignment as alignment_lib

SEG_ID_P = 0
SEG_ID_Q = 1
SEG_ID_CLS = 2
SEG_ID_PAD = 3
FIRST_UNIQUE_ID = 1000000000


@dataclasses.dataclass
class InputFeatures:
  """One window, as the original's InputFeatures (L = max_seq_length, W = paragraph_len).

  unique_id: int, FIRST_UNIQUE_ID + the feature's position in the conversion.
  example_index: int, the example's position; None in training (as the original).
  source_example: int, the example's position, also in training (not in the original).
  doc_span_index: int, the window's position among its example's windows.
  tok_start_to_orig_index, tok_end_to_orig_index: list of W ints, first/last raw character of each window token.
  token_is_max_context: list of W bools, True where this window gives the token its maximum context.
  input_ids: list of L ints. input_mask: list of L floats, 1.0 = padding. p_mask: list of L floats, 1.0 = cannot
    be an answer token. segment_ids: list of L ints.
  paragraph_len: int W. cls_index: int, position of `<cls>` (W + len(Q) + 2).
  start_position, end_position: int, answer tokens in the window, cls_index when impossible; None in evaluation.
  is_impossible: bool; training: impossible question or answer outside the window; evaluation: False.
  """
  unique_id: int
  example_index: object
  source_example: int
  doc_span_index: int
  tok_start_to_orig_index: list
  tok_end_to_orig_index: list
  token_is_max_context: list
  input_ids: list
  input_mask: list
  p_mask: list
  segment_ids: list
  paragraph_len: int
  cls_index: int
  start_position: object = None
  end_position: object = None
  is_impossible: bool = False


# ---------------------------------------------------------------------------------------------------------------
# Windows.


DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
  """The original's sliding windows: list of DocSpan(start, length) covering range(num_tokens)."""
  spans = []
  start = 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append(DocSpan(start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def max_context_spans(spans, num_tokens):
  """For each token, the index of the span giving it the most context (the original's `_check_is_max_context`).

  A token at p in span s scores min(p - start, end - p) + 0.01 * length; the highest wins, ties the earliest span.

  Returns:
    list of num_tokens span indices.
  """
  best_score = [None] * num_tokens
  best_span = [None] * num_tokens
  for s, span in enumerate(spans):
    end = span.start + span.length - 1
    for p in range(span.start, end + 1):
      score = min(p - span.start, end - p) + 0.01 * span.length
      if best_score[p] is None or score > best_score[p]:
        best_score[p] = score
        best_span[p] = s
  return best_span


def check_options(max_seq_length, max_query_length, doc_stride):
  """Validates the window options (--max_seq_length, --max_query_length, --doc_stride); raises ValueError."""
  for name, value, low in (("max_seq_length", max_seq_length, 4), ("max_query_length", max_query_length, 1),
                           ("doc_stride", doc_stride, 1)):
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
      raise ValueError(f"--{name} must be an integer >= {low}. Received: {name}={value!r}.")
  if max_seq_length < max_query_length + 4:
    raise ValueError(
        "--max_seq_length must hold the question, two <sep>, <cls> and at least one paragraph token: max_seq_length "
        f">= max_query_length + 4. Received: max_seq_length={max_seq_length}, max_query_length={max_query_length}. "
        "Raise --max_seq_length or lower --max_query_length.")
  if doc_stride >= max_seq_length - max_query_length - 3:
    logging.warning(
        "--doc_stride=%d >= the paragraph window of a %d-token question (%d tokens): windows do not overlap, so an "
        "answer that crosses a window boundary is in no window (labelled impossible in training, never predicted).",
        doc_stride, max_query_length, max_seq_length - max_query_length - 3)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FeatureOptions:
  """How examples become features: the original's window flags (checked by `check_options`) and `--uncased`.

  Attributes:
    max_seq_length: int, tokens per feature (--max_seq_length).
    doc_stride: int, paragraph tokens between the starts of two windows (--doc_stride).
    max_query_length: int, question tokens kept (--max_query_length).
    uncased: bool, lower-case question and paragraph, also in the alignment (--uncased).
  """
  max_seq_length: int
  doc_stride: int
  max_query_length: int
  uncased: bool = False

  def __post_init__(self):
    check_options(self.max_seq_length, self.max_query_length, self.doc_stride)
    check_field_types(self)  # uncased="False" lower-cased (sweep 35)


# ---------------------------------------------------------------------------------------------------------------
# Features.


@dataclasses.dataclass
class ConversionStats:
  """What a conversion produced: counts, and the qas_ids of examples dropped for an alignment mismatch."""
  num_examples: int = 0
  num_features: int = 0
  num_pos: int = 0
  num_neg: int = 0
  queries_truncated: int = 0
  dropped_mismatch: list = dataclasses.field(default_factory=list)


_Paragraph = collections.namedtuple("_Paragraph", ["ids", "tok_start_to_orig", "tok_end_to_orig"])


def _align_paragraphs(examples, sp_model, uncased, is_training):
  """Tokenises and aligns every distinct paragraph once (the original redoes it for every question).

  Returns:
    (paragraphs, answer_tokens): paragraphs maps a paragraph text to a _Paragraph (int32 [P]: piece ids, first and
    last raw character of each piece), or to None when the original drops it (MISMATCH); answer_tokens maps
    the index of a training example with an answer to its (first piece, last piece).
  """
  by_paragraph = collections.defaultdict(list)
  for k, example in enumerate(examples):
    by_paragraph[example.paragraph_text].append(k)
  paragraphs, answer_tokens = {}, {}
  for count, (text, members) in enumerate(by_paragraph.items()):
    if count % 1000 == 0:
      logging.info("Aligning paragraph %d/%d", count, len(by_paragraph))
    pieces = tokenization.encode_pieces(sp_model, tokenization.preprocess_text(text, lower=uncased))
    align = alignment_lib.align_pieces(text, pieces, uncased)
    if align is None:
      paragraphs[text] = None
      continue
    paragraphs[text] = _Paragraph(np.array([sp_model.PieceToId(piece) for piece in pieces], np.int32),
                                  align.tok_start_to_orig.astype(np.int32), align.tok_end_to_orig.astype(np.int32))
    for k in members:
      example = examples[k]
      if is_training and not example.is_impossible:
        start, answer = example.start_position, example.orig_answer_text
        if not (isinstance(start, int) and isinstance(answer, str) and answer and text[start:start + len(answer)]
                == answer and start >= 0):  # built in code: "The" trained as the answer "1999" (sweep 36)
          raise ValueError(f"Example {example.qas_id}: its answer {answer!r} is not the text at start_position "
                           f"{start!r} of its paragraph; fix start_position or orig_answer_text.")
        answer_end = example.start_position + len(example.orig_answer_text) - 1
        answer_tokens[k] = align.answer_token_span(example.start_position, answer_end)
        if answer_tokens[k][0] > answer_tokens[k][1]:
          raise ValueError(f"Example {example.qas_id}: its answer maps to pieces {answer_tokens[k]} (start after "
                           "end); check its answer_start and text.")
  return paragraphs, answer_tokens


@dataclasses.dataclass(frozen=True, kw_only=True)
class _ExampleWindows:
  """What every window of one example shares (`_window_feature`'s input besides the window itself).

  Attributes:
    example_index: int, the example's position. example: its SquadExample.
    paragraph: its `_Paragraph` (piece ids, first and last raw character of each piece).
    query_ids: list of int, the question's piece ids (truncated to max_query_length).
    best_span: list of int, per paragraph token the index of the window that gives it the maximum context.
    answer_tokens: (first piece, last piece) of the answer in the paragraph; None in evaluation and for an
      impossible question.
  """
  example_index: int
  example: object
  paragraph: _Paragraph
  query_ids: list
  best_span: list
  answer_tokens: tuple = None


def _window_feature(unique_id, span_index, span, shared, max_seq_length, is_training):
  """The InputFeatures of window `span` (number span_index) of an example (`shared`: its `_ExampleWindows`)."""
  example, paragraph, query_ids, best_span = shared.example, shared.paragraph, shared.query_ids, shared.best_span
  tokens, segment_ids, p_mask = [], [], []
  w = span.length
  tokens.extend(paragraph.ids[span.start:span.start + w].tolist())
  segment_ids.extend([SEG_ID_P] * w)
  p_mask.extend([0.0] * w)
  tokens.append(tokenization.SEP_ID)
  segment_ids.append(SEG_ID_P)
  p_mask.append(1.0)
  tokens.extend(query_ids)
  segment_ids.extend([SEG_ID_Q] * len(query_ids))
  p_mask.extend([1.0] * len(query_ids))
  tokens.append(tokenization.SEP_ID)
  segment_ids.append(SEG_ID_Q)
  p_mask.append(1.0)
  cls_index = len(tokens)
  tokens.append(tokenization.CLS_ID)
  segment_ids.append(SEG_ID_CLS)
  p_mask.append(0.0)
  input_mask = [0.0] * len(tokens)
  pad = max_seq_length - len(tokens)
  tokens.extend([0] * pad)
  input_mask.extend([1.0] * pad)
  segment_ids.extend([SEG_ID_PAD] * pad)
  p_mask.extend([1.0] * pad)

  is_impossible = example.is_impossible
  start_position = end_position = None
  if is_training:
    if not is_impossible:
      tok_start, tok_end = shared.answer_tokens
      if tok_start >= span.start and tok_end <= span.start + w - 1:
        start_position, end_position = tok_start - span.start, tok_end - span.start
      else:
        is_impossible = True
    if is_impossible:
      start_position = end_position = cls_index
  return InputFeatures(
      unique_id=unique_id,
      example_index=None if is_training else shared.example_index,
      source_example=shared.example_index,
      doc_span_index=span_index,
      tok_start_to_orig_index=paragraph.tok_start_to_orig[span.start:span.start + w].tolist(),
      tok_end_to_orig_index=paragraph.tok_end_to_orig[span.start:span.start + w].tolist(),
      token_is_max_context=[best_span[span.start + k] == span_index for k in range(w)],
      input_ids=tokens,
      input_mask=input_mask,
      p_mask=p_mask,
      segment_ids=segment_ids,
      paragraph_len=w,
      cls_index=cls_index,
      start_position=start_position,
      end_position=end_position,
      is_impossible=bool(is_impossible))


def convert_examples_to_features(examples, sp_model, options, is_training, output_fn):
  """Converts examples to InputFeatures exactly as the original, calling `output_fn(feature)` for each.

  unique_ids run from FIRST_UNIQUE_ID in example order. An example whose paragraph the original cannot align
  (its MISMATCH DETECTED) gets no feature and no unique_id; it is logged and listed in the returned stats. Each
  distinct paragraph is tokenised and aligned once, whatever the order of the examples (kept: ids and piece
  spans, about 3 KB per paragraph of 750 characters).

  Args:
    examples: list of SquadExample (training examples need orig_answer_text/start_position).
    sp_model: a loaded `sentencepiece.SentencePieceProcessor` (XLNet ids).
    options: `FeatureOptions` (max_seq_length, doc_stride, max_query_length, uncased).
    is_training: bool; training features carry start/end positions and is_impossible.
    output_fn: callable(InputFeatures).

  Returns:
    ConversionStats.
  """
  max_seq_length, doc_stride, max_query_length = options.max_seq_length, options.doc_stride, options.max_query_length
  uncased = options.uncased
  stats = ConversionStats(num_examples=len(examples))
  paragraphs, all_answer_tokens = _align_paragraphs(examples, sp_model, uncased, is_training)
  unique_id = FIRST_UNIQUE_ID
  for example_index, example in enumerate(examples):
    if example_index % 1000 == 0:
      logging.info("Converting %d/%d: %d features, %d dropped", example_index, len(examples), stats.num_features,
                   len(stats.dropped_mismatch))
    query_ids = tokenization.encode_ids(
        sp_model, tokenization.preprocess_text(example.question_text, lower=uncased))
    if len(query_ids) > max_query_length:
      query_ids = query_ids[:max_query_length]
      stats.queries_truncated += 1
    paragraph = paragraphs[example.paragraph_text]
    if paragraph is None:
      logging.warning("Dropped example %s (the original's MISMATCH DETECTED): fewer than 80%% of its paragraph's %d "
                      "characters align with its pieces, so it gets no feature.", example.qas_id,
                      len(example.paragraph_text))
      stats.dropped_mismatch.append(example.qas_id)
      continue
    num_tokens = len(paragraph.ids)
    spans = doc_spans(num_tokens, max_seq_length - len(query_ids) - 3, doc_stride)
    shared = _ExampleWindows(example_index=example_index, example=example, paragraph=paragraph, query_ids=query_ids,
                             best_span=max_context_spans(spans, num_tokens),
                             answer_tokens=all_answer_tokens.get(example_index))
    for span_index, span in enumerate(spans):
      feature = _window_feature(unique_id, span_index, span, shared, max_seq_length, is_training)
      output_fn(feature)
      unique_id += 1
      stats.num_features += 1
      if feature.is_impossible:
        stats.num_neg += 1
      else:
        stats.num_pos += 1
  logging.info("Converted %d examples into %d features (%d with an answer in the window, %d without).",
               len(examples), stats.num_features, stats.num_pos, stats.num_neg)
  if stats.dropped_mismatch:
    logging.warning("%d of %d examples were dropped for an alignment mismatch (as the original): %s",
                    len(stats.dropped_mismatch), len(examples), ", ".join(map(str, stats.dropped_mismatch[:20])))
  return stats


def build_features(examples, sp_model, options, is_training):
  """`convert_examples_to_features` collecting the features: returns (list of InputFeatures, ConversionStats)."""
  features = []
  stats = convert_examples_to_features(examples, sp_model, options, is_training, features.append)
  return features, stats
