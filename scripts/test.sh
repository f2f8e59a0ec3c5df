#!/usr/bin/env bash
# Set-up, then the default test suite (tests marked slow are skipped; run them with `-m slow`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
