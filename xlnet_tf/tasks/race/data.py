"""RACE data as the original `run_race.py`: the directory layout -> `InputExample`s -> features.

Layout: `{data_dir}/{train,dev,test}/{middle,high}/*`, one JSON object per article with `article` (str),
`questions` (list of str), `options` (list of 4-lists of str) and `answers` (list of letters "A".."D"). Levels are
read middle first, then high (`high_only`/`middle_only` keep one); the files of a level in the order
`tf.io.gfile.listdir` gives, as the original's `tf.gfile.ListDirectory` (the file system's order, which varies
between file systems), or sorted by name with `sorted_file_order=True` (reproducible); the questions of a file in
file order. One question is one `InputExample` with four question/option strings (`join_qa`).

Features of one example, L = max_seq_length, for each of the 4 options in order, concatenated to [4 * L]:

    pad ... pad  ctx ... <sep>  qa ... <sep>  <cls>
    input_ids    0 ... 0      ctx ids, 4     qa ids, 4     3
    input_mask   1 ... 1      0 ...          0 ...         0      (float; 1 = padding, 0 = real token)
    segment_ids  4 ... 4      0 ...          1 ...         2

qa keeps its LAST `max_qa_length` tokens; ctx is cut from the end when ctx + qa do not fit in L - 3. The padding
is on the LEFT, so `<cls>` is always the last position (the head's summary `last` reads it).

The original's option aliasing (kept by default; `fix_option_aliasing=True` corrects it): when ctx + qa fit,
`run_race.py` appends `<sep> qa <sep> <cls>` to the article's own token list, so the next option sees the grown
list as its context (ctx <sep> qa_0 <sep> <cls>, all with segment id 0), and so on until a grown context no longer
fits and is cut (a copy, which stops the growth). Long articles, truncated for every option, never alias.
"""

import dataclasses
import json
import os

import numpy as np
from absl import logging

from xlnet_tf import fileio
from xlnet_tf.data import json_text
from xlnet_tf.data import records
from xlnet_tf.data.records import InputFeatures, PaddingInputExample
from xlnet_tf.data import tokenization

NUM_CHOICES = 4
LEVELS = ("middle", "high")
SPLITS = ("train", "dev", "test")
ANSWER_LETTERS = "ABCD"

SEG_ID_A = 0
SEG_ID_B = 1
SEG_ID_CLS = 2
SEG_ID_SEP = 3  # Defined by the original, never used by RACE.
SEG_ID_PAD = 4


@dataclasses.dataclass
class InputExample:
  """One question: the article, the 4 joined question/option strings, the answer index and where it came from.

  Attributes:
    context: str, the article.
    qa_list: list of 4 str, `join_qa(question, option)` for each option.
    label: int in 0..3, the correct option; None in a file without `answers` (read to predict it).
    level: "middle" or "high".
    file: str, the file it was read from ("" when built in code).
    question_index: int, the question's index in its file.
  """
  context: str
  qa_list: list
  label: int
  level: str
  file: str = ""
  question_index: int = 0



def check_lengths(max_seq_length, max_qa_length):
  """Raises ValueError unless 1 <= max_qa_length < max_seq_length - 3 (so the article keeps at least one token)."""
  if not records.is_int_at_least(max_seq_length, 5):
    raise ValueError(f"--max_seq_length must be an integer >= 5 (article, <sep>, qa, <sep>, <cls>). "
                     f"Received: {max_seq_length!r}.")
  if not records.is_int_at_least(max_qa_length, 1) or max_qa_length >= max_seq_length - 3:
    raise ValueError(f"--max_qa_length must be an integer in [1, max_seq_length - 3) so that the article keeps a "
                     f"token. Received: max_qa_length={max_qa_length!r}, max_seq_length={max_seq_length}. "
                     f"Lower --max_qa_length or raise --max_seq_length.")


def join_qa(question, option):
  """The original's question/option string: every `_` of the question replaced by the option, else `q + " " + o`."""
  if "_" in question:
    return question.replace("_", option)
  return question + " " + option


# ---------------------------------------------------------------------------------------------------------------
# Reading the layout.


def _bad_file(path, what):
  return ValueError(f"{path} is not a RACE article file: {what}. Each file under {{split}}/{{middle,high}}/ must be "
                    f"one JSON object with `article`, `questions`, `options` (4 per question) and `answers` "
                    f"(A-D); fix or remove the file.")


def read_race_file(path, level, answers_required=True):
  """Reads one RACE JSON file.

  Args:
    path: str, the file (local or `gs://...`).
    level: "middle" or "high", recorded in the examples.
    answers_required: False: a file without `answers` (the key left out, null, [], or a null for each question) is
      read (its examples' label None), to be predicted.

  Returns:
    List of `InputExample`, one per question, in file order.

  Raises:
    ValueError: the file is not UTF-8 JSON in the RACE format, an answer is not one of A-D, or a question does
      not have exactly 4 options.
  """
  try:
    data = json_text.load(path)
  except ValueError as e:
    raise _bad_file(path, str(e)) from None
  if not isinstance(data, dict):
    raise _bad_file(path, f"the JSON is a {type(data).__name__}, not an object")
  missing = [k for k in ("article", "questions", "options", "answers") if k not in data]
  hint = (" (a file to predict may lack `answers`, or have them null, [] or a null each: --do_predict alone reads "
          "it)")
  # no answers: the key left out, null, [] for some questions (a file of no question has [] either way), or a null
  # for each question (checked against the questions below)
  answers = data.get("answers")
  nulls = isinstance(answers, list) and answers and all(a is None for a in answers)
  unlabelled = answers is None or nulls or answers == [] and data.get("questions") not in (None, [])
  if unlabelled and not answers_required and missing in ([], ["answers"]):
    if not nulls:
      data = dict(data, answers=[None] * len(data["questions"]) if isinstance(data["questions"], list) else [])
  elif missing:
    raise _bad_file(path, f"missing key(s) {missing}" + (hint if missing == ["answers"] else ""))
  elif unlabelled:
    shown = json.dumps(answers) if not nulls or len(answers) < 4 else f"[null × {len(answers)}]"
    raise _bad_file(path, f"`answers` is {shown}: it has no answers" + hint)
  article, questions, options, answers = data["article"], data["questions"], data["options"], data["answers"]
  if not isinstance(article, str):
    raise _bad_file(path, f"`article` is a {type(article).__name__}, not a string")
  if not all(isinstance(x, list) for x in (questions, options, answers)):
    raise _bad_file(path, "`questions`, `options` and `answers` must be lists")
  if not len(questions) == len(options) == len(answers):
    raise _bad_file(path, f"{len(questions)} questions, {len(options)} option lists and {len(answers)} answers "
                          f"(they must be equally many)")
  examples = []
  for i, (question, opts, answer) in enumerate(zip(questions, options, answers)):
    if not isinstance(question, str):
      raise _bad_file(path, f"question {i} is a {type(question).__name__}, not a string")
    if not isinstance(opts, list) or len(opts) != NUM_CHOICES or not all(isinstance(o, str) for o in opts):
      raise _bad_file(path, f"question {i} needs a list of {NUM_CHOICES} option strings, got {opts!r}")
    if not unlabelled and (not isinstance(answer, str) or len(answer) != 1 or answer not in ANSWER_LETTERS):
      raise _bad_file(path, f"answer {i} is {answer!r}, not one of the letters {', '.join(ANSWER_LETTERS)}")
    examples.append(InputExample(context=article, qa_list=[join_qa(question, o) for o in opts],
                                 label=None if answer is None else ANSWER_LETTERS.index(answer), level=level,
                                 file=path, question_index=i))
  return examples


def level_files(data_dir, split, level, sorted_file_order=False, one_level=False):
  """The files of `{data_dir}/{split}/{level}`, every name `tf.io.gfile.listdir` gives (hidden ones included: the
  original reads them too).

  Args:
    sorted_file_order: False: listdir's order, the file system's (the original's). True: sorted by name.
    one_level: --high_only or --middle_only was passed (a missing directory is not advised them).

  Raises:
    FileNotFoundError: the directory does not exist.
    ValueError: it is empty (not a missing level: cached records are not reused by name for it), or holds a
      subdirectory.
  """
  cur_dir = os.path.join(data_dir, split, level)
  if not fileio.isdir(cur_dir) and one_level:  # it advised passing the flag (sweep 33, C5)
    raise FileNotFoundError(f"RACE directory {cur_dir} does not exist: --{level}_only reads {split}/{level} of "
                            "--data_dir (RACE's layout). Check --data_dir and the split.")
  if not fileio.isdir(cur_dir):
    raise FileNotFoundError(f"RACE directory {cur_dir} does not exist. --data_dir must hold {split}/middle and "
                            f"{split}/high (RACE's layout); check --data_dir, the split, or pass --high_only / "
                            f"--middle_only to read one level.")
  names = fileio.listdir(cur_dir)
  if not names:  # read as a level of no question: the other level alone was evaluated, exit 0
    other = "--middle_only" if level == "high" else "--high_only"
    raise ValueError(f"RACE directory {cur_dir} holds no article file (an unpacking cut short?). Put RACE's "
                            f"{split}/{level} files there, or pass {other} to read the other level alone.")
  paths = [os.path.join(cur_dir, name) for name in (sorted(names) if sorted_file_order else names)]
  for p in paths:
    if fileio.isdir(p):
      raise ValueError(f"RACE level directory {cur_dir} must hold only article files; {p} is a directory. "
                       f"Move it elsewhere.")
  return paths


def get_examples(data_dir, split, high_only=False, middle_only=False, sorted_file_order=False, answers_required=True):
  """Reads a RACE split as the original `get_examples`: middle then high, files in listdir's order (or sorted),
  questions in file order.

  Args:
    data_dir: str, the RACE root (holding train/, dev/, test/).
    split: "train", "dev" or "test".
    high_only: read only the high-school level.
    middle_only: read only the middle-school level.
    sorted_file_order: read a level's files sorted by name instead of in the directory's order (`level_files`).
    answers_required: False: files without `answers` are read too (`read_race_file`).

  Returns:
    List of `InputExample`.

  Raises:
    ValueError: unknown split, both high_only and middle_only, or a bad file (see `read_race_file`).
    FileNotFoundError: a level directory is missing.
  """
  if split not in SPLITS:
    raise ValueError(f"The RACE split must be one of {SPLITS}. Received: {split!r}. Check --eval_split.")
  if high_only and middle_only:
    raise ValueError("--high_only and --middle_only exclude each other (together they select nothing). "
                     "Pass at most one.")
  examples = []
  for path, level in split_files(data_dir, split, high_only, middle_only, sorted_file_order):
    examples.extend(read_race_file(path, level, answers_required))
  if empty := sorted({ex.file for ex in examples if not ex.context.strip()}):  # read without a word (sweep 33, C8)
    logging.warning("%d article files of the %s split have an empty article (%s first): their questions are read "
                    "with the options alone, as the original reads them. Fill or remove them.", len(empty), split,
                    empty[0])
  return examples


def split_files(data_dir, split, high_only=False, middle_only=False, sorted_file_order=False):
  """[(path, level)] of the files `get_examples` reads, in its order: middle then high (`level_files`)."""
  levels = [lv for lv in LEVELS if not (lv == "middle" and high_only) and not (lv == "high" and middle_only)]
  return [(path, level) for level in levels
          for path in level_files(data_dir, split, level, sorted_file_order, one_level=high_only or middle_only)]


# ---------------------------------------------------------------------------------------------------------------
# Features.



def padding_features(max_seq_length):
  """The original's features of a `PaddingInputExample`: ids 0, mask ALL 1, segment ids 0 (not 4), label 0."""
  n = max_seq_length * NUM_CHOICES
  return InputFeatures(input_ids=[0] * n, input_mask=[1] * n, segment_ids=[0] * n, label_id=0,
                       is_real_example=False)


def option_sequences(context_ids, qa_ids_list, max_seq_length, max_qa_length, fix_option_aliasing=False):
  """Lays out the 4 option sequences of one example (unpadded).

  Args:
    context_ids: list of int, the article's token ids.
    qa_ids_list: list of 4 lists of int, each option's question/option token ids (not yet cut).
    max_seq_length, max_qa_length: int, L and the qa budget (see `check_lengths`).
    fix_option_aliasing: False = the original (an option that fits grows the context of the next ones);
      True = every option starts from the article alone.

  Returns:
    List of 4 (tokens, segment_ids) pairs, each a list of int of length <= L ending `<sep> qa <sep> <cls>`.
  """
  context = list(context_ids)
  out = []
  for qa_ids in qa_ids_list:
    qa = list(qa_ids)[-max_qa_length:]
    budget = max_seq_length - 3 - len(qa)
    truncated = len(context) > budget
    ctx = context[:budget] if truncated else context
    tokens = ctx + [tokenization.SEP_ID] + qa + [tokenization.SEP_ID, tokenization.CLS_ID]
    segment_ids = [SEG_ID_A] * (len(ctx) + 1) + [SEG_ID_B] * (len(qa) + 1) + [SEG_ID_CLS]
    if not truncated and not fix_option_aliasing:
      context = tokens  # The original appends to the article's own list: the next option's context grows.
    out.append((tokens, segment_ids))
  return out


def convert_single_example(example, tokenize_fn, max_seq_length, max_qa_length, fix_option_aliasing=False):
  """Features of one example, as the original `run_race.convert_single_example` (see the module docstring).

  Args:
    example: `InputExample` (4 qa strings) or `PaddingInputExample`.
    tokenize_fn: text -> list of int (`tokenization.make_tokenize_fn`).
    max_seq_length: int L, the length of each of the 4 sequences.
    max_qa_length: int, qa keeps its last max_qa_length tokens.
    fix_option_aliasing: False (default) reproduces the original's features bit for bit, aliasing included;
      True gives every option the article alone (what the original meant).

  Returns:
    `InputFeatures` with lists of length 4 * L.
  """
  check_lengths(max_seq_length, max_qa_length)
  if isinstance(example, PaddingInputExample):
    return padding_features(max_seq_length)
  where = f"(file {example.file or '?'}, question {example.question_index})"
  if isinstance(example.qa_list, str) or len(example.qa_list) != NUM_CHOICES:  # "abcd": four options of a letter
    raise ValueError(f"A RACE example needs a list of {NUM_CHOICES} question/option strings. Received "
                     f"{example.qa_list!r:.80} {where}.")
  if example.label is not None and not (records.is_int_at_least(example.label, 0) and example.label < NUM_CHOICES):
    raise ValueError(f"A RACE example's label is the index of its answer, 0 to {NUM_CHOICES - 1} (None: unknown). "
                     f"Received: {example.label!r} {where}.")  # 7 was written, and trained on with no loss (sweep 36)
  sequences = option_sequences(tokenize_fn(example.context), [tokenize_fn(qa) for qa in example.qa_list],
                               max_seq_length, max_qa_length, fix_option_aliasing)
  input_ids, input_mask, all_segment_ids = [], [], []
  for tokens, segment_ids in sequences:
    pad = max_seq_length - len(tokens)
    input_ids.extend([0] * pad + tokens)
    input_mask.extend([1] * pad + [0] * len(tokens))
    all_segment_ids.extend([SEG_ID_PAD] * pad + segment_ids)
  return InputFeatures(input_ids=input_ids, input_mask=input_mask, segment_ids=all_segment_ids,
                       label_id=0 if example.label is None else example.label)  # None: to predict (0, as padding)


def pad_examples(examples, batch_size):
  """A new list: `examples` plus `PaddingInputExample`s up to a multiple of batch_size (the original's eval)."""
  if not records.is_int_at_least(batch_size, 1):
    raise ValueError(f"The eval batch size must be a positive integer. Received: {batch_size!r}. "
                     "Set --eval_batch_size.")
  return list(examples) + [PaddingInputExample() for _ in range(-len(examples) % batch_size)]


def features_to_arrays(features):
  """Stacks `InputFeatures` into numpy arrays keyed by the record feature names.

  Returns:
    dict: input_ids int32 [E, 4L]; input_mask float32 [E, 4L] (1 = padding); segment_ids int32 [E, 4L];
    label_ids int32 [E]; is_real_example int32 [E].
  """
  return {
      "input_ids": np.array([f.input_ids for f in features], dtype=np.int32),
      "input_mask": np.array([f.input_mask for f in features], dtype=np.float32),
      "segment_ids": np.array([f.segment_ids for f in features], dtype=np.int32),
      "label_ids": np.array([f.label_id for f in features], dtype=np.int32),
      "is_real_example": np.array([int(f.is_real_example) for f in features], dtype=np.int32),
  }


def convert_examples(examples, tokenize_fn, max_seq_length, max_qa_length, fix_option_aliasing=False):
  """`convert_single_example` over a list, stacked by `features_to_arrays` (input_ids [E, 4L], ...)."""
  return features_to_arrays([convert_single_example(ex, tokenize_fn, max_seq_length, max_qa_length,
                                                    fix_option_aliasing) for ex in examples])


def aliasing_stats(examples, tokenize_fn, max_seq_length, max_qa_length):
  """How often the original's aliasing changes the features: compares the default with `fix_option_aliasing`.

  Returns:
    dict with `items` and `sequences` (4 per item) counted, `items_differ` / `sequences_differ` (whose features
    differ) and their fractions `item_fraction` / `sequence_fraction`. Option 0 never differs, so at most 3/4 of
    the sequences can.
  """
  check_lengths(max_seq_length, max_qa_length)
  stats = {"items": 0, "sequences": 0, "items_differ": 0, "sequences_differ": 0}
  for ex in examples:
    if isinstance(ex, PaddingInputExample):
      continue
    context = tokenize_fn(ex.context)
    qa_ids = [tokenize_fn(qa) for qa in ex.qa_list]
    orig = option_sequences(context, qa_ids, max_seq_length, max_qa_length, fix_option_aliasing=False)
    fixed = option_sequences(context, qa_ids, max_seq_length, max_qa_length, fix_option_aliasing=True)
    differ = sum(a != b for a, b in zip(orig, fixed))
    stats["items"] += 1
    stats["sequences"] += len(orig)
    stats["items_differ"] += int(differ > 0)
    stats["sequences_differ"] += differ
  stats["item_fraction"] = stats["items_differ"] / max(stats["items"], 1)
  stats["sequence_fraction"] = stats["sequences_differ"] / max(stats["sequences"], 1)
  return stats
