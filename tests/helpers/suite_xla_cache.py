"""The test session's XLA compilation cache (tests/conftest.py sets it in `TF_XLA_FLAGS`), and an environment
without it for the subprocesses of tests where a cache must not answer: those of `--xla_cache_dir` (a
`TF_XLA_FLAGS` cache directory would win over the flag) and those that look at what XLA compiles."""

import os
import re

_DIR_FLAG = re.compile(r"\s*--tf_xla_persistent_cache_directory=\S*")


def without(env=None):
  """`env` (default: this process's environment) with no XLA cache directory in `TF_XLA_FLAGS`."""
  env = dict(os.environ if env is None else env)
  flags = _DIR_FLAG.sub("", env.get("TF_XLA_FLAGS", "")).strip()
  if flags:
    env["TF_XLA_FLAGS"] = flags
  else:
    env.pop("TF_XLA_FLAGS", None)
  return env
