"""Files that may be local or remote (`gs://...`, through `tf.io.gfile`), and the one atomic write.

Everything the project writes for a user (records, corpus files, JSON, checkpoints exported to the original format,
predictions, SavedModels, SentencePiece models) goes through `atomic_path`: the writer fills a temporary name that
is unique to the process and the call, which is renamed onto the final name only when complete, and removed on any
error. A reader never sees a half-written file under a final name, and two processes writing into one directory
never share a temporary file. Files that are one result together (a task's prediction files) go through
`atomic_files`: all are written first, then renamed in one pass that SIGINT and SIGTERM wait for, so a failed or
stopped run leaves the whole set of the run before, never a mix of two runs. Nothing a user owns is replaced: a
directory never replaces a file, and replaces an existing directory only if that is empty or holds the writer's
marker file (`check_output_dir`). Locks between runs are in `locks.py`.

A path that cannot be used (a remote file system TensorFlow lacks or cannot reach, a symbolic link to nowhere) is a
`PathError`: one line, which the CLIs complete with the flag whose value holds the path.
TensorFlow is imported only for remote paths, so local data tools start fast.
"""

import contextlib
import errno
import fnmatch
import glob as glob_lib
import hashlib
import json
import os
import shutil
import sys
import uuid

from xlnet_tf import signal_holds
from xlnet_tf.path_errors import (  # pylint: disable=unused-import  (fileio's)
    PathError, lfs_pointer_line, non_utf8_line, remote_error)


def api_path(path):
  """A path given to the Python API as the tools take a path flag's: a `pathlib.Path` as its str, a leading `~` as
  the home directory (a writer made a directory named `~` in the working directory; the readers said not found)."""
  return None if path is None else os.path.expanduser(os.fspath(path))


def is_remote(path):
  return "://" in str(path)


def is_within(path, directory, links=False):
  """Whether `path` is `directory` or lies inside it (by name: local paths made absolute, links not followed; with
  `links`, also where it does once links are followed, `real_path`)."""
  full = lambda p: str(p).rstrip("/") if is_remote(p) else os.path.abspath(p)
  return (full(path) + "/").startswith(full(directory) + "/") or (
      links and is_within(real_path(path), real_path(directory)))


def real_path(path):
  """`path`'s real name: a local one absolute, links followed; a remote one as given, less a trailing /."""
  return str(path).rstrip("/") if is_remote(path) else os.path.realpath(path)


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def _remote(call, path, *args):
  """`call(path, *args)` of `tf.io.gfile`, with a file system that is missing or cannot be reached raised as a
  one-line `PathError` (`remote_error`) instead of TensorFlow's error."""
  try:
    return call(path, *args)
  except Exception as e:  # pylint: disable=broad-except  (tf.errors.OpError: TensorFlow is imported only here)
    error = remote_error(e, path)
    if error is None:
      raise
    raise error from None


def exists(path):
  return _remote(_gfile().exists, path) if is_remote(path) else os.path.exists(path)


def isdir(path):
  """Whether `path` is a directory; for a remote path that is none, TensorFlow's `isdir` hides why (no network, a
  file system it does not have), which `exists` raises (`PathError`)."""
  if not is_remote(path):
    return os.path.isdir(path)
  if _gfile().isdir(path):
    return True
  exists(path)  # raises what `isdir` hid
  return False


def listdir(path):
  """The names in directory `path`, in `tf.io.gfile.listdir`'s order: the file system's, unsorted (the original's
  `tf.gfile.ListDirectory`). Every name but `.` and `..`, hidden ones included; remote subdirectories end in `/`.
  A local name that is not UTF-8 (an archive unpacked with another code page) is a one-line `PathError` naming it
  (TensorFlow's was a bare "'utf-8' codec can't decode byte 0xe9")."""
  try:
    return _remote(_gfile().listdir, path)
  except UnicodeDecodeError:
    bad = None if is_remote(path) else next((n for n in os.listdir(path) if non_utf8_line(n)), None)
    if bad is None:
      raise
  raise PathError(path, lambda what: non_utf8_line(
      os.path.join(path, bad), f"{what} holds " if what else "", "move it away"))


def glob(pattern):
  """Sorted paths matching `pattern`; local ones include hidden files, as `tf.io.gfile.glob` (the original's)."""
  if is_remote(pattern):
    return sorted(_remote(_gfile().glob, pattern))
  if _GLOB_HAS_INCLUDE_HIDDEN:
    return sorted(glob_lib.glob(pattern, include_hidden=True))
  found = set(glob_lib.glob(pattern))  # Python 3.10: a wildcard never matches a leading dot; add those names
  head, tail = os.path.split(pattern)
  for directory in glob_lib.glob(head) if head else [""]:
    if os.path.isdir(directory or "."):
      found.update(os.path.join(directory, name) for name in fnmatch.filter(os.listdir(directory or "."), tail)
                   if name.startswith("."))
  return sorted(found)


_GLOB_HAS_INCLUDE_HIDDEN = sys.version_info >= (3, 11)


def glob_in(directory, pattern):
  """`glob(pattern)` among the entries of `directory`, whose own name is taken as it is: a local directory named
  with [ ] * or ? (which a pattern would read as wildcards) still finds its files."""
  if is_remote(directory):
    return glob(os.path.join(directory, pattern))
  return glob(os.path.join(glob_lib.escape(directory), pattern))


def makedirs(path):
  """Makes the directory `path` and those above it; a local one through a symbolic link that leads nowhere or loops
  is a one-line `PathError` (`check_links`). A parent another run removes meanwhile is made again."""
  if not path:
    return
  if is_remote(path):
    _remote(_gfile().makedirs, path)
    return
  check_links(path)
  for attempt in range(5):
    try:
      os.makedirs(path, exist_ok=True)
      return
    except FileNotFoundError:  # a parent made a moment ago was removed again: another run, failing, removed the
      if attempt == 4:         # empty directories it had made (`locks.directory_lock`) between our two mkdirs
        raise


def check_links(path, what=None, kind="a directory"):
  """`PathError` where the local directory `path` to be written (or made) is, or lies below, a symbolic link whose
  target does not exist (an unmounted disk) or that loops: `os.makedirs` and the checks after it said only
  "[Errno 2] No such file or directory" or "[Errno 40] Too many levels of symbolic links". `what`: how the user
  named `path` (e.g. "--model_dir"); `kind`: what the link should point at."""
  path = str(path).rstrip("/")
  if not path or is_remote(path):
    return
  link = path
  while link and not os.path.lexists(link):  # the nearest name that is there (a link that leads nowhere is)
    link = os.path.dirname(link)
  if not link or not os.path.islink(link):
    return
  try:
    os.stat(link)
    return  # it leads to something
  except OSError as e:
    if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
      return  # e.g. a target this user may not look at: the checks after this one say so
    loops, target = e.errno == errno.ELOOP, os.path.realpath(link)
  def describe(flag):
    name = f"{flag} {path}" if flag else path
    which = "it is" if link == path else f"{link} is"
    other = f"another {flag}" if flag else "another directory"
    if loops:
      return (f"Cannot use {name}: {which} a symbolic link that loops ({link} -> {os.readlink(link)}). Point it at "
              f"{kind} or pass {other}.")
    return (f"Cannot use {name}: {which} a symbolic link to {target}, which does not exist (an unmounted disk?). "
            f"Create {target} or pass {other}.")
  raise PathError(path, describe, what)


def open_file(path, mode="r"):
  """A file object; text modes are UTF-8."""
  if is_remote(path):
    return _gfile().GFile(path, mode)
  return open(path, mode, encoding=None if "b" in mode else "utf-8")


def size(path):  # in bytes
  return int(_remote(_gfile().stat, path).length) if is_remote(path) else os.path.getsize(path)


def sha256(path):
  """The hex sha256 of the file's bytes (what identifies a SentencePiece model, whatever its path)."""
  with open_file(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def remove(path):
  """Removes a file or a directory tree if it exists; never raises."""
  try:
    if is_remote(path):
      gfile = _gfile()
      if gfile.isdir(path):
        gfile.rmtree(path)
      elif gfile.exists(path):
        gfile.remove(path)
    elif os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
      os.remove(path)
  except Exception:  # pylint: disable=broad-except
    pass


def rename(src, dst):  # onto `dst`: a file is replaced; a directory must not exist
  if is_remote(src):
    _gfile().rename(src, dst, overwrite=True)
  else:
    os.replace(src, dst)


def temp_name(path):
  """A temporary name beside `path`, unique to this process and call: `{path}.tmp-{pid}-{random}`."""
  return f"{str(path).rstrip('/')}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def is_temp_name(path):
  return ".tmp-" in os.path.basename(str(path).rstrip("/"))


def check_output_dir(path, what=None, marker=None, writable=True):
  """Checks that `path` can be an output directory without replacing anything a user owns.

  Args:
    path: str, the directory to write (or write into).
    what: str or None, how the user named it, e.g. "--export_dir".
    marker: None: files are written into the directory, which may hold anything. A str: the directory is replaced
      as a whole, so an existing one must be empty or hold `marker`, a file every directory of this writer holds
      (a SavedModel's `saved_model.pb`; "": none, only an empty directory is replaced).

  Raises:
    ValueError: `path` (or, locally, a directory above it) is an existing file, or a symbolic link that leads
      nowhere or loops (`check_links`); with `what` (a user's flag) and `writable` (False: a run that may only read
      it), locally, `path` or the directory it would be made in cannot be written; with `marker`, `path` is a non-empty
      directory without `marker`. The message names `path`, which is left as it is.
  """
  if str(path) and not str(path).strip("/"):
    raise ValueError(f"Cannot use {what + ' ' if what else ''}{path} as an output directory: it is the root "
                     "directory. Pass a directory (new, or one this tool wrote).")
  check_links(path, what)
  path = str(path).rstrip("/")
  name = f"{what} {path}" if what else path
  above = path
  while above and not is_remote(above) and not os.path.lexists(above):  # the nearest existing path
    above = os.path.dirname(above)
  if above and exists(above) and not isdir(above):
    which = "it is a file" if above == path else f"{above} is a file"
    raise ValueError(f"Cannot use {name} as a directory: {which}, left as it is. Pass a directory (new, or one "
                     "this tool wrote).")
  if what and writable and above and not is_remote(above) and not os.access(above, os.W_OK | os.X_OK):
    why = "on a read-only file system" if os.statvfs(above).f_flag & os.ST_RDONLY else "not writable by this user"
    which = "it is" if above == path else f"{above} is"
    raise ValueError(f"Cannot use {name}: {which} {why}. Pass a writable directory.")
  if marker is not None and exists(path) and listdir(path) and not (
      marker and exists(os.path.join(path, marker))):
    held = f" (no {marker})" if marker else ""
    raise ValueError(f"Cannot use {name}: it is a directory not written by this tool{held}, which would be replaced "
                     "as a whole; it was left as it is. Pass a new or empty directory.")


def check_file_names(directory, names, what, kind):
  """ValueError where `directory` holds a directory under one of `names`, the files a run is to write there (the
  `kind` file: "cached", "prediction"): the write found it only at the end, after the run's work ("Could not write
  ... (Is a directory) ... Free space"), or a cache was taken as reused. `what`: the flag naming `directory`."""
  for name in names:
    path = os.path.join(directory, name)
    if isdir(path):
      raise ValueError(f"{what} {directory} holds a directory named like the {kind} file {path}: move it away, or "
                       f"pass another {what}.")


def _prepare(path):
  """(path, its temporary name) for a writer of `path`, whose directory is checked (`check_output_dir`) and made."""
  path = str(path).rstrip("/")
  check_output_dir(os.path.dirname(path))
  makedirs(os.path.dirname(path))
  return path, temp_name(path)


@contextlib.contextmanager
def _removed_on_error(temporaries, named):
  """Runs the body; on any error removes every name in `temporaries` (an iterable read then, so it may grow while
  the body runs) and the names each one prefixes. A write error (e.g. a full disk) becomes an OSError whose
  one-line message names `named()`, the final name being written; any other error is raised as it is."""
  try:
    yield
  except BaseException as e:
    for tmp in list(temporaries):
      for p in [tmp] + glob(glob_lib.escape(tmp) + "*"):
        remove(p)
    op_error = type(e).__module__.startswith("tensorflow") and hasattr(e, "error_code")  # tf.errors.OpError
    if (isinstance(e, OSError) or op_error) and not isinstance(e, FileNotFoundError) and named():
      message = " ".join(str(getattr(e, "message", e)).split())
      reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or message.rsplit("; ", 1)[-1][:200]
      fix = "Pass a shorter name" if "too long" in reason else "Free space (or fix the directory's permissions)"
      left = "what was there is left as it was" if exists(named()) else "nothing was left under that name"
      error = OSError(f"Could not write {named()} ({reason}); {left}. {fix} and rerun.")
      error.reason = reason  # for a writer around this one (TF's OpError: "{op and path}; {why}"), naming its own file
      raise error from None
    raise


@contextlib.contextmanager
def atomic_path(path, last_suffix=None, marker=None, journal=None, final=False):
  """Yields a temporary name for `path`; on success moves what was written there onto `path`.

  The body may write one file, one directory (e.g. a SavedModel: an existing directory at `path` is replaced if it
  is empty or holds the file `marker`, else ValueError, see `check_output_dir`; a file is never replaced by a
  directory), or several files sharing the temporary name as a prefix (e.g. a checkpoint's `.index` and
  `.data-*`, or SentencePiece's `.model` and `.vocab`): each `tmp + suffix` becomes `path + suffix`, the one
  ending with `last_suffix` last, so that it marks the whole as complete. On any error everything written is
  removed; a write error (e.g. a full disk) becomes an OSError whose one-line message names `path`. A directory
  above `path` that is a file is a ValueError naming it. SIGINT and SIGTERM wait while the renames run
  (`signal_holds.signals_held`); `journal` and `final` as in `atomic_files`, for files.
  """
  path, tmp = _prepare(path)
  with _removed_on_error([tmp], lambda: path):
    yield tmp
    if exists(tmp) and isdir(tmp):
      check_output_dir(path, marker=marker or "")
      # a stopped run must not leave the old directory aside, or no directory at `path`
      with signal_holds.signals_held():
        _replace_dir(tmp, path)
      return
    # nor half the parts new (a SentencePiece `.vocab` beside the `.model` it replaced)
    _rename_pass(_part_renames(tmp, path, last_suffix), journal, final)


def _parts(tmp):
  """The files written under the temporary name `tmp` as a prefix (itself too; a writer's own temporaries not)."""
  return [p for p in glob(glob_lib.escape(tmp) + "*") if not is_temp_name(p[len(tmp):])]


def _part_renames(tmp, path, last_suffix):
  """[(temporary, final)]: each `tmp + suffix` written (`_parts`) onto `path + suffix`, the one ending with
  `last_suffix` (None: none) last, so that it marks the whole as complete."""
  written = _parts(tmp)
  written.sort(key=lambda p: last_suffix is not None and p.endswith(last_suffix))
  return [(p, path + p[len(tmp):]) for p in written]


def _rename_pass(steps, journal=None, final=False, on_step=None):
  """Runs `steps` in order in one pass that SIGINT and SIGTERM wait for (`signal_holds.signals_held(final)`): each
  (temporary, final name) renames the one onto the other; (None, name) removes the file there. With `journal` (a
  path, where only this process writes the set: under its lock), it first writes there the final names the pass
  makes (those not there now, "made") and the "temporaries", and removes it after the last step: a process killed
  outright in the pass (SIGKILL) leaves it, and `locks.undo_cut_pass` removes what the cut pass made (part of a set
  its rerun then refused as a model already there; sweep 27, U5). `on_step(name)` is called before each step."""
  with signal_holds.signals_held(final):
    if journal:  # in place, before any step: a journal cut short (not JSON) tells that no step ran
      with open_file(journal, "w") as f:
        json.dump({"made": [os.path.abspath(name) for _, name in steps if not exists(name)],
                   "temporaries": [os.path.abspath(tmp) for tmp, _ in steps if tmp]}, f)
    for tmp, name in steps:
      if on_step:
        on_step(name)
      if tmp is None:
        remove(name)
      else:
        rename(tmp, name)
    if journal:
      remove(journal)


def _replace_dir(tmp, path):
  old = None
  if exists(path):
    old = temp_name(path) + ".old"
    rename(path, old)
  try:
    rename(tmp, path)
  except BaseException:
    if old is not None:
      rename(old, path)
    raise
  if old is not None:
    remove(old)


def _write_data(path, data):
  with open_file(path, "wb" if isinstance(data, bytes) else "w") as f:
    f.write(data)


def atomic_write(path, data):
  """Writes `data` (str: UTF-8 text, or bytes) to `path` atomically."""
  with atomic_path(path) as tmp:
    _write_data(tmp, data)


def write_json(path, obj, **kwargs):
  """`json.dump(obj, f, **kwargs)` to `path`, atomically."""
  atomic_write(path, json.dumps(obj, **kwargs))


class FileSet:
  """The files of one `atomic_files` commit, each asked for once by its final name: `write` writes one, `path` gives
  the temporary name a writer of its own (a `tf.io.TFRecordWriter`) fills, `prefix` that of files of several parts."""

  def __init__(self):
    self._temps = {}  # final name -> temporary name, in the order asked for
    self._clears = {}  # final name -> the final name whose old file is removed before it is renamed (`before`)
    self._last_suffixes = {}  # final name of a prefix -> the suffix of its part renamed last (or None)
    self._current = None  # the final name being written or renamed (named by a write error)

  def path(self, path):
    """The temporary name (`temp_name`) to write the one file of `path` to; its directory is made."""
    path, tmp = _prepare(path)
    if path in self._temps:
      raise ValueError(f"{path} is already a file of this set: write each file once.")
    self._temps[path] = tmp
    self._current = path
    return tmp

  def size(self, path):  # in bytes: the one file written so far for `path` (at its temporary name)
    return size(self._temps[str(path).rstrip("/")])

  def prefix(self, path, last_suffix=None):
    """The temporary prefix to write the files `path + suffix` to (e.g. a TF checkpoint's `.index` and `.data-*`);
    at the commit each `tmp + suffix` becomes `path + suffix`, the one ending with `last_suffix` last (as in
    `atomic_path`)."""
    tmp = self.path(path)
    self._last_suffixes[self._current] = last_suffix  # `path` as `self.path` keys it
    return tmp

  def write(self, path, data, before=None):
    """Writes `data` (str: UTF-8 text, or bytes) as the file of `path` (to its temporary name). With `before`, the
    final name of a one-file member of this set: at the commit the file now at `before` is removed, then `path`
    renamed, then `before`'s: a process killed in between (SIGKILL) leaves `path` new without `before`, never beside
    `before`'s old file (a cache's fingerprint, `records.mark_cache`)."""
    if before is not None and (before not in self._temps or before in self._last_suffixes or
                               before in self._clears.values()):
      raise ValueError(f"{before} must be a one-file member of this set, preceded by no other, to write {path} "
                       "before it.")
    _write_data(self.path(path), data)
    if before is not None:
      self._clears[path] = before
      for name in list(self._temps)[list(self._temps).index(before):-1]:  # in place: `atomic_files` holds a view
        self._temps[name] = self._temps.pop(name)  # `before` and the files after it move behind `path`

  def _commit(self, journal, final):
    steps = []
    for path, tmp in self._temps.items():  # checked first: a rename that fails would leave part of the set new
      self._current = path
      if path in self._last_suffixes:
        renames = _part_renames(tmp, path, self._last_suffixes[path])
      else:
        renames = [(tmp, path)] if exists(tmp) else []
      if not renames or any(isdir(p) for p, _ in renames):
        raise ValueError(f"Nothing was written for {path}: a file of the set must be one file at its temporary name "
                         "(or, for a prefix, files whose names start with it).")
      for _, name in renames:
        if exists(name) and isdir(name):
          raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
      if path in self._clears:
        steps.append((None, self._clears[path]))
      steps += renames
    _rename_pass(steps, journal, final, on_step=lambda name: setattr(self, "_current", name))


@contextlib.contextmanager
def atomic_files(journal=None, final=False):
  """Yields a `FileSet`; on success all its files replace their final names together, on any error none does.

  The body writes every file of the set to its temporary name (`FileSet.write`, `FileSet.path`; files of several
  parts under a temporary prefix, `FileSet.prefix`). When it ends, the temporaries are renamed onto their final
  names in one pass, with SIGINT and SIGTERM held back until the last rename (`signal_holds.signals_held`), so a
  stopped run cannot leave the set half new. A write error (e.g. a full disk) or a signal before that pass removes
  every temporary (every part of a prefix) and leaves every final name as it was; a write error becomes an OSError
  whose one-line message names the file being written.

  Limits: the set is not replaced in one atomic step, only in one pass. A process killed outright during it
  (SIGKILL, a lost machine) leaves the files renamed before new (with a `journal`, its lock's next holder removes
  those it made); so does a rename that fails, which on a local file system only a reason nobody checks first (an
  I/O error) can make. On a local file system the pass is a few renames; on `gs://` (`tf.io.gfile`) each rename is
  a copy and a delete, so the pass is not quick: signals still wait for it, but a reader may see part of the set new
  while it runs, and a failed copy leaves it half new. Signals are held only when this runs on the main thread (only
  there does Python run signal handlers).

  Args:
    journal: where the set is written under a lock (`locks.directory_lock`, which yields this path), a file that
      lets the next holder undo a pass that a kill cut (`_rename_pass`, `locks.undo_cut_pass`).
    final: the set is the run's last writes (a tool's output): a signal held during the pass waits for the end of
      the enclosing `signal_holds.signals_deferred` (the CLI's whole run), so the run reports what it wrote before
      it stops.
  """
  files = FileSet()
  with _removed_on_error(files._temps.values(), lambda: files._current):  # pylint: disable=protected-access
    yield files
    files._commit(journal, final)  # pylint: disable=protected-access
