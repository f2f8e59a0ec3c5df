"""run_pretrain.py end to end: CLI, kill -9 and exact resume, distributed equals one device, bad flags."""

import functools
import glob
import http.server
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from absl import flags as absl_flags
import numpy as np
import pytest
import tensorflow as tf

from helpers import suite_xla_cache
from xlnet_tf import training
from xlnet_tf.training import runtime

PY = sys.executable
CORPUS = "tests/testdata/data/corpus/*.txt"
SPM = "tests/testdata/data/spm/spiece.model"


def write_records(save_dir, bi_data):
  return subprocess.Popen([PY, "data_utils.py", "--use_tpu=False", "--bsz_per_host=8", "--seq_len=32",
                           "--reuse_len=16", "--num_predict=6", f"--bi_data={bi_data}", "--uncased=False",
                           f"--input_glob={CORPUS}", f"--sp_path={SPM}", f"--save_dir={save_dir}", "--seed=1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def record_dirs(tmp_path_factory):
  """Records from real IMDB text written by our data_utils.py: {"bi": bi_data, "uni": without bi_data}.

  The distributed tests use "uni": with bi_data each replica must get one writer core's [fwd | bwd] rows, so a
  2-replica run and a 1-device run cannot share one bi_data layout.
  """
  root = tmp_path_factory.mktemp("records")
  procs = {name: write_records(root / name, bi) for name, bi in (("bi", True), ("uni", False))}
  for proc in procs.values():
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
  return {name: str(root / name / "tfrecords") for name in procs}


def pretrain_cmd(record_dir, model_dir, *extra):
  return [PY, "run_pretrain.py", f"--record_info_dir={record_dir}", f"--model_dir={model_dir}",
          "--train_batch_size=8", "--seq_len=32", "--reuse_len=16", "--perm_size=8", "--num_predict=6",
          "--mem_len=12", "--n_layer=2", "--d_model=16", "--n_head=2", "--d_head=8", "--d_inner=24",
          "--untie_r=True", "--ff_activation=gelu", "--dropout=0.1", "--dropatt=0.1", "--learning_rate=3e-3",
          "--warmup_steps=5", "--iterations=1", "--save_steps=5", "--seed=7", "--deterministic", *extra]


def checkpoint_values(path):
  reader = tf.train.load_checkpoint(path)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
          if "save_counter" not in n and n != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def kill_9_and_resume(cmd, model_dir, kill_after, final_step):
  """Runs `cmd`, kill -9s it once `model_dir` holds checkpoint `kill_after`, reruns it to the end; returns the
  step it resumed from and the second run's stdout."""
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
  deadline = time.time() + 120
  latest_step = lambda: int((tf.train.latest_checkpoint(str(model_dir)) or "-0").rsplit("-", 1)[1])
  while latest_step() < kill_after and proc.poll() is None and time.time() < deadline:
    time.sleep(0.02)
  os.killpg(proc.pid, signal.SIGKILL)
  proc.wait()
  latest = tf.train.latest_checkpoint(str(model_dir))
  assert latest is not None and not latest.endswith(f"ckpt-{final_step}"), "the kill came too late to test a resume"
  resumed = subprocess.run(cmd, capture_output=True, text=True)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  return int(latest.rsplit("-", 1)[1]), resumed.stdout


@pytest.fixture(scope="module")
def uninterrupted(record_dirs, tmp_path_factory):
  """One uninterrupted 20-step run (bi_data records, the flags of pretrain_cmd): (its ckpt-20, its stdout), the
  reference of the kill -9, SIGTERM and full-disk tests, whose interrupted runs use the same flags (checkpoints
  every 5 steps or not at all: where a run saves does not change its numbers)."""
  model_dir = tmp_path_factory.mktemp("uninterrupted")
  full = subprocess.run(pretrain_cmd(record_dirs["bi"], model_dir, "--train_steps=20"), capture_output=True, text=True)
  assert full.returncode == 0, full.stderr[-3000:]
  return str(model_dir / "ckpt-20"), full.stdout


def assert_same_checkpoint(a_path, b_path):
  a, b = checkpoint_values(a_path), checkpoint_values(b_path)
  assert a.keys() == b.keys() and any("mems" in n for n in a)
  for name in a:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)
  return a


@pytest.mark.slow  # the default suite's 15 minutes; by default: the SIGTERM resume
def test_kill_9_then_resume_is_bit_identical(record_dirs, uninterrupted, tmp_path):
  full_ckpt, full_stdout = uninterrupted
  assert "[20] | gnorm" in full_stdout and "pplx" in full_stdout and "tokens/s" in full_stdout
  with open(os.path.join(os.path.dirname(full_ckpt), "xlnet_config.json")) as f:
    assert json.load(f)["n_token"] == 1000  # the vocabulary of the SentencePiece model, from corpus_info.json

  killed_dir = tmp_path / "killed"
  resumed_step, stdout = kill_9_and_resume(pretrain_cmd(record_dirs["bi"], killed_dir, "--train_steps=20"),
                                           killed_dir, 5, 20)
  assert f"Training from step {resumed_step} to 20" in stdout
  a = assert_same_checkpoint(full_ckpt, str(killed_dir / "ckpt-20"))
  assert any("seed_generator" in n or "rng" in n for n in a)


@pytest.mark.slow
def test_kill_9_then_resume_on_two_replicas_is_bit_identical(record_dirs, tmp_path):
  """--num_core_per_host=2 (2 logical CPUs): the resumed run continues at the right global batch, each replica
  with its own mems rows, and ends bit-identical to an uninterrupted 2-replica run."""
  two = [PY, "tests/helpers/logical_cpus.py", "2"]
  cmd = lambda model_dir: two + pretrain_cmd(record_dirs["uni"], model_dir, "--train_steps=30",
                                             "--num_core_per_host=2", "--bi_data=False")[1:]
  full = subprocess.run(cmd(tmp_path / "full"), capture_output=True, text=True)
  assert full.returncode == 0, full.stderr[-3000:]
  assert "on 2 replica(s)" in full.stdout
  resumed_step, stdout = kill_9_and_resume(cmd(tmp_path / "killed"), tmp_path / "killed", 10, 30)
  assert f"Training from step {resumed_step} to 30 on 2 replica(s)" in stdout
  assert_same_checkpoint(str(tmp_path / "full" / "ckpt-30"), str(tmp_path / "killed" / "ckpt-30"))


def test_sigterm_saves_the_current_step_and_resume_is_bit_identical(record_dirs, uninterrupted, tmp_path):
  # --save_steps=1000: only the stop itself writes a checkpoint before the end.
  records, steps = record_dirs["bi"], ["--train_steps=20", "--save_steps=1000"]
  stopped_dir = tmp_path / "stopped"
  proc = subprocess.Popen(pretrain_cmd(records, stopped_dir, *steps), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True)
  lines = []
  for line in proc.stdout:  # wait until training runs, then preempt it
    lines.append(line)
    if line.startswith("[8] | gnorm"):
      os.killpg(proc.pid, signal.SIGTERM)
      break
  out, err = proc.communicate(timeout=120)
  lines.append(out)
  assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
  stop_line = err.strip().splitlines()[-1]
  assert stop_line.startswith("run_pretrain.py: stopped by SIGTERM at step "), err[-3000:]
  stopped_step = int(stop_line.split(" at step ")[1].split(";")[0])
  assert 8 <= stopped_step < 20
  assert tf.train.latest_checkpoint(str(stopped_dir)).endswith(f"ckpt-{stopped_step}")  # not the last save_steps
  assert "Traceback" not in err

  resumed = subprocess.run(pretrain_cmd(records, stopped_dir, *steps), capture_output=True, text=True)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"Training from step {stopped_step} to 20" in resumed.stdout
  assert_same_checkpoint(uninterrupted[0], str(stopped_dir / "ckpt-20"))


def test_a_pretraining_checkpoint_cleans_to_its_weights_as_released(uninterrupted, tmp_path):
  """convert_checkpoint.py --to=tf1 on a run's ckpt-20 (the original model_utils.py's --clean_input_ckpt): the
  weights alone under the original names, equal to the run's, global_step 0, the run's xlnet_config.json beside them
  byte for byte; a second clean into the same directory is refused and leaves it as it is."""
  import cli  # pylint: disable=import-outside-toplevel
  import convert_checkpoint  # pylint: disable=import-outside-toplevel
  from xlnet_tf import checkpoint  # pylint: disable=import-outside-toplevel
  ckpt, release = uninterrupted[0], tmp_path / "release"
  options = cli.defaults(convert_checkpoint.define_flags, input=ckpt, to="tf1", output_dir=str(release))
  lines = []
  convert_checkpoint.run(options, log_fn=lines.append)
  weights = checkpoint.original_arrays(ckpt)
  cleaned = checkpoint_values(str(release / "xlnet_model.ckpt"))
  assert sorted(cleaned) == sorted([*weights, "global_step"]) and "model/transformer/layer_1/ff/layer_2/kernel" in weights
  assert cleaned["global_step"] == 0
  for name, array in weights.items():
    np.testing.assert_array_equal(cleaned[name], array, err_msg=name)
  with open(os.path.join(os.path.dirname(ckpt), "xlnet_config.json"), "rb") as a, \
       open(release / "xlnet_config.json", "rb") as b:
    assert a.read() == b.read()
  assert sorted(os.listdir(release)) == ["run_flags.json", "xlnet_config.json",
                                         "xlnet_model.ckpt.data-00000-of-00001", "xlnet_model.ckpt.index"]
  # the casing and clamp the tools compare with a run that starts from it (sweep 24, N-B1)
  assert sorted(json.loads((release / "run_flags.json").read_text())) == ["clamp_len", "uncased"]
  assert lines == [f"Wrote {release}/xlnet_model.ckpt ({len(weights)} variables: the weights of {ckpt}, without its "
                   "optimizer state), xlnet_config.json, run_flags.json."]
  before = {name: (release / name).read_bytes() for name in os.listdir(release)}
  with pytest.raises(ValueError, match="already holds a model"):
    convert_checkpoint.run(options, log_fn=lines.append)
  assert {name: (release / name).read_bytes() for name in os.listdir(release)} == before


@pytest.mark.slow  # the default suite's 15 minutes; by default: test_checkpoint.py's resume on other records
def test_a_resume_over_records_that_changed_says_so(record_dirs, tmp_path):
  """data_utils.py rewrote or added records between a run and its resume: the resume went on over them from the
  position its step counts, without a word (its batches are not an uninterrupted run's). It says so; an unchanged
  resume says nothing."""
  import cli  # pylint: disable=import-outside-toplevel
  import run_pretrain  # pylint: disable=import-outside-toplevel
  records = tmp_path / "records"
  shutil.copytree(record_dirs["uni"], records)
  args = dict(record_info_dir=str(records), model_dir=str(tmp_path / "model"), train_batch_size=8, seq_len=32,
              reuse_len=16, perm_size=8, num_predict=6, mem_len=12, n_layer=1, d_model=8, n_head=2, d_head=4,
              d_inner=8, bi_data=False, iterations=1, save_steps=1, seed=7)
  run = lambda steps: [line for line in _lines(run_pretrain.run, cli.defaults(
      run_pretrain.define_flags, train_steps=steps, **args)) if line.startswith("Warning: the records changed")]
  assert run(1) == [] and run(2) == []
  # --mems_reset=auto and --clip_mode=auto (the defaults) resolved to the original's for the strategy: kept as
  # those values, so a resume under a later default compares like with like.
  kept = json.loads((tmp_path / "model" / "run_flags.json").read_text())
  assert (kept["mems_reset"], kept["clip_mode"]) == ("never", "indexed_slices")
  (info,) = glob.glob(str(records / "record_info-*.json"))
  (record,) = glob.glob(str(records / "*.tfrecords"))
  shutil.copy(record, record.replace("train-0-0", "train-1-0"))  # another task's records appear
  shutil.copy(info, info.replace("train-0-0", "train-1-0"))
  json.dump(dict(json.load(open(info)), filenames=[record.replace("train-0-0", "train-1-0")]),
            open(info.replace("train-0-0", "train-1-0"), "w"))
  assert run(3) == [f"Warning: the records changed since the checkpoints in --model_dir were written (1 of 2 files "
                    f"other, added, removed or in another order: "
                    f"{os.path.basename(record).replace('train-0-0', 'train-1-0')}): the resumed run reads them as they "
                    "are now, from the position its step counts in them, so its batches are not those of an "
                    "uninterrupted run."]
  shutil.copytree(records, tmp_path / "moved")  # the same records elsewhere: nothing to say
  args["record_info_dir"] = str(tmp_path / "moved")
  assert run(4) == []


def test_a_resume_on_records_of_another_sentencepiece_model_is_refused(tmp_path):
  """Records written with another SentencePiece model of the same size (their writer files' sp_model_sha256): a
  resume on them went on with only the records-changed warning, every embedding row learned so far standing for
  another piece (sweep 14, B7). run_flags.json keeps the records' sha256; a resume on others is refused, as the
  fine-tuning tools refuse another --spiece_model_file."""
  import cli  # pylint: disable=import-outside-toplevel
  import data_utils  # pylint: disable=import-outside-toplevel
  import run_pretrain  # pylint: disable=import-outside-toplevel
  from xlnet_tf import fileio  # pylint: disable=import-outside-toplevel
  data_utils.create_data(cli.defaults(
      data_utils.define_flags, input_glob=CORPUS.replace("*", "imdb-0"), sp_path=SPM, save_dir=str(tmp_path / "pd"),
      use_tpu=False, bsz_per_host=8, seq_len=32, reuse_len=16, num_predict=6, bi_data=False, uncased=False))
  records = tmp_path / "pd" / "tfrecords"
  args = dict(record_info_dir=str(records), model_dir=str(tmp_path / "model"), train_batch_size=8, seq_len=32,
              reuse_len=16, perm_size=8, num_predict=6, mem_len=12, n_layer=1, d_model=8, n_head=2, d_head=4,
              d_inner=8, bi_data=False, iterations=1, save_steps=1, seed=7)
  _lines(run_pretrain.run, cli.defaults(run_pretrain.define_flags, train_steps=1, **args))
  kept = json.loads((tmp_path / "model" / "run_flags.json").read_text())
  assert kept["spiece_model_sha256"] == fileio.sha256(SPM)
  (writer,) = glob.glob(str(records / "*.writer.json"))
  json.dump(dict(json.load(open(writer)), sp_model_sha256="0" * 64), open(writer, "w"))
  with pytest.raises(cli.FlagError) as error:
    _lines(run_pretrain.run, cli.defaults(run_pretrain.define_flags, train_steps=2, **args))
  assert str(error.value) == (
      f"The checkpoints in --model_dir {tmp_path}/model were trained with other flags (--record_info_dir={records} "
      f"there, {records} here: records of another SentencePiece model (its sha256 differs); {tmp_path}/model/"
      "run_flags.json): the same ids would mean other pieces, and every embedding learned so far another piece. "
      "Pass records written with that run's SentencePiece model (data_utils.py --sp_path), or another --model_dir.")
  assert sorted(p.name for p in (tmp_path / "model").glob("ckpt-*.index")) == ["ckpt-1.index"]


def _lines(run, o):
  from xlnet_tf import training  # pylint: disable=import-outside-toplevel
  lines = []
  run(o, training.make_strategy("one_device"), log_fn=lines.append)
  return lines


def test_an_xla_flag_xla_does_not_know_ends_the_run_before_it_writes_anything(record_dirs, tmp_path):
  """XLA reads XLA_FLAGS at its first compilation and ends the process on a flag it does not know; the run makes
  that happen at its start (`training.read_xla_flags`), not at its first step after the lock and the run files."""
  env = dict(os.environ, XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_no_such_flag=1")
  proc = subprocess.run(pretrain_cmd(record_dirs["bi"], tmp_path / "run"), capture_output=True, text=True, env=env)
  assert proc.returncode != 0 and "Unknown flag in XLA_FLAGS: --xla_no_such_flag=1" in proc.stderr, proc.stderr[-2000:]
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["run_flags.json", pytest.param("xlnet_config.json", marks=pytest.mark.slow)])  # 15 m
def test_a_directory_named_like_a_run_file_is_refused_before_training(record_dirs, tmp_path, name):
  """A directory where the run writes its run files: found at the first save, after every step before it, with a
  bare `[Errno 21] Is a directory` (sweep 27, U12); now one line naming it before anything is trained."""
  (tmp_path / "run" / name).mkdir(parents=True)
  proc = subprocess.run(pretrain_cmd(record_dirs["bi"], tmp_path / "run", "--train_steps=6"), capture_output=True,
                        text=True)
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1] == (
      f"run_pretrain.py: error: --model_dir {tmp_path}/run holds a directory named like the run file "
      f"{tmp_path}/run/{name}: move it away, or pass another --model_dir.")
  assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [name]


def test_ctrl_c_before_training_ends_with_one_line(record_dirs, tmp_path):
  """Ctrl-C while the tool starts (imports: nothing written yet) and while it prepares the run (its --model_dir
  locked, no training loop yet): exit 130, one line, no traceback, no checkpoint and no lock left."""
  for name, started in (("starting", lambda run_dir: time.sleep(1.5) or True),
                        ("preparing", lambda run_dir: (run_dir / ".run.lock").exists())):
    run_dir = tmp_path / name
    proc = subprocess.Popen(pretrain_cmd(record_dirs["bi"], run_dir, "--train_steps=1000"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not started(run_dir) and proc.poll() is None and time.time() < deadline:
      time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT and "Traceback" not in err, (name, err[-3000:])
    assert err.strip().splitlines()[-1].startswith("run_pretrain.py: stopped by SIGINT"), (name, err[-3000:])
    assert not list(run_dir.glob("ckpt-*")) and not (run_dir / ".run.lock").exists()
  assert err.strip().splitlines()[-1].startswith("run_pretrain.py: stopped by SIGINT; files are written whole")


@pytest.mark.slow
def test_kill_9_and_sigterm_with_gradient_accumulation_resume_bit_identical(record_dirs, tmp_path):
  """--gradient_accumulation_steps=2 (bi_data records: micro-batches of 2 forward + 2 backward rows, each with its
  mems rows; dropout on): an update is one step, so a kill -9 loses at most the update in progress and SIGTERM
  saves between updates; both resumed runs end bit-identical to an uninterrupted one."""
  records, steps = record_dirs["bi"], ["--train_steps=20", "--gradient_accumulation_steps=2"]
  full = subprocess.run(pretrain_cmd(records, tmp_path / "full", *steps), capture_output=True, text=True)
  assert full.returncode == 0, full.stderr[-3000:]
  assert "Gradient accumulation: each update sums 2 micro-batches of 4 rows per replica." in full.stdout
  assert "[20] | gnorm" in full.stdout
  killed = tmp_path / "killed"
  resumed_step, stdout = kill_9_and_resume(pretrain_cmd(records, killed, *steps), killed, 5, 20)
  assert f"Training from step {resumed_step} to 20" in stdout
  assert_same_checkpoint(str(tmp_path / "full" / "ckpt-20"), str(killed / "ckpt-20"))
  stopped = tmp_path / "stopped"
  cmd = pretrain_cmd(records, stopped, *steps, "--save_steps=1000")
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
  for line in proc.stdout:
    if line.startswith("[8] | gnorm"):
      os.killpg(proc.pid, signal.SIGTERM)
      break
  _, err = proc.communicate(timeout=120)
  assert proc.returncode == 128 + signal.SIGTERM and "stopped by SIGTERM at step " in err, err[-3000:]
  resumed = subprocess.run(cmd, capture_output=True, text=True)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert_same_checkpoint(str(tmp_path / "full" / "ckpt-20"), str(stopped / "ckpt-20"))


@pytest.mark.slow  # the default suite's 15 minutes; by default: full-disk records (test_bad_input), test_fileio
def test_a_full_disk_while_saving_keeps_the_last_checkpoint(record_dirs, uninterrupted, tmp_path):
  """A checkpoint that cannot be written (here a file-size limit below its size: the write fails as on a full
  disk) ends the run with one line naming it; the previous checkpoint stays the latest, and a rerun resumes from it
  and ends bit-identical to an uninterrupted run."""
  records, run_dir = record_dirs["bi"], tmp_path / "run"
  cmd = pretrain_cmd(records, run_dir, "--train_steps=20")
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
  deadline = time.time() + 120
  while not tf.train.latest_checkpoint(str(run_dir)) and proc.poll() is None and time.time() < deadline:
    time.sleep(0.02)
  os.killpg(proc.pid, signal.SIGKILL)  # a run with checkpoint 5 and 10 still to write
  proc.wait()
  assert tf.train.latest_checkpoint(str(run_dir)).endswith("ckpt-5"), "the kill came too late"
  limit = max(f.stat().st_size for f in run_dir.glob("ckpt-5.data-*")) // 2

  def small_disk():
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG, as ENOSPC would

  # Without the suite's XLA cache: a cold one (this test alone) wrote its programs past the limit, and the run
  # failed compiling, before any checkpoint.
  failed = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=small_disk, env=suite_xla_cache.without())
  assert failed.returncode == 1, failed.stderr[-3000:]
  last = failed.stderr.strip().splitlines()[-1]
  assert last.startswith(f"run_pretrain.py: error: Could not write checkpoint {run_dir}/ckpt-10 ("), last
  assert f"latest complete checkpoint is still {run_dir}/ckpt-5" in last and "Traceback" not in failed.stderr
  assert tf.train.latest_checkpoint(str(run_dir)).endswith("ckpt-5") and not (run_dir / "ckpt-10.index").exists()

  resumed = subprocess.run(cmd, capture_output=True, text=True)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "Training from step 5 to 20" in resumed.stdout
  assert_same_checkpoint(uninterrupted[0], str(run_dir / "ckpt-20"))


@pytest.mark.slow  # the default suite's 15 minutes; by default: the sweep's pt-corrupt-record
def test_a_corrupt_record_file_names_itself(record_dirs, tmp_path):
  records = tmp_path / "records"
  shutil.copytree(os.path.dirname(record_dirs["uni"]), records)
  (path,) = glob.glob(str(records / "tfrecords" / "*.tfrecords"))
  size = os.path.getsize(path)
  with open(path, "r+b") as f:  # flip bytes in the middle: a record whose checksum fails
    f.seek(size // 20)
    f.write(bytes(64))
  result = subprocess.run(pretrain_cmd(str(records / "tfrecords"), tmp_path / "model", "--train_steps=200",
                                       "--bi_data=False", "--save_steps=1"),
                          capture_output=True, text=True)
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith(f"run_pretrain.py: error: Record file {path} is unreadable at record "), result.stderr[-2000:]
  assert "Rewrite the file" in last and "Traceback" not in result.stderr
  latest = tf.train.latest_checkpoint(str(tmp_path / "model"))
  assert latest and f"the latest checkpoint is {latest}." in last  # the last good one stays the latest
  bad_record = int(last.split(" is unreadable at record ")[1].split(" ")[0])

  # --skip_bad_records: the same run trains on the readable part and says what it skipped.
  skipped = subprocess.run(pretrain_cmd(str(records / "tfrecords"), tmp_path / "skip", "--train_steps=20",
                                        "--bi_data=False", "--skip_bad_records"), capture_output=True, text=True)
  assert skipped.returncode == 0, skipped.stderr[-2000:]
  assert (f"--skip_bad_records: {path} is unreadable from record {bad_record} on" in skipped.stdout
          and "skipping the unreadable end of 1 of 1 record files" in skipped.stdout), skipped.stdout[-2000:]
  assert tf.train.latest_checkpoint(str(tmp_path / "skip")).endswith("ckpt-20")


@pytest.mark.slow  # the default suite's 15 minutes; by default: test_locks.py
def test_a_second_run_in_the_same_model_dir_refuses_to_start(record_dirs, tmp_path):
  first = subprocess.Popen(pretrain_cmd(record_dirs["bi"], tmp_path / "model", "--train_steps=100000"),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
  try:
    for line in first.stdout:
      if line.startswith("Training from step"):
        break
    second = subprocess.run(pretrain_cmd(record_dirs["bi"], tmp_path / "model", "--train_steps=10"),
                            capture_output=True, text=True)
  finally:
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
  assert second.returncode == 1
  assert second.stderr.strip().splitlines()[-1] == (
      f"run_pretrain.py: error: --model_dir {tmp_path / 'model'} is in use by process {first.pid} on "
      f"{socket.gethostname()} (lock {tmp_path / 'model' / '.run.lock'}). Wait for it to finish, stop it, or use "
      "another --model_dir.")


def run_worker(strategy, records, model_dir, env=None):
  return subprocess.Popen([PY, "tests/helpers/pretrain_worker.py", strategy, records, str(model_dir)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def finish(proc, timeout=240):
  try:
    out, err = proc.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
  assert proc.returncode == 0, err[-3000:]
  return out


def free_ports(n):
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in socks]
  for s in socks:
    s.close()
  return ports


def test_mirrored_without_a_gpu_is_one_replica_on_the_cpu():
  """--strategy=mirrored on a machine without a GPU (and a CPU not split into replicas, unlike this process's):
  one replica on the CPU, not an error asking for --num_core_per_host=1 when it was 1."""
  script = ("from xlnet_tf import training; s = training.make_strategy('mirrored', 1); "
            "print(type(s).__name__, s.num_replicas_in_sync, s.extended.worker_devices)")
  out = subprocess.run([PY, "-c", script], capture_output=True, text=True, check=True,
                       env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
  assert out.stdout.split()[:2] == ["MirroredStrategy", "1"] and "CPU:0" in out.stdout, out.stdout


@pytest.mark.slow  # the default suite's 15 minutes
def test_a_worker_waiting_for_its_peers_ends_on_ctrl_c_and_one_that_cannot_listen_says_why(tmp_path):
  """A multi-worker run whose other worker never comes waits inside TensorFlow's C++, where no Python handler runs:
  Ctrl-C (and SIGTERM, which TensorFlow's preemption notifier takes) did nothing, a SIGKILL ended it (sweep 26, B2).
  Its port held by another process was a traceback ending `UnknownError: Could not start gRPC server`."""
  script = ("from absl import logging; logging.set_verbosity(logging.INFO); from xlnet_tf import training; "
            "training.make_strategy('multi_worker_mirrored')")
  held = socket.socket()
  held.bind(("0.0.0.0", 0))
  held.listen()
  port, other = held.getsockname()[1], free_ports(1)[0]
  procs = []
  try:
    for first, name in ((port, "held"), (other + 1, "waiting")):
      config = {"cluster": {"worker": [f"localhost:{first}", f"localhost:{other}"]},
                "task": {"type": "worker", "index": 0}}
      log = tmp_path / f"{name}.log"
      with open(log, "w") as f:
        procs.append(subprocess.Popen([PY, "-c", script], stdout=f, stderr=subprocess.STDOUT,
                                      env=dict(os.environ, TF_CONFIG=json.dumps(config))))
      if name == "held":
        assert procs[-1].wait(timeout=120) == 1
        assert (f"ValueError: Cannot start TF_CONFIG's task worker 0 at localhost:{port} (Could not start gRPC "
                "server): another process may hold that port, or the address is not this machine's. Free the port, "
                "or fix TF_CONFIG.") in log.read_text(), log.read_text()[-3000:]
        continue
      deadline = time.time() + 120
      while "Waiting for every worker of TF_CONFIG's cluster (2) to connect; Ctrl-C (SIGINT) ends this one." not in (
          log.read_text()):
        assert time.time() < deadline and procs[-1].poll() is None, log.read_text()[-3000:]
        time.sleep(0.2)
      time.sleep(3)  # inside TensorFlow's wait
      procs[-1].send_signal(signal.SIGINT)
      assert procs[-1].wait(timeout=30) == -signal.SIGINT
  finally:
    held.close()
    for proc in procs:
      if proc.poll() is None:
        proc.kill()


@pytest.mark.slow  # the default suite's 15 minutes; by default: test_optimization's mirrored step
def test_mirrored_and_multi_worker_equal_one_device(record_dirs, tmp_path):
  records = record_dirs["uni"]
  ports = free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
  procs = {"one_device": run_worker("one_device", records, tmp_path / "one"),
           "mirrored": run_worker("mirrored", records, tmp_path / "mirrored")}
  workers = []
  for i in range(2):
    env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
               OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    workers.append(run_worker("multi_worker_mirrored", records, tmp_path / "mwms", env))
  for proc in list(procs.values()) + workers:
    assert "FINAL" in finish(proc)
  reference = checkpoint_values(str(tmp_path / "one" / "ckpt-6"))
  for name in ("mirrored", "mwms"):
    other = checkpoint_values(str(tmp_path / name / "ckpt-6"))
    assert other.keys() == reference.keys()
    moved = 0
    for key, value in reference.items():
      if value.dtype.kind == "f":
        np.testing.assert_allclose(other[key], value, atol=2e-6, rtol=1e-5, err_msg=f"{name}: {key}")
        moved += 1
      else:
        np.testing.assert_array_equal(other[key], value, err_msg=f"{name}: {key}")
    assert moved > 30


ORIGINAL_TRAIN_FLAGS = {  # train.py's 51 flags and defaults (train_gpu.py: a subset; see the README for use_tpu)
    "master": None, "tpu": None, "gcp_project": None, "tpu_zone": None, "use_tpu": False, "num_hosts": 1,
    "num_core_per_host": None, "track_mean": False, "num_passes": 1, "record_info_dir": None, "model_dir": None,
    "init_checkpoint": None, "learning_rate": 1e-4, "clip": 1.0, "min_lr_ratio": 0.001, "warmup_steps": 0,
    "adam_epsilon": 1e-8, "decay_method": "poly", "weight_decay": 0.0, "train_batch_size": 16,
    "train_steps": 100000, "iterations": 1000, "save_steps": None, "max_save": 100000, "seq_len": 0,
    "reuse_len": 0, "uncased": False, "perm_size": None, "bi_data": True, "mask_alpha": 6, "mask_beta": 1,
    "num_predict": None, "n_token": None, "mem_len": 0, "same_length": False, "clamp_len": -1, "n_layer": 6,
    "d_model": 32, "d_embed": 32, "n_head": 4, "d_head": 8, "d_inner": 32, "dropout": 0.0, "dropatt": 0.0,
    "untie_r": False, "summary_type": "last", "ff_activation": "relu", "use_bfloat16": False, "init": "normal",
    "init_std": 0.02, "init_range": 0.1}


def test_every_original_flag_is_accepted_with_its_default():
  from absl import flags as absl_flags
  import run_pretrain
  fv = absl_flags.FlagValues()
  run_pretrain.define_flags(flag_values=fv)
  fv(["run_pretrain.py"])
  assert len(ORIGINAL_TRAIN_FLAGS) == 51
  assert {k: fv[k].value for k in ORIGINAL_TRAIN_FLAGS} == ORIGINAL_TRAIN_FLAGS


@pytest.mark.parametrize("native", [True, False])
def test_bfloat16_on_a_cpu_that_emulates_it_is_warned_about(native, monkeypatch, caplog):
  monkeypatch.setattr(runtime, "cpu_has_native_bfloat16", lambda: native)
  strategy = training.make_strategy("one_device")
  training.warn_if_emulated_bfloat16(True, strategy)
  training.warn_if_emulated_bfloat16(False, strategy)
  warnings = [r.getMessage() for r in caplog.records if "--use_bfloat16" in r.getMessage()]
  assert len(warnings) == (0 if native else 1), warnings


@pytest.fixture
def tf32_default():
  """TF32 on, TensorFlow 2's default (an earlier test in this process may have started a CLI's run, which turns it
  off), and the setting as it was restored after the test."""
  before = tf.config.experimental.tensor_float_32_execution_enabled()
  tf.config.experimental.enable_tensor_float_32_execution(True)
  yield True
  tf.config.experimental.enable_tensor_float_32_execution(before)


def _xla_dot_precisions():
  """The operand precision of each dot in the HLO of an XLA-compiled matmul and einsum (empty: XLA's default)."""
  fn = tf.function(lambda a, q: (tf.matmul(a, a), tf.einsum("bij,bkj->bik", q, q)), jit_compile=True,
                   autograph=False)
  hlo = fn.experimental_get_compiler_ir(tf.ones([3, 3]), tf.ones([2, 3, 4]))(stage="hlo")
  return [re.findall(r"operand_precision=\{[a-z,]*\}", line) for line in hlo.splitlines() if " dot(" in line]


@pytest.mark.parametrize("use_tf32", [False, True])
def test_float32_matmuls_are_strict_unless_tf32_is_asked_for(tf32_default, use_tf32):
  import cli
  import flag_configs
  import run_pretrain
  assert tf32_default  # TensorFlow 2's default, which the original (TF 1.13) did not have
  flag_configs.start(cli.defaults(run_pretrain.define_flags, use_tf32=use_tf32))
  assert tf.config.experimental.tensor_float_32_execution_enabled() == use_tf32
  # XLA (--jit_compile) follows: every float32 dot at HIGHEST precision, or XLA's default with TF32.
  expected = [] if use_tf32 else ["operand_precision={highest,highest}"]
  assert _xla_dot_precisions() == [expected, expected]


def test_a_tpu_keeps_xlas_default_matmul_precision(tf32_default):
  class Tpu(tf.distribute.TPUStrategy):
    def __init__(self):  # pylint: disable=super-init-not-called  # only its type is looked at
      pass

  training.set_float32_matmul_precision(False, Tpu())
  assert tf.config.experimental.tensor_float_32_execution_enabled() == tf32_default
  training.set_float32_matmul_precision(False, training.make_strategy("one_device"))
  assert not tf.config.experimental.tensor_float_32_execution_enabled()


def test_use_tpu_connects_to_the_cloud_tpu_its_flags_name(monkeypatch):
  """--use_tpu with --tpu, --tpu_zone and --gcp_project: start-up resolves that TPU (the resolver is stopped here:
  this machine has none)."""
  import cli
  import flag_configs
  import run_pretrain
  asked = []

  def resolver(**kwargs):
    asked.append(kwargs)
    raise ValueError("no TPU here")
  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)
  with pytest.raises(ValueError, match="no TPU here"):
    flag_configs.start(cli.defaults(run_pretrain.define_flags, use_tpu=True, tpu="grpc://10.0.0.2:8470",
                                    tpu_zone="zone-b", gcp_project="proj"))
  assert asked == [dict(tpu="grpc://10.0.0.2:8470", zone="zone-b", project="proj")]


@pytest.mark.parametrize("value,why", [
    ("", "it is not JSON (Expecting value: line 1 column 1 (char 0))"),
    ("[1, 2]", "it is not a JSON object"),
    ("{}", 'its "cluster" is missing or not a map of task types to address lists'),
    ('{"cluster": {"worker": ["h:1"]}}', 'its "task" is missing or lacks a type and an integer index'),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 3}}',
     "its task worker 3 is not in its cluster of 1 worker"),
])
def test_a_tf_config_that_names_no_cluster_of_this_worker_is_one_line_naming_it(monkeypatch, value, why):
  """TensorFlow's words (`Expecting value: line 1 column 1`, `task_id 3 exceeds the maximum id of worker`) named no
  variable, and `{}` or `[1, 2]` trained one worker alone, exit 0 (sweep 25, B3)."""
  monkeypatch.setenv("TF_CONFIG", value)
  with pytest.raises(ValueError) as e:
    training.make_strategy("multi_worker_mirrored")
  # An index in quotes is TensorFlow's int("1") (it was refused as none; sweep 26, C3).
  assert runtime._tf_config_problem(  # pylint: disable=protected-access
      '{"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": "1"}}') == (None, 2)
  assert str(e.value) == (
      f"TF_CONFIG={value!r} does not describe this worker's cluster: {why}. Set it as {{\"cluster\": {{\"worker\": "
      '["host1:port", ...]}, "task": {"type": "worker", "index": I}} (docs/design.md, Multi-worker), or unset it and '
      "pass another --strategy to train alone.")


def test_a_tf_config_of_several_workers_without_multi_worker_mirrored_is_refused(monkeypatch):
  """A two-worker TF_CONFIG (a TFJob's, set on every pod) with the default --strategy=auto: each pod trained its own
  copy, exit 0, no word (sweep 25, B3). One worker, or none, trains here."""
  cluster = {"worker": ["h:1", "h:2"]}
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
  with pytest.raises(ValueError, match=r"^TF_CONFIG names a cluster of 2 workers, but --strategy=auto trains on this "
                                       r"machine alone: each worker would train its own copy\. Pass "
                                       r"--strategy=multi_worker_mirrored, or unset TF_CONFIG\.$"):
    training.make_strategy("auto")
  assert training.make_strategy("auto", trains=False).num_replicas_in_sync == 1  # a worker's prediction alone
  import cli  # pylint: disable=import-outside-toplevel
  import flag_configs  # pylint: disable=import-outside-toplevel
  import run_classifier  # pylint: disable=import-outside-toplevel
  o = cli.defaults(run_classifier.define_flags, do_train=False, do_predict=True)
  assert flag_configs.start(o).num_replicas_in_sync == 1
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 0}}))
  assert training.make_strategy("auto").num_replicas_in_sync == 1


def test_a_tpu_name_that_cannot_be_looked_up_is_one_line_naming_tpu(monkeypatch):
  """Off GCE, TensorFlow's lookup of a TPU name fails in urllib (the metadata server's or the Cloud TPU API's name
  does not resolve): one line naming --tpu and its value, what could not be reached and what to pass instead."""
  import urllib.error  # pylint: disable=import-outside-toplevel

  def resolver(**kwargs):
    raise urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))
  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)
  with pytest.raises(ValueError) as e:
    training.make_strategy("tpu", cloud_tpu=training.CloudTPU("bogus-name", "us-central1-b"))
  assert str(e.value) == (
      "--tpu=bogus-name: could not reach the Cloud TPU API or the GCE metadata server to look up that TPU name "
      "([Errno -2] Name or service not known). Pass the TPU's address as --tpu=grpc://ip:port, or run on a GCE VM "
      "in the TPU's project (with --tpu_zone and --gcp_project where the TPU is in another zone or project).")
  assert e.value.__suppress_context__


def test_a_tpu_name_without_the_google_api_client_is_one_line(monkeypatch):
  """A TPU's name is looked up through the Cloud TPU API with the Google API client, which TensorFlow does not
  install: its RuntimeError was a traceback."""
  from tensorflow.python.tpu.client import client  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(client, "_GOOGLE_API_CLIENT_INSTALLED", False)
  with pytest.raises(ValueError) as e:
    training.make_strategy("tpu", cloud_tpu=training.CloudTPU("my-tpu", "us-central1-b", "my-project"))
  assert str(e.value) == (
      "--tpu=my-tpu: looking up a TPU by its name needs the Google API client, which this Python lacks. Install it "
      "(pip install cloud-tpu-client), or pass the TPU's address as --tpu=grpc://ip:port (gcloud compute tpus "
      "describe NAME shows it; port 8470).")
  assert e.value.__suppress_context__


def test_a_tpu_address_is_checked_before_tensorflow_connects(monkeypatch):
  """TensorFlow's connection to a TPU worker that is not there, or to a port that takes the connection and never
  answers (a tunnel whose far end is gone), waits for good, deaf to SIGTERM: the address must take a TCP
  connection and answer an HTTP/2 client's first bytes, as TensorFlow's own gRPC server (what a TPU's worker runs)
  does at once (either wait is a line naming it; '' for --tpu=local is not checked), and a server there that is no
  TPU worker is one line too."""
  runtime._check_tpu_reachable("", "--tpu=local")
  master = tf.distribute.Server.create_local_server().target
  runtime._check_tpu_reachable(master, "--tpu=t", timeout_s=10)

  class Resolver:
    def __init__(self, **kwargs):
      pass

    def master(self):
      return master

  def connect(resolver):
    raise tf.errors.UnimplementedError(None, None, "Received http2 header with status: 404\nmore")
  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", Resolver)
  monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", connect)
  with pytest.raises(ValueError) as e:
    training.make_strategy("tpu", cloud_tpu=training.CloudTPU("t"))
  assert str(e.value) == (f"--tpu=t: the server at {master} did not answer as a TPU's worker (Received http2 header "
                          "with status: 404). Check that --tpu names the TPU or its worker's grpc://ip:port (port "
                          "8470).")

  with socket.create_server(("127.0.0.1", 0)) as silent:
    address = f"grpc://127.0.0.1:{silent.getsockname()[1]}"
    with pytest.raises(ValueError) as e:
      runtime._check_tpu_reachable(address, "--tpu=t", timeout_s=1)
  assert str(e.value) == (f"--tpu=t: cannot connect to the TPU at {address} (it took the connection but did not "
                          "answer within 1 s). Check that the TPU is up (gcloud compute tpus list) and that --tpu "
                          "names it or its worker's grpc://ip:port (port 8470).")

  web = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)  # HTTP/1: TensorFlow retried
  threading.Thread(target=web.serve_forever, daemon=True).start()
  address = f"grpc://127.0.0.1:{web.server_address[1]}"
  with pytest.raises(ValueError, match=r"^--tpu=t: cannot connect to the TPU at grpc://127.0.0.1:\d+ \(it answered "
                     r"'<!DOCTYPE'\.\.\., not as a TPU's worker \(a gRPC server\) does\)\. Check that the TPU is up"):
    runtime._check_tpu_reachable(address, "--tpu=t", timeout_s=10)
  web.shutdown()
  web.server_close()

  def no_answer(address, timeout):
    raise socket.timeout("timed out")
  monkeypatch.setattr(socket, "create_connection", no_answer)
  with pytest.raises(ValueError, match=r"^--tpu=t: cannot connect to the TPU at grpc://10.0.0.2:8470 \(no answer "
                     r"within 30 s\)\. Check that the TPU is up"):
    runtime._check_tpu_reachable("grpc://10.0.0.2:8470", "--tpu=t")


@pytest.mark.parametrize("cpu, xla_flags, expected", [
    ({"avx512f", "avx512_bf16"}, None, "--xla_cpu_prefer_vector_width=512"),
    ({"avx512f", "amx_bf16"}, "--xla_dump_to=/d", "--xla_dump_to=/d --xla_cpu_prefer_vector_width=512"),
    ({"avx512f", "avx512_bf16"}, "--xla_cpu_prefer_vector_width=256", "--xla_cpu_prefer_vector_width=256"),
    ({"avx512f"}, None, None),  # AVX-512 without bfloat16 (Skylake-X): 512-bit code lowers its clock
    ({"avx2"}, "--xla_dump_to=/d", "--xla_dump_to=/d"),
])
def test_xla_gets_512_bit_vectors_only_on_cpus_that_pay_nothing_for_them(cpu, xla_flags, expected, monkeypatch):
  monkeypatch.setattr(runtime, "_cpu_flags", lambda: cpu)
  if xla_flags is None:
    monkeypatch.delenv("XLA_FLAGS", raising=False)
  else:
    monkeypatch.setenv("XLA_FLAGS", xla_flags)
  assert runtime.prefer_wide_xla_vectors() == (expected != xla_flags)
  assert os.environ.get("XLA_FLAGS") == expected


WIDE_VECTORS = """
import glob, os, sys
import tensorflow as tf
from xlnet_tf import training
tf.reduce_sum(tf.ones([4])).numpy()  # TensorFlow has run ops; XLA has compiled nothing yet
print(training.prefer_wide_xla_vectors())
tf.function(lambda x: tf.tanh(x) * 2.0 + 1.0, jit_compile=True)(tf.ones([4096])).numpy()
ir = "".join(open(p).read() for p in glob.glob(os.path.join(sys.argv[1], "*.ll")))
print(ir.count("<16 x float>"), ir.count("<8 x float>"))
"""


CPU_FLAGS = runtime._cpu_flags()  # pylint: disable=protected-access


@pytest.mark.skipif(not ("avx512f" in CPU_FLAGS and runtime.cpu_has_native_bfloat16()),
                    reason="prefer_wide_xla_vectors changes nothing on a CPU without AVX-512 and native bfloat16")
def test_the_vector_width_set_after_importing_tensorflow_reaches_xla(tmp_path):
  env = dict(suite_xla_cache.without(), XLA_FLAGS=f"--xla_dump_to={tmp_path}")  # compiled here, not loaded
  out = subprocess.run([PY, "-c", WIDE_VECTORS, str(tmp_path)], capture_output=True, text=True, env=env, check=True)
  applied, wide, narrow = out.stdout.split()
  assert applied == "True"
  assert int(wide) > int(narrow), out.stdout  # XLA's default (256) writes <8 x float> vectors, and no <16 x float>


PAGE_FAULTS = """
import ctypes, resource, sys
from xlnet_tf import training
kept = training.keep_freed_memory() if sys.argv[1] != "default" else None
if sys.argv[1] in ("input", "input_kept"):  # what Trainer.train does: a one-device strategy's input iterator
  import tensorflow as tf
  strategy = training.make_strategy("one_device")
  data = tf.data.Dataset.from_tensors(tf.zeros([2])).repeat()
  iterator = iter(strategy.distribute_datasets_from_function(lambda _: data))
  if sys.argv[1] == "input_kept":
    kept = training.keep_freed_memory_after_input()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
for step in range(2):  # two steps, each holding buffers of growing sizes at once, as a step's tensors; count the 2nd
  before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  buffers = [libc.malloc(mib << 20) for mib in range(17, 32, 2)]
  for mib, buffer in zip(range(17, 32, 2), buffers):
    ctypes.memset(buffer, 1, mib << 20)
  for buffer in buffers:
    libc.free(buffer)
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _page_faults(*modes):
  """{mode: (what keep_freed_memory returned, page faults of the second step)} of PAGE_FAULTS in fresh processes."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
  results = {}
  for mode in modes:
    out = subprocess.run([PY, "-c", PAGE_FAULTS, mode], capture_output=True, text=True, env=env, check=True)
    kept, faults = out.stdout.split()
    results[mode] = (kept, int(faults))
  return results


@pytest.mark.slow  # the default suite's 15 minutes; by default: a CPU-memory setting, measured by bench/memory.py
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="keep_freed_memory tunes glibc's malloc only")
def test_keep_freed_memory_reuses_freed_buffers_instead_of_faulting_them_in_again():
  results = _page_faults("default", "keep")
  assert results["keep"][0] == "True"
  # By default the second step's buffers are fresh mmaps again (~49k 4 KiB faults); kept, the heap reuses them (0).
  assert results["keep"][1] * 4 < results["default"][1], results


@pytest.mark.slow  # the default suite's 15 minutes; by default: a CPU-memory setting, measured by bench/memory.py
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="keep_freed_memory tunes glibc's malloc only")
def test_building_an_input_iterator_undoes_keep_freed_memory_and_the_trainer_makes_it_again():
  # TF 2.21's GeneratorDataset kernel (inside every tf.distribute input iterator) sets mallopt(M_MMAP_THRESHOLD,
  # 128 KiB): ~35k faults in the second step; Trainer.train calls keep_freed_memory_after_input() right after
  # building its iterator (0 faults; tests/test_train_step.py checks that call).
  results = _page_faults("input", "input_kept")
  assert results["input_kept"][0] == "True"
  assert results["input_kept"][1] * 4 < results["input"][1], results


def test_the_run_files_are_written_as_one_set(tmp_path):
  from xlnet_tf import XLNetConfig  # pylint: disable=import-outside-toplevel
  config = XLNetConfig(n_layer=2, d_model=8, n_head=2, d_head=4, d_inner=16, ff_activation="gelu", untie_r=True,
                       n_token=32)
  (tmp_path / "xlnet_config.json").write_text("the run before's")
  (tmp_path / "run_flags.json").mkdir()  # the second file cannot be written: the first must stay as it was
  with pytest.raises(OSError, match="run_flags.json"):
    training.write_run_files(str(tmp_path), config, {"seed": 1})
  assert (tmp_path / "xlnet_config.json").read_text() == "the run before's"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["run_flags.json", "xlnet_config.json"]
  (tmp_path / "run_flags.json").rmdir()
  training.write_run_files(str(tmp_path), config, {"seed": 1})
  assert XLNetConfig(str(tmp_path / "xlnet_config.json")) == config
  assert json.loads((tmp_path / "run_flags.json").read_text()) == {"seed": 1}


def test_model_flags_that_model_config_path_overrides_are_named(monkeypatch):
  """--model_config_path overrides --n_layer, --d_model, ...: one set to another value trained the file's model
  without a word."""
  import cli  # pylint: disable=import-outside-toplevel
  import run_pretrain  # pylint: disable=import-outside-toplevel
  cfg = "tests/testdata/model/ckpt_untied/xlnet_config.json"
  lines = []
  config = run_pretrain.build_xlnet_config(
      cli.defaults(run_pretrain.define_flags, model_config_path=cfg, n_layer=3, d_model=8, n_token=32), lines.append)
  assert config.n_layer == 2
  assert lines == [f"Warning: --n_layer=3 ignored: the model is {cfg}'s (n_layer 2), which overrides the model flags. "
                   "Drop them."]
  lines.clear()
  run_pretrain.build_xlnet_config(cli.defaults(run_pretrain.define_flags, model_config_path=cfg), lines.append)
  assert not lines
  # Given on the command line at its default value (--d_model=32; the file's is 8): named too (sweep 13, R10).
  flag_values = absl_flags.FlagValues()
  run_pretrain.define_flags(flag_values=flag_values)
  flag_values(["run_pretrain.py", f"--model_config_path={cfg}", "--d_model=32", "--n_layer=2"])
  monkeypatch.setattr(cli, "given", functools.partial(cli.given, flag_values=flag_values))
  run_pretrain.build_xlnet_config(cli.values(flag_values), lines.append)
  assert lines == [f"Warning: --d_model=32 ignored: the model is {cfg}'s (d_model 8), which overrides the model "
                   "flags. Drop them."]


def test_a_vocabulary_past_an_hf_init_checkpoint_s_names_its_config(tmp_path):
  """Records of 1000 ids and an HF --init_checkpoint of 32: the line blamed --n_token, which was not given (sweep
  23, C4)."""
  import types  # pylint: disable=import-outside-toplevel
  import cli  # pylint: disable=import-outside-toplevel
  import run_pretrain  # pylint: disable=import-outside-toplevel
  (tmp_path / "corpus_info.json").write_text(json.dumps({"vocab_size": 1000}))
  hf = "tests/testdata/hf/lm_safetensors"
  o = types.SimpleNamespace(model_config_path=None, init_checkpoint=hf, record_info_dir=str(tmp_path))
  with pytest.raises(cli.FlagError, match=f"more than the model's n_token=32 \\(the vocab_size of --init_checkpoint "
                                          f"{hf} \\(its config.json\\)\\). Pass an --init_checkpoint of at least 1000 "
                                          "ids, or records written with its spiece.model.$"):
    run_pretrain.check_vocabulary(o, types.SimpleNamespace(n_token=32), [])
