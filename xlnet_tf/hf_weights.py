"""Reading the weights of a HuggingFace XLNet model directory: `model.safetensors` (or shards), `pytorch_model.bin`
(or shards; read without torch: `torch_pickle`) or `tf_model.h5` (transformers' TF classes), every format into
PyTorch names and layouts (`transformer.layer.0.ff.layer_1.weight` [d_inner, d_model]) for `hf_checkpoint`'s name
map."""

import json
import os
import re

import numpy as np

from xlnet_tf import fileio
from xlnet_tf import torch_pickle

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "tf_model.h5")


def _read_safetensors(path):
  from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  try:
    return load_file(path)
  except Exception as e:  # pylint: disable=broad-except  (SafetensorError, or an OSError of a cut file)
    raise ValueError(f"{path} is not a readable safetensors file ({' '.join(str(e).split())[:160]}). "
                     "Download it again.") from None


_H5_LAYER = re.compile(r"/layer_\._(\d+)/")


def _read_h5(path):
  """tf_model.h5 (transformers' TF classes, Keras 2 `save_weights`) -> PyTorch names and layouts."""
  import h5py  # pylint: disable=import-outside-toplevel
  weights = {}
  try:
    with h5py.File(path, "r") as f:
      for layer in f.attrs["layer_names"]:
        group = f[layer]
        for name in group.attrs["weight_names"]:
          name = name.decode() if isinstance(name, bytes) else name
          array = np.asarray(group[name])
          tf_name = name.split("/", 1)[1].rsplit(":", 1)[0]  # drop the model's scope and `:0`
          parts = _H5_LAYER.sub(r"/layer.\1/", tf_name).split("/")
          last = parts[-1]
          if last == "kernel":
            parts[-1], array = "weight", array.T
          elif last in ("gamma", "beta"):
            parts[-1] = "weight" if last == "gamma" else "bias"
          weights[".".join(parts)] = array
  except (OSError, KeyError) as e:
    raise ValueError(f"{path} is not a readable tf_model.h5 ({' '.join(str(e).split())[:160]}). "
                     "Download it again.") from None
  return weights


def read_weights(directory):
  """({HF name: numpy array} in PyTorch names and layouts, the file read) of an HF model directory; the first of
  safetensors, sharded safetensors, pytorch_model.bin (sharded), tf_model.h5 that it holds."""
  for name, reader in (("model.safetensors", _read_safetensors), ("pytorch_model.bin", torch_pickle.load)):
    path = os.path.join(directory, name)
    if fileio.exists(path):
      return reader(path), name
    index = path + ".index.json"
    if fileio.exists(index):
      try:
        with fileio.open_file(index) as f:
          shards = sorted(set(json.load(f)["weight_map"].values()))
      except (json.JSONDecodeError, KeyError, UnicodeDecodeError) as e:
        raise ValueError(f"{index} is not a valid shard index ({e}). Download it again.") from None
      weights = {}
      for shard in shards:
        shard_path = os.path.join(directory, shard)
        if not fileio.exists(shard_path):
          raise ValueError(f"{index} names {shard}, which is not in {directory}. Download every shard.")
        weights.update(reader(shard_path))
      return weights, f"{name} ({len(shards)} shards)"
  path = os.path.join(directory, "tf_model.h5")
  if fileio.exists(path):
    return _read_h5(path), "tf_model.h5"
  raise FileNotFoundError(f"{directory} holds no XLNet weights (none of {', '.join(WEIGHT_FILES)}).")
