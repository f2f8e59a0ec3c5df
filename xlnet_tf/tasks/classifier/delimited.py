"""The generic `csv` / `tsv` classifier task: the user names the text and label columns (`DelimitedProcessor`)."""

import csv
import os

from xlnet_tf.tasks.classifier.examples import (DataProcessor, InputExample, check_label, parse_float_label,
                                                read_rows)


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
    for i, (line_num, row) in enumerate(read_rows(path, self.task_name, self.delimiter, self.quoting)):
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
        label = parse_float_label(row[label_col], path, line_num, self.task_name)
      else:
        label = row[label_col]
        if labels is not None:
          check_label(label, labels, path, line_num, self.task_name)
      text_b = row[b_col] if b_col is not None else None
      examples.append(InputExample(guid=f"{set_type}-{i}", text_a=row[a_col], text_b=text_b, label=label))
    return examples
