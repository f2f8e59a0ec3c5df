#!/usr/bin/env bash
# The main job on a fresh machine: set-up, then a small end-to-end pretrain + fine-tune demo on real text (CPU).
# Extra arguments go to scripts/demo.py (e.g. --pretrain_steps=1000 --out=/tmp/demo).
set -euo pipefail
export XLNET_DEMO_CWD="$PWD"  # a relative --out is the caller's, not the repository's
cd "$(dirname "$0")/.."
# A flag demo.py refuses (or --help) is answered before set-up installs anything: its check needs no package.
# --check_flags alone asks for that check: it ran set-up too (sweep 25, C5).
PY=.venv/bin/python; [ -x "$PY" ] || PY=python3
if "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2> /dev/null; then
  case " $* " in *" -h "* | *" --help "* | *" --check_flags "*) exec "$PY" scripts/demo.py "$@" ;; esac
  "$PY" scripts/demo.py --check_flags "$@"
fi
bash scripts/setup.sh
exec .venv/bin/python scripts/demo.py "$@"
