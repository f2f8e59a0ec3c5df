"""What a training run keeps in its --model_dir beside its checkpoints: `xlnet_config.json` and `run_flags.json`
(its flags and what it resolved from them), written with its first checkpoint (`write_run_files`), checked and read
by the runs after it (`check_run_files`, `read_run_flags`)."""

import json
import os
import re

from xlnet_tf import checkpoint
from xlnet_tf import fileio
from xlnet_tf.config import PASS_CONFIG, XLNetConfig


def check_run_files(model_dir, xlnet_config, flag="--model_dir"):
  """Before a run restores or reads anything: ValueError if model_dir already holds checkpoints of a model with
  another config than xlnet_config (its `xlnet_config.json` says so: they could not be resumed, and another
  ff_activation would load and compute other numbers); `flag` names model_dir in the message. ValueError too where
  a directory there has the name of a run file: found when the first checkpoint was saved, it lost every step
  before it with a bare `[Errno 21] Is a directory` (sweep 27, U12). ValueError too where it holds another model's
  xlnet_config.json (or one that cannot be read) beside no checkpoint and no run_flags.json: a user's file."""
  fileio.check_file_names(model_dir, ("xlnet_config.json", "run_flags.json"), flag, "run")
  config_path = os.path.join(model_dir, "xlnet_config.json")
  latest = checkpoint.latest_checkpoint(model_dir)
  run_flags = fileio.exists(os.path.join(model_dir, "run_flags.json"))
  if not fileio.exists(config_path):
    if latest and run_flags:  # another ff_activation trained on, exit 0 (sweep 34, R3)
      raise ValueError(f"{flag} {model_dir} holds a run's checkpoints and run_flags.json but not its "
                       "xlnet_config.json (deleted?), which says which model they are: this run's cannot be checked "
                       f"against them. Restore it from a copy of that run, or pass another {flag}.")
    return
  # Without any checkpoint, and without the run_flags.json a run writes with it: a file of the user's, which the run
  # replaced with its own model's config, exit 0 (sweep 33, B3).
  users = not (run_flags or checkpoint.checkpoint_prefixes(model_dir))
  keep = (f"and no checkpoint of a run: the run would replace it with its own. Pass it as --model_config_path to "
          f"train that model, or pass another {flag}.")
  try:
    there = XLNetConfig(json_path=config_path)
  except ValueError as e:  # its advice named --model_config_path, which was passed (sweep 27)
    reason = str(e).removesuffix(PASS_CONFIG).rstrip(".")
    if latest:
      raise ValueError(f"{reason}: it describes the checkpoints in {flag} {model_dir}. Restore it from a copy of "
                       f"that run, or pass another {flag}.") from None
    if users:
      raise ValueError(f"{flag} {model_dir} holds an xlnet_config.json that cannot be read ({reason}) "
                       f"{keep}") from None
    return
  diff = [f"{k} {old} there, {new} here" for k, old, new in there.differences(xlnet_config)]
  if diff and latest:
    raise ValueError(f"{flag} {model_dir} holds checkpoints of another model ({config_path}: "
                     f"{'; '.join(diff)}). Use that config, or pass another {flag}.")
  if diff and users:
    raise ValueError(f"{flag} {model_dir} holds the xlnet_config.json of another model ({'; '.join(diff)}) {keep}")


def write_run_files(model_dir, xlnet_config, flags_dict):
  """`xlnet_config.json` and `run_flags.json` in model_dir (what the original's `config.json` held, and more), written
  as one set (`fileio.atomic_files`: both new or both as before). A CLI writes them once its run has restored or
  initialised its model: a run that fails before (a bad flag, a checkpoint it cannot resume) leaves the files of
  the run before it as they were. Returns a function that puts those back (removes the files where there were
  none), for a run whose first checkpoint then cannot be saved: they describe the checkpoints there."""
  paths = [os.path.join(model_dir, name) for name in ("xlnet_config.json", "run_flags.json")]
  before = {}
  for path in paths:
    if fileio.exists(path):
      with fileio.open_file(path, "rb") as f:
        before[path] = f.read()
  with fileio.atomic_files() as out:
    xlnet_config.to_json(paths[0], write=out.write)
    out.write(paths[1], json.dumps(flags_dict, indent=2, sort_keys=True, default=str))

  def put_back():
    with fileio.atomic_files() as out:
      for path, data in before.items():
        out.write(path, data)
    for path in set(paths) - set(before):
      fileio.remove(path)
  return put_back


# Values whose type a later run relies on: one of another type is damage (it was said to differ from this run's).
_RUN_FLAG_TYPES = (("label_list", "a list", lambda v: isinstance(v, list)),
                   ("spiece_model_sha256", "a sha256",
                    lambda v: isinstance(v, str) and re.fullmatch("[0-9a-f]{64}", v) is not None))


def read_run_flags(directory, use="which this run checks. Restore it from a copy of that run, or pass another "
                                   "--model_dir."):
  """The `run_flags.json` of `write_run_files` in `directory` as a dict; None where there is none (a run of the
  original code). One that is not a json object is a ValueError naming it, and `use` (what reads it, the remedy)."""
  path = os.path.join(directory, "run_flags.json") if directory else None
  if not path or not fileio.exists(path):
    return None
  if fileio.isdir(path):  # it was a bare `[Errno 21] Is a directory` (sweep 23, C7)
    raise ValueError(f"{path} is a directory, not the file of the flags of the run that wrote the checkpoints there, "
                     f"{use}")
  with fileio.open_file(path) as f:
    try:
      flags = json.load(f)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
      flags = e
  # a label_list that is no list (sweep 27), a digest that is no sha256 (sweep 28)
  bad = [f"its {key} {flags[key]!r} is not {what}" for key, what, fits in _RUN_FLAG_TYPES
         if isinstance(flags, dict) and flags.get(key) is not None and not fits(flags[key])]
  if not isinstance(flags, dict) or bad:
    problem = (flags if isinstance(flags, ValueError) else bad[0] if bad else
               f"a json {type(flags).__name__}, not an object")
    raise ValueError(f"{path} is damaged ({problem}): it records the flags of the run that wrote the checkpoints "
                     f"there, {use}")
  return flags
