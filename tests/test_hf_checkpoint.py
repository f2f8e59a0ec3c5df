"""HuggingFace XLNet checkpoints in and out (`xlnet_tf/hf_checkpoint.py`, `convert_checkpoint.py`), on tiny models
written by transformers 4.57.6 itself (tests/testdata/hf; generator: tests/testdata/generate_hf_checkpoints.py).

HF -> TF1: for every head (LM, sequence classification, multiple choice, QA) and format (safetensors, sharded
safetensors, pytorch_model.bin, sharded bin, tf_model.h5), the converted checkpoint and the in-memory load give
transformers' hidden states and logits within 2e-5, the QA head's arrays equal HF's. TF1 -> HF: the exported
arrays equal transformers' by name; the export of the original-code checkpoint ckpt_untied reproduces the original's
goldens in this port (in memory) and in transformers (its outputs recorded by the generator, or live with torch).
pytorch_model.bin is read without torch (`xlnet_tf/torch_pickle.py`), in both of torch's layouts."""

import errno
import importlib.util
import json
import os
import pickle
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import types
import zipfile

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file

from helpers import renames_cut
import convert_checkpoint
import cli
import flag_configs
import run_classifier
import run_files
from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
from xlnet_tf import checkpoint
from xlnet_tf import convert
from xlnet_tf import fileio
from xlnet_tf import hf_checkpoint
from xlnet_tf import hf_weights
from xlnet_tf import locks
from xlnet_tf import torch_pickle
from xlnet_tf.modeling.heads import finetune_heads
from xlnet_tf.tasks.classifier import evaluation as classifier_eval
from xlnet_tf.tasks.race import task as race_task
from xlnet_tf.tasks.squad import task as squad_task

DATA = "tests/testdata/hf"
MODEL = "tests/testdata/model"
ATOL = 2e-5
HAS_TORCH = importlib.util.find_spec("torch") is not None
DIRS = ["lm_safetensors", "lm_bin", "lm_h5", "cls_safetensors_sharded", "cls_bin", "cls_bin_legacy", "cls_h5",
        "mc_safetensors", "mc_bin_sharded", "mc_h5", "qa_safetensors", "qa_bin"]
# The same weights as PyTorch wrote them (safetensors), for each head.
REFERENCE = {"lm": "lm_safetensors", "cls": "cls_safetensors_sharded", "mc": "mc_safetensors", "qa": "qa_safetensors"}


def _run_config():
  return RunConfig(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.1, dropatt=0.1)


def _build(head, config):
  rc = _run_config()
  if head == "cls":
    return XLNetModel(config, rc, heads=finetune_heads(config, rc, "mean", cls_heads={"hf": 3}))
  if head == "mc":
    return race_task.build_model(config, rc, summary_type="last")
  if head == "qa":
    return squad_task.build_model(config, rc)
  return XLNetModel(config, rc)


def _hf_arrays(name):
  """{HF name: array} of a safetensors directory, read with the safetensors package alone."""
  directory = os.path.join(DATA, name)
  files = sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))
  return {k: v for f in files for k, v in load_file(os.path.join(directory, f)).items()}


def _check_outputs(head, model):
  """The model's hidden states and logits against transformers' (tests/testdata/hf/{head}_outputs.npz)."""
  golden = np.load(f"{DATA}/{head}_outputs.npz")
  if head == "mc":
    features = dict(input_ids=golden["input_ids"], segment_ids=golden["token_type_ids"],
                    input_mask=(1 - golden["attention_mask"]).astype(np.float32))
    output, pooled = race_task.encode(model, features)
    logits = model.get_head_logits(pooled, race_task.HEAD_NAME)
  else:
    mask = (1 - golden["attention_mask"]).T.astype(np.float32)
    output, _ = model(golden["input_ids"].T, golden["token_type_ids"].T, mask)
    logits = None
    if head == "lm":
      logits = np.transpose(model.get_lm_logits(output), [1, 0, 2])
    elif head == "cls":
      logits = model.get_head_logits(model.get_pooled_out(output, mask), "classification_hf")
  diffs = {"hidden": np.abs(np.transpose(output, [1, 0, 2]) - golden["hidden"]).max()}
  if logits is not None:
    diffs["logits"] = np.abs(np.asarray(logits) - golden["logits"]).max()
  assert max(diffs.values()) <= ATOL, diffs
  if head == "qa":  # the QA head's arrays equal HF's, by name
    table = checkpoint.original_variable_map(model)
    for hf, (name, transposed) in hf_checkpoint._QA.items():
      array = _hf_arrays(REFERENCE["qa"])[hf]
      np.testing.assert_array_equal(table[name].numpy(), array.T if transposed else array)
  return diffs


@pytest.mark.parametrize("name", DIRS)
def test_hf_to_tf1_matches_transformers(name, tmp_path):
  """The CLI's TF1 checkpoint, loaded by the original-checkpoint loader, gives transformers' outputs; the in-memory
  load reads the same arrays."""
  head = name.split("_")[0]
  out = tmp_path / "tf1"
  convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=f"{DATA}/{name}",
                                      output_dir=str(out), task_name="hf"), log_fn=lambda line: None)
  config = XLNetConfig(json_path=str(out / "xlnet_config.json"))
  model = _build(head, config)
  report = checkpoint.load_original_checkpoint(model, str(out / "xlnet_model.ckpt"))
  assert report["unused"] == [] and report["kept_initial"] == ([] if head == "lm" else ["model/lm_loss/bias"])
  _check_outputs(head, model)
  in_memory = hf_checkpoint.read_hf_checkpoint(f"{DATA}/{name}", task_name="hf")[1]
  written = checkpoint.original_arrays(str(out / "xlnet_model.ckpt"))
  assert sorted(in_memory) == sorted(written)
  for key, array in written.items():
    np.testing.assert_array_equal(in_memory[key], array)


@pytest.mark.parametrize("name", ["lm_h5", "cls_safetensors_sharded", "mc_h5", "qa_safetensors"])
def test_load_checkpoint_of_an_hf_directory(name):
  """`load_checkpoint(model, hf_dir)`: converted in memory, the classification head named after the model's."""
  head = name.split("_")[0]
  model = _build(head, hf_checkpoint.model_config(None, f"{DATA}/{name}"))
  report = checkpoint.load_checkpoint(model, f"{DATA}/{name}")
  assert report["unused"] == [] and "HuggingFace" in report["source"]
  _check_outputs(head, model)


def test_an_hf_classifier_of_another_class_count_is_named_as_such_in_evaluation():
  """Evaluating a 2-class task with a 3-class HF classifier was "it holds no classification head (a pretrained
  checkpoint, or another task's)" (sweep 21, C6): the head was dropped, as it is (rightly) to fine-tune from it."""
  config, rc = hf_checkpoint.model_config(None, f"{DATA}/cls_bin"), _run_config()
  model = XLNetModel(config, rc, heads=finetune_heads(config, rc, "mean", cls_heads={"sst-2": 2}))
  report = checkpoint.load_checkpoint(model, f"{DATA}/cls_bin")
  assert report["other_classes"] == (3, 2) and "model/classification_sst-2/logit/bias" in report["kept_initial"]
  with pytest.raises(ValueError, match=r"cls_bin's classification head has 3 classes, this task's 2 classes: it was "
                                       r"fine-tuned for another task. Pass that task as --task_name \(a csv or tsv "
                                       r"task with its 3 --labels\), or another checkpoint.$"):
    classifier_eval.Inference(model, "classification_sst-2").check_head(report, f"{DATA}/cls_bin")
  with pytest.raises(ValueError, match=r"has 1 output, this task's 2 classes: it was fine-tuned for a regression: pass "
                                       r"--is_regression=True \(a csv or tsv task\), or another checkpoint.$"):
    classifier_eval.Inference(model, "classification_sst-2").check_head(dict(report, other_classes=(1, 2)), "c")


def test_the_base_class_s_weights_without_the_transformer_prefix_are_the_backbone(tmp_path):
  """`XLNetModel.save_pretrained` (transformers' base class, no head) writes `layer.0.ff...`, not
  `transformer.layer.0.ff...`; it was refused as `config.json does not match the weights: the weights have 0
  layers` (sweep 21, H2). Read as transformers reads it: the backbone of the LM model it was cut from."""
  base = tmp_path / "base"
  shutil.copytree(f"{DATA}/lm_safetensors", base)
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  save_file({k[len("transformer."):]: v for k, v in _hf_arrays("lm_safetensors").items()
             if k.startswith("transformer.")}, str(base / "model.safetensors"))
  config = json.loads((base / "config.json").read_text())
  (base / "config.json").write_text(json.dumps(dict(config, architectures=["XLNetModel"])))
  _, arrays, info = hf_checkpoint.read_hf_checkpoint(str(base))
  _, lm_arrays, _ = hf_checkpoint.read_hf_checkpoint(f"{DATA}/lm_safetensors")
  assert info["architecture"] == "XLNetModel" and sorted(arrays) == sorted(
      n for n in lm_arrays if n.startswith("model/transformer/"))
  for name, array in arrays.items():
    np.testing.assert_array_equal(array, lm_arrays[name])


def test_fp8_weights_are_said_to_be_a_dtype_not_read_not_a_damaged_file(tmp_path):
  """An fp8 (F8_E4M3) model.safetensors: "is not a readable safetensors file (module 'numpy' has no attribute
  'float8_e4m3fn'). Download it again." (sweep 25, C5): the file is fine, its dtype is what cannot be read."""
  shutil.copytree(f"{DATA}/lm_safetensors", tmp_path / "fp8")
  arrays = load_file(str(tmp_path / "fp8" / "model.safetensors"))
  header, offset = {}, 0
  for name, array in sorted(arrays.items()):  # one byte an element, as safetensors writes F8_E4M3
    header[name] = {"dtype": "F8_E4M3", "shape": list(array.shape), "data_offsets": [offset, offset + array.size]}
    offset += array.size
  text = json.dumps(header).encode()
  (tmp_path / "fp8" / "model.safetensors").write_bytes(len(text).to_bytes(8, "little") + text + bytes(offset))
  first = sorted(arrays)[0]
  with pytest.raises(ValueError, match=f"^{tmp_path}/fp8/model.safetensors holds {re.escape(first)} in F8_E4M3, a "
                                       "dtype numpy \\(and so these tools\\) cannot read; the file is fine. Save the "
                                       "model in float32, bfloat16 or float16"):
    hf_checkpoint.read_hf_checkpoint(str(tmp_path / "fp8"))


def test_a_shard_index_with_an_empty_weight_map_is_named_as_damaged(tmp_path):
  """`{"metadata": {}, "weight_map": {}}`: "model.safetensors (0 shards): config.json does not match the weights: the
  weights hold layers []" blamed the config; one shard was said "(1 shards)" (sweep 25, C5)."""
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  shutil.copytree(f"{DATA}/cls_safetensors_sharded", tmp_path / "sh")
  index = tmp_path / "sh" / "model.safetensors.index.json"
  index.write_text(json.dumps({"metadata": {}, "weight_map": {}}))
  with pytest.raises(ValueError, match=f"^{index} is not a valid shard index \\(its weight_map is empty: it names no "
                                       "weight and no shard\\). Download it again.$"):
    hf_weights.read_weights(str(tmp_path / "sh"))
  weights, _ = hf_weights.read_weights(f"{DATA}/cls_safetensors_sharded")
  for path in (tmp_path / "sh").glob("model-*"):
    path.unlink()
  save_file(weights, str(tmp_path / "sh" / "model-00001-of-00001.safetensors"))
  index.write_text(json.dumps({"weight_map": {name: "model-00001-of-00001.safetensors" for name in weights}}))
  assert hf_weights.read_weights(str(tmp_path / "sh"))[1] == "model.safetensors (1 shard)"


def test_a_stray_file_named_in_another_encoding_is_let_be(tmp_path):
  """A notes file named in Latin-1 beside an HF model's weights: the size check's listing (TensorFlow's) failed with a
  bare "'utf-8' codec can't decode byte 0xe9", naming nothing (sweep 25, B5); the converter read the model."""
  shutil.copytree(f"{DATA}/cls_bin", tmp_path / "hf")
  open(os.path.join(os.fsencode(tmp_path / "hf"), b"\xe9notes.txt"), "w").close()
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert hf_checkpoint.model_config(None, str(tmp_path / "hf"), "--predict_ckpt").n_layer == config["n_layer"]


def test_weights_that_do_not_fit_the_config_name_the_other_weights_files_beside_them(tmp_path):
  """A classifier's pytorch_model.bin beside a model.safetensors of another model (an LM): the safetensors file is
  read, as transformers' order says, and refused for its head; the line did not say that the .bin, the model's
  weights, was there unread (sweep 27)."""
  shutil.copytree(f"{DATA}/cls_bin", tmp_path / "m")
  shutil.copy(f"{DATA}/lm_safetensors/model.safetensors", tmp_path / "m")
  with pytest.raises(ValueError, match=rf"Fix architectures in config\.json\. \({tmp_path / 'm'} also holds "
                                       r"pytorch_model\.bin, not read: model\.safetensors comes first in "
                                       r"transformers' order\. If those are the model's weights, move "
                                       r"model\.safetensors away\.\)$"):
    hf_checkpoint.read_hf_checkpoint(str(tmp_path / "m"))
  os.remove(tmp_path / "m" / "model.safetensors")
  assert hf_checkpoint.read_hf_checkpoint(str(tmp_path / "m"))[2]["architecture"] == "XLNetForSequenceClassification"


def test_a_config_of_far_more_weights_than_its_files_hold_is_refused_before_the_model_is_built(tmp_path):
  """An HF config.json saying n_layer 200000 over 2 layers' weights, as --predict_ckpt or --init_checkpoint: the
  tools built the 200000-layer model first, minutes and GBs without a line (sweep 21, H7)."""
  shutil.copytree(f"{DATA}/cls_bin", tmp_path / "hf")
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert hf_checkpoint.model_config(None, str(tmp_path / "hf"), "--predict_ckpt").n_layer == config["n_layer"]
  (tmp_path / "hf" / "config.json").write_text(json.dumps(dict(config, n_layer=200000)))
  with pytest.raises(ValueError, match=f"^{tmp_path}/hf/config.json: config.json describes a model of [0-9,]+ "
                                       "weights, more than its weight files' [0-9,]+ bytes hold: the config of "
                                       "another model."):
    hf_checkpoint.model_config(None, str(tmp_path / "hf"), "--predict_ckpt")
  # Weights that are Git LFS pointers (a clone without git-lfs), with the right config: the weights are named, not
  # the config (sweep 22, N2)
  (tmp_path / "hf" / "config.json").write_text(json.dumps(config))
  (tmp_path / "hf" / "pytorch_model.bin").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab\n")
  with pytest.raises(ValueError, match=f"^{tmp_path}/hf/pytorch_model.bin is a Git LFS pointer, not the file: "):
    hf_checkpoint.model_config(None, str(tmp_path / "hf"), "--predict_ckpt")


def test_a_directory_of_an_hf_model_and_tf_checkpoints_says_which_it_reads(tmp_path, caplog):
  """A directory holding both (an HF download a run wrote checkpoints into) was read as the HF model, said at INFO
  only; a warning names the checkpoints and how to read one."""
  directory = tmp_path / "both"
  shutil.copytree(f"{DATA}/lm_h5", directory)
  for suffix in (".index", ".data-00000-of-00001"):
    (directory / ("ckpt-4" + suffix)).write_bytes(b"")
  model = _build("lm", hf_checkpoint.model_config(None, str(directory)))
  with caplog.at_level("WARNING"):
    checkpoint.load_checkpoint(model, str(directory))
  assert f"{directory} holds a HuggingFace model and TF checkpoints (ckpt-4): the HuggingFace weights" in caplog.text
  assert f"Pass a checkpoint's prefix ({directory}/ckpt-4) to read it instead." in caplog.text


def test_an_hf_head_of_another_class_count_starts_afresh():
  """Fine-tuning a 2-class task from an HF 3-class classifier (MNLI -> SST-2) was a shape mismatch whose advice
  (--cls_scope) could not help; a TF1 checkpoint's head of another name starts afresh. So does the HF head now, with
  a line; the backbone and the pooling projection load."""
  config = hf_checkpoint.model_config(None, f"{DATA}/cls_bin")
  rc = _run_config()
  model = XLNetModel(config, rc, heads=finetune_heads(config, rc, "mean", cls_heads={"sst-2": 2}))
  report = checkpoint.load_checkpoint(model, f"{DATA}/cls_bin")
  assert [n for n in report["kept_initial"] if "classification" in n] == ["model/classification_sst-2/logit/bias",
                                                                          "model/classification_sst-2/logit/kernel"]
  assert "model/sequnece_summary/summary/kernel" in report["loaded"]


def test_an_input_of_dir_latest_names_the_latest_checkpoint(tmp_path):
  """`--input=<dir>/latest`, the form --help and docs/checkpoints.md give, was refused as "does not exist"."""
  convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=f"{DATA}/lm_h5",
                                      output_dir=str(tmp_path / "tf1")), log_fn=lambda line: None)
  for to in ("hf", "tf1"):
    lines = []
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "tf1" / "latest"),
                                        output_dir=str(tmp_path / f"out_{to}"), to=to), log_fn=lines.append)
    assert f"{tmp_path}/tf1/xlnet_model.ckpt" in lines[-1], lines
  with pytest.raises(cli.FlagError, match=f"--input={tmp_path}/none does not exist"):
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "none" / "latest"),
                                        output_dir=str(tmp_path / "x")))


@pytest.mark.parametrize("name", ["lm_h5", "cls_h5", "mc_safetensors", "qa_safetensors"])
def test_tf1_to_hf_round_trip_is_exact(name, tmp_path):
  """HF -> TF1 -> HF gives transformers' arrays back, name for name (no lm_loss.weight: it is tied)."""
  head = name.split("_")[0]
  convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=f"{DATA}/{name}",
                                      output_dir=str(tmp_path / "tf1")), log_fn=lambda line: None)
  convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "tf1"),
                                      output_dir=str(tmp_path / "hf")), log_fn=lambda line: None)
  exported = load_file(str(tmp_path / "hf" / "model.safetensors"))
  reference = _hf_arrays(REFERENCE[head])
  assert sorted(exported) == sorted(reference)
  for key, array in reference.items():
    np.testing.assert_array_equal(exported[key], array, err_msg=key)
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["architectures"] == [hf_checkpoint.architecture_of(hf_checkpoint.read_config(f"{DATA}/{name}"), {})]
  assert config["ff_activation"] == "gelu_new" and config["d_head"] == 4


def test_hf_s_other_names_of_the_tanh_gelu_are_the_original_s_gelu():
  """transformers' gelu_pytorch_tanh and gelu_fast compute gelu_new's tanh approximation, the original's gelu: they
  were refused as having "no counterpart" (sweep 32, U17). Its exact (erf) gelu is read with a note."""
  config = hf_checkpoint.read_config(f"{DATA}/cls_bin")
  for name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu"):
    xlnet_config, notes = hf_checkpoint.xlnet_config_from_hf(dict(config, ff_activation=name), None, "x")
    assert xlnet_config.ff_activation == "gelu" and bool(notes) == (name == "gelu"), name
  with pytest.raises(ValueError, match=r"^x: ff_activation 'gelu_10' has no counterpart"):
    hf_checkpoint.xlnet_config_from_hf(dict(config, ff_activation="gelu_10"), None, "x")


def _export_untied(tmp_path):
  out = str(tmp_path / "untied_hf")
  convert.convert_to_hf(f"{MODEL}/ckpt_untied/xlnet_model.ckpt", out, task_name="toy", summary_type="last",
                              allow_d_head_override=True, log_fn=lambda line: None)
  return out


def test_export_of_an_original_checkpoint_reproduces_the_original(tmp_path):
  """ckpt_untied (written by the original code) -> HF: every array back by name, and this port, loading the HF
  directory, gives the original's goldens. (Its d_head 6 != 8 / 2: the CLI refuses it, see the sweep.)"""
  out = _export_untied(tmp_path)
  weights = load_file(os.path.join(out, "model.safetensors"))
  original = checkpoint.original_arrays(f"{MODEL}/ckpt_untied")
  for i in range(2):
    np.testing.assert_array_equal(weights[f"transformer.layer.{i}.rel_attn.r_s_bias"],
                                  original["model/transformer/r_s_bias"][i])
    np.testing.assert_array_equal(weights[f"transformer.layer.{i}.ff.layer_1.weight"],
                                  original[f"model/transformer/layer_{i}/ff/layer_1/kernel"].T)
  np.testing.assert_array_equal(weights["logits_proj.weight"], original["model/classification_toy/logit/kernel"].T)
  assert "lm_loss.bias" not in weights and not any(k.startswith("model/regression") for k in weights)
  config = XLNetConfig(json_path=f"{MODEL}/ckpt_untied/xlnet_config.json")
  rc = _run_config()
  model = XLNetModel(config, rc, heads=finetune_heads(config, rc, "last", cls_heads={"toy": 3}))
  report = checkpoint.load_checkpoint(model, out)
  assert report["kept_initial"] == ["model/lm_loss/bias"] and report["unused"] == []
  golden = np.load(f"{MODEL}/untied_finetune.npz")
  output, _ = model(golden["input_ids"], golden["seg_ids"], golden["input_mask"])
  pooled = model.get_pooled_out(output, golden["input_mask"])
  np.testing.assert_allclose(output, golden["output"], atol=ATOL, rtol=0)
  np.testing.assert_allclose(model.get_head_logits(pooled, "classification_toy"), golden["cls_logits_toy"],
                             atol=ATOL, rtol=0)


def test_transformers_loaded_the_exports_and_reproduced_the_original():
  """What the generator's `load_exports` recorded: transformers loaded every export with no missing, unexpected
  or mismatched weight, the round trips equal transformers' own weights, and HF's outputs of the ckpt_untied
  export equal the original's goldens."""
  recorded = np.load(f"{DATA}/export_untied.npz")
  meta = json.loads(str(recorded["meta_json"]))
  infos = [meta["untied_loading_info"]] + [r["loading_info"] for r in meta["round_trips"].values()]
  assert all(not any(info.values()) for info in infos), infos
  assert all(r["max_abs_weight_diff"] == 0 and r["same_names"] for r in meta["round_trips"].values())
  golden = np.load(f"{MODEL}/untied_finetune.npz")
  for key in ("output", "cls_logits_toy"):
    np.testing.assert_allclose(recorded[key], golden[key], atol=ATOL, rtol=0)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None or not HAS_TORCH,
                    reason="needs torch and transformers")
def test_transformers_loads_the_export_live(tmp_path):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  out = _export_untied(tmp_path)
  fields = json.loads(open(os.path.join(out, "config.json")).read())
  d_head = fields.pop("d_head")
  config = transformers.XLNetConfig(**fields)
  config.d_head = d_head
  model, info = transformers.XLNetForSequenceClassification.from_pretrained(out, config=config,
                                                                            output_loading_info=True)
  assert not any(info.values()), info
  golden = np.load(f"{MODEL}/untied_finetune.npz")
  with torch.no_grad():
    logits = model.eval()(input_ids=torch.from_numpy(golden["input_ids"].T.copy()).long(),
                          token_type_ids=torch.from_numpy(golden["seg_ids"].T.copy()).long(),
                          input_mask=torch.from_numpy(golden["input_mask"].T.copy())).logits
  np.testing.assert_allclose(logits.numpy(), golden["cls_logits_toy"], atol=ATOL, rtol=0)


ORIGINAL_DHEAD4 = f"{DATA}/original_dhead4"  # tests/testdata/generate_original_export.py


def test_cli_export_of_an_original_checkpoint_hf_can_express(tmp_path):
  """An ORIGINAL-code checkpoint with d_head = d_model / n_head (its classification head; no mask_emb, which the
  original's fine-tuning graph lacks) -> convert_checkpoint.py, no override -> an HF directory that this port loads
  back to the original's outputs; and transformers, loading that same export (recorded by the generator: no
  missing, unexpected or mismatched weight), gave the original's outputs too."""
  out = str(tmp_path / "hf")
  proc = subprocess.run([sys.executable, "convert_checkpoint.py", f"--input={ORIGINAL_DHEAD4}/ckpt/xlnet_model.ckpt",
                         f"--output_dir={out}", "--task_name=toy", "--summary_type=last"],
                        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=os.getcwd()))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "mask_emb" in proc.stdout + proc.stderr
  golden = np.load(f"{ORIGINAL_DHEAD4}/outputs.npz")
  config = XLNetConfig(json_path=f"{ORIGINAL_DHEAD4}/ckpt/xlnet_config.json")
  rc = _run_config()
  model = XLNetModel(config, rc, heads=finetune_heads(config, rc, "last", cls_heads={"toy": 3}))
  report = checkpoint.load_checkpoint(model, out)
  assert report["unused"] == [] and report["kept_initial"] == ["model/lm_loss/bias"], report
  output, _ = model(golden["input_ids"], golden["seg_ids"], golden["input_mask"])
  logits = model.get_head_logits(model.get_pooled_out(output, golden["input_mask"]), "classification_toy")
  np.testing.assert_allclose(output, golden["hidden"], atol=ATOL, rtol=0)
  np.testing.assert_allclose(logits, golden["logits"], atol=ATOL, rtol=0)
  assert not any(json.loads(str(golden["hf_loading_info"])).values())
  np.testing.assert_allclose(golden["hf_hidden"], golden["hidden"], atol=ATOL, rtol=0)
  np.testing.assert_allclose(golden["hf_logits"], golden["logits"], atol=ATOL, rtol=0)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None or not HAS_TORCH,
                    reason="needs torch and transformers")
def test_transformers_loads_the_cli_export_of_an_original_checkpoint_live(tmp_path):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  out = str(tmp_path / "hf")
  convert.convert_to_hf(f"{ORIGINAL_DHEAD4}/ckpt/xlnet_model.ckpt", out, task_name="toy", log_fn=lambda line: None)
  model, info = transformers.XLNetForSequenceClassification.from_pretrained(out, output_loading_info=True)
  assert not any(info.values()), info
  golden = np.load(f"{ORIGINAL_DHEAD4}/outputs.npz")
  with torch.no_grad():
    logits = model.eval()(input_ids=torch.from_numpy(golden["input_ids"].T.copy()).long(),
                          token_type_ids=torch.from_numpy(golden["seg_ids"].T.copy()).long(),
                          attention_mask=torch.from_numpy(1.0 - golden["input_mask"].T)).logits
  np.testing.assert_allclose(logits.numpy(), golden["logits"], atol=ATOL, rtol=0)


def test_the_export_carries_the_sentencepiece_model_its_run_recorded(tmp_path):
  """A fine-tuning run's checkpoint without a spiece.model beside it: its run_flags.json names the model it read and
  its sha256. The HF export lost both, and a prediction with another --spiece_model_file, refused for the checkpoint,
  ran on the export, exit 0 (sweep 26, B8): the recorded file, its bytes unchanged, is copied; else a warning."""
  spm = "tests/testdata/data/spm/spiece.model"
  src = tmp_path / "run"
  shutil.copytree(f"{MODEL}/ckpt_untied", src)
  flags = {"summary_type": "last", "spiece_model_file": spm, "spiece_model_sha256": fileio.sha256(spm)}
  (src / "run_flags.json").write_text(json.dumps(flags))
  lines = []
  convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf"), task_name="toy",
                        allow_d_head_override=True, log_fn=lines.append)
  assert (tmp_path / "hf" / "spiece.model").read_bytes() == open(spm, "rb").read()
  assert lines[-1].endswith("model.safetensors, config.json, spiece.model.")
  (src / "run_flags.json").write_text(json.dumps(dict(flags, spiece_model_file=str(tmp_path / "gone.model"))))
  lines = []
  convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf2"), task_name="toy",
                        allow_d_head_override=True, log_fn=lines.append)
  assert not (tmp_path / "hf2" / "spiece.model").exists()
  assert (f"Warning: {tmp_path}/hf2 holds no spiece.model: the SentencePiece model the run that trained {src}/"
          f"xlnet_model.ckpt read ({tmp_path}/gone.model, sha256 {flags['spiece_model_sha256'][:12]}...) is not "
          f"beside it, nor at that path with those bytes. Copy it into {tmp_path}/hf2 as spiece.model") in "\n".join(
              lines)


def test_a_tied_export_is_read_back_tied(tmp_path):
  """An HF directory with untie_r false and one value per bias in every layer (this port's export of a tied model)
  is the tied model again: one shared array, untie_r false in the config the tools build and in a TF1 conversion,
  the original's outputs. It was read untied: a run continued from it trained the copies apart and its plain resume
  was refused over --untie_r (sweep 25, B7). Copies transformers trained apart are read per layer, with a note; an
  untie_r that is no boolean is one line."""
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  out = tmp_path / "hf"
  convert.convert_to_hf(f"{MODEL}/ckpt_tied/xlnet_model.ckpt", str(out), task_name="toy", summary_type="last",
                        allow_d_head_override=True, log_fn=lambda line: None)
  original = checkpoint.original_arrays(f"{MODEL}/ckpt_tied")
  config, arrays, info = hf_checkpoint.read_hf_checkpoint(str(out), task_name="toy")
  assert not config.untie_r and not [line for line in info["notes"] if "untie_r" in line]
  for name in ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed"):
    np.testing.assert_array_equal(arrays[f"model/transformer/{name}"], original[f"model/transformer/{name}"])
  config = hf_checkpoint.model_config(None, str(out))
  assert not config.untie_r
  rc = _run_config()
  model = XLNetModel(config, rc, heads=finetune_heads(config, rc, "last", cls_heads={"toy": 2}))
  checkpoint.load_checkpoint(model, str(out))
  golden = np.load(f"{MODEL}/tied_finetune.npz")
  np.testing.assert_allclose(model(golden["input_ids"], golden["seg_ids"], golden["input_mask"])[0], golden["output"],
                             atol=ATOL, rtol=0)
  convert.convert_to_original(str(out), str(tmp_path / "tf1"), log_fn=lambda line: None)
  assert json.loads((tmp_path / "tf1" / "xlnet_config.json").read_text())["untie_r"] is False

  weights = load_file(str(out / "model.safetensors"))
  weights["transformer.layer.1.rel_attn.r_w_bias"] = weights["transformer.layer.1.rel_attn.r_w_bias"] + 1
  save_file(weights, str(out / "model.safetensors"))
  config, arrays, info = hf_checkpoint.read_hf_checkpoint(str(out), task_name="toy")
  assert config.untie_r and hf_checkpoint.model_config(None, str(out)).untie_r
  assert arrays["model/transformer/r_r_bias"].shape == (2, 2, 6)
  assert f"{out}/model.safetensors: config.json says untie_r false, but its layers' attention biases differ" in (
      "\n".join(info["notes"]))
  hf = json.loads((out / "config.json").read_text())
  (out / "config.json").write_text(json.dumps(dict(hf, untie_r="false")))
  with pytest.raises(ValueError, match=r"config.json: untie_r 'false' is not true or false\. Use the config.json"):
    hf_checkpoint.model_config(None, str(out))


def test_tied_biases_are_repeated_per_layer_and_spiece_is_copied(tmp_path, monkeypatch):
  """Also: every file goes through the project's writer, at its temporary names (safetensors' save_file wrote through
  a hidden `.tmpXXXXXX` of its own, left for good by a kill -9: sweep 17, H2), with a new file's mode."""
  src = tmp_path / "ckpt"
  shutil.copytree(f"{MODEL}/ckpt_tied", src)
  shutil.copy("tests/testdata/data/spm/spiece.model", src / "spiece.model")
  lines, written, write = [], [], fileio._write_data  # pylint: disable=protected-access
  monkeypatch.setattr(fileio, "_write_data", lambda path, data: written.append(os.path.basename(path)) or write(
      path, data))
  convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf"), summary_type="first",
                        allow_d_head_override=True, log_fn=lines.append)
  assert sorted(name.partition(".tmp-")[0] for name in written) == ["config.json", "model.safetensors",
                                                                    "spiece.model"]
  weights = load_file(str(tmp_path / "hf" / "model.safetensors"))
  tied = checkpoint.original_arrays(str(src))["model/transformer/r_w_bias"]
  for i in range(2):
    np.testing.assert_array_equal(weights[f"transformer.layer.{i}.rel_attn.r_w_bias"], tied)
  assert (tmp_path / "hf" / "spiece.model").read_bytes() == (src / "spiece.model").read_bytes()
  umask = os.umask(0)
  os.umask(umask)
  assert stat.S_IMODE((tmp_path / "hf" / "model.safetensors").stat().st_mode) == 0o666 & ~umask  # safetensors: 0600
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["untie_r"] is False and config["ff_activation"] == "relu" and config["summary_type"] == "first"
  assert any("`attn` summary" in line for line in lines)
  hf = tmp_path / "hf_with_spm"
  shutil.copytree(f"{DATA}/lm_safetensors", hf)
  shutil.copy("tests/testdata/data/spm/spiece.model", hf / "spiece.model")
  convert.convert_to_original(str(hf), str(tmp_path / "tf1"), log_fn=lines.append)
  assert (tmp_path / "tf1" / "spiece.model").exists()
  # Its 1000 pieces beside a model of 32 ids: copied, and said (transformers' tokenizer of that directory gives ids
  # the embedding has no row for; the tools refuse the pair only when they fine-tune; sweep 17, H7). Both ways.
  assert [line for line in lines if line.startswith("Warning: ")] == [
      f"Warning: {directory}/spiece.model, copied beside the model, has 1000 pieces, more than the model's n_token=32: "
      "it is not the model's tokenizer (its ids past the embedding). Replace it with the one the model was trained "
      "with." for directory in (src, hf)]
  (hf / "spiece.model").write_bytes(b"not a model")
  lines.clear()
  convert.convert_to_original(str(hf), str(tmp_path / "tf1_garbage"), log_fn=lines.append)
  assert lines[-2] == (f"Warning: {hf}/spiece.model, copied beside the model, is no SentencePiece model SentencePiece "
                       "can read.")
  (hf / "spiece.model").write_bytes(b"")  # copied without a word, with SentencePiece's native lines (sweep 21, C4)
  lines.clear()
  convert.convert_to_original(str(hf), str(tmp_path / "tf1_empty"), log_fn=lines.append)
  assert lines[-2] == f"Warning: {hf}/spiece.model is empty (a copy cut short?): not copied beside the model."
  assert not (tmp_path / "tf1_empty" / "spiece.model").exists()  # it was, 0 bytes (sweep 22, N8)


def _flip_into_hdf5_s_loop(h5):
  """One byte of lm_h5's tf_model.h5 changed so that h5py reading its layer_names loops for ever, in C code that
  neither Ctrl-C nor SIGTERM stopped (sweep 28, A5)."""
  data = bytearray(h5.read_bytes())
  assert data[5040] == 0o71
  data[5040] = 0o335
  h5.write_bytes(bytes(data))


def _corrupt_copies(root):
  """HF directories with a cut safetensors file, a cut h5, a cut pytorch_model.bin of each of torch's formats, a
  config that does not fit the weights."""
  for name, src in (("cut_safetensors", "lm_safetensors"), ("cut_h5", "lm_h5"), ("bad_config", "cls_h5"),
                    ("cut_bin", "cls_bin"), ("cut_legacy_bin", "cls_bin_legacy")):
    shutil.copytree(f"{DATA}/{src}", root / name)
  for name in ("cut_bin", "cut_legacy_bin"):
    weights = root / name / "pytorch_model.bin"
    weights.write_bytes(weights.read_bytes()[:-2000])
  # Damaged fields, as a byte flip makes them (tracebacks, or "out of memory ... make its batches smaller": sweep 28,
  # A6): a zip entry's compression method, a pickle frame's or bytes object's length.
  shutil.copytree(f"{DATA}/cls_bin", root / "bin_compression")
  weights = root / "bin_compression" / "pytorch_model.bin"
  data = bytearray(weights.read_bytes())
  central = data.index(b"PK\x01\x02")  # the central directory's first entry: data.pkl's
  data[central + 10:central + 12] = (99).to_bytes(2, "little")
  weights.write_bytes(bytes(data))
  for name, length_field in (("bin_frame", b"\x95" + (2 ** 64 - 1).to_bytes(8, "little")),
                             ("bin_bytes_length", b"\x8e" + (2 ** 40).to_bytes(8, "little"))):
    shutil.copytree(f"{DATA}/cls_bin_legacy", root / name)
    (root / name / "pytorch_model.bin").write_bytes(b"\x80\x04" + length_field)
  weights = root / "cut_safetensors" / "model.safetensors"
  weights.write_bytes(weights.read_bytes()[:3000])
  h5 = root / "cut_h5" / "tf_model.h5"
  h5.write_bytes(h5.read_bytes()[:20000])
  shutil.copytree(f"{DATA}/lm_h5", root / "looping_h5")
  _flip_into_hdf5_s_loop(root / "looping_h5" / "tf_model.h5")
  shutil.copytree(f"{DATA}/lm_h5", root / "fifo_h5")  # the read waited out its time limit (sweep 29, U3)
  (root / "fifo_h5" / "tf_model.h5").unlink()
  os.mkfifo(root / "fifo_h5" / "tf_model.h5")
  shutil.copytree(f"{DATA}/lm_h5", root / "broken_h5py")  # read with an h5py that cannot be imported: said as damage
  shutil.copytree(f"{DATA}/lm_h5", root / "unwritten_h5")  # a 53 KB file of GBs (sweep 21, T1)
  import h5py  # pylint: disable=import-outside-toplevel
  with h5py.File(root / "unwritten_h5" / "tf_model.h5", "r+") as f:
    group = f["transformer"]
    del group["tfxl_net_lm_head_model/transformer/mask_emb:0"]
    group.create_dataset("tfxl_net_lm_head_model/transformer/mask_emb:0", shape=(50000, 10000), dtype="float32")
  config = json.loads((root / "bad_config" / "config.json").read_text())
  (root / "bad_config" / "config.json").write_text(json.dumps(dict(config, d_inner=12)))
  for name, text in (("config_list", json.dumps([config])), ("string_size", json.dumps(dict(config, d_model="16"))),
                     ("no_heads", json.dumps(dict(config, n_head=0))),
                     ("string_eps", json.dumps(dict(config, layer_norm_eps="1e-12"))),
                     ("swish", json.dumps(dict(config, ff_activation="swish"))),
                     ("no_n_head", json.dumps({k: v for k, v in config.items() if k != "n_head"})),
                     ("attn_type", json.dumps(dict(config, attn_type="uni"))),
                     ("bi_data", json.dumps(dict(config, bi_data=True))),
                     ("summary_attn", json.dumps(dict(config, summary_type="attn"))),
                     ("no_proj_tanh", json.dumps(dict(config, summary_use_proj=False))),
                     ("lm_architecture", json.dumps(dict(config, architectures=["XLNetLMHeadModel"]))),
                     ("architectures_object", json.dumps(dict(config, architectures={"a": 1}))),
                     ("id2label_list", json.dumps(dict(config, id2label=["neg", "pos"]))),
                     ("task_number", json.dumps(dict(config, finetuning_task=5))),
                     ("billion_layers", json.dumps(dict(config, n_layer=10**9, untie_r=False))),
                     ("multi_label", json.dumps(dict(config, problem_type="multi_label_classification")))):
    shutil.copytree(f"{DATA}/cls_h5", root / name)
    (root / name / "config.json").write_text(text)
  # Incomplete weights: a tensor left out of a safetensors file; a shard index that leaves out a shard; a shard
  # replaced by another; indexes of another shape, or naming a shard by a path.
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  # Weights of layer 1 (layer 0 fits the config) of another shape or type; one that is left out.
  ff_2, r_w = "transformer.layer.1.ff.layer_2.weight", "transformer.layer.1.rel_attn.r_w_bias"
  shutil.copytree(f"{DATA}/lm_safetensors", root / "layer_1_renamed")
  weights = load_file(str(root / "layer_1_renamed" / "model.safetensors"))
  save_file({k.replace("layer.1.", "layer.2."): v for k, v in weights.items()},
            str(root / "layer_1_renamed" / "model.safetensors"))
  shutil.copytree(f"{DATA}/lm_safetensors", root / "layer_01")  # a KeyError traceback (sweep 33, A7)
  save_file({k.replace("layer.1.", "layer.01."): v for k, v in weights.items()},
            str(root / "layer_01" / "model.safetensors"))
  shutil.copytree(f"{DATA}/lm_safetensors", root / "tf_names")  # as transformers' TF classes save (sweep 30, U9)
  save_file({k.replace(".", "/").replace("layer/", "layer_._") + ":0": v for k, v in weights.items()},
            str(root / "tf_names" / "model.safetensors"))
  for name, key, edit in (("no_ff_weight", "transformer.layer.1.ff.layer_1.weight", None),
                          ("wide_layer_1", ff_2, lambda w: np.zeros([8, 12], np.float32)),
                          ("wide_bias_layer_1", r_w, lambda w: np.zeros([2, 5], np.float32)),
                          ("int_weight", ff_2, lambda w: w.astype(np.int32)),
                          ("nan_weight", ff_2, lambda w: np.where(np.arange(w.size).reshape(w.shape) == 5, np.nan, w))):
    shutil.copytree(f"{DATA}/lm_safetensors", root / name)
    weights = load_file(str(root / name / "model.safetensors"))
    if edit:
      weights[key] = edit(weights[key])
    else:
      del weights[key]
    save_file(weights, str(root / name / "model.safetensors"))
  sharded = "cls_safetensors_sharded"
  index_name = "model.safetensors.index.json"
  index = json.loads(open(f"{DATA}/{sharded}/{index_name}").read())
  first, second = sorted(set(index["weight_map"].values()))
  moved = sorted(k for k, v in index["weight_map"].items() if v == first)[0]
  for name, text in (("index_of_one_shard", json.dumps(dict(index, weight_map={
                         k: v for k, v in index["weight_map"].items() if v == first}))),
                     ("index_a_list", "[]"), ("weight_map_a_list", json.dumps({"weight_map": []})),
                     ("shard_a_path", json.dumps(dict(index, weight_map={
                         k: f"../{v}" for k, v in index["weight_map"].items()}))),
                     ("shard_swapped", None),
                     ("shard_missing", json.dumps(dict(index, weight_map={  # "two downloads?" (sweep 33, A11)
                         k: "model-00009-of-00009.safetensors" if k == moved else v
                         for k, v in index["weight_map"].items()})))):
    shutil.copytree(f"{DATA}/{sharded}", root / name)
    if text is None:
      shutil.copy(root / name / first, root / name / second)
    else:
      (root / name / index_name).write_text(text)
  # a second shard also holding a weight the index places in the first (an old download's shard kept): it won
  shutil.copytree(f"{DATA}/{sharded}", root / "shards_of_two_downloads")
  later = load_file(str(root / "shards_of_two_downloads" / second))
  later[moved] = np.zeros_like(load_file(str(root / "shards_of_two_downloads" / first))[moved])
  save_file(later, str(root / "shards_of_two_downloads" / second))
  # Directories without usable weights: shards without their index, a config and tokenizer alone, a weights file
  # that is a broken link (an unfinished hub download).
  shutil.copytree(f"{DATA}/{sharded}", root / "shards_without_index")
  (root / "shards_without_index" / index_name).unlink()
  (root / "no_weights").mkdir()
  shutil.copy(f"{DATA}/{sharded}/config.json", root / "no_weights")
  shutil.copy("tests/testdata/data/spm/spiece.model", root / "no_weights")
  shutil.copytree(root / "no_weights", root / "broken_link")
  shutil.copytree(root / "no_weights", root / "weights_a_directory")  # "Download it again" (sweep 33, A12)
  (root / "weights_a_directory" / "model.safetensors").mkdir()
  os.symlink(root / "blobs" / "abc.incomplete", root / "broken_link" / "model.safetensors")
  return root


@pytest.mark.parametrize("case,words", [
    ("cut_safetensors", "is not a readable safetensors file"), ("cut_h5", "is not a readable tf_model.h5"),
    ("looping_h5", r"is not a readable tf_model.h5 \(reading it ran 2 s without an end: HDF5 loops for ever in some "
                   r"damaged files; if the disk is slow, copy the model to a local one\)\. Download it again\.$"),
    ("fifo_h5", r"fifo_h5/tf_model.h5 is not a regular file. Put the model's tf_model.h5 there.$"),
    ("broken_h5py", r"Cannot read .*broken_h5py/tf_model.h5 \(h5py is broken here\): the file may be whole. Fix that "
                    r"and rerun.$"),
    ("unwritten_h5", r"is not a readable tf_model.h5 \(tfxl_net_lm_head_model/transformer/mask_emb:0 of shape "
                     r"\[50000, 10000\] holds no data\)"),
    ("cut_bin", "is not a readable PyTorch weights file"),
    ("cut_legacy_bin", r"is not a readable PyTorch weights file \(a storage of \d+ float32 elements has \d+ bytes\)"),
    ("bin_compression", r"is not a readable PyTorch weights file \(That compression method is not supported\)"),
    ("bin_frame", r"is not a readable PyTorch weights file \(FRAME length exceeds system's maximum"),
    ("bin_bytes_length", r"is not a readable PyTorch weights file \(a length in its pickle asks for more memory than "
                         r"there is\)\. Download it again\.$"),
    ("bad_config", "config.json does not match the weights"),
    ("layer_1_renamed", r"config.json does not match the weights: the weights hold layers \[0, 2\], the config says "
                        "n_layer=2"),  # "have 2 layers, the config says n_layer=2" (sweep 21, C5)
    ("billion_layers", r"config.json does not match the weights: the weights hold layers \[0, 1\], the config says "
                       "n_layer=1000000000"),  # the converter was killed for memory (sweep 33, A6)
    ("layer_01", r"layer_01/model.safetensors: its weights name a layer transformer.layer.01, which no transformers "
                 r"model writes \(renamed weights\). Download the model again.$"),
    ("multi_label", r"multi_label/tf_model.h5: problem_type multi_label_classification \(a sigmoid a class, any "
                    "number of them true\) cannot be computed by the original's classifier"),  # read as one (A5)
    ("config_list", "config.json holds a json list, not an object of settings"),
    ("id2label_list", r'config.json: id2label \["neg", "pos"\] is not an object of class names \(as \{"0": "neg"\}\)\. '
                      "Use the config.json that came with the weights.$"),  # an AttributeError (sweep 30, U3)
    ("task_number", r"config.json: finetuning_task 5 is not a string"),
    ("architectures_object", r"config.json: architectures \{\"a\": 1\} is not a list of class names \(as "
                             r"\[\"XLNetLMHeadModel\"\]\)\. Use the config.json that came with the weights\.$"),
    ("string_size", "config.json's sizes must be positive integers; received d_model '16'"),
    ("no_heads", "config.json's sizes must be positive integers; received n_head 0"),
    ("string_eps", "layer_norm_eps '1e-12' cannot be expressed"),
    ("no_n_head", r"config.json does not match the weights \(it has no n_head: transformers' default 16 taken, as "
                  r"transformers does\): transformer.layer.0.rel_attn.q is"),
    ("swish", r"swish/tf_model.h5: ff_activation 'swish' has no counterpart in the original XLNet \(relu, gelu = HF "
              r"gelu_new/gelu_pytorch_tanh/gelu_fast\): this model cannot be read here. Use transformers.$"),
    ("attn_type", r"attn_type/config.json: attn_type 'uni': transformers computes this model with one-way \(causal\) "
                  r"attention, the tools here with the original's fine-tuning attention 'bi'"),
    ("bi_data", r"bi_data/config.json: bi_data True: transformers computes the second half of each batch with "
                r"backward positions.* set bi_data to false in .*bi_data/config.json to use them"),
    ("summary_attn", r"summary_attn/config.json: summary_type 'attn' cannot be used: transformers cannot run it "
                     r"either \(its SequenceSummary raises NotImplementedError\)"),
    ("no_proj_tanh", r"no_proj_tanh/config.json: summary_use_proj false with summary_activation 'tanh': transformers "
                     r"applies it to the pooled hidden state itself, which the original's pooling cannot express"),
    ("qa_simple", "unknown head XLNetForQuestionAnsweringSimple"),
    ("several_heads", "holds several heads"), ("d_head", "d_head=6 is not d_model / n_head"),
    ("output_is_a_file", "as a directory: it is a file"),
    ("lm_architecture", r"lm_architecture/tf_model.h5: config.json's architectures names XLNetLMHeadModel, whose "
                        r"lm_loss.bias the weights lack; they hold logits_proj, sequence_summary: another head. Fix "
                        "architectures in config.json."),  # "incomplete ... Download the model again" (sweep 21, C7)
    ("no_ff_weight", r"\(XLNetLMHeadModel\) lacks transformer.layer.1.ff.layer_1.weight: its weights are incomplete"),
    ("wide_layer_1", r"model.safetensors: transformer.layer.1.ff.layer_2.weight has the shape \[8, 12\], where the "
                     r"model of its config.json has \[8, 11\]: the weights file is damaged"),
    ("wide_bias_layer_1", r"transformer.layer.1.rel_attn.r_w_bias has the shape \[2, 5\], where the model of its "
                          r"config.json has \[2, 4\]"),
    ("int_weight", "transformer.layer.1.ff.layer_2.weight holds int32 values, not floating-point weights"),
    ("tf_names", r"tf_names/model.safetensors holds weights under transformers' TensorFlow names \(\S+:0, "
                 r"\.\.\.\): it was saved by its TF classes\. Save the model with its PyTorch class \(save_pretrained\), "
                 r"or pass its tf_model.h5, which the tools read\.$"),  # "config.json does not match" (sweep 30, U9)
    ("nan_weight", r"model.safetensors: transformer.layer.1.ff.layer_2.weight holds NaN or infinite values \(1 of "
                   r"88\): the checkpoint is damaged, or from a diverged run"),
    ("index_of_one_shard", r"\(XLNetForSequenceClassification\) lacks sequence_summary.summary.weight, "
                           "sequence_summary.summary.bias, logits_proj.weight, logits_proj.bias"),
    ("shard_swapped", "model-00002-of-00002.safetensors lacks logits_proj.bias, .*index.json places there: the shard "
                      "is another one or damaged"),
    ("shards_of_two_downloads", r"model-00002-of-00002.safetensors holds \S+, which .*index.json places in "
                                r"model-00001-of-00002.safetensors: shards of two downloads\? Download the model "
                                "again into an empty directory."),
    ("shard_missing", r"model.safetensors.index.json names model-00009-of-00009.safetensors, which is not in "
                      r".*shard_missing\. Download every shard\.$"),
    ("index_a_list", "is not a valid shard index"), ("weight_map_a_list", "is not a valid shard index"),
    ("shard_a_path", "is not a valid shard index"),
    ("shards_without_index", r"holds weight shards \(model-00001-of-00002.safetensors, ...\) but not their index "
                             "model.safetensors.index.json. Download it too."),
    ("no_weights", "holds config.json, spiece.model but no model weights"),
    ("weights_a_directory", r"weights_a_directory/model.safetensors is a directory, not a file\. Put the model's "
                            r"model.safetensors there\.$"),
    ("broken_link", r"broken_link/model.safetensors is a broken link \(a download cut short\?\)")])
def test_bad_inputs_are_one_line(case, words, tmp_path, monkeypatch):
  if case == "looping_h5":  # the others keep the limit: a child that reads a small file starts slowly on a busy machine
    monkeypatch.setattr(hf_weights, "H5_SECONDS", 2)
  root = _corrupt_copies(tmp_path)
  if case == "broken_h5py":
    (tmp_path / "site" / "h5py").mkdir(parents=True)
    (tmp_path / "site" / "h5py" / "__init__.py").write_text("raise ImportError('h5py is broken here')")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
  inputs = {"qa_simple": f"{DATA}/qa_simple_safetensors", "several_heads": f"{MODEL}/ckpt_untied",
            "d_head": f"{MODEL}/ckpt_untied/xlnet_model.ckpt", "output_is_a_file": f"{DATA}/lm_h5"}
  extra = {"d_head": dict(task_name="toy")}.get(case, {})
  output_dir = f"{DATA}/lm_outputs.npz" if case == "output_is_a_file" else str(tmp_path / "out")
  with pytest.raises((ValueError, FileNotFoundError), match=words) as error:
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=inputs.get(case, str(root / case)),
                                        output_dir=output_dir, **extra), log_fn=lambda line: None)
  assert "\n" not in str(error.value)
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)])  # 15 min
def test_a_signal_stops_a_tool_reading_a_looping_h5(signum, tmp_path):
  """A tf_model.h5 in which HDF5 loops for ever: SIGINT and SIGTERM did not stop convert_checkpoint.py, only kill -9
  did (sweep 28, A5). The file is read through in a child process, which this one waits for."""
  shutil.copytree(f"{DATA}/lm_h5", tmp_path / "hf")
  _flip_into_hdf5_s_loop(tmp_path / "hf" / "tf_model.h5")
  proc = subprocess.Popen([sys.executable, "convert_checkpoint.py", f"--input={tmp_path}/hf",
                           f"--output_dir={tmp_path}/out"], stderr=subprocess.PIPE, text=True)
  try:
    deadline = time.time() + 60
    while not (child := subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "child_call"], capture_output=True,
                                       text=True).stdout.split()):
      assert time.time() < deadline and proc.poll() is None, "no child reads the file"
      time.sleep(0.1)
    time.sleep(1)  # in HDF5's loop
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
  finally:
    proc.kill()
  assert proc.returncode == 128 + signum and err.strip().splitlines()[-1].startswith(
      f"convert_checkpoint.py: stopped by {signal.Signals(signum).name}"), (proc.returncode, err[-2000:])
  assert not os.path.exists(f"/proc/{child[0]}")  # killed on the way out, and waited for
  assert sorted(os.listdir(tmp_path)) == ["hf"]


def test_an_old_config_s_names_are_read_as_transformers_reads_them(tmp_path):
  """A config.json of an older transformers: `n_token` (and hidden_size, num_attention_heads, num_hidden_layers),
  which transformers still maps to vocab_size (d_model, ...), was read as HF's default 32000 and the weights refused
  as not matching it; one without model_type was refused without saying what to add (sweep 17, H4)."""
  model = tmp_path / "old"
  shutil.copytree(f"{DATA}/lm_safetensors", model)
  config = json.loads((model / "config.json").read_text())
  renamed = {"vocab_size": "n_token", "d_model": "hidden_size", "n_head": "num_attention_heads",
             "n_layer": "num_hidden_layers"}
  (model / "config.json").write_text(json.dumps({renamed.get(k, k): v for k, v in config.items()}))
  assert hf_checkpoint.read_hf_checkpoint(str(model))[0] == hf_checkpoint.read_hf_checkpoint(
      f"{DATA}/lm_safetensors")[0]
  (model / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "model_type"}))
  with pytest.raises(ValueError, match=r"has model_type None, not 'xlnet'. Pass an XLNet model \(if it is one, add "
                                       r"\"model_type\": \"xlnet\" to its config\)\.$"):
    hf_checkpoint.read_hf_checkpoint(str(model))


@pytest.mark.parametrize("to", ["hf", "tf1"])
def test_a_tf1_checkpoint_holding_nan_or_inf_is_refused_naming_the_weight(to, tmp_path):
  """An original-format checkpoint with an infinite weight (a diverged run's) converted to HF, or cleaned to its
  weights: refused naming the weight, nothing written (it converted, and predictions from it were NaN, exit 0)."""
  config, arrays, _ = hf_checkpoint.read_hf_checkpoint(f"{DATA}/lm_safetensors")
  name = "model/transformer/layer_1/ff/layer_2/bias"
  arrays[name] = np.where(np.arange(arrays[name].size) == 3, np.inf, arrays[name]).astype(np.float32)
  checkpoint.write_original_checkpoint(arrays, str(tmp_path / "tf1" / "xlnet_model.ckpt"))
  config.to_json(str(tmp_path / "tf1" / "xlnet_config.json"))
  with pytest.raises(ValueError, match=f"^{tmp_path}/tf1/xlnet_model.ckpt: {name} holds NaN or infinite values "
                                       r"\(1 of 8\): the checkpoint is damaged, or from a diverged run"):
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "tf1"), to=to,
                                        output_dir=str(tmp_path / "out")), log_fn=lambda line: None)
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name,edit,words", [
    ("logit/kernel", lambda w: np.zeros([w.shape[0] + 1, w.shape[1]], np.float32), "float32 of shape [9, 3]"),
    ("layer_1/ff/layer_2/bias", lambda w: w.astype(np.int32), "int32 of shape [8]")])
def test_a_tf1_checkpoint_s_head_of_another_shape_or_integer_weights_are_refused(name, edit, words, tmp_path):
  """TF1 -> HF checked the backbone's shapes only: a head of another shape was written (transformers then refused
  the export), an integer weight cast to float32, exit 0 (sweep 33, A3, A4)."""
  config, arrays, _ = hf_checkpoint.read_hf_checkpoint(f"{DATA}/cls_bin")
  name = next(n for n in arrays if n.endswith(name))
  arrays[name] = edit(arrays[name])
  checkpoint.write_original_checkpoint(arrays, str(tmp_path / "tf1" / "xlnet_model.ckpt"))
  config.to_json(str(tmp_path / "tf1" / "xlnet_config.json"))
  with pytest.raises(ValueError, match=f"^{tmp_path}/tf1/xlnet_model.ckpt: {name} is {re.escape(words)}, where a "
                                       "model of its config holds floating-point weights of shape"):
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "tf1"),
                                        output_dir=str(tmp_path / "out")), log_fn=lambda line: None)
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name,dtype", [("cls_bin_fp16_legacy", np.float16), ("cls_bin_bf16", ml_dtypes.bfloat16)])
def test_a_half_precision_bin_gives_its_values_as_float32(name, dtype):
  """pytorch_model.bin in float16 (torch's format before 1.6) or bfloat16 (a zip archive), read without torch: every
  weight is the float32 one rounded to that type, as torch's `.to(dtype)` rounds, then widened back."""
  half, _ = hf_weights.read_weights(f"{DATA}/{name}")
  full, _ = hf_weights.read_weights(f"{DATA}/cls_bin")
  assert sorted(half) == sorted(full)
  for key, array in full.items():
    assert half[key].dtype == np.float32, key
    np.testing.assert_array_equal(half[key], array.astype(dtype).astype(np.float32), err_msg=key)


def test_a_tensor_expanded_past_its_storage_is_refused_before_it_is_made():
  """A 14 KB pytorch_model.bin whose tensor has strides of 0 and a large shape was expanded in memory before any
  shape check (2.5 GB for [50000, 10000]; numpy's "Unable to allocate 364. TiB" for a larger one) (sweep 21, T1)."""
  storage = types.SimpleNamespace(values=np.ones([4], np.float32))
  with pytest.raises(ValueError, match=r"^a tensor of shape \(50000, 10000\) holds more elements than its storage "
                                       "of 4$"):
    torch_pickle._Tensor(storage, 0, (50000, 10000), (0, 0)).array()  # pylint: disable=protected-access
  np.testing.assert_array_equal(torch_pickle._Tensor(storage, 1, (3,), (1,)).array(), [1, 1, 1])  # a view: read


def test_a_training_script_s_checkpoint_says_where_its_weights_are(tmp_path, monkeypatch):
  """`torch.save({"state_dict": ..., "epoch": 3})` as pytorch_model.bin: "it holds no dict of tensors. Download it
  again." (it is a dict, and downloading again cannot help) (sweep 21, T2)."""
  storage = types.SimpleNamespace(values=np.ones([4], np.float32))
  nested = {"state_dict": {"w": torch_pickle._Tensor(storage, 0, (4,), (1,))}, "epoch": 3}  # pylint: disable=W0212
  monkeypatch.setattr(torch_pickle, "_load_zip", lambda archive: nested)
  with zipfile.ZipFile(tmp_path / "pytorch_model.bin", "w") as archive:
    archive.writestr("archive/data.pkl", b"")
  with pytest.raises(ValueError, match=r"pytorch_model.bin is not a readable PyTorch weights file \(it is a training "
                                       r"script's checkpoint, its weights under 'state_dict': save them alone, e.g. "
                                       r"torch.save\(checkpoint\['state_dict'\], path\)\).$"):
    torch_pickle.load(str(tmp_path / "pytorch_model.bin"))


class _RunsACommand:
  def __reduce__(self):
    return (os.system, (f"touch {_RunsACommand.witness}",))


def test_a_bin_that_would_run_code_is_refused_without_running_it(tmp_path):
  """A pytorch_model.bin whose pickle calls os.system (what a malicious download holds): refused by name, and the
  command never runs. Only ordered dicts, tensors and storages are made."""
  _RunsACommand.witness = tmp_path / "ran"
  directory = tmp_path / "model"
  directory.mkdir()
  with zipfile.ZipFile(directory / "pytorch_model.bin", "w") as archive:
    archive.writestr("pytorch_model/data.pkl", pickle.dumps({"w": _RunsACommand()}, protocol=2))
  with pytest.raises(ValueError, match=r"pytorch_model.bin is not a readable PyTorch weights file \(it holds a "
                                       r"(posix|os)\.system, which is not part of a state dict of tensors\)"):
    hf_weights.read_weights(str(directory))
  assert not _RunsACommand.witness.exists()


def _hub_cache(model_dir, cache, commits, main=None):
  """A HuggingFace hub cache directory `cache` as `from_pretrained` leaves it: the files of `model_dir` in
  `blobs/`, linked from `snapshots/<commit>/` for each of `commits`, and `refs/main` holding `main` (if given)."""
  (cache / "blobs").mkdir(parents=True)
  for name in os.listdir(model_dir):
    shutil.copy(os.path.join(model_dir, name), cache / "blobs" / name)
    for commit in commits:
      (cache / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
      os.symlink(os.path.join("..", "..", "blobs", name), cache / "snapshots" / commit / name)
  if main is not None:
    (cache / "refs").mkdir()
    (cache / "refs" / "main").write_text(main)
  return cache


def test_a_hub_cache_directory_reads_its_snapshot(tmp_path):
  """`hub_snapshot`: the snapshot refs/main names; without refs/main, the only one; several and none named: a
  ValueError naming where to look; a model directory or a TF1 checkpoint's directory: None."""
  one = _hub_cache(f"{DATA}/cls_bin", tmp_path / "one", ["a1"])
  assert hf_checkpoint.hub_snapshot(str(one)) == str(one / "snapshots" / "a1")
  two = _hub_cache(f"{DATA}/cls_bin", tmp_path / "two", ["a1", "b2"], main="b2\n")
  assert hf_checkpoint.hub_snapshot(str(two)) == str(two / "snapshots" / "b2")
  assert hf_checkpoint.is_hf_directory(hf_checkpoint.hub_snapshot(str(two)))
  (two / "refs" / "main").unlink()
  with pytest.raises(ValueError, match=r"hub cache directory with snapshots a1, b2 and no refs/main naming one "
                                       r"of them. Pass the snapshot to read: .*/two/snapshots/<commit>"):
    hf_checkpoint.hub_snapshot(str(two))
  for cache in (one, two):  # a commit whose snapshot is missing: the other, older one was read (sweep 21, C2)
    (cache / "refs").mkdir(exist_ok=True)
    (cache / "refs" / "main").write_text("c3")
    with pytest.raises(ValueError, match=r"hub cache directory with snapshots a1(, b2)? and a refs/main naming c3, "
                                         r"not one of them \(a download cut short\?\). Pass the snapshot to read"):
      hf_checkpoint.hub_snapshot(str(cache))
  (two / "refs" / "main").unlink()
  (two / "refs" / "main").mkdir()  # "[Errno 21] Is a directory: '.../refs/main'" alone (sweep 27)
  with pytest.raises(ValueError, match=r"snapshots a1, b2 and a refs/main naming nothing readable \(Is a directory\), "
                                       r"not one of them"):
    hf_checkpoint.hub_snapshot(str(two))
  for plain in (f"{DATA}/cls_bin", f"{MODEL}/ckpt_untied", str(tmp_path / "two" / "snapshots" / "a1")):
    assert hf_checkpoint.hub_snapshot(plain) is None


@pytest.mark.slow  # the default suite's 15 minutes; by default: the hub cache's snapshot, an HF directory's load
def _tiny_hf_directory(tmp_path, n_layer):
  """tmp_path/hf: the HF export of a tiny model of the test SentencePiece model's 1000 ids (from tmp_path/tf1, its
  original checkpoint); its XLNetConfig."""
  config = XLNetConfig(n_layer=n_layer, d_model=16, n_head=2, d_head=8, d_inner=24, ff_activation="gelu",
                       untie_r=True, n_token=1000)
  rc = _run_config()
  ckpt = tmp_path / "tf1" / "xlnet_model.ckpt"
  checkpoint.export_original_checkpoint(XLNetModel(config, rc, heads=finetune_heads(config, rc)), str(ckpt))
  config.to_json(str(tmp_path / "tf1" / "xlnet_config.json"))
  convert.convert_to_hf(str(ckpt), str(tmp_path / "hf"), log_fn=lambda line: None)
  return config


@pytest.mark.slow  # the default suite's 15 minutes; by default: the hub cache and HF directory tests in-process
def test_run_classifier_fine_tunes_from_an_hf_directory(tmp_path):
  """run_classifier.py --init_checkpoint=<HF hub cache directory> (what `from_pretrained` downloaded) without
  --model_config_path: its snapshot is read, the log names it and what it loaded, the loss is finite and a
  checkpoint is written. The HF directory is a converted tiny model (n_token 1000, for the test SentencePiece
  model)."""
  from xlnet_tf.data import corpora  # pylint: disable=import-outside-toplevel
  _tiny_hf_directory(tmp_path, n_layer=2)
  cache = _hub_cache(str(tmp_path / "hf"), tmp_path / "hub" / "models--me--xlnet-tiny", ["e5f6", "c0ffee"],
                     main="c0ffee")
  corpora.write_aclimdb(str(tmp_path / "imdb"), num_train=8, num_dev=4, seed=1)
  proc = subprocess.run(
      [sys.executable, "run_classifier.py", "--do_train=True", "--task_name=imdb", f"--data_dir={tmp_path}/imdb",
       "--spiece_model_file=tests/testdata/data/spm/spiece.model", f"--init_checkpoint={cache}",
       "--max_seq_length=32", f"--output_dir={tmp_path}/records", f"--model_dir={tmp_path}/model",
       "--train_batch_size=2", "--train_steps=2", "--iterations=1", "--seed=1"],
      capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (f"--init_checkpoint {cache} is a HuggingFace hub cache directory: reading its model "
          f"{cache}/snapshots/c0ffee.") in proc.stderr
  assert f"from {cache}/snapshots/c0ffee (HuggingFace XLNetLMHeadModel, model.safetensors)" in proc.stdout
  assert list((tmp_path / "model").glob("ckpt-2.index"))
  assert "nan" not in proc.stdout.lower()


def test_a_prediction_from_an_hf_directory_takes_the_model_from_its_config_json(tmp_path):
  """--do_predict --predict_ckpt=<HF directory> without --model_config_path: its config.json gives the model, as
  --init_checkpoint's does (the run asked for --model_config_path); a --model_config_path of another model is
  refused naming --predict_ckpt."""
  import types  # pylint: disable=import-outside-toplevel
  from xlnet_tf.data import tokenization  # pylint: disable=import-outside-toplevel
  config = _tiny_hf_directory(tmp_path, n_layer=1)
  sp = tokenization.load_sentencepiece("tests/testdata/data/spm/spiece.model")
  o = types.SimpleNamespace(model_config_path="", init_checkpoint=None, predict_ckpt=str(tmp_path / "hf"),
                            spiece_model_file="tests/testdata/data/spm/spiece.model")
  flag_configs.require_model_config(o)
  assert not flag_configs.model_config(o, sp).differences(config)
  o.model_config_path = str(tmp_path / "wide.json")
  XLNetConfig(**{**config.to_dict(), "d_inner": 32}).to_json(o.model_config_path)
  with pytest.raises(ValueError, match=f"^--predict_ckpt {tmp_path}/hf is a HuggingFace model other than "
                                       f"--model_config_path {tmp_path}/wide.json describes"):
    flag_configs.model_config(o, sp)
  o.model_config_path, o.predict_ckpt = "", None
  with pytest.raises(cli.FlagError, match="--model_config_path is required"):
    flag_configs.require_model_config(o)
  (tmp_path / "hf" / "model.safetensors").unlink()  # config.json and no weights: said so (not "pass a config")
  o.init_checkpoint = str(tmp_path / "hf")
  with pytest.raises(FileNotFoundError, match=f"^{tmp_path}/hf holds config.json but no model weights"):
    flag_configs.model_config(o, sp)


def test_one_of_our_checkpoints_exports_too(tmp_path):
  """A checkpoint in Trainer's layout (the original names under `weights/`) with the xlnet_config.json beside it
  (as run_*.py write them) exports to HF like an original one; --to the input's own format is refused."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  hf_config, arrays, _ = hf_checkpoint.read_hf_checkpoint(f"{DATA}/lm_h5")
  model = XLNetModel(hf_config, _run_config())
  checkpoint.assign_by_name(model, checkpoint.ArrayReader(arrays), {n: n for n in arrays}, "lm_h5")
  path = tf.train.Checkpoint(weights=checkpoint.original_variable_map(model)).save(str(tmp_path / "model" / "ckpt"))
  hf_config.to_json(str(tmp_path / "model" / "xlnet_config.json"))
  convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=path, output_dir=str(tmp_path / "hf")),
                         log_fn=lambda line: None)
  exported, reference = load_file(str(tmp_path / "hf" / "model.safetensors")), _hf_arrays("lm_safetensors")
  assert sorted(exported) == sorted(reference)
  for key, array in reference.items():
    np.testing.assert_array_equal(exported[key], array, err_msg=key)
  with pytest.raises(cli.FlagError, match="already in the hf format"):
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=f"{DATA}/lm_h5", to="hf",
                                        output_dir=str(tmp_path / "x")), log_fn=lambda line: None)


def test_the_export_pools_and_names_labels_as_the_fine_tuning_run_did(tmp_path):
  """A checkpoint with run_classifier.py's run_flags.json beside it exports with that run's --summary_type, its
  labels as id2label (it was `last` and LABEL_i whatever the run did) and its --clamp_len as clamp_len (transformers
  computed the export without clamping; read back, it needs --clamp_len=3 and converts with it); another --summary_type is
  refused; a pretraining run's (whose --summary_type pools nothing) is not read."""
  src = tmp_path / "run"
  shutil.copytree(f"{MODEL}/ckpt_untied", src)
  (src / "run_flags.json").write_text(json.dumps({"summary_type": "mean", "label_list": ["a", "b", "c"],
                                                   "clamp_len": 3}))
  convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf"), task_name="toy",
                        allow_d_head_override=True, log_fn=lambda _: None)
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["summary_type"] == "mean" and config["id2label"] == {"0": "a", "1": "b", "2": "c"}
  assert config["label2id"] == {"a": 0, "b": 1, "c": 2} and config["clamp_len"] == 3
  with pytest.raises(ValueError, match=f"^--predict_ckpt {tmp_path}/hf clamps relative positions at 3 \\(clamp_len in "
                                       f"{tmp_path}/hf/config.json: how transformers computes it\\), this run at -1 "
                                       r"\(--clamp_len\): .* Pass --clamp_len=3\.$"):
    hf_checkpoint.model_config(None, str(tmp_path / "hf"), "--predict_ckpt", clamp_len=-1)
  assert hf_checkpoint.model_config(None, str(tmp_path / "hf"), "--predict_ckpt", clamp_len=3).n_layer == 2
  convert.convert_to_original(str(tmp_path / "hf"), str(tmp_path / "back"), log_fn=lambda _: None)  # and back:
  assert json.loads((tmp_path / "back" / "run_flags.json").read_text())["clamp_len"] == 3  # compared with the flag
  with pytest.raises(ValueError, match="--summary_type last, but .* was fine-tuned with --summary_type=mean"):
    convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf2"), task_name="toy", summary_type="last",
                          allow_d_head_override=True)
  # `attn`, which HF lacks: one line, not the advice to leave --summary_type unset and then `'attn' cannot be
  # exported` (sweep 26, C1); a SQuAD run's --summary_type pools nothing and is not read.
  flags = json.loads((src / "run_flags.json").read_text())
  (src / "run_flags.json").write_text(json.dumps(dict(flags, summary_type="attn")))
  for given in (None, "last"):
    with pytest.raises(ValueError, match=r"was fine-tuned with --summary_type=attn \(.*run_flags.json\), a pooling "
                                         r"HF's XLNet does not have .* its head cannot be exported\."):
      convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf2"), task_name="toy",
                            summary_type=given, allow_d_head_override=True)
  squad = dict(flags, summary_type="attn", max_query_length=64)
  assert convert._fine_tuned_with(squad)[0] is None  # pylint: disable=protected-access
  (src / "run_flags.json").write_text(json.dumps(flags))
  # The weights alone (--to=tf1) keep the run's flags beside them: exported to HF from there, it pooled with `last`.
  convert.clean_checkpoint(str(src / "xlnet_model.ckpt"), str(tmp_path / "clean"), log_fn=lambda _: None)
  convert.convert_to_hf(str(tmp_path / "clean" / "xlnet_model.ckpt"), str(tmp_path / "hf4"), task_name="toy",
                        allow_d_head_override=True, log_fn=lambda _: None)
  assert json.loads((tmp_path / "hf4" / "config.json").read_text()) == config
  (src / "run_flags.json").write_text(json.dumps({"summary_type": "mean", "record_info_dir": "proc_data",
                                                   "clamp_len": -1}))
  lines = []
  convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf3"), task_name="toy",
                        allow_d_head_override=True, log_fn=lines.append)
  config = json.loads((tmp_path / "hf3" / "config.json").read_text())
  assert config["summary_type"] == "last" and config["id2label"]["0"] == "LABEL_0" and "clamp_len" not in config
  assert (f"Its pooling is unknown (no --summary_type, and no run_flags.json of the run that fine-tuned it beside "
          f"{src / 'xlnet_model.ckpt'}): config.json says summary_type 'last', the original's default. Convert again "
          "with --summary_type if it was fine-tuned with another.") in lines
  # a spiece.model beside it that is not the one the run recorded: the export shipped it as the tokenizer (sweep 21,
  # H4); the one recorded is copied
  spm = "tests/testdata/data/spm/spiece.model"
  (src / "run_flags.json").write_text(json.dumps({"summary_type": "mean", "spiece_model_file": spm,
                                                   "spiece_model_sha256": fileio.sha256(spm)}))
  (src / "spiece.model").write_bytes(b"another model")
  for to_hf in (True, False):
    with pytest.raises(ValueError, match=f"^{src}/spiece.model is another SentencePiece model than the run that "
                                         f"trained the checkpoint used \\(its sha256 differs from {src}/run_flags"
                                         f".json's, of --spiece_model_file={spm}\\): .* or move this one away"):
      (convert.convert_to_hf if to_hf else convert.clean_checkpoint)(
          str(src / "xlnet_model.ckpt"), str(tmp_path / "hf6"), **({"task_name": "toy", "allow_d_head_override": True}
                                                                  if to_hf else {}), log_fn=lambda _: None)
    assert not (tmp_path / "hf6").exists()
  (src / "spiece.model").write_bytes(b"")  # "another model" (sweep 22, N8)
  with pytest.raises(ValueError, match=f"^{src}/spiece.model is empty \\(0 bytes: a copy cut short\\?\\), not the "
                                       "SentencePiece model of the run that trained the checkpoint used"):
    convert.clean_checkpoint(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf6"), log_fn=lambda _: None)
  (src / "spiece.model").unlink()  # none beside it, another one in --output_dir: the tools took that one as the
  (tmp_path / "hf_spm").mkdir()  # model's, and advised passing it (sweep 25, A1)
  (tmp_path / "hf_spm" / "spiece.model").write_bytes(b"another model")
  for to_hf in (True, False):
    with pytest.raises(ValueError, match=f"^{tmp_path}/hf_spm/spiece.model is another SentencePiece model than the run "
                                         f"that trained the checkpoint used \\(its sha256 differs from {src}/run_flags"
                                         ".json's, of --spiece_model_file=.*Move it away, or pass another "
                                         "--output_dir.$"):
      (convert.convert_to_hf if to_hf else convert.clean_checkpoint)(
          str(src / "xlnet_model.ckpt"), str(tmp_path / "hf_spm"),
          **({"task_name": "toy", "allow_d_head_override": True} if to_hf else {}), log_fn=lambda _: None)
    assert os.listdir(tmp_path / "hf_spm") == ["spiece.model"]
  shutil.copy(spm, src / "spiece.model")
  convert.clean_checkpoint(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf6"), log_fn=lambda _: None)
  assert (tmp_path / "hf6" / "spiece.model").read_bytes() == (src / "spiece.model").read_bytes()
  (src / "run_flags.json").write_text(json.dumps({"summary_type": "mean", "label_list": ["a", "b"]}))  # 3 classes
  with pytest.raises(ValueError, match=f"^The run_flags.json beside {src}/xlnet_model.ckpt lists 2 labels, the "
                                       "checkpoint's classification head has 3 classes: it is another run's"):
    convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf7"), task_name="toy",
                          allow_d_head_override=True)  # its pooling was taken, its labels dropped (sweep 21, C10)
  (src / "run_flags.json").write_text('{"summary_type": "mean", "label_li')  # a copy cut short: taken as none
  for to_hf in (True, False):
    with pytest.raises(ValueError, match=f"^{src}/run_flags.json is damaged \\(.*\\): it records the flags of the run "
                                         "that wrote the checkpoints there, whose pooling and labels the conversion "
                                         "carries over. Restore it from a copy of that run, or move it away to convert "
                                         "without them.$"):
      (convert.convert_to_hf if to_hf else convert.clean_checkpoint)(
          str(src / "xlnet_model.ckpt"), str(tmp_path / "hf5"), **({"task_name": "toy", "allow_d_head_override": True}
                                                                  if to_hf else {}), log_fn=lambda _: None)
    assert not (tmp_path / "hf5").exists()


def test_a_converted_model_is_not_written_beside_a_model_of_the_other_format(tmp_path):
  """An --output_dir holding a model of the other format was written into: the HF files then shadowed the original
  checkpoint there (readers of a directory prefer them), or the other way round. Refused, nothing written."""
  for name in ("tf1", "source"):
    convert.convert_to_original(f"{DATA}/cls_bin", str(tmp_path / name), log_fn=lambda _: None)
  shutil.copytree(f"{DATA}/qa_bin", tmp_path / "hf")
  before = sorted(os.listdir(tmp_path / "tf1"))
  with pytest.raises(ValueError, match=r"--output_dir .*/tf1 already holds a model \(xlnet_config.json, xlnet_model"):
    convert.convert_to_hf(str(tmp_path / "source" / "xlnet_model.ckpt"), str(tmp_path / "tf1"))
  with pytest.raises(ValueError, match=r"--output_dir .*/hf already holds a model \(config.json, pytorch_model.bin\)"):
    convert.clean_checkpoint(str(tmp_path / "source" / "xlnet_model.ckpt"), str(tmp_path / "hf"))
  assert sorted(os.listdir(tmp_path / "tf1")) == before and sorted(os.listdir(tmp_path / "hf")) == sorted(
      os.listdir(f"{DATA}/qa_bin"))
  (tmp_path / "tokenizer").mkdir()  # another model's fast tokenizer, which transformers prefers (sweep 30, U10)
  (tmp_path / "tokenizer" / "tokenizer.json").write_text("{}")
  with pytest.raises(ValueError, match=r"--output_dir .*/tokenizer already holds a model \(tokenizer.json\)"):
    convert.convert_to_hf(str(tmp_path / "source" / "xlnet_model.ckpt"), str(tmp_path / "tokenizer"))
  assert sorted(os.listdir(tmp_path / "tokenizer")) == ["tokenizer.json"]


def test_a_flag_the_conversion_does_not_read_is_refused(tmp_path):
  """--summary_type converting to tf1, --task_name of a checkpoint without any head: silently unused before (the
  converted model was not what the flag asked for)."""
  with pytest.raises(cli.FlagError, match=r"^--summary_type is not read converting hf to tf1"):
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=f"{DATA}/cls_bin", summary_type="last",
                                        output_dir=str(tmp_path / "a")), log_fn=lambda _: None)
  convert.convert_to_original(f"{DATA}/lm_safetensors", str(tmp_path / "lm"), log_fn=lambda _: None)
  with pytest.raises(ValueError, match=r"has no classification_imdb or regression_imdb head \(its classification "
                                       r"heads: none\)\. Leave --task_name unset\.$"):
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "lm"), task_name="imdb",
                                        output_dir=str(tmp_path / "b")), log_fn=lambda _: None)
  assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
  convert.convert_to_original(f"{DATA}/cls_bin", str(tmp_path / "cls"), task_name="imdb", log_fn=lambda _: None)
  with pytest.raises(ValueError, match=r"has no classification_sts-b or regression_sts-b head \(its classification "
                                       r"heads: \['classification_imdb'\]\)\. Pass --task_name=imdb\.$"):
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "cls"),
                                        task_name="sts-b", output_dir=str(tmp_path / "c")), log_fn=lambda _: None)
  convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "cls"), task_name="imdb",
                                      output_dir=str(tmp_path / "c")), log_fn=lambda _: None)  # as advised


def test_a_task_name_with_a_slash_is_refused_naming_the_flag():
  """An HF model whose finetuning_task is 'glue/mnli' converted to a head `classification_glue/mnli` that no tool
  could load (TensorFlow refused the name, and the head listings cut it at the '/')."""
  config = {"architectures": ["XLNetForSequenceClassification"], "finetuning_task": "glue/mnli"}
  with pytest.raises(ValueError, match=r"task name 'glue/mnli' .* Pass --task_name"):
    hf_checkpoint.classification_scope(config, None)
  with pytest.raises(ValueError, match=r"task name 'sst 2' .* cannot name a head scope"):  # a space: the same
    hf_checkpoint.classification_scope(dict(config, finetuning_task="SST 2"), None)
  assert hf_checkpoint.classification_scope(config, "mnli") == "classification_mnli"


def test_an_id2label_of_another_length_than_the_head_is_refused(tmp_path):
  """An HF classifier whose id2label names 2 classes beside a head of 3 rows predicted with rc 0 (and as csv it was
  said to hold no classification head): the config is another model's."""
  hf = tmp_path / "hf"
  shutil.copytree(f"{DATA}/cls_bin", hf)
  config = json.loads((hf / "config.json").read_text())
  (hf / "config.json").write_text(json.dumps(dict(config, id2label={"0": "neg", "1": "pos"})))
  with pytest.raises(ValueError, match=r"config.json's id2label names 2 classes, its classification head has 3: the "
                                       r"config is of another model"):
    hf_checkpoint.read_hf_checkpoint(str(hf))


def test_a_conversion_keeps_the_casing_the_tools_compare(tmp_path):
  """The casing a run read (its run_flags.json's uncased) and an HF tokenizer's do_lower_case went nowhere in a
  conversion: the converted copy then fine-tuned or predicted with the other casing, exit 0, where the source was
  refused (sweep 24, N-B1)."""
  src = tmp_path / "pt"
  shutil.copytree(f"{MODEL}/ckpt_untied", src)
  (src / "run_flags.json").write_text(json.dumps({"record_info_dir": "/r", "uncased": True, "clamp_len": -1}))
  convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf"), task_name="toy",
                        allow_d_head_override=True, log_fn=lambda _: None)
  assert json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())["do_lower_case"] is True
  assert (tmp_path / "hf" / "config.json").exists()
  (tmp_path / "hf2").mkdir()
  (tmp_path / "hf2" / "tokenizer_config.json").write_text('{"a user\'s": 1}')  # never replaced
  with pytest.raises(ValueError, match="already holds another tokenizer_config.json, which the conversion would"):
    convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(tmp_path / "hf2"), task_name="toy",
                          allow_d_head_override=True, log_fn=lambda _: None)
  assert os.listdir(tmp_path / "hf2") == ["tokenizer_config.json"]
  convert.clean_checkpoint(str(src / "xlnet_model.ckpt"), str(tmp_path / "tf1"), log_fn=lambda _: None)
  assert json.loads((tmp_path / "tf1" / "run_flags.json").read_text()) == {"uncased": True, "clamp_len": -1}
  hf = tmp_path / "cls"
  shutil.copytree(f"{DATA}/cls_bin", hf)
  (hf / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
  convert.convert_to_original(str(hf), str(tmp_path / "cls_tf1"), log_fn=lambda _: None)
  assert json.loads((tmp_path / "cls_tf1" / "run_flags.json").read_text())["uncased"] is True


def test_a_pretrained_model_s_export_says_the_pooling_a_head_made_from_it_gets(tmp_path):
  """An LM checkpoint (a pretraining run's) exported with summary_use_proj false and no activation: transformers'
  classification and multiple-choice heads made from it then had no tanh projection, the original's fine-tuning
  default and the hub configs' (sweep 25, B2). Its config says what transformers wrote for the model."""
  convert.convert_to_original(f"{DATA}/lm_safetensors", str(tmp_path / "tf1"), log_fn=lambda _: None)
  convert.convert_to_hf(str(tmp_path / "tf1" / "xlnet_model.ckpt"), str(tmp_path / "back"), log_fn=lambda _: None)
  keys = ("summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout")
  written = json.loads((tmp_path / "back" / "config.json").read_text())
  assert written["architectures"] == ["XLNetLMHeadModel"]
  assert {k: written[k] for k in keys} == {k: json.loads(open(f"{DATA}/lm_safetensors/config.json").read())[k]
                                           for k in keys} == dict(zip(keys, ("last", True, "tanh", 0.1)))
  lines = []  # --summary_type for it: written without a word (rerun of sweep 25, N4)
  convert.convert_to_hf(str(tmp_path / "tf1" / "xlnet_model.ckpt"), str(tmp_path / "mean"), summary_type="mean",
                        log_fn=lines.append)
  assert json.loads((tmp_path / "mean" / "config.json").read_text())["summary_type"] == "mean"
  assert ("The model has no pooled head: config.json's summary_type 'mean' is the pooling a head that transformers "
          "adds to it (XLNetForSequenceClassification.from_pretrained) will use.") in lines


def test_an_hf_classifier_converted_to_tf1_keeps_its_pooling_and_labels(tmp_path):
  """HF -> TF1 wrote the weights and xlnet_config.json alone: predicting with them pooled with the flag's `last`
  (the model's is `mean`: other logits, exit 0), and TF1 -> HF again wrote `last` and LABEL_i. Now a run_flags.json
  beside them keeps the pooling and the named labels, which the tools read as a fine-tuning run's."""
  hf = tmp_path / "hf"
  shutil.copytree(f"{DATA}/cls_bin", hf)
  config = json.loads((hf / "config.json").read_text())
  (hf / "config.json").write_text(json.dumps(dict(config, id2label={"0": "neg", "1": "neutral", "2": "pos"})))
  convert.convert_to_original(str(hf), str(tmp_path / "tf1"), log_fn=lambda _: None)
  assert json.loads((tmp_path / "tf1" / "run_flags.json").read_text()) == {
      "summary_type": "mean", "use_summ_proj": True, "label_list": ["neg", "neutral", "pos"],
      "labels_from": "id2label"}
  convert.convert_to_hf(str(tmp_path / "tf1" / "xlnet_model.ckpt"), str(tmp_path / "back"), log_fn=lambda _: None)
  back = json.loads((tmp_path / "back" / "config.json").read_text())
  assert back["summary_type"] == "mean" and back["id2label"] == {"0": "neg", "1": "neutral", "2": "pos"}
  o = cli.defaults(run_classifier.define_flags, summary_type="last")
  with pytest.raises(cli.FlagError, match=r"fine-tuned with other flags \(--summary_type=mean there, last here"):
    run_files.check_trained_model(o, str(tmp_path / "tf1"),
                                  XLNetConfig(json_path=str(tmp_path / "tf1" / "xlnet_config.json")))
  convert.convert_to_original(f"{DATA}/cls_bin", str(tmp_path / "generic"), log_fn=lambda _: None)  # LABEL_i: none
  assert json.loads((tmp_path / "generic" / "run_flags.json").read_text()) == {"summary_type": "mean",
                                                                               "use_summ_proj": True}
  convert.convert_to_original(f"{DATA}/qa_bin", str(tmp_path / "qa"), log_fn=lambda _: None)  # pools nothing
  assert not (tmp_path / "qa" / "run_flags.json").exists()


def test_transformers_defaults_and_settings_that_change_no_output_are_read(tmp_path):
  """transformers' XLNetConfig defaults (mem_len and reuse_len None, clamp_len -1, attn_type bi, same_length and
  bi_data false), same_length true (read with attn_type uni only), clamp_len 0 (no clamping) and any mem_len or
  reuse_len (the mems a forward returns) give the weights as the fixture's config does, in the converter and
  where a tool takes the model from config.json; clamp_len 3 needs --clamp_len=3 there (0 and -1 are one)."""
  hf = tmp_path / "hf"
  shutil.copytree(f"{DATA}/lm_safetensors", hf)
  config = json.loads((hf / "config.json").read_text())
  _, expected, _ = hf_checkpoint.read_hf_checkpoint(str(hf))
  for settings in (dict(mem_len=None, reuse_len=None, clamp_len=-1, attn_type="bi", same_length=False, bi_data=False),
                   dict(same_length=True, clamp_len=0, mem_len=0, reuse_len=5), dict(clamp_len=None)):
    (hf / "config.json").write_text(json.dumps(dict(config, **settings)))
    _, arrays, _ = hf_checkpoint.read_hf_checkpoint(str(hf))
    assert sorted(arrays) == sorted(expected) and all(np.array_equal(arrays[n], expected[n]) for n in arrays)
    assert hf_checkpoint.model_config(None, str(hf)).n_layer == 2
    assert hf_checkpoint.model_config(None, str(hf), clamp_len=0).n_layer == 2
  (hf / "config.json").write_text(json.dumps(dict(config, clamp_len=3)))
  with pytest.raises(ValueError, match=f"^--predict_ckpt {hf} clamps relative positions at 3 "):
    hf_checkpoint.model_config(None, str(hf), "--predict_ckpt", clamp_len=-1)


def test_an_hf_classifier_pooling_with_cls_index_pools_with_the_last_token(tmp_path):
  """summary_type cls_index (transformers' XLNet heads pass no cls_index: its SequenceSummary takes the last token)
  is read as `last`: the conversion records `last` (it advised --summary_type=cls_index, which the flag refuses, and
  recorded it, which the tools then refused), and predicting from the directory with the default --summary_type
  passes the pooling check (it asked for --summary_type=cls_index)."""
  hf = tmp_path / "hf"
  shutil.copytree(f"{DATA}/cls_h5", hf)
  config = json.loads((hf / "config.json").read_text())
  (hf / "config.json").write_text(json.dumps(dict(config, summary_type="cls_index")))
  lines = []
  convert.convert_to_original(str(hf), str(tmp_path / "tf1"), log_fn=lines.append)
  assert json.loads((tmp_path / "tf1" / "run_flags.json").read_text())["summary_type"] == "last"
  assert any("pass --summary_type=last" in line for line in lines)
  o = cli.defaults(run_classifier.define_flags)
  run_files.check_trained_model(o, str(hf), hf_checkpoint.model_config(None, str(hf)), "--predict_ckpt")


def test_a_classifier_pooling_without_projection_converts_both_ways_without_one(tmp_path):
  """summary_use_proj false (and summary_activation null: transformers applies an activation with or without the
  projection, the original only inside it): the projection's weights, which transformers does not load, are left out
  with a log line (HF -> TF1 refused them as an activation it could not express), and the export back says no
  projection and no activation (it wrote summary_activation tanh: transformers computed tanh of the pooled state)."""
  hf = tmp_path / "hf"
  shutil.copytree(f"{DATA}/cls_h5", hf)
  config = json.loads((hf / "config.json").read_text())
  (hf / "config.json").write_text(json.dumps(dict(config, summary_use_proj=False, summary_activation=None)))
  lines = []
  convert.convert_to_original(str(hf), str(tmp_path / "tf1"), log_fn=lines.append)
  assert json.loads((tmp_path / "tf1" / "run_flags.json").read_text())["use_summ_proj"] is False
  assert not [n for n in checkpoint.original_arrays(str(tmp_path / "tf1")) if "sequnece_summary" in n]
  assert any("sequence_summary.summary.weight is left out: summary_use_proj is false" in line for line in lines)
  convert.convert_to_hf(str(tmp_path / "tf1" / "xlnet_model.ckpt"), str(tmp_path / "back"), log_fn=lambda _: None)
  back = json.loads((tmp_path / "back" / "config.json").read_text())
  assert back["summary_use_proj"] is False and back["summary_activation"] is None


def test_the_head_is_read_from_architectures_a_list_or_one_name():
  """`architectures` is a list in transformers' files; one name alone was read letter by letter (`unknown head X`)."""
  for architectures in (["XLNetForQuestionAnswering"], "XLNetForQuestionAnswering"):
    assert hf_checkpoint.architecture_of({"architectures": architectures}, {}) == "XLNetForQuestionAnswering"
  assert hf_checkpoint.architecture_of({}, {"lm_loss.bias": None}) == "XLNetLMHeadModel"


def test_an_original_checkpoint_with_adam_slots_cleans_to_its_weights(tmp_path):
  """--to=tf1 on an original-format checkpoint: the optimizer's slots (`/Adam`, `/Adam_1`, `/adam_m`, `/adam_v`),
  beta powers and step are left out, as the original's clean_ckpt leaves them; the weights are read back equal; a
  --model_config_path that does not fit them is refused before anything is written."""
  weights = checkpoint.original_arrays(f"{MODEL}/ckpt_untied")
  slots = {f"{name}/{suffix}": np.full_like(a, 0.5) for name, a in weights.items()
           for suffix in (("Adam", "Adam_1") if "layer_0" in name else ("adam_m", "adam_v"))}
  slots.update(beta1_power=np.float32(0.9), beta2_power=np.float32(0.99))
  trained = checkpoint.write_original_checkpoint({**weights, **slots}, str(tmp_path / "run" / "model.ckpt-7"), 7)
  mismatched = cli.defaults(convert_checkpoint.define_flags, input=trained, to="tf1", output_dir=str(tmp_path / "x"),
                            model_config_path=f"{MODEL}/ckpt_tied/xlnet_config.json")
  with pytest.raises(ValueError, match="the config does not match the checkpoint: model/transformer/r_w_bias"):
    convert_checkpoint.run(mismatched, log_fn=lambda line: None)
  assert not (tmp_path / "x").exists()
  shutil.copy(f"{MODEL}/ckpt_untied/xlnet_config.json", tmp_path / "run")
  # the same shapes, another activation than the run's own config beside the checkpoint: it was written, relu
  # (sweep 21, H5); both directions refuse it
  relu = tmp_path / "relu.json"
  XLNetConfig(**{**XLNetConfig(json_path=str(tmp_path / "run" / "xlnet_config.json")).to_dict(),
                 "ff_activation": "relu"}).to_json(str(relu))
  for to in ("tf1", "hf"):
    with pytest.raises(ValueError, match=f"^--model_config_path {relu} describes another model than {tmp_path}/run/"
                                         r"xlnet_config.json, the config of the run that trained the checkpoint "
                                         r"\(ff_activation gelu there, relu here\): the converted model would "
                                         "compute otherwise. Leave --model_config_path unset.$"):
      convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=trained, to=to,
                                          output_dir=str(tmp_path / "x"), model_config_path=str(relu)),
                           log_fn=lambda line: None)
    assert not (tmp_path / "x").exists()
  (tmp_path / "run" / "model.ckpt-7").mkdir()  # a directory of its name beside it: TensorFlow's reader took the
  (tmp_path / "run" / "model.ckpt-7" / "predictions.json").write_text("{}")  # directory (sweep 28, A3)
  convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "run"), to="tf1",
                                      output_dir=str(tmp_path / "clean")), log_fn=lambda line: None)
  cleaned = checkpoint.checkpoint_arrays(str(tmp_path / "clean" / "xlnet_model.ckpt"))
  assert sorted(cleaned) == sorted([*weights, "global_step"]) and cleaned["global_step"] == 0
  for name, array in weights.items():
    np.testing.assert_array_equal(cleaned[name], array, err_msg=name)


@pytest.mark.slow  # the default suite's 15 minutes; by default: full-disk records (test_bad_input), test_fileio
def test_a_full_disk_while_converting_is_one_line_and_leaves_nothing(tmp_path):
  """convert_checkpoint.py in both directions under a file-size limit (a write fails as on a full disk): exit 1, one
  line with the reason (safetensors' error was a traceback; TensorFlow's lost its reason to the op's name), and no
  file in --output_dir."""
  import resource  # pylint: disable=import-outside-toplevel
  import signal  # pylint: disable=import-outside-toplevel

  def small_disk():
    resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))  # below the tiny model's weights
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG, as ENOSPC would

  convert.convert_to_original("tests/testdata/hf/lm_safetensors", str(tmp_path / "src"), log_fn=lambda line: None)
  for name, flags in (("hf", [f"--input={tmp_path}/src/xlnet_model.ckpt"]),
                      ("tf1", ["--input=tests/testdata/hf/lm_safetensors"])):
    proc = subprocess.run([sys.executable, "convert_checkpoint.py", *flags, f"--output_dir={tmp_path / name}"],
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=small_disk)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert last.startswith(f"convert_checkpoint.py: error: Could not write {tmp_path / name}/") and (
        "File too large" in last), last
    assert not os.path.exists(tmp_path / name) or os.listdir(tmp_path / name) == []


@pytest.mark.parametrize("to", ["hf", "tf1"])
def test_a_conversion_that_fails_at_its_last_file_leaves_none(tmp_path, monkeypatch, to):
  """A converted model's files are one set, in either direction: the config failing to write (as on a full disk)
  leaves no weights (or checkpoint parts) behind, which a rerun would refuse to replace ("already holds a model");
  the rerun then writes the model."""
  write = fileio._write_data  # pylint: disable=protected-access
  config_file = "config.json" if to == "hf" else "xlnet_config.json"

  def full_disk_at_the_config(path, data):
    if os.path.basename(path).startswith(config_file):  # its temporary name
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    write(path, data)

  src, out = tmp_path / "src", tmp_path / to
  shutil.copytree(f"{MODEL}/ckpt_tied" if to == "hf" else f"{DATA}/cls_safetensors_sharded", src)
  shutil.copy("tests/testdata/data/spm/spiece.model", src / "spiece.model")

  def convert_model():
    if to == "hf":
      convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(out), allow_d_head_override=True,
                            log_fn=lambda line: None)
    else:
      convert.convert_to_original(str(src), str(out), log_fn=lambda line: None)

  monkeypatch.setattr(fileio, "_write_data", full_disk_at_the_config)
  with pytest.raises(OSError, match=f"Could not write {out / config_file} \\(No space left"):
    convert_model()
  assert not out.exists()  # nor the directory it made (`locks.directory_lock`, held while it converts)
  monkeypatch.undo()
  convert_model()
  assert config_file in os.listdir(out) and "spiece.model" in os.listdir(out)


def test_what_a_killed_conversion_left_is_removed_and_the_rerun_writes_the_model(tmp_path):
  """A conversion killed while writing (kill -9) left its checkpoint's parts under a temporary prefix
  (`xlnet_model.ckpt.tmp-P-H.index`, TensorFlow's `...data-00000-of-00001.tempstate{N}` of the shard it was
  writing): the rerun took them for a model there and refused the directory (sweep 17, H1). Those of a process
  that is gone are removed; a live one's are not (a conversion still writing there is refused)."""
  dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                            text=True).stdout)
  out = tmp_path / "tf1"
  out.mkdir()
  left = [f"xlnet_model.ckpt.tmp-{dead}-0123456789ab{suffix}" for suffix in (
      ".index", ".data-00000-of-00001", ".data-00000-of-00001.tempstate149463237566961251")]  # TF's, while it writes
  for name in left + [f"xlnet_config.json.tmp-{dead}-0123456789ab"]:
    (out / name).write_bytes(b"x")
  convert.convert_to_original(f"{DATA}/cls_bin", str(out), log_fn=lambda _: None)
  assert not [name for name in os.listdir(out) if ".tmp-" in name] and "xlnet_model.ckpt.index" in os.listdir(out)
  live = tmp_path / "live"
  live.mkdir()
  (live / f"xlnet_model.ckpt.tmp-{os.getpid()}-0123456789ab.index").write_bytes(b"x")
  with pytest.raises(ValueError, match=r"--output_dir .*/live already holds a model \(xlnet_model.ckpt.tmp-"):
    convert.convert_to_original(f"{DATA}/cls_bin", str(live), log_fn=lambda _: None)


@pytest.mark.parametrize("to", [pytest.param("hf", marks=pytest.mark.slow), "tf1"])  # slow: the suite's 15 minutes
def test_a_conversion_killed_or_stopped_while_its_files_are_put_in_place(tmp_path, caplog, to):
  """kill -9 between the renames that put a converted model's files in place left part of them: the rerun refused
  them as a model already there (sweep 27, U5). It now removes what the killed run had renamed, with a line, and
  writes the model; a checkpoint's index comes last, so what a kill leaves never reads as a checkpoint without its
  config. SIGTERM there: the files all arrive, the run reports them, then stops (exit 143) with the line that its
  run ended (it said to run the command again, which was refused: U7)."""
  src, out = tmp_path / "src", tmp_path / "out"
  if to == "hf":
    convert.convert_to_original(f"{DATA}/cls_bin", str(src), log_fn=lambda line: None)
  given = str(src / "xlnet_model.ckpt") if to == "hf" else f"{DATA}/cls_bin"
  cut = subprocess.run(renames_cut.command(["convert_checkpoint.py", f"--input={given}", f"--output_dir={out}"], 1,
                                           renames_cut.KILL), capture_output=True, text=True, timeout=300)
  assert cut.returncode == -signal.SIGKILL, cut.stderr[-2000:]
  first = "model.safetensors" if to == "hf" else "xlnet_config.json"
  assert sorted(name for name in os.listdir(out) if ".tmp-" not in name) == [".convert.lock", ".convert.pass", first]
  convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=given, output_dir=str(out)),
                         log_fn=lambda line: None)
  assert f"Removed {out / first}: what a run killed while putting its files in place there had already renamed" in (
      caplog.text)
  made = sorted(os.listdir(out))
  assert made == (["config.json", "model.safetensors"] if to == "hf" else
                  ["run_flags.json", "xlnet_config.json", "xlnet_model.ckpt.data-00000-of-00001",
                   "xlnet_model.ckpt.index"])
  stopped = subprocess.run(renames_cut.command(["convert_checkpoint.py", f"--input={given}",
                                               f"--output_dir={tmp_path / 'again'}"], 0, renames_cut.TERM),
                           capture_output=True, text=True, timeout=300)
  assert stopped.returncode == 128 + signal.SIGTERM and "\nWrote " in f"\n{stopped.stdout}", stopped.stderr[-2000:]
  assert stopped.stderr.strip().splitlines()[-1] == ("convert_checkpoint.py: stopped by SIGTERM after its run ended; "
                                                     "what the run wrote is whole.")
  assert sorted(os.listdir(tmp_path / "again")) == made


def test_a_conversion_into_an_output_dir_another_conversion_is_writing_is_refused(tmp_path, caplog):
  """Two conversions into one --output_dir at once both said "Wrote", one model replacing the other's: each checked
  the directory before the other wrote (sweep 23, B4). A conversion holds the directory's lock, and a second (each
  of --to's forms) is one line naming --output_dir and the first's process; a killed holder's lock is taken over."""
  src, out = tmp_path / "src", tmp_path / "out"
  convert.convert_to_original(f"{DATA}/cls_bin", str(src), log_fn=lambda _: None)
  conversions = [lambda: convert.convert_to_original(f"{DATA}/cls_bin", str(out), log_fn=lambda _: None),
                 lambda: convert.convert_to_hf(str(src / "xlnet_model.ckpt"), str(out), log_fn=lambda _: None),
                 lambda: convert.clean_checkpoint(str(src / "xlnet_model.ckpt"), str(out), log_fn=lambda _: None)]
  for conversion in conversions:
    with locks.directory_lock(str(out), name="convert", what="--output_dir"):  # a conversion writing there
      with pytest.raises(ValueError, match=rf"^--output_dir {out} is in use by process {os.getpid()} on .* \(lock "
                                           rf"{out}/\.convert\.lock\)\. Wait for it to finish, stop it, or use "
                                           r"another --output_dir\.$"):
        conversion()
    assert os.listdir(out) == []
  dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                            text=True).stdout)
  (out / ".convert.lock").write_text(f"{dead} {os.uname().nodename}")  # a conversion killed (kill -9) while it held it
  conversions[0]()
  assert "Taking over the stale lock" in caplog.text and ".convert.lock" not in os.listdir(out)
  assert "xlnet_model.ckpt.index" in os.listdir(out)



def test_a_git_lfs_pointer_is_named_as_one(tmp_path):
  """A model repository cloned without git-lfs holds a few lines of text for each large file: its weights, its
  spiece.model, a TF checkpoint's files. Each reader called it damaged and advised downloading it again (sweep 32,
  U16)."""
  from xlnet_tf.data import tokenization  # pylint: disable=import-outside-toplevel

  def pointer(path, size=467042463):
    path.write_text(f"version https://git-lfs.github.com/spec/v1\noid sha256:{'ab' * 32}\nsize {size}\n")
    return re.escape(f"{path} is a Git LFS pointer, not the file (the file is {size:,} bytes): the repository was "
                     "cloned without Git LFS. Run `git lfs install && git lfs pull` in it, or download the file "
                     "itself.")

  for source, name in (("qa_safetensors", "model.safetensors"), ("cls_bin", "pytorch_model.bin"),
                       ("cls_h5", "tf_model.h5")):
    model = tmp_path / source
    model.mkdir()
    shutil.copy(f"{DATA}/{source}/config.json", model)
    with pytest.raises(ValueError, match=f"^{pointer(model / name)}$"):
      hf_weights.read_weights(str(model))
  with pytest.raises(ValueError, match=f"^{pointer(tmp_path / 'spiece.model', 798011)}$"):
    tokenization.load_sentencepiece(str(tmp_path / "spiece.model"))
  for damaged in ("xlnet_model.ckpt.index", "xlnet_model.ckpt.data-00000-of-00001"):
    copy = tmp_path / damaged.replace(".", "_")
    shutil.copytree(f"{MODEL}/ckpt_untied", copy)
    with pytest.raises(checkpoint.DamagedCheckpointError, match=f"^{pointer(copy / damaged)}$") as error:
      checkpoint.Reader(str(copy / "xlnet_model.ckpt")).get_tensor("model/transformer/mask_emb/mask_emb")
    assert str(error.value.named("--init_checkpoint")) == str(error.value)  # the line names the file, not the flag
  (tmp_path / "text.model").write_text("version 2\n")  # a file that is no pointer: its reader's own line
  with pytest.raises(ValueError, match="is not a SentencePiece model"):
    tokenization.load_sentencepiece(str(tmp_path / "text.model"))


def test_weights_of_another_activation_are_refused_and_another_pooling_said(tmp_path, caplog):
  """A relu model loaded an HF classifier whose config.json says gelu_new, and a head pooling with `last` one that
  pools with `mean`, without a word (logits 0.07 and 1.5 off); the same for a TF1 checkpoint beside an
  xlnet_config.json of another ff_activation (sweep 35). Another pooling is a warning: fine-tuning may start from
  the head (the tools compare the pooling where they predict)."""
  config, _, _ = hf_checkpoint.read_hf_checkpoint(f"{DATA}/cls_h5")
  relu = XLNetConfig(**dict(config.to_dict(), ff_activation="relu"))
  with pytest.raises(ValueError, match=f"^{DATA}/cls_h5 is another model than this one \\({DATA}/cls_h5/config.json: "
                                       "ff_activation gelu there, relu here\\)"):
    checkpoint.load_weights(_build("cls", relu), f"{DATA}/cls_h5")
  rc = _run_config()
  last = XLNetModel(config, rc, heads=finetune_heads(config, rc, "last", cls_heads={"hf": 3}))
  checkpoint.load_weights(last, f"{DATA}/cls_h5")
  assert f"{DATA}/cls_h5 pools with summary_type 'mean' (its config.json), this model's head with 'last'" in caplog.text
  report = checkpoint.load_weights(_build("cls", config), f"{DATA}/cls_h5")
  assert "model/classification_hf/logit/kernel" in report["loaded"]
  out = str(tmp_path / "xlnet_model.ckpt")
  checkpoint.export_original_checkpoint(_build("lm", config), out)
  for load in (checkpoint.load_weights, checkpoint.load_original_checkpoint):
    with pytest.raises(ValueError, match=f"^{out} is another model than this one \\({tmp_path}/xlnet_config.json: "
                                         "ff_activation gelu there, relu here\\)"):
      load(_build("lm", relu), out)


def test_a_conversion_refuses_a_task_name_that_names_no_task(tmp_path):
  """convert_to_hf / convert_to_original(task_name=5): `'int' object has no attribute 'lower'` (sweep 36)."""
  for convert_fn, source in ((convert.convert_to_hf, f"{MODEL}/ckpt_untied/xlnet_model.ckpt"),
                             (convert.convert_to_original, f"{DATA}/cls_h5")):
    for name in (5, "glue/sst"):
      with pytest.raises(ValueError, match=r"^task_name must name a task \(letters, digits, '_', '.', '-'\), as "):
        convert_fn(source, str(tmp_path / "out"), task_name=name, log_fn=lambda line: None)
  assert not (tmp_path / "out").exists()
