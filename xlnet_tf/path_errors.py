"""The one-line errors on paths (`PathError`): a remote file system TensorFlow lacks or cannot reach, a name that is
not UTF-8. `fileio` raises them (and gives them under its own name, `fileio.PathError`); the CLIs complete the line
with the flag whose value holds the path (`path_flags.path_error`).

Importing this module imports nothing heavy: TensorFlow's errors are recognized by their type's module.
"""

import os
import re


class PathError(ValueError):
  """The path `path` cannot be used: one line, naming `what` (a flag) where the code that raised it knew it (else
  None); `named(flag)` is the line naming `flag` (`cli.cli_main` finds the flag whose value holds `path`)."""

  def __init__(self, path, describe, what=None):
    self.path, self.what, self._describe = str(path), what, describe
    super().__init__(describe(what))

  def named(self, what):
    return self._describe(what)


_MODEL_FLAGS = ("--init_checkpoint", "--predict_ckpt", "--input")  # the flags that name a model


def remote_error(error, path=None):
  """The `PathError` of a TensorFlow error (`tf.errors.OpError`) on the remote path `path` (None: the first
  `scheme://...` its message names): a file system TensorFlow does not have here (`https://`, `s3://`, `hdfs://`),
  or one it cannot reach (no network, no credentials). None for any other error, and for a path that is not there
  (NotFoundError), which the callers report themselves."""
  if not (type(error).__module__.startswith("tensorflow") and hasattr(error, "error_code")):
    return None
  if type(error).__name__ == "NotFoundError":
    return None
  message = str(getattr(error, "message", error))
  if path is None:
    found = re.search(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+", message)
    if found is None:
      return None
    path = found.group(0).rstrip(".,;:)")
  path = str(path)
  scheme = path.split("://", 1)[0]
  if type(error).__name__ == "UnimplementedError" and "File system scheme" in message:
    def describe(what):
      download = ("download the model and pass its local directory" if what in _MODEL_FLAGS else
                  "copy it to a local disk and pass its local path")
      return f"{what + ' ' if what else ''}{path}: TensorFlow cannot read {scheme}:// paths here; {download}."
    return PathError(path, describe)
  reason = (message.strip().splitlines() or [type(error).__name__])[0].strip().rstrip(".")
  return PathError(path, lambda what: (
      f"Cannot reach {what + ' ' if what else ''}{path}: {reason}. Check the network and credentials (gcloud auth "
      "application-default login), or pass a local path."))


def non_utf8_line(path, head="", instead="pass another path", taker="TensorFlow's file functions"):
  """None where the str `path` is UTF-8; else the one line for it, `{head}{path, its bytes as \\xNN}: the name is
  not UTF-8 ...`: bytes of another encoding (as Python reads them: surrogates) in a name, which TensorFlow's file
  functions (and SentencePiece's) fail on with a bare codec error naming nothing."""
  try:
    path.encode("utf-8")
    return None
  except UnicodeEncodeError as e:
    shown = os.fsencode(path).decode("utf-8", "backslashreplace")
    return (f"{head}{shown}: the name is not UTF-8 (byte 0x{ord(e.object[e.start]) - 0xDC00:02x}), which {taker} "
            f"cannot take. Rename it to UTF-8 (e.g. convmv -f latin1 -t utf8 --notest) or {instead}.")


def temp_name_room(after=""):
  """The bytes a file name may take where a writer writes it first under `fileio.temp_name` (`.tmp-{pid}-{12 hex}`,
  pids below 2**22: 7 digits) followed by `after`, within a file system's 255: a longer one failed at that write,
  after the work (sweep 23, C11; sweep 30, U5; sweep 32, U12)."""
  return 255 - len(".tmp-") - 7 - 1 - 12 - len(after.encode("utf-8"))


_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1\n"


def lfs_pointer_line(path, head=None):
  """None unless the file `path` (or its first bytes `head`, where the caller read them) is a Git LFS pointer: the
  few lines of text a clone made without git-lfs leaves for each large file (a model repository's weights, its
  spiece.model). Its readers called it damaged and advised downloading it again (sweep 32, U16); the line says so."""
  if head is None:
    try:
      with open(path, "rb") as f:
        head = f.read(200)
    except (OSError, ValueError):  # not there, a directory, a remote path: its reader says so
      return None
  if not head.startswith(_LFS_POINTER):
    return None
  size = re.search(rb"^size (\d+)$", head, re.M)
  held = f" (the file is {int(size.group(1)):,} bytes)" if size else ""
  return (f"{path} is a Git LFS pointer, not the file{held}: the repository was cloned without Git LFS. Run "
          "`git lfs install && git lfs pull` in it, or download the file itself.")
