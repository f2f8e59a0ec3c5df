"""scripts/check_race.py and scripts/check_squad.py: PASS on the tests' copies of the goldens, FAIL (last line
exactly FAIL, exit code 1) on a copy with a prediction, a logit or a setting changed, a file removed, a key added,
or an empty part list."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

GOLDENS = {"race": "tests/testdata/race", "squad": "tests/testdata/squad"}


def _load(name):
  spec = importlib.util.spec_from_file_location(name, f"scripts/{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope="module")
def checkers():
  return {"race": _load("check_race"), "squad": _load("check_squad")}


def _run(checkers, capsys, task, golden_dir, parts=None):
  """(exit code, printed lines) of the checker's main()."""
  argv = ["--golden_dir", str(golden_dir)] + ([] if parts is None else ["--parts", parts])
  code = checkers[task].main(argv)
  return code, capsys.readouterr().out.splitlines()


def _copy(task, tmp_path):
  dst = tmp_path / task
  shutil.copytree(GOLDENS[task], dst)
  return dst


def _edit_npz(path, edit):
  with np.load(path) as f:
    arrays = {k: f[k] for k in f.files}
  edit(arrays)
  np.savez(path, **arrays)


def _edit_json(path, edit):
  with open(path, encoding="utf-8") as f:
    obj = json.load(f)
  edit(obj)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(obj, f, indent=4)


@pytest.mark.parametrize("task", ["race", pytest.param("squad", marks=pytest.mark.slow)])  # slow: 15 minutes
def test_untampered_copy_passes(checkers, capsys, tmp_path, task):
  code, lines = _run(checkers, capsys, task, _copy(task, tmp_path))
  assert (code, lines[-1]) == (0, "PASS"), "\n".join(l for l in lines if "FAIL" in l)
  assert not any(l.lstrip().startswith("FAIL") for l in lines)


def _add(arrays, key, index, delta):
  arrays[key] = arrays[key].copy()
  arrays[key][index] += delta


def _bump_letter(obj):
  first = next(iter(obj))
  obj[first] = obj[first] + "x"


# (task, what, parts, tamper(golden copy), a line that must FAIL)
TAMPERINGS = [
    ("race", "a prediction (eval_accuracy) changed", "predict",
     lambda d: _edit_npz(d / "head/eval.npz", lambda a: a.update(eval_accuracy=np.float32(0.25))), "eval_accuracy"),
    ("race", "a logit changed", "predict",
     lambda d: _edit_npz(d / "head/eval.npz", lambda a: _add(a, "logits", (3, 2), 1e-3)), "Inference logits"),
    ("race", "a file dropped", "features",
     lambda d: os.remove(d / "features/L48_QA10_uncased_dev.npz"), "L48_QA10_uncased_dev.npz is missing"),
    ("race", "an article file dropped", "predict",
     lambda d: os.remove(d / "data/dev/high/204.txt"), "204.txt is missing"),
    ("race", "meta.json names one setting of the two the directory holds", "features,head,predict",  # sweep 21, G2
     lambda d: _edit_json(d / "meta.json", lambda m: m.update(settings=m["settings"][:1])),
     "golden features/L48_QA10_uncased_dev.npz is compared by no part"),
    ("race", "a setting changed", "features",
     lambda d: _edit_json(d / "meta.json", lambda m: m["settings"][1].update(max_qa_length=9)), "input_ids"),
    ("squad", "a prediction changed", "predictions,predict",
     lambda d: _edit_json(d / "predictions/predictions.json", _bump_letter), "predictions.json"),
    ("squad", "a logit changed", "predict",
     lambda d: _edit_npz(d / "head/predict.npz", lambda a: _add(a, "cls_logits", 7, 1e-3)), "cls_logits"),
    ("squad", "a file dropped", "predictions",
     lambda d: os.remove(d / "predictions/null_odds.json"), "null_odds.json is missing"),
    ("squad", "a setting changed", "crafted",
     lambda d: _edit_json(d / "meta.json", lambda m: m["flags"].update(n_best_size=4)), "nbest_predictions.json"),
]


SLOW_TAMPERINGS = (("squad", "a prediction changed"), ("squad", "a logit changed"))  # the default suite's 15 minutes


@pytest.mark.parametrize("task,what,parts,tamper,failing",
                         [pytest.param(*t, marks=pytest.mark.slow) if t[:2] in SLOW_TAMPERINGS else t
                          for t in TAMPERINGS], ids=[f"{t[0]}: {t[1]}" for t in TAMPERINGS])
def test_tampered_copy_fails(checkers, capsys, tmp_path, task, what, parts, tamper, failing):
  del what
  golden = _copy(task, tmp_path)  # untampered, it passes (test_untampered_copy_passes)
  tamper(golden)
  code, lines = _run(checkers, capsys, task, golden, parts)
  assert (code, lines[-1]) == (1, "FAIL"), "\n".join(lines)
  assert any(l.lstrip().startswith("FAIL") and failing in l for l in lines), "\n".join(lines)


@pytest.mark.parametrize("task", ["race", "squad"])
@pytest.mark.parametrize("parts", [",", "", "nope"])
def test_empty_or_unknown_part_list_fails(checkers, capsys, task, parts):
  code, lines = _run(checkers, capsys, task, GOLDENS[task], parts)
  assert (code, lines[-1]) == (1, "FAIL")


@pytest.mark.parametrize("task", ["race", "squad"])
def test_unreadable_meta_fails(checkers, capsys, tmp_path, task):
  (tmp_path / "meta.json").write_text("{")
  code, lines = _run(checkers, capsys, task, tmp_path, "features")
  assert (code, lines[-1]) == (1, "FAIL") and "meta.json unreadable" in lines[0]


@pytest.mark.parametrize("task", ["race", "squad"])
def test_a_golden_dir_that_is_none_is_one_line_and_exit_2(checkers, capsys, tmp_path, task):
  """--golden_dir missing, a file, a directory without meta.json, or not given: one line on stderr naming it and
  the tests' copy, exit 2, nothing compared (a missing one was `FAIL .../meta.json unreadable: [Errno 2] ...`, exit
  1; argparse printed its usage before its line)."""
  (tmp_path / "file").write_text("")
  for argv, words in ((["--golden_dir", str(tmp_path / "nope")], f"--golden_dir {tmp_path}/nope does not exist. "),
                      (["--golden_dir", str(tmp_path / "file")], f"--golden_dir {tmp_path}/file is not a directory. "),
                      (["--golden_dir", str(tmp_path)], f"--golden_dir {tmp_path} has no meta.json"),
                      ([], "the following arguments are required: --golden_dir. ")):
    with pytest.raises(SystemExit) as e:
      checkers[task].main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and not out and len(err.splitlines()) == 1, (out, err)
    assert ": error: " + words in err, err
    assert not argv or f"such as {GOLDENS[task]} (the tests' small copy)." in err, err


def test_an_unreadable_golden_file_is_named_once_and_a_part_named_twice_runs_once(checkers, capsys, tmp_path):
  """A golden npz cut short was `raised BadZipFile: File is not a zip file`, naming no file, and the keys its part
  did not get to read were a second FAIL; `--parts=head,head` said "1 of 2 parts passed" under PASS (sweep 21, G1)."""
  golden = _copy("race", tmp_path)
  code, lines = _run(checkers, capsys, "race", golden, "head,head")
  assert (code, lines[-2:]) == (0, ["1 of 1 parts passed (head=PASS); 4 of 4 golden files compared; 3 of 3 "
                                    "comparisons ok", "PASS"])
  os.truncate(golden / "head/eval.npz", 100)
  code, lines = _run(checkers, capsys, "race", golden)
  fails = [l.strip().partition(" (at ")[0] for l in lines if l.strip().startswith("FAIL")]
  assert code == 1 and fails == 2 * ["FAIL raised ValueError: golden file head/eval.npz is unreadable (BadZipFile: "
                                     "File is not a zip file)"] + ["FAIL"], "\n".join(lines)


def test_a_golden_key_no_part_compares_fails(checkers, capsys, tmp_path):
  golden = _copy("race", tmp_path)
  _edit_npz(golden / "head/eval.npz", lambda a: a.update(start_logits=np.zeros([10], np.float32)))
  code, lines = _run(checkers, capsys, "race", golden)
  assert (code, lines[-1]) == (1, "FAIL")
  assert "FAIL golden head/eval.npz holds keys no part compared: start_logits" in lines


@pytest.mark.slow  # the default suite's 15 minutes; by default: the tampered copies' FAIL rows, in process
@pytest.mark.parametrize("task", ["race", "squad"])
def test_cli_prints_fail_last_and_exits_nonzero(task):
  proc = subprocess.run([sys.executable, f"scripts/check_{task}.py", "--golden_dir", GOLDENS[task], "--parts", ","],
                        capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 1 and proc.stdout.splitlines()[-1] == "FAIL", proc.stdout + proc.stderr


@pytest.mark.parametrize("command, words", [
    (["scripts/step_parity.py", "--golden_dir=x"], "step_parity.py is a library: run scripts/check_train_step.py."),
    (["scripts/golden_check.py"], "golden_check.py is a library: run scripts/check_race.py or scripts/check_squad.py."),
    (["scripts/demo_stages.py"], "demo_stages.py is a library: run scripts/demo.sh."),
    (["-m", "xlnet_tf.convert", "--input=x"], "xlnet_tf.convert is library code, not a tool: run convert_checkpoint"),
    (["-mxlnet_tf.hf_export"], "xlnet_tf.hf_export is library code, not a tool: run convert_checkpoint.py"),
    (["-m", "xlnet_tf.checkpoint"], "xlnet_tf.checkpoint is library code, not a tool: run one of run_pretrain.py,")])
def test_a_library_run_by_its_name_says_what_to_run(command, words):
  """Run by its name (docs call step_parity.py "the checker"), a library did nothing and exited 0 (sweeps 21-22, M1,
  N9)."""
  proc = subprocess.run([sys.executable, *command], capture_output=True, text=True, timeout=60)
  assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith(words), proc.stderr[-2000:]
