"""HuggingFace XLNet checkpoints <-> the original's (TF1) variable names and layouts.

An HF model directory holds `config.json` and its weights in one of: `model.safetensors` (or shards with
`model.safetensors.index.json`), `pytorch_model.bin` (or shards with `pytorch_model.bin.index.json`; reading it
needs torch) or `tf_model.h5` (transformers' TF classes, Keras 2 h5). Every format is read into PyTorch names and
layouts (`transformer.layer.0.ff.layer_1.weight` [d_inner, d_model]); one table maps those to the original's names:

  transformer.word_embedding.weight            model/transformer/word_embedding/lookup_table
  transformer.mask_emb                         model/transformer/mask_emb/mask_emb
  transformer.layer.{i}.rel_attn.{q,k,v,o,r}   model/transformer/layer_{i}/rel_attn/{q,k,v,o,r}/kernel
  transformer.layer.{i}.rel_attn.layer_norm.*  model/transformer/layer_{i}/rel_attn/LayerNorm/{gamma,beta}
  transformer.layer.{i}.ff.layer_norm.*        model/transformer/layer_{i}/ff/LayerNorm/{gamma,beta}
  transformer.layer.{i}.ff.layer_{1,2}.*       model/transformer/layer_{i}/ff/layer_{1,2}/{kernel (transposed),bias}
  transformer.layer.{i}.rel_attn.r_{w,r,s}_bias model/transformer/r_{w,r,s}_bias [n_layer, n_head, d_head] (stacked)
  transformer.layer.{i}.rel_attn.seg_embed     model/transformer/seg_embed [n_layer, 2, n_head, d_head] (stacked)
  lm_loss.bias                                 model/lm_loss/bias (lm_loss.weight is the tied word embedding)
  sequence_summary.summary.*                   model/sequnece_summary/summary/* (the original's spelling)
  logits_proj.*                                model/classification_{task}/logit/* (regression_{task} for 1 label);
                                               multiple choice: logits/dense/* (the original RACE head)
  start_logits.dense.*, end_logits.{dense_0,LayerNorm,dense_1}.*, answer_class.{dense_0,dense_1}.*
                                               the original SQuAD head's start_logits/..., end_logits/...,
                                               answer_class/... (outside `model/`)

Every `*.weight` of a Linear layer is transposed into a `kernel`; HF LayerNorm `weight`/`bias` are `gamma`/`beta`.
HF keeps one copy of the attention biases per layer; they become the original's untied arrays (`untie_r: true`),
whatever HF's `untie_r` says (HF reads it only when loading a TF1 checkpoint). HF's `gelu_new` is the original's
`gelu` (the tanh approximation).
"""

import json
import os
import re

import numpy as np

from xlnet_tf import fileio
from xlnet_tf.config import XLNetConfig

CONFIG_FILE = "config.json"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "tf_model.h5")
SUMMARY_TYPES = ("last", "first", "mean")  # what HF's SequenceSummary and the original both compute

# {HF name: (original name, transposed)}, `{i}` a layer, `{scope}` the classification scope.
_LAYER_NAMES = {
    **{f"rel_attn.{w}": (f"rel_attn/{w}/kernel", False) for w in "qkvor"},
    **{f"{block}.layer_norm.{hf}": (f"{block}/LayerNorm/{tf1}", False)
       for block in ("rel_attn", "ff") for hf, tf1 in (("weight", "gamma"), ("bias", "beta"))},
    **{f"ff.layer_{n}.{hf}": (f"ff/layer_{n}/{tf1}", hf == "weight")
       for n in (1, 2) for hf, tf1 in (("weight", "kernel"), ("bias", "bias"))},
}
_STACKED = ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")  # per layer in HF, one array in the original
_BACKBONE = {"transformer.word_embedding.weight": ("model/transformer/word_embedding/lookup_table", False),
             "transformer.mask_emb": ("model/transformer/mask_emb/mask_emb", False)}
_LM = {"lm_loss.bias": ("model/lm_loss/bias", False)}
_SUMMARY = {"sequence_summary.summary.weight": ("model/sequnece_summary/summary/kernel", True),
            "sequence_summary.summary.bias": ("model/sequnece_summary/summary/bias", False)}
_QA = {
    "start_logits.dense.weight": ("start_logits/dense/kernel", True),
    "start_logits.dense.bias": ("start_logits/dense/bias", False),
    "end_logits.LayerNorm.weight": ("end_logits/LayerNorm/gamma", False),
    "end_logits.LayerNorm.bias": ("end_logits/LayerNorm/beta", False),
    **{f"{head}.{d}.{hf}": (f"{head}/{d}/{tf1}", hf == "weight")
       for head, d in (("end_logits", "dense_0"), ("end_logits", "dense_1"), ("answer_class", "dense_0"))
       for hf, tf1 in (("weight", "kernel"), ("bias", "bias"))},
    "answer_class.dense_1.weight": ("answer_class/dense_1/kernel", True),
}
_PROJ = {"logits_proj.weight": ("{scope}/kernel", True), "logits_proj.bias": ("{scope}/bias", False)}
ARCHITECTURES = {  # HF class -> the heads it holds (beyond the backbone)
    "XLNetModel": {}, "XLNetLMHeadModel": _LM, "XLNetForSequenceClassification": {**_SUMMARY, **_PROJ},
    "XLNetForMultipleChoice": {**_SUMMARY, **_PROJ}, "XLNetForQuestionAnswering": _QA,
}
RACE_SCOPE = "logits/dense"  # the original run_race.py's `tf.variable_scope("logits")` + dense


def is_hf_directory(path):
  """Whether `path` is a directory with `config.json` and HF weights (not a TF1 checkpoint)."""
  return bool(path) and fileio.isdir(path) and fileio.exists(os.path.join(path, CONFIG_FILE)) and any(
      fileio.exists(os.path.join(path, name)) for name in WEIGHT_FILES)


def read_config(directory):
  """The HF `config.json` of `directory` as a dict; a model type other than xlnet is a ValueError."""
  path = os.path.join(directory, CONFIG_FILE)
  try:
    with fileio.open_file(path) as f:
      config = json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise ValueError(f"{path} is not valid json ({e}). Pass a HuggingFace XLNet model directory.") from None
  if config.get("model_type") != "xlnet":
    raise ValueError(f"{path} has model_type {config.get('model_type')!r}, not 'xlnet'. Pass an XLNet model.")
  return config


# ------------------------------------------------------------------------------------------------------------
# Reading the weight files: every format into PyTorch names and layouts.
# ------------------------------------------------------------------------------------------------------------

def _read_safetensors(path):
  from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  try:
    return load_file(path)
  except Exception as e:  # pylint: disable=broad-except  (SafetensorError, or an OSError of a cut file)
    raise ValueError(f"{path} is not a readable safetensors file ({' '.join(str(e).split())[:160]}). "
                     "Download it again.") from None


def _read_bin(path):
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ValueError(f"{path} is a PyTorch pickle: reading it needs torch (pip install torch), or use the model's "
                     "model.safetensors (HF hub: the safetensors file of the same model).") from None
  try:
    state = torch.load(path, map_location="cpu", weights_only=True)
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(f"{path} is not a readable PyTorch weights file ({' '.join(str(e).split())[:160]}). "
                     "Download it again.") from None
  return {name: t.detach().float().numpy() if t.is_floating_point() else t.numpy() for name, t in state.items()}


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
  for name, reader in (("model.safetensors", _read_safetensors), ("pytorch_model.bin", _read_bin)):
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


# ------------------------------------------------------------------------------------------------------------
# HF -> the original.
# ------------------------------------------------------------------------------------------------------------

def xlnet_config_from_hf(config, weights, source):
  """(XLNetConfig, notes) of an HF config dict, checked against the weights' shapes (None: not checked)."""
  activation = config.get("ff_activation", "gelu")
  notes = []
  if activation == "gelu":
    notes.append("ff_activation 'gelu' in HF is the exact (erf) GELU; the original's gelu (and this port's) is the "
                 "tanh approximation (HF's gelu_new), which the released XLNet weights were trained with. Outputs "
                 "differ from transformers' by the difference of the two.")
  elif activation not in ("gelu_new", "relu"):
    raise ValueError(f"{source}: ff_activation {activation!r} has no counterpart in the original XLNet (relu, gelu "
                     "= HF gelu_new).")
  eps = config.get("layer_norm_eps", 1e-12)
  if abs(eps - 1e-12) > 1e-15:
    raise ValueError(f"{source}: layer_norm_eps {eps} cannot be expressed; the original XLNet uses 1e-12.")
  n_layer, d_model, n_head = config.get("n_layer", 24), config.get("d_model", 1024), config.get("n_head", 16)
  fields = dict(n_layer=n_layer, d_model=d_model, n_head=n_head, d_head=config.get("d_head", d_model // n_head),
                d_inner=config.get("d_inner", 4096), ff_activation="relu" if activation == "relu" else "gelu",
                untie_r=True, n_token=config.get("vocab_size", 32000))
  if weights is None:
    return XLNetConfig(**fields), notes
  expected = {"transformer.word_embedding.weight": [fields["n_token"], d_model],
              "transformer.layer.0.rel_attn.q": [d_model, n_head, fields["d_head"]],
              "transformer.layer.0.ff.layer_1.weight": [fields["d_inner"], d_model]}
  bad = [f"{name} is {list(weights[name].shape)}, the config says {shape}" for name, shape in expected.items()
         if name in weights and list(weights[name].shape) != shape]
  layers = {int(m.group(1)) for m in map(re.compile(r"^transformer\.layer\.(\d+)\.").match, weights) if m}
  if layers != set(range(n_layer)):
    bad.append(f"the weights have {len(layers)} layers, the config says n_layer={n_layer}")
  if bad:
    raise ValueError(f"{source}: config.json does not match the weights: {'; '.join(bad)}. Use the config.json "
                     "that came with the weights.")
  return XLNetConfig(**fields), notes


def architecture_of(config, weights):
  """The HF class of a model directory: `architectures[0]` of its config, else what its weights hold."""
  architectures = config.get("architectures") or []
  if architectures:
    return architectures[0]
  if "start_logits.dense.weight" in weights:
    return "XLNetForQuestionAnswering"
  if "logits_proj.weight" in weights:
    return "XLNetForSequenceClassification"
  return "XLNetLMHeadModel" if "lm_loss.bias" in weights else "XLNetModel"


def classification_scope(config, task_name):
  """`classification_{task}` (or `regression_{task}` for one label) of a sequence-classification model."""
  task = (task_name or config.get("finetuning_task") or "hf").lower()
  num_labels = len(config.get("id2label") or {}) or config.get("num_labels", 2)
  regression = config.get("problem_type") == "regression" or num_labels == 1
  return f"{'regression' if regression else 'classification'}_{task}"


def hf_to_original(config, weights, source, task_name=None, cls_scope=None):
  """The original's {name: array} and (XLNetConfig, info) of an HF model's config dict and weights.

  Args:
    cls_scope: the scope of a sequence-classification head (`classification_x`); None: from `task_name`.

  Returns:
    (XLNetConfig, {original name: float32 array}, info): info has `architecture`, `notes` (lines to log).
  """
  xlnet_config, notes = xlnet_config_from_hf(config, weights, source)
  architecture = architecture_of(config, weights)
  if architecture not in ARCHITECTURES:
    raise ValueError(f"{source}: unknown head {architecture} (the original XLNet has no counterpart). Convertible: "
                     f"{', '.join(ARCHITECTURES)}.")
  weights = dict(weights)
  tied = weights.pop("lm_loss.weight", None)
  if tied is not None and not np.array_equal(tied, weights.get("transformer.word_embedding.weight")):
    raise ValueError(f"{source}: lm_loss.weight differs from the word embedding; the original ties them.")
  if architecture == "XLNetForMultipleChoice":
    scope = RACE_SCOPE
  else:
    scope = f"model/{cls_scope or classification_scope(config, task_name)}/logit"
  table = {**_BACKBONE, **ARCHITECTURES[architecture]}
  arrays, stacked, unknown = {}, {n: {} for n in _STACKED}, []
  for name, array in weights.items():
    array = np.asarray(array, np.float32)
    layer = re.match(r"^transformer\.layer\.(\d+)\.(.+)$", name)
    if layer and layer.group(2) in _LAYER_NAMES:
      target, transposed = _LAYER_NAMES[layer.group(2)]
      target = f"model/transformer/layer_{layer.group(1)}/{target}"
    elif layer and layer.group(2).startswith("rel_attn.") and layer.group(2)[9:] in _STACKED:
      stacked[layer.group(2)[9:]][int(layer.group(1))] = array
      continue
    elif name in table:
      target, transposed = table[name]
      target = target.format(scope=scope)
    else:
      unknown.append(name)
      continue
    arrays[target] = array.T if transposed else array
  if unknown:
    raise ValueError(f"{source} ({architecture}) has weights the original XLNet lacks (an unknown head): "
                     f"{', '.join(sorted(unknown)[:6])}. Convertible heads: LM, sequence classification, multiple "
                     "choice, question answering (XLNetForQuestionAnswering).")
  for name, per_layer in stacked.items():
    if sorted(per_layer) != list(range(xlnet_config.n_layer)):
      raise ValueError(f"{source}: rel_attn.{name} is missing in some layers. Download the model again.")
    arrays[f"model/transformer/{name}"] = np.stack([per_layer[i] for i in range(xlnet_config.n_layer)])
  summary = config.get("summary_type", "last")
  if "model/sequnece_summary/summary/kernel" in arrays and config.get("summary_activation", "tanh") != "tanh":
    raise ValueError(f"{source}: summary_activation {config.get('summary_activation')!r} cannot be expressed; the "
                     "original's summary projection is tanh.")
  if architecture in ("XLNetForSequenceClassification", "XLNetForMultipleChoice"):
    notes.append(f"The HF model pools with summary_type {summary!r} (use_proj {config.get('summary_use_proj', True)}"
                 f"): pass --summary_type={summary} when fine-tuning or predicting with it.")
  return xlnet_config, arrays, dict(architecture=architecture, notes=notes, summary_type=summary)


def read_hf_checkpoint(directory, task_name=None, cls_scope=None):
  """(XLNetConfig, {original name: array}, info) of an HF model directory; info adds `description`."""
  config = read_config(directory)
  weights, weights_file = read_weights(directory)
  xlnet_config, arrays, info = hf_to_original(config, weights, os.path.join(directory, weights_file), task_name,
                                              cls_scope)
  info["description"] = f"HuggingFace {info['architecture']}, {weights_file}"
  return xlnet_config, arrays, info


def model_config(model_config_path, init_checkpoint):
  """The XLNetConfig of --model_config_path, else of the HF model directory --init_checkpoint."""
  if model_config_path:
    return XLNetConfig(json_path=model_config_path)
  if is_hf_directory(init_checkpoint):
    return xlnet_config_from_hf(read_config(init_checkpoint), None, os.path.join(init_checkpoint, CONFIG_FILE))[0]
  raise ValueError("--model_config_path is required (the xlnet_config.json of the model), unless --init_checkpoint "
                   "is a HuggingFace model directory with config.json.")


# ------------------------------------------------------------------------------------------------------------
# The original -> HF.
# ------------------------------------------------------------------------------------------------------------

def _expected_shapes(c):
  """{original backbone name: shape} of an XLNetConfig."""
  bias = [c.n_layer, c.n_head, c.d_head] if c.untie_r else [c.n_head, c.d_head]
  shapes = {"model/transformer/word_embedding/lookup_table": [c.n_token, c.d_model],
            "model/transformer/seg_embed": [c.n_layer, 2, c.n_head, c.d_head],
            **{f"model/transformer/{n}": bias for n in _STACKED[:3]}}
  for i in range(c.n_layer):
    prefix = f"model/transformer/layer_{i}/"
    shapes.update({prefix + f"rel_attn/{w}/kernel": [c.d_model, c.n_head, c.d_head] for w in "qkvor"})
    shapes.update({prefix + f"{b}/LayerNorm/{g}": [c.d_model] for b in ("rel_attn", "ff") for g in ("gamma", "beta")})
    shapes.update({prefix + "ff/layer_1/kernel": [c.d_model, c.d_inner], prefix + "ff/layer_1/bias": [c.d_inner],
                   prefix + "ff/layer_2/kernel": [c.d_inner, c.d_model], prefix + "ff/layer_2/bias": [c.d_model]})
  return shapes


def _export_head(arrays, task_name, source):
  """(HF architecture, the scope its `{scope}` names stand for) of the head a checkpoint holds."""
  cls_scopes = sorted({m.group(1) for m in map(re.compile(r"^model/((?:classification|regression)_.+)/logit/kernel$")
                                               .match, arrays) if m})
  heads = [("XLNetForSequenceClassification", f"model/{s}/logit") for s in cls_scopes]
  if task_name and cls_scopes:
    picked = [h for h in heads if h[1] in (f"model/classification_{task_name.lower()}/logit",
                                           f"model/regression_{task_name.lower()}/logit")]
    if not picked:
      raise ValueError(f"{source} has no classification_{task_name.lower()} or regression_{task_name.lower()} head "
                       f"(its classification heads: {cls_scopes or 'none'}). Pass one of those as --task_name.")
    return picked[0]
  if "start_logits/dense/kernel" in arrays:
    heads.append(("XLNetForQuestionAnswering", None))
  if f"{RACE_SCOPE}/kernel" in arrays:
    heads.append(("XLNetForMultipleChoice", RACE_SCOPE))
  if len(heads) > 1:
    raise ValueError(f"{source} holds several heads ({', '.join(h[1] or h[0] for h in heads)}); HF holds one. Pass "
                     "--task_name=X to export the head classification_X (or regression_X).")
  return heads[0] if heads else ("XLNetLMHeadModel", None)


def original_to_hf(arrays, xlnet_config, source, summary_type="last", task_name=None, allow_d_head_override=False):
  """(HF config dict, {HF name: array}, notes) of an original checkpoint's arrays and its XLNetConfig.

  Args:
    arrays: {original name: array} (optimizer slots and global_step may be present; they are dropped).
    summary_type: the pooling the HF config states (the original's is a flag, not stored in the checkpoint).
    task_name: picks the `classification_{task_name}` (or `regression_`) head when the checkpoint has several.
    allow_d_head_override: write a config with d_head != d_model / n_head (transformers refuses to load it unless
      `d_head` is set on the config object after construction; for tests).
  """
  c = xlnet_config
  if summary_type not in SUMMARY_TYPES:
    raise ValueError(f"--summary_type {summary_type!r} cannot be exported: HF's XLNet pools with one of "
                     f"{SUMMARY_TYPES} (it has no `attn`).")
  expected = _expected_shapes(c)
  bad = [f"{n}: {'missing' if n not in arrays else list(arrays[n].shape)} (config: {s})"
         for n, s in expected.items() if n not in arrays or list(arrays[n].shape) != s]
  if bad:
    raise ValueError(f"{source}: the config does not match the checkpoint: {'; '.join(bad[:3])}"
                     f"{f'; and {len(bad) - 3} more' if len(bad) > 3 else ''}. Pass the xlnet_config.json that came "
                     "with it (--model_config_path).")
  architecture, scope = _export_head(arrays, task_name, source)
  if c.d_head * c.n_head != c.d_model and not allow_d_head_override:
    raise ValueError(f"{source}: d_head={c.d_head} is not d_model / n_head = {c.d_model} / {c.n_head}; HuggingFace's "
                     "XLNetConfig fixes d_head = d_model // n_head, so transformers cannot load this model. Keep it "
                     "in the original format (this port loads it).")
  notes, weights = [], {}
  for hf, (name, transposed) in {**_BACKBONE, **ARCHITECTURES[architecture]}.items():
    name = name.format(scope=scope)
    if name not in arrays and hf == "lm_loss.bias":
      notes.append(f"{source} has no model/lm_loss/bias (a fine-tuned checkpoint): the LM bias is written as zeros.")
      arrays = dict(arrays, **{name: np.zeros([c.n_token], np.float32)})
    if name not in arrays and hf == "transformer.mask_emb":  # the original's graph makes it for pretraining only
      notes.append(f"{source} has no model/transformer/mask_emb (the original's fine-tuning graph has none): it is "
                   "written as zeros; only the query stream of pretraining reads it.")
      arrays = dict(arrays, **{name: np.zeros([1, 1, c.d_model], np.float32)})
    if name not in arrays:
      if hf.startswith("sequence_summary."):
        continue  # a head fine-tuned with --use_summ_proj=False
      raise ValueError(f"{source} lacks {name}, which the {architecture} head needs.")
    weights[hf] = arrays[name].T if transposed else arrays[name]
  for i in range(c.n_layer):
    for hf, (name, transposed) in _LAYER_NAMES.items():
      array = arrays[f"model/transformer/layer_{i}/{name}"]
      weights[f"transformer.layer.{i}.{hf}"] = array.T if transposed else array
    for name in _STACKED:
      array = arrays[f"model/transformer/{name}"]
      weights[f"transformer.layer.{i}.rel_attn.{name}"] = array[i] if c.untie_r or name == "seg_embed" else array
  if architecture != "XLNetForQuestionAnswering":
    for name in [n for n in arrays if n.startswith("model/sequnece_summary/") and "/summary/" not in n][:1]:
      notes.append(f"{source}: the `attn` summary's weights ({name}, ...) are not exported; HF has no `attn` summary.")
  config = dict(
      model_type="xlnet", architectures=[architecture], vocab_size=c.n_token, d_model=c.d_model, n_layer=c.n_layer,
      n_head=c.n_head, d_head=c.d_head, d_inner=c.d_inner,
      ff_activation="gelu_new" if c.ff_activation == "gelu" else c.ff_activation, untie_r=c.untie_r,
      attn_type="bi", layer_norm_eps=1e-12, summary_type=summary_type,
      summary_use_proj="sequence_summary.summary.weight" in weights, summary_activation="tanh",
      summary_last_dropout=0.1, dropout=0.1, tie_word_embeddings=True)
  if "logits_proj.weight" in weights and architecture == "XLNetForSequenceClassification":
    n_labels = weights["logits_proj.weight"].shape[0]
    config["id2label"] = {str(i): f"LABEL_{i}" for i in range(n_labels)}
    config["label2id"] = {f"LABEL_{i}": i for i in range(n_labels)}
    config["finetuning_task"] = scope.split("/")[1].split("_", 1)[1]
    if scope.startswith("model/regression_"):
      config["problem_type"] = "regression"
  return config, {k: np.ascontiguousarray(v, np.float32) for k, v in weights.items()}, notes
