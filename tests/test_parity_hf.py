"""Cases the original-code goldens lack (first/mean summaries, a 5-layer model, fine-tuning with mems, bi_data +
clamp_len on a deeper model), against HuggingFace transformers 4.57.6 PyTorch XLNet. The goldens and how they
were made: tests/testdata/model/HF_GOLDENS.md and tests/testdata/generate_hf_goldens.py (needs torch; the
tests do not)."""

import json

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import RunConfig, XLNetConfig, XLNetModel, load_original_checkpoint
from xlnet_tf.modeling.heads import finetune_heads

DATA = "tests/testdata/model"
ATOL = 2e-5  # HF reproduces the original's goldens to 7.6e-6


def hf_model(ckpt_dir, golden, **heads):
  run = json.loads(str(golden["meta_json"]))["hf_run_config"]
  config = XLNetConfig(json_path=f"{ckpt_dir}/xlnet_config.json")
  run_config = RunConfig(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.1, dropatt=0.1,
                         mem_len=run["mem_len"], reuse_len=run["reuse_len"], bi_data=run["bi_data"],
                         clamp_len=run["clamp_len"], same_length=run["same_length"])
  model = XLNetModel(config, run_config, attn_type=run["attn_type"],
                     heads=finetune_heads(config, run_config, **heads) if heads else None)
  report = load_original_checkpoint(model, ckpt_dir)
  assert report["kept_initial"] == []
  return model


@pytest.mark.parametrize("summary_type", ["last", "first", "mean"])
def test_summaries_and_heads(summary_type):
  golden = np.load(f"{DATA}/hf_untied_summaries.npz")
  model = hf_model(f"{DATA}/ckpt_untied", golden, summary_type=summary_type, cls_heads={"toy": 3},
                   reg_heads=["toyreg"])
  output, _ = model(golden["input_ids"], golden["seg_ids"], golden["input_mask"])
  pooled = model.get_pooled_out(output, golden["input_mask"])
  np.testing.assert_allclose(output, golden["output"], atol=ATOL, rtol=0)
  np.testing.assert_allclose(pooled, golden[f"pooled_{summary_type}"], atol=ATOL, rtol=0)
  np.testing.assert_allclose(model.get_head_logits(pooled, "classification_toy"),
                             golden[f"cls_logits_toy_{summary_type}"], atol=ATOL, rtol=0)
  np.testing.assert_allclose(model.get_head_logits(pooled, "regression_toyreg"),
                             golden[f"reg_logits_toyreg_{summary_type}"], atol=ATOL, rtol=0)


def test_deep_finetune_with_mems():
  golden = np.load(f"{DATA}/hf_deep_finetune_mems.npz")
  model = hf_model(f"{DATA}/ckpt_deep", golden, summary_type="mean", cls_heads={"deep": 4})
  output, new_mems = model(golden["input_ids"], golden["seg_ids"], golden["input_mask"],
                           mems=[tf.constant(m) for m in golden["mems"]])
  np.testing.assert_allclose(output, golden["output"], atol=ATOL, rtol=0)
  np.testing.assert_allclose(tf.stack(new_mems), golden["new_mems"], atol=ATOL, rtol=0)
  pooled = model.get_pooled_out(output, golden["input_mask"])
  np.testing.assert_allclose(model.get_head_logits(pooled, "classification_deep"), golden["cls_logits_deep_mean"],
                             atol=ATOL, rtol=0)


@pytest.mark.parametrize("case", ["deep_pretrain", "deep_pretrain_bidata_clamp"])
def test_deep_two_stream_pretraining(case):
  golden = np.load(f"{DATA}/hf_{case}.npz")
  model = hf_model(f"{DATA}/ckpt_deep", golden)
  output, new_mems = model(golden["inp_k"], golden["seg_id"], None, mems=[tf.constant(m) for m in golden["mems"]],
                           perm_mask=golden["perm_mask"], target_mapping=golden["target_mapping"],
                           inp_q=golden["target_mapping"].sum(0))
  np.testing.assert_allclose(output, golden["output"], atol=ATOL, rtol=0)
  np.testing.assert_allclose(tf.stack(new_mems), golden["new_mems"], atol=ATOL, rtol=0)
  np.testing.assert_allclose(model.get_lm_logits(output), golden["lm_logits"], atol=ATOL, rtol=0)
  lm_loss = model.get_lm_loss(output, golden["target"])
  np.testing.assert_allclose(lm_loss, golden["lm_loss"], atol=ATOL, rtol=0)
  total = tf.reduce_sum(lm_loss * golden["target_mask"]) / tf.reduce_sum(golden["target_mask"])
  np.testing.assert_allclose(total, golden["total_loss"], atol=ATOL, rtol=0)
