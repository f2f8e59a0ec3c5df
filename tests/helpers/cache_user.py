"""Another run that uses a cached file under `locks.cache_lock`, for the tests of the caches: a process that holds
the cache's lock until its stdin closes or it is killed.

`python tests/helpers/cache_user.py PATH [FINGERPRINT [START]]` waits until the time.time() START (to start beside
another), uses the cache (`use`; without a fingerprint: PATH as it is), and prints `reused` or `wrote` (or the error's
line).
"""

import contextlib
import os
import subprocess
import sys
import time

from xlnet_tf import fileio
from xlnet_tf import locks


def use(path, fingerprint, overwrite=False, write_s=0.0):
  """'reused' or 'wrote': `path` as the cache of `fingerprint`, its bytes, written (taking write_s seconds) unless
  reusable. fingerprint None: reused as it is."""
  def reusable():
    return fingerprint is None or (os.path.exists(path) and open(path, encoding="utf-8").read() == fingerprint)

  with locks.cache_lock(path, reusable, overwrite) as reuse:
    if reuse:
      return "reused"
    time.sleep(write_s)
    fileio.atomic_write(path, fingerprint)
    return "wrote"


def start(path, fingerprint=None, at=None):
  """The process `use`s `path` (from time.time() `at`); it prints what it did, then holds the lock till its stdin
  closes."""
  argv = [sys.executable, __file__, str(path)] + ([fingerprint] if fingerprint else []) + ([str(at)] if at else [])
  return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))


@contextlib.contextmanager
def reader(path):
  """Another run reusing the cached file `path` as it is (holding its lock) while the body runs."""
  proc = start(path)
  try:
    assert proc.stdout.readline() == "reused\n"
    yield proc
  finally:
    proc.kill()
    proc.wait()


if __name__ == "__main__":
  if len(sys.argv) > 3:
    time.sleep(max(0.0, float(sys.argv[3]) - time.time()))
  try:
    print(use(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None, write_s=0.5), flush=True)
  except ValueError as e:
    print(e, flush=True)
  sys.stdin.read()
