"""What every classifier task's processor shares: `InputExample`, the `DataProcessor` base class, and reading
delimited task files with one-line errors that name the file, the line and what to fix."""

import csv
import dataclasses
import logging
import math
import os

import tensorflow as tf

from xlnet_tf.tasks.classifier import metrics


EVAL_SPLITS = ("dev", "test")


@dataclasses.dataclass
class InputExample:
  """One example: `text_a`, optional `text_b`, and a label (a string, or a float for regression)."""
  guid: str
  text_a: str
  text_b: str = None
  label: object = None


def open_text(path):
  """A task file as UTF-8 text, its line ends untranslated (as the original's `tf.gfile.Open`)."""
  if "://" in path:
    return tf.io.gfile.GFile(path, "r")
  return open(path, encoding="utf-8", newline="\n")


def require_file(path, task_name):
  if not tf.io.gfile.exists(path):
    dev = os.path.basename(path).startswith("dev")
    other = "; to evaluate or predict the test file, pass --eval_split=test" if dev else ""
    raise FileNotFoundError(f"Task {task_name!r} needs the file {path}, which does not exist. Point --data_dir at "
                            f"the directory holding {os.path.basename(path)}{other}.")


# Characters a field may hold: Python's csv default (131072) refused a long document as a broken file; its text is cut
# to --max_seq_length tokens after reading anyway. 2**31 - 1: what csv takes on every platform (a C long).
_FIELD_LIMIT = 2 ** 31 - 1


def read_rows(path, task_name, delimiter, quoting):
  """Yields (physical line number, row) for every row of a delimited file that holds more than white space.

  The lines end at LF only and lose every CR, as the lines of the original's `tf.gfile` reader (its readline drops
  them): a lone CR in a field joins its neighbours ("one\\rtwo" -> "onetwo") and ends no row. A byte-order mark
  at the start of the file (Excel's "CSV UTF-8") is no text: it is dropped (it became part of the first field, so
  a header column could not be named and the quotes of a first quoted field were read as text).
  """
  require_file(path, task_name)
  csv.field_size_limit(_FIELD_LIMIT)
  with open_text(path) as f:
    lines = ((line[1:] if i == 0 and line.startswith("\ufeff") else line).replace("\r", "")
             for i, line in enumerate(f))
    # strict: a stray quote ("bad movie,0) is an error, not a field that swallows the lines up to the next quote (a
    # 6-row test file predicted 3 rows, exit 0: sweep 26, A1). A quoted field may still hold line ends.
    reader, start, spanning = csv.reader(lines, delimiter=delimiter, quoting=quoting, strict=True), 1, []
    try:
      for row in reader:
        if any(field.strip() for field in row):  # a line of spaces or tabs alone holds no row, as an empty one
          yield reader.line_num, row
          if reader.line_num > start:
            spanning.append((start, reader.line_num))
        start = reader.line_num + 1
    except csv.Error as e:
      where = f"line {reader.line_num} is" if reader.line_num <= start else f"lines {start}-{reader.line_num} are"
      raise ValueError(f"{path} {where} not valid {task_name} data ({e}): a field that holds a quote must be "
                       'quoted whole, its quotes doubled ("a ""b"" c"). Fix the file.') from None
    except UnicodeDecodeError as e:
      raise ValueError(f"{path} is not UTF-8 text ({e}). Re-encode it as UTF-8.") from None
  if spanning:  # valid csv, but two stray quotes join the rows between them as well (rerun 26, N3)
    logging.warning("%s: %d row(s) span several lines, the first lines %d-%d (a quoted text holding line ends). If "
                    "no text of the file does, a stray quote joined rows there: fix the file.", path, len(spanning),
                    *spanning[0])



def check_label(label, labels, path, line_num, task_name, fix=None):
  """ValueError naming the file and line unless `label` is one of `labels`; `fix` says what to do (default: a task's
  fixed label set, so fix the file or pick another --task_name)."""
  if label not in labels:
    near = [known for known in labels if isinstance(label, str) and str(known).lower() == label.lower()]
    raise ValueError(f"Label {label!r} in {path} line {line_num} is not one of the labels of task {task_name!r}: "
                     f"{labels}" + (f" (it differs from {near[0]!r} only in case: labels are compared as written)"
                                    if near else "") +
                     f". {fix or 'Fix the file, or pick the task that matches it with --task_name.'}")


def parse_float_label(text, path, line_num, task_name):
  """The float of a regression label, as the original's `float(text)`; a ValueError naming the file and line for
  one that is not a number, or not a finite one (`nan`, `inf`: float() takes them, and the loss would be NaN)."""
  try:
    value = float(text)
  except ValueError:
    raise ValueError(f"Regression label {text!r} in {path} line {line_num} (task {task_name!r}) is not a number. "
                     "Fix the file.") from None
  if not math.isfinite(value):
    raise ValueError(f"Regression label {text!r} in {path} line {line_num} (task {task_name!r}) is not a finite "
                     "number. Fix the file.")
  return value


class DataProcessor:
  """Base class: reads one task's train/dev/test files into `InputExample`s.

  Attributes:
    task_name: str, the registry name (`--task_name`).
    is_regression: bool, float labels and a regression head (run with --is_regression=True).
    text_replacements: ((old, new), ...) the reader applies to every text before tokenization (imdb: `<br />`);
      the exported SavedModel applies them to its raw input too.
  """
  task_name = None
  is_regression = False
  text_replacements = ()
  test_has_labels = True  # False: the test file has no label column, its examples get a placeholder label

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

  def placeholder_labels_note(self, eval_split):
    """The warning an evaluation of `eval_split` deserves when its examples carry the placeholder label (a test
    file without labels: GLUE's, a csv/tsv task's), else None. The original evaluates them all the same, and its
    metrics then compare the predictions with the placeholder."""
    if eval_split != "test" or self.test_has_labels:
      return None
    why = f" ({self.placeholder_why})" if getattr(self, "placeholder_why", "") else ""
    return (f"--eval_split=test: the test examples of task {self.task_name!r} lack labels{why}; each one gets "
            f"the placeholder label {self.get_labels()[0]!r}, as in the original, so the eval metrics compare the "
            "predictions with it and say nothing of the model. Pass --do_predict for the test predictions, or "
            "--eval_split=dev.")

  @property
  def metric_names(self):
    """The metrics this task reports, as keys of `metrics.task_metrics` without the `eval_` prefix."""
    return metrics.metric_names(self.task_name, self.is_regression)
