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
import os

import tensorflow as tf
from absl import logging

from xlnet_tf.tasks.classifier import metrics


EVAL_SPLITS = ("dev", "test")


@dataclasses.dataclass
class InputExample:
  """One example: `text_a`, optional `text_b`, and a label (a string, or a float for regression)."""
  guid: str
  text_a: str
  text_b: str = None
  label: object = None


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


class _TrainTestProcessor(DataProcessor):
  """A task with a train and a test file (or directory) in data_dir, dev and test both reading the test one."""
  train_name = test_name = None

  def get_train_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, self.train_name))

  def get_dev_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, self.test_name))

  def get_test_examples(self, data_dir):
    return self.get_dev_examples(data_dir)


class ImdbProcessor(_TrainTestProcessor):
  """aclImdb: `{data_dir}/{train,test}/{neg,pos}/*txt`; dev (and test) read `test/`; `<br />` becomes a space."""
  task_name = "imdb"
  train_name, test_name = "train", "test"

  def get_labels(self):
    return ["neg", "pos"]

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


class Yelp5Processor(_TrainTestProcessor):
  """Yelp-5: `train.csv`, dev (and test) = `test.csv`; comma csv, no header; label = column 0, text = column 1."""
  task_name = "yelp5"
  train_name, test_name = "train.csv", "test.csv"

  def get_labels(self):
    return ["1", "2", "3", "4", "5"]

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
