"""SentencePiece tokenisation as the original `prepro_utils.py`, plus the XLNet special symbols and SP training.

The original normalises text with `preprocess_text` and tokenises with `encode_ids(sp, text)`, which is
SentencePiece's `EncodeAsPieces` followed by one post-processing rule: a piece that ends in `,` right after a digit
(`▁2000,`) is re-encoded without its comma and the comma becomes its own piece (`▁2000`, `,`).

Every XLNet vocabulary reserves ids 0-8 for the symbols in `special_symbols`. `load_sentencepiece` refuses a model
whose ids differ, and `train_sentencepiece` trains one with the original README's settings and checks the ids.
"""

import codecs
import dataclasses
import errno
import glob as glob_lib
import logging
import os
import re
import unicodedata

import numpy as np
import sentencepiece as spm

from xlnet_tf import child_call
from xlnet_tf import fileio
from xlnet_tf import locks


SPIECE_UNDERLINE = "▁"


special_symbols = {
    "<unk>": 0,
    "<s>": 1,
    "</s>": 2,
    "<cls>": 3,
    "<sep>": 4,
    "<pad>": 5,
    "<mask>": 6,
    "<eod>": 7,
    "<eop>": 8,
}


UNK_ID = special_symbols["<unk>"]


CLS_ID = special_symbols["<cls>"]


SEP_ID = special_symbols["<sep>"]


PAD_ID = special_symbols["<pad>"]


MASK_ID = special_symbols["<mask>"]


EOD_ID = special_symbols["<eod>"]


EOP_ID = special_symbols["<eop>"]


# The original README's `spm_train` settings.
CONTROL_SYMBOLS = ("<cls>", "<sep>", "<pad>", "<mask>", "<eod>")


USER_DEFINED_SYMBOLS = ("<eop>", ".", "(", ")", '"', "-", "–", "£", "€")


def preprocess_text(inputs, lower=False, remove_space=True, keep_accents=False):
  """Normalises text as the original `prepro_utils.preprocess_text`.

  Args:
    inputs: str, the text.
    lower: lower-case the result (the `--uncased` flag).
    remove_space: collapse whitespace runs into one space and strip both ends.
    keep_accents: if False, apply NFKD and drop combining characters (`é` -> `e`).

  Returns:
    The normalised str. ` `` ` and `''` become `"`.
  """
  if isinstance(inputs, bytes):
    inputs = inputs.decode("utf-8")
  elif not isinstance(inputs, str):  # None, 5: an AttributeError deep inside (sweep 36)
    raise TypeError(f"preprocess_text takes a text (str, or UTF-8 bytes). Received: {inputs!r:.60}.")
  outputs = " ".join(inputs.strip().split()) if remove_space else inputs
  outputs = outputs.replace("``", '"').replace("''", '"')
  if not keep_accents and not outputs.isascii():  # NFKD is the identity on ASCII, which has no combining marks.
    outputs = unicodedata.normalize("NFKD", outputs)
    outputs = "".join(c for c in outputs if not unicodedata.combining(c))
  if lower:
    outputs = outputs.lower()
  return outputs


def _is_digit_comma(piece):
  """The original's trigger for re-encoding: longer than 1, ends in ',' after a digit."""
  return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def encode_pieces(sp_model, text, sample=False):
  """Tokenises `text` into pieces as the original `prepro_utils.encode_pieces` (Python 3 path).

  Args:
    sp_model: a loaded `sentencepiece.SentencePieceProcessor`.
    text: str, normally the output of `preprocess_text`.
    sample: use subword regularisation (`SampleEncodeAsPieces(text, 64, 0.1)`), as the original.

  Returns:
    List of str pieces, with every `<digits>,` piece split into the re-encoded number and a `,` piece.
  """
  if not isinstance(text, str):  # a list gave nested lists, bytes a piece of U+FFFD (sweep 36)
    raise TypeError(f"encode_pieces and encode_ids take one text (str; preprocess_text decodes bytes). Received: "
                    f"{text!r:.60}.")
  pieces = sp_model.SampleEncodeAsPieces(text, 64, 0.1) if sample else sp_model.EncodeAsPieces(text)
  new_pieces = []
  for piece in pieces:
    if not _is_digit_comma(piece):
      new_pieces.append(piece)
      continue
    cur_pieces = sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
    if piece[0] != SPIECE_UNDERLINE and cur_pieces and cur_pieces[0][0] == SPIECE_UNDERLINE:
      if len(cur_pieces[0]) == 1:
        cur_pieces = cur_pieces[1:]
      else:
        cur_pieces[0] = cur_pieces[0][1:]
    cur_pieces.append(piece[-1])
    new_pieces.extend(cur_pieces)
  return new_pieces


def encode_ids(sp_model, text, sample=False):
  """Token ids of `text`: `[sp_model.PieceToId(p) for p in encode_pieces(sp_model, text, sample)]`."""
  return [sp_model.PieceToId(piece) for piece in encode_pieces(sp_model, text, sample=sample)]



def make_tokenize_fn(sp_model, uncased=False):
  """The original fine-tuning scripts' tokenize_fn: text -> `encode_ids(sp_model, preprocess_text(text, uncased))`."""
  def tokenize_fn(text):
    return encode_ids(sp_model, preprocess_text(text, lower=uncased))
  return tokenize_fn

class BatchEncoder:
  """`encode_ids` for many lines at once, with SentencePiece's multi-threaded batch encoder.

  Gives exactly `encode_ids(sp_model, line)` for every line. Lines whose ids contain a digit-comma piece or
  `<unk>` (whose surface string the id alone does not tell) take the exact per-line path.
  """

  def __init__(self, sp_model, num_threads=None):
    self.sp_model = sp_model
    self.num_threads = num_threads or os.cpu_count() or 1
    n = sp_model.GetPieceSize()
    self.slow_ids = frozenset([UNK_ID] + [i for i in range(n) if _is_digit_comma(sp_model.IdToPiece(i))])

  def __call__(self, texts):
    """Returns a list of id lists, one per str in `texts`."""
    if isinstance(texts, (str, bytes)):  # a row per character (sweep 36)
      raise TypeError(f"BatchEncoder takes a list of texts; for one text, pass [text]. Received: {texts!r:.60}.")
    if not texts:
      return []
    all_ids = self.sp_model.Encode(list(texts), out_type=int, num_threads=self.num_threads)
    slow_ids = self.slow_ids
    for k, ids in enumerate(all_ids):
      if not slow_ids.isdisjoint(ids):
        all_ids[k] = encode_ids(self.sp_model, texts[k])
    return all_ids


def check_special_symbols(sp_model, path="<model>"):
  """Raises ValueError unless `sp_model` has every XLNet special symbol at its id (`<unk>` 0 ... `<eop>` 8)."""
  n = sp_model.GetPieceSize()
  wrong = []
  for symbol, idx in special_symbols.items():
    got = sp_model.IdToPiece(idx) if idx < n else None
    if got != symbol:
      wrong.append(f"id {idx} is {got!r}, expected {symbol!r}")
  if wrong:
    raise ValueError(
        f"SentencePiece model {path} lacks the XLNet special symbols at ids 0-8 ({'; '.join(wrong[:3])}"
        f"{'; ...' if len(wrong) > 3 else ''}). Train one with scripts/train_spm.py (the original README's "
        f"control/user-defined symbols) or use a released XLNet spiece.model.")


def load_sentencepiece(path, flag="--sp_path"):
  """Loads a SentencePiece model and checks that it has the XLNet special symbols at ids 0-8.

  Args:
    path: path of a `.model` file (local, or any path `tf.io.gfile` understands when it contains `://`).
    flag: the flag that passed `path`, which the messages name (`--sp_path` in data_utils.py,
      `--spiece_model_file` in the fine-tuning tools).

  Returns:
    A `sentencepiece.SentencePieceProcessor`.

  Raises:
    FileNotFoundError: no such file.
    ValueError: a directory, a file that is not a SentencePiece model, or a model that lacks the XLNet symbols.
  """
  if not path:
    raise ValueError(f"No SentencePiece model given: pass {flag}=<path to spiece.model>.")
  if fileio.isdir(path):
    raise ValueError(f"SentencePiece model {path} is a directory. Pass the .model file itself as {flag}, e.g. "
                     f"{os.path.join(path, 'spiece.model')}.")
  if not fileio.exists(path):
    raise FileNotFoundError(f"SentencePiece model {path} does not exist. Pass an existing {flag}.")
  with fileio.open_file(path, "rb") as f:
    proto = f.read()
  if not proto:
    raise ValueError(f"SentencePiece model {path} is empty (0 bytes: a copy or download cut short?). Pass the "
                     f".model file written by scripts/train_spm.py as {flag}.")
  sp_model = spm.SentencePieceProcessor()
  try:
    sp_model.LoadFromSerializedProto(proto)
  except (RuntimeError, OSError) as e:
    raise ValueError(fileio.lfs_pointer_line(path, proto[:200]) or f"{path} is not a SentencePiece model "
                     f"({str(e).splitlines()[0] if str(e) else e!r}). Pass the .model file written by "
                     f"scripts/train_spm.py as {flag}.") from None
  check_special_symbols(sp_model, path)
  return sp_model


def vocab_size(sp_model):
  """The vocabulary size of a loaded model (`n_token` of the model trained on it)."""
  return sp_model.GetPieceSize()


def start_piece_table(sp_model):
  """bool [vocab_size], True where the original `_is_start_piece(IdToPiece(id))` holds.

  A start piece begins with `▁` or `<`, or is one of the punctuation characters of the original's set. That set
  was written `'!"#$%&\\"()*+,-./:;?@[\\\\]^_`{|}~'`, so the apostrophe is missing (a quirk kept on purpose).
  """
  punctuation = set('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
  pieces = [sp_model.IdToPiece(i) for i in range(sp_model.GetPieceSize())]
  return np.array([p.startswith(SPIECE_UNDERLINE) or p.startswith("<") or p in punctuation for p in pieces],
                  dtype=bool)


def bracket_hint(pattern):
  """Where a glob that matched nothing names a directory whose name holds [ ] (`br[1]/*.txt`: a glob reads them as a
  set of characters), the words saying so; else "" (sweep 24)."""
  head = os.path.dirname(pattern)
  if not ("[" in head and os.path.isdir(head)):
    return ""
  spelt = re.sub(r"[][]", lambda m: f"[{m.group()}]", head)
  return f" (a glob reads the [ ] in {head} as a set of characters: write that directory {spelt})"


def expand_inputs(inputs):
  """A glob, a comma-separated list of globs/files, or a list of them -> sorted unique existing files (a file named
  with glob characters, `br[1]/c.txt`, matched nothing: sweep 23, C10)."""
  if isinstance(inputs, str) and "," in inputs and (os.path.isfile(inputs) or glob_lib.glob(inputs)):  # (sweep 33, B7)
    raise FileNotFoundError(f"--input {inputs!r} is read as a comma-separated list, which splits that file's name. "
                            "Rename the file, or match it with a glob that avoids the comma (? for it).")
  if isinstance(inputs, str):
    inputs = [s for s in inputs.split(",") if s.strip()]
  if not inputs:  # "matches no file but --model_prefix's own (left out)" (sweep 32, U15)
    raise FileNotFoundError("--input is empty. Pass text files or a glob, e.g. --input='data/*.txt'.")
  files = []
  for pattern in inputs:  # a file whose name holds [ ] * or ?, which the glob reads as wildcards, is taken as named
    matches = sorted(glob_lib.glob(pattern)) or ([pattern] if os.path.isfile(pattern) else [])
    if not matches:
      raise FileNotFoundError(f"Input {pattern!r} matches no file{bracket_hint(pattern)}. Pass existing text files or "
                              "a glob (--input).")
    files.extend(matches)
  return sorted(set(files))


def own_files_left_out(inputs, model_prefix, warn=True):
  """`expand_inputs(inputs)` without the files training writes, `{model_prefix}.model` and `.vocab`, which a glob
  over the directory of an earlier run's model reaches (a rerun with --overwrite was refused as "not UTF-8 text ...
  iconv", the model being read as a corpus; a `.vocab` alone would have been read as text), named in one warning, as
  data_utils.py leaves out its own files. ValueError where an input names one of them itself: training would
  replace the text it trains on (with --overwrite it did; sweep 25, B4). `warn`: say what was left out."""
  own = {fileio.real_path(model_prefix + suffix): suffix for suffix in (".model", ".vocab")}
  for pattern in [s for s in inputs.split(",") if s] if isinstance(inputs, str) else inputs:
    if fileio.real_path(pattern) in own:
      raise ValueError(f"--input {pattern} is the {own[fileio.real_path(pattern)]} file of --model_prefix="
                       f"{model_prefix}, which training writes: it would replace the text it trains on, --overwrite "
                       "or not. Pass another --model_prefix.")
  files = expand_inputs(inputs)
  if (left := [path for path in files if fileio.real_path(path) in own]) and warn:
    logging.warning("--input=%s reaches --model_prefix's own files, which are never inputs: %s left out.",
                    inputs if isinstance(inputs, str) else ",".join(inputs), ", ".join(left))
  return [path for path in files if path not in left]


# spm_train's --max_sentence_length: a longer line (bytes) is skipped without a word, and a corpus of only such lines
# (one line per document, lines ending in CR alone) ends in its assertion `!sentences_.empty()`.
MAX_SENTENCE_BYTES = 4192


_COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip -k"), (b"BZh", "bzip2", "bunzip2 -k"), (b"\xfd7zXZ\x00", "xz", "unxz -k"),
               (b"PK\x03\x04", "zip", "unzip"), (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"))


def compressed_line(path, head):
  """The line for a file whose first bytes `head` are a compressed file's or an archive's (gzip, bzip2, xz, zip,
  zstd) where text is read, else None: its bytes are text in no encoding, and the advice to convert them from
  latin1 made a corpus of them (sweep 26, B7)."""
  for magic, kind, command in _COMPRESSED:
    if head.startswith(magic):
      return (f"{path} is {kind}-compressed: the input is plain text. Decompress it first ({command} {path}) and "
              "pass the text file.")
  if is_tar(head):
    return f"{path} is a tar archive: the input is plain text. Extract it first (tar -xf {path}) and pass its files."
  return None


def is_tar(head):
  """Whether the first bytes `head` are a tar archive's header (`ustar` at 257, NUL-padded): UTF-8 text to a
  decoder, its headers and padding read into the corpus (rerun 26, N7)."""
  return head[257:262] == b"ustar" and b"\x00" in head[:257]


def nul_bytes_line(path, line_no, line):
  """The line saying that line `line_no` (bytes or str) of `path` holds NUL bytes (a crash's zero-filled gap, or no
  text), None where it holds none: data_utils.py read them into the records as text (sweep 33, B5), SentencePiece
  into its vocabulary."""
  nul = b"\0" if isinstance(line, bytes) else "\0"
  if nul not in line:
    return None
  return (f"{path}:{line_no}: holds {line.count(nul)} NUL bytes from column {line.index(nul) + 1} (a file damaged, or "
          "not text). Fix or remove it (tr -d '\\000' drops them).")


def check_text_files(files, flag="--input", head_bytes=1 << 20):
  """ValueError unless `files` are text SentencePiece can train on: no directory, UTF-8 names, each file's first
  `head_bytes` UTF-8, and some line that is not blank and not longer than `MAX_SENTENCE_BYTES`; a warning for a
  file that holds such long lines (SentencePiece skips them). (SentencePiece's own errors name no file: `Is a
  directory`, or an assertion on its sentence count or vocabulary.)"""
  has_text = has_long = False
  for path in files:
    if os.path.isdir(path):
      raise ValueError(f"{flag}: {path} is a directory. Make {flag} match text files only.")
    if not_utf8 := fileio.non_utf8_line(path, f"{flag} matches ", "leave it out", "SentencePiece"):
      raise ValueError(not_utf8)  # SentencePiece's was a bare "_TrainFromMap(): incompatible function arguments"
    with open(path, "rb") as f:
      head = f.read(head_bytes)
      if is_tar(head):
        raise ValueError(f"{flag}: {compressed_line(path, head)}")
      try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) < head_bytes)
      except UnicodeDecodeError as e:
        if compressed := compressed_line(path, head):
          raise ValueError(f"{flag}: {compressed}") from None
        raise ValueError(f"{flag}: {path} is not UTF-8 text (byte 0x{head[e.start]:02x} at offset {e.start}). "
                         "Convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or leave it out.") from None
      f.seek(0)
      lines = long = 0
      for line in f:  # SentencePiece's lines: CR is no line end; the whole file (long lines late in it: sweep 22, N7)
        lines += 1
        if nul := nul_bytes_line(path, lines, line):
          raise ValueError(f"{flag}: {nul}")
        if len(line.rstrip(b"\n")) > MAX_SENTENCE_BYTES:
          long += 1
        elif not has_text and line.strip():
          has_text = True
      if long:
        cr_only = b"\r" in head and b"\n" not in head
        logging.warning("%s: %d of the %d lines of %s are longer than %d bytes%s, which SentencePiece skips. "
                        "Put one sentence (or paragraph) per line.", flag, long, lines, path, MAX_SENTENCE_BYTES,
                        " (its lines end in CR alone: convert them, e.g. tr '\\r' '\\n')" if cr_only else "")
      has_long = has_long or bool(long)
  if not has_text:
    why = (f" SentencePiece reads: every line is longer than {MAX_SENTENCE_BYTES} bytes (one line per document? lines "
           "ending in CR alone?)") if has_long else ""
    raise ValueError(f"{flag}: {', '.join(files[:3])}{' ...' if len(files) > 3 else ''} "
                     f"{'holds' if len(files) == 1 else 'hold'} no text{why}. Pass text "
                     "files, one sentence per line.")


MAX_VOCAB_SIZE = int(((1 << 31) - 1) / 1.1)  # 1952257860: the largest that SentencePiece's * 1.1 keeps in an int32


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpmTrainOptions:
  """`spm_train`'s settings for `train_sentencepiece`; the defaults are the original README's (scripts/train_spm.py's
  flags of the same names).

  Attributes:
    vocab_size: int, the vocabulary size (the README uses 32000); more than the XLNet special symbols.
    character_coverage, model_type, input_sentence_size, shuffle_input_sentence: as `spm_train`.
    hard_vocab_limit: bool, False lets a small corpus give fewer pieces than `vocab_size` instead of failing.
    num_threads: int or None, trainer threads (None: all CPUs).
  """
  vocab_size: int
  character_coverage: float = 0.99995
  model_type: str = "unigram"
  input_sentence_size: int = 10000000
  shuffle_input_sentence: bool = True
  hard_vocab_limit: bool = True
  num_threads: int = None

  def __post_init__(self):
    # The unigram trainer grows a vocabulary of vocab_size * 1.1 in an int32: above MAX_VOCAB_SIZE it looped for ever
    # (sweep 33, B1); at 2**31 and above, SentencePiece's "cannot parse as int".
    if not len(special_symbols) < self.vocab_size <= MAX_VOCAB_SIZE:
      raise ValueError(f"--vocab_size must exceed {len(special_symbols)} (the XLNet special symbols) and be at most "
                       f"{MAX_VOCAB_SIZE} (SentencePiece's trainer works on vocab_size * 1.1 pieces, an int32). "
                       f"Received: {self.vocab_size}.")
    # SentencePiece's own checks (trainer_interface.cc), which it reports as a bare condition naming no flag.
    if not 0.98 <= self.character_coverage <= 1.0:
      raise ValueError(f"--character_coverage must be in [0.98, 1.0] (SentencePiece's range; the README uses "
                       f"0.99995). Received: {self.character_coverage}.")
    if not (self.input_sentence_size == 0 or 100 < self.input_sentence_size < 1 << 63):
      raise ValueError(f"--input_sentence_size must be 0 (every sentence) or above 100 (SentencePiece's range; the "
                       f"README uses 10000000). Received: {self.input_sentence_size}.")
    if self.num_threads is not None and not 1 <= self.num_threads <= 1024:
      raise ValueError(f"--num_threads must be in [1, 1024] (SentencePiece's range), or unset for all CPUs. Received: "
                       f"{self.num_threads}.")


def train_sentencepiece(inputs, model_prefix, options, *, quiet=False, journal=None, final=False, **extra_options):
  """Trains a SentencePiece model with the original README's settings and checks the XLNet ids.

  README: `spm_train --vocab_size=32000 --character_coverage=0.99995 --model_type=unigram
  --control_symbols=<cls>,<sep>,<pad>,<mask>,<eod> --user_defined_symbols=<eop>,.,(,),",-,–,£,€
  --shuffle_input_sentence --input_sentence_size=10000000`. With SentencePiece's default `<unk>`/`<s>`/`</s>` at
  0/1/2 this yields `special_symbols`.

  Args:
    inputs: text files, one sentence per line: a glob, a comma-separated list, or a list of paths/globs.
    model_prefix: writes `{model_prefix}.model` and `{model_prefix}.vocab`.
    options: `SpmTrainOptions`, the vocabulary size and the trainer's settings.
    quiet: silence the trainer's log.
    journal, final: as `fileio.atomic_files`'s, for the pass that renames the two files (`scripts/train_spm.py`).
    **extra_options: any other `spm_train` option. The trainer runs in a child process that a signal to this one
      stops at once (`child_call`), unless an option is a Python object (SentencePiece's
      `sentence_iterator`), which only this process can use.

  Returns:
    The path of the written `.model` file.
  """
  files = own_files_left_out(inputs, model_prefix)
  if not files:
    raise FileNotFoundError(f"Input {inputs!r} matches no file but --model_prefix's own (left out). Pass text "
                            "files (--input).")
  check_text_files(files)
  directory, name = os.path.split(os.path.abspath(model_prefix))
  locks.remove_stale_temporaries(directory, [glob_lib.escape(name) + ".tmp-*"], only_dead=True)  # a kill -9's
  # the .model file is renamed last
  with fileio.atomic_path(model_prefix, last_suffix=".model", journal=journal, final=final) as tmp_prefix:
    settings = dict(
        input=files, model_prefix=tmp_prefix, vocab_size=options.vocab_size,
        character_coverage=options.character_coverage, model_type=options.model_type,
        control_symbols=list(CONTROL_SYMBOLS), user_defined_symbols=list(USER_DEFINED_SYMBOLS),
        input_sentence_size=options.input_sentence_size, shuffle_input_sentence=options.shuffle_input_sentence,
        hard_vocab_limit=options.hard_vocab_limit, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=options.num_threads or min(os.cpu_count() or 1, 1024))
    if quiet:
      settings["minloglevel"] = 2
    settings.update(extra_options)
    try:
      try:
        child_call.call(_train, settings, "the SentencePiece trainer")
      except TypeError:  # a Python object option (`sentence_iterator`, `model_writer`) cannot go to another process
        _train(settings)
      load_sentencepiece(tmp_prefix + ".model")  # Checks the special ids.
    except (RuntimeError, ValueError) as e:  # a full disk: SentencePiece's line, or a .model cut short without one
      stat = os.statvfs(directory)
      if stat.f_bavail * stat.f_frsize < 1 << 20:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) from None  # atomic_path's line names the file
      for code in (errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG):  # SentencePiece's raw line, naming a temporary:
        if os.strerror(code) in str(e):  # no inode left (sweep 30, U5), a quota; a long name (sweep 23, C11)
          raise OSError(code, os.strerror(code)) from None  # atomic_path's line names the file
      raise
  return model_prefix + ".model"


def _train(settings):
  """SentencePiece's trainer on `settings` (its options); where it runs: `train_sentencepiece`."""
  spm.SentencePieceTrainer.Train(**settings)
