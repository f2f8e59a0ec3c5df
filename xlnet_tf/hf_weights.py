"""Reading the weights of a HuggingFace XLNet model directory: `model.safetensors` (or shards), `pytorch_model.bin`
(or shards; read without torch: `torch_pickle`) or `tf_model.h5` (transformers' TF classes), every format into
PyTorch names and layouts (`transformer.layer.0.ff.layer_1.weight` [d_inner, d_model]) for `hf_checkpoint`'s name
map."""

import json
import os
import re
import signal

import numpy as np

from xlnet_tf import child_call
from xlnet_tf import fileio
from xlnet_tf import torch_pickle

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "tf_model.h5")


def _read_safetensors(path):
  from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  try:
    weights = load_file(path)
  except Exception as e:  # pylint: disable=broad-except  (SafetensorError, or an OSError of a cut file)
    # "module 'numpy' has no attribute 'float8_e4m3fn'", said as a damaged file (sweep 25, C5)
    if isinstance(e, AttributeError) and (found := _numpy_less_dtype(path)):
      raise ValueError(f"{path} holds {found[0]} in {found[1]}, a dtype numpy (and so these tools) cannot read; "
                       "the file is fine. Save the model in float32, bfloat16 or float16 (e.g. transformers: "
                       "model.to(torch.float16).save_pretrained(DIR)) and pass that.") from None
    raise ValueError(fileio.lfs_pointer_line(path) or f"{path} is not a readable safetensors file "
                     f"({' '.join(str(e).split())[:160]}). Download it again.") from None
  if tf_names := [name for name in weights if "/" in name]:  # "config.json does not match" (sweep 30, U9)
    raise ValueError(f"{path} holds weights under transformers' TensorFlow names ({tf_names[0]}, ...): it was saved "
                     "by its TF classes. Save the model with its PyTorch class (save_pretrained), or pass its "
                     "tf_model.h5, which the tools read.")
  return weights


def _numpy_less_dtype(path):
  """(name, dtype) of the first tensor of the safetensors file `path` in a float8 (or smaller float) dtype, which
  safetensors.numpy reads through a numpy type numpy lacks (fp8 models: `F8_E4M3`); None where there is none."""
  try:
    with fileio.open_file(path, "rb") as f:
      header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    small = [(name, t["dtype"]) for name, t in header.items() if str(t.get("dtype", "")).startswith(("F8", "F6", "F4"))]
    return small[0] if small else None
  except (OSError, ValueError, AttributeError, MemoryError):
    return None


_H5_LAYER = re.compile(r"/layer_\._(\d+)/")


# How long reading a tf_model.h5 may take (seconds: a floor, and one more per this many bytes) before it is taken for
# a damaged file's endless loop (`_read_h5`). XLNet-Large's 1.4 GB: 4 min.
H5_SECONDS, H5_BYTES_PER_SECOND = 120, 10 << 20


def _h5_weights(path):
  """Yields (PyTorch name, array) for each weight of the tf_model.h5 `path` (transformers' TF classes, Keras 2
  `save_weights`), in PyTorch layouts; OSError or KeyError where the file is damaged."""
  import h5py  # pylint: disable=import-outside-toplevel
  with h5py.File(path, "r") as f:
    for layer in f.attrs["layer_names"]:
      group = f[layer]
      for name in group.attrs["weight_names"]:
        name = name.decode() if isinstance(name, bytes) else name
        if group[name].size and not group[name].id.get_storage_size():  # never written: GBs of its fill value
          raise OSError(f"{name} of shape {list(group[name].shape)} holds no data")
        array = np.asarray(group[name])
        tf_name = name.split("/", 1)[1].rsplit(":", 1)[0]  # drop the model's scope and `:0`
        parts = _H5_LAYER.sub(r"/layer.\1/", tf_name).split("/")
        last = parts[-1]
        if last == "kernel":
          parts[-1], array = "weight", array.T
        elif last in ("gamma", "beta"):
          parts[-1] = "weight" if last == "gamma" else "bias"
        yield ".".join(parts), array


def _read_through_h5(path):
  """Reads every weight of the tf_model.h5 `path` and drops it: `_read_h5`'s trial, in a child process."""
  for _ in _h5_weights(path):
    pass


def _require_file(path):
  """ValueError where the local weights file `path` is a directory (said to be a damaged download; sweep 33, A12)
  or another thing that is not a regular file."""
  if not fileio.is_remote(path) and not os.path.isfile(path):
    what = "a directory, not a file" if os.path.isdir(path) else "not a regular file"
    raise ValueError(f"{path} is {what}. Put the model's {os.path.basename(path)} there.")


def _read_h5(path):
  """tf_model.h5 -> {PyTorch name: array}. The file is read through in a child process first (`child_call`): HDF5
  loops for ever in some damaged files, in C code that neither Ctrl-C nor SIGTERM stopped (sweep 28, A5); that read
  has `H5_SECONDS` and a crash there is a line too. Then it is read here (from the page cache). What is not the
  file's fault (h5py missing or broken, the child killed for memory) says so, without "Download it again"."""
  _require_file(path)  # a named pipe: the read waited out its time limit
  limit = H5_SECONDS + fileio.size(path) / H5_BYTES_PER_SECOND
  try:
    child_call.call(_read_through_h5, path, "reading it", timeout=limit)
    return dict(_h5_weights(path))
  except child_call.ChildError as e:
    if e.kind in ("ImportError", "ModuleNotFoundError", "MemoryError") or e.signum == signal.SIGKILL:
      raise ValueError(f"Cannot read {path} ({e}): the file may be whole. Fix that and rerun.") from None
    reason = e
  except TimeoutError as e:  # or a disk slower than H5_BYTES_PER_SECOND
    reason = f"{e}: HDF5 loops for ever in some damaged files; if the disk is slow, copy the model to a local one"
  except (OSError, KeyError) as e:
    reason = e
  raise ValueError(fileio.lfs_pointer_line(path) or f"{path} is not a readable tf_model.h5 "
                   f"({' '.join(str(reason).split())[:240]}). Download it again.") from None


def _read_weight_map(index):
  """The `weight_map` of a shard index json ({weight name: shard file name in the same directory}); a ValueError
  naming the file where it is not one (another shape, or a shard named by a path, which could lie outside)."""
  try:
    with fileio.open_file(index) as f:
      weight_map = json.load(f)["weight_map"]
  except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as e:
    raise ValueError(f"{index} is not a valid shard index ({type(e).__name__}: {e}). Download it again.") from None
  if not isinstance(weight_map, dict) or not all(
      isinstance(n, str) and isinstance(s, str) and s and s == os.path.basename(s) and s not in (".", "..")
      for n, s in weight_map.items()):
    raise ValueError(f"{index} is not a valid shard index (its weight_map must map weight names to the file names "
                     "of shards beside it). Download it again.")
  if not weight_map:  # it was "config.json does not match the weights: the weights hold layers []" (sweep 25, C5)
    raise ValueError(f"{index} is not a valid shard index (its weight_map is empty: it names no weight and no "
                     "shard). Download it again.")
  return weight_map


_SHARD = re.compile(r"^(model|pytorch_model)-\d+-of-\d+\.(safetensors|bin)$")


def check_size(xlnet_config, directory, source):
  """xlnet_config, or a ValueError where its backbone has more weights than the weight files of the HF model
  `directory` hold at 2 bytes each (bfloat16's): the config of another model, which a tool built before it read a
  weight (n_layer 200000 over 2 layers' weights: minutes and GBs without a line)."""
  held = sum(fileio.size(path) for path in fileio.glob_in(directory, "*")  # a glob: a stray file named in another
             if os.path.basename(path) in WEIGHT_FILES or _SHARD.match(os.path.basename(path)))  # encoding is let be
  if held and 2 * xlnet_config.num_weights() > held:
    read_weights(directory)  # weights cut short, or Git LFS pointers: their own line (they were blamed on the config)
    raise ValueError(f"{source}: config.json describes a model of {xlnet_config.num_weights():,} weights, more than "
                     f"its weight files' {held:,} bytes hold: the config of another model. Use the config.json that "
                     "came with the weights.")
  return xlnet_config


def read_weights(directory):
  """({HF name: numpy array} in PyTorch names and layouts, the file read) of an HF model directory; the first of
  safetensors, sharded safetensors, pytorch_model.bin (sharded), tf_model.h5 that it holds. The weights of
  transformers' base class (`XLNetModel.save_pretrained`: `layer.0.ff...`, no head) take the heads' names
  (`transformer.layer.0.ff...`), as transformers reads them."""
  weights, source = _read_weights(directory)
  if "word_embedding.weight" in weights and not any(name.startswith("transformer.") for name in weights):
    weights = {f"transformer.{name}": array for name, array in weights.items()}
  return weights, source


def unread_note(directory, weights_file):
  """Where `directory` holds other weights files than the one `read_weights` read (`weights_file`, as it names it),
  a clause naming them, for an error about the weights read (the others may be the model's); else "". The file
  read is the first of `WEIGHT_FILES` there: `_read_weights` tries them in that order, transformers'."""
  read, *unread = [name for name in WEIGHT_FILES if fileio.exists(os.path.join(directory, name))]
  return (f"{directory} also holds {', '.join(unread)}, not read: {weights_file} comes first in transformers' order. "
          f"If those are the model's weights, move {read} away." if unread else "")


def _read_weights(directory):
  for name, reader in (("model.safetensors", _read_safetensors), ("pytorch_model.bin", torch_pickle.load)):
    path = os.path.join(directory, name)
    if fileio.exists(path):
      _require_file(path)
      return reader(path), name
    index = path + ".index.json"
    if fileio.exists(index):
      weight_map = _read_weight_map(index)
      weights = {}
      for shard in sorted(set(weight_map.values())):  # all first: one missing was blamed on two downloads (A11)
        if not fileio.exists(os.path.join(directory, shard)):
          raise ValueError(f"{index} names {shard}, which is not in {directory}. Download every shard.")
      for shard in sorted(set(weight_map.values())):
        shard_path = os.path.join(directory, shard)
        _require_file(shard_path)
        held = reader(shard_path)
        lacking = [n for n, s in weight_map.items() if s == shard and n not in held]
        if lacking:
          raise ValueError(f"{shard_path} lacks {', '.join(sorted(lacking)[:3])}, which {index} places there: the "
                           "shard is another one or damaged. Download it again.")
        elsewhere = sorted(n for n in held if weight_map.get(n, shard) != shard)  # the later shard won, unsaid
        if elsewhere:
          raise ValueError(f"{shard_path} holds {elsewhere[0]}, which {index} places in {weight_map[elsewhere[0]]}: "
                           "shards of two downloads? Download the model again into an empty directory.")
        weights.update(held)
      shards = len(set(weight_map.values()))
      return weights, f"{name} ({shards} shard{'s' if shards != 1 else ''})"
  path = os.path.join(directory, "tf_model.h5")
  if fileio.exists(path):
    return _read_h5(path), "tf_model.h5"
  raise FileNotFoundError(f"{directory} holds no XLNet weights (none of {', '.join(WEIGHT_FILES)}).")


def float32_weight(name, array, source, shape=None):
  """`array`, the weight `name` of the weights file `source`, as float32; a ValueError naming them where it is not
  of a floating-point type, not of `shape` (a list; None: any), or holds NaN or infinity (`check_finite`)."""
  array = np.asarray(array)
  if array.dtype.kind != "f" and array.dtype.name != "bfloat16":
    raise ValueError(f"{source}: {name} holds {array.dtype} values, not floating-point weights: the weights file is "
                     "damaged or not a model's. Download it again.")
  if shape is not None and list(array.shape) != list(shape):
    raise ValueError(f"{source}: {name} has the shape {list(array.shape)}, where the model of its config.json has "
                     f"{list(shape)}: the weights file is damaged or holds another model's weights. Download it "
                     "again.")
  array = array.astype(np.float32, copy=False)
  check_finite({name: array}, source)
  return array


def check_finite(arrays, source):
  """ValueError naming the first weight of {name: array} (the checkpoint or weights file `source`'s) whose float
  values hold NaN or infinity: the file is damaged, or was saved by a run that diverged (a float16 one, typically).
  Loaded, such weights predicted NaN logits for every example, exit 0. One pass of np.isfinite over every weight."""
  for name, array in arrays.items():
    array = np.asarray(array)
    if array.dtype.kind != "f" and array.dtype.name != "bfloat16":
      continue
    finite = np.isfinite(array if array.dtype.kind == "f" else array.astype(np.float32))
    if not finite.all():
      raise ValueError(f"{source}: {name} holds NaN or infinite values ({finite.size - int(finite.sum())} of "
                       f"{finite.size}): the checkpoint is damaged, or from a diverged run. Use one saved before the "
                       "run diverged, or download it again.")
