"""Generates extra model goldens from an independent reference: HuggingFace `transformers==4.57.6` PyTorch XLNet.

The goldens in `tests/testdata/model/{untied,tied}_*.npz` come from the original TF1 code. This script adds cases
they lack (summary types `first`/`mean`, a 5-layer model with `d_head != d_model / n_head`, fine-tuning with
`reuse_len`, two-stream pretraining with `bi_data` + `clamp_len` on that deeper model) computed by HuggingFace's
XLNet, which is independent of both the original code and of this port. Every output is stored TIME-MAJOR, like
the original goldens; see `tests/testdata/model/HF_GOLDENS.md`.

The work runs in two Python environments, so that PyTorch never enters the project venv and TensorFlow never
enters the oracle venv. Run from the repository root:

  # TF side (project venv): write the random ckpt_deep checkpoint (only once; --force rewrites it, which is
  # deterministic), then dump every checkpoint's arrays by name to an npz in a scratch dir.
  .venv/bin/python tests/testdata/generate_hf_goldens.py make_ckpt
  .venv/bin/python tests/testdata/generate_hf_goldens.py dump --work_dir /tmp/hf_goldens_work

  # Oracle side (throwaway venv, never the project venv):
  python3 -m venv /tmp/oracle-venv
  /tmp/oracle-venv/bin/pip install torch==2.13.0 "transformers==4.57.6" numpy
  /tmp/oracle-venv/bin/python tests/testdata/generate_hf_goldens.py oracle --work_dir /tmp/hf_goldens_work

`oracle` first reproduces the original goldens with HF (and stops with an error if they differ by more than
`--tol`), then writes `tests/testdata/model/hf_*.npz`.

HuggingFace quirks handled here:
  * `XLNetConfig` forces `d_head = d_model // n_head`; the checkpoints use a different `d_head`, so the attribute
    is overwritten after construction and before the model is built.
  * HF takes batch-major inputs (`perm_mask` [B, I, J], `target_mapping` [B, P, L]); mems are time-major.
  * The original `gelu` is the tanh approximation = HF `gelu_new`.
  * `untie_r=False`: HF keeps one bias copy per layer; the shared [n_head, d_head] arrays go into every layer.
  * HF has no `inp_q`: the query stream exists only with `target_mapping`.
  * HF `cache_mem` keeps everything when `mem_len` is None/0 (the original returns None), so `mem_len` is always
    set to a positive value here, where both agree.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

MODEL_DIR = os.path.join("tests", "testdata", "model")
CKPT_NAME = "xlnet_model.ckpt"
CKPTS = ("ckpt_untied", "ckpt_tied", "ckpt_deep")

DEEP_CONFIG = {
  "n_layer": 5, "d_model": 12, "n_head": 3, "d_head": 5, "d_inner": 13, "ff_activation": "gelu",
  "untie_r": True, "n_token": 40,
}
DEEP_SEED = 7
DEEP_INIT_STD = 0.3
DEEP_LN_STD = 0.1
DEEP_CLS_SCOPE = "deep"
DEEP_N_CLASS = 4


# ----------------------------------------------------------------------------------------------------------------
# Small helpers shared by both sides.
# ----------------------------------------------------------------------------------------------------------------

def _fail(msg):
  sys.exit("generate_hf_goldens.py: " + msg)


def _atomic_savez(path, arrays):
  """Writes `arrays` (dict name -> array) to `path` as a compressed npz through a temp file + rename."""
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".npz")
  os.close(fd)
  try:
    np.savez_compressed(tmp, **arrays)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def _atomic_write_text(path, text):
  fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
  with os.fdopen(fd, "w") as f:
    f.write(text)
  os.chmod(tmp, 0o644)
  os.replace(tmp, path)


def _deep_variables(cfg, rng):
  """Returns [(name, array)] for ckpt_deep in the original graph's creation order, with random values."""
  n_layer, d_model, n_head, d_head = cfg["n_layer"], cfg["d_model"], cfg["n_head"], cfg["d_head"]
  d_inner, n_token = cfg["d_inner"], cfg["n_token"]

  def normal(*shape):
    return (rng.standard_normal(shape) * DEEP_INIT_STD).astype(np.float32)

  def gamma(*shape):
    return (1.0 + rng.standard_normal(shape) * DEEP_LN_STD).astype(np.float32)

  bias_shape = (n_layer, n_head, d_head) if cfg["untie_r"] else (n_head, d_head)
  t = "model/transformer/"
  out = [
    (t + "r_w_bias", normal(*bias_shape)),
    (t + "r_r_bias", normal(*bias_shape)),
    (t + "word_embedding/lookup_table", normal(n_token, d_model)),
    (t + "mask_emb/mask_emb", normal(1, 1, d_model)),
    (t + "r_s_bias", normal(*bias_shape)),
    (t + "seg_embed", normal(n_layer, 2, n_head, d_head)),
  ]
  for i in range(n_layer):
    p = t + "layer_%d/" % i
    # The two-stream graph creates k, v, r before q, o (as in the original oracle checkpoints' info files).
    for proj in ("k", "v", "r", "q", "o"):
      out.append((p + "rel_attn/%s/kernel" % proj, normal(d_model, n_head, d_head)))
    out += [
      (p + "rel_attn/LayerNorm/beta", normal(d_model)),
      (p + "rel_attn/LayerNorm/gamma", gamma(d_model)),
      (p + "ff/layer_1/kernel", normal(d_model, d_inner)),
      (p + "ff/layer_1/bias", normal(d_inner)),
      (p + "ff/layer_2/kernel", normal(d_inner, d_model)),
      (p + "ff/layer_2/bias", normal(d_model)),
      (p + "ff/LayerNorm/beta", normal(d_model)),
      (p + "ff/LayerNorm/gamma", gamma(d_model)),
    ]
  out += [
    ("model/lm_loss/bias", normal(n_token)),
    ("model/sequnece_summary/summary/kernel", normal(d_model, d_model)),
    ("model/sequnece_summary/summary/bias", normal(d_model)),
    ("model/classification_%s/logit/kernel" % DEEP_CLS_SCOPE, normal(d_model, DEEP_N_CLASS)),
    ("model/classification_%s/logit/bias" % DEEP_CLS_SCOPE, normal(DEEP_N_CLASS)),
  ]
  return out


# ----------------------------------------------------------------------------------------------------------------
# TF side (project venv).
# ----------------------------------------------------------------------------------------------------------------

def _import_tf():
  try:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    _fail("`make_ckpt` and `dump` need TensorFlow (%s). Run them with the project venv: .venv/bin/python" % e)
  return tf


def cmd_make_ckpt(args):
  """Writes tests/testdata/model/ckpt_deep/ with TF1 graph mode + tf.compat.v1.train.Saver (V2 format)."""
  tf = _import_tf()
  out_dir = os.path.join(MODEL_DIR, "ckpt_deep")
  if os.path.exists(out_dir) and not args.force:
    _fail("%s already exists and the hf_deep_* goldens were computed from it. Pass --force to rewrite it "
          "(deterministic: seed %d)." % (out_dir, DEEP_SEED))
  variables = _deep_variables(DEEP_CONFIG, np.random.RandomState(DEEP_SEED))

  tmp_dir = tempfile.mkdtemp(dir=MODEL_DIR, prefix=".tmp-ckpt_deep-")
  os.chmod(tmp_dir, 0o755)
  try:
    graph = tf.Graph()
    with graph.as_default():
      for name, value in variables:
        tf.compat.v1.get_variable(name, initializer=tf.constant(value), dtype=tf.float32)
      tf.compat.v1.train.get_or_create_global_step()  # int64 `global_step` = 0, as in cleaned released ckpts.
      saver = tf.compat.v1.train.Saver(save_relative_paths=True)
      with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        saver.save(sess, os.path.join(tmp_dir, CKPT_NAME), write_meta_graph=False)

    # Verify what was written: names, shapes and values.
    reader = tf.train.load_checkpoint(os.path.join(tmp_dir, CKPT_NAME))
    shapes = reader.get_variable_to_shape_map()
    expected = {name for name, _ in variables} | {"global_step"}
    if set(shapes) != expected:
      _fail("ckpt_deep variables differ from the spec: extra %s, missing %s"
            % (sorted(set(shapes) - expected), sorted(expected - set(shapes))))
    for name, value in variables:
      if not np.array_equal(reader.get_tensor(name), value):
        _fail("ckpt_deep variable %s was not written as generated" % name)

    _atomic_write_text(os.path.join(tmp_dir, "xlnet_config.json"),
                       json.dumps(DEEP_CONFIG, indent=4, sort_keys=True))
    info = {
      "config": DEEP_CONFIG,
      "seed": DEEP_SEED,
      "init_std": DEEP_INIT_STD,
      "ln_std": DEEP_LN_STD,
      "heads": {"summary_type": "last", "use_summ_proj": True, "cls_scope": DEEP_CLS_SCOPE,
                "n_class": DEEP_N_CLASS, "reg_scope": None},
      "provenance": {"generator": "tests/testdata/generate_hf_goldens.py make_ckpt", "tensorflow": tf.__version__,
                     "values": "numpy RandomState(seed).standard_normal * init_std; LayerNorm gamma "
                               "1 + standard_normal * ln_std; global_step int64 0"},
      "variables": [{"name": n, "shape": list(v.shape), "dtype": "float32"} for n, v in variables]
                   + [{"name": "global_step", "shape": [], "dtype": "int64"}],
    }
    _atomic_write_text(os.path.join(tmp_dir, "oracle_ckpt_info.json"), json.dumps(info, indent=1))
    if os.path.exists(out_dir):
      old = out_dir + ".old"
      os.replace(out_dir, old)
      shutil.rmtree(old)
    os.replace(tmp_dir, out_dir)
  finally:
    if os.path.exists(tmp_dir):
      shutil.rmtree(tmp_dir)
  print("wrote %s (%d variables + global_step)" % (out_dir, len(variables)))


def cmd_dump(args):
  """Dumps every checkpoint's arrays by name to <work_dir>/<ckpt>_arrays.npz (read with tf.train.load_checkpoint)."""
  tf = _import_tf()
  os.makedirs(args.work_dir, exist_ok=True)
  for ckpt in CKPTS:
    path = os.path.join(MODEL_DIR, ckpt, CKPT_NAME)
    if not os.path.exists(path + ".index"):
      _fail("checkpoint %s not found; run `make_ckpt` first for ckpt_deep." % path)
    reader = tf.train.load_checkpoint(path)
    arrays = {name: reader.get_tensor(name) for name in sorted(reader.get_variable_to_shape_map())}
    out = os.path.join(args.work_dir, ckpt + "_arrays.npz")
    _atomic_savez(out, arrays)
    print("wrote %s (%d arrays)" % (out, len(arrays)))


# ----------------------------------------------------------------------------------------------------------------
# Oracle side (torch + transformers venv).
# ----------------------------------------------------------------------------------------------------------------

class Oracle:
  """One checkpoint's arrays plus helpers to build HF models from them."""

  def __init__(self, work_dir, ckpt):
    import torch  # pylint: disable=import-outside-toplevel
    self.torch = torch
    self.ckpt = ckpt
    path = os.path.join(work_dir, ckpt + "_arrays.npz")
    if not os.path.exists(path):
      _fail("%s not found; run the `dump` step with --work_dir %s first." % (path, work_dir))
    with np.load(path) as d:
      self.arrays = {k: d[k] for k in d.files}
    with open(os.path.join(MODEL_DIR, ckpt, "xlnet_config.json")) as f:
      self.xcfg = json.load(f)

  def hf_config(self, **run):
    """XLNetConfig for this checkpoint. `run`: mem_len, reuse_len, bi_data, clamp_len, same_length, attn_type."""
    from transformers import XLNetConfig  # pylint: disable=import-outside-toplevel
    c = self.xcfg
    act = {"gelu": "gelu_new", "relu": "relu"}[c["ff_activation"]]
    cfg = XLNetConfig(vocab_size=c["n_token"], d_model=c["d_model"], n_layer=c["n_layer"], n_head=c["n_head"],
                      d_inner=c["d_inner"], ff_activation=act, untie_r=c["untie_r"], dropout=0.0,
                      layer_norm_eps=1e-12, summary_last_dropout=0.0, use_mems_eval=True, **run)
    cfg.d_head = c["d_head"]  # XLNetConfig forces d_model // n_head; the modules read this attribute.
    return cfg

  def _set(self, param, array, used, name):
    t = self.torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
    if tuple(param.shape) != tuple(t.shape):
      _fail("%s: shape %s does not fit the HF parameter %s" % (name, tuple(t.shape), tuple(param.shape)))
    with self.torch.no_grad():
      param.copy_(t)
    used.add(name)

  def load_transformer(self, tr, used):
    """Copies the backbone arrays into an HF `XLNetModel` `tr`, recording consumed names in `used`."""
    a, c, t = self.arrays, self.xcfg, "model/transformer/"
    self._set(tr.word_embedding.weight, a[t + "word_embedding/lookup_table"], used, t + "word_embedding/lookup_table")
    self._set(tr.mask_emb, a[t + "mask_emb/mask_emb"], used, t + "mask_emb/mask_emb")
    for i, layer in enumerate(tr.layer):
      p = t + "layer_%d/" % i
      att, ff = layer.rel_attn, layer.ff
      for proj in ("q", "k", "v", "r", "o"):
        self._set(getattr(att, proj), a[p + "rel_attn/%s/kernel" % proj], used, p + "rel_attn/%s/kernel" % proj)
      self._set(att.layer_norm.weight, a[p + "rel_attn/LayerNorm/gamma"], used, p + "rel_attn/LayerNorm/gamma")
      self._set(att.layer_norm.bias, a[p + "rel_attn/LayerNorm/beta"], used, p + "rel_attn/LayerNorm/beta")
      self._set(ff.layer_1.weight, a[p + "ff/layer_1/kernel"].T, used, p + "ff/layer_1/kernel")
      self._set(ff.layer_1.bias, a[p + "ff/layer_1/bias"], used, p + "ff/layer_1/bias")
      self._set(ff.layer_2.weight, a[p + "ff/layer_2/kernel"].T, used, p + "ff/layer_2/kernel")
      self._set(ff.layer_2.bias, a[p + "ff/layer_2/bias"], used, p + "ff/layer_2/bias")
      self._set(ff.layer_norm.weight, a[p + "ff/LayerNorm/gamma"], used, p + "ff/LayerNorm/gamma")
      self._set(ff.layer_norm.bias, a[p + "ff/LayerNorm/beta"], used, p + "ff/LayerNorm/beta")
      for bias in ("r_w_bias", "r_r_bias", "r_s_bias"):
        arr = a[t + bias][i] if c["untie_r"] else a[t + bias]  # untie_r=False: one shared [n_head, d_head].
        self._set(getattr(att, bias), arr, used, t + bias)
      self._set(att.seg_embed, a[t + "seg_embed"][i], used, t + "seg_embed")

  def check_consumed(self, used, allowed_unused):
    """Fails unless every array whose name does not start with one of `allowed_unused` was consumed."""
    unused = [n for n in self.arrays if n not in used and not any(n.startswith(u) for u in allowed_unused)]
    if unused:
      _fail("%s: arrays not loaded into the HF model: %s" % (self.ckpt, unused))

  def lm_model(self, **run):
    from transformers import XLNetLMHeadModel  # pylint: disable=import-outside-toplevel
    model = XLNetLMHeadModel(self.hf_config(**run)).eval()
    used = set()
    self.load_transformer(model.transformer, used)
    self._set(model.lm_loss.bias, self.arrays["model/lm_loss/bias"], used, "model/lm_loss/bias")
    if model.lm_loss.weight.data_ptr() != model.transformer.word_embedding.weight.data_ptr():
      _fail("HF lm_loss.weight is not tied to word_embedding; check transformers==4.57.6 is installed.")
    self.check_consumed(used, ["global_step", "model/sequnece_summary/", "model/classification_",
                               "model/regression_"])
    return model

  def summary_head(self, summary_type):
    """HF `XLNetSequenceSummary` (tanh projection) loaded from model/sequnece_summary/summary/*."""
    from transformers.models.xlnet.modeling_xlnet import XLNetSequenceSummary  # pylint: disable=import-outside-toplevel
    cfg = self.hf_config(summary_type=summary_type, summary_use_proj=True, summary_activation="tanh")
    head = XLNetSequenceSummary(cfg).eval()
    used = set()
    s = "model/sequnece_summary/summary/"
    self._set(head.summary.weight, self.arrays[s + "kernel"].T, used, s + "kernel")
    self._set(head.summary.bias, self.arrays[s + "bias"], used, s + "bias")
    return head

  def dense(self, scope):
    """nn.Linear loaded from `<scope>/kernel` [in, out] and `<scope>/bias` (a classification/regression logit)."""
    k, b = self.arrays[scope + "/kernel"], self.arrays[scope + "/bias"]
    lin = self.torch.nn.Linear(k.shape[0], k.shape[1])
    used = set()
    self._set(lin.weight, k.T, used, scope + "/kernel")
    self._set(lin.bias, b, used, scope + "/bias")
    return lin


def _tm(x):
  """torch batch-major [B, L, ...] -> numpy float32 time-major [L, B, ...]."""
  return np.swapaxes(x.detach().cpu().numpy(), 0, 1).astype(np.float32)


def _run(oracle, inputs, two_stream, **run):
  """Runs HF XLNetLMHeadModel on time-major numpy `inputs`; returns a dict of time-major numpy outputs.

  inputs: input_ids [L,B] int, seg_ids [L,B] int or None, input_mask [L,B] float (1 = pad) or None,
    mems [N,M,B,D] float or None, perm_mask [L,L,B] (1 = cannot attend) / target_mapping [P,L,B] when two_stream.
  """
  torch = oracle.torch
  model = oracle.lm_model(**run)
  kw = {"input_ids": torch.from_numpy(inputs["input_ids"].T.astype(np.int64))}
  if inputs.get("seg_ids") is not None:
    kw["token_type_ids"] = torch.from_numpy(inputs["seg_ids"].T.astype(np.int64))
  if inputs.get("input_mask") is not None:
    kw["input_mask"] = torch.from_numpy(inputs["input_mask"].T.astype(np.float32))
  if inputs.get("mems") is not None:
    kw["mems"] = [torch.from_numpy(m.astype(np.float32)) for m in inputs["mems"]]
  if two_stream:
    kw["perm_mask"] = torch.from_numpy(np.transpose(inputs["perm_mask"], (2, 0, 1)).astype(np.float32))
    kw["target_mapping"] = torch.from_numpy(np.transpose(inputs["target_mapping"], (2, 0, 1)).astype(np.float32))
  with torch.no_grad():
    tr = model.transformer(use_mems=True, output_hidden_states=True, return_dict=True, **kw)
    logits = model.lm_loss(tr.last_hidden_state) if two_stream else None
  n_layer = oracle.xcfg["n_layer"]
  out = {"output": _tm(tr.last_hidden_state),
         "new_mems": np.stack([m.numpy() for m in tr.mems]).astype(np.float32)}
  hs = tr.hidden_states
  if two_stream:  # hidden_states = (h0, g0, h1, g1, ..., hN, gN), batch-major.
    out["layer_outputs_h"] = np.stack([_tm(hs[2 * (i + 1)]) for i in range(n_layer)])
    out["layer_outputs_g"] = np.stack([_tm(hs[2 * (i + 1) + 1]) for i in range(n_layer)])
    out["lm_logits"] = _tm(logits)
  else:
    out["layer_outputs_h"] = np.stack([_tm(hs[i + 1]) for i in range(n_layer)])
  out["_hidden_bm"] = tr.last_hidden_state  # batch-major torch tensor for the summary heads.
  return out


def _run_per_example(oracle, inputs, two_stream, **run):
  """`_run` one batch element at a time, outputs concatenated on the batch axis.

  Needed for `attn_type="uni"` with a perm_mask or input_mask: HF 4.57.6 adds the [I, J, B, 1] data mask in place to
  the [I, J, 1, 1] causal mask (`attn_mask += data_mask[...]`), which fails to broadcast unless B == 1.
  """
  batch_axis = {"input_ids": 1, "seg_ids": 1, "input_mask": 1, "mems": 2, "perm_mask": 2, "target_mapping": 2}
  bsz = inputs["input_ids"].shape[1]
  outs = []
  for b in range(bsz):
    one = {k: (None if v is None else np.take(v, [b], axis=batch_axis[k])) for k, v in inputs.items()}
    outs.append(_run(oracle, one, two_stream, **run))
  out_axis = {"output": 1, "lm_logits": 1, "new_mems": 2, "layer_outputs_h": 2, "layer_outputs_g": 2}
  merged = {k: np.concatenate([o[k] for o in outs], axis=ax) for k, ax in out_axis.items() if k in outs[0]}
  merged["_hidden_bm"] = oracle.torch.cat([o["_hidden_bm"] for o in outs], 0)
  return merged


def _lm_loss(logits, target, target_mask):
  """Per-token cross entropy [P,B] and the masked mean, as the original two_stream_loss computes them."""
  z = logits.astype(np.float64)
  z = z - z.max(-1, keepdims=True)
  logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
  loss = -np.take_along_axis(logp, target[..., None].astype(np.int64), -1)[..., 0]
  total = (loss * target_mask).sum() / target_mask.sum()
  return loss.astype(np.float32), np.float32(total)


def _maxdiff(a, b):
  a, b = np.asarray(a), np.asarray(b)
  if a.shape != b.shape:
    _fail("shape mismatch %s vs %s" % (a.shape, b.shape))
  return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def _load_golden(name):
  with np.load(os.path.join(MODEL_DIR, name + ".npz")) as d:
    g = {k: d[k] for k in d.files}
  g["meta"] = json.loads(str(g.pop("meta_json")))
  return g


def _golden_run_config(meta):
  rc = meta["run_config"]
  run = {"attn_type": meta["attn_type"], "bi_data": bool(rc["bi_data"]), "clamp_len": int(rc["clamp_len"]),
         "same_length": bool(rc["same_length"]), "reuse_len": rc["reuse_len"],
         "mem_len": rc["mem_len"]}  # None: HF keeps everything in new_mems (the original: None); not compared
  return run


def validate(work_dir, tol):
  """Reproduces the original goldens with HF; returns {case: {key: max_abs_diff}} and fails above `tol`."""
  report = {}
  for prefix, ckpt in (("untied", "ckpt_untied"), ("tied", "ckpt_tied")):
    oracle = Oracle(work_dir, ckpt)
    for case in ("finetune", "finetune_mems", "pretrain_bi_bidata", "pretrain_uni", "pretrain_no_target_mapping"):
      g = _load_golden("%s_%s" % (prefix, case))
      run = _golden_run_config(g["meta"])
      diffs = {}
      if case.startswith("finetune"):
        inputs = {k: g.get(k) for k in ("input_ids", "seg_ids", "input_mask", "mems")}
        out = _run(oracle, inputs, two_stream=False, **run)
        keys = ["output", "layer_outputs_h"] + (["new_mems"] if "new_mems" in g else [])
        diffs.update({k: _maxdiff(out[k], g[k]) for k in keys})
        if g["meta"]["heads"]["summary_type"] != "attn":  # HF has no `attn` summary.
          st = g["meta"]["heads"]["summary_type"]
          with oracle.torch.no_grad():
            pooled = oracle.summary_head(st)(out["_hidden_bm"])
            diffs["pooled"] = _maxdiff(pooled.numpy(), g["pooled"])
            for name in g["meta"]["heads"]["cls"]:
              logits = oracle.dense("model/classification_%s/logit" % name)(pooled).numpy()
              diffs["cls_logits_" + name] = _maxdiff(logits, g["cls_logits_" + name])
            for name in g["meta"]["heads"]["reg"]:
              logits = oracle.dense("model/regression_%s/logit" % name)(pooled).numpy()[:, 0]
              diffs["reg_logits_" + name] = _maxdiff(logits, g["reg_logits_" + name])
      elif "target_mapping" in g:
        inputs = {"input_ids": g["inp_k"], "seg_ids": g["seg_id"], "mems": g.get("mems"),
                  "perm_mask": g["perm_mask"], "target_mapping": g["target_mapping"]}
        run_fn = _run_per_example if run["attn_type"] == "uni" else _run
        out = run_fn(oracle, inputs, two_stream=True, **run)
        for k in ("output", "lm_logits", "layer_outputs_h", "layer_outputs_g", "new_mems"):
          diffs[k] = _maxdiff(out[k], g[k])
      else:
        # No target_mapping: the original's query stream starts from inp_q * mask_emb + (1 - inp_q) * word_emb.
        # HF can only start it from mask_emb, so with target_mapping = identity the query stream matches at the
        # inp_q = 1 positions (each position's g depends only on its own g and on the content stream).
        seq_len, bsz = g["inp_k"].shape
        eye = np.repeat(np.eye(seq_len, dtype=np.float32)[:, :, None], bsz, axis=2)
        inputs = {"input_ids": g["inp_k"], "seg_ids": g["seg_id"], "perm_mask": g["perm_mask"],
                  "target_mapping": eye}
        out = _run(oracle, inputs, two_stream=True, **run)
        sel = g["inp_q"] > 0
        diffs["layer_outputs_h"] = _maxdiff(out["layer_outputs_h"], g["layer_outputs_h"])
        diffs["output[inp_q=1]"] = _maxdiff(out["output"][sel], g["output"][sel])
        diffs["lm_logits[inp_q=1]"] = _maxdiff(out["lm_logits"][sel], g["lm_logits"][sel])
        diffs["layer_outputs_g[:, inp_q=1]"] = _maxdiff(out["layer_outputs_g"][:, sel], g["layer_outputs_g"][:, sel])
      report["%s_%s" % (prefix, case)] = diffs
      print("validate %s_%s: %s" % (prefix, case, ", ".join("%s %.2e" % kv for kv in diffs.items())))
  worst = max(v for d in report.values() for v in d.values())
  if worst > tol:
    _fail("HF disagrees with the original goldens by %.3e > --tol %.1e; the pipeline is wrong, fix it before "
          "generating goldens." % (worst, tol))
  return report


def _meta(oracle, case, run, extra=None, **more):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  meta = {
    "case": case,
    "ckpt": "tests/testdata/model/%s/%s" % (oracle.ckpt, CKPT_NAME),
    "config": oracle.xcfg,
    "hf_run_config": run,
    "hf_ff_activation": {"gelu": "gelu_new", "relu": "relu"}[oracle.xcfg["ff_activation"]],
    "oracle": "transformers %s (PyTorch %s), XLNetModel/XLNetLMHeadModel eval mode, dropout 0, float32"
              % (transformers.__version__, torch.__version__),
    "layout": "time-major [len, bsz, ...] like the original goldens; mems/new_mems [n_layer, mlen, bsz, d_model]",
    "generator": "tests/testdata/generate_hf_goldens.py oracle",
  }
  meta.update(extra or {})
  meta.update(more)
  return json.dumps(meta, sort_keys=True)


def _left_padded_pairs(rng, seq_len, bsz, n_token, pad_lens, seg_a_lens):
  """Classifier-style inputs: LEFT padding (id 0, seg 4, mask 1), A <sep> B <sep> <cls>, seg ids 0/1/2."""
  ids = np.zeros((bsz, seq_len), np.int32)
  seg = np.full((bsz, seq_len), 4, np.int32)
  mask = np.ones((bsz, seq_len), np.float32)
  for b in range(bsz):
    n = seq_len - pad_lens[b]
    a = seg_a_lens[b]
    nb = n - a - 3
    tok = rng.randint(9, n_token, size=n).astype(np.int32)
    tok[a] = 4  # <sep>
    tok[n - 2], tok[n - 1] = 4, 3  # <sep> <cls>
    ids[b, pad_lens[b]:] = tok
    seg[b, pad_lens[b]:] = [0] * (a + 1) + [1] * (nb + 1) + [2]
    mask[b, pad_lens[b]:] = 0
  return ids.T.copy(), seg.T.copy(), mask.T.copy()


def _perm_inputs(rng, seq_len, bsz, num_predict, n_targets):
  """Random XLNet-style permutation masks: perm_mask [L,L,B] (1 = i cannot attend j), target_mapping [P,L,B].

  For batch b, `n_targets[b]` random positions are targets with a random factorisation order; non-targets come
  first in that order (they see each other but no target), a target sees the non-targets and the targets before it
  (not itself: the content stream's own diagonal is re-opened by the model). Unused target_mapping rows are zero.
  """
  perm_mask = np.zeros((seq_len, seq_len, bsz), np.float32)
  target_mapping = np.zeros((num_predict, seq_len, bsz), np.float32)
  target_mask = np.zeros((num_predict, bsz), np.float32)
  target_pos = np.zeros((num_predict, bsz), np.int32)
  for b in range(bsz):
    tgt = np.sort(rng.choice(seq_len, size=n_targets[b], replace=False))
    rank = np.full(seq_len, -1)
    rank[tgt] = rng.permutation(n_targets[b])
    for i in range(seq_len):
      for j in tgt:
        if rank[j] >= rank[i]:
          perm_mask[i, j, b] = 1.0
    for k, pos in enumerate(tgt):
      target_mapping[k, pos, b] = 1.0
      target_mask[k, b] = 1.0
      target_pos[k, b] = pos
  return perm_mask, target_mapping, target_mask, target_pos


def _summaries(oracle, hidden_bm, cls_scopes, reg_scopes):
  """Pooled outputs and head logits for summary types last/first/mean (HF XLNetSequenceSummary, tanh proj)."""
  out = {}
  with oracle.torch.no_grad():
    for st in ("last", "first", "mean"):
      pooled = oracle.summary_head(st)(hidden_bm)
      out["pooled_" + st] = pooled.numpy().astype(np.float32)
      for name in cls_scopes:
        out["cls_logits_%s_%s" % (name, st)] = (
          oracle.dense("model/classification_%s/logit" % name)(pooled).numpy().astype(np.float32))
      for name in reg_scopes:
        out["reg_logits_%s_%s" % (name, st)] = (
          oracle.dense("model/regression_%s/logit" % name)(pooled).numpy()[:, 0].astype(np.float32))
  return out


def gen_untied_summaries(work_dir, validation):
  """Case 1: summaries first/mean/last + heads on ckpt_untied with untied_finetune.npz's inputs."""
  oracle = Oracle(work_dir, "ckpt_untied")
  g = _load_golden("untied_finetune")
  run = {"attn_type": "bi", "bi_data": False, "clamp_len": -1, "same_length": False, "mem_len": None,
         "reuse_len": None}
  inputs = {k: g[k] for k in ("input_ids", "seg_ids", "input_mask")}
  out = _run(oracle, inputs, two_stream=False, **run)
  arrays = dict(inputs)
  arrays["output"] = out["output"]
  arrays.update(_summaries(oracle, out["_hidden_bm"], ["toy"], ["toyreg"]))
  diff_last = _maxdiff(arrays["pooled_last"], g["pooled"])
  print("hf_untied_summaries: |HF pooled_last - original pooled| = %.2e" % diff_last)
  arrays["meta_json"] = np.array(_meta(oracle, "untied_summaries", run, {
    "inputs_from": "tests/testdata/model/untied_finetune.npz (input_ids, seg_ids, input_mask)",
    "summary": "pooled_<type> = tanh(dense 'model/sequnece_summary/summary')(pool); last = h[-1], first = h[0], "
               "mean = mean over ALL positions incl. padding; logits = dense '<head>/logit'(pooled_<type>)",
    "max_abs_diff_pooled_last_vs_original_pooled": diff_last,
    "validation_vs_original_goldens": validation,
  }))
  _atomic_savez(os.path.join(MODEL_DIR, "hf_untied_summaries.npz"), arrays)
  return arrays


def gen_deep_finetune(work_dir, rng, validation):
  """Case 2a: ckpt_deep fine-tuning forward with mems from a previous forward, reuse_len < qlen < mem_len + ..."""
  oracle = Oracle(work_dir, "ckpt_deep")
  c = oracle.xcfg
  bsz, qlen, prev_len, mlen = 3, 9, 6, 4
  # Previous segment: no padding, one segment; its forward with mem_len=mlen gives the mems used below.
  prev_ids = rng.randint(9, c["n_token"], size=(prev_len, bsz)).astype(np.int32)
  prev_seg = np.zeros((prev_len, bsz), np.int32)
  prev_run = {"attn_type": "bi", "bi_data": False, "clamp_len": -1, "same_length": False, "mem_len": mlen,
              "reuse_len": None}
  prev = _run(oracle, {"input_ids": prev_ids, "seg_ids": prev_seg}, two_stream=False, **prev_run)
  mems = prev["new_mems"]
  ids, seg, mask = _left_padded_pairs(rng, qlen, bsz, c["n_token"], pad_lens=[0, 2, 4], seg_a_lens=[3, 2, 1])
  run = {"attn_type": "bi", "bi_data": False, "clamp_len": -1, "same_length": False, "mem_len": 7, "reuse_len": 6}
  inputs = {"input_ids": ids, "seg_ids": seg, "input_mask": mask, "mems": mems}
  out = _run(oracle, inputs, two_stream=False, **run)
  # _cache_mem semantics, checked independently of HF: last mem_len rows of concat(mems, layer input[:reuse_len]).
  h0 = oracle.arrays["model/transformer/word_embedding/lookup_table"][ids]  # layer 0 input = word embedding
  layer_in = np.concatenate([h0[None], out["layer_outputs_h"][:-1]])  # input of layer i = output of layer i-1
  expect = np.concatenate([mems, layer_in[:, :run["reuse_len"]]], axis=1)[:, -run["mem_len"]:]
  d = _maxdiff(out["new_mems"], expect)
  if d > 1e-6:
    _fail("HF cache_mem differs from the original _cache_mem semantics by %.2e" % d)
  arrays = {"prev_input_ids": prev_ids, "prev_seg_ids": prev_seg, "mems": mems, "input_ids": ids, "seg_ids": seg,
            "input_mask": mask, "output": out["output"], "layer_outputs_h": out["layer_outputs_h"],
            "new_mems": out["new_mems"]}
  arrays.update(_summaries(oracle, out["_hidden_bm"], [DEEP_CLS_SCOPE], []))
  arrays["meta_json"] = np.array(_meta(oracle, "deep_finetune_mems", run, {
    "mems_from": "HF forward of prev_input_ids/prev_seg_ids (no mask, no mems) with mem_len %d, reuse_len None"
                 % mlen,
    "inputs": "classifier layout: LEFT padding (id 0, seg 4, input_mask 1), A <sep> B <sep> <cls>, seg 0/1/2",
    "new_mems_check": "equal (max %.1e) to last mem_len rows of concat(mems, layer input[:reuse_len])" % d,
    "summary": "pooled_<type> = tanh(dense 'model/sequnece_summary/summary')(pool); last = h[-1], first = h[0], "
               "mean over ALL positions incl. padding; cls_logits_deep_<type> = dense "
               "'model/classification_deep/logit'(pooled_<type>)",
    "validation_vs_original_goldens": validation,
  }))
  _atomic_savez(os.path.join(MODEL_DIR, "hf_deep_finetune_mems.npz"), arrays)
  return arrays


def gen_deep_pretrain(work_dir, rng, validation, name, bsz, qlen, mlen, num_predict, n_targets, run):
  """Case 2b / 3: ckpt_deep two-stream pretraining forward with perm_mask, target_mapping, seg ids, mems."""
  oracle = Oracle(work_dir, "ckpt_deep")
  c = oracle.xcfg
  ids = rng.randint(9, c["n_token"], size=(qlen, bsz)).astype(np.int32)
  seg = np.zeros((qlen, bsz), np.int32)
  for b in range(bsz):  # two segments (A then B), cut at a different place per example
    seg[rng.randint(2, qlen - 1):, b] = 1
  mems = (rng.standard_normal((c["n_layer"], mlen, bsz, c["d_model"])) * 0.5).astype(np.float32)
  perm_mask, target_mapping, target_mask, target_pos = _perm_inputs(rng, qlen, bsz, num_predict, n_targets)
  target = np.where(target_mask > 0, np.take_along_axis(ids, target_pos, 0), 0).astype(np.int32)
  inputs = {"input_ids": ids, "seg_ids": seg, "mems": mems, "perm_mask": perm_mask,
            "target_mapping": target_mapping}
  out = _run(oracle, inputs, two_stream=True, **run)
  h0 = oracle.arrays["model/transformer/word_embedding/lookup_table"][ids]
  layer_in = np.concatenate([h0[None], out["layer_outputs_h"][:-1]])
  reuse = run["reuse_len"] or qlen
  expect = np.concatenate([mems, layer_in[:, :reuse]], axis=1)[:, -run["mem_len"]:]
  d = _maxdiff(out["new_mems"], expect)
  if d > 1e-6:
    _fail("HF cache_mem differs from the original _cache_mem semantics by %.2e" % d)
  checks = {}
  if run["bi_data"]:
    # bi_data must change only the second half of the batch (backward positions); the first half must equal a
    # bi_data=False run.
    plain = _run(oracle, inputs, two_stream=True, **dict(run, bi_data=False))
    half = bsz // 2
    same = _maxdiff(out["output"][:, :half], plain["output"][:, :half])
    moved = float(np.abs(out["output"][:, half:] - plain["output"][:, half:]).max())
    if same > 1e-6 or moved < 1e-3:
      _fail("HF bi_data does not act on the second half only (first half diff %.1e, second %.1e)" % (same, moved))
    checks["bi_data_check"] = ("output[:, :B/2] equals a bi_data=False run (max %.1e); output[:, B/2:] differs "
                               "(max %.2f)" % (same, moved))
  if run["clamp_len"] > 0:
    free = _run(oracle, inputs, two_stream=True, **dict(run, clamp_len=-1))
    moved = float(np.abs(out["output"] - free["output"]).max())
    if moved < 1e-3:
      _fail("clamp_len=%d has no effect on this case (max diff %.1e); make klen + qlen larger" % (
        run["clamp_len"], moved))
    checks["clamp_len_check"] = "output differs from a clamp_len=-1 run (max %.2f)" % moved
  lm_loss, total = _lm_loss(out["lm_logits"], target, target_mask)
  arrays = {"inp_k": ids, "seg_id": seg, "mems": mems, "perm_mask": perm_mask, "target_mapping": target_mapping,
            "target": target, "target_mask": target_mask, "output": out["output"], "lm_logits": out["lm_logits"],
            "lm_loss": lm_loss, "total_loss": total, "layer_outputs_h": out["layer_outputs_h"],
            "layer_outputs_g": out["layer_outputs_g"], "new_mems": out["new_mems"]}
  arrays["meta_json"] = np.array(_meta(oracle, name, run, {
    "perm_mask": "random order: non-targets see each other and no target; target i sees non-targets and targets "
                 "earlier in the order (perm_mask[i,i]=1 for targets; the content stream re-opens the diagonal)",
    "target_mapping": "one-hot rows for targets in position order; all-zero rows (target_mask 0) pad to P",
    "lm": "lm_logits = output @ lookup_table^T + lm_loss/bias (tied); lm_loss = per-token cross entropy vs target "
          "(numpy float64 from lm_logits); total_loss = sum(lm_loss * target_mask) / sum(target_mask)",
    "new_mems_check": "equal (max %.1e) to last mem_len rows of concat(mems, layer input[:reuse_len])" % d,
    "validation_vs_original_goldens": validation,
  }, **checks))
  _atomic_savez(os.path.join(MODEL_DIR, "hf_%s.npz" % name), arrays)
  return arrays


def cmd_oracle(args):
  try:
    import torch  # pylint: disable=import-outside-toplevel
    import transformers  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    _fail("`oracle` needs torch and transformers==4.57.6 (%s). Run it with the oracle venv, e.g. "
          "/tmp/oracle-venv/bin/python; see the module docstring for how to create it." % e)
  if transformers.__version__ != "4.57.6":
    _fail("expected transformers==4.57.6 in the oracle venv, found %s" % transformers.__version__)
  torch.manual_seed(0)
  torch.set_num_threads(1)  # deterministic reductions
  validation = validate(args.work_dir, args.tol)
  gen_untied_summaries(args.work_dir, validation)
  rng = np.random.RandomState(2024)
  gen_deep_finetune(args.work_dir, rng, validation)
  gen_deep_pretrain(args.work_dir, rng, validation, "deep_pretrain", bsz=3, qlen=10, mlen=4, num_predict=4,
                    n_targets=[4, 3, 2],
                    run={"attn_type": "bi", "bi_data": False, "clamp_len": -1, "same_length": False, "mem_len": 6,
                         "reuse_len": 5})
  gen_deep_pretrain(args.work_dir, rng, validation, "deep_pretrain_bidata_clamp", bsz=4, qlen=8, mlen=3, num_predict=3,
                    n_targets=[3, 2, 3, 1],
                    run={"attn_type": "bi", "bi_data": True, "clamp_len": 3, "same_length": False, "mem_len": 5,
                         "reuse_len": 4})
  print("wrote tests/testdata/model/hf_*.npz")


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = parser.add_subparsers(dest="cmd", required=True)
  p = sub.add_parser("make_ckpt", help="TF venv: write tests/testdata/model/ckpt_deep/")
  p.add_argument("--force", action="store_true", help="rewrite an existing ckpt_deep (deterministic)")
  p = sub.add_parser("dump", help="TF venv: checkpoint arrays -> <work_dir>/<ckpt>_arrays.npz")
  p.add_argument("--work_dir", default="/tmp/hf_goldens_work")
  p = sub.add_parser("oracle", help="torch+transformers venv: validate, then write tests/testdata/model/hf_*.npz")
  p.add_argument("--work_dir", default="/tmp/hf_goldens_work")
  p.add_argument("--tol", type=float, default=5e-5, help="max |HF - original golden| allowed in validation")
  args = parser.parse_args(argv)
  if not os.path.isdir(MODEL_DIR):
    _fail("%s not found; run from the repository root." % MODEL_DIR)
  {"make_ckpt": cmd_make_ckpt, "dump": cmd_dump, "oracle": cmd_oracle}[args.cmd](args)


if __name__ == "__main__":
  main()
