"""The one atomic write: complete files appear under their final name, or nothing does."""

import os
import socket
import subprocess
import sys

import pytest

from xlnet_tf import fileio


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


def test_a_directory_lock_refuses_a_second_holder_and_takes_over_a_stale_one(tmp_path, caplog):
  with fileio.directory_lock(str(tmp_path)):
    with pytest.raises(ValueError, match=rf"--model_dir {tmp_path} is in use by process {os.getpid()} on "):
      with fileio.directory_lock(str(tmp_path)):
        pass
  assert not os.path.exists(tmp_path / ".run.lock")  # released
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
  (tmp_path / ".run.lock").write_text(f"{int(dead.stdout)} {socket.gethostname()}")  # its process has exited
  with fileio.directory_lock(str(tmp_path)):
    assert (tmp_path / ".run.lock").read_text().startswith(f"{os.getpid()} ")
  assert "stale lock" in caplog.text


def test_a_run_that_fails_in_a_directory_it_made_leaves_no_empty_directory(tmp_path):
  for existed in (False, True):
    target = tmp_path / f"new-{existed}"
    if existed:
      target.mkdir()
    with pytest.raises(ValueError, match="bad flag"):
      with fileio.directory_lock(str(target), "data_utils", "--save_dir"):
        raise ValueError("bad flag")
    assert target.exists() == existed
  with fileio.directory_lock(str(tmp_path / "kept")):
    pass
  with pytest.raises(ValueError, match="late"):
    with fileio.directory_lock(str(tmp_path / "written")):
      (tmp_path / "written" / "part").write_text("x")
      raise ValueError("late")
  assert sorted(os.listdir(tmp_path)) == ["kept", "new-True", "written"]
