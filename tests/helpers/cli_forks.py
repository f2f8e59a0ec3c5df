"""Runs many command lines of the CLIs with one TensorFlow import: `run([[tool.py, flag, ...], ...], log_dir)` from a
test, which starts `python tests/helpers/cli_forks.py JOBS_JSON PARALLEL`.

JOBS_JSON holds [{"argv": [tool.py, flag, ...], "stderr": path, "headroom": bytes or null}, ...], the tools in one
directory; a job with a headroom runs with its address space limited to what it has at the fork plus that many
bytes (RLIMIT_AS), so that a bigger allocation fails as out of memory would on a device that small (such batches
run with oneDNN off: its kernels crash or hang, not report, when the address space runs out, where TensorFlow's own
allocator reports as a GPU's does; see docs/reliability.md, Bad input and other failures). This process
imports every tool named there (as a module, which imports TensorFlow and the package but runs nothing), then forks
one child per job, at most PARALLEL at a time. A child runs the tool as `python tool.py flags...` would (`runpy`
with `__name__ == "__main__"`), its stderr (Python's and the C++ runtime's) into the job's file, its stdout
discarded; an uncaught exception prints its traceback and exits 1, as the interpreter does. Prints
{"returncodes": [...]} as JSON.

Only the import is shared: no TensorFlow runtime exists in this process when it forks (it never runs an op), so
each child starts its own, as a fresh process would. The bad-input sweeps use this to start ~40 command lines
without paying the ~5 s TensorFlow import for each.
"""

import json
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import traceback

try:
  from helpers import suite_xla_cache
except ImportError:  # run as a script: tests/helpers is sys.path[0]
  import suite_xla_cache


def run(argvs, log_dir, parallel=3, headrooms=None):
  """Runs each [tool.py, flags...] (tools relative to the working directory) as its command line would, with
  CUDA_VISIBLE_DEVICES="" and TF_CPP_MIN_LOG_LEVEL=2; [(returncode, stderr), ...] in order. Logs go to a new
  directory under log_dir. headrooms: None, or per command line the bytes of address space it may add (None:
  no limit); with any, every command line runs with TF_ENABLE_ONEDNN_OPTS=0."""
  batch = tempfile.mkdtemp(dir=log_dir)
  headrooms = headrooms or [None] * len(argvs)
  jobs = [{"argv": [str(a) for a in argv], "stderr": os.path.join(batch, f"{i}.stderr"), "headroom": headroom}
          for i, (argv, headroom) in enumerate(zip(argvs, headrooms))]
  with open(os.path.join(batch, "jobs.json"), "w", encoding="utf-8") as f:
    json.dump(jobs, f)
  proc = subprocess.run([sys.executable, __file__, os.path.join(batch, "jobs.json"), str(parallel)],
                        capture_output=True, text=True, timeout=900,
                        env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2",
                                 **({"TF_ENABLE_ONEDNN_OPTS": "0"} if any(headrooms) else {})))
  if proc.returncode:
    raise RuntimeError(f"cli_forks failed: {proc.stderr[-3000:]}")
  codes = json.loads(proc.stdout.strip().splitlines()[-1])["returncodes"]
  return [(code, open(job["stderr"], encoding="utf-8", errors="replace").read()) for code, job in zip(codes, jobs)]


def _child(argv, stderr_path, headroom):
  if headroom:
    with open("/proc/self/statm", encoding="ascii") as f:
      size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (size + headroom, resource.RLIM_INFINITY))
  err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
  null = os.open(os.devnull, os.O_WRONLY)
  os.dup2(err, 2)
  os.dup2(null, 1)
  sys.argv = list(argv)
  if any(a.startswith("--xla_cache_dir") for a in argv):  # the flag's own cache, not the test session's
    os.environ.clear()
    os.environ.update(suite_xla_cache.without())
  code = 0
  try:
    runpy.run_path(argv[0], run_name="__main__")
  except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if e.code is not None and not isinstance(e.code, int):
      print(e.code, file=sys.stderr)
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)


def main(jobs_path, parallel):
  with open(jobs_path, encoding="utf-8") as f:
    jobs = json.load(f)
  sys.path[0] = os.path.dirname(os.path.abspath(jobs[0]["argv"][0]))  # as `python tool.py` has it
  for tool in sorted({job["argv"][0] for job in jobs}):
    runpy.run_path(tool, run_name="cli_forks_preload")
  codes, running, pending = [None] * len(jobs), {}, list(enumerate(jobs))
  while pending or running:
    while pending and len(running) < parallel:
      i, job = pending.pop(0)
      sys.stdout.flush()
      sys.stderr.flush()
      pid = os.fork()
      if pid == 0:
        _child(job["argv"], job["stderr"], job.get("headroom"))
      running[pid] = i
    pid, status = os.wait()
    codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
  print(json.dumps({"returncodes": codes}))


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]))
