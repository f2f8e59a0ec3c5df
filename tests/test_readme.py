"""The README's Python example runs as written (against a tiny checkpoint in the released layout)."""

import json
import os
import re
import subprocess
import sys

from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
from xlnet_tf import checkpoint

TINY = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=24, n_token=100, untie_r=True, ff_activation="gelu")


def test_the_python_example_runs(tmp_path):
  with open("README.md", encoding="utf-8") as f:
    blocks = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
  assert len(blocks) == 1
  released = tmp_path / "xlnet_cased_L-24_H-1024_A-16"  # the released checkpoint's layout, with a tiny model
  released.mkdir()
  (released / "xlnet_config.json").write_text(json.dumps(TINY))
  run_config = RunConfig(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0)
  checkpoint.export_original_checkpoint(XLNetModel(XLNetConfig(**TINY), run_config),
                                        str(released / "xlnet_model.ckpt"))
  code = blocks[0] + "\nprint('LOGITS', logits.shape, sorted(report))\n"
  proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, PYTHONPATH=os.getcwd(), TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "LOGITS (1, 2) ['kept_initial', 'loaded', 'unused']" in proc.stdout
  assert (tmp_path / "exported" / "xlnet_model.ckpt.index").exists()
