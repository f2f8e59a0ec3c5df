"""JSON input files of text (SQuAD's, RACE's articles): read as UTF-8, a byte-order mark dropped, and checked for
strings SentencePiece cannot take."""

import json

from xlnet_tf import fileio


def load(path):
  """The JSON value of the file `path` (local or `gs://`), UTF-8 with or without a byte-order mark (a Windows
  editor's; SQuAD files with one were refused, RACE's read).

  Raises:
    ValueError: the reason alone, for the caller's line naming the file: not UTF-8, not valid JSON, or a string
      holding a lone surrogate (`"\\ud800"`: valid JSON, written by a tool that split a UTF-16 pair, which is no
      character: SentencePiece's encoder raised a traceback on it; sweep 23, B1).
  """
  with fileio.open_file(path, "rb") as f:
    raw = f.read()
  try:
    value = json.loads(raw.decode("utf-8-sig"))
  except UnicodeDecodeError as e:
    raise ValueError(f"not UTF-8 (byte {e.object[e.start]:#x} at offset {e.start})") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"not valid JSON (line {e.lineno} column {e.colno}: {e.msg})") from None
  found = _lone_surrogate(value, "")
  if found:
    raise ValueError(f"not text: {found[0]} holds a lone surrogate ({found[1]}), which is no character (half of a "
                     "character's UTF-16 pair, left by the tool that wrote the file)")
  return value


def _lone_surrogate(value, where):
  """(where, what) of the first string under `value` (at `where`, e.g. `data[0].paragraphs[1].context`) that holds
  a lone surrogate; None if none does."""
  if isinstance(value, str):
    try:
      value.encode("utf-8")
    except UnicodeEncodeError as e:
      return where or "the value", f"\\u{ord(value[e.start]):04x} at character {e.start}"
    return None
  items = (value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ())
  for key, item in items:
    found = _lone_surrogate(item, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key)
    if found:
      return found
  return None
