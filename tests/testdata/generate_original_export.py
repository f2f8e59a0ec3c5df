"""An ORIGINAL-code checkpoint that HuggingFace can express (d_head = d_model / n_head), its outputs from the
original graph, and transformers' outputs on its export: the TF1 -> HF direction of convert_checkpoint.py checked
end to end without any override.

Every other original-code checkpoint of the project has d_head 6 != d_model / n_head on purpose, which HF's
XLNetConfig cannot hold (the converter refuses them). Two steps, two venvs (run from the repository root):

  # project venv: the original graph (zihangdai/xlnet checkout, bbaa3a6) writes the checkpoint and its outputs to
  # tests/testdata/hf/original_dhead4/, then the project's CLI exports it to HF in WORK
  .venv/bin/python tests/testdata/generate_original_export.py original --xlnet_src=/path/to/xlnet --work_dir=WORK
  # throwaway venv with torch and transformers==4.57.6 (see generate_hf_checkpoints.py): load the export, run it
  /tmp/oracle-venv/bin/python tests/testdata/generate_original_export.py hf --work_dir=WORK

`original` writes `ckpt/` (xlnet_model.ckpt, xlnet_config.json: n_layer 2, d_model 8, n_head 2, d_head 4, d_inner 11,
n_token 1000, gelu, untie_r true; random values, std 0.5, LayerNorm gamma 1 +- 0.2, seed 41; the summary
(`last`, projection) and a 3-class head `classification_toy`) and `outputs.npz`: time-major inputs as the original
consumes them (`input_ids`, `seg_ids` int32 [L, B], `input_mask` float32 [L, B], 1 = padding, LEFT padding and two
segments as classifier_utils lays them out) and the original's eval outputs `hidden` [L, B, D], `logits` [B, 3].
`hf` loads the export with `XLNetForSequenceClassification.from_pretrained` (missing, unexpected and mismatched
weights must be empty), runs it in eval mode on the same inputs (batch-major) and adds `hf_hidden`, `hf_logits` and
`hf_loading_info` to `outputs.npz`, after checking them against the original's within 2e-5.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "hf", "original_dhead4")
CONFIG = {"n_layer": 2, "d_model": 8, "n_head": 2, "d_head": 4, "d_inner": 11, "ff_activation": "gelu",
          "untie_r": True, "n_token": 1000}
L, B = 12, 4


def inputs():
  """Classifier-style features, time-major: LEFT padding (id 0, seg 4, mask 1), A <sep> B <sep> <cls>."""
  rng = np.random.RandomState(41)
  ids, segs, masks = [], [], []
  for length_a, length_b in ((5, 3), (3, 0), (7, 2), (4, 4)):
    a, b = list(rng.randint(9, 1000, length_a)), list(rng.randint(9, 1000, length_b))
    tokens = a + [4] + (b + [4] if b else []) + [3]
    seg = [0] * (length_a + 1) + ([1] * (length_b + 1) if b else []) + [2]
    pad = L - len(tokens)
    ids.append([0] * pad + tokens)
    segs.append([4] * pad + seg)
    masks.append([1.0] * pad + [0.0] * len(tokens))
  return (np.array(ids, np.int32).T, np.array(segs, np.int32).T, np.array(masks, np.float32).T)


def original(args):
  sys.path.insert(0, HERE)
  import generate_train_step_goldens as gold  # pylint: disable=import-outside-toplevel
  tf, _, _, _ = gold.import_original(args.xlnet_src)
  import modeling, xlnet  # pylint: disable=import-outside-toplevel,multiple-imports
  input_ids, seg_ids, input_mask = inputs()
  flags = types.SimpleNamespace(**CONFIG, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0,
                                init="normal", init_std=0.02, init_range=0.1, clamp_len=-1)
  tf.set_random_seed(41)
  model = xlnet.XLNetModel(xlnet_config=xlnet.XLNetConfig(FLAGS=flags),
                           run_config=xlnet.create_run_config(False, True, flags),
                           input_ids=tf.constant(input_ids), seg_ids=tf.constant(seg_ids),
                           input_mask=tf.constant(input_mask))
  summary = model.get_pooled_out("last", True)
  with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
    _, logits = modeling.classification_loss(hidden=summary, labels=tf.zeros([B], tf.int32), n_class=3,
                                             initializer=model.get_initializer(), scope="classification_toy",
                                             return_logits=True)
  hidden = model.get_sequence_output()
  rng = np.random.RandomState(41)
  assigns = [v.assign((1 + 0.2 * rng.randn(*v.shape.as_list()) if v.name.endswith("gamma:0") else
                       0.5 * rng.randn(*v.shape.as_list())).astype(np.float32)) for v in tf.trainable_variables()]
  os.makedirs(os.path.join(OUT, "ckpt"), exist_ok=True)
  ckpt = os.path.join(OUT, "ckpt", "xlnet_model.ckpt")
  with tf.Session(config=gold.session_config(tf)) as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(assigns)
    tf.train.Saver().save(sess, ckpt, write_meta_graph=False)
    hidden_np, logits_np = sess.run([hidden, logits])
  os.remove(os.path.join(OUT, "ckpt", "checkpoint"))  # its absolute paths; the prefix names the checkpoint
  with open(os.path.join(OUT, "ckpt", "xlnet_config.json"), "w") as f:
    json.dump(CONFIG, f, indent=4, sort_keys=True)
  np.savez(os.path.join(OUT, "outputs.npz"), input_ids=input_ids, seg_ids=seg_ids, input_mask=input_mask,
           hidden=hidden_np, logits=logits_np)
  export = os.path.join(args.work_dir, "original_dhead4_hf")
  subprocess.run([sys.executable, "convert_checkpoint.py", f"--input={ckpt}", f"--output_dir={export}",
                  "--task_name=toy", "--summary_type=last"], check=True)
  print(f"wrote {OUT} and exported it to {export}")


def hf(args):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  export = os.path.join(args.work_dir, "original_dhead4_hf")
  model, info = transformers.XLNetForSequenceClassification.from_pretrained(export, output_loading_info=True)
  problems = {k: v for k, v in info.items() if v}
  if problems:
    raise SystemExit(f"loading the export reported {problems}")
  model.eval()
  path = os.path.join(OUT, "outputs.npz")
  with np.load(path) as data:
    golden = {k: data[k] for k in data.files}
  with torch.no_grad():
    out = model(input_ids=torch.tensor(golden["input_ids"].T, dtype=torch.long),
                token_type_ids=torch.tensor(golden["seg_ids"].T, dtype=torch.long),
                attention_mask=torch.tensor(1.0 - golden["input_mask"].T), output_hidden_states=True)
  hf_hidden = out.hidden_states[-1].numpy().transpose(1, 0, 2)  # [B, L, D] -> time-major
  hf_logits = out.logits.numpy()
  for name, ours, theirs in (("hidden", hf_hidden, golden["hidden"]), ("logits", hf_logits, golden["logits"])):
    diff = float(np.max(np.abs(ours - theirs)))
    print(f"{name}: transformers vs the original {diff:.2e}")
    if diff > 2e-5:
      raise SystemExit(f"{name} differs by {diff}")
  golden.update(hf_hidden=hf_hidden, hf_logits=hf_logits, hf_loading_info=np.asarray(json.dumps(info)))
  with tempfile.NamedTemporaryFile(dir=OUT, suffix=".npz", delete=False) as f:
    np.savez(f, **golden)
  os.chmod(f.name, 0o644)
  os.replace(f.name, path)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("step", choices=["original", "hf"])
  parser.add_argument("--xlnet_src", help="A checkout of github.com/zihangdai/xlnet (bbaa3a6); `original` only.")
  parser.add_argument("--work_dir", required=True)
  args = parser.parse_args()
  os.makedirs(args.work_dir, exist_ok=True)
  {"original": original, "hf": hf}[args.step](args)


if __name__ == "__main__":
  main()
