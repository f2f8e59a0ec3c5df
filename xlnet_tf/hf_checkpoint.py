"""HuggingFace XLNet checkpoints <-> the original's (TF1) variable names and layouts.

An HF model directory holds `config.json` and its weights in one of: `model.safetensors` (or shards with
`model.safetensors.index.json`), `pytorch_model.bin` (or shards with `pytorch_model.bin.index.json`; read without
torch by `torch_pickle.py`) or `tf_model.h5` (transformers' TF classes, Keras 2 h5). Every format is read into
PyTorch names and layouts (`transformer.layer.0.ff.layer_1.weight` [d_inner, d_model]) by `hf_weights.py`; one
table, here, maps those to the original's names (`hf_export.py` reads it the other way):

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
HF keeps one copy of the attention biases per layer. With `untie_r: false` and equal copies (a tied model's export)
they become the original's one shared array; else its untied arrays, with a note where config.json said false.
"""

import json
import os
import re

import numpy as np

from xlnet_tf import fileio
from xlnet_tf.config import XLNetConfig, is_head_name
from xlnet_tf.hf_weights import WEIGHT_FILES, check_size, float32_weight, read_weights, unread_note

CONFIG_FILE = "config.json"
SUMMARY_TYPES = ("last", "first", "mean")  # what HF's SequenceSummary and the original both compute

# {HF name: (original name, transposed)}, `{i}` a layer, `{scope}` the classification scope.
LAYER_NAMES = {
    **{f"rel_attn.{w}": (f"rel_attn/{w}/kernel", False) for w in "qkvor"},
    **{f"{block}.layer_norm.{hf}": (f"{block}/LayerNorm/{tf1}", False)
       for block in ("rel_attn", "ff") for hf, tf1 in (("weight", "gamma"), ("bias", "beta"))},
    **{f"ff.layer_{n}.{hf}": (f"ff/layer_{n}/{tf1}", hf == "weight")
       for n in (1, 2) for hf, tf1 in (("weight", "kernel"), ("bias", "bias"))},
}
STACKED = ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")  # per layer in HF, one array in the original
BACKBONE = {"transformer.word_embedding.weight": ("model/transformer/word_embedding/lookup_table", False),
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
    "XLNetForMultipleChoice": {**_SUMMARY, **_PROJ}, "XLNetForQuestionAnswering": _QA}
RACE_SCOPE = "logits/dense"  # the original run_race.py's `tf.variable_scope("logits")` + dense
POOLING = ("XLNetForSequenceClassification", "XLNetForMultipleChoice")  # the heads on HF's SequenceSummary


def original_shapes(c):
  """{original backbone name: shape} of an XLNetConfig."""
  bias = [c.n_layer, c.n_head, c.d_head] if c.untie_r else [c.n_head, c.d_head]
  shapes = {"model/transformer/word_embedding/lookup_table": [c.n_token, c.d_model],
            "model/transformer/seg_embed": [c.n_layer, 2, c.n_head, c.d_head],
            **{f"model/transformer/{n}": bias for n in STACKED[:3]}}
  for i in range(c.n_layer):
    prefix = f"model/transformer/layer_{i}/"
    shapes.update({prefix + f"rel_attn/{w}/kernel": [c.d_model, c.n_head, c.d_head] for w in "qkvor"})
    shapes.update({prefix + f"{b}/LayerNorm/{g}": [c.d_model] for b in ("rel_attn", "ff") for g in ("gamma", "beta")})
    shapes.update({prefix + "ff/layer_1/kernel": [c.d_model, c.d_inner], prefix + "ff/layer_1/bias": [c.d_inner],
                   prefix + "ff/layer_2/kernel": [c.d_inner, c.d_model], prefix + "ff/layer_2/bias": [c.d_model]})
  return shapes


def hf_shapes(c, num_labels):
  """{HF name: shape} of every weight an HF model of XLNetConfig `c` may hold (PyTorch's layouts; `num_labels`)."""
  d, shapes = c.d_model, original_shapes(c)
  expected = {"transformer.word_embedding.weight": [c.n_token, d], "transformer.mask_emb": [1, 1, d],
              "lm_loss.bias": [c.n_token], "sequence_summary.summary.weight": [d, d],
              "sequence_summary.summary.bias": [d], "logits_proj.weight": [num_labels, d],
              "logits_proj.bias": [num_labels], "start_logits.dense.weight": [1, d], "start_logits.dense.bias": [1],
              "end_logits.LayerNorm.weight": [d], "end_logits.LayerNorm.bias": [d],
              "end_logits.dense_1.weight": [1, d], "end_logits.dense_1.bias": [1],
              "answer_class.dense_1.weight": [1, d],
              **{f"{head}.dense_0.{w}": [d, 2 * d] if w == "weight" else [d]
                 for head in ("end_logits", "answer_class") for w in ("weight", "bias")}}
  for i in range(c.n_layer):
    for hf, (name, transposed) in LAYER_NAMES.items():
      shape = shapes[f"model/transformer/layer_{i}/{name}"]
      expected[f"transformer.layer.{i}.{hf}"] = shape[::-1] if transposed else shape
    for name in STACKED:  # one row of the original's untied [n_layer, ...] array per HF layer
      expected[f"transformer.layer.{i}.rel_attn.{name}"] = shapes["model/transformer/seg_embed"][1:] if (
          name == "seg_embed") else [c.n_head, c.d_head]
  return expected


def is_hf_directory(path):
  """Whether `path` is a directory with `config.json` and HF weights (not a TF1 checkpoint)."""
  return bool(path) and fileio.isdir(path) and fileio.exists(os.path.join(path, CONFIG_FILE)) and any(
      fileio.exists(os.path.join(path, name)) for name in WEIGHT_FILES)


def hub_snapshot(path):
  """The model directory in a HuggingFace hub cache (`models--xlnet--xlnet-base-cased`: `refs/main` names a commit,
  `snapshots/<commit>/` links into `blobs/`): `snapshots/<refs/main>`, else its only snapshot; None where `path` is no
  such directory. A refs/main naming no snapshot there (sweep 21 C2), or several and none named: a ValueError."""
  snapshots, ref, commit = os.path.join(path, "snapshots"), os.path.join(path, "refs", "main"), ""
  if not fileio.isdir(snapshots) or is_hf_directory(path):
    return None
  names = sorted(fileio.listdir(snapshots))
  try:
    if fileio.exists(ref):
      with fileio.open_file(ref) as f:
        commit = f.read().strip()
  except (OSError, UnicodeDecodeError) as e:  # a directory there said "[Errno 21] Is a directory" alone (sweep 27)
    commit = f"nothing readable ({getattr(e, 'strerror', None) or e})"
  if (commit or len(names) == 1) and commit in names + [""]:
    return os.path.join(snapshots, commit or names[0])
  raise ValueError(f"{path} is a HuggingFace hub cache directory with snapshots {', '.join(names) or 'none'} and "
                   + (f"a refs/main naming {commit}, not one of them (a download cut short?)" if commit else
                      "no refs/main naming one of them") + f". Pass the snapshot to read: {snapshots}/<commit>.")


_MODEL_FILES = (CONFIG_FILE, "spiece.model", "tokenizer.json", "tokenizer_config.json")  # beside the weights


def require_config(directory):
  """FileNotFoundError where `directory` holds part of an HF model directory and no TF checkpoint (`*.index`),
  naming what is missing: weights without `config.json`; a weights file that is a broken link (a download cut
  short); weight shards without their index; a config or tokenizer without weights."""
  if fileio.is_remote(directory) or fileio.glob_in(directory, "*.index"):
    return
  broken = [name for name in WEIGHT_FILES if os.path.islink(os.path.join(directory, name))
            and not os.path.exists(os.path.join(directory, name))]
  if broken:
    raise FileNotFoundError(f"{os.path.join(directory, broken[0])} is a broken link (a download cut short?). "
                            "Download the model again.")
  weights = [name for name in WEIGHT_FILES if fileio.exists(os.path.join(directory, name))]
  if weights and not fileio.exists(os.path.join(directory, CONFIG_FILE)):
    raise FileNotFoundError(f"{directory} holds HuggingFace weights ({weights[0]}) but no {CONFIG_FILE}. Put the "
                            f"model's {CONFIG_FILE} (downloaded with the weights) into {directory}, then rerun.")
  if weights:
    return
  for pattern, index in (("*-of-*.safetensors", "model.safetensors.index.json"),
                         ("*-of-*.bin", "pytorch_model.bin.index.json")):
    shards = fileio.glob_in(directory, pattern)
    if shards:
      raise FileNotFoundError(f"{directory} holds weight shards ({os.path.basename(shards[0])}, ...) but not their "
                              f"index {index}. Download it too.")
  present = [name for name in _MODEL_FILES if fileio.exists(os.path.join(directory, name))]
  if present:
    raise FileNotFoundError(f"{directory} holds {', '.join(present)} but no model weights (none of "
                            f"{', '.join(WEIGHT_FILES)}, and no TF checkpoint). Download the weights too.")


def read_config(directory):
  """The HF `config.json` of `directory` as a dict, its pooling in this port's names (`hf_summary_type`); a ValueError
  for a model type other than xlnet, a field of the wrong kind, or a setting computed otherwise here (`_check_settings`)."""
  path = os.path.join(directory, CONFIG_FILE)
  try:
    with fileio.open_file(path) as f:
      config = json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise ValueError(f"{path} is not valid json ({e}). Pass a HuggingFace XLNet model directory.") from None
  if not isinstance(config, dict):
    raise ValueError(f"{path} holds a json {type(config).__name__}, not an object of settings. Pass a HuggingFace "
                     "XLNet model directory.")
  if config.get("model_type") != "xlnet":  # none: a config of transformers before 2.x
    raise ValueError(f"{path} has model_type {config.get('model_type')!r}, not 'xlnet'. Pass an XLNet model" + (
        " (if it is one, add \"model_type\": \"xlnet\" to its config)." if "model_type" not in config else "."))
  _check_settings(config, path)
  names = config.get("architectures") or []
  for key, fits, what in (  # else a traceback (sweep 28, A8; sweep 30, U3)
      ("architectures", isinstance(names, str) or isinstance(names, list) and all(isinstance(n, str) for n in names),
       'a list of class names (as ["XLNetLMHeadModel"])'),
      ("id2label", isinstance(config.get("id2label") or {}, dict), 'an object of class names (as {"0": "neg"})'),
      ("finetuning_task", isinstance(config.get("finetuning_task") or "", str), 'a string (as "sst-2")')):
    if not fits:
      raise ValueError(f"{path}: {key} {json.dumps(config[key])} is not {what}. Use the config.json that came with "
                       "the weights.")
  if architecture_of(config, {}) in POOLING:
    config = dict(config, summary_type=hf_summary_type(config, path))
  return config


def _check_settings(config, path):
  """ValueError naming the field of the HF config dict (`path`) with which transformers computes the model otherwise
  than the tools here: attention both ways (`attn_type` bi), forward positions (`bi_data` false), a number clamp_len.
  Unchecked, changing no output here: `same_length` (read with uni only), `mem_len`, `reuse_len` (the mems returned)."""
  attn_type = config.get("attn_type", "bi")
  if attn_type != "bi":
    how = "one-way (causal) attention" if attn_type == "uni" else "no attention it knows (it refuses the value)"
    raise ValueError(f"{path}: attn_type {attn_type!r}: transformers computes this model with {how}, the tools here "
                     "with the original's fine-tuning attention 'bi' (every token sees every other). Set attn_type to "
                     f"\"bi\" in {path} if the model was trained so; a model trained with 'uni' cannot be used here.")
  if config.get("bi_data"):
    raise ValueError(f"{path}: bi_data {config['bi_data']!r}: transformers computes the second half of each batch "
                     "with backward positions (the original's pretraining streams); fine-tuning here, as in the "
                     "original, computes forward positions only, and run_pretrain.py takes them from --bi_data. The "
                     f"weights are the same either way: set bi_data to false in {path} to use them.")
  clamp_len = config.get("clamp_len", -1)
  if clamp_len is not None and not _is_number(clamp_len):
    raise ValueError(f"{path}: clamp_len {clamp_len!r} is not a number. Set it to -1 (no clamping).")


def clamp_of(value):
  """A clamp_len as it acts: the clamp above 0, else -1 (0, -1, any negative value and None clamp nothing)."""
  return value if _is_number(value) and value > 0 else -1


def check_clamp_len(config, path, clamp_len, flag):
  """ValueError where the HF config dict (`path` its config.json; `flag` names its directory) clamps relative
  positions (clamp_len above 0) otherwise than this run's --clamp_len `clamp_len`: tokens would be placed otherwise."""
  there = clamp_of(config.get("clamp_len"))
  if there > 0 and there != clamp_of(clamp_len):
    raise ValueError(f"{flag} {os.path.dirname(path)} clamps relative positions at {there} (clamp_len in {path}: "
                     f"how transformers computes it), this run at {clamp_len} (--clamp_len): the same weights would "
                     f"place tokens otherwise. Pass --clamp_len={there}.")


def hf_summary_type(config, source):
  """The pooling of an HF classification or multiple-choice config dict in this port's (the original's) names:
  `summary_type`, `cls_index` read as `last` (transformers' XLNet heads pass no cls_index, and its SequenceSummary
  then takes the last token); a ValueError naming `source` for `attn` (transformers raises NotImplementedError for
  it, so no model was fine-tuned with it there) or another value, and for a `summary_activation` other than the
  original's: tanh inside the projection, none without one (transformers applies it with or without)."""
  activation, use_proj = config.get("summary_activation", "tanh"), config.get("summary_use_proj", True)
  if use_proj and activation != "tanh":
    raise ValueError(f"{source}: summary_activation {activation!r} cannot be expressed; the original's summary "
                     "projection is tanh.")
  if not use_proj and activation:
    raise ValueError(f"{source}: summary_use_proj false with summary_activation {activation!r}: transformers "
                     "applies it to the pooled hidden state itself, which the original's pooling cannot express. Set "
                     "summary_activation to null in config.json if the head was fine-tuned without it (earlier "
                     "exports of this port wrote tanh there); otherwise the model cannot be used here.")
  summary = config.get("summary_type", "last")
  if summary == "cls_index":
    return "last"
  if summary == "attn":
    raise ValueError(f"{source}: summary_type 'attn' cannot be used: transformers cannot run it either (its "
                     "SequenceSummary raises NotImplementedError), so the head was fine-tuned with another pooling. "
                     "Set summary_type in config.json to that one (last, first or mean).")
  if summary not in SUMMARY_TYPES:
    raise ValueError(f"{source}: summary_type {summary!r} is no pooling of transformers' XLNet (last, first, mean, "
                     "cls_index). Set summary_type in config.json to the one the head was fine-tuned with.")
  return summary


# ----- HF -> the original. ----------------------------------------------------------------------------------

_HF_SIZES = {"n_layer": 24, "d_model": 1024, "n_head": 16, "d_inner": 4096, "vocab_size": 32000}  # HF's defaults
_HF_OLD_NAMES = {"n_layer": "num_hidden_layers", "d_model": "hidden_size", "n_head": "num_attention_heads",
                 "vocab_size": "n_token"}  # read by transformers where the new name is not given (its attribute_map)


def _is_number(value):
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_size(value):
  return isinstance(value, int) and not isinstance(value, bool) and value > 0


def xlnet_config_from_hf(config, weights, source):
  """(XLNetConfig, notes) of an HF config dict, checked against the weights' shapes (None: not checked)."""
  activation, notes = config.get("ff_activation", "gelu"), []
  if activation == "gelu":
    notes.append("ff_activation 'gelu' in HF is the exact (erf) GELU; the original's gelu (and this port's) is the "
                 "tanh approximation (HF's gelu_new), which the released XLNet weights were trained with. Outputs "
                 "differ from transformers' by the difference of the two.")
  elif activation not in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu"):  # the three: one tanh GELU
    raise ValueError(f"{source}: ff_activation {activation!r} has no counterpart in the original XLNet (relu, gelu = "
                     "HF gelu_new/gelu_pytorch_tanh/gelu_fast): this model cannot be read here. Use transformers.")
  eps = config.get("layer_norm_eps", 1e-12)
  if not _is_number(eps) or abs(eps - 1e-12) > 1e-15:
    raise ValueError(f"{source}: layer_norm_eps {eps!r} cannot be expressed; the original XLNet uses 1e-12.")
  sizes = {key: config.get(key, config.get(_HF_OLD_NAMES.get(key), default)) for key, default in _HF_SIZES.items()}
  derived = sizes["d_model"] // sizes["n_head"] if _is_size(sizes["d_model"]) and _is_size(sizes["n_head"]) else 1
  sizes["d_head"] = config.get("d_head", derived)  # HF's XLNetConfig: d_model // n_head
  bad = [f"{key} {value!r}" for key, value in sizes.items() if not _is_size(value)]
  if bad:
    raise ValueError(f"{source}: config.json's sizes must be positive integers; received {', '.join(bad)}. Use the "
                     "config.json that came with the weights.")
  n_layer, d_model, n_head = sizes["n_layer"], sizes["d_model"], sizes["n_head"]
  untie_r = config.get("untie_r", True)
  if not isinstance(untie_r, bool):
    raise ValueError(f"{source}: untie_r {untie_r!r} is not true or false. Use the config.json that came with the "
                     "weights.")
  fields = dict(n_layer=n_layer, d_model=d_model, n_head=n_head, d_head=sizes["d_head"], d_inner=sizes["d_inner"],
                ff_activation="relu" if activation == "relu" else "gelu", untie_r=untie_r, n_token=sizes["vocab_size"])
  if weights is None:
    return XLNetConfig(**fields), notes
  expected = {"transformer.word_embedding.weight": [fields["n_token"], d_model],
              "transformer.layer.0.rel_attn.q": [d_model, n_head, fields["d_head"]],
              "transformer.layer.0.ff.layer_1.weight": [fields["d_inner"], d_model]}
  bad = [f"{name} is {list(weights[name].shape)}, the config says {shape}" for name, shape in expected.items()
         if name in weights and list(weights[name].shape) != shape]
  numbers = {m.group(1) for m in map(re.compile(r"^transformer\.layer\.(\d+)\.").match, weights) if m}
  if zeros := sorted(n for n in numbers if n != str(int(n))):  # a KeyError traceback (sweep 33, A7)
    raise ValueError(f"{source}: its weights name a layer transformer.layer.{zeros[0]}, which no transformers model "
                     "writes (renamed weights). Download the model again.")
  if len(layers := set(map(int, numbers))) != n_layer or layers != set(range(n_layer)):  # n_layer=1e9 (A6)
    bad.append(f"the weights hold layers {sorted(layers)[:20]}, the config says n_layer={n_layer}")
  if bad:
    defaulted = [key for key in _HF_SIZES if key not in config and _HF_OLD_NAMES.get(key) not in config]
    taken = (f" (it has no {', '.join(defaulted)}: transformers' default "
             f"{', '.join(str(_HF_SIZES[key]) for key in defaulted)} taken, as transformers does)" if defaulted else "")
    raise ValueError(f"{source}: config.json does not match the weights{taken}: {'; '.join(bad)}. Use the "
                     "config.json that came with the weights.")
  if not untie_r and not _equal_copies(weights, n_layer):  # once the layers are counted (n_layer=1e9; sweep 33, A6)
    fields["untie_r"] = True
    notes.append(f"{source}: config.json says untie_r false, but its layers' attention biases differ (transformers "
                 "trains one copy per layer): they are read per layer, as untie_r true.")
  return XLNetConfig(**fields), notes


def _equal_copies(weights, n_layer):
  """Whether each attention bias of the HF `weights` has the same value in every layer (a tied model's copies)."""
  copies = [[weights.get(f"transformer.layer.{i}.rel_attn.{name}") for i in range(n_layer)] for name in STACKED[:3]]
  return all(all(c is not None and np.array_equal(c, layers[0]) for c in layers) for layers in copies)


def architecture_of(config, weights):
  """The HF class of a model directory: `architectures[0]` of its config, else what its weights hold."""
  architectures = config.get("architectures") or []
  if isinstance(architectures, str):  # one name where transformers writes a list of them
    architectures = [architectures]
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
  if not is_head_name(task):  # a head no tool could load: a TensorFlow scope takes no '/', space or ':'
    raise ValueError(f"The task name {task!r} (the HF config's finetuning_task, or --task_name) cannot name a head "
                     "scope (letters, digits, '_', '.' and '-' only). Pass --task_name, the task the head was "
                     "fine-tuned for (e.g. mnli).")
  num_labels = len(config.get("id2label") or {}) or config.get("num_labels", 2)
  regression = config.get("problem_type") == "regression" or num_labels == 1
  return f"{'regression' if regression else 'classification'}_{task}"


def hf_to_original(config, weights, source, task_name=None, cls_scope=None):
  """(XLNetConfig, {original name: float32 array}, info: `architecture`, `notes` (lines to log), ...) of an HF model's
  config dict and weights; `cls_scope`: a sequence-classification head's scope (None: from `task_name`)."""
  xlnet_config, notes = xlnet_config_from_hf(config, weights, source)
  architecture = architecture_of(config, weights)
  if architecture not in ARCHITECTURES:
    raise ValueError(f"{source}: unknown head {architecture} (the original XLNet has no counterpart). Convertible: "
                     f"{', '.join(ARCHITECTURES)}.")
  weights = dict(weights)
  tied = weights.pop("lm_loss.weight", None)
  if tied is not None and not np.array_equal(tied, weights.get("transformer.word_embedding.weight")):
    raise ValueError(f"{source}: lm_loss.weight differs from the word embedding; the original ties them.")
  if architecture == "XLNetForSequenceClassification" and config.get("problem_type") == "multi_label_classification":
    raise ValueError(f"{source}: problem_type multi_label_classification (a sigmoid a class, any number of them true) "
                     "cannot be computed by the original's classifier (a softmax: one class a text). Use "
                     "transformers for this model.")  # sweep 33, A5
  if architecture == "XLNetForMultipleChoice":
    scope = RACE_SCOPE
  else:
    scope = f"model/{cls_scope or classification_scope(config, task_name)}/logit"
  table = {**BACKBONE, **ARCHITECTURES[architecture]}
  summary = hf_summary_type(config, source) if architecture in POOLING else config.get("summary_type", "last")
  use_proj = config.get("summary_use_proj", True)  # without it, the heads have no summary projection
  expected = [*(n for n in table if use_proj or not n.startswith("sequence_summary.")),
              *(f"transformer.layer.{i}.{n}" for i in range(xlnet_config.n_layer) for n in LAYER_NAMES)]
  missing = [n for n in expected if n not in weights]
  heads = sorted({n.split(".")[0] for n in weights for h in ARCHITECTURES.values() if n in h})
  if missing and not set(missing) - set(ARCHITECTURES[architecture]) and heads:  # another head: not the download's
    raise ValueError(f"{source}: config.json's architectures names {architecture}, whose {missing[0]} the weights "
                     f"lack; they hold {', '.join(heads)}: another head. Fix architectures in config.json.")
  if missing:
    raise ValueError(f"{source} ({architecture}) lacks {', '.join(missing[:4])}"
                     f"{f' and {len(missing) - 4} more' if len(missing) > 4 else ''}: its weights are incomplete (a "
                     "download cut short, or a shard left out). Download the model again.")
  # Every weight's shape (layer 0's, checked against the config, says the config fits) and type, before any is used.
  classes = (np.shape(weights["logits_proj.weight"]) or (0,))[0] if "logits_proj.weight" in weights else 0
  named = len(config.get("id2label") or {})
  if architecture == "XLNetForSequenceClassification" and named and classes and named != classes:
    raise ValueError(f"{source}: its config.json's id2label names {named} classes, its classification head has "
                     f"{classes}: the config is of another model. Download the model again, or fix id2label.")
  shapes = hf_shapes(xlnet_config, classes)
  arrays, stacked, unknown = {}, {n: {} for n in STACKED}, []
  for name, array in weights.items():
    layer = re.match(r"^transformer\.layer\.(\d+)\.(.+)$", name)
    if layer and layer.group(2) in LAYER_NAMES:
      target, transposed = LAYER_NAMES[layer.group(2)]
      target = f"model/transformer/layer_{layer.group(1)}/{target}"
    elif layer and layer.group(2).startswith("rel_attn.") and layer.group(2)[9:] in STACKED:
      stacked[layer.group(2)[9:]][int(layer.group(1))] = float32_weight(name, array, source, shapes[name])
      continue
    elif name in table and not (name.startswith("sequence_summary.") and not use_proj):
      target, transposed = table[name]
      target = target.format(scope=scope)
    elif name in table:  # a projection the pooling does not use: transformers leaves it out too
      notes.append(f"{source}: {name} is left out: summary_use_proj is false, so the head pools without it.")
      continue
    else:
      unknown.append(name)
      continue
    array = float32_weight(name, array, source, shapes[name])
    arrays[target] = array.T if transposed else array
  if unknown:
    raise ValueError(f"{source} ({architecture}) has weights the original XLNet lacks (an unknown head): "
                     f"{', '.join(sorted(unknown)[:6])}. Convertible heads: LM, sequence classification, multiple "
                     "choice, question answering (XLNetForQuestionAnswering).")
  for name, per_layer in stacked.items():
    if sorted(per_layer) != list(range(xlnet_config.n_layer)):
      raise ValueError(f"{source}: rel_attn.{name} is missing in some layers. Download the model again.")
    stack = np.stack([per_layer[i] for i in range(xlnet_config.n_layer)])
    tied = not xlnet_config.untie_r and name != "seg_embed"  # every layer's copy equal (`xlnet_config_from_hf`)
    arrays[f"model/transformer/{name}"] = stack[0] if tied else stack
  fine_tuned_with = {}  # what a run_flags.json beside the converted model keeps (`convert.convert_to_original`)
  if clamp_of(config.get("clamp_len")) > 0:  # the tools compare it with --clamp_len (`run_files.check_trained_model`)
    fine_tuned_with["clamp_len"] = config["clamp_len"]
  if architecture in POOLING:
    notes.append(f"The HF model pools with summary_type {summary!r} (use_proj {config.get('summary_use_proj', True)}"
                 f"): pass --summary_type={summary} when fine-tuning or predicting with it.")
    fine_tuned_with.update(summary_type=summary, use_summ_proj=config.get("summary_use_proj", True))
    if labels := named_labels(config):  # HF's names: the tools may name the classes otherwise (run_classifier)
      fine_tuned_with.update(label_list=labels, labels_from="id2label")
  return xlnet_config, arrays, dict(architecture=architecture, notes=notes, summary_type=summary,
                                    fine_tuned_with=fine_tuned_with)


def named_labels(config):
  """The class names of an HF config.json's id2label, in the order of the logits; None where it names none (the
  generic LABEL_i of a model saved without names, an incomplete map, a name given twice: sweep 33, A10)."""
  id2label = config.get("id2label") or {}
  labels = [id2label.get(str(i), id2label.get(i)) for i in range(len(id2label))]
  labels = [label if label is None else str(label) for label in labels]  # a number names a class (sweep 33, A8)
  named = len(set(labels)) == len(labels) > 1 and None not in labels
  return labels if named and labels != [f"LABEL_{i}" for i in range(len(labels))] else None


def read_hf_checkpoint(directory, task_name=None, cls_scope=None):
  """(XLNetConfig, {original name: array}, info) of an HF model directory; info adds `description`. A ValueError
  names the other weights files there, unread (`hf_weights.unread_note`)."""
  config = read_config(directory)
  weights, weights_file = read_weights(directory)
  try:
    xlnet_config, arrays, info = hf_to_original(config, weights, os.path.join(directory, weights_file), task_name,
                                                cls_scope)
  except ValueError as e:
    raise (ValueError(f"{e} ({note})") if (note := unread_note(directory, weights_file)) else e) from None
  info["description"] = f"HuggingFace {info['architecture']}, {weights_file}"
  return xlnet_config, arrays, info


def model_config(model_config_path, init_checkpoint, flag="--init_checkpoint", clamp_len=None):
  """The XLNetConfig of --model_config_path, else of the HF model directory --init_checkpoint (`flag` names it in
  the messages); where both are given, a ValueError unless they describe the same model (its weights could not be
  loaded, or would compute another function); with `clamp_len` (--clamp_len), a ValueError where the HF model
  clamps otherwise (`check_clamp_len`)."""
  if init_checkpoint and fileio.isdir(init_checkpoint):
    require_config(init_checkpoint)  # a directory without weights says so, not that a config is missing
  path = os.path.join(init_checkpoint, CONFIG_FILE) if is_hf_directory(init_checkpoint) else None
  xlnet_config = XLNetConfig(json_path=model_config_path) if model_config_path else None
  hf = read_config(init_checkpoint) if path else None
  if hf is not None and clamp_len is not None:
    check_clamp_len(hf, path, clamp_len, flag)
  weights = read_weights(init_checkpoint)[0] if hf and hf.get("untie_r") is False else None  # tied: if equal
  hf_config = check_size(xlnet_config_from_hf(hf, weights, path)[0], init_checkpoint, path) if path else None
  if xlnet_config is None:
    if hf_config is None:
      raise ValueError("--model_config_path is required (the xlnet_config.json of the model), unless "
                       f"{flag} is a HuggingFace model directory with config.json.")
    return hf_config
  diff = [f"{k} {hf} vs {ours}" for k, hf, ours in hf_config.differences(xlnet_config)] if hf_config else []
  if diff:
    raise ValueError(f"{flag} {init_checkpoint} is a HuggingFace model other than --model_config_path "
                     f"{model_config_path} describes ({path} vs {model_config_path}: {'; '.join(diff)}). Drop "
                     f"--model_config_path ({path} then gives the model), or pass the xlnet_config.json of that "
                     "model.")
  return xlnet_config
