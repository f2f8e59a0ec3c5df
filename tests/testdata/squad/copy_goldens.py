"""Copies the SQuAD goldens the tests need from a golden directory (README.md there describes every file).

  python tests/testdata/squad/copy_goldens.py /work/shared/goldens/squad

Everything is copied byte for byte (README.md as GOLDENS_README.md) except `predict_results.npz`: the head outputs of `head/predict.npz` that
post-processing reads (unique_ids, start/end top log-probs and indices, cls_logits), without the inputs and full
log-prob tensors; and `head/predict.npz` itself, without its full log-prob tensors (check_squad.py's head part
compares them only when present).
"""

import os
import shutil
import sys

import numpy as np

FILES = (
    ["README.md", "meta.json", "spm/spiece.model", "data/train-v2.0.json", "data/dev-v2.0.json",
     "crafted/raw_results.npz", "crafted/scenarios.json"]
    + [f"{d}/{f}" for d in ("predictions", "crafted")
       for f in ("predictions.json", "nbest_predictions.json", "null_odds.json", "eval_run_squad.json",
                 "eval_squad_utils.json")]
    + [f"features/{tag}_{mode}{ext}" for tag in ("L64_Q16_S24_cased", "L64_Q16_S24_uncased", "L48_Q8_S40_cased",
                                                  "L48_Q8_S40_uncased") for mode in ("train", "eval")
       for ext in (".npz", "_examples.json")]
    + [f"features/pieces_{casing}.json" for casing in ("cased", "uncased")]
    + [f"ckpt/{f}" for f in ("checkpoint", "xlnet_config.json", "xlnet_model.ckpt.index",
                             "xlnet_model.ckpt.data-00000-of-00001")]
    + ["head/train_batch.npz"])
FULL_LOG_PROBS = ("start_log_probs", "end_log_probs")
RESULT_KEYS = ("unique_ids", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
               "cls_logits")


def main(src, dst):
  for rel in FILES:
    out = os.path.join(dst, "GOLDENS_README.md" if rel == "README.md" else rel)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    shutil.copyfile(os.path.join(src, rel), out)
  with np.load(os.path.join(src, "head/predict.npz")) as p:
    np.savez_compressed(os.path.join(dst, "predict_results.npz"), **{k: p[k] for k in RESULT_KEYS})
    os.makedirs(os.path.join(dst, "head"), exist_ok=True)
    np.savez_compressed(os.path.join(dst, "head", "predict.npz"),
                        **{k: p[k] for k in p.files if k not in FULL_LOG_PROBS})


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__)))
