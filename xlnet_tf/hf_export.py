"""The original's checkpoint arrays -> a HuggingFace XLNet model (config dict and weights in PyTorch names and
layouts), by `hf_checkpoint`'s name map read the other way; `convert.py` writes the directory."""

import re

import numpy as np

from xlnet_tf.hf_checkpoint import (ARCHITECTURES, BACKBONE, LAYER_NAMES, POOLING, RACE_SCOPE, STACKED,
                                    SUMMARY_TYPES, hf_shapes, original_shapes)


def check_config(arrays, xlnet_config, source):
  """ValueError unless the backbone of {original name: array} has the shapes of xlnet_config (every one present)."""
  bad = [f"{n}: {'missing' if n not in arrays else list(arrays[n].shape)} (config: {s})"
         for n, s in original_shapes(xlnet_config).items() if n not in arrays or list(arrays[n].shape) != s]
  if bad:
    raise ValueError(f"{source}: the config does not match the checkpoint: {'; '.join(bad[:3])}"
                     f"{f'; and {len(bad) - 3} more' if len(bad) > 3 else ''}. Pass the xlnet_config.json that came "
                     "with it (--model_config_path).")


def _export_head(arrays, task_name, source):
  """(HF architecture, the scope its `{scope}` names stand for) of the head a checkpoint holds."""
  cls_scopes = sorted({m.group(1) for m in map(re.compile(r"^model/((?:classification|regression)_.+)/logit/kernel$")
                                               .match, arrays) if m})
  heads = [("XLNetForSequenceClassification", f"model/{s}/logit") for s in cls_scopes]
  if task_name:  # a checkpoint without any: the flag named a head that is not there (it was silently unused)
    picked = [h for h in heads if h[1] in (f"model/classification_{task_name.lower()}/logit",
                                           f"model/regression_{task_name.lower()}/logit")]
    if not picked:  # the advice listed the scopes, which as --task_name were refused again (sweep 28, A2)
      names = ", ".join(f"--task_name={scope.split('_', 1)[1]}" for scope in cls_scopes)
      raise ValueError(f"{source} has no classification_{task_name.lower()} or regression_{task_name.lower()} head "
                       f"(its classification heads: {cls_scopes or 'none'}). "
                       f"{f'Pass {names}.' if cls_scopes else 'Leave --task_name unset.'}")
    return picked[0]
  if "start_logits/dense/kernel" in arrays:
    heads.append(("XLNetForQuestionAnswering", None))
  if f"{RACE_SCOPE}/kernel" in arrays:
    heads.append(("XLNetForMultipleChoice", RACE_SCOPE))
  if len(heads) > 1:
    raise ValueError(f"{source} holds several heads ({', '.join(h[1] or h[0] for h in heads)}); HF holds one. Pass "
                     "--task_name=X to export the head classification_X (or regression_X).")
  return heads[0] if heads else ("XLNetLMHeadModel", None)


def original_to_hf(arrays, xlnet_config, source, summary_type="last", task_name=None, allow_d_head_override=False,
                   label_list=None, clamp_len=None):
  """(HF config dict, {HF name: array}, notes) of an original checkpoint's arrays and its XLNetConfig.

  Args:
    arrays: {original name: array} (optimizer slots and global_step may be present; they are dropped).
    summary_type: the pooling the HF config states (the original's is a flag, not stored in the checkpoint).
    task_name: picks the `classification_{task_name}` (or `regression_`) head when the checkpoint has several.
    allow_d_head_override: write a config with d_head != d_model / n_head (transformers refuses to load it unless
      `d_head` is set on the config object after construction; for tests).
    label_list: the class names of a classification head (logit i is label_list[i]; run_classifier.py's
      run_flags.json records them) for config.json's id2label; None: LABEL_i; another count than the head's classes:
      a ValueError (another run's file).
    clamp_len: the --clamp_len the checkpoint was trained with; above 0, config.json's clamp_len (transformers
      then clamps as the run did); else none is written (transformers' default -1: no clamping).
  """
  c = xlnet_config
  if summary_type not in SUMMARY_TYPES:
    raise ValueError(f"--summary_type {summary_type!r} cannot be exported: HF's XLNet pools with one of "
                     f"{SUMMARY_TYPES} (it has no `attn`).")
  check_config(arrays, c, source)
  architecture, scope = _export_head(arrays, task_name, source)
  if c.d_head * c.n_head != c.d_model and not allow_d_head_override:
    raise ValueError(f"{source}: d_head={c.d_head} is not d_model / n_head = {c.d_model} / {c.n_head}; HuggingFace's "
                     "XLNetConfig fixes d_head = d_model // n_head, so transformers cannot load this model. Keep it "
                     "in the original format (this port loads it).")
  notes, weights, origin = [], {}, {}  # origin: {HF name: the original's}
  for hf, (name, transposed) in {**BACKBONE, **ARCHITECTURES[architecture]}.items():
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
    weights[hf], origin[hf] = arrays[name].T if transposed else arrays[name], (name, transposed)
  for i in range(c.n_layer):
    for hf, (name, transposed) in LAYER_NAMES.items():
      name = f"model/transformer/layer_{i}/{name}"
      weights[f"transformer.layer.{i}.{hf}"] = arrays[name].T if transposed else arrays[name]
      origin[f"transformer.layer.{i}.{hf}"] = name, transposed
    for name in STACKED:
      array = arrays[f"model/transformer/{name}"]
      weights[f"transformer.layer.{i}.rel_attn.{name}"] = array[i] if c.untie_r or name == "seg_embed" else array
      origin[f"transformer.layer.{i}.rel_attn.{name}"] = f"model/transformer/{name}", False
  classes = (np.shape(weights["logits_proj.weight"]) or (1,))[0] if "logits_proj.weight" in weights else 1
  shapes = hf_shapes(c, classes)
  for hf, array in weights.items():  # the head's too: written as it was (sweep 33, A3); integers were cast (A4)
    (name, transposed), array = origin[hf], np.asarray(array)
    if array.dtype.kind in "biuOSU" or list(array.shape) != shapes[hf]:
      shape, expected = (array.shape[::-1], shapes[hf][::-1]) if transposed else (array.shape, shapes[hf])
      raise ValueError(f"{source}: {name} is {array.dtype} of shape {list(shape)}, where a model of its config holds "
                       f"floating-point weights of shape {list(expected)}: the checkpoint is damaged or not this "
                       "model's. Use the checkpoint and xlnet_config.json that came together.")
  if architecture != "XLNetForQuestionAnswering":
    for name in [n for n in arrays if n.startswith("model/sequnece_summary/") and "/summary/" not in n][:1]:
      notes.append(f"{source}: the `attn` summary's weights ({name}, ...) are not exported; HF has no `attn` summary.")
  # A pooled head's config says how it pools. Without one (a pretrained model), the pooling a head made from it
  # gets (transformers' from_pretrained), as the original's fine-tuning default and the hub's configs: tanh
  # projection. It said none, which such a head then lacked (sweep 25, B2).
  projected = "sequence_summary.summary.weight" in weights or architecture not in POOLING
  config = dict(
      model_type="xlnet", architectures=[architecture], vocab_size=c.n_token, d_model=c.d_model, n_layer=c.n_layer,
      n_head=c.n_head, d_head=c.d_head, d_inner=c.d_inner,
      ff_activation="gelu_new" if c.ff_activation == "gelu" else c.ff_activation, untie_r=c.untie_r,
      attn_type="bi", layer_norm_eps=1e-12, summary_type=summary_type, summary_use_proj=projected,
      summary_activation="tanh" if projected else None,  # none without projection
      summary_last_dropout=0.1, dropout=0.1, tie_word_embeddings=True)
  if isinstance(clamp_len, int) and not isinstance(clamp_len, bool) and clamp_len > 0:
    config["clamp_len"] = clamp_len
  if "logits_proj.weight" in weights and architecture == "XLNetForSequenceClassification":
    n_labels = weights["logits_proj.weight"].shape[0]
    names = [str(n) for n in label_list or []]
    if names and len(names) != n_labels:  # another run's file: its pooling is not this head's either
      raise ValueError(f"The run_flags.json beside {source} lists {len(names)} labels, the checkpoint's classification "
                       f"head has {n_labels} classes: it is another run's. Move it away to convert without it.")
    if not len(names) == len(set(names)) == n_labels:
      names = [f"LABEL_{i}" for i in range(n_labels)]
    config["id2label"] = {str(i): name for i, name in enumerate(names)}
    config["label2id"] = {name: i for i, name in enumerate(names)}
    config["finetuning_task"] = scope.split("/")[1].split("_", 1)[1]
    if scope.startswith("model/regression_"):
      config["problem_type"] = "regression"
  return config, {k: np.ascontiguousarray(v, np.float32) for k, v in weights.items()}, notes
