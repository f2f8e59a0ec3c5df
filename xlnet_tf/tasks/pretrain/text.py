"""Reading the pretraining writer's input: text files -> token ids and flipping sentence ids (the original
`_create_data`'s reading), and the shards of one task combined into one stream."""

import errno
import itertools
import logging
import os
import re

import numpy as np

from xlnet_tf import fileio
from xlnet_tf.data import tokenization
from xlnet_tf.data.tokenization import EOD_ID
from xlnet_tf.tasks.pretrain.writer_options import DataError

_LOG = logging.getLogger(__name__)
_JOINING_CR = re.compile(r"\S\r+\S")  # CRs between two characters that dropping them joins


def check_readable(path):
  """Raises DataError unless `path` is a readable file."""
  if not fileio.is_remote(path) and os.path.isdir(path):
    raise DataError(f"Input {path} is a directory. Make --input_glob match text files only.")
  if not fileio.is_remote(path) and os.path.exists(path) and not os.path.isfile(path):  # opening a FIFO can block
    raise DataError(f"Input {path} is a pipe or a device, not a file: each input is read twice (this check, then the "
                    "text), and a stream gives its bytes once. Write it to a file first (e.g. zcat corpus.gz > "
                    "corpus.txt) and pass that.")
  try:
    with fileio.open_file(path, "rb") as f:
      f.read(1)
  except Exception as e:  # pylint: disable=broad-except  (OSError, or tf.errors.OpError for remote paths)
    reason = getattr(e, "strerror", None) or getattr(e, "message", None) or str(e)
    fix = {errno.ELOOP: "the symbolic link", errno.ENOENT: "the symbolic link"}.get(getattr(e, "errno", None),
                                                                                "its permissions")  # glob matched it
    raise DataError(f"Cannot read input file {path}: {reason}. Fix {fix} or --input_glob.") from None


def read_shard(path, encoder, *, uncased, use_eod=True, from_raw_text=True, vocab_size=None, chunk_lines=8192):
  """Reads one input file as the original `_create_data`: token ids and the flipping sentence ids.

  One sentence per line; a blank line is a document end: with `use_eod` it becomes `<eod>` with the sentence id of
  the sentence before it (the id flips twice), otherwise it is skipped. Lines end at LF and lose every CR, as the
  original's `tf.gfile` lines (TensorFlow's readline drops them): a CR inside a line joins its neighbours
  ("great\\rI" -> "greatI"; ids "12 3\\r45" -> 12, 345), a file with CR-only line ends is one line, and CRs after
  the last LF are no line (no `<eod>`). Lines where that joins text are counted and warned of, naming the file (of
  a local file: a remote file is read by TensorFlow's own readline, which has dropped the CRs before they are seen).

  Args:
    path: the file; lines are split at `\\n` and must be UTF-8.
    encoder: `tokenization.BatchEncoder` (used when `from_raw_text`).
    uncased: lower-case the text.
    use_eod: blank line -> `<eod>`.
    from_raw_text: False: every line holds whitespace-separated integer ids.
    vocab_size: with `from_raw_text=False`, ids must be below it.
    chunk_lines: lines tokenised per batch.

  Returns:
    (input_data: int64 [n] token ids, sent_ids: bool [n] flipping at every sentence start, line count).
  """
  id_chunks, sid_chunks = [], []
  state = {"sent_id": True}

  def flush(entries, texts):
    ids = encoder(texts) if texts else []
    sent_id = state["sent_id"]
    sents, sids = [], []
    for entry in entries:
      if entry is None:  # Blank line with use_eod.
        sent_id = not sent_id
        cur = [EOD_ID]
      elif isinstance(entry, int):
        cur = ids[entry]
      else:
        cur = entry
      sents.append(cur)
      sids.append(sent_id)
      sent_id = not sent_id
    state["sent_id"] = sent_id
    lengths = [len(s) for s in sents]
    id_chunks.append(np.fromiter(itertools.chain.from_iterable(sents), dtype=np.int64, count=sum(lengths)))
    sid_chunks.append(np.repeat(np.array(sids, dtype=bool), lengths))

  line_cnt, joined = 0, []
  entries, texts = [], []
  with fileio.open_file(path, "rb") as f:
    for raw in f:
      line_cnt += 1
      if line_cnt == 1 and tokenization.is_tar(raw):  # UTF-8 to a decoder: its headers were read as text
        raise DataError(tokenization.compressed_line(path, raw))
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        if line_cnt == 1 and (compressed := tokenization.compressed_line(path, raw)):  # the original reads none
          raise DataError(compressed) from None
        raise DataError(f"{path}:{line_cnt}: not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}). "
                        f"Convert the file to UTF-8, e.g. iconv -f latin1 -t utf-8.") from None
      if nul := tokenization.nul_bytes_line(path, line_cnt, line):
        raise DataError(nul)
      if "\r" in line:
        if _JOINING_CR.search(line):
          joined.append(line_cnt)
        line = line.replace("\r", "")
        if not line:  # only CRs after the last LF: TensorFlow's readline is at its end, the original reads no line
          line_cnt -= 1
          break
      stripped = line.strip()
      if not stripped:
        if use_eod:
          entries.append(None)
        continue
      if from_raw_text:
        entries.append(len(texts))
        texts.append(tokenization.preprocess_text(stripped, lower=uncased))
      else:
        try:
          cur = [int(tok) for tok in stripped.split()]
        except ValueError:
          raise DataError(f"{path}:{line_cnt}: --from_raw_text=False needs whitespace-separated integer ids. "
                          f"Received: {stripped[:40]!r}. Pass --from_raw_text=True for text.") from None
        if vocab_size is not None and any(not 0 <= t < vocab_size for t in cur):
          bad = next(t for t in cur if not 0 <= t < vocab_size)
          raise DataError(f"{path}:{line_cnt}: id {bad} is outside the vocabulary [0, {vocab_size}) of --sp_path.")
        entries.append(cur)
      if len(entries) >= chunk_lines:
        flush(entries, texts)
        entries, texts = [], []
  if entries:
    flush(entries, texts)
  if joined:
    _LOG.warning("%s: %d line(s) hold a carriage return (CR) that ends no line (line %s%s); it is dropped, joining "
                 "the text around it, as the original's reader does. For CR line ends (old Mac files) or CRs meant "
                 "as spaces, convert the file first (e.g. tr '\\r' '\\n').", path, len(joined), joined[0],
                 " and more" if len(joined) > 1 else "")
  if not id_chunks:
    return np.zeros([0], np.int64), np.zeros([0], bool), line_cnt
  return np.concatenate(id_chunks), np.concatenate(sid_chunks), line_cnt


def combine_shards(shards, np_rng):
  """Shuffles the shards with `np_rng.permutation` and concatenates them into one stream.

  A shard whose first sentence id equals the previous shard's last is inverted, so a shard boundary is always a
  sentence boundary.

  Args:
    shards: list of (input_data int64 [n_k], sent_ids bool [n_k]), all non-empty.
    np_rng: numpy RandomState, advanced by one permutation.

  Returns:
    (input_data int64 [n], sent_ids bool [n], the permutation as a list).
  """
  perm = np_rng.permutation(len(shards))
  datas, sids = [], []
  prev = None
  for k in perm:
    data, sent_ids = shards[k]
    if prev is not None and sent_ids[0] == prev:
      sent_ids = np.logical_not(sent_ids)
    datas.append(data)
    sids.append(sent_ids)
    prev = sent_ids[-1]
  if not datas:
    return np.zeros([0], np.int64), np.zeros([0], bool), []
  return np.concatenate(datas), np.concatenate(sids), perm.tolist()
