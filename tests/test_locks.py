"""Locks between runs: a training run's directory (one holder; a dead holder's lock is taken over) and a cached
file (shared by the runs that read it, refused to a run that would write it again)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from helpers import cache_user
from xlnet_tf import fileio
from xlnet_tf import locks


def listing(d):
  return sorted(os.listdir(d))


def test_a_directory_lock_refuses_a_second_holder_and_takes_over_a_stale_one(tmp_path, caplog):
  with locks.directory_lock(str(tmp_path)):
    with pytest.raises(ValueError, match=rf"--model_dir {tmp_path} is in use by process {os.getpid()} on "):
      with locks.directory_lock(str(tmp_path)):
        pass
  assert not os.path.exists(tmp_path / ".run.lock")  # released
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
  (tmp_path / ".run.lock").write_text(f"{int(dead.stdout)} {socket.gethostname()}")  # its process has exited
  with locks.directory_lock(str(tmp_path)):
    assert (tmp_path / ".run.lock").read_text().startswith(f"{os.getpid()} ")
  assert "stale lock" in caplog.text


def test_a_killed_container_s_lock_is_stale_and_a_live_holder_s_is_not(tmp_path, caplog):
  """A run killed in a container leaves `1 pod-0` (its pid in its own namespace, its pod's name): the rerun is pid 1
  on pod-0 too, or on a new pod, and the pid-and-host test refused every rerun for good (sweep 19, F8). A lock no
  process holds a flock on is stale; one a live process holds is refused, on whatever host it says."""
  for holder in (f"{os.getpid()} {socket.gethostname()}", "4242 pod-a"):  # the killed run's pid is the rerun's
    (tmp_path / ".run.lock").write_text(holder)
    with locks.directory_lock(str(tmp_path)):
      assert (tmp_path / ".run.lock").read_text() == f"{os.getpid()} {socket.gethostname()}"
  assert caplog.text.count("stale lock") == 1
  older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a live run holding no flock
  try:
    (tmp_path / ".run.lock").write_text(f"{older.pid} {socket.gethostname()}")
    with pytest.raises(ValueError, match=f"is locked by process {older.pid} on .* which is alive but holds no lock "
                                         f"on it: .* if no run uses --model_dir, delete {tmp_path}/.run.lock\\.$"):
      with locks.directory_lock(str(tmp_path)):
        pass
  finally:
    older.kill()
    older.wait()
  live = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from xlnet_tf import locks
with locks.directory_lock({str(tmp_path)!r}):
  print("held", flush=True)
  time.sleep(60)
"""], stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
  try:
    assert live.stdout.readline().strip() == "held"
    with pytest.raises(ValueError, match=rf"^--model_dir {tmp_path} is in use by process {live.pid} on "):
      with locks.directory_lock(str(tmp_path)):
        pass
  finally:
    live.kill()
    live.wait()
  with locks.directory_lock(str(tmp_path)):  # killed: its flock is gone with it
    pass


def test_without_flock_the_pid_and_host_decide(tmp_path, monkeypatch, caplog):
  """A file system without flock (some network mounts): the lock is made by its name, holding pid and host, with no
  warning of a stale lock it made itself on its first try; a live holder on this host is refused."""
  def no_flock(fd, operation):
    raise OSError(37, "No locks available")
  monkeypatch.setattr(locks.fcntl, "flock", no_flock)
  with locks.directory_lock(str(tmp_path)):
    assert (tmp_path / ".run.lock").read_text() == f"{os.getpid()} {socket.gethostname()}"
    with pytest.raises(ValueError, match=f"is in use by process {os.getpid()} on "):
      with locks.directory_lock(str(tmp_path)):
        pass
  assert "stale" not in caplog.text and not os.path.exists(tmp_path / ".run.lock")


def test_a_run_that_fails_in_a_directory_it_made_leaves_no_empty_directory(tmp_path):
  for existed in (False, True):
    target = tmp_path / f"new-{existed}"
    if existed:
      target.mkdir()
    with pytest.raises(ValueError, match="bad flag"):
      with locks.directory_lock(str(target), "data_utils", "--save_dir"):
        raise ValueError("bad flag")
    assert target.exists() == existed
  with locks.directory_lock(str(tmp_path / "kept")):
    pass
  with pytest.raises(ValueError, match="late"):
    with locks.directory_lock(str(tmp_path / "written")):
      (tmp_path / "written" / "part").write_text("x")
      raise ValueError("late")
  assert sorted(os.listdir(tmp_path)) == ["kept", "new-True", "written"]
  (tmp_path / "empty").mkdir()  # the parents it made go too, up to one that was there, empty or not (sweep 27)
  with pytest.raises(ValueError, match="bad flag"):
    with locks.directory_lock(str(tmp_path / "empty" / "a" / "b" / "out"), "data_utils", "--save_dir"):
      raise ValueError("bad flag")
  assert sorted(os.listdir(tmp_path)) == ["empty", "kept", "new-True", "written"] and not os.listdir(tmp_path / "empty")
  deep = tmp_path / "empty" / "/".join(["d" * 220] * 20)  # past PATH_MAX: it left the 18 levels made (sweep 30, U13)
  with pytest.raises(ValueError, match="^Cannot create --save_dir .*: File name too long. Pass a shorter path.$"):
    with locks.directory_lock(str(deep), "data_utils", "--save_dir"):
      pass
  assert not os.listdir(tmp_path / "empty")



def test_a_parent_another_failing_run_removes_meanwhile_is_made_again(tmp_path, monkeypatch):
  # Two runs whose outputs share a new parent: one fails and removes the parent it made, empty, between the other's
  # mkdir of that parent and of its own directory (CI saw "Cannot create --save_dir ...: No such file or directory").
  mkdir, cut = os.mkdir, []

  def mkdir_after_the_other_run_cleans_up(path, *args, **kwargs):
    if os.path.basename(path) == "b" and not cut:
      cut.append(path)
      os.rmdir(tmp_path / "shared")
    return mkdir(path, *args, **kwargs)

  monkeypatch.setattr(os, "mkdir", mkdir_after_the_other_run_cleans_up)
  with locks.directory_lock(str(tmp_path / "shared" / "b"), "data_utils", "--save_dir"):
    pass
  assert cut and (tmp_path / "shared" / "b").is_dir()


@pytest.mark.parametrize("where", ["open", "write"])
def test_a_signal_while_the_lock_is_made_leaves_no_lock(where, tmp_path, monkeypatch):
  """A Ctrl-C right after the lock file appears (where a run is stopped as soon as it locks its --model_dir) waits
  till the lock is written whole, then stops the run, which removes its lock and the directory it made: an empty
  lock was left before, and the run that held it was gone. A full disk while it is written leaves none either."""
  monkeypatch.setattr(signal, "signal", signal.signal)  # the handler set below is put back after the test
  signal.signal(signal.SIGINT, signal.default_int_handler)
  real_fdopen = os.fdopen

  def fdopen(fd, *args, **kwargs):
    if where == "write":
      os.close(fd)
      raise OSError(28, "No space left on device")
    signal.raise_signal(signal.SIGINT)  # its handler runs in this thread as this call returns
    return real_fdopen(fd, *args, **kwargs)
  monkeypatch.setattr(os, "fdopen", fdopen)
  run_dir = tmp_path / "run"
  with pytest.raises(KeyboardInterrupt if where == "open" else ValueError) as e:
    with locks.directory_lock(str(run_dir)):
      raise AssertionError("the body ran")
  assert not run_dir.exists(), os.listdir(run_dir)
  if where == "write":
    assert str(e.value) == (f"Cannot use --model_dir {run_dir}: No space left on device (writing its lock "
                            f"{run_dir}/.run.lock). Free space and rerun.")  # not "Pass a writable" (sweep 19, F9)


class _Killed(BaseException):  # a process killed outright: nothing after it runs (no `except Exception`)
  pass


def test_a_pass_cut_short_is_undone_from_its_journal(tmp_path, monkeypatch, caplog):
  """A pass with the lock's journal (a conversion's, train_spm's) that a kill -9 cuts after its second rename: the
  journal names what it had made, and the lock's next holder removes that and the temporaries left, with a line,
  never a file that was there before the pass (`b.json` is replaced, not made); a journal cut short while written
  means no step had run."""
  (tmp_path / "b.json").write_text("old")
  rename, done = fileio.rename, []

  def killed_at_the_third(src, dst):
    if len(done) == 2:
      raise _Killed
    done.append(os.path.basename(dst))
    rename(src, dst)
  monkeypatch.setattr(fileio, "rename", killed_at_the_third)
  with pytest.raises(_Killed):
    with locks.directory_lock(str(tmp_path), name="convert") as journal:
      with fileio.atomic_files(journal) as files:
        for name in ("a.json", "b.json", "c.json"):
          files.write(str(tmp_path / name), "new")
  monkeypatch.undo()
  assert done == ["a.json", "b.json"] and journal == str(tmp_path / ".convert.pass")
  with open(journal) as f:
    left = json.load(f)["temporaries"][-1]  # c.json's: a kill leaves it (here the error removed it)
  with open(left, "w") as f:
    f.write("new")
  with locks.directory_lock(str(tmp_path), name="convert"):
    assert listing(tmp_path) == [".convert.lock", "b.json"]
  assert f"Removed {tmp_path / 'a.json'}: what a run killed while putting its files in place there" in caplog.text
  assert locks.undo_cut_pass(journal) == []
  with open(journal, "w") as f:
    f.write('{"made": ["')
  (tmp_path / "a.json").write_text("a file made after")
  assert locks.undo_cut_pass(journal) == [] and listing(tmp_path) == ["a.json", "b.json"]


def test_a_directory_at_the_lock_s_name_is_named_with_its_remedy(tmp_path):
  """A directory named `.run.lock` in --model_dir: the line said "Pass a writable directory" of a writable one
  (sweep 27)."""
  (tmp_path / "run" / ".run.lock").mkdir(parents=True)
  with pytest.raises(ValueError) as e:
    with locks.directory_lock(str(tmp_path / "run")):
      raise AssertionError("the body ran")
  assert str(e.value) == (f"Cannot use --model_dir {tmp_path}/run: Is a directory (writing its lock {tmp_path}/run/"
                          f".run.lock). Move {tmp_path}/run/.run.lock away (a run's lock is a file) or pass another "
                          "--model_dir.")


def test_a_cache_in_use_is_shared_by_the_same_inputs_and_refused_to_others(tmp_path, monkeypatch):
  monkeypatch.setattr(locks, "CACHE_LOCK_WAIT_S", 0.3)
  path = str(tmp_path / "cache")
  first = cache_user.start(path, "inputs-1")
  assert first.stdout.readline() == "wrote\n"
  assert cache_user.use(path, "inputs-1") == "reused"  # a second run with the same inputs, beside the first
  # Other inputs, or --overwrite_data: the first run reads the file again each epoch, so it is not written again.
  for fingerprint, overwrite, why in (("inputs-2", False, "made from other inputs or settings"),
                                      ("inputs-1", True, "which --overwrite_data=True would write again")):
    with pytest.raises(ValueError) as e:
      cache_user.use(path, fingerprint, overwrite)
    assert str(e.value) == (f"--output_dir {tmp_path} is in use: another run reads its cached {path} (lock "
                            f"{tmp_path}/.cache.lock), {why}. Pass another --output_dir, or wait for that run to "
                            "finish.")
  assert open(path).read() == "inputs-1" and listing(tmp_path) == [".cache.lock", "cache"]
  first.kill()  # however a run ends, the kernel lets go of its lock
  first.wait()
  assert cache_user.use(path, "inputs-2") == "wrote" and open(path).read() == "inputs-2"


def test_a_directory_named_like_the_cache_is_refused(tmp_path):
  """It was "reused" (no fingerprint: a legacy cache), then TensorFlow's traceback reading it (sweep 23, B5)."""
  (tmp_path / "cache").mkdir()
  with pytest.raises(ValueError, match=f"^--output_dir {tmp_path} holds a directory named like the cached file "
                                       f"{tmp_path}/cache: move it away, or pass another --output_dir.$"):
    with locks.cache_lock(str(tmp_path / "cache"), lambda: True):
      pass


def test_two_runs_with_the_same_new_inputs_write_the_cache_once(tmp_path):
  path = tmp_path / "cache"
  start = time.time() + 1.0  # both are running by then
  runs = [cache_user.start(path, "inputs-1", start) for _ in range(2)]
  try:
    said = sorted(run.stdout.readline().strip() for run in runs)
  finally:
    for run in runs:
      run.communicate("")
  assert said == ["reused", "wrote"]  # one wrote (in 0.5 s); the other waited for it and reused its file
  assert open(path).read() == "inputs-1" and listing(tmp_path) == [".cache.lock", "cache"]


def test_what_a_killed_writer_left_under_temporary_names_is_removed_by_the_next_sole_writer(tmp_path, caplog):
  """A run killed while writing (kill -9, the OOM killer) left its temporaries for good, unnamed (a SavedModel's is
  as big as the model). The next writer that is the only one of those names (it holds the lock) removes them with a
  line; without a lock (a conversion) only those whose process is gone; what is not a temporary stays."""
  dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                            text=True).stdout)
  model_dir = tmp_path / "model"
  (model_dir / "ckpt-4_temp").mkdir(parents=True)
  (model_dir / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_bytes(b"x")
  (model_dir / f"run_flags.json.tmp-{dead}-0123456789ab").write_text("{")
  (model_dir / "notes.tmp").write_text("mine")
  with locks.directory_lock(str(model_dir)):
    assert listing(model_dir) == [".run.lock", "notes.tmp"]
  assert f"Removed what a run that was killed while writing left under temporary names: {model_dir}/ckpt-4_temp, " \
         f"{model_dir}/run_flags.json.tmp-{dead}-0123456789ab." in caplog.text
  (tmp_path / f"export.tmp-{dead}-0123456789ab").mkdir()
  (tmp_path / f"export.tmp-{os.getpid()}-0123456789ab").mkdir()  # a live export's (this process)
  (tmp_path / f"export.tmp-{dead}-0123456789ab.old").mkdir()  # maybe the only copy left of the old export
  locks.remove_stale_temporaries(str(tmp_path), ["export.tmp-*"], only_dead=True)
  assert [n for n in listing(tmp_path) if n.startswith("export")] == sorted(
      [f"export.tmp-{os.getpid()}-0123456789ab", f"export.tmp-{dead}-0123456789ab.old"])  # pids of any length
  assert f"Kept {tmp_path}/export.tmp-{dead}-0123456789ab.old: the earlier version a run killed while replacing it " \
         "set aside, its only copy where that run left none in place. Delete it once you no longer need it." \
         in caplog.text  # it was kept without a word (sweep 27, U10)
  cache = tmp_path / "records" / "train.tf_record"
  cache.parent.mkdir()
  (cache.parent / f"train.tf_record.tmp-{os.getpid()}-0123456789ab").write_bytes(b"x")  # no live writer: the lock
  with locks.cache_lock(str(cache), cache.exists) as reuse:
    assert not reuse and listing(cache.parent) == [".train.tf_record.lock"]
    cache.write_bytes(b"y")


def test_a_lock_taken_a_moment_ago_names_another_process(tmp_path):
  """A lock whose holder had not yet written its pid and host was said to be held by "process ? on ?" (sweep 22,
  N3)."""
  with locks.directory_lock(str(tmp_path)):
    (tmp_path / ".run.lock").write_text("")  # as the moment between the holder's flock and its write
    with pytest.raises(ValueError, match=rf"^--model_dir {tmp_path} is in use by another process \(lock "):
      with locks.directory_lock(str(tmp_path)):
        pass


@pytest.mark.parametrize("mine,theirs,what", [("run", "convert", "--model_dir"), ("convert", "run", "--output_dir"),
                                              ("spm-spiece", "convert", "--model_prefix"),
                                              ("convert", "spm-spiece", "--output_dir")])
def test_a_tool_refuses_a_directory_another_tool_writes_the_same_names_in(mine, theirs, what, tmp_path):
  """Each tool checked its directory only at its start: a conversion into a training run's --model_dir before its
  first save lost its xlnet_config.json to the run's, a train_spm beside a conversion its spiece.model, and both
  said they wrote them (sweep 30, U1). A live lock of the other tool there refuses the lock; a stale one, or another
  tool's, does not."""
  with locks.directory_lock(str(tmp_path), name=theirs):
    with pytest.raises(ValueError, match=rf"^{what} {tmp_path} is being written by another tool: process "
                                         rf"{os.getpid()} on \S+ holds {tmp_path}/\.{theirs}\.lock\. Wait for it to "
                                         rf"finish, or use another {what}\.$"):
      with locks.directory_lock(str(tmp_path), name=mine, what=what):
        pass
    assert listing(tmp_path) == [f".{theirs}.lock"]  # the refused lock is gone
    with locks.directory_lock(str(tmp_path), name="predict"):
      pass
  (tmp_path / f".{theirs}.lock").write_text(f"{os.getpid()} {socket.gethostname()}")  # held by no process
  with locks.directory_lock(str(tmp_path), name=mine, what=what):
    pass
