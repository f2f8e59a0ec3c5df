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

and `{head}_outputs.npz`: the BATCH-MAJOR inputs (`input_ids`, `token_type_ids`, `attention_mask` [B, L]; multiple
choice [B, 4, L]; left padding, two segments) and transformers' eval-mode outputs: `hidden` (last_hidden_state
[B, L, H], multiple choice [4B, L, H]) and `logits` (LM [B, L, V], classification [B, 3], multiple choice [B, 4]).
The QA test compares the head's arrays by name (no forward: transformers' QA forward is a beam search).
For every h5 directory the TF model's outputs are checked against the PyTorch model's (`meta_json`).

`export` (project venv) converts the original-code checkpoint `tests/testdata/model/ckpt_untied` (its
`classification_toy` head, summary `last`) to HF. That checkpoint has d_head 6 != d_model / n_head = 4, which HF's
XLNetConfig refuses, so the converter's CLI refuses it too; `export` calls the library with
`allow_d_head_override=True`. `load_exports` then sets `d_head` on the config after construction (as
generate_hf_goldens.py does), loads the directory with `from_pretrained(..., output_loading_info=True)`, and
writes `export_untied.npz`: the loading info (missing, unexpected, mismatched keys) and HF's outputs on the
original's golden inputs (`tests/testdata/model/untied_finetune.npz`), for the tests to compare with the original.
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


def export(args):
  """Project venv: the original-code checkpoint ckpt_untied -> an HF directory (d_head override allowed)."""
  sys.path.insert(0, os.getcwd())
  from xlnet_tf import hf_checkpoint  # pylint: disable=import-outside-toplevel
  hf_checkpoint.convert_to_hf("tests/testdata/model/ckpt_untied/xlnet_model.ckpt",
                              os.path.join(args.work_dir, "untied_hf"), task_name="toy", summary_type="last",
                              allow_d_head_override=True)


def load_exports(args):
  """Oracle venv: loads the export in transformers; writes the loading info and HF's outputs."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(1)
  model_dir = os.path.join(args.work_dir, "untied_hf")
  with open(os.path.join(model_dir, "config.json")) as f:
    fields = json.load(f)
  d_head = fields.pop("d_head")
  config = transformers.XLNetConfig(**{k: v for k, v in fields.items() if k not in ("architectures",)})
  config.architectures = fields["architectures"]
  config.d_head = d_head  # HF's XLNetConfig forces d_model // n_head; the original checkpoint has 6
  model, info = transformers.XLNetForSequenceClassification.from_pretrained(
      model_dir, config=config, output_loading_info=True)
  model.eval()
  golden = np.load("tests/testdata/model/untied_finetune.npz")
  batch_major = lambda x: torch.from_numpy(np.ascontiguousarray(x.T))
  with torch.no_grad():
    out = model(input_ids=batch_major(golden["input_ids"]).long(),
                token_type_ids=batch_major(golden["seg_ids"]).long(),
                input_mask=batch_major(golden["input_mask"]).float(), output_hidden_states=True, use_mems=False)
  arrays = dict(output=out.hidden_states[-1].numpy().transpose(1, 0, 2), cls_logits_toy=out.logits.numpy())
  meta = dict(loading_info={k: sorted(map(str, v)) for k, v in info.items()}, architectures=fields["architectures"],
              transformers=transformers.__version__, torch=torch.__version__,
              max_abs_diff={k: float(np.max(np.abs(v - golden[k]))) for k, v in arrays.items()})
  print(json.dumps(meta, indent=1))
  np.savez_compressed(os.path.join(args.out, "export_untied.npz"), meta_json=json.dumps(meta, indent=1), **arrays)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("step", choices=["models", "export", "load_exports"])
  parser.add_argument("--out", default=OUT)
  parser.add_argument("--work_dir", default="/tmp/hf_export_work")
  args = parser.parse_args()
  {"models": models, "export": export, "load_exports": load_exports}[args.step](args)


if __name__ == "__main__":
  main()
