#!/usr/bin/env bash
# The side-by-side comparison of ../shared/perf (xlnet-tf beside HF, tensorflow/models and the original TF1 code, in
# one interleaved run), with bench/run_project.py as the project's runner: it times the Trainer's real step.
#   bash bench/compare.sh [WORKLOAD] [SIZE] [ROUNDS]     e.g. bash bench/compare.sh pretrain_step small 3
# Set-up once: ../shared/perf/README.md (the peers' venvs under /tmp/perf). PERF_DIR: the harness (default
# ../shared/perf); every PERF_* setting of the harness applies; the project runs in .venv.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
perf="${PERF_DIR:-$repo/../shared/perf}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$perf"/*.py "$perf"/*.sh "$perf"/workloads.json "$work"/
cp "$repo/bench/run_project.py" "$work/run_project.py"
export PERF_PROJECT_PY="${PERF_PROJECT_PY:-$repo/.venv/bin/python}" PERF_PROJECT_DIR="$repo"
bash "$work/compare.sh" "$@"
