"""Finding pretraining records: the `record_info` files `data_utils.py` writes, found by the original's file names
(`pretrain_spec.PretrainDataSpec.filename`), with a message that says which naming fields differ when none matches;
and its `corpus_info.json`."""

import json
import os
import re

import tensorflow as tf

from xlnet_tf import fileio


# Naming fields of record_info files, in file-name order: (argument, flag to change).
_NAME_FIELDS = ("split", "bsz_per_host", "seq_len", "reuse_len", "uncased", "bi_data", "mask_alpha", "mask_beta",
                "num_predict")


_NAME_RE = re.compile(
    r"^record_info-(?P<split>[^-.]+)-(?P<task_pass>[^.]*)\.bsz-(?P<bsz_per_host>[^.]+)\.seqlen-(?P<seq_len>[^.]+)\."
    r"(?:reuse-(?P<reuse_len>[^.]+)\.)?(?P<uncased>uncased\.)?(?P<bi_data>bi|uni)\.alpha-(?P<mask_alpha>[^.]+)"
    r"\.beta-(?P<mask_beta>[^.]+)\.(?:fnp-(?P<num_predict>[^.]+)\.)?json$")


def record_info_glob(split, spec):
  """The original's record_info glob of a `PretrainDataSpec`: `record_info-{split}-*.bsz-...[.fnp-N].json`."""
  return spec.filename(f"record_info-{split}-*", "json")


def record_info_task(path):
  """The task number in the name of the record_info file `path` (`record_info-{split}-{task}-{pass}.bsz-...json`);
  None where the name is not the original's."""
  m = _NAME_RE.match(os.path.basename(path))
  task = m and m.group("task_pass").split("-", 1)[0]
  return int(task) if task and task.isdigit() else None


def _name_fields(split, spec):
  """The naming fields of `split` and a `PretrainDataSpec` as the file name spells them (None = field absent)."""
  return {"split": str(split), "bsz_per_host": str(spec.bsz_per_host), "seq_len": str(spec.seq_len),
          "reuse_len": str(spec.reuse_len), "uncased": bool(spec.uncased), "bi_data": bool(spec.bi_data),
          "mask_alpha": str(spec.mask_alpha), "mask_beta": str(spec.mask_beta),
          "num_predict": None if spec.num_predict is None else str(spec.num_predict)}


def _show(field, value):
  if field == "uncased":
    return "uncased" if value else "cased (no 'uncased.')"
  if field == "bi_data":
    return "bi" if value else "uni"
  if field == "reuse_len" and value is None:
    return "None (no 'reuse-')"
  if field == "num_predict":
    return "None (no 'fnp-')" if value is None else f"fnp-{value}"
  return str(value)


def _mismatch_message(record_dir, pattern, asked, batch_flag=None):
  """One line: which record_info files are in `record_dir` and how their naming fields differ from `asked`; the fix
  names the files' bsz_per_host as `batch_flag(bsz_per_host)` says (None: data_utils.py's `--bsz_per_host=N`)."""
  found = [os.path.basename(p) for p in fileio.glob_in(record_dir, "record_info-*.json")]
  head = f"No record_info file in --record_info_dir {record_dir!r} matches {pattern!r}."
  if not found:
    sub = os.path.join(record_dir, "tfrecords")
    if fileio.glob_in(sub, "record_info-*.json"):
      return f"{head} It has no record_info-*.json at all, but {sub!r} does: pass --record_info_dir={sub}."
    return (f"{head} It has no record_info-*.json at all: run data_utils.py and pass its <save_dir>/tfrecords "
            "as --record_info_dir.")
  parts, best = [], None
  for name in found:
    m = _NAME_RE.match(name)
    if m is None:
      parts.append(f"{name} (unparsable name)")
      continue
    have = dict(m.groupdict())
    have["uncased"] = have["uncased"] is not None
    have["bi_data"] = have["bi_data"] == "bi"
    diffs = [f for f in _NAME_FIELDS if have[f] != asked[f]]
    parts.append(f"{name}: " + "; ".join(f"{f}: files have {_show(f, have[f])}, you asked {_show(f, asked[f])}"
                                         for f in diffs))
    if best is None or len(diffs) < len(best[1]):
      best = (have, diffs)
  shown = " | ".join(parts[:5]) + (f"; ... ({len(parts) - 5} more)" if len(parts) > 5 else "")
  fix = ""
  if best is not None:
    flags = []
    for f in best[1]:
      v = best[0][f]
      if f == "split":  # the trainer has no --split to pass (sweep 32, U20)
        continue
      if f == "num_predict" and v is None:
        flags.append("--num_predict=None (unset)")
      elif f == "reuse_len" and v is None:
        flags.append("--reuse_len=None (unset)")
      elif f == "bsz_per_host" and batch_flag is not None and v.isdigit():
        flags.append(batch_flag(int(v)))
      else:
        flags.append(f"--{f}={v}")
    note = " (bsz_per_host is the per-host batch size)" if "bsz_per_host" in best[1] and batch_flag is None else ""
    fix = " Pass the values data_utils.py was run with, e.g. " + " ".join(flags) + note + "." if flags else ""
    if "split" in best[1]:
      fix += (f" The trainer reads the {asked['split']!r} split only: write its records with data_utils.py "
              f"--split={asked['split']}.")
  return f"{head} Found {len(found)} record_info file(s): {shown}.{fix}"


def record_dirs(record_info_dir):
  """The directories of --record_info_dir, a comma-separated list (as the original's); ValueError where the value
  is itself a directory whose name holds a comma and the parts it splits into are not all directories (the parts
  named another corpus, or none)."""
  dirs = [d for d in str(record_info_dir).split(",") if d]
  if len(dirs) > 1 and fileio.isdir(record_info_dir) and not all(fileio.isdir(d) for d in dirs):
    raise ValueError(f"--record_info_dir {record_info_dir!r} is read as a comma-separated list: it was split at its "
                     f"commas into {len(dirs)} directories ({', '.join(repr(d) for d in dirs)}), but it is one "
                     "directory. A directory name in this flag may not hold a comma: rename the directory (or link "
                     "it under a name without one) and pass that.")
  return dirs


def find_record_info(record_info_dir, split, spec, batch_flag=None):
  """Finds the record files written by `data_utils.py` with these settings, as the original `get_input_fn`.

  Globs `record_info-{split}-*.<fmt>.json` (sorted) in each comma-separated directory; each listed file keeps
  only its basename and is looked up in that directory (so a copied record directory still works).

  Args:
    record_info_dir: str, directory (or comma-separated directories) holding `record_info-*.json` and the
      `.tfrecords` files, i.e. data_utils.py's `<save_dir>/tfrecords`.
    split: str, data_utils.py's --split. spec: `PretrainDataSpec`, the data_utils.py flags the records were written
      with (they are part of the file names).
    batch_flag: None, or int -> str: the caller's flag that gives the records' bsz_per_host, for the fix the
      mismatch message suggests (run_pretrain.py: `--train_batch_size=N`); None: data_utils.py's `--bsz_per_host=N`.

  Returns:
    dict with `filenames` (list of str, record files in order), `num_batch` (int, total steps of bsz_per_host
    records), `file_num_batch` (list, steps per file; None where a record_info lists several files) and
    `writers` (list, each file's `writer_info`, read once here).

  Raises:
    FileNotFoundError: a directory or a listed record file does not exist.
    ValueError: a directory named with a comma (`record_dirs`); no record_info file matches (the message lists
      what is there and which fields differ).
  """
  pattern = record_info_glob(split, spec)
  asked = _name_fields(split, spec)
  info = {"filenames": [], "num_batch": 0, "file_num_batch": []}
  dirs = record_dirs(record_info_dir)
  same = [fileio.real_path(d) for d in dirs]
  for i, key in enumerate(same):
    if key in same[:i]:
      raise ValueError(f"--record_info_dir names one directory twice ({dirs[same.index(key)]!r} and {dirs[i]!r}): "
                       "its records would be read twice per epoch. Name each directory once.")
  for record_dir in dirs:
    if not fileio.isdir(record_dir):
      raise FileNotFoundError(f"--record_info_dir {record_dir!r} is not a directory. Pass data_utils.py's "
                              "<save_dir>/tfrecords (comma-separate several directories).")
    paths = fileio.glob_in(record_dir, pattern)
    if not paths:
      raise ValueError(_mismatch_message(record_dir, pattern, asked, batch_flag))
    for path in paths:
      try:
        with tf.io.gfile.GFile(path) as f:
          content = json.load(f)
        if not isinstance(content["filenames"], list):  # a string: read as a list of its characters
          raise TypeError(f"'filenames' is a {type(content['filenames']).__name__}, not a list")
        names, num_batch = list(content["filenames"]), content["num_batch"]
        if type(num_batch) is not int or num_batch < 0:  # pylint: disable=unidiomatic-typecheck  (no bool, 2.5, "3")
          raise TypeError(f"'num_batch' is {num_batch!r}, not a count of batches")  # -1 was read (sweep 32, U20)
      except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"record_info file {path} must be json with 'filenames' and 'num_batch' (as "
                         f"data_utils.py writes); reading it failed: {e!r}. Rewrite it with data_utils.py.") from None
      if not names or len(set(os.path.basename(n) for n in names)) != len(names):
        raise ValueError(f"record_info file {path} lists {'no record file' if not names else 'a record file twice'} "
                         f"({names}): its task's records would be {'left out' if not names else 'read twice'}. "
                         "Rewrite it with data_utils.py.")
      for name in names:
        local = os.path.join(record_dir, os.path.basename(name))
        if not fileio.exists(local):
          raise FileNotFoundError(f"record_info file {path} lists {name!r}, but {local} does not exist. Keep the "
                                  ".tfrecords files next to their record_info file.")
        info["filenames"].append(local)
        info["file_num_batch"].append(num_batch if len(names) == 1 else None)
      info["num_batch"] += num_batch
  twice = sorted({f for f in info["filenames"] if info["filenames"].count(f) > 1})
  if twice:
    raise ValueError(f"Two record_info files in {record_info_dir!r} list {twice[0]}: its records would be read twice "
                     "per epoch. Keep one record_info file per record file (data_utils.py writes one).")
  if info["num_batch"] <= 0 or not info["filenames"]:
    raise ValueError(f"The record_info files matching {pattern!r} in {record_info_dir!r} list no records "
                     f"(num_batch {info['num_batch']}, {len(info['filenames'])} files). Write more text with "
                     "data_utils.py (each row needs at least seq_len + reuse_len tokens).")
  info["writers"] = [writer_info(f) for f in info["filenames"]]
  return info


# Beside each record file, data_utils.py (not the original's) writes `{record file}.writer.json`: how the file was
# written beyond its name and record_info (which stay the original's): num_core_per_host, sp_model_sha256 (of the
# SentencePiece model's bytes), num_task, pass_id and input_files (the text files it read).
WRITER_SUFFIX = ".writer.json"


def writer_info(record_path):
  """The writer file data_utils.py wrote beside the record file `record_path` (a dict), or None: the original's
  records have none. One that cannot be read as a json object is a ValueError: taken as none, it turned the checks
  of `check_writers` off without a word, and a run trained on records of another SentencePiece model (sweep 27, U1).
  """
  path = record_path + WRITER_SUFFIX
  if not fileio.exists(path):
    return None
  info, problem = _json_object(path)
  if problem:
    raise ValueError(f"{path}, which says how data_utils.py wrote the records beside it (their SentencePiece model, "
                     f"--num_core_per_host, --num_task), cannot be read ({problem}). Write the records again with "
                     "data_utils.py, or delete the file to read them unchecked, as the original's.")
  return info


def _json_object(path):
  """(the json object in the file `path`, None) or (None, why it holds none: its read or parse error, or the type of
  json it holds)."""
  try:
    with fileio.open_file(path) as f:
      info = json.load(f)
  except (OSError, ValueError) as e:
    return None, str(e)
  return (info, None) if isinstance(info, dict) else (None, f"a json {type(info).__name__}, not an object")


def check_writers(named_infos, bi_data, ours=None):
  """ValueError where record files that one run would read were written by data_utils.py runs that do not fit
  together, by their writer files (`writer_info`; files without one are not checked): another SentencePiece model
  (the same ids would mean other pieces); with bi_data, another --num_core_per_host (another row layout); a text
  file in two record files of one pass (its text trained on twice: runs of another --num_task into one --save_dir).

  Args:
    named_infos: [(record file, its writer info or None)].
    bi_data: bool, the records' layout.
    ours: the record file of `named_infos` that data_utils.py is about to write (None: all are written).

  Returns:
    Their num_core_per_host where a writer file says it (with bi_data), else None.
  """
  named_infos = [(name, info) for name, info in named_infos if info]
  keys = [("sp_model_sha256", "another SentencePiece model (--sp_path)", "the same ids would mean other pieces")]
  if bi_data:
    keys.append(("num_core_per_host", "another --num_core_per_host", "its bi_data rows are laid out for other cores"))
  for key, what, why in keys:
    first = {}
    for name, info in named_infos:
      if info.get(key) is not None:
        first.setdefault(info[key], name)
    if len(first) > 1:
      (_, a), (_, b) = list(first.items())[:2]
      written = (f"This run would write {b} with {what} than {a} was written with ({a}{WRITER_SUFFIX})" if b == ours
                 else f"Record file {b} was written with {what} than {a} ({b}{WRITER_SUFFIX})")
      raise ValueError(f"{written}: {why}, and a run reads both. Write them with the same data_utils.py flags, or "
                       "keep them in separate directories.")
  seen = {}
  for name, info in named_infos:
    for text in info.get("input_files") or []:
      other = seen.setdefault((info.get("pass_id"), text), name)
      if other != name:
        raise ValueError(f"{text} is in record files {other} and {name} of one pass (their {WRITER_SUFFIX} "
                         "files): its text would be trained on twice (data_utils.py runs of another --num_task into "
                         "one --save_dir?). Delete the records of one of those runs, or write all with one "
                         "--num_task.")
  cores = {info.get("num_core_per_host") for _, info in named_infos} - {None}
  return cores.pop() if bi_data and len(cores) == 1 else None


def missing_tasks(named_infos):
  """{pass_id: (num_task, [task, ...], known)}: the tasks of a data_utils.py --num_task split whose records are not
  among `named_infos` ([(record file, its writer info or None)] of those a run reads), by the writer files of the
  others (`num_task`, `pass_id`; the task is in the record file's name, `{split}-{task}-{pass_id}.bsz-...`). Their
  record_info is missing: a worker that failed or has not run, or one that had no text. Where a writer file gives
  the number of text files of the split (`num_input_files`), the tasks that had none are not listed and `known` is
  True; older writer files do not tell (`known` False). Records without writer files say nothing."""
  found, num_tasks, num_files = {}, {}, {}
  for path, info in named_infos:
    info = info or {}
    parts = os.path.basename(path).split(".", 1)[0].split("-")  # split, task, pass_id
    task = parts[-2] if len(parts) >= 3 else ""
    if not isinstance(info.get("num_task"), int) or not task.isdigit():
      continue
    found.setdefault(info.get("pass_id"), set()).add(int(task))
    num_tasks[info.get("pass_id")] = max(num_tasks.get(info.get("pass_id"), 0), info["num_task"])
    if isinstance(info.get("num_input_files"), int):
      num_files[info.get("pass_id")] = info["num_input_files"]
  missing = {pass_id: sorted(set(range(min(n, num_files.get(pass_id, n)))) - found[pass_id])
             for pass_id, n in num_tasks.items()}
  return {pass_id: (num_tasks[pass_id], tasks, pass_id in num_files) for pass_id, tasks in missing.items() if tasks}


def read_corpus_info(record_dir):
  """data_utils.py's `corpus_info.json` for a records directory (a dict), or None if there is none; one that cannot
  be read as a json object is a ValueError (the vocabulary it holds sets the model's n_token: guessing it would
  train a model of another vocabulary).

  `data_utils.py` writes it in `<save_dir>`, the parent of the `tfrecords/` directory the trainer is given; a copy
  beside the records is found too. `record_dir` may be comma-separated (the first one with a file wins).
  """
  for one_dir in record_dirs(record_dir):
    for path in (os.path.join(one_dir, "corpus_info.json"),
                 os.path.join(os.path.dirname(os.path.normpath(one_dir)), "corpus_info.json")):
      if not fileio.exists(path):
        continue
      info, problem = _json_object(path)
      if info and "vocab_size" in info and (
          not isinstance(info["vocab_size"], int) or isinstance(info["vocab_size"], bool) or info["vocab_size"] < 1):
        problem = f"its vocab_size {info['vocab_size']!r} is not a positive integer"
      if problem:
        raise ValueError(f"{path}, the corpus_info.json data_utils.py wrote with these records, cannot be read "
                         f"({problem}). Write the records again with data_utils.py, or delete the file and pass "
                         "--n_token, the records' vocabulary size.")
      return info
  return None
