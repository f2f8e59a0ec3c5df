"""Fine-tuning data: task files -> `InputExample`s -> features -> the original classifier TFRecords.

Behaves as the original `run_classifier.py` / `classifier_utils.py`:
- processors read the original file layouts (GLUE tsv, aclImdb directories, Yelp csv) plus the GLUE tasks the
  original reports but never wired, and a generic `csv`/`tsv` task;
- `convert_single_example` lays a sequence out as `A SEP [B SEP] CLS`, LEFT-padded with id 0, with
  `input_mask` 1 = padding (0 = real token) and segment ids A=0, B=1, CLS=2, PAD=4;
- records keep the original feature names and cached file names.
Tokenization is passed in as `tokenize_fn(text) -> list[int]`, as in the original.
"""

import collections
import csv
import dataclasses
import numbers
import os
import uuid

import tensorflow as tf
from absl import logging

from xlnet_tf import metrics

SEG_ID_A = 0
SEG_ID_B = 1
SEG_ID_CLS = 2
SEG_ID_SEP = 3  # Defined by the original, never used by the classifier.
SEG_ID_PAD = 4
SEP_ID = 4  # `<sep>` in the released SentencePiece vocabulary.
CLS_ID = 3  # `<cls>`.

EVAL_SPLITS = ("dev", "test")


@dataclasses.dataclass
class InputExample:
  """One example: `text_a`, optional `text_b`, and a label (a string, or a float for regression)."""
  guid: str
  text_a: str
  text_b: str = None
  label: object = None


class PaddingInputExample:
  """A fake example that pads an eval set to a multiple of the batch size; its features have is_real_example=0."""


@dataclasses.dataclass
class InputFeatures:
  """The features of one example, all lists of length max_seq_length except label_id and is_real_example."""
  input_ids: list
  input_mask: list
  segment_ids: list
  label_id: object
  is_real_example: bool = True


# ---------------------------------------------------------------------------------------------------------------
# File reading helpers.


def _open_text(path):
  if "://" in path:
    return tf.io.gfile.GFile(path, "r")
  return open(path, encoding="utf-8", newline="")


def _require_file(path, task_name):
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"Task {task_name!r} needs the file {path}, which does not exist. Point --data_dir at "
                            f"the directory holding {os.path.basename(path)}.")


def _read_rows(path, task_name, delimiter, quoting):
  """Yields (physical line number, row) for every non-empty row of a delimited file."""
  _require_file(path, task_name)
  with _open_text(path) as f:
    reader = csv.reader(f, delimiter=delimiter, quoting=quoting)
    try:
      for row in reader:
        if row:
          yield reader.line_num, row
    except csv.Error as e:
      raise ValueError(f"{path} line {reader.line_num} is not valid {task_name} data: {e}. Fix the file.") from None
    except UnicodeDecodeError as e:
      raise ValueError(f"{path} is not UTF-8 text ({e}). Re-encode it as UTF-8.") from None


def _is_int_at_least(value, low):
  return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low


def _check_label(label, labels, path, line_num, task_name):
  if label not in labels:
    raise ValueError(f"Label {label!r} in {path} line {line_num} is not one of the labels of task {task_name!r}: "
                     f"{labels}. Fix the file, or pick the task that matches it with --task_name.")


def _parse_float_label(text, path, line_num, task_name):
  try:
    return float(text)
  except ValueError:
    raise ValueError(f"Regression label {text!r} in {path} line {line_num} (task {task_name!r}) is not a number. "
                     "Fix the file.") from None


# ---------------------------------------------------------------------------------------------------------------
# Processors.


class DataProcessor:
  """Base class: reads one task's train/dev/test files into `InputExample`s.

  Attributes:
    task_name: str, the registry name (`--task_name`).
    is_regression: bool, float labels and a regression head (run with --is_regression=True).
  """
  task_name = None
  is_regression = False

  def get_train_examples(self, data_dir):
    raise NotImplementedError()

  def get_dev_examples(self, data_dir):
    raise NotImplementedError()

  def get_test_examples(self, data_dir):
    raise NotImplementedError()

  def get_labels(self):
    raise NotImplementedError()

  def get_eval_examples(self, data_dir, eval_split="dev"):
    """The examples `--eval_split` selects: "dev" -> dev examples, "test" -> test examples (as the original)."""
    if eval_split not in EVAL_SPLITS:
      raise ValueError(f"--eval_split must be one of {EVAL_SPLITS}. Received: {eval_split!r}.")
    return self.get_dev_examples(data_dir) if eval_split == "dev" else self.get_test_examples(data_dir)

  @property
  def metric_names(self):
    """The metrics this task reports, as keys of `metrics.task_metrics` without the `eval_` prefix."""
    return metrics.metric_names(self.task_name, self.is_regression)


class GLUEProcessor(DataProcessor):
  """A GLUE task: `train.tsv`, `dev.tsv`, `test.tsv`, tab separated, no quoting, empty rows skipped.

  Rows too short for a needed column are skipped with a warning (as the original; QQP and QNLI have some).
  Test examples get the placeholder label `get_labels()[0]`.
  """
  train_file, dev_file, test_file = "train.tsv", "dev.tsv", "test.tsv"
  text_a_column, text_b_column, label_column = None, None, None
  test_text_a_column, test_text_b_column = None, None  # None: same as train.
  contains_header = True
  test_contains_header = True
  labels = ("0", "1")

  def get_labels(self):
    return list(self.labels)

  def get_train_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, self.train_file), "train")

  def get_dev_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, self.dev_file), "dev")

  def get_test_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, self.test_file), "test")

  def _label(self, text, path, line_num):
    _check_label(text, self.get_labels(), path, line_num, self.task_name)
    return text

  def _create_examples(self, path, set_type):
    is_test = set_type == "test"
    header = self.test_contains_header if is_test else self.contains_header
    a_col = self.test_text_a_column if is_test and self.test_text_a_column is not None else self.text_a_column
    b_col = self.test_text_b_column if is_test and self.test_text_b_column is not None else self.text_b_column
    examples = []
    for i, (line_num, row) in enumerate(_read_rows(path, self.task_name, "\t", csv.QUOTE_NONE)):
      if i == 0 and header:
        continue
      needed = [a_col] + ([b_col] if b_col is not None else []) + ([] if is_test else [self.label_column])
      if any(c >= len(row) for c in needed):
        logging.warning("Incomplete line, ignored: %s line %d has %d columns.", path, line_num, len(row))
        continue
      text_b = row[b_col] if b_col is not None else None
      label = self.get_labels()[0] if is_test else self._label(row[self.label_column], path, line_num)
      examples.append(InputExample(guid=f"{set_type}-{i}", text_a=row[a_col], text_b=text_b, label=label))
    return examples


class MnliMatchedProcessor(GLUEProcessor):
  task_name = "mnli_matched"
  dev_file, test_file = "dev_matched.tsv", "test_matched.tsv"
  text_a_column, text_b_column, label_column = 8, 9, -1
  labels = ("contradiction", "entailment", "neutral")


class MnliMismatchedProcessor(MnliMatchedProcessor):
  task_name = "mnli_mismatched"
  dev_file, test_file = "dev_mismatched.tsv", "test_mismatched.tsv"


class StsbProcessor(GLUEProcessor):
  """STS-B: float similarity scores in [0, 5]; `get_labels()` is `[0.0]` as the original."""
  task_name = "sts-b"
  is_regression = True
  text_a_column, text_b_column, label_column = 7, 8, 9
  labels = (0.0,)

  def _label(self, text, path, line_num):
    return _parse_float_label(text, path, line_num, self.task_name)


class ColaProcessor(GLUEProcessor):
  """CoLA: train/dev have no header (source, label, original mark, sentence); test is `index\\tsentence`."""
  task_name = "cola"
  text_a_column, label_column = 3, 1
  test_text_a_column = 1
  contains_header = False


class Sst2Processor(GLUEProcessor):
  task_name = "sst-2"
  text_a_column, label_column = 0, 1
  test_text_a_column = 1


class MrpcProcessor(GLUEProcessor):
  task_name = "mrpc"
  text_a_column, text_b_column, label_column = 3, 4, 0


class QqpProcessor(GLUEProcessor):
  task_name = "qqp"
  text_a_column, text_b_column, label_column = 3, 4, 5
  test_text_a_column, test_text_b_column = 1, 2


class QnliProcessor(GLUEProcessor):
  task_name = "qnli"
  text_a_column, text_b_column, label_column = 1, 2, 3
  labels = ("entailment", "not_entailment")


class RteProcessor(QnliProcessor):
  task_name = "rte"


class WnliProcessor(GLUEProcessor):
  task_name = "wnli"
  text_a_column, text_b_column, label_column = 1, 2, 3


class ImdbProcessor(DataProcessor):
  """aclImdb: `{data_dir}/{train,test}/{neg,pos}/*txt`; dev (and test) read `test/`; `<br />` becomes a space."""
  task_name = "imdb"

  def get_labels(self):
    return ["neg", "pos"]

  def get_train_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, "train"))

  def get_dev_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, "test"))

  def get_test_examples(self, data_dir):
    return self.get_dev_examples(data_dir)

  def _create_examples(self, split_dir):
    examples = []
    for label in self.get_labels():
      cur_dir = os.path.join(split_dir, label)
      if not tf.io.gfile.isdir(cur_dir):
        raise FileNotFoundError(f"Task 'imdb' needs the directory {cur_dir} of *.txt reviews, which does not exist. "
                                "Point --data_dir at the aclImdb directory (holding train/ and test/).")
      for filename in sorted(tf.io.gfile.listdir(cur_dir)):
        if not filename.endswith("txt"):
          continue
        path = os.path.join(cur_dir, filename)
        try:
          with _open_text(path) as f:
            text = f.read().strip().replace("<br />", " ")
        except UnicodeDecodeError as e:
          raise ValueError(f"{path} is not UTF-8 text ({e}). Re-encode it as UTF-8.") from None
        examples.append(InputExample(guid=f"{os.path.basename(split_dir)}-{label}-{filename}", text_a=text,
                                     label=label))
    return examples


class Yelp5Processor(DataProcessor):
  """Yelp-5: `train.csv`, dev (and test) = `test.csv`; comma csv, no header; label = column 0, text = column 1."""
  task_name = "yelp5"

  def get_labels(self):
    return ["1", "2", "3", "4", "5"]

  def get_train_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, "train.csv"))

  def get_dev_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, "test.csv"))

  def get_test_examples(self, data_dir):
    return self.get_dev_examples(data_dir)

  def _create_examples(self, path):
    examples = []
    for i, (line_num, row) in enumerate(_read_rows(path, self.task_name, ",", csv.QUOTE_MINIMAL)):
      if len(row) < 2:
        raise ValueError(f"{path} line {line_num} must have 2 columns (label, text); it has {len(row)}. Fix the file.")
      _check_label(row[0], self.get_labels(), path, line_num, self.task_name)
      text = row[1].replace('""', '"').replace('\\"', '"')
      examples.append(InputExample(guid=str(i), text_a=text, label=row[0]))
    return examples


class DelimitedProcessor(DataProcessor):
  """The generic `csv` / `tsv` task: the user names the text column(s) and the label column.

  Args:
    task_name: "csv" (comma separated, '"' quoting) or "tsv" (tab separated, no quoting, like GLUE).
    text_a_column: int or str. Column of the first text: an index (int or digit string) or a header name.
    label_column: int or str. Column of the label, as text_a_column.
    text_b_column: int, str or None. Column of the second text; None: single-text task.
    labels: list of str or None. The label list (its order fixes the label ids). None: the sorted set of
      labels in the training file (numerically sorted if every label is an integer).
    has_header: bool. Whether every file starts with a header row (needed for column names).
    is_regression: bool. Float labels (run with --is_regression=True).
    train_file, dev_file, test_file: file names inside data_dir; default `{train,dev,test}.{csv|tsv}`.
    data_dir: str or None. Where get_labels() reads the training file when labels is None.
  Test examples get the placeholder label `get_labels()[0]` (0.0 for regression); their label column is not read.
  """

  def __init__(self, task_name, text_a_column=None, label_column=None, text_b_column=None, labels=None,
               has_header=True, is_regression=False, train_file=None, dev_file=None, test_file=None, data_dir=None):
    if text_a_column is None or label_column is None:
      raise ValueError(f"Task {task_name!r} needs the text and label columns. Received text_a_column="
                       f"{text_a_column!r}, label_column={label_column!r}. Pass them (e.g. --text_a_column=sentence "
                       "--label_column=label).")
    self.task_name = task_name
    self.delimiter, self.quoting = ("\t", csv.QUOTE_NONE) if task_name == "tsv" else (",", csv.QUOTE_MINIMAL)
    self.text_a_column, self.text_b_column, self.label_column = text_a_column, text_b_column, label_column
    self.has_header = bool(has_header)
    self.is_regression = bool(is_regression)
    self.files = {"train": train_file or f"train.{task_name}", "dev": dev_file or f"dev.{task_name}",
                  "test": test_file or f"test.{task_name}"}
    self.data_dir = data_dir
    if labels is not None:
      labels = [str(label) for label in labels]
      if not labels or len(set(labels)) != len(labels):
        raise ValueError(f"labels for task {task_name!r} must be a non-empty list without repeats. Received: {labels}.")
    self._labels = labels

  def get_labels(self, data_dir=None):
    if self.is_regression:
      return [0.0]
    if self._labels is None:
      data_dir = data_dir or self.data_dir
      if data_dir is None:
        raise ValueError(f"Task {self.task_name!r} collects its labels from the training file; pass data_dir "
                         "(--data_dir) or the labels (--labels).")
      found = {ex.label for ex in self._create_examples(data_dir, "train", check_labels=False)}
      if not found:
        raise ValueError(f"{os.path.join(data_dir, self.files['train'])} has no examples to collect labels from. "
                         "Fix the file or pass the labels (--labels).")
      numeric = all(label.lstrip("-").isdigit() for label in found)
      self._labels = sorted(found, key=int if numeric else None)
    return list(self._labels)

  def get_train_examples(self, data_dir):
    return self._create_examples(data_dir, "train")

  def get_dev_examples(self, data_dir):
    return self._create_examples(data_dir, "dev")

  def get_test_examples(self, data_dir):
    return self._create_examples(data_dir, "test")

  def _resolve(self, column, header, path, what):
    if isinstance(column, int):
      return column
    if isinstance(column, str) and column.isdigit():
      return int(column)
    if header is None:
      raise ValueError(f"{what}={column!r} names a header column but task {self.task_name!r} reads files without "
                       "a header. Give a column index, or set has_header (--has_header).")
    if column not in header:
      raise ValueError(f"{what}={column!r} is not a column of {path}; its header is {header}. Pass one of those "
                       "names or a column index.")
    return header.index(column)

  def _create_examples(self, data_dir, set_type, check_labels=True):
    path = os.path.join(data_dir, self.files[set_type])
    is_test = set_type == "test"
    labels = None if (is_test or self.is_regression or not check_labels) else self.get_labels(data_dir)
    examples, header = [], None
    for i, (line_num, row) in enumerate(_read_rows(path, self.task_name, self.delimiter, self.quoting)):
      if i == 0:
        header = row if self.has_header else None
        a_col = self._resolve(self.text_a_column, header, path, "text_a_column")
        b_col = (None if self.text_b_column is None else
                 self._resolve(self.text_b_column, header, path, "text_b_column"))
        label_col = None if is_test else self._resolve(self.label_column, header, path, "label_column")
        if self.has_header:
          continue
      cols = [c for c in (a_col, b_col, label_col) if c is not None]
      if any(c >= len(row) or c < -len(row) for c in cols):
        raise ValueError(f"{path} line {line_num} has {len(row)} columns; task {self.task_name!r} reads columns "
                         f"{cols}. Fix the file or the column options.")
      if is_test:
        label = 0.0 if self.is_regression else self.get_labels(data_dir)[0]
      elif self.is_regression:
        label = _parse_float_label(row[label_col], path, line_num, self.task_name)
      else:
        label = row[label_col]
        if labels is not None:
          _check_label(label, labels, path, line_num, self.task_name)
      text_b = row[b_col] if b_col is not None else None
      examples.append(InputExample(guid=f"{set_type}-{i}", text_a=row[a_col], text_b=text_b, label=label))
    return examples


_PROCESSORS = collections.OrderedDict([
    ("mnli_matched", MnliMatchedProcessor), ("mnli_mismatched", MnliMismatchedProcessor), ("sts-b", StsbProcessor),
    ("imdb", ImdbProcessor), ("yelp5", Yelp5Processor), ("cola", ColaProcessor), ("sst-2", Sst2Processor),
    ("mrpc", MrpcProcessor), ("qqp", QqpProcessor), ("qnli", QnliProcessor), ("rte", RteProcessor),
    ("wnli", WnliProcessor), ("csv", DelimitedProcessor), ("tsv", DelimitedProcessor)])
TASK_NAMES = tuple(_PROCESSORS)


def get_processor(task_name, **options):
  """Returns the processor of `task_name` (case-insensitive, as `--task_name`).

  Options (keyword arguments of `DelimitedProcessor`) apply only to the `csv`/`tsv` tasks; options whose value
  is None are ignored, so a CLI may pass all of its flags.
  """
  name = (task_name or "").lower()
  if name not in _PROCESSORS:
    raise ValueError(f"Unknown --task_name {task_name!r}. Known tasks: {', '.join(TASK_NAMES)}.")
  options = {k: v for k, v in options.items() if v is not None}
  if name in ("csv", "tsv"):
    return DelimitedProcessor(name, **options)
  if options:
    raise ValueError(f"Options {sorted(options)} only apply to the csv/tsv tasks, not to --task_name={name}. "
                     "Remove them.")
  return _PROCESSORS[name]()


def label_list_for(processor, is_regression):
  """The `label_list` to pass on: None for regression (as the original), else `processor.get_labels()`."""
  if bool(is_regression) != processor.is_regression:
    if processor.is_regression:
      raise ValueError(f"Task {processor.task_name!r} is a regression task (float labels). "
                       "Run it with --is_regression=True.")
    raise ValueError(f"Task {processor.task_name!r} is a classification task with labels "
                     f"{processor.get_labels()}. Remove --is_regression.")
  return None if is_regression else processor.get_labels()


# ---------------------------------------------------------------------------------------------------------------
# Example -> features.


def check_max_seq_length(max_seq_length, is_pair):
  """A sequence needs room for one token of each text plus SEP (x2 for pairs) and CLS."""
  need = 5 if is_pair else 3
  if not _is_int_at_least(max_seq_length, need):
    kind = "sentence-pair" if is_pair else "single-sentence"
    raise ValueError(f"--max_seq_length must be at least {need} for a {kind} task (room for "
                     f"{'A SEP B SEP CLS' if is_pair else 'A SEP CLS'}). Received: {max_seq_length!r}. "
                     "Use a larger --max_seq_length (the original's default is 128).")


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Pops tokens from the end of the longer list (b on ties) until the pair fits into max_length, in place."""
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenize_fn):
  """Converts one `InputExample` (or `PaddingInputExample`) into `InputFeatures`, as the original.

  Args:
    ex_index: int, the example's position; the first 5 are logged.
    example: InputExample or PaddingInputExample.
    label_list: list of labels (label_id = index in it), or None for regression (label_id = float(label)).
    max_seq_length: int, the fixed sequence length L.
    tokenize_fn: callable, text -> list of int SentencePiece ids.

  Returns:
    InputFeatures with input_ids int [L] (left padded with 0), input_mask [L] (1 = padding, 0 = real token),
    segment_ids [L] (A and its SEP 0, B and its SEP 1, CLS 2, padding 4), label_id and is_real_example.
  """
  if isinstance(example, PaddingInputExample):
    check_max_seq_length(max_seq_length, is_pair=False)
    return InputFeatures(input_ids=[0] * max_seq_length, input_mask=[1] * max_seq_length,
                         segment_ids=[0] * max_seq_length, label_id=0.0 if label_list is None else 0,
                         is_real_example=False)

  tokens_a = list(tokenize_fn(example.text_a))
  tokens_b = list(tokenize_fn(example.text_b)) if example.text_b else None
  check_max_seq_length(max_seq_length, is_pair=bool(tokens_b))
  if tokens_b:
    _truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
  else:
    tokens_a = tokens_a[:max_seq_length - 2]

  input_ids = tokens_a + [SEP_ID]
  segment_ids = [SEG_ID_A] * len(input_ids)
  if tokens_b:
    input_ids += tokens_b + [SEP_ID]
    segment_ids += [SEG_ID_B] * (len(tokens_b) + 1)
  input_ids.append(CLS_ID)
  segment_ids.append(SEG_ID_CLS)

  delta = max_seq_length - len(input_ids)
  input_mask = [1] * delta + [0] * len(input_ids)
  input_ids = [0] * delta + input_ids
  segment_ids = [SEG_ID_PAD] * delta + segment_ids

  if label_list is None:
    try:
      label_id = float(example.label)
    except (TypeError, ValueError):
      raise ValueError(f"Example {example.guid} has label {example.label!r}, but a regression task needs a number. "
                       "Fix the data, or drop --is_regression for a classification task.") from None
  else:
    if example.label not in label_list:
      raise ValueError(f"Example {example.guid} has label {example.label!r}, which is not in the label list "
                       f"{list(label_list)}. Fix the data or the task (--task_name).")
    label_id = list(label_list).index(example.label)

  if ex_index < 5:
    logging.info("*** Example *** guid: %s", example.guid)
    logging.info("input_ids: %s", " ".join(map(str, input_ids)))
    logging.info("input_mask: %s", " ".join(map(str, input_mask)))
    logging.info("segment_ids: %s", " ".join(map(str, segment_ids)))
    logging.info("label: %s (id = %s)", example.label, label_id)
  return InputFeatures(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids, label_id=label_id)


def pad_examples(examples, batch_size):
  """Returns a new list: `examples` plus `PaddingInputExample`s up to a multiple of batch_size (original eval)."""
  if not _is_int_at_least(batch_size, 1):
    raise ValueError(f"The eval batch size must be a positive integer. Received: {batch_size!r}. "
                     "Set --eval_batch_size.")
  return list(examples) + [PaddingInputExample() for _ in range(-len(examples) % batch_size)]


# ---------------------------------------------------------------------------------------------------------------
# TFRecords.


def record_file_name(spiece_model_file, max_seq_length, mode, eval_split="dev"):
  """The original's cached record file name (without directory).

  train: `{spm}.len-{L}.train.tf_record`; eval: `{spm}.len-{L}.{eval_split}.eval.tf_record`;
  predict: `{spm}.len-{L}.{eval_split}.predict.tf_record`, where spm is the basename of the SentencePiece model.
  As the original, neither the task nor num_passes is part of the name: pass overwrite_data when they change.
  """
  spm = os.path.basename(spiece_model_file)
  if mode == "train":
    return f"{spm}.len-{max_seq_length}.train.tf_record"
  if mode not in ("eval", "predict"):
    raise ValueError(f"mode must be 'train', 'eval' or 'predict'. Received: {mode!r}.")
  if eval_split not in EVAL_SPLITS:
    raise ValueError(f"--eval_split must be one of {EVAL_SPLITS}. Received: {eval_split!r}.")
  return f"{spm}.len-{max_seq_length}.{eval_split}.{mode}.tf_record"


def _int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float_feature(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenize_fn, output_file,
                                            num_passes=1, overwrite_data=False):
  """Converts examples and writes them as TFRecords (atomically), as the original.

  Features: input_ids int64 [L], input_mask float [L] (1 = padding), segment_ids int64 [L], label_ids int64 []
  (float [] when label_list is None), is_real_example int64 [].

  Args:
    examples: list of InputExample / PaddingInputExample; not modified.
    label_list, max_seq_length, tokenize_fn: as `convert_single_example`.
    output_file: str, the record file.
    num_passes: int >= 1, the example list is written this many times in a row.
    overwrite_data: bool, rewrite an existing output_file; False keeps it (the original's cache behaviour).

  Returns:
    The number of records written, or None if an existing file was kept.
  """
  if not _is_int_at_least(num_passes, 1):
    raise ValueError(f"--num_passes must be a positive integer. Received: {num_passes!r}.")
  if tf.io.gfile.exists(output_file) and not overwrite_data:
    logging.info("Keeping the existing tfrecord %s (set --overwrite_data to rebuild it).", output_file)
    return None
  logging.info("Creating tfrecord %s.", output_file)
  out_dir = os.path.dirname(output_file)
  if out_dir:
    tf.io.gfile.makedirs(out_dir)
  all_examples = list(examples) * num_passes
  tmp = f"{output_file}.tmp-{uuid.uuid4().hex}"
  try:
    with tf.io.TFRecordWriter(tmp) as writer:
      for ex_index, example in enumerate(all_examples):
        if ex_index % 10000 == 0:
          logging.info("Writing example %d of %d", ex_index, len(all_examples))
        feature = convert_single_example(ex_index, example, label_list, max_seq_length, tokenize_fn)
        features = collections.OrderedDict()
        features["input_ids"] = _int_feature(feature.input_ids)
        features["input_mask"] = _float_feature(feature.input_mask)
        features["segment_ids"] = _int_feature(feature.segment_ids)
        if label_list is not None:
          features["label_ids"] = _int_feature([feature.label_id])
        else:
          features["label_ids"] = _float_feature([float(feature.label_id)])
        features["is_real_example"] = _int_feature([int(feature.is_real_example)])
        writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    tf.io.gfile.rename(tmp, output_file, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.remove(tmp)
  return len(all_examples)


def classifier_dataset(input_file, seq_length, is_training, drop_remainder, batch_size, is_regression,
                       shuffle_buffer=2048, seed=None, input_context=None):
  """Reads classifier TFRecords as `file_based_input_fn_builder` does, batch-major.

  Training shuffles (buffer shuffle_buffer, reshuffled each epoch) and repeats forever. With an input_context
  (tf.distribute) the records are sharded per input pipeline and batch_size is the per-replica batch size.

  Returns:
    A tf.data.Dataset of dicts: input_ids int32 [B, L]; input_mask float32 [B, L] (1 = padding, 0 = real);
    segment_ids int32 [B, L]; label_ids int32 [B] (float32 [B] when is_regression); is_real_example int32 [B]
    (0 = padding example, to be weighted out of metrics).
  """
  files = [input_file] if isinstance(input_file, str) else list(input_file)
  for f in files:
    if not tf.io.gfile.exists(f):
      raise FileNotFoundError(f"Classifier tfrecord {f} does not exist. Write it first "
                              "(file_based_convert_examples_to_features) or check --output_dir.")
  if not _is_int_at_least(batch_size, 1):
    raise ValueError(f"The batch size must be a positive integer. Received: {batch_size!r}.")
  if is_training and not _is_int_at_least(shuffle_buffer, 1):
    raise ValueError(f"--shuffle_buffer must be a positive integer. Received: {shuffle_buffer!r}.")
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.float32),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }

  def decode(records):
    parsed = tf.io.parse_example(records, name_to_features)
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in parsed.items()}

  d = tf.data.TFRecordDataset(files)
  if input_context is not None:
    d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if is_training:
    d = d.shuffle(buffer_size=shuffle_buffer, seed=seed)
    d = d.repeat()
  d = d.batch(batch_size, drop_remainder=drop_remainder)
  return d.map(decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
