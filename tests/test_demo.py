"""scripts/demo.py without running its stages: bad flags end with one line before anything is written, and
demo_settings.json keeps only the settings of stages that wrote something, so a corrected rerun in the same --out
is not refused while a rerun that would mix two runs' data still is."""

import json
import os
import signal
import subprocess
import sys
import time
import types

import pytest

from scripts import demo


@pytest.mark.parametrize("flags,words", [
    (["--seeds=a"], "--seeds must be comma-separated integers, e.g. --seeds=1,2,3. Received: 'a'."),
    (["--num_docs=-3"], "--num_docs must be in [4, 20000]. Received: -3."),
    (["--num_dev=6000"], "--num_dev must be in [1, 5000]. Received: 6000."),
    (["--pretrain_steps=0"], "--pretrain_steps must be at least 1. Received: 0."),
    (["--vocab_size=5"], "--vocab_size must be at least 10. Received: 5."),
    (["--finetune_lr=-1"], "--finetune_lr must be positive. Received: -1.0."),
    (["--pretrain_warmup=10", "--pretrain_steps=10"], "--pretrain_warmup must be at least 0 and below"),
])
def test_bad_flags_are_one_line_before_anything_is_written(tmp_path, flags, words):
  with pytest.raises(SystemExit) as e:
    demo.parse_args([f"--out={tmp_path}/out", *flags])
  assert str(e.value).startswith(f"demo: error: {words}"), e.value
  assert not os.path.exists(tmp_path / "out")


def test_an_out_that_is_a_file_is_refused_and_kept(tmp_path):
  (tmp_path / "notes.txt").write_text("mine")
  proc = subprocess.run([sys.executable, "scripts/demo.py", f"--out={tmp_path}/notes.txt"], capture_output=True,
                        text=True, timeout=120)
  assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1] == (
      f"demo: error: Cannot use --out {tmp_path}/notes.txt as a directory: it is a file, left as it is. Pass a "
      "directory (new, or one this tool wrote).")
  assert (tmp_path / "notes.txt").read_text() == "mine"


def test_settings_are_kept_once_a_stage_wrote_what_depends_on_them(tmp_path, monkeypatch):
  from xlnet_tf.data import corpora  # pylint: disable=import-outside-toplevel
  out = f"--out={tmp_path}/out"
  settings = tmp_path / "out" / "demo_settings.json"

  def failing(out_dir, num_docs, num_files):
    raise OSError("no network")
  monkeypatch.setattr(corpora, "write_pretraining_corpus", failing)
  first = demo.Demo(demo.parse_args([out, "--num_docs=100"]))
  first.check_settings()
  with pytest.raises(OSError):
    first.corpus()
  assert not settings.exists()  # a failed first stage locks nothing: a rerun with other flags may use this --out

  def writing(out_dir, num_docs, num_files):
    os.makedirs(out_dir)
    for i in range(num_files):
      with open(os.path.join(out_dir, f"{i}.txt"), "w") as f:
        f.write("text\n")
  monkeypatch.setattr(corpora, "write_pretraining_corpus", writing)
  second = demo.Demo(demo.parse_args([out, "--num_docs=200"]))
  second.check_settings()
  second.corpus()
  assert json.loads(settings.read_text()) == {"num_docs": 200}
  demo.Demo(demo.parse_args([out, "--num_docs=200", "--vocab_size=500"])).check_settings()  # spm not written yet
  with pytest.raises(SystemExit, match=r"holds a run with other settings \(num_docs: 200 there, 300 now\)"):
    demo.Demo(demo.parse_args([out, "--num_docs=300"])).check_settings()
  second.save_settings("vocab_size")
  assert json.loads(settings.read_text()) == {"num_docs": 200, "vocab_size": 8000}
  with pytest.raises(SystemExit, match=r"vocab_size: 8000 there, 500 now"):
    demo.Demo(demo.parse_args([out, "--num_docs=200", "--vocab_size=500"])).check_settings()


def test_an_empty_out_or_damaged_settings_are_one_line(tmp_path):
  """`--out=` (an unset $OUT) ran the whole demo in the working directory, among the sources; a damaged
  demo_settings.json was a traceback, a json list let a stage run first (sweep 21, D1, D3)."""
  with pytest.raises(SystemExit, match="^demo: error: --out is empty. Pass a directory, or leave --out out for "
                                       "demo_out.$"):
    demo.parse_args(["--out="])
  (tmp_path / "demo_settings.json").write_text("[1, 2]")
  with pytest.raises(SystemExit, match=f"^demo: {tmp_path}/demo_settings.json is damaged \\(not a json object\\): "
                                       "it keeps the settings of the stages done. Use another --out"):
    demo.Demo(demo.parse_args([f"--out={tmp_path}"])).check_settings()
  (tmp_path / "demo_settings.json").write_text('{"num_docs": 2')
  with pytest.raises(SystemExit, match=r"demo_settings.json is damaged \(Expecting"):
    demo.Demo(demo.parse_args([f"--out={tmp_path}"])).check_settings()
  assert sorted(os.listdir(tmp_path)) == ["demo_settings.json"]


_TOOL = """
import signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
print("ready", flush=True)
while not got:
  time.sleep(0.01)
time.sleep(0.2)  # a second signal would come now
print(f"tool: stopped by SIGTERM ({len(got)} signal); saved step 3", flush=True)
sys.exit(143)
"""
_DEMO = """
import sys, time, types
from scripts import demo_stages
stage = types.SimpleNamespace(log=sys.argv[1], prefix="[6/6] fine-tune", t0=time.time(), show=lambda text: None)
demo_stages.run_tool(stage, [sys.executable, "-c", sys.argv[2]], lambda line: None, [])
"""


def test_a_signal_to_the_demo_is_passed_on_once_and_ends_it_with_a_line(tmp_path):
  """SIGTERM to demo.py (kill, a batch system) ended it at once, no line; its tool, left writing to a closed pipe,
  lost its step (sweep 21, D2). The tool gets the signal once, its line is shown, the demo says how to go on."""
  log = tmp_path / "stage.log"
  proc = subprocess.Popen([sys.executable, "-c", _DEMO, str(log), _TOOL], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 60
  while not (log.exists() and "\nready\n" in log.read_text()) and time.time() < deadline:  # the tool's line, not
    # its source in the command the log starts with
    time.sleep(0.02)
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=60)
  assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
  assert out.splitlines()[-2].startswith("[6/6] fine-tune: stopped by SIGTERM after ")
  assert out.splitlines()[-1] == "    tool: stopped by SIGTERM (1 signal); saved step 3"
  assert err.strip().splitlines()[-1] == ("demo: stopped by SIGTERM; the stages done are kept: run the same command "
                                          "again to go on (a training stage resumes from the step it saved).")


def test_a_kill_9_of_the_demo_stops_its_tool_with_sigterm(tmp_path):
  """kill -9 of demo.py left its tool (in a session of its own) training on until its next progress line met the
  closed pipe: up to --iterations steps (sweep 22, N4). The tool gets SIGTERM, as from a batch system: it saves."""
  log, mark = tmp_path / "stage.log", tmp_path / "tool_stopped"
  tool = _TOOL.replace('print(f"tool:', f'open({str(mark)!r}, "w").write(str(got)); print(f"tool:')
  proc = subprocess.Popen([sys.executable, "-c", _DEMO, str(log), tool], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 60
  while not (log.exists() and "\nready\n" in log.read_text()) and time.time() < deadline:
    time.sleep(0.02)
  proc.kill()
  proc.communicate(timeout=60)
  while not mark.exists() and time.time() < deadline:
    time.sleep(0.02)
  assert mark.read_text() == f"[{int(signal.SIGTERM)}]"


def test_a_full_disk_in_the_demo_s_own_stage_is_one_line(tmp_path):
  """The corpus stage on a full disk (here a file-size limit) was a traceback whose last line held its own message
  twice, the reason lost (sweep 21, D4): one line naming the directory and the reason; nothing left but logs/."""
  import resource  # pylint: disable=import-outside-toplevel
  proc = subprocess.run([sys.executable, "scripts/demo.py", f"--out={tmp_path}/d", "--num_docs=100"],
                        capture_output=True, text=True, timeout=120,
                        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000)))
  assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1] == (
      f"demo: error: Could not write {tmp_path}/d/corpus (File too large); nothing was left under that name. Free "
      "space (or fix the directory's permissions) and rerun.")
  assert os.listdir(tmp_path / "d") == ["logs"]


def test_a_relative_out_is_the_caller_s_through_demo_sh(tmp_path, monkeypatch):
  """`cd ~/work && bash xlnet/scripts/demo.sh --out=mydemo` wrote xlnet/mydemo: demo.sh runs from the repository
  (sweep 21, C8). It passes the caller's directory on; an absolute --out stays as it is."""
  monkeypatch.setenv("XLNET_DEMO_CWD", str(tmp_path))
  assert demo.parse_args(["--out=mydemo"]).out == str(tmp_path / "mydemo")
  assert demo.parse_args([f"--out={tmp_path}/abs"]).out == str(tmp_path / "abs")


def test_demo_sh_refuses_a_bad_flag_before_set_up(tmp_path):
  """`demo.sh --num_docs=0` ran setup.sh (a venv, pip installs) before demo.py refused the flag (sweep 22, N10).
  demo.sh is run from a copy of the repository whose setup.sh only leaves a mark."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(demo.__file__)))
  (tmp_path / "scripts").mkdir()
  for name in ("demo.py", "demo_stages.py", "demo.sh"):
    os.symlink(os.path.join(root, "scripts", name), tmp_path / "scripts" / name)
  os.symlink(os.path.join(root, "xlnet_tf"), tmp_path / "xlnet_tf")
  (tmp_path / "scripts" / "setup.sh").write_text(f"touch {tmp_path}/set_up\nexit 1\n")
  proc = subprocess.run(["bash", "scripts/demo.sh", "--num_docs=0"], cwd=tmp_path, capture_output=True, text=True,
                        timeout=60)
  assert proc.returncode == 1 and proc.stderr == "demo: error: --num_docs must be in [4, 20000]. Received: 0.\n"
  assert not (tmp_path / "set_up").exists()
  # --check_flags, the check alone, ran set-up before it (sweep 25, C5)
  proc = subprocess.run(["bash", "scripts/demo.sh", "--check_flags", "--num_docs=8"], cwd=tmp_path,
                        capture_output=True, text=True, timeout=60)
  assert (proc.returncode, proc.stderr) == (0, "")
  assert not (tmp_path / "set_up").exists()


def test_a_damaged_stage_marker_runs_the_stage_again(tmp_path):
  """A damaged logs/<stage>.done.json was a traceback (sweep 22, N6): the stage counts as not done and runs again."""
  from scripts import demo_stages  # pylint: disable=import-outside-toplevel
  stage = types.SimpleNamespace(marker=str(tmp_path / "corpus.done.json"))
  for text in ('{"key": [1], "res', "[1, 2]", '{"key": [1]}'):
    (tmp_path / "corpus.done.json").write_text(text)
    assert demo_stages.Stage.load(stage, [1]) is None
  (tmp_path / "corpus.done.json").write_text('{"key": [1], "result": {"a": 1}}')
  assert demo_stages.Stage.load(stage, [1]) == {"a": 1}


def test_a_signal_in_a_stage_the_demo_runs_itself_ends_it_with_a_line(tmp_path):
  """SIGTERM while the demo writes its corpus (in-process, no tool to pass it to) ended it with no line (sweep 22,
  N12): one line, exit 128 + the signal, and no corpus half-written."""
  proc = subprocess.Popen([sys.executable, "scripts/demo.py", f"--out={tmp_path}/d", "--num_docs=20000"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  assert proc.stdout.readline().startswith("XLNet demo in ")  # the corpus stage starts
  proc.send_signal(signal.SIGTERM)
  _, err = proc.communicate(timeout=60)
  assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
  assert err.strip().splitlines()[-1] == ("demo: stopped by SIGTERM; files are written whole or not at all: run the "
                                          "same command again to go on.")
  assert os.listdir(tmp_path / "d") == ["logs"]
