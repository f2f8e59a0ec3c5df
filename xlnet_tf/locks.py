"""Locks between runs on local directories: a training run's `--model_dir` (`directory_lock`, one holder, named
in the error) and a cached file that runs read (`cache_lock`: shared by the runs that read it, exclusive for the
one that writes it, so a run never replaces a cache another live run is training on). Remote (`gs://`) paths are
not locked.
"""

import contextlib
import ctypes
import errno
import fcntl
import glob as glob_lib
import json
import logging
import os
import random
import re
import shutil
import socket
import time

from xlnet_tf import fileio
from xlnet_tf import signal_holds


def lock_file(name):
  """The file name of the lock `directory_lock(directory, name)` holds in `directory`."""
  return f".{name}.lock"


# What only a training run writes in its --model_dir: TensorFlow's shards of a checkpoint being saved, the run files.
RUN_TEMPORARIES = ("ckpt-*_temp", "run_flags.json.tmp-*", "xlnet_config.json.tmp-*")

# The locks of other tools that write some of the same names in a directory: each checked their directory only at
# their start, and a conversion into a training run's --model_dir (before its first save) lost its xlnet_config.json
# to it, a train_spm beside a conversion its spiece.model (sweep 30, U1). A live one there refuses the lock.
OTHER_WRITERS = {"run": ("convert",), "convert": ("run", "spm-spiece"), "spm-spiece": ("convert",)}


def export_lock(export_dir):
  """(directory, name) of the lock an export into `export_dir` holds: beside it, as the export replaces the
  directory (`serving.export_saved_model`); a conversion into that directory checks it (`others`)."""
  export_dir = export_dir.rstrip("/") if fileio.is_remote(export_dir) else os.path.abspath(export_dir)
  return os.path.dirname(export_dir), f"export-{os.path.basename(export_dir)}"


@contextlib.contextmanager
def directory_lock(directory, name="run", what="--model_dir", temporaries=None, shown=None, others=()):
  """Holds `{directory}/.{name}.lock` (`lock_file`; an exclusive flock on it, and this process's pid and host in it,
  for the message) while the body runs.

  A second process asking for the same lock gets a one-line ValueError naming the holder. A lock file no process
  holds a flock on is stale (the kernel lets go of a flock however its process ends): it is taken over and a
  warning says so. The pid and host alone decided before, and a run killed in a container (whose pid and host name
  the rerun's repeat, or whose host is gone) locked the directory for good; they still decide where the file system
  has no flock. Once held, the temporaries a killed holder left (`temporaries`: globs below `directory` of the names
  only the lock's holder writes; None: a training run's, `RUN_TEMPORARIES`, for the lock named "run", else none) are
  removed (`remove_stale_temporaries`). A directory made here (and its parents made here) is removed again when the
  body fails and leaves it empty. Remote directories are not locked. `shown`: the path the messages name as `what`
  (default `directory`), for a lock held beside what it guards. A live lock of another tool writing there refuses
  the lock: `OTHER_WRITERS`' in `directory`, and the lock files `others` (paths; an export's is beside its
  directory).

  Yields the path of the lock's journal (`.{name}.pass` beside it; None where nothing is locked), for the files the
  holder puts in place together (`fileio.atomic_files(journal=)`): what a holder killed in their renames had made
  is removed once the lock is taken again (`undo_cut_pass`), with a line naming it.
  """
  if not directory or fileio.is_remote(directory):
    yield None
    return
  # The directories made here, `directory` first: a failed run leaves none it did not fill (it left the parents it
  # made: sweep 27).
  made, parent = [], os.path.abspath(directory)
  while not os.path.lexists(parent) and parent != os.path.dirname(parent):
    made.append(parent)
    parent = os.path.dirname(parent)
  try:
    fileio.makedirs(directory)
  except OSError as e:
    _remove_empty(made)  # the parents made before it failed (a path too long: 18 of them; sweep 30, U13)
    fix = "a shorter path" if e.errno == errno.ENAMETOOLONG else "a writable directory"
    raise ValueError(f"Cannot create {what} {shown or directory}: {e.strerror or e}. Pass {fix}.") from None
  path = os.path.join(directory, lock_file(name))
  me = f"{os.getpid()} {socket.gethostname()}"
  failed, held = True, None
  try:
    with signal_holds.signals_held():  # a Ctrl-C while the lock is made waits till it is whole (`finally` covers it)
      held = _take_lock(path, me, shown or directory, what)
    for other in [os.path.join(directory, lock_file(writer)) for writer in OTHER_WRITERS.get(name, ())] + [*others]:
      if who := _live_holder(other):
        raise ValueError(f"{what} {shown or directory} is being written by another tool: {who} holds {other}. Wait "
                         f"for it to finish, or use another {what}.")
    journal = os.path.join(directory, f".{name}.pass")
    if undone := undo_cut_pass(journal):
      logging.warning("Removed %s: what a run killed while putting its files in place there had already renamed "
                      "(the rest of them never got there).", ", ".join(undone))
    remove_stale_temporaries(directory, (RUN_TEMPORARIES if name == "run" else ()) if temporaries is None
                             else temporaries)
    yield journal
    failed = False
  finally:
    try:
      if held is not None and os.stat(path).st_ino == os.fstat(held.fileno()).st_ino:
        os.remove(path)
      elif held is None:  # taken by its name (no flock), or not at all
        with open(path) as f:
          if f.read() == me:
            os.remove(path)
    except OSError:  # none (it was not taken) or not readable
      pass
    if held is not None:
      held.close()
    if failed:  # a run that failed before writing anything leaves no trace
      _remove_empty(made)


def _remove_empty(directories):
  """Removes `directories` (each inside the next), as long as they are empty (a path too long to name was never
  made)."""
  for directory in directories:
    try:
      os.rmdir(directory)
    except OSError as e:
      if e.errno not in (errno.ENAMETOOLONG, errno.ENOENT):
        break


# A writer's temporary name (`fileio.temp_name`: `{name}.tmp-{pid}-{12 hex}`, with a part's suffix for a checkpoint
# written under a temporary prefix or SentencePiece's `.model`/`.vocab` under one, and TensorFlow's `.tempstate{N}`
# after a shard it was writing; not `.old`, a replaced directory set aside, which may be the only copy left where a
# run was killed between the renames) and the directory TensorFlow saves a checkpoint's shards into (`ckpt-4_temp/`).
_TEMPORARY = re.compile(r"\.tmp-(\d+)-[0-9a-f]{12}(\.index|\.data-\d+-of-\d+(\.tempstate\d+)?|\.model|\.vocab)?$"
                        r"|^ckpt-\d+_temp$")
_SET_ASIDE = re.compile(r"\.tmp-(\d+)-[0-9a-f]{12}\.old$")  # `fileio._replace_dir`'s


def remove_stale_temporaries(directory, patterns, only_dead=False):
  """Removes the temporaries matching the globs `patterns` below `directory` (names `_TEMPORARY` matches) that a run
  killed while writing left behind (kill -9, the OOM killer: a SavedModel's is as big as the model), with one log
  line naming them. Called where a lock makes this process the only writer of those names (the cache's, the model
  directory's); with `only_dead`, where none does, it keeps those whose process lives on this host. A directory a
  killed run set aside while replacing it (`.old`) is kept, with a line naming it (it was kept without a word:
  sweep 27, U10). Remote directories are left as they are."""
  if not directory or fileio.is_remote(directory) or not os.path.isdir(directory):
    return
  stale = []
  for path in (p for pattern in patterns
               for p in fileio.glob_in(os.path.join(directory, os.path.dirname(pattern)), os.path.basename(pattern))):
    if (aside := _SET_ASIDE.search(os.path.basename(path))) and not _pid_lives(int(aside.group(1))):
      logging.warning("Kept %s: the earlier version a run killed while replacing it set aside, its only copy where "
                      "that run left none in place. Delete it once you no longer need it.", path)
    match = _TEMPORARY.search(os.path.basename(path))
    if not match or (only_dead and match.group(1) and _pid_lives(int(match.group(1)))):
      continue
    try:
      shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
      stale.append(path)
    except OSError:  # gone meanwhile, or not ours to remove: left as it is
      pass
  if stale:
    logging.warning("Removed what a run that was killed while writing left under temporary names: %s.",
                    ", ".join(sorted(stale)))


def undo_cut_pass(journal):
  """Undoes the pass of renames (`fileio.atomic_files(journal=)`) that wrote `journal` where a kill cut it (the file
  is there; called under the lock that pass ran under, so none runs now): removes the files it had made and its
  temporaries, then the journal; the paths of the files it had made and that were removed, sorted."""
  if not journal or not os.path.exists(journal):
    return []
  try:
    with open(journal, encoding="utf-8") as f:
      listed = json.load(f)
  except (OSError, ValueError):  # cut short while written: no step had run
    listed = {}
  listed = listed if isinstance(listed, dict) else {}
  removed = []
  for key in ("made", "temporaries"):
    for path in listed.get(key) or []:
      if isinstance(path, str) and os.path.lexists(path):
        fileio.remove(path)
        removed += [path] * (key == "made")
  fileio.remove(journal)
  return sorted(removed)


def end_with_parent(signum, parent):
  """Has Linux send this process `signum` when its parent (`parent`, its pid) ends, by kill -9 too
  (PR_SET_PDEATHSIG; elsewhere nothing), so that a killed tool's worker stops rather than run on alone. False if
  the parent had already ended: another process is its parent then (pid 1, or a subreaper: sweep 29, U2)."""
  with contextlib.suppress(OSError, AttributeError):
    ctypes.CDLL(None).prctl(1, signum)
  return os.getppid() == parent


def _live_holder(path):
  """Who holds the lock file `path` (`_who`; its flock, or by its name where the file system has none), or None
  where no live process does."""
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return None
  try:
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # let go at once (closed): its holder's flock is exclusive
    return None
  except BlockingIOError:
    return _who(_lock_holder(path, live=True))
  except OSError:  # no flock on this file system
    holder = _lock_holder(path)
    return None if holder is None else _who(holder)
  finally:
    os.close(fd)


def _who(holder):
  """"process {pid} on {host}" of a lock's `holder` (pid, host), or "another process" where it has not written them
  yet."""
  return f"process {holder[0]} on {holder[1]}" if holder else "another process"


def _pid_lives(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    pass
  return True


def _take_lock(path, me, directory, what):
  """The lock file `path`, open and holding an exclusive flock, with `me` (pid and host) written in it (`None` where
  the file system has no flock: `_take_lock_by_name` made it); a one-line ValueError where another process holds
  it or it cannot be written."""
  for _ in range(3):
    try:
      fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as e:
      raise _unwritable(what, directory, path, e) from None
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      os.close(fd)
      raise _in_use(what, directory, path, _lock_holder(path, live=True)) from None
    except OSError:  # no flock on this file system
      if not os.fstat(fd).st_size:  # none before this open (or one half-written, which the fallback takes as stale)
        os.remove(path)
      os.close(fd)
      _take_lock_by_name(path, me, directory, what)
      return None
    if not os.path.exists(path) or os.stat(path).st_ino != os.fstat(fd).st_ino:
      os.close(fd)  # its holder removed it between our open and flock: a new one is made
      continue
    f = None
    try:
      f = os.fdopen(fd, "r+")
      if (old := f.read()) and old != me:
        pid, _, host = old.partition(" ")
        if host == socket.gethostname() and pid.isdigit() and int(pid) != os.getpid() and _pid_lives(int(pid)):
          f.close()  # a live run of a version that held no flock (a container's rerun is its pid 1 again)
          raise ValueError(f"{what} {directory} is locked by process {pid} on {host} (lock {path}), which is alive "
                           "but holds no lock on it: a run of an older xlnet-tf, or a program that took the pid of "
                           f"one killed. Wait for it to finish or stop it; if no run uses {what}, delete {path}.")
        logging.warning("Taking over the stale lock %s (its process is gone).", path)
      f.seek(0)
      f.truncate()
      f.write(me)
      f.flush()
    except OSError as e:  # a full disk: no empty lock, which a later run would read no holder from, is left
      os.remove(path)
      with contextlib.suppress(OSError):
        if f:
          f.close()
        else:
          os.close(fd)
      raise _unwritable(what, directory, path, e) from None
    return f
  raise ValueError(f"Could not take the lock {path}; another process keeps taking it. Use another {what}.")


def _in_use(what, directory, path, holder):
  """`holder`: (pid, host), or None where the holder has not written them yet (it said "process ? on ?")."""
  return ValueError(f"{what} {directory} is in use by {_who(holder)} (lock {path}). Wait for it to finish, stop it, "
                    f"or use another {what}.")


def _unwritable(what, directory, path, error):
  fix = ("Free space and rerun" if error.errno in (errno.ENOSPC, errno.EDQUOT) else
         f"Move {path} away (a run's lock is a file) or pass another {what}" if error.errno == errno.EISDIR else
         f"Pass a shorter {what}" if error.errno == errno.ENAMETOOLONG else "Pass a writable directory")
  return ValueError(f"Cannot use {what} {directory}: {error.strerror or error} (writing its lock {path}). {fix}.")


def _take_lock_by_name(path, me, directory, what):
  """`_take_lock` on a file system without flock: the file made, holding `me`, unless a live process (by its pid on
  this host; any on another host) holds it."""
  for _ in range(2):
    try:
      fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      holder = _lock_holder(path)
      if holder is not None:
        raise _in_use(what, directory, path, holder) from None
      logging.warning("Taking over the stale lock %s (its process is gone).", path)
      fileio.remove(path)
      continue
    except OSError as e:
      raise _unwritable(what, directory, path, e) from None
    try:
      with os.fdopen(fd, "w") as f:
        f.write(me)
    except OSError as e:
      os.remove(path)
      raise _unwritable(what, directory, path, e) from None
    return
  raise ValueError(f"Could not take the lock {path}; another process keeps taking it. Use another {what}.")


def _lock_holder(path, live=False):
  """(pid, host) of a live lock holder, or None if the lock is stale (its process is gone on this host; with
  `live`, known to hold it: as the file says)."""
  try:
    with open(path) as f:
      pid, host = f.read().split(" ", 1)
    pid = int(pid)
  except (OSError, ValueError):
    return None  # unreadable or half-written: stale
  if live or host != socket.gethostname():
    return pid, host  # another machine: cannot tell, so respect it
  return (pid, host) if _pid_lives(pid) else None


# The cached files this process uses: {lock path: descriptor holding its flock, shared, until the process ends}.
_CACHE_LOCKS = {}
# How long a run that must write a cache tries for it: a run with the same new inputs that started together writes
# it or lets go within moments; a run that uses the cache holds it till it ends.
CACHE_LOCK_WAIT_S = 5.0
_JITTER = random.Random()  # its own: waiting never moves the global generator a seeded run may use


@contextlib.contextmanager
def cache_lock(path, reusable, overwrite=False, what="--output_dir"):
  """Yields whether the cached file `path` serves this run as it is (True) or must be written by the body (False),
  and keeps other processes from writing it again while this one lives.

  A process that uses a cache holds a shared `flock` on `.{name}.lock` beside it until it ends (the kernel lets go
  then, however it ends) and writes the cache holding it exclusively. So runs with the same inputs share a cache,
  and a run that would write one a live run uses (other inputs, or `overwrite`) is refused: it replaced the records
  that run reads again each epoch. The steps: shared (waiting while another run writes), `reusable()`; to write,
  exclusive, else shared again (waiting while another run writes) and `reusable()` again (another run may have
  written the same inputs), tried for CACHE_LOCK_WAIT_S before the error. After the body it is shared, and kept.
  Remote paths (`gs://`) are not locked; a lock that cannot be taken (a read-only directory, a file system without
  locks) is skipped with a warning; on NFS a flock reaches other machines only where the mount locks. Lock files
  stay: empty, they are what every run opens.

  Args:
    path: str, the cached file.
    reusable: callable () -> bool, whether `path`, as it is, was made from this run's inputs; called under the lock.
    overwrite: bool, write it even when it is reusable (--overwrite_data).
    what: str, the flag that names the directory of `path`, for the message.

  Raises:
    ValueError: `path` is to be written and another live process uses it, or is a directory (one line: `what`,
      `path`, what to do).
  """
  path = str(path)
  directory = os.path.dirname(path)
  # A directory at the cache's name was "reused", then TensorFlow's traceback reading it (sweep 23, B5); one at its
  # fingerprint's, a bare `[Errno 21]` (sweep 27, U4).
  fileio.check_file_names(directory, [os.path.basename(path), os.path.basename(path) + ".source"], what, "cached")
  lock = os.path.join(directory, f".{os.path.basename(path)}.lock")
  fd = held = None if fileio.is_remote(path) else _CACHE_LOCKS.get(lock)
  if fd is None and not fileio.is_remote(path):
    fd = _open_cache_lock(lock)
  exclusive = False
  try:
    if not _flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB):
      logging.warning("Waiting for another run to finish writing %s (lock %s).", path, lock)
      _flock(fd, fcntl.LOCK_SH)
    reuse = not overwrite and reusable()
    deadline = time.monotonic() + CACHE_LOCK_WAIT_S
    while not (reuse or exclusive):
      exclusive = _flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a try that fails drops the shared lock
      if not exclusive:
        _flock(fd, fcntl.LOCK_SH)  # waits while another run writes
      reuse = not overwrite and reusable()  # another run may have written this run's inputs meanwhile
      if not (reuse or exclusive):
        if time.monotonic() >= deadline:
          why = "which --overwrite_data=True would write again" if overwrite else "made from other inputs or settings"
          raise ValueError(f"{what} {directory} is in use: another run reads its cached {path} (lock {lock}), {why}. "
                           f"Pass another {what}, or wait for that run to finish.")
        _flock(fd, fcntl.LOCK_UN)  # holds nothing while it waits, so that another run with the same inputs can write
        time.sleep(_JITTER.uniform(0.05, 0.25))  # unequal waits: two runs after one cache do not keep trying together
  except BaseException:
    if held is not None:
      _flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # this process may still read it
    elif fd is not None:
      os.close(fd)
    raise
  if fd is not None:
    _CACHE_LOCKS[lock] = fd
  if not reuse and not overwrite and fileio.exists(path):
    logging.warning("The cached %s was made from other inputs or settings than this run's, or changed since it was "
                    "written; writing it again.", path)
  if exclusive:  # the only writer of `path`: its temporaries are a killed run's
    remove_stale_temporaries(directory, [glob_lib.escape(os.path.basename(path)) + ".tmp-*"])
  try:
    yield reuse
  finally:
    if exclusive:
      _flock(fd, fcntl.LOCK_SH)
  if exclusive and not reusable():  # flock(2) does not promise that the change to shared is atomic
    raise ValueError(f"Another run wrote the cached {path} again as this run finished writing it (lock {lock}). Pass "
                     f"another {what}, or wait for that run to finish.")


def _open_cache_lock(lock):
  """A descriptor of the file `lock` (made if missing) that flock works on, locked shared if that could be had at
  once; None, with a warning, where it cannot be opened or locked."""
  fileio.check_output_dir(os.path.dirname(lock))
  fd = None
  try:
    fileio.makedirs(os.path.dirname(lock))
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
  except BlockingIOError:  # held exclusively by a writer: this file system locks
    pass
  except OSError as e:
    if fd is not None:
      os.close(fd)
    logging.warning("Cannot lock %s (%s): another run could write the cache again while this one reads it.", lock,
                    e.strerror or e)
    return None
  return fd


def _flock(fd, operation):
  """`fcntl.flock(fd, operation)`: False where LOCK_NB found the lock held by another; True where fd is None."""
  if fd is None:
    return True
  try:
    fcntl.flock(fd, operation)
  except BlockingIOError:
    return False
  return True

