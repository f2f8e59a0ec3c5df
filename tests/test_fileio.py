"""The one atomic write: complete files appear under their final name, or nothing does."""

import os
import signal
import threading
import time

import pytest

from xlnet_tf import fileio
from xlnet_tf import signal_holds


def listing(d):
  return sorted(os.listdir(d))


def test_atomic_write_replaces_and_leaves_no_temporary(tmp_path):
  path = tmp_path / "sub" / "a.json"
  fileio.write_json(str(path), {"x": 1}, indent=2)
  fileio.write_json(str(path), {"x": 2})
  assert path.read_text() == '{"x": 2}'
  assert listing(path.parent) == ["a.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_what_it_wrote(tmp_path):
  path = tmp_path / "a.txt"
  fileio.atomic_write(str(path), "old")
  with pytest.raises(OSError, match="disk full"):
    with fileio.atomic_path(str(path)) as tmp:
      with open(tmp, "w") as f:
        f.write("half")
      raise OSError(28, "disk full")
  assert path.read_text() == "old"
  assert listing(tmp_path) == ["a.txt"]


def test_temporary_names_are_unique_per_call(tmp_path):
  names = {fileio.temp_name(str(tmp_path / "a")) for _ in range(100)}
  assert len(names) == 100 and all(fileio.is_temp_name(n) for n in names)
  assert not fileio.is_temp_name(str(tmp_path / "model.ckpt-100.index"))


def test_a_prefix_of_several_files_moves_with_the_marker_last(tmp_path, monkeypatch):
  moved = []
  rename = fileio.rename
  monkeypatch.setattr(fileio, "rename", lambda src, dst: (moved.append(os.path.basename(dst)), rename(src, dst)))
  with fileio.atomic_path(str(tmp_path / "ckpt"), last_suffix=".index") as tmp:
    for suffix in (".index", ".data-00000-of-00001"):
      with open(tmp + suffix, "w") as f:
        f.write(suffix)
  assert moved == ["ckpt.data-00000-of-00001", "ckpt.index"]
  assert listing(tmp_path) == ["ckpt.data-00000-of-00001", "ckpt.index"]


def test_a_directory_replaces_the_old_one_whole(tmp_path):
  target = tmp_path / "export"
  for name in ("first", "second"):
    with fileio.atomic_path(str(target), marker="MARK") as tmp:
      os.makedirs(tmp)
      for f in (name, "MARK"):
        with open(os.path.join(tmp, f), "w") as out:
          out.write(name)
  assert listing(target) == ["MARK", "second"]
  assert listing(tmp_path) == ["export"]


def _write_dir(path, marker=None):
  with fileio.atomic_path(str(path), marker=marker) as tmp:
    os.makedirs(tmp)
    with open(os.path.join(tmp, "MARK"), "w") as f:
      f.write("new")


def test_a_directory_never_replaces_a_file_or_a_directory_it_did_not_write(tmp_path):
  """What a user owns stays: a file (even one above the target), or a directory without the writer's marker."""
  mine = tmp_path / "mine.txt"
  mine.write_bytes(b"the user's bytes")
  with pytest.raises(ValueError, match=f"Cannot use {mine} as a directory: it is a file, left as it is"):
    _write_dir(mine, marker="MARK")
  with pytest.raises(ValueError, match=f"Cannot use --predict_dir {mine}/sub as a directory: {mine} is a file"):
    fileio.check_output_dir(str(mine / "sub"), "--predict_dir")
  with pytest.raises(ValueError, match=f"{mine} as a directory: it is a file"):
    _write_dir(mine / "sub", marker="MARK")
  with pytest.raises(ValueError, match=f"{mine} as a directory: it is a file"):
    fileio.atomic_write(str(mine / "a.json"), "{}")
  assert mine.read_bytes() == b"the user's bytes"
  theirs = tmp_path / "theirs"
  theirs.mkdir()
  (theirs / "notes.txt").write_text("mine")
  for marker in ("MARK", None):
    with pytest.raises(ValueError, match=f"Cannot use {theirs}: it is a directory not written by this tool"):
      _write_dir(theirs, marker=marker)
  assert listing(theirs) == ["notes.txt"]
  assert listing(tmp_path) == ["mine.txt", "theirs"]  # nothing temporary left
  (theirs / "notes.txt").unlink()
  _write_dir(theirs)  # an empty directory is replaced
  assert listing(theirs) == ["MARK"]
  fileio.check_output_dir(str(theirs))  # files go into a directory that holds anything


def test_an_output_directory_that_cannot_be_written_is_named_with_its_flag(tmp_path, monkeypatch):
  """A flag's output directory (or the directory it would be made in) on a read-only file system or without write
  permission: one line naming the flag before anything is written. (The tests run as root, whom permissions do not
  stop, so the operating system's answers are stood in for.)"""
  readonly = {str(tmp_path / "ro")}
  (tmp_path / "ro").mkdir()
  monkeypatch.setattr(fileio.os, "access", lambda path, mode: str(path) not in readonly)
  rdonly = lambda path, flag: type("S", (), {"f_flag": flag})()
  monkeypatch.setattr(fileio.os, "statvfs", lambda path: rdonly(path, os.ST_RDONLY))
  with pytest.raises(ValueError, match=rf"^Cannot use --model_dir {tmp_path}/ro: it is on a read-only file system\. "
                                       "Pass a writable directory\.$"):
    fileio.check_output_dir(str(tmp_path / "ro"), "--model_dir")
  monkeypatch.setattr(fileio.os, "statvfs", lambda path: rdonly(path, 0))
  with pytest.raises(ValueError, match=rf"^Cannot use --predict_dir {tmp_path}/ro/a/b: {tmp_path}/ro is not "
                                       "writable by this user\."):
    fileio.check_output_dir(str(tmp_path / "ro" / "a" / "b"), "--predict_dir")
  fileio.check_output_dir(str(tmp_path / "rw" / "new"), "--predict_dir")
  fileio.check_output_dir(str(tmp_path / "ro" / "x"))  # no flag: an internal path, left to the write itself


def test_glob_in_takes_the_directory_s_name_as_it_is(tmp_path):
  for d in ("d[1]", "d1"):
    (tmp_path / d).mkdir()
    (tmp_path / d / "a.index").write_text(d)
  assert fileio.glob_in(str(tmp_path / "d[1]"), "*.index") == [str(tmp_path / "d[1]" / "a.index")]
  assert fileio.glob(str(tmp_path / "d[1]" / "*.index")) == [str(tmp_path / "d1" / "a.index")]  # what a glob does


def test_glob_includes_hidden_files_as_gfile_does(tmp_path):
  for name in (".hidden.txt", "b.txt", "a.txt"):
    (tmp_path / name).write_text("x")
  assert [os.path.basename(p) for p in fileio.glob(str(tmp_path / "*.txt"))] == [".hidden.txt", "a.txt", "b.txt"]


def _old_set(tmp_path):
  paths = [str(tmp_path / name) for name in ("a.json", "b.json", "c.tsv")]
  for path in paths:
    fileio.atomic_write(path, f"old {os.path.basename(path)}")
  return paths


def _contents(paths):
  return [open(path).read() for path in paths]


class _Stop(Exception):
  pass


@pytest.fixture
def sigterm_handler():
  """SIGTERM raises _Stop while the test runs, after noting its arrival in the list this yields."""
  arrived = []

  def handler(signum, frame):
    del frame
    arrived.append(signum)
    raise _Stop
  old = signal.signal(signal.SIGTERM, handler)
  yield arrived
  signal.signal(signal.SIGTERM, old)


def test_a_set_of_files_replaces_the_old_set_whole(tmp_path):
  paths = _old_set(tmp_path)
  with fileio.atomic_files() as files:
    files.write(paths[0], "new a")
    files.write(paths[1], b"new b")
    with open(files.path(paths[2]), "w") as f:  # a writer of its own
      f.write("new c")
    assert _contents(paths) == ["old a.json", "old b.json", "old c.tsv"]  # nothing is replaced before the end
  assert _contents(paths) == ["new a", "new b", "new c"]
  assert listing(tmp_path) == ["a.json", "b.json", "c.tsv"]
  with fileio.atomic_files() as files:  # and a new directory is made
    files.write(str(tmp_path / "new" / "x.json"), "x")
  assert listing(tmp_path / "new") == ["x.json"]


def test_a_failed_write_in_a_set_leaves_every_old_file_and_no_temporary(tmp_path, monkeypatch):
  """A full disk at the 2nd file of 3: the 1st (already written to its temporary name) replaces nothing either; the
  line says the old file is left as it was (it said "nothing was left under that name", sweep 21, C3)."""
  paths = _old_set(tmp_path)
  write_data = fileio._write_data  # pylint: disable=protected-access

  def full_disk_at_b(path, data):
    write_data(path, data[:2])
    if os.path.basename(path).startswith("b.json.tmp-"):
      raise OSError(28, "No space left on device")
    write_data(path, data)
  monkeypatch.setattr(fileio, "_write_data", full_disk_at_b)
  with pytest.raises(OSError, match=rf"^Could not write {paths[1]} \(No space left on device\); what was there is "
                                    r"left as it was\. Free space"):
    with fileio.atomic_files() as files:
      for path in paths:
        files.write(path, "new")
  assert _contents(paths) == ["old a.json", "old b.json", "old c.tsv"]
  assert listing(tmp_path) == ["a.json", "b.json", "c.tsv"]


def test_a_file_of_a_set_that_is_a_directory_replaces_nothing(tmp_path):
  paths = _old_set(tmp_path)
  os.remove(paths[2])
  os.mkdir(paths[2])
  with pytest.raises(OSError, match=f"^Could not write {paths[2]} \\(Is a directory\\)"):
    with fileio.atomic_files() as files:
      for path in paths:
        files.write(path, "new")
  assert _contents(paths[:2]) == ["old a.json", "old b.json"]
  assert listing(tmp_path) == ["a.json", "b.json", "c.tsv"] and not os.listdir(paths[2])


def _write_prefix(files, path, suffixes=(".index", ".data-00000-of-00001")):
  tmp = files.prefix(path, last_suffix=".index")
  for suffix in suffixes:
    with open(tmp + suffix, "w") as f:
      f.write(suffix)


def test_a_prefix_in_a_set_moves_every_part_in_the_pass_with_the_marker_last(tmp_path, monkeypatch):
  moved = []
  rename = fileio.rename
  monkeypatch.setattr(fileio, "rename", lambda src, dst: (moved.append(os.path.basename(dst)), rename(src, dst)))
  with fileio.atomic_files() as files:
    _write_prefix(files, str(tmp_path / "ckpt"))
    files.write(str(tmp_path / "config.json"), "{}")
    assert moved == []  # nothing is renamed before the end
  assert moved == ["ckpt.data-00000-of-00001", "ckpt.index", "config.json"]
  assert listing(tmp_path) == ["ckpt.data-00000-of-00001", "ckpt.index", "config.json"]
  assert (tmp_path / "ckpt.index").read_text() == ".index"


def test_a_file_written_before_another_removes_its_old_file_then_precedes_it(tmp_path, monkeypatch):
  """`write(..., before=)` (a cache's fingerprint, `records.mark_cache`): the old file of `before` is removed, then
  the file renamed, then `before`'s new one, so a process killed in between leaves no old `before` beside it."""
  (tmp_path / "cache").write_text("old")
  steps = []
  rename, remove = fileio.rename, fileio.remove
  monkeypatch.setattr(fileio, "rename", lambda src, dst: (steps.append(("rename", os.path.basename(dst))),
                                                          rename(src, dst)))
  monkeypatch.setattr(fileio, "remove", lambda path: (steps.append(("remove", os.path.basename(path))), remove(path)))
  with fileio.atomic_files() as files:
    files.write(str(tmp_path / "record"), "r")
    files.write(str(tmp_path / "cache"), "new")
    files.write(str(tmp_path / "cache.source"), "f", before=str(tmp_path / "cache"))
  assert steps == [("rename", "record"), ("remove", "cache"), ("rename", "cache.source"), ("rename", "cache")]
  assert (tmp_path / "cache").read_text() == "new" and listing(tmp_path) == ["cache", "cache.source", "record"]
  with pytest.raises(ValueError, match="must be a one-file member of this set"):
    with fileio.atomic_files() as files:
      files.write(str(tmp_path / "x.source"), "f", before=str(tmp_path / "x"))  # x is not in the set
  assert not os.path.exists(tmp_path / "x.source")


def test_a_failed_later_file_leaves_no_part_of_a_prefix_and_no_temporary(tmp_path, monkeypatch):
  """A full disk at the file after a checkpoint's prefix: neither part appears, and nothing is left."""
  def full_disk(path, data):
    del path, data
    raise OSError(28, "No space left on device")
  with pytest.raises(OSError, match=rf"^Could not write {tmp_path / 'config.json'} \(No space left on device\)"):
    with fileio.atomic_files() as files:
      _write_prefix(files, str(tmp_path / "ckpt"))
      monkeypatch.setattr(fileio, "_write_data", full_disk)
      files.write(str(tmp_path / "config.json"), "{}")
  assert listing(tmp_path) == []


def test_a_full_disk_inside_a_directory_written_atomically_names_the_file_once(tmp_path, monkeypatch):
  """A file written atomically inside a directory written atomically (the demo's corpus): the outer writer took the
  inner one's whole line as its reason, `Could not write D (nothing was left ... rerun.); nothing was left ...`, and
  "No space left on device" was lost (sweep 21, D4). The outer names its file with the inner's reason."""
  def full_disk(path, data):
    del path, data
    raise OSError(28, "No space left on device")
  monkeypatch.setattr(fileio, "_write_data", full_disk)
  with pytest.raises(OSError) as error:
    with fileio.atomic_path(str(tmp_path / "corpus")) as tmp:
      os.makedirs(tmp)
      fileio.atomic_write(os.path.join(tmp, "0.txt"), "text")
  assert str(error.value) == (f"Could not write {tmp_path}/corpus (No space left on device); nothing was left under "
                              "that name. Free space (or fix the directory's permissions) and rerun.")
  assert listing(tmp_path) == []


def test_a_prefix_with_nothing_written_replaces_nothing(tmp_path):
  with pytest.raises(ValueError, match=f"^Nothing was written for {tmp_path / 'ckpt'}"):
    with fileio.atomic_files() as files:
      files.write(str(tmp_path / "config.json"), "{}")
      files.prefix(str(tmp_path / "ckpt"), last_suffix=".index")
  assert listing(tmp_path) == []


def test_a_signal_while_a_set_is_written_leaves_every_old_file(tmp_path, sigterm_handler):
  paths = _old_set(tmp_path)
  with pytest.raises(_Stop):
    with fileio.atomic_files() as files:
      files.write(paths[0], "new")
      files.write(paths[1], "new")
      os.kill(os.getpid(), signal.SIGTERM)
      files.write(paths[2], "new")
  assert sigterm_handler == [signal.SIGTERM]
  assert _contents(paths) == ["old a.json", "old b.json", "old c.tsv"]
  assert listing(tmp_path) == ["a.json", "b.json", "c.tsv"]


def _sigterm_at_the_first_rename(monkeypatch, events):
  """`fileio.rename` sends SIGTERM before its first rename; `events` (the `sigterm_handler` list) gets each rename's
  final name, in order, beside the handler's run."""
  rename = fileio.rename

  def renaming(src, dst):
    if not events:
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(0.05)  # a handler that is not held back runs here, before the first rename
    events.append(os.path.basename(dst))
    rename(src, dst)
  monkeypatch.setattr(fileio, "rename", renaming)


@pytest.mark.parametrize("other_thread", [False, True])
def test_a_signal_while_a_set_is_renamed_waits_for_the_last_rename(tmp_path, monkeypatch, sigterm_handler,
                                                                   other_thread):
  """SIGTERM sent as the 1st file is renamed: its handler runs after the 3rd, so all three files are new. With
  another thread running (as TensorFlow's are), the kernel may give it the signal: still held back."""
  paths = _old_set(tmp_path)
  events = sigterm_handler  # the renames and the handler's run, in order
  _sigterm_at_the_first_rename(monkeypatch, events)
  release = threading.Event()
  thread = threading.Thread(target=release.wait, daemon=True)
  if other_thread:
    thread.start()
  try:
    with pytest.raises(_Stop):
      with fileio.atomic_files() as files:
        for path in paths:
          files.write(path, "new")
  finally:
    release.set()
  assert events == ["a.json", "b.json", "c.tsv", signal.SIGTERM]
  assert _contents(paths) == ["new", "new", "new"]
  assert listing(tmp_path) == ["a.json", "b.json", "c.tsv"]
  assert signal.getsignal(signal.SIGTERM).__name__ == "handler"  # the test's own, put back


@pytest.mark.parametrize("kind", ["parts", "directory"])
def test_a_signal_while_atomic_path_renames_waits_for_the_last_rename(kind, tmp_path, monkeypatch, sigterm_handler):
  """SIGTERM sent at the first rename of a file's parts (a SentencePiece model's `.vocab`, then its `.model`) or
  of a directory's replacement (the old one aside, the new one in, the old one removed): its handler runs after
  the last, so the parts are all new and no old directory is left aside."""
  target = tmp_path / "m"
  if kind == "parts":
    for suffix in (".model", ".vocab"):
      (tmp_path / f"m{suffix}").write_text("old")
  else:
    _write_dir(target, marker="MARK")
  events = sigterm_handler
  _sigterm_at_the_first_rename(monkeypatch, events)
  with pytest.raises(_Stop):
    if kind == "parts":
      with fileio.atomic_path(str(target), last_suffix=".model") as tmp:
        for suffix in (".model", ".vocab"):
          with open(tmp + suffix, "w") as f:
            f.write("new")
    else:
      _write_dir(target, marker="MARK")
  assert events[-1] == signal.SIGTERM and len(events) >= 3, events
  if kind == "parts":
    assert listing(tmp_path) == ["m.model", "m.vocab"]
    assert _contents([tmp_path / "m.model", tmp_path / "m.vocab"]) == ["new", "new"]
  else:
    assert listing(tmp_path) == ["m"] and _contents([target / "MARK"]) == ["new"]


def test_a_signal_in_the_pass_of_a_run_s_last_files_waits_for_the_run_s_end(tmp_path, monkeypatch, sigterm_handler):
  """`final`: inside `signals_deferred` (a CLI's run), a signal sent during the pass is noted there, not delivered,
  and the run goes on to report its files (it said to run the command again, whose rerun was refused as the output
  was there whole: sweep 27, U7); one sent before the pass stops the run there, and outside `signals_deferred`
  `final` changes nothing."""
  paths = _old_set(tmp_path)
  events = sigterm_handler
  _sigterm_at_the_first_rename(monkeypatch, events)
  with signal_holds.signals_deferred() as deferred:
    with fileio.atomic_files(final=True) as files:
      for path in paths:
        files.write(path, "new")
    events.append("reported")
  assert events == ["a.json", "b.json", "c.tsv", "reported"] and deferred == [signal.SIGTERM]
  assert _contents(paths) == ["new", "new", "new"]
  with signal_holds.signals_deferred() as deferred:
    with pytest.raises(_Stop):
      with fileio.atomic_files(final=True) as files:
        files.write(paths[0], "newer")
        os.kill(os.getpid(), signal.SIGTERM)
  assert deferred == [] and _contents(paths) == ["new", "new", "new"]
  events.clear()
  with pytest.raises(_Stop):
    with fileio.atomic_files(final=True) as files:
      files.write(paths[0], "newest")
  assert events == ["a.json", signal.SIGTERM]


@pytest.mark.parametrize("include_hidden", [True, False])
def test_hidden_files_count_on_every_python(tmp_path, monkeypatch, include_hidden):
  """A directory holding only `.git` or `.env` is not empty: --export_dir must not replace it whole. Python 3.10's
  glob leaves out names with a leading dot (3.11 has include_hidden); the tools' glob adds them back."""
  monkeypatch.setattr(fileio, "_GLOB_HAS_INCLUDE_HIDDEN", include_hidden)
  d = tmp_path / "exp"
  d.mkdir()
  (d / ".env").write_text("secret")
  (d / ".git").mkdir()
  (d / "notes.txt").write_text("")
  assert fileio.glob(f"{d}/*") == [f"{d}/.env", f"{d}/.git", f"{d}/notes.txt"]
  assert fileio.glob_in(str(d), ".e*") == [f"{d}/.env"] and fileio.glob_in(str(d), "*.txt") == [f"{d}/notes.txt"]
  (d / "notes.txt").unlink()
  with pytest.raises(ValueError, match="it is a directory not written by this tool"):
    fileio.check_output_dir(str(d), "--export_dir", marker="saved_model.pb")
  assert listing(d) == [".env", ".git"]


def test_the_root_directory_is_no_output_directory():
  for root in ("/", "//"):
    with pytest.raises(ValueError, match=f"Cannot use --export_dir {root} as an output directory: it is the root"):
      fileio.check_output_dir(root, "--export_dir", marker="saved_model.pb")


class _UnreachableGfile:
  """`tf.io.gfile` where GCS cannot be reached (no network) and https:// has no file system: each call raises
  TensorFlow's error, except `isdir`, which (as TensorFlow's) answers False for any error."""

  def __init__(self, tf):
    self.tf = tf

  def _fail(self, path, *args):
    if str(path).startswith("https://"):
      raise self.tf.errors.UnimplementedError(None, None,
                                              f"File system scheme 'https' not implemented (file: '{path}')")
    if str(path).startswith("gs://b/missing"):
      raise self.tf.errors.NotFoundError(None, None, f"{path} not found")
    raise self.tf.errors.FailedPreconditionError(None, None, (
        "Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve hostname', error details: Could "
        f"not resolve host: www.googleapis.com\n\t when reading metadata of {path}"))

  exists = listdir = glob = makedirs = stat = _fail

  def isdir(self, path):
    return False


@pytest.fixture
def unreachable(monkeypatch):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(fileio, "_gfile", lambda: _UnreachableGfile(tf))
  return tf


_CANNOT_REACH = ("Cannot reach {}gs://b/m: Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve "
                 "hostname', error details: Could not resolve host: www.googleapis.com. Check the network and "
                 "credentials (gcloud auth application-default login), or pass a local path.")


@pytest.mark.parametrize("call", [fileio.exists, fileio.isdir, fileio.listdir, fileio.makedirs, fileio.size,
                                  lambda p: fileio.glob(p)])
def test_a_remote_path_that_cannot_be_reached_is_one_line(call, unreachable):
  """No network (or no credentials): TensorFlow's error (a traceback at every tool) becomes a `PathError` of one
  line, the reason its first line; `named` names the flag. `isdir`, whose TensorFlow answer hides the error (a
  --data_dir 'is not a directory'), raises it too."""
  with pytest.raises(fileio.PathError) as raised:
    call("gs://b/m")
  assert str(raised.value) == _CANNOT_REACH.format("")
  assert raised.value.path == "gs://b/m" and raised.value.named("--model_dir") == _CANNOT_REACH.format("--model_dir ")


def test_a_scheme_tensorflow_has_no_file_system_for_is_one_line(unreachable):
  with pytest.raises(fileio.PathError) as raised:
    fileio.exists("https://h/xlnet-base-cased")
  assert raised.value.named("--init_checkpoint") == (
      "--init_checkpoint https://h/xlnet-base-cased: TensorFlow cannot read https:// paths here; download the model "
      "and pass its local directory.")
  assert raised.value.named("--data_dir") == (
      "--data_dir https://h/xlnet-base-cased: TensorFlow cannot read https:// paths here; copy it to a local disk and "
      "pass its local path.")


def test_a_remote_path_that_is_not_there_is_left_to_its_caller(unreachable):
  with pytest.raises(unreachable.errors.NotFoundError):
    fileio.listdir("gs://b/missing")
  assert fileio.remote_error(ValueError("gs://b/m")) is None  # not TensorFlow's: not a path error


@pytest.mark.parametrize("below", [False, True], ids=["the_directory", "above_it"])
def test_an_output_directory_through_a_symbolic_link_to_nowhere_is_named(below, tmp_path):
  """A symbolic link to an unmounted disk (or one that loops) as an output directory, or above it: the tools said
  "[Errno 2] No such file or directory" (or "[Errno 40] Too many levels of symbolic links", or, making it, a
  FileExistsError) for a directory they were asked to make, naming no flag."""
  (tmp_path / "dangling").symlink_to(tmp_path / "disk" / "exp")
  (tmp_path / "loop").symlink_to(tmp_path / "loop")
  sub = "/run1" if below else ""
  which = f"{tmp_path}/dangling is" if below else "it is"
  for call in (lambda p: fileio.check_output_dir(p, "--model_dir"), fileio.makedirs):
    with pytest.raises(fileio.PathError) as raised:
      call(f"{tmp_path}/dangling{sub}")
    assert raised.value.named("--model_dir") == (
        f"Cannot use --model_dir {tmp_path}/dangling{sub}: {which} a symbolic link to {tmp_path}/disk/exp, which "
        f"does not exist (an unmounted disk?). Create {tmp_path}/disk/exp or pass another --model_dir.")
    with pytest.raises(fileio.PathError) as raised:
      call(f"{tmp_path}/loop{sub}")
    which = f"{tmp_path}/loop is" if below else "it is"
    assert raised.value.named("--save_dir") == (
        f"Cannot use --save_dir {tmp_path}/loop{sub}: {which} a symbolic link that loops ({tmp_path}/loop -> "
        f"{tmp_path}/loop). Point it at a directory or pass another --save_dir.")
    which = f"{tmp_path}/dangling is" if below else "it is"
  (tmp_path / "disk" / "exp").mkdir(parents=True)  # the disk mounted: a link to a directory is used as it
  fileio.check_output_dir(f"{tmp_path}/dangling{sub}", "--model_dir")
  fileio.makedirs(f"{tmp_path}/dangling{sub}")
  assert os.path.isdir(f"{tmp_path}/disk/exp{sub}")


def test_a_name_too_long_is_not_advised_to_free_space(tmp_path):
  """A name past the file system's 255 bytes (with the temporary suffix): the line advised freeing space or fixing
  permissions, neither of which helps (sweep 19, F9)."""
  with pytest.raises(OSError, match=r"\(File name too long\); nothing was left under that name\. Pass a shorter name "
                                    r"and rerun\.$"):
    fileio.atomic_write(str(tmp_path / ("e" * 250)), "x")
  assert not os.listdir(tmp_path)
