#!/usr/bin/env bash
# The main job on a fresh machine: set-up, then a small end-to-end pretrain + fine-tune demo on real text (CPU).
# Extra arguments go to scripts/demo.py (e.g. --pretrain_steps=1000 --out=/tmp/demo).
set -euo pipefail
export XLNET_DEMO_CWD="$PWD"  # a relative --out is the caller's, not the repository's
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/demo.py "$@"
