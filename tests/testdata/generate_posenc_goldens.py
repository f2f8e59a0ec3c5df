"""Writes the ORIGINAL XLNet's relative positional encoding in bfloat16 for lengths past 256 (the forward goldens'
bfloat16 cases are 12 tokens long, where bfloat16 holds every position exactly).

  python tests/testdata/generate_posenc_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out=tests/testdata/positions/bf16.npz

Runs `modeling.relative_positional_encoding(..., dtype=tf.bfloat16)` of github.com/zihangdai/xlnet at bbaa3a6 (a
checkout passed as --xlnet_src and never copied here; imported as generate_forward_goldens does) in TF1 graph mode,
and the same in float32 (`dtype=None`), for each case of CASES. The original casts the frequencies and positions to
bfloat16 before the product and the sinusoids, so that its encoding is off the float32 one by up to 2.0 at distance
512: `tests/test_parity.py` checks that `--use_bfloat16` reproduces it and `--float32_positions` does not. A few
seconds; needs only the project's .venv.
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_forward_goldens as forward_goldens  # noqa: E402  pylint: disable=wrong-import-position

# name: (qlen, klen, d_model, clamp_len, attn_type, bi_data, bsz). XLNet-large pretraining's lengths (seq 512, mems
# 384) with a narrower d_model; clamp_len past 256; uni; bi_data over a batch of 4.
CASES = {
    "bi_512_896": (512, 896, 32, -1, "bi", False, None),
    "bi_300_300_clamp_280": (300, 300, 16, 280, "bi", False, None),
    "uni_300_400": (300, 400, 16, -1, "uni", False, None),
    "bidata_260_520": (260, 520, 8, -1, "bi", True, 4),
}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out", required=True)
  args = parser.parse_args()
  tf, _, modeling = forward_goldens.import_original(args.xlnet_src)
  arrays = {}
  for name, (qlen, klen, d_model, clamp_len, attn_type, bi_data, bsz) in CASES.items():
    tf.reset_default_graph()
    encodings = [modeling.relative_positional_encoding(qlen, klen, d_model, clamp_len, attn_type, bi_data, bsz=bsz,
                                                       dtype=dtype) for dtype in (tf.bfloat16, None)]
    with tf.Session() as session:
      bf16, fp32 = session.run([tf.cast(encodings[0], tf.float32), encodings[1]])
    arrays[f"{name}/bf16"], arrays[f"{name}/fp32"] = bf16, fp32
    print(f"{name}: bfloat16 off float32 by up to {np.abs(bf16 - fp32).max():.3f}")
  np.savez_compressed(args.out, cases_json=json.dumps(CASES), **arrays)


if __name__ == "__main__":
  main()
