"""Reading SQuAD JSON into examples, as the original `read_squad_examples`, with one-line errors that name the file,
the entry and what is wrong."""

import dataclasses
import json
import textwrap

from absl import logging

from xlnet_tf import fileio
from xlnet_tf.data import json_text


@dataclasses.dataclass
class SquadExample:
  """One question on one paragraph.

  qas_id, question_text, paragraph_text: str (the raw context).
  orig_answer_text: str; start_position: int, the answer's first character in paragraph_text. Training only
    (None in evaluation); an impossible question has "" and -1.
  is_impossible: bool (always False in evaluation, as the original).
  """
  qas_id: str
  question_text: str
  paragraph_text: str
  orig_answer_text: str = None
  start_position: int = None
  is_impossible: bool = False


def _fail(path, where, what):
  raise ValueError(f"SQuAD file {path}: {where}: {what}")


def load_squad_data(input_file):
  """The `data` list of a SQuAD JSON file (what the evaluation needs).

  Raises:
    FileNotFoundError: no such file.
    ValueError: not JSON, or no `data` list of articles with `paragraphs`.
  """
  if not fileio.exists(input_file):
    raise FileNotFoundError(f"SQuAD file {input_file} does not exist. Pass an existing --train_file/--predict_file.")
  try:
    doc = json_text.load(input_file)
  except ValueError as e:
    raise ValueError(f"SQuAD file {input_file} is {e}. Pass a SQuAD v1.1/v2.0 JSON file (UTF-8).") from None
  if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
    _fail(input_file, "top level", "expected an object with a 'data' list (SQuAD v1.1/v2.0 layout).")
  for a, article in enumerate(doc["data"]):
    if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
      _fail(input_file, f"data[{a}]", "expected an object with a 'paragraphs' list.")
  return doc["data"]


def _check_answer(path, where, qas_id, context, answer):
  if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) or "answer_start" not in answer:
    _fail(path, where, f"question {qas_id!r}: an answer needs 'text' (str) and 'answer_start' (int).")
  text, start = answer["text"], answer["answer_start"]
  if not isinstance(start, int) or isinstance(start, bool):
    _fail(path, where, f"question {qas_id!r}: answer_start must be an int, got {start!r}.")
  found = context[start:start + len(text)] if 0 <= start else None
  if not text or found != text:
    _fail(path, where, f"question {qas_id!r}: the answer {text!r} is not the text at answer_start {start} of its "
          f"context (found {found!r}); fix answer_start or the answer text.")
  return text, start


def has_answers(orig_data):
  """Whether a SQuAD `data` list carries gold answers (any question with `answers` or `is_impossible`); the
  hidden test set carries none."""
  return any("answers" in qa or "is_impossible" in qa
             for article in orig_data for paragraph in article["paragraphs"] for qa in paragraph.get("qas", []))


def _check_eval_question(path, where, qa, first_of_id, labelled):
  """ValueError unless the answers of a question to predict each have a `text` string (the evaluation compares
  the prediction with it), every question has `answers` where the file is `labelled` (the evaluation reads them
  for every question), and its id is a string or an integer and not one of an earlier question (`first_of_id`:
  id -> where)."""
  if labelled and "answers" not in qa:
    _fail(path, where, f"question {qa['id']!r} has no 'answers' list, which the evaluation reads for every question "
          "of a file that has answers (an unanswerable question has an empty list). Fix the file.")
  answers = qa.get("answers", [])
  if not isinstance(answers, list) or not all(isinstance(a, dict) and isinstance(a.get("text"), str)
                                              for a in answers):
    _fail(path, where, f"question {qa['id']!r}: every answer needs a 'text' string, which the evaluation compares "
          "the prediction with. Fix the file.")
  if isinstance(qa["id"], bool) or not isinstance(qa["id"], (str, int)):  # 1.0 and true: one key (1.0 == True)
    _fail(path, where, f"question id {qa['id']!r} is a {type(qa['id']).__name__}: predictions are keyed by id, "
          "and ids must be strings (as SQuAD's) or integers. Fix the file.")
  key = str(qa["id"])  # predictions.json's key
  if key in first_of_id:
    _fail(path, where, f"question id {qa['id']!r} is also the id of {first_of_id[key]}: predictions are keyed by id, "
          "so one of the two would be lost. Give each question its own id.")
  first_of_id[key] = where


def read_squad_examples(input_file, is_training):
  """Reads a SQuAD v2.0 (or v1.1) JSON file into SquadExamples, in file order, as the original.

  Training reads `is_impossible` (missing, as in SQuAD v1.1: False; the original raises KeyError there) and needs
  exactly one answer per answerable question, whose text must be at its `answer_start`. Evaluation sets
  is_impossible False and needs what the evaluation reads from the file itself: a `text` string in every answer,
  an `answers` list in every question of a file that has answers, and question ids that differ (predictions are keyed by id: the original silently keeps one of two questions with
  the same id).

  Raises:
    FileNotFoundError: no such file.
    ValueError: one line naming the file, where and what is wrong (not JSON, a missing key, an answer count or
      offset that does not hold; in evaluation an answer without text, an id used twice).
  """
  examples, first_of_id, data = [], {}, load_squad_data(input_file)
  labelled = not is_training and has_answers(data)
  for a, article in enumerate(data):
    for p, paragraph in enumerate(article["paragraphs"]):
      where = f"data[{a}].paragraphs[{p}]"
      if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str) or not isinstance(
          paragraph.get("qas"), list):
        _fail(input_file, where, "expected an object with a 'context' string and a 'qas' list.")
      context = paragraph["context"]
      for q, qa in enumerate(paragraph["qas"]):
        qwhere = f"{where}.qas[{q}]"
        if not isinstance(qa, dict) or "id" not in qa or not isinstance(qa.get("question"), str):
          _fail(input_file, qwhere, "expected an object with an 'id' and a 'question' string.")
        if not isinstance(qa.get("answers", []), list):  # was "needs exactly 1 answer, it has {...}" (sweep 32, U20)
          shown = textwrap.shorten(json.dumps(qa["answers"]), 60, placeholder=" ...")
          hf = " (the HuggingFace datasets layout: lists of texts and starts)" if isinstance(qa["answers"], dict) else ""
          _fail(input_file, qwhere, f"question {qa['id']!r}: 'answers' is {shown}{hf}, not SQuAD's list of one "
                "{\"text\": ..., \"answer_start\": ...} object per answer. Convert the file to SQuAD's layout.")
        example = SquadExample(qas_id=qa["id"], question_text=qa["question"], paragraph_text=context)
        if is_training:
          example.is_impossible = qa.get("is_impossible", False)
          if not isinstance(example.is_impossible, bool):
            _fail(input_file, qwhere, f"question {qa['id']!r}: is_impossible must be true or false, got "
                  f"{example.is_impossible!r}.")
          answers = qa.get("answers", [])
          if example.is_impossible:
            example.orig_answer_text, example.start_position = "", -1
          elif not isinstance(answers, list) or len(answers) != 1:
            unsaid = " and no is_impossible: true" if answers == [] and "is_impossible" not in qa else ""  # (sweep 28)
            _fail(input_file, qwhere, f"question {qa['id']!r}: for training, each answerable question needs exactly "
                  f"1 answer, it has {len(answers) if isinstance(answers, list) else answers!r}{unsaid}. Use a "
                  "training file (dev files with several answers are read with is_training=False)"
                  + (", or mark an unanswerable question \"is_impossible\": true (SQuAD 2.0)." if unsaid else "."))
          else:
            example.orig_answer_text, example.start_position = _check_answer(
                input_file, qwhere, qa["id"], context, answers[0])
        else:
          _check_eval_question(input_file, qwhere, qa, first_of_id, labelled)
        examples.append(example)
  if blank := [ex.qas_id for ex in examples if not ex.question_text.strip()]:  # read without a word (sweep 33, C8)
    logging.warning("%s: %d of %d questions are empty (id %r first): they are read as questions of no words, as the "
                    "original reads them. Fill or remove them.", input_file, len(blank), len(examples), blank[0])
  return examples
