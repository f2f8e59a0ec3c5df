"""The generic `csv` / `tsv` classifier task: the user names the text and label columns (`DelimitedTask`), which
`DelimitedProcessor` reads."""

import collections
import csv
import dataclasses
import logging
import math
import os
import unicodedata

from xlnet_tf import fileio
from xlnet_tf.tasks.classifier.examples import (DataProcessor, InputExample, check_label, parse_float_label,
                                                read_rows)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DelimitedTask:
  """The generic `csv` / `tsv` task as the user describes it (the --text_a_column, ... flags), checked once.

  Attributes:
    task_name: "csv" (comma separated, '"' quoting) or "tsv" (tab separated, no quoting, like GLUE).
    text_a_column: int or str. Column of the first text: an index (int or digit string) or a header name.
    label_column: int or str. Column of the label, as text_a_column.
    text_b_column: int, str or None. Column of the second text; None: single-text task.
    labels: tuple of str or None. The label list (its order fixes the label ids; given labels are made str). Labels
      are read without surrounding spaces (a spreadsheet's "pos " is the class "pos").
      None: the sorted set of labels in the training file (numerically sorted if every label is an integer).
    has_header: bool or None. Whether every file starts with a header row (needed for column names). None (unset):
      True, and a first line read as the header while the columns are given by index is warned of once per file (a
      file without a header loses its first example); given True, it is not.
    is_regression: bool. Float labels (run with --is_regression=True).
    train_file, dev_file, test_file: file names inside data_dir; default `{train,dev,test}.{csv|tsv}`.
    data_dir: str or None. Where get_labels() reads the training file when labels is None.
    labels_source: str or None. Where the given labels come from, for the messages (e.g. "of the checkpoints in D
      (D/run_flags.json)"): a label outside them then asks for the file to be fixed, not for other --labels.
  """
  task_name: str
  text_a_column: object = None
  label_column: object = None
  text_b_column: object = None
  labels: tuple = None
  has_header: bool = None
  is_regression: bool = False
  train_file: str = None
  dev_file: str = None
  test_file: str = None
  data_dir: str = None
  labels_source: str = None
  has_header_unset: bool = dataclasses.field(init=False, repr=False, compare=False)

  def __post_init__(self):
    task_name, labels = self.task_name, self.labels
    if self.text_a_column is None:  # the label column is read from training and dev files (not test files)
      raise ValueError(f"Task {task_name!r} needs the text and label columns. Received text_a_column="
                       f"{self.text_a_column!r}, label_column={self.label_column!r}. Pass them (e.g. "
                       "--text_a_column=sentence --label_column=label).")
    if labels is not None and self.is_regression:  # the labels were ignored, the run a regression (sweep 25, C5)
      raise ValueError(f"--labels names classes of task {task_name!r}, but --is_regression=True fits one number per "
                       "example. Drop one of the two.")
    if labels is not None:
      labels = [_label_text(label) for label in labels]
      if not labels or len(set(labels)) != len(labels):
        raise ValueError(f"labels for task {task_name!r} must be a non-empty list without repeats. Received: {labels}.")
      if "" in labels:  # --labels=pos,neg, : a class nothing is labelled with, a head of one row more
        raise ValueError(f"labels for task {task_name!r} holds an empty label (a trailing or doubled comma in "
                         f"--labels?). Received: {labels}. Pass the classes alone, e.g. --labels="
                         f"{','.join(label for label in labels if label)}.")
      _check_one_spelling(labels, "--labels")
      for label in labels:
        _check_label_chars(label, "in --labels")
      object.__setattr__(self, "labels", tuple(labels))
    object.__setattr__(self, "has_header_unset", self.has_header is None)
    object.__setattr__(self, "has_header", self.has_header is None or bool(self.has_header))
    object.__setattr__(self, "is_regression", bool(self.is_regression))


def _label_text(text):
  """A label as a class name: without the spaces around it ("pos " from a spreadsheet is "pos"), in Unicode's NFC
  form ("café" typed on macOS, NFD, is the "café" of a Windows file, NFC: two classes that looked alike, sweep 23
  C1)."""
  return unicodedata.normalize("NFC", str(text).strip())


def _check_label_chars(label, where):
  """ValueError where a class name holds a tab or a line break: the prediction file's rows (index TAB prediction)
  were cut by them, exit 0 (sweep 34, S1)."""
  if any(c in label for c in "\t\n\r"):
    raise ValueError(f"Label {label!r} {where} holds a tab or a line break, which the prediction file's rows (index, "
                     "tab, prediction) cannot hold. Fix the label.")


def _value(label):
  """The number a label spells, else None."""
  try:
    return float(label)
  except ValueError:
    return None


def _check_one_spelling(labels, path):
  """ValueError where two of the `labels` collected from `path` (or --labels) are one number spelt two ways (`1` and
  `1.0`: a column some of whose rows a spreadsheet or pandas wrote as floats): each would be a class of its own."""
  by_value = {}
  for label in labels:
    if _value(label) is not None:
      by_value.setdefault(_value(label), []).append(label)
  if twice := [sorted(spellings) for spellings in by_value.values() if len(spellings) > 1]:
    fix = ("Write every label of the file one way, or pass every class with --labels" if path != "--labels" else
           "Write every label of the files one way, and pass each class once")  # sweep 33, C2
    raise ValueError(f"{path} spells one label two ways ({' and '.join(repr(s) for s in twice[0])}): each would be "
                     f"a class of its own. {fix}.")


# A training file of at least this many rows, each of a label of its own, names the text as --label_column.
DISTINCT_LABELS_LIMIT = 10


class DelimitedProcessor(DataProcessor):
  """The generic `csv` / `tsv` task: the user names the text column(s) and the label column (`task`: a
  `DelimitedTask`). A test file's labels are read where it has that column and every row holds one of the classes
  (a number for regression); else each test example gets the placeholder label `get_labels()[0]` (0.0 for
  regression), as GLUE's test files (sweep 25, B6: a labelled test file was evaluated against the placeholder).
  """
  test_has_labels = False  # set by the last read of the test file
  placeholder_why = ""  # and where its labels are not read for that, why

  def __init__(self, task):
    self.task = task
    self.task_name = task.task_name
    self.is_regression = task.is_regression
    self.delimiter, self.quoting = ("\t", csv.QUOTE_NONE) if task.task_name == "tsv" else (",", csv.QUOTE_MINIMAL)
    self.files = {"train": task.train_file or f"train.{task.task_name}",
                  "dev": task.dev_file or f"dev.{task.task_name}",
                  "test": task.test_file or f"test.{task.task_name}"}
    self._labels = None if task.labels is None else list(task.labels)
    self._warned = set()  # files (and (file, "empty")) warned of: a header read by index columns, empty texts

  def get_labels(self, data_dir=None):
    if self.is_regression:
      return [0.0]
    if self._labels is None:
      data_dir = data_dir or self.task.data_dir
      if data_dir is None:
        raise ValueError(f"Task {self.task_name!r} collects its labels from the training file; pass data_dir "
                         "(--data_dir) or the labels (--labels).")
      train_path = os.path.join(data_dir, self.files["train"])
      if not fileio.exists(train_path):  # e.g. a directory of test.csv alone, predicted with a checkpoint
        raise ValueError(f"Task {self.task_name!r} collects its labels from the training file {train_path}, which "
                         "does not exist. Pass every class with --labels, in the order the model was trained with "
                         "(its run_flags.json's label_list), or point --data_dir at the training data.")
      labels = [ex.label for ex in self._create_examples(data_dir, "train", check_labels=False)]
      found = set(labels)
      if not found:
        raise ValueError(f"{train_path} has no examples to collect labels from. Fix the file or pass the labels "
                         "(--labels).")
      if len(found) == 1:  # a classifier of one class: its loss is zero from the start, nothing is learnt
        label, = found
        raise ValueError(f"{train_path} holds one label only ({label!r}), and the labels of task {self.task_name!r} "
                         "are collected from it (--labels is unset): a classifier needs at least 2 classes. Pass "
                         f"every class with --labels (--labels={label},...), or --is_regression=True if the labels "
                         "are scores.")
      if len(found) == len(labels) >= DISTINCT_LABELS_LIMIT:  # a class per row, trained on (sweep 32, U6)
        raise ValueError(f"{train_path}: each of its {len(labels)} rows has a label of its own in --label_column="
                         f"{self.task.label_column} (the first: {labels[0][:40]!r}), each a class: is it the text "
                         "column? Name the columns with --label_column and --text_a_column; pass every class with "
                         "--labels to train so all the same, or --is_regression=True if the labels are scores.")
      if not self.task.has_header and labels.count(labels[0]) == 1:
        logging.warning("%s: the first row's label %r is on no other row: is that row a header? It is a class of its "
                        "own now; pass --has_header=True if so.", train_path, labels[0])
      _check_one_spelling(found, train_path)
      numeric = all(label.lstrip("-").isdigit() for label in found)
      self._labels = sorted(found, key=int if numeric else None)
      logging.info("Labels of task %r, collected from %s: %s", self.task_name, train_path, self._labels)
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

  def _label_fix(self, label, labels, data_dir):
    """What to do about a `label` outside `labels`: fix the file, or pass --labels with every class."""
    if self.task.labels_source:
      return f"Fix the file: the labels are those {self.task.labels_source}."
    if (same := [known for known in labels if _value(known) is not None and _value(known) == _value(label)]):
      return f"It is the label {same[0]!r} spelt otherwise: write every label of the files one way."  # sweep 33, C2
    where = ("" if self.task.labels is not None else
             f" (unset, the labels are those of {os.path.join(data_dir, self.files['train'])})")
    return f"Fix the file, or pass every class with --labels={','.join([*labels, label])}{where}."

  def _create_examples(self, data_dir, set_type, check_labels=True):
    path = os.path.join(data_dir, self.files[set_type])
    is_test = set_type == "test"
    labels = None if (is_test or self.is_regression or not check_labels) else self.get_labels(data_dir)
    examples, header, empty = [], None, []
    rows = list(read_rows(path, self.task_name, self.delimiter, self.quoting))
    usual = collections.Counter(len(row) for _, row in rows).most_common(1)[0][0] if rows else 0
    for i, (line_num, row) in enumerate(rows):
      if i == 0:
        header = row if self.task.has_header else None
        a_col = self._resolve(self.task.text_a_column, header, path, "text_a_column")
        b_col = (None if self.task.text_b_column is None else
                 self._resolve(self.task.text_b_column, header, path, "text_b_column"))
        if not is_test and self.task.label_column is None:
          raise ValueError(f"Task {self.task_name!r} reads the labels of {path} from --label_column, which is unset. "
                           "Pass it (e.g. --label_column=label); a test file's labels are optional.")
        label_col = (self._test_label_column(header) if is_test else
                     self._resolve(self.task.label_column, header, path, "label_column"))
        if self.task.has_header:
          given = [c for c in (self.task.text_a_column, self.task.text_b_column, self.task.label_column)
                   if c is not None]
          by_index = all(isinstance(c, int) or str(c).isdigit() for c in given)  # maybe a file without a header
          if by_index and self.task.has_header_unset and path not in self._warned:
            self._warned.add(path)
            logging.warning("%s: line 1 (%s) is read as the header row (--has_header unset: true) and skipped; the "
                            "columns are given by index. If it is an example, pass --has_header=False (True to say "
                            "it is the header).", path, str(row)[:80])
          continue
      fields = len(header) if header is not None else usual  # a file without one: what most rows have
      if any(field.strip() for field in row[fields:]):  # the tail of a text read as a label (sweep 26, B1)
        what = f"its header {fields}" if header is not None else f"most rows {fields}"
        raise ValueError(f"{path} line {line_num} has {len(row)} fields, {what}: " + (
            "a text holds a tab, which a tsv file cannot quote. Remove it from the text." if self.delimiter == "\t"
            else 'a text holds a comma: quote it whole ("Great, fun movie"). Fix the file.'))
      cols = [c for c in (a_col, b_col, None if is_test else label_col) if c is not None]
      if any(c >= len(row) or c < -len(row) for c in cols):
        raise ValueError(f"{path} line {line_num} has {len(row)} columns; task {self.task_name!r} reads columns "
                         f"{cols}. Fix the file or the column options.")
      same = [k for k, c in (("text_a_column", a_col), ("text_b_column", b_col), ("label_column", label_col))
              if c is not None and [d % len(row) for d in cols].count(c % len(row)) > 1]
      if same:  # a slip in one flag: a class per row (sweep 23, B6)
        what = ("the text would be its own label, a class per row" if "label_column" in same else
                "each text would be paired with itself")
        raise ValueError(f"{' and '.join(f'{k}={getattr(self.task, k)!r}' for k in same)} name one column of "
                         f"{path}: {what}. Pass the columns of the texts and of the label.")
      if is_test:
        label = self._test_label(row, label_col, data_dir)
      elif self.is_regression:
        label = parse_float_label(row[label_col], path, line_num, self.task_name)
      else:
        label = _label_text(row[label_col])
        _check_label_chars(label, f"in {path} line {line_num}")
        if not label:  # a class "" of its own: rows left unlabelled (sweep 23, B2), as --labels=pos, is refused
          raise ValueError(f"{path} line {line_num}: its label (column {label_col}) is empty. Label every row, or "
                           "remove the unlabelled ones.")
        if labels is not None and label not in labels:
          check_label(label, labels, path, line_num, self.task_name, fix=self._label_fix(label, labels, data_dir))
      text_b = row[b_col] if b_col is not None else None
      if not row[a_col].strip() or (text_b is not None and not text_b.strip()):
        empty.append(line_num)
      examples.append(InputExample(guid=f"{set_type}-{i}", text_a=row[a_col], text_b=text_b, label=label))
    if empty and (path, "empty") not in self._warned:  # read without a word (sweep 33, C8)
      self._warned.add((path, "empty"))
      logging.warning("%s: %d of %d rows have an empty text (line %d first): they are read as examples of no words, "
                      "as the original reads them. Fill or remove them.", path, len(empty), len(examples), empty[0])
    if is_test:
      missing = [e.label for e in examples].count(None)
      self.test_has_labels = bool(examples) and not missing
      self.placeholder_why = (f"{missing} of {len(examples)} rows of {path} have no label of the classes in "
                              f"--label_column {self.task.label_column!r}" if label_col is not None and missing else "")
      placeholder = 0.0 if self.is_regression else self.get_labels(data_dir)[0]
      examples = [e if self.test_has_labels else dataclasses.replace(e, label=placeholder) for e in examples]
    return examples

  def _test_label_column(self, header):
    """--label_column in the test file, or None where it has none (a test file's labels are optional)."""
    column = self.task.label_column
    if column is None or isinstance(column, int) or str(column).isdigit():
      return None if column is None else int(column)
    return header.index(column) if header is not None and column in header else None

  def _test_label(self, row, label_col, data_dir):
    """A test row's label in `label_col`; None where it has none of the classes (or no number, for regression)."""
    if label_col is None or not -len(row) <= label_col < len(row):
      return None
    if self.is_regression:
      try:
        value = float(row[label_col])
      except ValueError:
        return None
      return value if math.isfinite(value) else None
    label = _label_text(row[label_col])
    return label if label in self.get_labels(data_dir) else None
