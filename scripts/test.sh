#!/usr/bin/env bash
# Set-up, then the default test suite (tests marked slow are skipped; run them with `-m slow`), on two processes
# (pytest-xdist), each test file's tests on one of them: one process keeps about one of CI's two cores busy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
