"""Writes tiny HuggingFace XLNet model directories with transformers itself, and transformers' outputs on them.

The converter (`xlnet_tf/hf_checkpoint.py`, `convert_checkpoint.py`) is tested on what transformers writes, never
on files this project writes: every directory under `tests/testdata/hf/` comes from `save_pretrained` of
`transformers==4.57.6` (the last release with TF classes, needed for `tf_model.h5`).

The work runs in a throwaway venv, never the project venv:

  python3 -m venv /tmp/oracle-venv
  /tmp/oracle-venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
  /tmp/oracle-venv/bin/pip install "transformers==4.57.6" numpy safetensors h5py tensorflow==2.21.0 tf-keras
  /tmp/oracle-venv/bin/python tests/testdata/generate_hf_checkpoints.py models      # -> tests/testdata/hf/

and, for the export direction (TF1 -> HF), after the project venv has written the exports:

  .venv/bin/python tests/testdata/generate_hf_checkpoints.py export --work_dir /tmp/hf_export_work
  /tmp/oracle-venv/bin/python tests/testdata/generate_hf_checkpoints.py load_exports --work_dir /tmp/hf_export_work

`models` writes, per head type (one set of random weights each, saved in several formats):

  lm   XLNetLMHeadModel                 lm_safetensors/ lm_bin/ lm_h5/
  cls  XLNetForSequenceClassification   cls_safetensors_sharded/ (index + 2 shards) cls_bin/ cls_h5/
       (3 labels, summary_type mean)
  mc   XLNetForMultipleChoice           mc_safetensors/ mc_bin_sharded/ (index + shards) mc_h5/
       (summary_type last)
  qa   XLNetForQuestionAnswering        qa_safetensors/ qa_bin/  (no tf_model.h5: transformers' TF side has no
                                        class with these heads, only TFXLNetForQuestionAnsweringSimple)
  qa_simple XLNetForQuestionAnsweringSimple  qa_simple_safetensors/ (a head the original lacks: refused)

`bin_variants` (torch alone, after `models`) saves cls_bin's weights again as torch's format before 1.6
(`cls_bin_legacy/`, float32; `cls_bin_fp16_legacy/`, float16) and in bfloat16 (`cls_bin_bf16/`):

  /tmp/oracle-venv/bin/python tests/testdata/generate_hf_checkpoints.py bin_variants

and `{head}_outputs.npz`: the BATCH-MAJOR inputs (`input_ids`, `token_type_ids`, `attention_mask` [B, L]; multiple
choice [B, 4, L]; left padding, two segments) and transformers' eval-mode outputs: `hidden` (last_hidden_state
[B, L, H], multiple choice [4B, L, H]) and `logits` (LM [B, L, V], classification [B, 3], multiple choice [B, 4]).
The QA test compares the head's arrays by name (no forward: transformers' QA forward is a beam search).
For every h5 directory the TF model's outputs are checked against the PyTorch model's (`meta_json`).

`export` (project venv) converts the original-code checkpoint `tests/testdata/model/ckpt_untied` (its
`classification_toy` head, summary `last`) to HF. Every original-code checkpoint of the project has d_head 6 !=
d_model / n_head = 4 (on purpose), which HF's XLNetConfig refuses, so the converter's CLI refuses it too; `export`
calls the library with `allow_d_head_override=True`. It also converts each HF model above to TF1 and back to HF.
`load_exports` sets `d_head` on the config after construction (as generate_hf_goldens.py does), loads every export
with `from_pretrained(..., output_loading_info=True)` and writes `export_untied.npz`: HF's outputs of the
ckpt_untied export on the original's golden inputs (`tests/testdata/model/untied_finetune.npz`: `output` [L, B, H]
time-major, `cls_logits_toy` [B, 3]), and in `meta_json` the loading info (missing, unexpected, mismatched keys)
of every export and, for the round trips, the largest difference of any weight from the model transformers wrote.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np

OUT = os.path.join("tests", "testdata", "hf")
SIZES = dict(vocab_size=32, d_model=8, n_layer=2, n_head=2, d_inner=11, ff_activation="gelu_new")
B, L, CHOICES = 3, 7, 4


def _inputs(rng, shape):
  """Left-padded inputs with two segments: ids [.., L], token types 0/1 (last token 2, as <cls>), mask 1 = real."""
  ids = rng.randint(5, SIZES["vocab_size"], size=shape + (L,))
  types = np.zeros(shape + (L,), np.int64)
  mask = np.ones(shape + (L,), np.int64)
  for index in np.ndindex(*shape):
    pad = int(rng.randint(0, 3))
    mask[index][:pad] = 0
    ids[index][:pad] = 0
    types[index][pad + (L - pad) // 2:] = 1
    types[index][-1] = 2
  return ids.astype(np.int64), types, mask


def _randomize(model, seed):
  import torch  # pylint: disable=import-outside-toplevel
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if "layer_norm.weight" in name or "LayerNorm.weight" in name:
        p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
      else:
        p.copy_(0.3 * torch.randn(p.shape, generator=gen))


def _save_h5(model_dir, pt_dir, tf_class, arrays, inputs, meta):
  """tf_model.h5 written by transformers' TF class from the PyTorch directory; checks the TF outputs match."""
  import transformers  # pylint: disable=import-outside-toplevel
  tf_model = getattr(transformers, tf_class).from_pretrained(pt_dir, from_pt=True)
  tf_model.save_pretrained(model_dir)
  out = tf_model({k: v for k, v in inputs.items()}, training=False)
  diff = float(np.max(np.abs(out.logits.numpy() - arrays["logits"])))
  meta[f"{os.path.basename(model_dir)}: max |TF logits - PyTorch logits|"] = diff
  if diff > 1e-4:
    sys.exit(f"{tf_class} disagrees with PyTorch by {diff}")


def models(args):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(1)
  if os.path.exists(args.out):
    shutil.rmtree(args.out)
  os.makedirs(args.out)
  rng = np.random.RandomState(5)
  specs = [  # head, PyTorch class, TF class or None, config extras, input shape, directories
      ("lm", "XLNetLMHeadModel", "TFXLNetLMHeadModel", {}, (B,), ["safetensors", "bin", "h5"]),
      ("cls", "XLNetForSequenceClassification", "TFXLNetForSequenceClassification",
       dict(num_labels=3, summary_type="mean"), (B,), ["safetensors_sharded", "bin", "h5"]),
      ("mc", "XLNetForMultipleChoice", "TFXLNetForMultipleChoice", dict(summary_type="last"), (2, CHOICES),
       ["safetensors", "bin_sharded", "h5"]),
      ("qa", "XLNetForQuestionAnswering", None, {}, (B,), ["safetensors", "bin"]),
      ("qa_simple", "XLNetForQuestionAnsweringSimple", None, {}, (B,), ["safetensors"]),
  ]
  for seed, (head, pt_class, tf_class, extra, shape, kinds) in enumerate(specs):
    config = transformers.XLNetConfig(**SIZES, **extra)
    model = getattr(transformers, pt_class)(config).eval()
    _randomize(model, 100 + seed)
    ids, types, mask = _inputs(rng, shape)
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask)
    with torch.no_grad():
      out = model(**{k: torch.from_numpy(v) for k, v in inputs.items()}, output_hidden_states=True, use_mems=False)
    arrays = dict(inputs, hidden=out.hidden_states[-1].numpy())
    if head != "qa":
      arrays["logits"] = (out.logits if head != "qa_simple" else out.start_logits).numpy()
    meta = {"class": pt_class, "config": config.to_diff_dict(), "transformers": transformers.__version__,
            "torch": torch.__version__}
    pt_dir = None
    for kind in kinds:
      model_dir = os.path.join(args.out, f"{head}_{kind}")
      if kind.startswith("safetensors"):
        model.save_pretrained(model_dir, max_shard_size="6KB" if kind.endswith("sharded") else "1GB")
        pt_dir = pt_dir or model_dir
      elif kind.startswith("bin"):
        model.save_pretrained(model_dir, safe_serialization=False,
                              max_shard_size="6KB" if kind.endswith("sharded") else "1GB")
      else:
        tf_inputs = {k: v.astype(np.int32) for k, v in inputs.items()}
        _save_h5(model_dir, pt_dir, tf_class, arrays, tf_inputs, meta)
      for name in ("generation_config.json",):
        if os.path.exists(os.path.join(model_dir, name)):
          os.remove(os.path.join(model_dir, name))
    np.savez_compressed(os.path.join(args.out, f"{head}_outputs.npz"), meta_json=json.dumps(meta, indent=1),
                        **arrays)
    print(head, sorted(os.listdir(args.out)))


# head: (the directory converted, the same weights as PyTorch wrote them, HF class, summary_type)
ROUND_TRIPS = {"lm": ("lm_safetensors", "lm_safetensors", "XLNetLMHeadModel", "last"),
               "cls": ("cls_h5", "cls_safetensors_sharded", "XLNetForSequenceClassification", "mean"),
               "mc": ("mc_h5", "mc_safetensors", "XLNetForMultipleChoice", "last"),
               "qa": ("qa_safetensors", "qa_safetensors", "XLNetForQuestionAnswering", "last")}


def export(args):
  """Project venv: the original-code checkpoint ckpt_untied -> HF (d_head override allowed); and each HF model of
  `models` -> TF1 -> HF again (the converter's CLI path)."""
  sys.path.insert(0, os.getcwd())
  from xlnet_tf import convert  # pylint: disable=import-outside-toplevel
  convert.convert_to_hf("tests/testdata/model/ckpt_untied/xlnet_model.ckpt",
                        os.path.join(args.work_dir, "untied_hf"), task_name="toy", summary_type="last",
                        allow_d_head_override=True)
  for head, (source, _, _, summary_type) in ROUND_TRIPS.items():
    tf1 = convert.convert_to_original(os.path.join(args.out, source), os.path.join(args.work_dir, f"{head}_tf1"))
    convert.convert_to_hf(tf1, os.path.join(args.work_dir, f"{head}_hf"), summary_type=summary_type)


def _load(transformers, model_dir, class_name, d_head=None):
  """(model, loading info) of `from_pretrained`; `d_head` set on the config after construction when given."""
  config = None
  if d_head is not None:
    with open(os.path.join(model_dir, "config.json")) as f:
      fields = json.load(f)
    fields.pop("d_head")
    config = transformers.XLNetConfig(**fields)
    config.d_head = d_head  # HF's XLNetConfig forces d_model // n_head; the original checkpoint has 6
  model, info = getattr(transformers, class_name).from_pretrained(model_dir, config=config, output_loading_info=True)
  return model.eval(), {k: sorted(map(str, v)) for k, v in info.items()}


def load_exports(args):
  """Oracle venv: loads every export in transformers; writes the loading info and HF's outputs."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(1)
  meta = dict(transformers=transformers.__version__, torch=torch.__version__, round_trips={})
  model, meta["untied_loading_info"] = _load(transformers, os.path.join(args.work_dir, "untied_hf"),
                                             "XLNetForSequenceClassification", d_head=6)
  golden = np.load("tests/testdata/model/untied_finetune.npz")
  batch_major = lambda x: torch.from_numpy(np.ascontiguousarray(x.T))
  with torch.no_grad():
    out = model(input_ids=batch_major(golden["input_ids"]).long(),
                token_type_ids=batch_major(golden["seg_ids"]).long(),
                input_mask=batch_major(golden["input_mask"]).float(), output_hidden_states=True, use_mems=False)
  arrays = dict(output=out.hidden_states[-1].numpy().transpose(1, 0, 2), cls_logits_toy=out.logits.numpy())
  meta["untied_max_abs_diff"] = {k: float(np.max(np.abs(v - golden[k]))) for k, v in arrays.items()}
  for head, (_, reference, class_name, _) in ROUND_TRIPS.items():
    model, info = _load(transformers, os.path.join(args.work_dir, f"{head}_hf"), class_name)
    original = getattr(transformers, class_name).from_pretrained(os.path.join(args.out, reference)).eval()
    state = original.state_dict()
    diffs = {k: float(np.max(np.abs(v.numpy() - state[k].numpy()))) for k, v in model.state_dict().items()}
    meta["round_trips"][head] = dict(loading_info=info, max_abs_weight_diff=max(diffs.values()),
                                     same_names=sorted(diffs) == sorted(state))
  print(json.dumps(meta, indent=1))
  np.savez_compressed(os.path.join(args.out, "export_untied.npz"), meta_json=json.dumps(meta, indent=1), **arrays)


def bin_variants(args):
  """cls_bin's state dict, loaded and saved again by torch alone, as the older files users hold: torch's format
  before 1.6 (not a zip archive; XLNet's checkpoints on the hub date from 2019), and in half precision."""
  import torch  # pylint: disable=import-outside-toplevel
  state = torch.load(os.path.join(args.out, "cls_bin", "pytorch_model.bin"), weights_only=True)
  for name, dtype, zipped in (("cls_bin_legacy", torch.float32, False), ("cls_bin_fp16_legacy", torch.float16, False),
                              ("cls_bin_bf16", torch.bfloat16, True)):
    out = os.path.join(args.out, name)
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(args.out, "cls_bin", "config.json"), out)
    torch.save({k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()},
               os.path.join(out, "pytorch_model.bin"), _use_new_zipfile_serialization=zipped)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("step", choices=["models", "export", "load_exports", "bin_variants"])
  parser.add_argument("--out", default=OUT)
  parser.add_argument("--work_dir", default="/tmp/hf_export_work")
  args = parser.parse_args()
  {"models": models, "export": export, "load_exports": load_exports, "bin_variants": bin_variants}[args.step](args)


if __name__ == "__main__":
  main()
