"""XLA's persistent compilation cache (`--xla_cache_dir`, `training.xla_cache`): a second run loads what the first
compiled, a damaged entry is removed instead of failing the run, entries are named by the machine."""

import os
import re
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from helpers import suite_xla_cache
from xlnet_tf.training import xla_cache

PY = sys.executable
RECORDS = "tests/testdata/data/records/tfrecords"  # bsz 4, seq_len 32, reuse 16, bi_data, num_predict 6


def pretrain_cmd(model_dir, cache_dir):
  return [PY, "run_pretrain.py", f"--record_info_dir={RECORDS}", f"--model_dir={model_dir}",
          f"--xla_cache_dir={cache_dir}", "--jit_compile", "--train_batch_size=4", "--seq_len=32",
          "--reuse_len=16", "--perm_size=8", "--num_predict=6", "--mem_len=12", "--uncased=False", "--n_layer=2",
          "--d_model=16", "--n_head=2", "--d_head=8", "--d_inner=24", "--untie_r=True", "--ff_activation=gelu",
          "--learning_rate=3e-3", "--warmup_steps=0", "--iterations=1", "--train_steps=3", "--seed=7"]


def run(model_dir, cache_dir):
  result = subprocess.run(pretrain_cmd(model_dir, cache_dir), capture_output=True, text=True, timeout=600,
                          env=suite_xla_cache.without())
  assert result.returncode == 0, result.stderr[-3000:]
  return [line.split(" | ")[2] for line in result.stdout.splitlines() if line.startswith("[")], result.stderr


def entries(cache_dir):
  """{name: mtime} of the cache's entries."""
  return {name: os.stat(os.path.join(cache_dir, name)).st_mtime_ns for name in os.listdir(cache_dir)}


@pytest.mark.slow  # the default suite's 15 minutes; by default: this file's other tests
def test_a_second_run_loads_every_program_and_a_damaged_entry_is_compiled_again(tmp_path):
  cache = tmp_path / "cache"
  losses, _ = run(tmp_path / "first", cache)
  written = entries(cache)
  assert written and all(re.fullmatch(rf"xlnet_{xla_cache.machine_key()}__\d+__\d+__XLA_CPU_JIT\.pb", name)
                         for name in written), written
  time.sleep(0.05)
  again, stderr = run(tmp_path / "second", cache)
  assert again == losses and len(losses) == 3
  assert "cpu_aot_loader" not in stderr and "XlaSerializedCacheEntry" not in stderr  # the loader's noise: filtered
  assert entries(cache) == written  # every program loaded: none compiled and written again

  # Cut one short, as an interrupted copy would: TensorFlow alone fails the run at its first step.
  name = max(written, key=lambda n: os.path.getsize(cache / n))
  data = (cache / name).read_bytes()
  (cache / name).write_bytes(data[:len(data) // 2])
  third, stderr = run(tmp_path / "third", cache)
  assert third == losses
  assert f"XLA cache: {name} in {cache} is damaged (cut short); removed, its program is compiled again." in stderr
  assert xla_cache.is_complete_entry(str(cache / name))  # compiled and written again, whole
  # Cut at a field boundary, it reads as whole: TensorFlow's traceback at step 1, now one line (sweep 32, U9).
  data = (cache / name).read_bytes()
  (cache / name).write_bytes(data[:_first_field_end(data)])
  failed = subprocess.run(pretrain_cmd(tmp_path / "fourth", cache), capture_output=True, text=True, timeout=600,
                          env=suite_xla_cache.without())
  assert failed.returncode == 1 and failed.stderr.splitlines()[-1] == (
      f"run_pretrain.py: error: An entry of --xla_cache_dir {cache} does not match the program it is named for (cut "
      "short by a copy, or written by another build of TensorFlow). Delete the directory's xlnet_* files and rerun: "
      "their programs are compiled again.")


def _first_field_end(data):
  """Where an entry's first top-level field (a length-delimited one) ends."""
  position, tag_and_length = 0, []
  for _ in range(2):  # the tag's varint, then the length's
    value = shift = 0
    while True:
      byte = data[position]
      value, shift, position = value | (byte & 0x7F) << shift, shift + 7, position + 1
      if byte < 0x80:
        break
    tag_and_length.append(value)
  assert tag_and_length[0] & 7 == 2, tag_and_length
  return position + tag_and_length[1]


def test_a_cache_that_fails_a_step_is_one_line(tmp_path, monkeypatch):
  """A write into the cache failing at a step (a full disk, a file-size limit), or an entry that does not match its
  program: TensorFlow's traceback at step 1, and the partial entry left for 10 minutes (sweep 32, U8, U9)."""
  monkeypatch.setenv("TF_XLA_FLAGS", f"--tf_xla_persistent_cache_directory={tmp_path} "
                                     "--tf_xla_persistent_cache_prefix=xlnet_0123")
  mine = tmp_path / f"xlnet_0123__1__2__XLA_CPU_JIT.pbvm-53a263a3-{os.getpid()}-661911cb8a776.tmp"
  others = tmp_path / "xlnet_0123__3__4__XLA_CPU_JIT.pbvm-53a263a3-999999999-661911cb8a776.tmp"
  for path in (mine, others):
    path.write_bytes(b"part")
  error = tf.errors.OutOfRangeError(None, None, f"Graph execution error:\n\n{mine}; File too large\n\t "
                                                "[[{{node while/cond_1/StatefulPartitionedCall}}]]")
  assert xla_cache.failure_line(error) == (
      f"Could not write a compiled program into --xla_cache_dir {tmp_path} (File too large). Free space there, or "
      "leave --xla_cache_dir unset (each run then compiles its programs), and rerun; the checkpoints saved before "
      "are kept.")
  assert sorted(os.listdir(tmp_path)) == [others.name]
  assert xla_cache.failure_line(tf.errors.InvalidArgumentError(None, None, "Graph execution error: Serialized HLO "
                                                               "does not match.")).startswith(
      f"An entry of --xla_cache_dir {tmp_path} does not match the program it is named for")
  assert xla_cache.failure_line(tf.errors.OutOfRangeError(None, None, "/elsewhere/x.tmp; File too large")) is None
  assert xla_cache.failure_line(ValueError(f"{mine}; File too large")) is None
  monkeypatch.setenv("TF_XLA_FLAGS", "")
  assert xla_cache.failure_line(error) is None


def test_complete_entries_are_told_from_damaged_ones(tmp_path):
  example = tf.train.Example(features=tf.train.Features(feature={
      "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 300, 70000])),
      "score": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5]))})).SerializeToString()
  path = tmp_path / "entry.pb"
  cases = {"whole": example, "half": example[:len(example) // 2], "one byte short": example[:-1],
           "one byte more": example + b"\x00", "empty": b"", "text": b"garbage\n"}
  found = {}
  for case, data in cases.items():
    path.write_bytes(data)
    found[case] = xla_cache.is_complete_entry(str(path))
  assert found == {"whole": True, "half": False, "one byte short": False, "one byte more": False, "empty": False,
                   "text": False}
  for case in ("whole", "half"):  # a remote directory (gs://...), read through tf.io.gfile
    with tf.io.gfile.GFile(f"ram://xla_cache/{case}.pb", "wb") as f:
      f.write(cases[case])
    assert xla_cache.is_complete_entry(f"ram://xla_cache/{case}.pb") == found[case]


def test_the_machine_key_changes_with_tensorflow_the_gpus_and_xla_options(monkeypatch):
  key = xla_cache.machine_key()
  assert re.fullmatch(r"[0-9a-f]{12}", key) and xla_cache.machine_key() == key
  monkeypatch.setattr(tf, "__version__", tf.__version__ + ".other")
  assert xla_cache.machine_key() != key
  monkeypatch.undo()
  monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_fast_math=true")
  assert xla_cache.machine_key() != key
  monkeypatch.undo()
  real_read = xla_cache._read
  monkeypatch.setattr(xla_cache.glob_lib, "glob", lambda pattern: ["/proc/driver/nvidia/gpus/0/information"]
                      if "nvidia" in pattern else [])
  models = {}
  for model in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"):
    monkeypatch.setattr(xla_cache, "_read", lambda path, m=model: f"Model: \t\t {m}\nIRQ: 1\n"
                        if "nvidia" in path else real_read(path))
    models[model] = xla_cache.machine_key()
  assert len({key, *models.values()}) == 3


@pytest.fixture
def fresh_process(monkeypatch):
  """As a CLI before TensorFlow's runtime starts: no cache setting yet."""
  monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
  monkeypatch.setattr(xla_cache, "_runtime_started", lambda: False)


def test_enable_sets_the_flags_tidies_and_keeps_others_entries(fresh_process, tmp_path):
  prefix = f"xlnet_{xla_cache.machine_key()}"
  whole = tf.train.Example().SerializeToString() + b"\x0a\x00"  # one empty field
  files = {f"{prefix}__1__2__XLA_CPU_JIT.pb": whole, f"{prefix}__3__4__XLA_CPU_JIT.pb": b"\x0a\x05ab",
           "xlnet_0123456789ab__3__4__XLA_CPU_JIT.pb": b"\x0a\x05ab",  # another machine's: not ours to judge
           f"{prefix}__5__6__XLA_CPU_JIT.pb-1-2-3.tmp": b"", f"{prefix}__7__8__XLA_CPU_JIT.pb-1-2-3.tmp": b""}
  for name, data in files.items():
    (tmp_path / name).write_bytes(data)
  stale = time.time() - 3600
  os.utime(tmp_path / f"{prefix}__5__6__XLA_CPU_JIT.pb-1-2-3.tmp", (stale, stale))
  assert xla_cache.enable(str(tmp_path)) == prefix
  assert os.environ["TF_XLA_FLAGS"] == (f"--tf_xla_persistent_cache_directory={tmp_path} "
                                        f"--tf_xla_persistent_cache_prefix={prefix}")
  assert sorted(os.listdir(tmp_path)) == sorted([f"{prefix}__1__2__XLA_CPU_JIT.pb",
                                                 "xlnet_0123456789ab__3__4__XLA_CPU_JIT.pb",
                                                 f"{prefix}__7__8__XLA_CPU_JIT.pb-1-2-3.tmp"])
  assert xla_cache.enable(str(tmp_path)) == prefix  # again (the CLI's set_flags, then training.start): no change
  assert os.environ["TF_XLA_FLAGS"].count("--tf_xla_persistent_cache_directory") == 1


def test_a_users_own_cache_setting_wins(fresh_process, monkeypatch, tmp_path):
  monkeypatch.setenv("TF_XLA_FLAGS", f"--tf_xla_persistent_cache_directory={tmp_path / 'theirs'}")
  assert xla_cache.enable(str(tmp_path / "ours")) is None
  assert not (tmp_path / "ours").exists()


def test_a_cache_directory_that_cannot_be_written_is_one_line(fresh_process, tmp_path, monkeypatch):
  (tmp_path / "file").write_text("a user's file")
  with pytest.raises(ValueError, match=f"^Cannot use --xla_cache_dir {tmp_path}/file as a directory: it is a file, "
                                       "left as it is."):  # the other flags' words (sweep 23, C8)
    xla_cache.enable(str(tmp_path / "file"))
  assert (tmp_path / "file").read_text() == "a user's file"
  monkeypatch.delenv("TF_XLA_FLAGS")  # the first call set it
  (tmp_path / "d").mkdir()
  (tmp_path / "d" / f".write_check-{os.getpid()}").mkdir()  # the probe cannot be made: the reason alone, no nested
  with pytest.raises(ValueError, match=r"^--xla_cache_dir .*/d cannot be written \(Is a directory\)\. Pass a "
                                       r"writable directory, or leave the flag unset to compile in every run\.$"):
    xla_cache.enable(str(tmp_path / "d"))


def test_too_late_in_a_process_is_a_warning_not_a_silent_no_op(monkeypatch, tmp_path, caplog):
  monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
  tf.constant(1.0)  # this test process's runtime has started
  assert xla_cache.enable(str(tmp_path)) is None
  assert "TensorFlow's runtime has already started in this process" in caplog.text
  assert "TF_XLA_FLAGS" not in os.environ
