"""Parity with the ORIGINAL code: tiny checkpoints and outputs written by zihangdai/xlnet (tests/testdata/model,
see /work/shared/goldens/README.md for how they were made)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import RunConfig, XLNetConfig, XLNetModel, load_original_checkpoint
from xlnet_tf.modeling.heads import finetune_heads

DATA = "tests/testdata/model"
CASES = ["finetune", "finetune_mems", "pretrain_bi_bidata", "pretrain_uni", "pretrain_no_target_mapping"]
# float32 rounding differs between CPUs' kernels and grows with the values' size (LM logits of magnitude 5 differed by
# up to 1.1e-5 on one machine and 4e-6 on another), so the tolerance is 1e-5 times the golden's magnitude (at least 1).
ATOL = 1e-5


# bfloat16 keeps 8 significant bits (rounding 2^-8 = 0.004 relative). The original runs layer norm, the softmax and the
# residual sums in bfloat16 too, in another order; over two layers ours differs from it by up to 0.056 times the
# golden's magnitude (tests/testdata/model_configs, *_bf16*), as much as the original's bfloat16 differs from its own
# float32. On a CPU without native bfloat16 (AVX2: TensorFlow runs its own kernels there, not oneDNN's, which made
# the goldens) the difference reaches 0.16 (tied_finetune_bf16's pooled output, 2026-11-28). The tolerance is 0.2
# of the magnitude (at least 1); a wrong configuration differs by 0.6 or more.
ATOL_BF16 = 0.2


def assert_close(actual, desired, err_msg="", tolerance=ATOL):
  desired = np.asarray(desired)
  atol = tolerance * max(1.0, float(np.max(np.abs(desired))))
  np.testing.assert_allclose(np.asarray(actual), desired, atol=atol, rtol=0, err_msg=err_msg)


def build_golden_model(ckpt, golden):
  meta = json.loads(str(golden["meta_json"]))
  flags = meta["flags"]
  config = XLNetConfig(json_path=f"{DATA}/ckpt_{ckpt}/xlnet_config.json")
  run_config = RunConfig(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.1, dropatt=0.1,
                         mem_len=flags["mem_len"], reuse_len=flags["reuse_len"], bi_data=flags["bi_data"],
                         clamp_len=flags["clamp_len"], same_length=flags["same_length"])
  heads = meta["heads"] or {}
  model = XLNetModel(config, run_config, attn_type=flags["attn_type"], heads=finetune_heads(
      config, run_config, heads.get("summary_type"), heads.get("use_summ_proj", True), heads.get("n_class"),
      heads.get("reg")))
  report = load_original_checkpoint(model, f"{DATA}/ckpt_{ckpt}/xlnet_model.ckpt")
  return model, report


def run_golden(model, golden):
  """Runs the model on a golden's inputs; returns {golden key: our value}."""
  mems = [tf.constant(m) for m in golden["mems"]] if "mems" in golden.files else None
  ours = {}
  if "input_ids" in golden.files:  # fine-tuning layout
    output, new_mems = model(golden["input_ids"], golden["seg_ids"], golden["input_mask"], mems=mems)
    pooled = model.get_pooled_out(output, golden["input_mask"])
    ours["pooled"] = pooled
    for key in golden.files:
      if key.startswith("cls_logits_"):
        ours[key] = model.get_head_logits(pooled, "classification_" + key[len("cls_logits_"):])
      elif key.startswith("reg_logits_"):
        ours[key] = model.get_head_logits(pooled, "regression_" + key[len("reg_logits_"):])
  else:
    target_mapping = golden["target_mapping"] if "target_mapping" in golden.files else None
    output, new_mems = model(golden["inp_k"], golden["seg_id"], None, mems=mems, perm_mask=golden["perm_mask"],
                             target_mapping=target_mapping, inp_q=golden["inp_q"])
    ours["lm_logits"] = model.get_lm_logits(output)
    lm_loss = model.get_lm_loss(output, golden["target"])
    ours["lm_loss"] = lm_loss
    ours["total_loss"] = tf.reduce_sum(lm_loss * golden["target_mask"]) / tf.reduce_sum(golden["target_mask"])
  ours["output"] = output
  if "new_mems" in golden.files:
    ours["new_mems"] = tf.stack(new_mems)
  return ours


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ckpt", ["untied", "tied"])
def test_outputs_match_original(ckpt, case):
  golden = np.load(f"{DATA}/{ckpt}_{case}.npz")
  model, report = build_golden_model(ckpt, golden)
  ours = run_golden(model, golden)
  compared = 0
  for key, value in ours.items():
    assert_close(value, golden[key], err_msg=key)
    compared += 1
  assert compared >= 3
  # Every model variable came from the checkpoint; only heads the model does not have are left over.
  assert report["kept_initial"] == []
  head_names = ("model/sequnece_summary/", "model/classification_", "model/regression_")
  assert all(name.startswith(head_names) for name in report["unused"]), report["unused"]
  if golden["meta_json"] and json.loads(str(golden["meta_json"]))["heads"]:
    assert report["unused"] == []


def test_layer_outputs_match_original():
  """Per-layer outputs, compared through models truncated to 1 layer (the first layer's output)."""
  golden = np.load(f"{DATA}/untied_finetune.npz")
  model, _ = build_golden_model("untied", golden)
  transformer = model.transformer
  # Run layer 0 alone on the embedding to compare with layer_outputs_h[0].
  layer_outputs = []
  original_stack = transformer.layer_stack
  try:
    for n in range(1, len(original_stack) + 1):
      transformer.layer_stack = original_stack[:n]
      out, _ = model(golden["input_ids"], golden["seg_ids"], golden["input_mask"])
      layer_outputs.append(out)
  finally:
    transformer.layer_stack = original_stack
  assert_close(np.stack(layer_outputs), golden["layer_outputs_h"])


CONFIG_DATA = "tests/testdata/model_configs"
CONFIG_CASES = sorted(name[:-len(".npz")] for name in os.listdir(CONFIG_DATA) if name.endswith(".npz"))


def build_config_model(golden):
  """XLNetModel with a model_configs golden's configuration (meta_json), loaded from its checkpoint."""
  meta = json.loads(str(golden["meta_json"]))
  ckpt_dir = f"{DATA}/ckpt_{meta['ckpt']}"
  config = XLNetConfig(json_path=f"{ckpt_dir}/xlnet_config.json")
  run_config = RunConfig(**meta["run_config"])
  heads = meta["heads"]
  head_layers = None if heads is None else finetune_heads(
      config, run_config, heads["summary_type"], heads["use_summ_proj"], heads["cls"], heads["reg"])
  model = XLNetModel(config, run_config, attn_type=meta["attn_type"], heads=head_layers)
  report = load_original_checkpoint(model, f"{ckpt_dir}/xlnet_model.ckpt")
  return model, meta, report


def run_config_golden(model, meta, golden, output_only=False):
  """{golden key: our value} on a model_configs golden's inputs (absent inputs are None, as in the original run);
  output_only: the network's output alone."""
  get = lambda key: golden[key] if key in golden.files else None  # noqa: E731
  mems = None if get("mems") is None else [tf.constant(m) for m in golden["mems"]]
  ours = {}
  if meta["pretrain"]:
    output, new_mems = model(golden["inp_k"], get("seg_id"), get("input_mask"), mems=mems,
                             perm_mask=golden["perm_mask"], target_mapping=golden["target_mapping"],
                             inp_q=golden["inp_q"])
    if output_only:
      return output
    ours["lm_logits"] = model.get_lm_logits(output)
    ours["lm_loss"] = model.get_lm_loss(output, golden["target"])
    ours["total_loss"] = tf.reduce_sum(ours["lm_loss"] * golden["target_mask"]) / tf.reduce_sum(golden["target_mask"])
  else:
    output, new_mems = model(golden["input_ids"], get("seg_ids"), get("input_mask"), mems=mems)
    if output_only:
      return output
    pooled = model.get_pooled_out(output, get("input_mask"))
    ours["pooled"] = pooled
    for scope in meta["heads"]["cls"]:
      ours[f"cls_logits_{scope}"] = model.get_head_logits(pooled, f"classification_{scope}")
    for scope in meta["heads"]["reg"]:
      ours[f"reg_logits_{scope}"] = model.get_head_logits(pooled, f"regression_{scope}")
  ours["output"] = output
  if "new_mems" in golden.files:
    ours["new_mems"] = tf.stack(new_mems)
  else:  # mem_len 0 or None: the original caches nothing
    assert new_mems is None or all(m is None for m in new_mems), new_mems
  return ours


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_config_outputs_match_original(case):
  """Configurations tests/testdata/model misses (tests/testdata/model_configs/README.md): the same tolerance."""
  golden = np.load(f"{CONFIG_DATA}/{case}.npz")
  model, meta, report = build_config_model(golden)
  ours = run_config_golden(model, meta, golden)
  tolerance = ATOL_BF16 if meta["run_config"]["use_bfloat16"] else ATOL
  for key, value in ours.items():
    assert_close(np.asarray(value, np.float32), golden[key], err_msg=key, tolerance=tolerance)
  assert report["kept_initial"] == []
  # The first layer's output (the query stream's when pretraining), through a model truncated to one layer.
  stack = model.transformer.layer_stack
  try:
    model.transformer.layer_stack = stack[:1]
    first = run_config_golden(model, meta, golden, output_only=True)
  finally:
    model.transformer.layer_stack = stack
  key = "layer_outputs_g" if meta["pretrain"] else "layer_outputs_h"
  assert_close(np.asarray(first, np.float32), golden[key][0], err_msg=f"{key}[0]", tolerance=tolerance)


def test_bfloat16_positions_are_the_original_s_and_float32_positions_are_exact():
  """The original computes the relative positional encoding in bfloat16 when it runs in bfloat16: positions past 256
  and the sinusoids' arguments are rounded, and its encoding is off by up to 1.8 (tests/testdata/positions, lengths
  the forward goldens' 12 tokens do not reach; faith 17). --use_bfloat16 reproduces it; --float32_positions computes
  it in float32 (within bfloat16's rounding of the result) and so does float32."""
  from xlnet_tf.modeling import ops  # pylint: disable=import-outside-toplevel
  golden = np.load("tests/testdata/positions/bf16.npz")
  for name, (qlen, klen, d_model, clamp_len, attn_type, bi_data, bsz) in json.loads(str(golden["cases_json"])).items():
    def encode(compute_dtype, dtype=tf.bfloat16, args=(qlen, klen, d_model, clamp_len, attn_type, bi_data, bsz)):
      return ops.relative_positional_encoding(*args[:-1], bsz=args[-1], dtype=dtype, compute_dtype=compute_dtype)
    original, exact = golden[f"{name}/bf16"], golden[f"{name}/fp32"]
    np.testing.assert_allclose(tf.cast(encode(tf.bfloat16), tf.float32).numpy(), original, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(tf.cast(encode(tf.float32), tf.float32).numpy(), exact, atol=4e-3, err_msg=name)
    np.testing.assert_allclose(encode(tf.float32, tf.float32).numpy(), exact, atol=1e-5, err_msg=name)
    assert np.abs(original - exact).max() > 0.9, name  # the goldens tell the two apart
  # The model's: --use_bfloat16 computes its encoding as the original, --float32_positions in float32.
  config = XLNetConfig(json_path=f"{DATA}/ckpt_untied/xlnet_config.json")
  outputs = []
  for float32_positions in (False, True):
    model = XLNetModel(config, RunConfig(is_training=False, use_tpu=False, use_bfloat16=True, dropout=0.0,
                                         dropatt=0.0, float32_positions=float32_positions))
    load_original_checkpoint(model, f"{DATA}/ckpt_untied/xlnet_model.ckpt")
    ids = np.arange(600, dtype=np.int32).reshape(300, 2) % config.n_token
    output, _ = model(ids, np.zeros_like(ids), np.zeros(ids.shape, np.float32))
    outputs.append(np.asarray(tf.cast(output, tf.float32)))
  assert np.abs(outputs[0] - outputs[1]).max() > 0.05
