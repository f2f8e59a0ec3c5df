"""Model and run configuration, as the original `xlnet.py` (`XLNetConfig`, `RunConfig`).

`XLNetConfig` holds exactly the 8 keys of a released `xlnet_config.json`; `RunConfig` holds what the
original passes to `transformer_xl` at run time (dropout, initializer, memory and data options).
"""

import dataclasses
import json
import math
import numbers
import os
import re
from typing import Optional

import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf import fileio

CONFIG_KEYS = ("n_layer", "d_model", "n_head", "d_head", "d_inner", "ff_activation", "untie_r", "n_token")
_KEY_TYPES = {"n_layer": int, "d_model": int, "n_head": int, "d_head": int, "d_inner": int,
              "ff_activation": str, "untie_r": bool, "n_token": int}
FF_ACTIVATIONS = ("relu", "gelu")
PASS_CONFIG = " Pass the xlnet_config.json of the model."  # the remedy of a file that is no XLNet config
MAX_WEIGHT_BYTES = 2**40  # float32 weights beyond this fit no device: a config that asks for them is a typo
INITS = ("normal", "uniform")
# A head's task name (`classification_{name}`, `regression_{name}`): characters a TensorFlow variable scope takes.
_HEAD_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def fits(kind, value):
  """Whether `value` is of the run settings' type `kind` (int, float, bool, str, Optional[int], Optional[str]) as
  the Python API takes it: numpy's numbers and bools too, and a bool is no number."""
  if kind in (Optional[int], Optional[str]):
    return value is None or fits(kind.__args__[0], value)
  if kind is bool:
    return isinstance(value, (bool, np.bool_))
  number = numbers.Integral if kind is int else numbers.Real if kind is float else None
  return isinstance(value, number) and not isinstance(value, bool) if number else isinstance(value, kind)


KIND_NAMES = {float: "a number", int: "an integer", bool: "True or False", str: "a string",
              Optional[int]: "an integer or None", Optional[str]: "a string or None"}
_ANNOTATIONS = {"bool": bool, "int": int, "float": float, "str": str}  # a module's `from __future__ import annotations`


def check_field_types(obj):
  """TypeError naming the first field of the dataclass `obj` whose value is not of its annotated type (`fits`; a
  field whose default is None may be None; a path for a str is taken as its str): a notebook's "False" was taken as
  true, "8" failed deep in a pipeline (sweep 35)."""
  for field in dataclasses.fields(obj):
    value, kind = getattr(obj, field.name), _ANNOTATIONS.get(field.type, field.type)
    if kind in (str, Optional[str]) and isinstance(value, os.PathLike):  # a pathlib.Path: its str
      value = os.fspath(value)
      object.__setattr__(obj, field.name, value)
    if kind in KIND_NAMES and not (value is None and field.default is None) and not fits(kind, value):
      raise TypeError(f"{type(obj).__name__}.{field.name} must be {KIND_NAMES[kind]}. Received: {value!r} "
                      f"({type(value).__name__}).")


def is_head_name(name):
  """Whether `name` can name a fine-tuning head's scope: letters, digits, '_', '.' and '-' (no '/', space, ':')."""
  return bool(_HEAD_NAME.fullmatch(str(name)))


def _without_repeats(pairs, json_path):
  """The json object of `pairs`; a ValueError where a key repeats (json takes the last one without a word: a config
  saying n_layer 2, then 3, built a 3-layer model)."""
  keys = [key for key, _ in pairs]
  if repeated := sorted({key for key in keys if keys.count(key) > 1}):
    values = "; ".join(f"{k}: {', '.join(repr(v) for key, v in pairs if key == k)}" for k in repeated)
    raise ValueError(f"XLNet config file {json_path} gives {', '.join(repeated)} more than once ({values}). Keep one "
                     "value of each.")
  return dict(pairs)


class XLNetConfig:
  """The architecture of an XLNet model: exactly the keys of `xlnet_config.json`.

  Build it from a json file (`XLNetConfig(json_path=...)`) or from keyword fields (`XLNetConfig(n_layer=2, ...)`).
  A missing or unknown key is an error naming the key.
  """

  def __init__(self, json_path=None, **fields):
    if json_path is not None and not isinstance(json_path, (str, os.PathLike)):
      raise TypeError(f"XLNetConfig(json_path) takes the path of an xlnet_config.json; pass a dict of fields as "
                      f"XLNetConfig(**fields). Received: {type(json_path).__name__}.")
    if json_path is not None:
      json_path = fileio.api_path(json_path)
      if fields:
        raise ValueError(f"Pass either json_path or fields, not both. Received json_path={json_path!r} "
                         f"and fields {sorted(fields)}.")
      if not tf.io.gfile.exists(json_path):
        raise FileNotFoundError(f"XLNet config file not found: {json_path}. Pass the path of an "
                                "xlnet_config.json (e.g. --model_config_path).")
      if tf.io.gfile.isdir(json_path):
        raise IsADirectoryError(f"XLNet config file {json_path} is a directory. Pass the path of the "
                                "xlnet_config.json in it.")
      with tf.io.gfile.GFile(json_path, "rb") as f:
        text = f.read().decode("utf-8-sig", errors="replace")  # a byte-order mark (a Windows editor's) is no text
      try:
        fields = json.loads(text, object_pairs_hook=lambda pairs: _without_repeats(pairs, json_path))
      except json.JSONDecodeError as e:
        raise ValueError(f"XLNet config file {json_path} is not valid json: {e}.{PASS_CONFIG}") from None
      if not isinstance(fields, dict):
        raise ValueError(f"XLNet config file {json_path} holds a json {type(fields).__name__}, not an object with "
                         f"the keys {list(CONFIG_KEYS)}.{PASS_CONFIG}")
      if "model_type" in fields:
        raise ValueError(f"XLNet config file {json_path} is a HuggingFace config.json (model_type "
                         f"{fields['model_type']!r}), not the original's xlnet_config.json. Pass its directory as "
                         "--init_checkpoint (convert_checkpoint.py's --input) and leave --model_config_path unset: its "
                         "config.json then gives the model.")
      source = json_path
    else:
      source = "the fields passed to XLNetConfig"
    missing = [k for k in CONFIG_KEYS if k not in fields]
    unknown = sorted(k for k in fields if k not in CONFIG_KEYS)
    if unknown and json_path is not None and not missing:  # the original's reads its keys and takes the file
      logging.warning("%s holds keys that are no XLNet config keys, ignored (as by the original's XLNetConfig): %s.",
                      json_path, ", ".join(unknown))
      fields, unknown = {k: v for k, v in fields.items() if k in CONFIG_KEYS}, []
    if missing or unknown:
      if len(unknown) > 8:  # another file (a run's run_flags.json: ~90 keys, a line of 2,000 characters; sweep 27)
        unknown = unknown[:8] + [f"... ({len(unknown)} in all)"]
      raise ValueError(f"XLNet config from {source} must have exactly the keys {list(CONFIG_KEYS)}. " + "; ".join(
          f"{what}: {keys}" for what, keys in (("Missing", missing), ("unknown", unknown)) if keys) + ".")
    for key in CONFIG_KEYS:
      value = fields[key]
      want = _KEY_TYPES[key]
      if want is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"XLNet config key {key!r} must be an integer. Received: {value!r} (from {source}).")
      if want is bool and not isinstance(value, bool):
        raise ValueError(f"XLNet config key {key!r} must be true or false. Received: {value!r} (from {source}).")
      if want is int and value <= 0:
        raise ValueError(f"XLNet config key {key!r} must be positive. Received: {value} (from {source}).")
      setattr(self, key, value)
    if self.ff_activation not in FF_ACTIVATIONS:
      raise ValueError(f"XLNet config key 'ff_activation' must be one of {FF_ACTIVATIONS}. "
                       f"Received: {self.ff_activation!r} (from {source}).")
    if self.d_model % 2:  # the original fails on it inside its graph: a positional embedding of d_model + 1
      raise ValueError(f"XLNet config key 'd_model' must be even: the relative positional embedding is d_model/2 "
                       f"sines and as many cosines. Received: {self.d_model} (from {source}).")
    if self.num_weights() * 4 > MAX_WEIGHT_BYTES:
      raise ValueError(f"XLNet config from {source} describes {self.num_weights():.3g} weights, "
                       f"{self.num_weights() * 4 / 2**40:.3g} TiB in float32, more than any device holds (each "
                       f"replica holds all of them; XLNet-Large has 3.6e+08). Check its sizes: n_layer "
                       f"{self.n_layer}, d_model {self.d_model}, n_head {self.n_head}, d_head {self.d_head}, "
                       f"d_inner {self.d_inner}, n_token {self.n_token}.")

  def num_weights(self):
    """The number of weights of the backbone (the word embedding, the layers, their relative-attention biases)."""
    attention = self.n_head * self.d_head
    per_layer = 5 * self.d_model * attention + 2 * self.d_model * self.d_inner + self.d_inner + 5 * self.d_model
    return self.n_token * self.d_model + self.n_layer * (per_layer + 5 * attention)

  def to_dict(self):
    return {k: getattr(self, k) for k in CONFIG_KEYS}

  def to_json(self, json_path, write=fileio.atomic_write):
    """Writes the config as the original does (sorted keys, indent 4) with `write(path, text)`: atomically, or
    e.g. a `fileio.FileSet`'s `write`, as one file of a set."""
    write(json_path, json.dumps(self.to_dict(), indent=4, sort_keys=True))

  def __eq__(self, other):
    return isinstance(other, XLNetConfig) and self.to_dict() == other.to_dict()

  def differences(self, other):
    """[(key, this config's value, `other`'s value)] for each key (sorted) where `other`, an XLNetConfig, differs."""
    return [(k, getattr(self, k), getattr(other, k)) for k in sorted(CONFIG_KEYS)
            if getattr(self, k) != getattr(other, k)]

  def __repr__(self):
    return f"XLNetConfig({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"


class RunConfig:
  """Run-time options of the model, as the original `xlnet.RunConfig`.

  Args:
    is_training: bool, whether dropout is active.
    use_tpu: bool, kept for flag compatibility (the math is the same on every device).
    use_bfloat16: bool, run the backbone in bfloat16 (float32 variables).
    use_fp16: bool, run it in float16 instead (float32 variables; training needs loss scaling, which the
      training loop adds: `xlnet_tf.training.loss_scale`). At most one of use_bfloat16 and use_fp16.
    dropout: float, dropout rate everywhere except attention probabilities.
    dropatt: float, dropout rate on attention probabilities.
    init: "normal" (plain normal, stddev init_std) or "uniform" ([-init_range, init_range]).
    init_range, init_std: float, initializer parameters.
    mem_len: int or None, number of hidden states cached per layer (None or 0: no cache).
    reuse_len: int or None, the number of leading tokens of a sequence whose states are cached.
    bi_data: bool, the second half of the batch runs backwards in time (pretraining).
    clamp_len: int, relative distances are clipped to +-clamp_len when > 0.
    same_length: bool, every query attends to the same number of keys (uni attention only).
    recompute_grad: bool, training recomputes each layer's activations in the backward pass instead of keeping
      them (less memory, about one more forward per step; same gradients; `xlnet_tf.modeling.recompute`). New.
    float32_positions: bool, with use_bfloat16 the relative positional encoding is computed in float32, then cast
      (False: in bfloat16, as the original, whose positions past 256 and sinusoids are rounded: off by up to 2.0
      at distance 512). New.
  """

  def __init__(self, is_training, use_tpu, use_bfloat16, dropout, dropatt, init="normal", init_range=0.1,
               init_std=0.02, mem_len=None, reuse_len=None, bi_data=False, clamp_len=-1, same_length=False,
               use_fp16=False, recompute_grad=False, float32_positions=False):
    if init not in INITS:
      raise ValueError(f"`init` must be one of {INITS}. Received: {init!r}.")
    for name, value in (("mem_len", mem_len), ("reuse_len", reuse_len)):
      if not fits(Optional[int], value):
        raise TypeError(f"`{name}` must be an integer or None. Received: {value!r}.")
    if not fits(int, clamp_len):  # None failed in the model's call (sweep 35)
      raise TypeError(f"`clamp_len` must be an integer (-1: no clamping). Received: {clamp_len!r}.")
    for name, value in (("is_training", is_training), ("use_tpu", use_tpu), ("use_bfloat16", use_bfloat16),
                        ("bi_data", bi_data), ("same_length", same_length), ("use_fp16", use_fp16),
                        ("recompute_grad", recompute_grad), ("float32_positions", float32_positions)):
      if not fits(bool, value):  # "False" is true: a notebook's string trained with dropout
        raise TypeError(f"`{name}` must be True or False. Received: {value!r}.")
    for name, rate in (("dropout", dropout), ("dropatt", dropatt)):
      if not (fits(float, rate) and 0.0 <= rate < 1.0):
        raise ValueError(f"`{name}` must be in [0, 1). Received: {rate!r}.")
    for name, value in (("init_range", init_range), ("init_std", init_std)):  # a negative one read as its size
      if not (fits(float, value) and 0 < value < math.inf):  # True was 1.0; inf made every weight NaN (sweep 35)
        raise ValueError(f"`{name}` must be a number > 0 (--{name}: the spread of new weights). Received: {value!r}.")
    if use_bfloat16 and use_fp16:
      raise ValueError("`use_bfloat16` and `use_fp16` are both set; pick one precision (--use_bfloat16 or "
                       "--use_fp16).")
    if mem_len is not None and mem_len < 0:
      raise ValueError(f"`mem_len` must be >= 0 (0: no memory). Received: {mem_len}.")
    if reuse_len is not None and reuse_len < 0:
      raise ValueError(f"`reuse_len` must be >= 0 (the leading tokens whose states are cached). Received: "
                       f"{reuse_len}.")
    self.is_training = is_training
    self.use_tpu = use_tpu
    self.use_bfloat16 = use_bfloat16
    self.dropout = dropout
    self.dropatt = dropatt
    self.init = init
    self.init_range = init_range
    self.init_std = init_std
    self.mem_len = mem_len
    self.reuse_len = reuse_len
    self.bi_data = bi_data
    self.clamp_len = clamp_len
    self.same_length = same_length
    self.recompute_grad = recompute_grad
    self.use_fp16 = use_fp16
    self.float32_positions = float32_positions

  @property
  def dtype_policy(self):
    """The Keras dtype policy of every layer: "mixed_bfloat16", "mixed_float16" (float32 variables, half-precision
    compute) or None (float32)."""
    if self.use_bfloat16:
      return "mixed_bfloat16"
    return "mixed_float16" if self.use_fp16 else None

  def to_dict(self):
    return dict(vars(self))

  def __repr__(self):
    return f"RunConfig({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"


def as_configs(xlnet_config, run_config):
  """(XLNetConfig, RunConfig) from each or its dict (its `to_dict`, as a Keras `get_config` holds it): what the
  model classes that take both (`XLNetModel`, `TransformerXL`) accept."""
  if isinstance(xlnet_config, dict):
    xlnet_config = XLNetConfig(**xlnet_config)
  if isinstance(run_config, dict):
    run_config = RunConfig(**run_config)
  if not (isinstance(xlnet_config, XLNetConfig) and isinstance(run_config, RunConfig)):  # e.g. the two swapped
    raise TypeError(f"Pass an XLNetConfig (or its dict) and a RunConfig (or its dict), in that order. Received: "
                    f"{type(xlnet_config).__name__}, {type(run_config).__name__}.")
  return xlnet_config, run_config
