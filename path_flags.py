"""The path flags of the command-line tools (every flag named `input` or ending in _dir, _file, _path, _glob,
checkpoint or _ckpt): a `~` read as the home directory; a `gs:/` typo, an unreachable remote path, a pipe and a
name that is not UTF-8 refused naming the flag; a HuggingFace hub cache directory read as its model; and the flag
named in the one line of an error on a path. `cli.values()` applies the first two to every flag; `cli.cli_main`
asks `path_error` for the line.

Importing this module has no side effects; it imports TensorFlow (through `xlnet_tf.fileio`) only when a check needs
it.
"""

import errno
import glob
import os
import re
import stat
import sys
import types

from absl import logging

from flags import FlagError


_PATH_FLAG_SUFFIXES = ("_dir", "_file", "_path", "_glob", "checkpoint", "_ckpt")


def is_path_flag(name):
  # absl's --flagfile: `cli.start_script`; train_spm's --model_prefix: a path and a name (its `~` and quotes were kept)
  return name in ("input", "flagfile", "model_prefix") or name.endswith(_PATH_FLAG_SUFFIXES)


def expand_user(name, value):
  """A path flag's `~` (or `~user`) as the user's home, in each comma-separated part: a shell leaves the `~` of
  `--model_dir=~/exp` as it is, and the tools made a directory named `~` in the working directory. FlagError where
  a `~user` names no user (it was left as it is: a directory named `~nouser` was made here)."""
  if not (isinstance(value, str) and "~" in value and is_path_flag(name)):
    return value
  parts = [os.path.expanduser(part) for part in value.split(",")]
  for part in parts:
    if part.startswith("~"):
      user = part[1:].split("/", 1)[0]
      raise FlagError(f"--{name} {part}: there is no user {user!r} whose home '~{user}' would be. Pass the path with "
                      f"the home directory written out, or ./{part} for a directory named '~{user}' here.")
  return ",".join(parts)


_QUOTES = ("\"", "'")  # a tuple: "" (an empty value's first character) is in no tuple, but in every string
_ONE_SLASH = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?!/)")  # two letters at least: C:/x is a Windows drive


def check_path(name, value):
  """FlagError where a comma-separated part of the path flag --{name} is `scheme:/x` (a `gs:/bucket` typo, which
  was written to a local directory named `gs:`), or a remote path whose file system TensorFlow does not have here
  or cannot reach (`fileio.remote_error`; asked once here, so that the line names the flag), or a local pipe or
  device (the tools read an input more than once: data_utils.py lost the first 4 KiB of /dev/stdin's text,
  run_classifier.py kept the digest of an empty SentencePiece model)."""
  if not (isinstance(value, str) and is_path_flag(name)):
    return
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top  (light to import)
  if value[:1] in _QUOTES or value[-1:] in _QUOTES:  # a shell's quotes, kept by a --flagfile
    unquoted = value.strip("".join(_QUOTES))
    raise FlagError(f"--{name}={value}: its quotes would be part of the path (no shell takes them away in a "
                    f"--flagfile line). Write --{name}={unquoted}.")
  for part in value.split(","):
    not_utf8 = fileio.non_utf8_line(part, f"--{name}=")  # TensorFlow's file functions take UTF-8 only, and
    if not_utf8:  # failed naming no flag, data_utils.py after tokenizing the whole corpus
      raise FlagError(not_utf8)
    typo = _ONE_SLASH.match(part)
    if typo:
      scheme, rest = typo.group(1), part[typo.end():]
      meant = f"file:///{rest}" if scheme == "file" else f"{scheme}://{rest}"  # file:// then the absolute path
      raise FlagError(f"--{name} {part}: '{scheme}:/' has one slash, where a remote path has two ({scheme}://...). "
                      f"Pass {meant}, or ./{part} for a local path under a directory named '{scheme}:'.")
    if fileio.is_remote(part):
      try:
        fileio.exists(part)
      except fileio.PathError as e:
        raise FlagError(e.named(f"--{name}")) from None
      continue
    try:
      mode = os.stat(part).st_mode
    except OSError as e:  # not there (yet): said where it is read or written; but a link that loops, which an
      # input flag called "not a directory", "not found" or absl's "ERROR:: ... [Errno 40]" (a glob's files: where read)
      if e.errno == errno.ELOOP and not name.endswith("_glob"):
        try:
          kind = "a directory" if name.endswith("_dir") else "a file" if name.endswith(("file", "_path")) else (
              "a file or directory")  # a checkpoint: a prefix or a directory
          fileio.check_links(part, f"--{name}", kind)
        except fileio.PathError as loop:
          raise FlagError(str(loop)) from None
      continue
    except ValueError:
      continue
    if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)):  # /dev/stdin, <(zcat f), a FIFO
      continue
    if name.endswith("_dir"):
      raise FlagError(f"--{name}={part} is a pipe or a device, not a directory. Pass a directory.")
    example = "cat <(...) > flags.txt" if name == "flagfile" else "zcat corpus.gz > corpus.txt"
    raise FlagError(f"--{name}={part} is a pipe or a device, not a file: the tools read an input more than once (a "
                    "check, then the read), and a stream gives its bytes once. Write it to a file first (e.g. "
                    f"{example}) and pass that.")


def flag_of(options, path):
  """The flag (`--name`) of the options `options` whose path value holds `path` (the value itself, a file in it, or
  a directory above it; the closest wins), or None."""
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  best = None
  for name, value in sorted(vars(options or types.SimpleNamespace()).items()):
    if not (isinstance(value, str) and is_path_flag(name)):
      continue
    for part in filter(None, value.split(",")):  # an empty part would be the working directory, holding all
      rank = 2 if fileio.is_within(path, part) else 1 if fileio.is_within(part, path) else None
      if rank and (best is None or (rank, len(part)) > best[0]):
        best = ((rank, len(part)), f"--{name}")
  return best and best[1]


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")  # [org/]name, as transformers' from_pretrained


def hub_snapshot(name, path):
  """--{name}=path, or the model directory inside it where it is a HuggingFace hub cache directory
  (`hf_checkpoint.hub_snapshot`: ~/.cache/huggingface/hub/models--xlnet--xlnet-base-cased, what `from_pretrained`
  downloaded), with a log line naming it. FlagError for a name like a hub model id (`xlnet-base-cased`,
  `xlnet/xlnet-base-cased`) that is no file here: it was "Checkpoint ... not found" or "--model_config_path is
  required" (sweep 23, C12)."""
  if _HUB_ID.fullmatch(path) and "ckpt" not in path and not os.path.exists(path.split("/")[0]) and not any(
      os.path.exists(path + suffix) for suffix in (".index", ".data-00000-of-00001")):
    raise FlagError(f"--{name}={path} is no file or directory here. If it is a HuggingFace hub model id: these tools "
                    f"do not download; pass the directory of a local copy (huggingface-cli download {path} "
                    f"--local-dir DIR), or its hub cache directory (~/.cache/huggingface/hub/models--"
                    f"{path.replace('/', '--')}).")
  if not os.path.isdir(os.path.join(path, "snapshots")):  # local only: a hub cache is on the user's disk
    models = sorted(glob.glob(os.path.join(glob.escape(path), "models--*"))) if os.path.isdir(path) else []
    if models and not glob.glob(os.path.join(glob.escape(path), "*.index")) and not os.path.exists(
        os.path.join(path, "config.json")):  # the hub's root, no model: it was TF1 checkpoint advice (sweep 30, U7)
      raise FlagError(f"--{name}={path} is a HuggingFace hub cache of {len(models)} model(s) "
                      f"({', '.join(map(os.path.basename, models[:3]))}): pass the one to read, e.g. {models[0]}.")
    return _without_broken_links(name, path, path)
  from xlnet_tf import hf_checkpoint  # pylint: disable=g-import-not-at-top  (light to import)
  snapshot = hf_checkpoint.hub_snapshot(path)
  if snapshot is None:
    return _without_broken_links(name, path, path)
  if not os.listdir(snapshot):  # a download cut short: it was TF1 checkpoint advice (sweep 30, U7)
    raise FlagError(f"--{name}={path} is a HuggingFace hub cache directory whose refs/main names the snapshot "
                    f"{snapshot}, which is empty (a download cut short?). Download the model again, or pass a "
                    "snapshot that holds it.")
  logging.info("--%s %s is a HuggingFace hub cache directory: reading its model %s.", name, path, snapshot)
  return _without_broken_links(name, path, snapshot)


_MODEL_FILE = re.compile(r".*\.(json|safetensors|bin|h5|msgpack|model|index)|.*\.data-\d+-of-\d+")


def _without_broken_links(name, given, path):
  """`path` (the model directory --name=given names); a FlagError where it is a local directory holding a link to
  a model file that is not there (a hub snapshot links into blobs/: a download cut short left config.json dangling,
  reported as "no config.json" or "--model_config_path is required")."""
  try:
    broken = sorted(e.path for e in os.scandir(path) if _MODEL_FILE.fullmatch(e.name) and e.is_symlink()
                    and not os.path.exists(e.path)) if os.path.isdir(path) else []
    target = os.readlink(broken[0]) if broken else ""
  except OSError:  # unreadable: the reader names it
    return path
  if broken:
    more = f" (and {len(broken) - 1} more file(s) there)" if len(broken) > 1 else ""
    raise FlagError(f"--{name}={given}: {broken[0]} is a link to {target}, which does not exist{more}: a download "
                    "cut short? Download the model again, or pass a directory that holds it.")
  return path


def path_error(error, options):
  """The one line of `error` where it is a `fileio.PathError`, or TensorFlow's error on a remote path from code
  that called `tf.io.gfile` itself (`fileio.remote_error`: a file system TensorFlow does not have, or one it cannot
  reach for a path a flag of `options` holds), naming the flag; else None."""
  if "xlnet_tf.fileio" not in sys.modules:
    return None
  from xlnet_tf import fileio  # pylint: disable=g-import-not-at-top
  found = error if isinstance(error, fileio.PathError) else fileio.remote_error(error)
  if found is None:
    return None
  flag = found.what or flag_of(options, found.path)
  if found is not error and flag is None and type(error).__name__ != "UnimplementedError":
    return None  # another error whose message names a URL: not this
  return " ".join(found.named(flag).split())
