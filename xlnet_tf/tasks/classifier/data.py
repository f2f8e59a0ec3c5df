"""Fine-tuning data: task files -> `InputExample`s -> features -> the original classifier TFRecords.

Behaves as the original `run_classifier.py` / `classifier_utils.py`:
- processors read the original file layouts (GLUE tsv, aclImdb directories, Yelp csv) plus the GLUE tasks the
  original reports but never wired, and a generic `csv`/`tsv` task;
- `convert_single_example` lays a sequence out as `A SEP [B SEP] CLS`, LEFT-padded with id 0, with
  `input_mask` 1 = padding (0 = real token) and segment ids A=0, B=1, CLS=2, PAD=4;
- records keep the original feature names and cached file names.
Tokenization is passed in as `tokenize_fn(text) -> list[int]`, as in the original. This module holds the original
tasks' processors and the registry (`get_processor`); `examples.py` what they share, `delimited.py` the csv/tsv task.
"""

import collections
import csv
import os

import tensorflow as tf
from absl import logging

from xlnet_tf import fileio

from xlnet_tf.tasks.classifier.delimited import DelimitedProcessor, DelimitedTask
from xlnet_tf.tasks.classifier.examples import (DataProcessor, InputExample, check_label, open_text,
                                                parse_float_label, read_rows)


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
  test_has_labels = False
  labels = ("0", "1")
  # The header names of the columns read (text_a, text_b, label; test: text_a, text_b) in GLUE's files: a file of
  # another layout (HuggingFace datasets' export, say) was read by position, e.g. SST-2 test predictions of "-1".
  header_names = test_header_names = ()

  def get_labels(self):
    return list(self.labels)

  @property
  def files(self):
    """The file each split reads, in data_dir (which a split without examples names)."""
    return {"train": self.train_file, "dev": self.dev_file, "test": self.test_file}

  def get_train_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, self.train_file), "train")

  def get_dev_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, self.dev_file), "dev")

  def get_test_examples(self, data_dir):
    return self._create_examples(os.path.join(data_dir, self.test_file), "test")

  def _label(self, text, path, line_num):
    check_label(text, self.get_labels(), path, line_num, self.task_name)
    return text

  def _check_header(self, row, path, line_num, is_test):
    """ValueError where the row the original skips as the file's header holds data: a file without its header
    lost its first example without a word (and a test file's predictions were written one row off). Data has an
    integer index first (a test file's rows) or a label in its label column; a header, column names."""
    if is_test:
      looks_like_data = row[0].strip().isdigit()
    elif self.label_column >= len(row):
      return
    elif self.is_regression:
      looks_like_data = _is_float(row[self.label_column])
    else:
      looks_like_data = row[self.label_column] in self.get_labels()
    if looks_like_data:
      raise ValueError(f"{path} line {line_num} is data, not the header row {self.task_name} files start with "
                       f"({row[0][:20]!r}...): the first line is skipped as the header, so this example would be "
                       "lost. Put the file's header row back (the first line of the GLUE file).")
    columns = (self.test_text_a_column if self.test_text_a_column is not None else self.text_a_column,
               self.test_text_b_column if self.test_text_b_column is not None else self.text_b_column) if is_test \
        else (self.text_a_column, self.text_b_column, self.label_column)
    columns = [column for column in columns if column is not None]
    for column, name in zip(columns, self.test_header_names if is_test else self.header_names):
      found = row[column].strip() if column < len(row) else None
      if found is not None and found.lower() != name.lower():
        raise ValueError(f"{path} line {line_num} names column {column} {found!r}, where {self.task_name} reads "
                         f"{name!r} (GLUE's layout): the file is of another layout, and its columns would be read by "
                         "position. Use GLUE's file, or read this one with --task_name=tsv and --text_a_column "
                         "(--text_b_column, --label_column) naming its columns.")

  def _create_examples(self, path, set_type):
    is_test = set_type == "test"
    header = self.test_contains_header if is_test else self.contains_header
    a_col = self.test_text_a_column if is_test and self.test_text_a_column is not None else self.text_a_column
    b_col = self.test_text_b_column if is_test and self.test_text_b_column is not None else self.text_b_column
    examples, mismatched = [], False
    for i, (line_num, row) in enumerate(read_rows(path, self.task_name, "\t", csv.QUOTE_NONE)):
      if i == 0 and header:
        self._check_header(row, path, line_num, is_test)
        continue
      needed = [a_col] + ([b_col] if b_col is not None else []) + ([] if is_test else [self.label_column])
      if any(c >= len(row) for c in needed):
        if is_test:  # the predictions are numbered in the file's order: every later one would be one row off
          raise ValueError(f"{path} line {line_num} has {len(row)} column(s), fewer than {self.task_name} reads "
                           f"({max(needed) + 1}): a test file needs every row, since its predictions are written in "
                           "its order (one per index). Fix the line.")
        logging.warning("Incomplete line, ignored: %s line %d has %d columns.", path, line_num, len(row))
        continue
      text_b = row[b_col] if b_col is not None else None
      label = self.get_labels()[0] if is_test else self._label(row[self.label_column], path, line_num)
      if is_test and row[0].strip() != str(len(examples)) and not mismatched:
        mismatched = True  # one line a file
        logging.warning("%s line %d has the index %r, but the predictions are numbered by row, as the original's "
                        "(this row's is %d): a test file cut into shards, or not GLUE's, gets other ids than its "
                        "index column. Predict the whole test file to submit it.", path, line_num, row[0][:20],
                        len(examples))
      examples.append(InputExample(guid=f"{set_type}-{i}", text_a=row[a_col], text_b=text_b, label=label))
    return examples


class MnliMatchedProcessor(GLUEProcessor):
  task_name = "mnli_matched"
  dev_file, test_file = "dev_matched.tsv", "test_matched.tsv"
  text_a_column, text_b_column, label_column = 8, 9, -1
  labels = ("contradiction", "entailment", "neutral")
  header_names, test_header_names = ("sentence1", "sentence2", "gold_label"), ("sentence1", "sentence2")


class MnliMismatchedProcessor(MnliMatchedProcessor):
  task_name = "mnli_mismatched"
  dev_file, test_file = "dev_mismatched.tsv", "test_mismatched.tsv"


class StsbProcessor(GLUEProcessor):
  """STS-B: float similarity scores in [0, 5]; `get_labels()` is `[0.0]` as the original."""
  task_name = "sts-b"
  is_regression = True
  text_a_column, text_b_column, label_column = 7, 8, 9
  labels = (0.0,)
  header_names, test_header_names = ("sentence1", "sentence2", "score"), ("sentence1", "sentence2")

  def _label(self, text, path, line_num):
    value = parse_float_label(text, path, line_num, self.task_name)
    if not 0 <= value <= 5:  # a score of another scale, or of a shifted column: trained and scored on, exit 0
      raise ValueError(f"Regression label {text!r} in {path} line {line_num} (task {self.task_name!r}) is outside "
                       "STS-B's scale [0, 5]. Fix the file, or read a task of another scale with --task_name=tsv "
                       "--is_regression=True.")
    return value


class ColaProcessor(GLUEProcessor):
  """CoLA: train/dev have no header (source, label, original mark, sentence); test is `index\\tsentence`."""
  task_name = "cola"
  text_a_column, label_column = 3, 1
  test_text_a_column = 1
  contains_header = False
  header_names, test_header_names = (), ("sentence",)


class Sst2Processor(GLUEProcessor):
  task_name = "sst-2"
  text_a_column, label_column = 0, 1
  test_text_a_column = 1
  header_names, test_header_names = ("sentence", "label"), ("sentence",)


class MrpcProcessor(GLUEProcessor):
  task_name = "mrpc"
  text_a_column, text_b_column, label_column = 3, 4, 0
  header_names, test_header_names = ("#1 String", "#2 String", "Quality"), ("#1 String", "#2 String")


class QqpProcessor(GLUEProcessor):
  task_name = "qqp"
  text_a_column, text_b_column, label_column = 3, 4, 5
  test_text_a_column, test_text_b_column = 1, 2
  header_names, test_header_names = ("question1", "question2", "is_duplicate"), ("question1", "question2")


class QnliProcessor(GLUEProcessor):
  task_name = "qnli"
  text_a_column, text_b_column, label_column = 1, 2, 3
  labels = ("entailment", "not_entailment")
  header_names, test_header_names = ("question", "sentence", "label"), ("question", "sentence")


class RteProcessor(QnliProcessor):
  task_name = "rte"
  header_names, test_header_names = ("sentence1", "sentence2", "label"), ("sentence1", "sentence2")


class WnliProcessor(GLUEProcessor):
  task_name = "wnli"
  text_a_column, text_b_column, label_column = 1, 2, 3
  header_names, test_header_names = ("sentence1", "sentence2", "label"), ("sentence1", "sentence2")


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
  """aclImdb: `{data_dir}/{train,test}/{neg,pos}/*txt`; dev (and test) read `test/`; `<br />` becomes a space.

  Files are read in the order `tf.io.gfile.listdir` gives (the original's `tf.gfile.ListDirectory`: the file
  system's, not sorted), or sorted by name with `sorted_file_order=True`.
  """
  task_name = "imdb"
  train_name, test_name = "train", "test"
  text_replacements = (("<br />", " "),)  # the HTML line breaks of the reviews (also in the exported SavedModel)

  def __init__(self, sorted_file_order=False):
    self.sorted_file_order = bool(sorted_file_order)

  def get_labels(self):
    return ["neg", "pos"]

  def _create_examples(self, split_dir):
    examples = []
    for label in self.get_labels():
      cur_dir = os.path.join(split_dir, label)
      if not tf.io.gfile.isdir(cur_dir):
        raise FileNotFoundError(f"Task 'imdb' needs the directory {cur_dir} of *.txt reviews, which does not exist. "
                                "Point --data_dir at the aclImdb directory (holding train/ and test/).")
      names = fileio.listdir(cur_dir)  # a name that is not UTF-8: one line naming it
      for filename in sorted(names) if self.sorted_file_order else names:
        if not filename.endswith("txt"):
          continue
        path = os.path.join(cur_dir, filename)
        try:
          with open_text(path) as f:
            text = f.read().strip()
          for old, new in self.text_replacements:
            text = text.replace(old, new)
        except UnicodeDecodeError as e:
          raise ValueError(f"{path} is not UTF-8 text ({e}). Re-encode it as UTF-8.") from None
        examples.append(InputExample(guid=f"{os.path.basename(split_dir)}-{label}-{filename}", text_a=text,
                                     label=label))
      if not examples or examples[-1].label != label:  # one class: trained on, or scored 1.0 (sweep 32, U3)
        raise ValueError(f"Task 'imdb': {cur_dir} holds no review (no file name ending in txt): an unpacking cut "
                         f"short? Put aclImdb's {os.path.basename(split_dir)}/{label} reviews there (both classes are "
                         "read).")
    return examples


class Yelp5Processor(_TrainTestProcessor):
  """Yelp-5: `train.csv`, dev (and test) = `test.csv`; comma csv, no header; label = column 0, text = column 1."""
  task_name = "yelp5"
  train_name, test_name = "train.csv", "test.csv"
  files = {"train": train_name, "dev": test_name, "test": test_name}  # which a split without examples names

  def get_labels(self):
    return ["1", "2", "3", "4", "5"]

  def _create_examples(self, path):
    examples = []
    for i, (line_num, row) in enumerate(read_rows(path, self.task_name, ",", csv.QUOTE_MINIMAL)):
      if len(row) != 2:  # more: a title column (Amazon's, Yahoo's layout) read as the text, exit 0
        raise ValueError(f"{path} line {line_num} must have 2 columns (label, text); it has {len(row)}. Fix the file, "
                         "or read it with --task_name=csv and --text_a_column, --label_column.")
      check_label(row[0], self.get_labels(), path, line_num, self.task_name)
      text = row[1].replace('""', '"').replace('\\"', '"')
      examples.append(InputExample(guid=str(i), text_a=text, label=row[0]))
    return examples


def _is_float(text):
  try:
    float(text)
  except ValueError:
    return False
  return True


_PROCESSORS = collections.OrderedDict([
    ("mnli_matched", MnliMatchedProcessor), ("mnli_mismatched", MnliMismatchedProcessor), ("sts-b", StsbProcessor),
    ("imdb", ImdbProcessor), ("yelp5", Yelp5Processor), ("cola", ColaProcessor), ("sst-2", Sst2Processor),
    ("mrpc", MrpcProcessor), ("qqp", QqpProcessor), ("qnli", QnliProcessor), ("rte", RteProcessor),
    ("wnli", WnliProcessor), ("csv", DelimitedProcessor), ("tsv", DelimitedProcessor)])


TASK_NAMES = tuple(_PROCESSORS)


def get_processor(task_name, **options):
  """Returns the processor of `task_name` (case-insensitive, as `--task_name`).

  Options (the fields of `DelimitedTask` but its task_name) apply only to the `csv`/`tsv` tasks, and
  `sorted_file_order` (`ImdbProcessor`) only to `imdb`; options whose value is None (or False for
  sorted_file_order) are ignored, so a CLI may pass all of its flags.
  """
  name = (task_name or "").lower()
  if name not in _PROCESSORS:
    raise ValueError(f"Unknown --task_name {task_name!r}. Known tasks: {', '.join(TASK_NAMES)}.")
  options = {k: v for k, v in options.items() if v is not None}
  sorted_file_order = options.pop("sorted_file_order", False)
  if sorted_file_order and name != "imdb":
    raise ValueError(f"--sorted_file_order only applies to --task_name=imdb (a directory of files), not to "
                     f"--task_name={name}. Remove it.")
  if name in ("csv", "tsv"):
    return DelimitedProcessor(DelimitedTask(task_name=name, **options))
  if options:
    raise ValueError(f"Options {sorted(options)} only apply to the csv/tsv tasks, not to --task_name={name}. "
                     "Remove them.")
  return ImdbProcessor(sorted_file_order=sorted_file_order) if name == "imdb" else _PROCESSORS[name]()


def label_list_for(processor, is_regression):
  """The `label_list` to pass on: None for regression (as the original), else `processor.get_labels()`."""
  if bool(is_regression) != processor.is_regression:
    if processor.is_regression:
      raise ValueError(f"Task {processor.task_name!r} is a regression task (float labels). "
                       "Run it with --is_regression=True.")
    raise ValueError(f"Task {processor.task_name!r} is a classification task with labels "
                     f"{processor.get_labels()}. Remove --is_regression.")
  return None if is_regression else processor.get_labels()
