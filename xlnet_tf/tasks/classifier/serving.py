"""SavedModel export: a fine-tuned classifier (or regressor) that takes raw text, tokenization inside the graph.

The exported `tf.Module` has the signatures
  serving_default(text_a: string [B]) and classify_pair(text_a: string [B], text_b: string [B])
returning, for classification, `probabilities` float32 [B, n_class] (softmax of the logits), `logits` [B, n_class]
and `label` string [B] (the label of the largest logit; of 2, as the prediction files: the second where logit1 -
logit0 > `predict_threshold`, else the first); for regression, `score` float32 [B] (the regression
value). The callable functions `encode(text_a)` and `encode_pair(text_a, text_b)` return the model inputs
`input_ids` int32 [B, L], `segment_ids` int32 [B, L] and `input_mask` float32 [B, L] (1 = padding).

The graph repeats the Python path (the task reader's `text_replacements`, e.g. imdb's `<br />` -> space, then
`tokenization.preprocess_text` + `encode_ids` + `convert_single_example`):
1. the task's text replacements; whitespace runs (every character `str.isspace` accepts) become one space, ends
   stripped; ` `` ` and `''` become `"`; NFKD (`tf_text.normalize_utf8`) and removal of the characters with a
   non-zero Unicode combining class (the table is Python's `unicodedata`, built at export time); lower-casing when
   uncased;
2. the SentencePiece model via `tf_text.SentencepieceTokenizer`, then the original's digit-comma rule (a piece
   such as `▁2000,` becomes `▁2000`, `,`): the rule depends on the piece alone, so every such vocabulary piece's
   replacement is computed at export time with the Python rule and applied in the graph by a table lookup;
3. truncation (`a[:L-2]`; pairs: pop from the longer, ties pop b, to L-3), `A SEP [B SEP] CLS`, segment ids A 0,
   B 1, CLS 2, LEFT padding with id 0, segment 4 and input_mask 1. As the original, an empty text_b (no tokens)
   gives the single-text layout.
Loading needs `import tensorflow_text` first (it registers the SentencePiece op):
  import tensorflow as tf, tensorflow_text
  model = tf.saved_model.load(export_dir)
  model.signatures["serving_default"](text_a=tf.constant(["A fine film."]))["probabilities"]

Known differences from the Python path (measured in tests/test_serving.py's docstring): tf-text bundles its own
SentencePiece build, whose Viterbi search breaks ties differently on some runs of one character (`!!!!!!`,
`hmmm`): about 0.2% of IMDB reviews get other ids within their first 126 tokens; lower-casing uses TF's UTF-8
case table, which lacks 40 capitals added in Unicode 14; NFKD uses ICU's Unicode version, Python's
`unicodedata` may be newer or older.
"""

import functools
import glob as glob_lib
import os
import re
import sys
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from xlnet_tf import checkpoint_paths
from xlnet_tf import fileio
from xlnet_tf import locks
from xlnet_tf import path_errors
from xlnet_tf.config import fits
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.classifier import features as classifier_features
from xlnet_tf.tasks.classifier import task as finetune


def _char_class(code_points):
  """An RE2 character class matching exactly `code_points` (sorted ints)."""
  parts = []
  start = prev = code_points[0]
  for c in list(code_points[1:]) + [None]:
    if c is not None and c == prev + 1:
      prev = c
      continue
    parts.append(f"\\x{{{start:x}}}" if start == prev else f"\\x{{{start:x}}}-\\x{{{prev:x}}}")
    if c is not None:
      start = prev = c
  return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=None)
def _character_classes():
  """(whitespace, combining): RE2 classes of the characters Python's `str.split()` splits on and of those with a
  non-zero canonical combining class (what `preprocess_text` drops after NFKD)."""
  return (_char_class([c for c in range(sys.maxunicode + 1) if chr(c).isspace()]),
          _char_class([c for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c))]))


def preprocess_text_graph(text, lower=False):
  """`tokenization.preprocess_text(text, lower)` (remove_space=True, keep_accents=False) on a string tensor [B]."""
  whitespace, combining = _character_classes()
  text = tf.strings.regex_replace(text, whitespace + "+", " ")
  text = tf.strings.regex_replace(text, "^ | $", "")
  text = tf.strings.regex_replace(text, "``|''", '"')
  text = tf_text.normalize_utf8(text, "NFKD")
  text = tf.strings.regex_replace(text, combining, "")
  if lower:
    text = tf.strings.lower(text, encoding="utf-8")
  return text


def digit_comma_replacements(sp_model):
  """{piece id: [ids]} for every vocabulary piece the original's digit-comma rule re-encodes.

  The rule (`prepro_utils.encode_pieces`): a piece longer than 1 that ends in `,` after a digit is re-encoded
  without the comma and without `▁`; if the piece did not start with `▁` the new first piece loses its `▁`; then
  the comma follows as its own piece. Pieces are mapped to ids with `PieceToId` (so a piece outside the vocabulary
  becomes `<unk>`), exactly as `encode_ids` does.
  """
  table = {}
  for idx in range(sp_model.GetPieceSize()):
    piece = sp_model.IdToPiece(idx)
    if not tokenization._is_digit_comma(piece):  # pylint: disable=protected-access
      continue
    pieces = sp_model.EncodeAsPieces(piece[:-1].replace(tokenization.SPIECE_UNDERLINE, ""))
    if piece[0] != tokenization.SPIECE_UNDERLINE and pieces and pieces[0][0] == tokenization.SPIECE_UNDERLINE:
      pieces = pieces[1:] if len(pieces[0]) == 1 else [pieces[0][1:]] + pieces[1:]
    table[idx] = [sp_model.PieceToId(p) for p in pieces + [piece[-1]]]
  return table


def truncated_lengths(len_a, len_b, max_seq_length):
  """Lengths of A and B after the original truncation, in closed form, on int tensors [B].

  Single text (len_b == 0): `a[:L-2]`. Pair: `_truncate_seq_pair(a, b, L-3)`, which pops from the longer list and
  from b on ties: only the longer one shrinks while the shorter fits in half the budget; else they end at
  (ceil(s/2), floor(s/2)) for a budget s.
  """
  s = max_seq_length - 3
  hi, lo = (s + 1) // 2, s // 2
  fits = len_a + len_b <= s
  a_pair = tf.where(fits, len_a,
                    tf.where((len_a >= len_b) & (len_b <= lo), s - len_b,
                             tf.where((len_b > len_a) & (len_a <= hi), len_a, hi)))
  b_pair = tf.where(fits, len_b, s - a_pair)
  has_b = len_b > 0
  a = tf.where(has_b, a_pair, tf.minimum(len_a, max_seq_length - 2))
  b = tf.where(has_b, b_pair, tf.zeros_like(len_b))
  return a, b


class ClassifierModule(tf.Module):
  """Raw text in, probabilities (or the regression value) out; see the module docstring.

  Args:
    model: an XLNetModel for inference (is_training=False) with the head `scope` and fine-tuned weights.
    spiece_model_file: the SentencePiece model the classifier was trained with.
    scope: the head scope (`classification_*` or `regression_*`).
    label_list: list of label strings (classification) or None (regression).
    max_seq_length: int, L.
    uncased: bool, lower-case the text (the --uncased of training).
    text_replacements: ((old, new), ...) applied to every text first: the task reader's (`DataProcessor`).
    predict_threshold: float, --predict_threshold: where the label of 2 is the second (`_classify`).
  """

  def __init__(self, model, spiece_model_file, scope, label_list, max_seq_length, uncased, text_replacements=(),
               predict_threshold=0.0):
    super().__init__(name="xlnet_classifier")
    self.text_replacements = tuple(text_replacements)
    label_list = None if label_list is None else list(label_list)  # a numpy array's truth was ambiguous
    classifier_features.check_max_seq_length(max_seq_length, is_pair=False)
    self.model = model
    self._model_variables = list(model.variables)  # Tracked explicitly (Keras lists are not, see training.py).
    self.scope = scope
    self.is_regression = scope.startswith("regression_")
    self.max_seq_length = max_seq_length
    self.uncased = uncased
    sp_model = tokenization.load_sentencepiece(spiece_model_file)
    _check_the_model_s(model, scope, label_list, uncased, sp_model, spiece_model_file)
    with tf.io.gfile.GFile(spiece_model_file, "rb") as f:
      self.tokenizer = tf_text.SentencepieceTokenizer(model=f.read(), out_type=tf.int32)
    vocab = sp_model.GetPieceSize()
    replacements = digit_comma_replacements(sp_model)
    rows = [replacements.get(i, [i]) for i in range(vocab)]
    lengths = np.array([len(r) for r in rows], np.int64)
    self._replacement_values = tf.constant(np.concatenate(rows).astype(np.int32))  # every id's replacement ids
    self._replacement_lengths = tf.constant(lengths)  # [V], how many ids replace id v (1 unless digit-comma)
    self._replacement_starts = tf.constant(np.cumsum(lengths) - lengths)  # [V], where they start
    self.labels = tf.constant([str(x) for x in (label_list or [])], tf.string)
    self.has_labels = bool(label_list)
    self.predict_threshold = float(predict_threshold)

    # Any shape, checked in the graph (`_batch_of_texts`): under a [None] spec a scalar or an [N, 1] batch (TF
    # Serving's {"inputs": "text"}, {"instances": [["text"]]}) reached the signature unchecked and failed inside it
    # with TensorFlow's words ("Invalid reduction dimension"), a check of rank 1 there being folded away.
    text = tf.TensorSpec(None, tf.string)
    function = lambda fn, n: tf.function(fn, input_signature=[text] * n, autograph=False)
    self.encode = function(lambda text_a: self._encode(text_a, None), 1)
    self.encode_pair = function(self._encode, 2)
    self.classify = function(lambda text_a: self._classify(text_a, None), 1)
    self.classify_pair = function(self._classify, 2)

  def _tokenize(self, text):
    """string [B] -> int32 RaggedTensor [B, (T)], the ids of `encode_ids(preprocess_text(text))`; an
    InvalidArgumentError naming the indices of the texts that are not UTF-8 (the Python path refuses such a
    file)."""
    utf8 = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
    bad = tf.where(tf.not_equal(utf8, text))[:, 0]  # data: the line and the indices, not the bytes
    check = tf.debugging.Assert(tf.equal(tf.size(bad), 0), ["a text is not UTF-8: send UTF-8 encoded strings. The "
                                                            "batch's texts at these indices are not:", bad])
    with tf.control_dependencies([check]):
      text = tf.identity(text)
    for old, new in self.text_replacements:
      text = tf.strings.regex_replace(text, f"\\Q{old}\\E", new)  # RE2: between \Q and \E, literal text
    ids = self.tokenizer.tokenize(preprocess_text_graph(text, lower=self.uncased))
    flat_ids = ids.flat_values  # [N]
    starts = tf.gather(self._replacement_starts, flat_ids)  # [N]
    lengths = tf.gather(self._replacement_lengths, flat_ids)  # [N], 1 except for digit-comma pieces
    # Every id expands to its replacement, _replacement_values[starts[i] : starts[i] + lengths[i]].
    flat_pos = tf.ragged.range(starts, starts + lengths).flat_values
    values = tf.gather(self._replacement_values, flat_pos)
    # Row splits of the expanded ids: the running total of `lengths` at each row's split. Not value_rowids(), which
    # TensorFlow builds through a [B, longest text] mask (sweep 34, S2).
    ends = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(tf.cast(lengths, tf.int64))], 0)
    return tf.RaggedTensor.from_row_splits(values, tf.gather(ends, ids.row_splits))

  def _encode(self, text_a, text_b=None):
    """The model inputs of texts (pairs when text_b is given): int32 ids and segments, float mask, [B, L]."""
    seq_len = self.max_seq_length
    text_a = _batch_of_texts(text_a, "text_a")
    if text_b is not None:  # a clear error, not a failed gather deep in the graph
      text_b = _batch_of_texts(text_b, "text_b")
      check = tf.debugging.assert_equal(tf.size(text_a), tf.size(text_b), message="classify_pair: text_a and text_b "
                                        "must hold as many texts (one pair each)")
      with tf.control_dependencies([check]):
        text_a = tf.identity(text_a)
    a = self._tokenize(text_a)
    if text_b is None:
      b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([a.nrows()], tf.int64))
    else:
      b = self._tokenize(text_b)
    len_a, len_b = truncated_lengths(a.row_lengths(), b.row_lengths(), seq_len)  # int64 [B]
    a, b = a[:, :seq_len], b[:, :seq_len]  # each keeps at most its first seq_len ids: dense below, [B, L + 1] (S2)
    has_b = tf.cast(len_b > 0, tf.int64)
    n = len_a + 1 + len_b + has_b + 1  # A SEP [B SEP] CLS
    pos = tf.range(seq_len, dtype=tf.int64)[None, :] - tf.expand_dims(seq_len - n, 1)  # [B, L], -1.. = padding
    la, lb = tf.expand_dims(len_a, 1), tf.expand_dims(len_b, 1)
    dense_a = tf.pad(a.to_tensor(default_value=0), [[0, 0], [0, 1]])  # [B, Ta + 1]
    dense_b = tf.pad(b.to_tensor(default_value=0), [[0, 0], [0, 1]])
    from_a = tf.gather(dense_a, tf.clip_by_value(pos, 0, tf.shape(dense_a, out_type=tf.int64)[1] - 1), batch_dims=1)
    from_b = tf.gather(dense_b, tf.clip_by_value(pos - la - 1, 0, tf.shape(dense_b, out_type=tf.int64)[1] - 1),
                       batch_dims=1)
    real = pos >= 0
    in_a = real & (pos < la)
    in_b = (pos > la) & (pos <= la + lb)
    is_cls = pos == tf.expand_dims(n - 1, 1)
    sep, cls = tokenization.SEP_ID, tokenization.CLS_ID
    input_ids = tf.where(in_a, from_a, tf.where(in_b, from_b, tf.where(is_cls, cls, tf.where(real, sep, 0))))
    seg = tf.where(pos <= la, classifier_features.SEG_ID_A, classifier_features.SEG_ID_B)
    seg = tf.where(is_cls, classifier_features.SEG_ID_CLS, seg)
    seg = tf.where(real, seg, classifier_features.SEG_ID_PAD)
    return {"input_ids": tf.cast(input_ids, tf.int32), "segment_ids": tf.cast(seg, tf.int32),
            "input_mask": tf.cast(tf.logical_not(real), tf.float32)}

  def _classify(self, text_a, text_b=None):
    features = self._encode(text_a, text_b)
    features["label_ids"] = tf.zeros_like(features["input_ids"][:, 0],
                                          tf.float32 if self.is_regression else tf.int32)
    logits, _ = finetune.forward(self.model, features, self.scope, training=False)
    if self.is_regression:
      return {"score": logits}
    out = {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits}
    if self.has_labels and self.labels.shape[0] == 2:  # `metrics.predictions_from_logits`: in float64, as Python's
      pair = tf.cast(logits, tf.float64)               # float() of each logit there
      out["label"] = tf.gather(self.labels, tf.cast(pair[:, 1] - pair[:, 0] > self.predict_threshold, tf.int32))
    elif self.has_labels:
      out["label"] = tf.gather(self.labels, tf.argmax(logits, axis=-1))
    return out


def _check_the_model_s(model, scope, label_list, uncased, sp_model, spiece_model_file):
  """ValueError where the export would not serve as `model` was trained: a string for `uncased` ("False" lower-cased
  every text), a SentencePiece model of more pieces than the model's n_token, labels of another count than the head's
  classes (each request failed, or exported without a word: sweep 35)."""
  if not fits(bool, uncased):
    raise TypeError(f"uncased must be True or False (the --uncased of training). Received: {uncased!r}.")
  pieces, n_token = sp_model.GetPieceSize(), model.xlnet_config.n_token
  if pieces > n_token:
    raise ValueError(f"The SentencePiece model {spiece_model_file} has {pieces} pieces, more than the model's "
                     f"n_token={n_token}. Pass the spiece.model the model was trained with.")
  classes = model.heads[scope].n_out if scope in model.heads else None  # no such head: the model's call says so
  if label_list and classes is not None and len(label_list) != classes:
    raise ValueError(f"label_list names {len(label_list)} classes ({', '.join(map(str, label_list))}), the head "
                     f"{scope} has {classes}. Pass the labels the head was fine-tuned with.")


def _batch_of_texts(text, name):
  """text as a string [B], checked in the graph to be one: a clear error for a scalar or an [N, 1] batch."""
  check = tf.debugging.assert_rank(text, 1, message=f"{name} must be a batch of texts, a string tensor of shape "
                                   "[B] (a list of strings; one text is a list of one)")
  with tf.control_dependencies([check]):
    return tf.reshape(text, [-1])


SAVED_MODEL_MARKER = checkpoint_paths.SAVED_MODEL_MARKER  # in every SavedModel directory
# What an export writes (tf.saved_model.save), and TF Serving's place for a user's files (its warm-up requests,
# assets.extra/tf_serving_warmup_requests), which a new export carries over from the one it replaces.
EXPORT_ENTRIES = (SAVED_MODEL_MARKER, "fingerprint.pb", "variables", "assets")
USER_ENTRIES = "assets.extra"
_VARIABLES_FILE = re.compile(r"variables\.(index|data-\d+-of-\d+)")  # what an export writes in variables/
# Files a file manager leaves in any folder it shows (view settings, thumbnails), made again when it is opened:
# harmless, neither refused nor carried over.
OS_FILES = (".DS_Store", "Thumbs.db", "desktop.ini")


def _entries(export_dir):
  """The names in the directory export_dir, but for file managers' `OS_FILES`."""
  return {name.rstrip("/") for name in fileio.listdir(export_dir)} - set(OS_FILES)


def check_export_dir(export_dir, what="the SavedModel directory"):
  """ValueError where export_dir cannot be replaced whole by an export: a file or a directory that is not a
  SavedModel (`fileio.check_output_dir`), or a SavedModel holding entries an export does not write (a user's
  NOTES.md), which were deleted with it. The message names them; the directory is left as it is. A directory
  holding only assets.extra/ (warm-up requests prepared before the first export) is taken, and a file manager's
  `OS_FILES` are not counted; a FILE named assets.extra is refused (it was deleted with the old model: sweep 27,
  U14)."""
  if not fileio.is_remote(export_dir) and fileio.is_within(os.getcwd(), export_dir):  # `--export_dir=.` (sweep 31)
    raise ValueError(f"Cannot use {what} {export_dir}: it is the working directory or holds it, and an export "
                     "replaces the directory whole (a shell in it would be left in a deleted directory). Pass a "
                     f"directory below it, e.g. {os.path.join(export_dir, 'export')}.")
  parent = os.path.dirname(fileio.real_path(export_dir))  # one inside a SavedModel blocked its re-export (sweep 34, S4)
  while not fileio.is_remote(export_dir) and parent != os.path.dirname(parent):
    if checkpoint_paths.is_saved_model(parent):
      raise ValueError(f"Cannot use {what} {export_dir}: it is inside the SavedModel {parent}, whose re-export would "
                       "refuse it or delete it. Pass a directory outside it.")
    parent = os.path.dirname(parent)
  size, room = len(os.path.basename(str(export_dir).rstrip("/")).encode("utf-8")), path_errors.temp_name_room(".old")
  if size > room and not fileio.is_remote(export_dir):  # refused after the whole training (sweep 32, U12)
    raise ValueError(f"Cannot use {what} {export_dir}: its name is too long ({size} bytes; at most {room} with the "
                     "temporary names an export writes beside it before renaming). Pass a shorter name.")
  entries = _entries(export_dir) if fileio.isdir(export_dir) else None
  if entries and USER_ENTRIES in entries and not fileio.isdir(os.path.join(export_dir, USER_ENTRIES)):
    raise ValueError(f"Cannot use {what} {export_dir}: its {USER_ENTRIES} is a file, where TF Serving reads a "
                     f"directory ({USER_ENTRIES}/tf_serving_warmup_requests) and an export carries over only that "
                     f"directory: the file would be deleted. Move it into {USER_ENTRIES}/ (as "
                     "tf_serving_warmup_requests) or elsewhere, or pass another directory.")
  fileio.check_output_dir(export_dir, what, None if entries is not None and entries <= {USER_ENTRIES} else
                          SAVED_MODEL_MARKER)
  if entries is None:
    return
  others = sorted(entries - {*EXPORT_ENTRIES, USER_ENTRIES})
  for sub in ("variables", "assets"):  # a user's notes in them went too (sweep 32, U1); an export writes no asset
    if sub in entries and fileio.isdir(os.path.join(export_dir, sub)):
      others += [f"{sub}/{name}" for name in sorted(_entries(os.path.join(export_dir, sub)))
                 if not (sub == "variables" and _VARIABLES_FILE.fullmatch(name))]
  if others := sorted(others):
    raise ValueError(f"Cannot use {what} {export_dir}: it holds {', '.join(others)} beside the SavedModel, which an "
                     f"export does not write and would delete with the old model (only {USER_ENTRIES}/ is carried "
                     "over). Move them elsewhere, or pass another directory.")


def _carry_user_entries(export_dir, tmp):
  """Copies export_dir's assets.extra/ (TF Serving's warm-up requests), if any, into the new export at tmp."""
  source = os.path.join(export_dir, USER_ENTRIES)
  if not fileio.isdir(source):
    return
  for directory, _, names in tf.io.gfile.walk(source):
    target = os.path.join(tmp, USER_ENTRIES, os.path.relpath(directory, source))
    tf.io.gfile.makedirs(target)
    for name in names:
      tf.io.gfile.copy(os.path.join(directory, name), os.path.join(target, name))


def export_saved_model(model, spiece_model_file, export_dir, scope, label_list, max_seq_length, uncased,
                       text_replacements=(), predict_threshold=0.0):
  """Exports `ClassifierModule(...)` as a SavedModel in export_dir (written to a temporary directory, then
  moved into place). An existing export_dir is replaced only if it is empty or a SavedModel (`saved_model.pb`)
  holding only what an export writes and assets.extra/, which is carried over (or a directory holding only
  assets.extra/), a file manager's `OS_FILES` aside; anything else is a ValueError (`check_export_dir`) and left as
  it is.

  Returns:
    export_dir.
  """
  if not fileio.is_remote(export_dir):  # "d/." or "d/..": the temporary went inside d, and it was refused (sweep 30)
    export_dir = os.path.abspath(export_dir)
  check_export_dir(export_dir)
  module = ClassifierModule(model, spiece_model_file, scope, label_list, max_seq_length, uncased, text_replacements,
                            predict_threshold)
  signatures = {"serving_default": module.classify.get_concrete_function(),
                "classify_pair": module.classify_pair.get_concrete_function()}
  parent, lock_name = locks.export_lock(export_dir)
  tf.io.gfile.makedirs(parent)
  base = os.path.basename(export_dir.rstrip("/"))
  # one export into export_dir at a time (its lock is beside it: the directory is replaced), which removes what a
  # killed export left; none while a conversion writes into the directory (its files went with the old directory)
  with locks.directory_lock(parent, name=lock_name, what="--export_dir", shown=export_dir,
                            temporaries=[glob_lib.escape(base) + ".tmp-*"],
                            others=[os.path.join(export_dir, locks.lock_file("convert"))]):
    # the existing directory is replaced where it holds this marker (checked above): a SavedModel's, else the entry
    # a directory prepared for one holds
    marker = next((name for name in (SAVED_MODEL_MARKER, USER_ENTRIES, *OS_FILES)
                   if fileio.exists(os.path.join(export_dir, name))), SAVED_MODEL_MARKER)
    with fileio.atomic_path(export_dir, marker=marker) as tmp:
      tf.saved_model.save(module, tmp, signatures=signatures)
      _carry_user_entries(export_dir, tmp)
  return export_dir
