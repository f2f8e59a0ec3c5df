"""What scripts/check_race.py and scripts/check_squad.py share: reading a golden directory, rows of comparisons,
parts, and the one verdict.

A checker is a dict of parts, name -> `Part(files, check)`: `files(meta)` lists the golden files the part compares
(relative to the golden directory, from its meta.json), `check(golden)` returns a list of `Row`s and reads the
golden directory only through `golden` (a `Golden`), which records the files opened and the npz keys read. `run`
prints each part's rows and its PASS/FAIL, then a count, then exactly `PASS` or `FAIL` as the last line. It FAILs
when
  - no part, or an unknown part, was requested (nothing would be compared),
  - a file a part lists is missing (the part does not run), or the part did not open it,
  - a part raises (the exception's last line is its row) or returns no row,
  - any row fails,
  - on a run of every part: a golden npz beside the files the parts list that no part lists (meta.json names fewer
    settings than the directory holds), or a key of a golden npz that no part read (the goldens hold a number
    nothing compared); not for the files of a part that raised.
"""

if __name__ == "__main__":  # run by its name it did nothing, exit 0
  raise SystemExit("golden_check.py is a library: run scripts/check_race.py or scripts/check_squad.py.")

import argparse
import collections
import contextlib
import json
import os
import sys
import traceback
import zipfile

import numpy as np
from absl import logging

Row = collections.namedtuple("Row", ["label", "max_diff", "ok"])
Part = collections.namedtuple("Part", ["files", "check"])

REL_TOL = 1e-5  # float32 outputs: |diff| <= REL_TOL x max(1, max |golden|), as tests/test_parity.py
CHECKPOINT_SUFFIXES = (".index", ".data-00000-of-00001")


def max_diff(got, want):
  """Largest |got - want| over two arrays: 0.0 when empty, inf when the shapes differ."""
  got, want = np.asarray(got), np.asarray(want)
  if got.shape != want.shape:
    return float("inf")
  if not got.size:
    return 0.0
  return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))


def compare(label, got, want, atol=0.0):
  """A Row: ok when every |got - want| <= atol (0: exact) and the shapes agree."""
  got, want = np.asarray(got), np.asarray(want)
  if got.shape != want.shape:
    return Row(f"{label}: shape {list(got.shape)} vs golden {list(want.shape)}", float("inf"), False)
  diff = max_diff(got, want)
  return Row(label, diff, diff <= atol)


def tolerance(want, rel=REL_TOL):
  """rel x max(1, max |want|)."""
  want = np.asarray(want, np.float64)
  return rel * max(1.0, float(np.max(np.abs(want), initial=0.0)))


def close(label, got, want, rel=REL_TOL):
  """`compare` within `tolerance(want)`, which the label shows."""
  atol = tolerance(want, rel)
  return compare(f"{label} (tol {atol:.1e})", got, want, atol)


class _Npz:
  """The arrays of a golden npz; reading a key (`npz[key]`) records it."""

  def __init__(self, arrays, read):
    self._arrays, self._read = arrays, read
    self.files = list(arrays)

  def __getitem__(self, key):
    self._read.add(key)
    return self._arrays[key]

  def __contains__(self, key):
    return key in self._arrays


class Golden:
  """A golden directory: `meta` (its meta.json) and the files, opened through `path`/`json`/`npz`/`checkpoint`,
  which record what was opened (`opened`) and which npz keys were read (`keys_read`, against `npz_keys`)."""

  def __init__(self, root):
    self.root = root
    with open(os.path.join(root, "meta.json"), encoding="utf-8") as f:
      self.meta = json.load(f)
    self.opened = set()
    self.npz_keys, self.keys_read = {}, collections.defaultdict(set)
    self._npz = {}

  def path(self, rel):
    self.opened.add(rel)
    return os.path.join(self.root, rel)

  def json(self, rel):
    with _naming(rel), open(self.path(rel), encoding="utf-8") as f:
      return json.load(f)

  def npz(self, rel):
    if rel not in self._npz:
      with _naming(rel), np.load(self.path(rel)) as f:
        self._npz[rel] = {k: f[k] for k in f.files}
      self.npz_keys[rel] = set(self._npz[rel])
    self.opened.add(rel)
    return _Npz(self._npz[rel], self.keys_read[rel])

  def checkpoint(self, rel_prefix):
    """The path prefix of a TF checkpoint (its index and data files count as opened)."""
    for suffix in CHECKPOINT_SUFFIXES:
      self.opened.add(rel_prefix + suffix)
    return os.path.join(self.root, rel_prefix)


@contextlib.contextmanager
def _naming(rel):
  """A golden file that cannot be read is named in the part's row (a bare `BadZipFile: File is not a zip file` was)."""
  try:
    yield
  except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    raise ValueError(f"golden file {rel} is unreadable ({type(e).__name__}: {e})") from e


def checkpoint_files(rel_prefix):
  return [rel_prefix + suffix for suffix in CHECKPOINT_SUFFIXES]


def _error_row(e):
  """A FAIL row naming the exception and where it was raised."""
  frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
  where = f" (at {os.path.basename(frame.filename)}:{frame.lineno})" if frame else ""
  message = (str(e).strip().splitlines() or [""])[0]
  return Row(f"raised {type(e).__name__}: {message}{where}", float("inf"), False)


def run(golden_dir, parts, requested, out=None):
  """Runs the requested parts (names of `parts`, in order) on `golden_dir`, prints, returns True on PASS."""
  out = out or sys.stdout
  say = lambda line="": print(line, file=out, flush=True)
  if not requested:
    say(f"FAIL no part requested: nothing compared (choose from {', '.join(parts)})")
    say("FAIL")
    return False
  unknown = [p for p in requested if p not in parts]
  if unknown:
    say(f"FAIL unknown part(s) {', '.join(unknown)} (choose from {', '.join(parts)})")
    say("FAIL")
    return False
  try:
    golden = Golden(golden_dir)
  except (OSError, ValueError) as e:
    say(f"FAIL {golden_dir}/meta.json unreadable: {e}")
    say("FAIL")
    return False
  requested = list(dict.fromkeys(requested))  # a part named twice runs once ("1 of 2 parts passed" read as a FAIL)
  verdicts, listed, compared, raised, num_rows, num_failed = {}, set(), set(), set(), 0, 0
  for name in requested:
    golden.opened = set()
    try:
      files = list(parts[name].files(golden.meta))
    except (KeyError, TypeError, ValueError) as e:
      files, rows = [], [Row(f"meta.json lacks what this part needs: {type(e).__name__} {e}", float("inf"), False)]
    else:
      missing = [f for f in files if not os.path.isfile(os.path.join(golden_dir, f))]
      if missing:
        rows = [Row(f"golden file {f} is missing", float("inf"), False) for f in missing]
      else:
        try:
          rows = list(parts[name].check(golden)) or [Row("no comparison made", float("inf"), False)]
        except Exception as e:  # pylint: disable=broad-except
          rows = [_error_row(e)]
          raised |= set(files)  # the files and keys it did not get to are no second fault
        else:
          unopened = sorted(set(files) - golden.opened)
          if unopened:
            rows.append(Row(f"listed but not compared: {', '.join(unopened)}", float("inf"), False))
    listed |= set(files)
    compared |= set(files) & golden.opened
    say(f"== {name}")
    for label, diff, ok in rows:
      # a row of no comparison (a file not read, a shape) has no difference to show: "max diff inf" read as one
      say(f"  {'ok  ' if ok else 'FAIL'} {label}" + (f": max diff {diff:g}" if diff != float("inf") else ""))
    verdicts[name] = all(ok for _, _, ok in rows)
    num_rows += len(rows)
    num_failed += sum(not ok for _, _, ok in rows)
    say(f"{name}: {'PASS' if verdicts[name] else 'FAIL'}")
  coverage_ok = True
  if requested == list(parts):
    for rel in sorted(_npz_files(golden_dir, {os.path.dirname(f) for f in listed}) - listed):
      coverage_ok = False
      say(f"FAIL golden {rel} is compared by no part (meta.json names less than the directory holds?)")
    for rel in sorted(set(golden.npz_keys) - raised):
      unread = sorted(golden.npz_keys[rel] - golden.keys_read[rel])
      if unread:
        coverage_ok = False
        say(f"FAIL golden {rel} holds keys no part compared: {', '.join(unread)}")
  else:
    say("(a subset of the parts: not checking that every golden npz key was compared)")
  ok = all(verdicts.values()) and coverage_ok and compared == listed
  summary = " ".join(f"{p}={'PASS' if v else 'FAIL'}" for p, v in verdicts.items())
  say(f"{sum(verdicts.values())} of {len(requested)} parts passed ({summary}); {len(compared)} of {len(listed)} "
      f"golden files compared; {num_rows - num_failed} of {num_rows} comparisons ok")
  say("PASS" if ok else "FAIL")
  return ok


def _npz_files(golden_dir, directories):
  """The npz files in `directories` of `golden_dir` (relative to it)."""
  return {os.path.join(d, f) for d in directories if os.path.isdir(os.path.join(golden_dir, d))
          for f in os.listdir(os.path.join(golden_dir, d)) if f.endswith(".npz")}


def golden_dir_problem(golden_dir, what, marker, example):
  """Why --golden_dir `golden_dir` cannot be checked (None if it can): unset, not a directory, or without the file
  `marker` (relative to it) that every directory of `what` holds; the line names `example`, the tests' small one."""
  fix = f"Pass the directory of {what}, such as {example} (the tests' small copy)."
  if not golden_dir:
    return f"--golden_dir is required. {fix}"
  if not os.path.isdir(golden_dir):
    state = "is not a directory" if os.path.exists(golden_dir) else "does not exist"
    return f"--golden_dir {golden_dir} {state}. {fix}"
  if not os.path.exists(os.path.join(golden_dir, marker)):
    return f"--golden_dir {golden_dir} has no {marker}, so it is not a directory of {what}. {fix}"
  return None


class _ArgumentParser(argparse.ArgumentParser):
  """argparse's parser whose usage errors are one line, `{prog}: error: ...`, exit 2 (argparse's own prints its
  usage first)."""

  def error(self, message):
    self.exit(2, f"{self.prog}: error: {message}. Pass --help to see the options.\n")


def main(argv, description, what, parts, verbose_help=None, example=None):
  """A checker's command line: --golden_dir, --parts (and --verbose where `verbose_help` says what it shows); the
  library's log is quiet meanwhile (and the caller's level restored). Returns the exit code (0: PASS, 1: FAIL); a
  --golden_dir that is not a golden directory (`golden_dir_problem`; `example`: a small one) or another usage error
  ends it with one line, exit 2 (SystemExit)."""
  parser = _ArgumentParser(description=description)
  parser.add_argument("--golden_dir", required=True, help=f"Directory of the original's {what} outputs.")
  parser.add_argument("--parts", default=",".join(parts), help=f"Comma-separated subset of {','.join(parts)}.")
  if verbose_help:
    parser.add_argument("--verbose", action="store_true", help=verbose_help)
  args = parser.parse_args(argv)
  problem = golden_dir_problem(args.golden_dir, f"the original's {what} outputs", "meta.json", example)
  if problem:
    parser.exit(2, f"{parser.prog}: error: {problem}\n")
  verbosity = logging.get_verbosity()  # restored: a caller's (a test's) log level is its own
  logging.set_verbosity(logging.INFO if getattr(args, "verbose", False) else logging.ERROR)
  try:
    return 0 if run(args.golden_dir, parts, [p for p in args.parts.split(",") if p]) else 1
  finally:
    logging.set_verbosity(verbosity)
