"""What every command-line tool does at start-up, in one place: the `tf.distribute` strategy, the chief, XLA's
compilation cache, glibc's malloc setting, XLA's CPU vector width, the bfloat16 check, and the run files written
beside the checkpoints.
"""

import ctypes
import dataclasses
import json
import os
import signal
import socket
import threading
import urllib.error
import urllib.parse
from typing import Optional

import keras
import tensorflow as tf
from absl import logging

from xlnet_tf.training import xla_cache



STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu")
TPU_CONNECT_TIMEOUT_S = 30  # how long --strategy=tpu waits for a TCP connection to the TPU's worker


@dataclasses.dataclass(frozen=True)
class CloudTPU:
  """Which Cloud TPU `--strategy=tpu` connects to (--tpu, --tpu_zone, --gcp_project: `TPUClusterResolver`'s tpu,
  zone and project). None everywhere: the resolver's defaults (e.g. the TPU of this VM)."""
  tpu: Optional[str] = None
  zone: Optional[str] = None
  project: Optional[str] = None


def _local_devices():
  """The local devices a mirrored strategy can use: the GPUs, else the logical CPUs when the CPU was split into
  several (tests), else none."""
  gpus = tf.config.list_logical_devices("GPU")
  if gpus:
    return [d.name for d in gpus]
  cpus = tf.config.list_logical_devices("CPU")
  return [d.name for d in cpus] if len(cpus) > 1 else []


def _tpu_resolver(cloud_tpu, flag):
  """The TPUClusterResolver of `cloud_tpu` (a `CloudTPU`) and its master address, grpc://host:port ('' for
  --tpu=local). A one-line ValueError naming `flag` (how the user named the TPU) where no TPU is named or a TPU name
  cannot be looked up (off Google Cloud, or without the Google API client TensorFlow looks it up with)."""
  try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=cloud_tpu.tpu, zone=cloud_tpu.zone,
                                                                 project=cloud_tpu.project)
    return resolver, resolver.master()  # a TPU name is looked up here (its worker's address)
  except ValueError as e:  # TensorFlow's "Please provide a TPU Name to connect to.": no name, none in the environment
    if cloud_tpu.tpu:
      raise ValueError(f"{flag}: {' '.join(str(e).split())}") from None
    raise ValueError("--strategy=tpu (or --use_tpu=True) needs the Cloud TPU to connect to, and none was named "
                     "(by --tpu or the environment's TPU_NAME). Pass --tpu=NAME (its name or grpc://ip:port; "
                     "--tpu=local on a TPU VM), with --tpu_zone and --gcp_project where it is in another zone or "
                     "project than this VM.") from None
  except urllib.error.URLError as e:  # the GCE metadata server (project, zone) or the Cloud TPU API: off GCE
    raise ValueError(f"{flag}: could not reach the Cloud TPU API or the GCE metadata server to look up that TPU "
                     f"name ({e.reason}). Pass the TPU's address as --tpu=grpc://ip:port, or run on a GCE VM in the "
                     "TPU's project (with --tpu_zone and --gcp_project where the TPU is in another zone or "
                     "project).") from None
  except RuntimeError as e:  # "Missing runtime dependency on the Google API client": a name needs the Cloud TPU API
    if "Google API client" not in str(e):
      raise
    raise ValueError(f"{flag}: looking up a TPU by its name needs the Google API client, which this Python lacks. "
                     "Install it (pip install cloud-tpu-client), or pass the TPU's address as --tpu=grpc://ip:port "
                     "(gcloud compute tpus describe NAME shows it; port 8470).") from None


# An HTTP/2 client's first bytes: the connection preface and an empty SETTINGS frame. A gRPC server (a TPU's
# worker) answers them at once with a SETTINGS frame of its own (RFC 9113, 3.4): 9 bytes of frame header, the type
# (4) at byte 3, a stream id of 0 in bytes 5-8.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _first_answer(connection, size):
  """Up to `size` bytes the peer of `connection` sends first (fewer where it closes the connection)."""
  answer = b""
  while len(answer) < size:
    data = connection.recv(size - len(answer))
    if not data:
      break
    answer += data
  return answer


def _check_tpu_reachable(master, flag, timeout_s=None):
  """A one-line ValueError naming `flag` unless the server at `master` (grpc://host:port), the TPU's worker, takes
  a TCP connection and answers an HTTP/2 client's first bytes as a gRPC server does, each within `timeout_s` (None:
  TPU_CONNECT_TIMEOUT_S). TensorFlow's connection blocks in C++ for good, deaf to SIGTERM and Ctrl-C, where no
  worker is there, where the port takes the connection and never answers (a tunnel whose far end is gone), and
  where something other than an HTTP/2 server answers (it retries). An HTTP/2 server that is no TPU worker is left
  to TensorFlow's connection to report. An address without host and port ('' for --tpu=local) is not checked."""
  timeout_s = TPU_CONNECT_TIMEOUT_S if timeout_s is None else timeout_s
  try:
    address = urllib.parse.urlsplit(master if "://" in master else f"grpc://{master}")
    host, port = address.hostname, address.port
  except ValueError:  # a port that is no number: TensorFlow's to report
    return
  if not host or not port:
    return
  connected = False
  try:
    with socket.create_connection((host, port), timeout=timeout_s) as connection:
      connected = True
      connection.sendall(_HTTP2_PREFACE)
      answer = _first_answer(connection, 9)
    if len(answer) == 9 and answer[3] == 4 and answer[5:9] == bytes(4):
      return
    if not answer:
      reason = "it took the connection and closed it without answering"
    else:
      first_line = (answer.decode("ascii", "replace").strip() or "whitespace").splitlines()[0]
      reason = f"it answered {first_line!r}..., not as a TPU's worker (a gRPC server) does"
  except TimeoutError:
    reason = (f"it took the connection but did not answer within {timeout_s} s" if connected else
              f"no answer within {timeout_s} s")
  except OSError as e:  # refused, unreachable, a host name that does not resolve, reset
    reason = e.strerror or str(e)
  raise ValueError(f"{flag}: cannot connect to the TPU at {master} ({reason}). Check that the TPU is up (gcloud "
                   "compute tpus list) and that --tpu names it or its worker's grpc://ip:port (port 8470).")


def _tf_config_workers(strategy):
  """The number of workers (chief and workers) the TF_CONFIG environment variable names; 0 where it is unset or
  names none. For --strategy (`strategy`) multi_worker_mirrored, a ValueError naming the
  variable where it does not describe this worker's cluster: TensorFlow's own words (`Expecting value: line 1 column 1`,
  `task_id 3 exceeds the maximum id of worker`) named no variable, and `{}` trained one worker alone without a
  word (sweep 25, B3)."""
  text = os.environ.get("TF_CONFIG")
  if text is None and strategy == "multi_worker_mirrored":
    raise ValueError("--strategy=multi_worker_mirrored needs the TF_CONFIG environment variable (cluster and "
                     "task of this worker). See docs/design.md, Multi-worker.")
  why, workers = _tf_config_problem("{}" if text is None else text)
  if why and strategy == "multi_worker_mirrored":
    raise ValueError(f"TF_CONFIG={text[:200]!r} does not describe this worker's cluster: {why}. Set it as "
                     '{"cluster": {"worker": ["host1:port", ...]}, "task": {"type": "worker", "index": I}} '
                     "(docs/design.md, Multi-worker), or unset it and pass another --strategy to train alone.")
  return workers


def _tf_config_problem(text):
  """(what is wrong with TF_CONFIG's value `text`, or None; its count of chief and worker tasks)."""
  try:
    value = json.loads(text)
  except ValueError as e:
    return f"it is not JSON ({e})", 0
  if not isinstance(value, dict):
    return "it is not a JSON object", 0
  cluster, task = value.get("cluster"), value.get("task")
  if not isinstance(cluster, dict) or not cluster or not all(isinstance(v, list) for v in cluster.values()):
    return 'its "cluster" is missing or not a map of task types to address lists', 0
  workers = sum(len(cluster.get(k, [])) for k in ("chief", "worker"))
  index = task.get("index") if isinstance(task, dict) else None
  if isinstance(index, str) and index.isdigit():  # TensorFlow reads int("0") too
    index = int(index)
  if not isinstance(index, int) or isinstance(index, bool):
    return 'its "task" is missing or lacks a type and an integer index', workers
  if index not in range(len(cluster.get(task.get("type"), []))):
    tasks = ", ".join(f"{len(v)} {k}" for k, v in cluster.items())
    return f"its task {task.get('type')} {index} is not in its cluster of {tasks}", workers
  return None, workers


def _multi_worker_strategy(workers):
  """MultiWorkerMirroredStrategy, built where SIGINT ends the process: TensorFlow waits in C++ for every worker of
  TF_CONFIG to connect, where no Python handler runs, so a run whose peers never came ignored Ctrl-C (sweep 26, B2).
  Our handler is back once it is built. (SIGTERM is TensorFlow's own there: its preemption notifier takes it.)"""
  logging.info("Waiting for every worker of TF_CONFIG's cluster (%d) to connect; Ctrl-C (SIGINT) ends this one.",
               workers)
  main = threading.current_thread() is threading.main_thread()
  old = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_DFL)} if main else {}
  try:
    return tf.distribute.MultiWorkerMirroredStrategy()
  except tf.errors.OpError as e:  # e.g. this worker's port in use: a traceback ending "Could not start gRPC server"
    config = json.loads(os.environ["TF_CONFIG"])
    kind, index = config["task"]["type"], int(config["task"]["index"])
    raise ValueError(f"Cannot start TF_CONFIG's task {kind} {index} at {config['cluster'][kind][index]} "
                     f"({e.message}): another process may hold that port, or the address is not this machine's. "
                     "Free the port, or fix TF_CONFIG.") from None
  finally:
    for signum, handler in old.items():
      signal.signal(signum, handler)


def make_strategy(name, num_core_per_host=None, cloud_tpu=CloudTPU(), trains=True):
  """Builds the `tf.distribute` strategy named by --strategy, with the original's meaning of --num_core_per_host.

  auto (the default): as the original's GPU path, `num_core_per_host` > 1 mirrors over that many local GPUs
  (the original's `MirroredStrategy(num_gpus=num_core_per_host)`), else one device (the first GPU, else the CPU).
  one_device: the first GPU if any, else the CPU. mirrored: `num_core_per_host` local GPUs (all of them when it is
  unset; the CPU, one replica, where there is none). multi_worker_mirrored: from TF_CONFIG. tpu: TPUStrategy
  through a TPUClusterResolver of `cloud_tpu` (a `CloudTPU`); its replicas are the TPU's cores. A count the machine
  cannot honour is a ValueError (one line), and so is a TPU that cannot be looked up, reached
  (`_check_tpu_reachable`, before TensorFlow's connection, which would wait for good) or found, and (`trains`: a
  run that trains) a TF_CONFIG cluster of several workers with a strategy of one machine.
  """
  workers = _tf_config_workers(name)
  if workers > 1 and trains and name not in ("multi_worker_mirrored", "tpu"):  # a prediction alone is a worker's
    raise ValueError(f"TF_CONFIG names a cluster of {workers} workers, but --strategy={name} trains on this machine "
                     "alone: each worker would train its own copy. Pass --strategy=multi_worker_mirrored, or unset "
                     "TF_CONFIG.")
  if name == "auto":
    name = "mirrored" if num_core_per_host and num_core_per_host > 1 else "one_device"
  if name == "one_device":
    if num_core_per_host and num_core_per_host > 1:
      raise ValueError(f"--strategy=one_device runs one replica, but --num_core_per_host={num_core_per_host} asks "
                       "for more. Drop one of the two flags.")
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  if name == "mirrored":
    devices = _local_devices()
    wanted = num_core_per_host or max(len(devices), 1)
    if wanted > max(len(devices), 1):  # without a GPU: one replica, on the CPU
      have = max(len(devices), 1)
      factor = wanted // have if wanted % have == 0 else f"{wanted}/{have}"
      raise ValueError(f"--num_core_per_host={wanted} asks for {wanted} replicas (one per GPU, as the original's "
                       f"MirroredStrategy), but this machine has {len(devices)} GPU(s). Pass "
                       f"--num_core_per_host={have}. A fine-tuning tool's --train_batch_size is per replica: "
                       f"multiply it by {factor} to keep the global batch; run_pretrain.py's is the global batch "
                       f"already (write its bi_data records with data_utils.py --num_core_per_host={have}).")
    return tf.distribute.MirroredStrategy(devices[:wanted] or ["/cpu:0"])
  if name == "multi_worker_mirrored":
    return _multi_worker_strategy(workers)
  if name == "tpu":
    flag = f"--tpu={cloud_tpu.tpu}" if cloud_tpu.tpu else "--tpu (unset: the TPU the environment names)"
    resolver, master = _tpu_resolver(cloud_tpu, flag)
    _check_tpu_reachable(master, flag)
    try:
      tf.config.experimental_connect_to_cluster(resolver)
    except tf.errors.OpError as e:  # something else listens there (e.g. an HTTP server: "status: 404")
      raise ValueError(f"{flag}: the server at {master} did not answer as a TPU's worker "
                       f"({e.message.splitlines()[0]}). Check that --tpu names the TPU or its worker's "
                       "grpc://ip:port (port 8470).") from None
    try:
      tf.tpu.experimental.initialize_tpu_system(resolver)
    except tf.errors.NotFoundError as e:  # "TPUs not found in the cluster", after a chain of two tracebacks
      if master:
        raise ValueError(f"{flag}: the worker at {master} answered but has no TPU ({e.message.splitlines()[0]}). "
                         "Pass the address of a Cloud TPU's worker.") from None
      raise ValueError(f"{flag}: no TPU found on this machine. Run on a TPU VM, or drop --use_tpu (and "
                       "--strategy=tpu) to train on this machine's GPUs or CPU.") from None
    return tf.distribute.TPUStrategy(resolver)
  raise ValueError(f"--strategy must be one of {STRATEGIES}. Received: {name!r}.")


def _cpu_flags():
  """The CPU's feature flags (`/proc/cpuinfo`), empty where that file cannot be read."""
  try:
    with open("/proc/cpuinfo") as f:
      return set(f.read().split())
  except OSError:
    return set()


_NATIVE_BFLOAT16 = {"avx512_bf16", "amx_bf16"}  # /proc/cpuinfo flags of CPUs that compute bfloat16 natively


def cpu_has_native_bfloat16():
  """Whether this CPU computes bfloat16 natively (AVX512_BF16 or AMX). Elsewhere TensorFlow emulates it."""
  return bool(_cpu_flags() & _NATIVE_BFLOAT16)


_VECTOR_WIDTH_FLAG = "--xla_cpu_prefer_vector_width"


def prefer_wide_xla_vectors():
  """Lets XLA's CPU compiler use 512-bit vectors where the CPU has AVX-512 and native bfloat16.

  XLA generates 256-bit vector code on every x86 CPU by default (`--xla_cpu_prefer_vector_width=256`), which
  avoids the clock penalty of 512-bit instructions on older AVX-512 CPUs. CPUs with AVX512_BF16 or AMX (AMD Zen 4
  and later, Intel Cooper Lake and Sapphire Rapids and later) pay little or none, and the XLA-compiled element-wise
  code (GELU, LayerNorm, the score sum, the softmax, the cross-entropy, the dropout bits; all of it under
  `--jit_compile`) then runs faster, with the same losses (docs/performance.md). XLA reads `XLA_FLAGS` once per
  process, at its first compilation, so call this before anything is compiled.

  Returns:
    True if the flag was appended to `XLA_FLAGS`; False if the CPU does not qualify or `XLA_FLAGS` already sets
    a vector width (the user's setting wins).
  """
  flags = os.environ.get("XLA_FLAGS", "")
  cpu = _cpu_flags()
  if _VECTOR_WIDTH_FLAG in flags or "avx512f" not in cpu or not cpu & _NATIVE_BFLOAT16:
    return False
  os.environ["XLA_FLAGS"] = f"{flags} {_VECTOR_WIDTH_FLAG}=512".strip()
  return True


_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameter numbers (malloc.h)


_MALLOC_ENV = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_memory():
  """Makes glibc's malloc keep freed tensor buffers for reuse instead of returning them to the kernel.

  TensorFlow frees and reallocates the same large tensors every step. By default glibc serves them with fresh
  `mmap`s and trims freed heap memory, so the kernel faults and zeroes every page again on each step: on a small
  CPU a large share of the pretraining process's CPU time (docs/performance.md). This
  sets `mallopt` as `MALLOC_MMAP_THRESHOLD_=32MiB MALLOC_TRIM_THRESHOLD_=1GiB MALLOC_TOP_PAD_=64MiB` would; the
  process keeps its peak heap instead of shrinking between steps.

  Returns:
    True if the settings were made; False if the C library is not glibc, or the user set malloc tunables in the
    environment (theirs are kept).
  """
  if any(name in os.environ for name in _MALLOC_ENV):
    return False
  try:
    mallopt = ctypes.CDLL("libc.so.6").mallopt
  except (OSError, AttributeError):
    return False
  settings = ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 1 << 30), (_M_TOP_PAD, 64 << 20))
  kept = all([mallopt(param, value) == 1 for param, value in settings])  # every setting, even if one fails
  _kept_freed_memory[0] = _kept_freed_memory[0] or kept
  return kept


_kept_freed_memory = [False]  # whether keep_freed_memory() made its settings in this process


def keep_freed_memory_after_input():
  """Makes keep_freed_memory()'s settings again, if this process made them; call it after creating an input iterator.

  TensorFlow's GeneratorDataset kernel, which every `tf.distribute` input iterator builds (even one device's),
  sets glibc's mmap threshold to a fixed 128 KiB when it is constructed (`tensorflow::data::
  ApplyPython311MemoryPatch`, TF 2.21). That undoes keep_freed_memory(): every tensor over 128 KiB is a fresh
  mmap again, faulted in and zeroed on each step (a much slower step; docs/performance.md).

  Returns:
    True if the settings were made again; False if keep_freed_memory() had not made them.
  """
  return keep_freed_memory() if _kept_freed_memory[0] else False


def warn_if_emulated_bfloat16(use_bfloat16, strategy):
  """Logs a warning when --use_bfloat16 will run on a CPU that only emulates bfloat16 (slower than float32)."""
  devices = getattr(strategy.extended, "worker_devices", ())
  if use_bfloat16 and devices and all("CPU" in d.upper() for d in devices) and not cpu_has_native_bfloat16():
    logging.warning("--use_bfloat16 on a CPU without native bfloat16 (no avx512_bf16/amx_bf16 in /proc/cpuinfo): "
                    "TensorFlow emulates it, which is slower than float32 here; pass --use_bfloat16=False.")


def input_pipelines(strategy):
  """The input pipelines a dataset function gets on `strategy`: one per host of a TPU, per worker of a cluster."""
  extended = strategy.extended
  return getattr(extended, "num_hosts", None) or getattr(extended, "_num_workers", 1)


def is_chief(strategy):
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not getattr(resolver, "task_type", None):
    return True
  return resolver.task_type in ("chief", None) or (resolver.task_type == "worker" and resolver.task_id == 0 and
                                                   "chief" not in resolver.cluster_spec().as_dict())


def set_float32_matmul_precision(use_tf32, strategy):
  """Strict float32 matmuls on GPUs, unless use_tf32 (`--use_tf32`); a TPU strategy is left as it is.

  TensorFlow 2 lets float32 matmuls and convolutions on NVIDIA GPUs from Ampere on use TensorFloat-32 by default
  (products with 10-bit mantissas, relative errors near 1e-3); the original ran on TF 1.13, which predates it. Turning
  it off also makes XLA compile every float32 dot at HIGHEST precision. On a TPU that would be several bfloat16
  passes per product where the original used XLA's default, so TPUs keep the default. CPUs compute float32 either
  way (the same bits).
  """
  if not isinstance(strategy, tf.distribute.TPUStrategy):
    tf.config.experimental.enable_tensor_float_32_execution(use_tf32)


def start(*, strategy="auto", num_core_per_host=None, seed=None, deterministic=False, use_tf32=False,
          use_bfloat16=False, cloud_tpu=CloudTPU(), xla_cache_dir=None, trains=True):
  """What every training CLI does before it builds a model; returns the `tf.distribute` strategy.

  Keeps XLA's compiled programs in `xla_cache_dir` where it is set (`xla_cache.enable`; first, before TensorFlow's
  runtime starts), keeps freed memory in glibc's heap, lets XLA use 512-bit vectors where that pays
  (`prefer_wide_xla_vectors`), enables op determinism (`deterministic`, which needs `seed`), seeds
  Keras/TF/numpy/python (`seed`: initialisation and dropout), builds the strategy (`make_strategy`;
  `num_core_per_host` is ignored on TPU), makes float32 matmuls strict on GPUs unless `use_tf32`
  (`set_float32_matmul_precision`), warns when bfloat16 (`use_bfloat16`) would be emulated and lets XLA read
  `XLA_FLAGS` (`read_xla_flags`). The CLIs call it with their flags through `flag_configs.start`.

  Args:
    strategy: a name of `STRATEGIES`; num_core_per_host, cloud_tpu, trains: as `make_strategy`.
  """
  if xla_cache_dir:
    xla_cache.enable(xla_cache_dir)
  keep_freed_memory()
  prefer_wide_xla_vectors()
  if deterministic:
    if seed is None:
      raise ValueError("--deterministic needs --seed (initialisation, dropout and the data order must be seeded).")
    tf.config.experimental.enable_op_determinism()
  if seed is not None:
    keras.utils.set_random_seed(seed)
  strategy = make_strategy(strategy, None if strategy == "tpu" else num_core_per_host, cloud_tpu, trains)
  set_float32_matmul_precision(use_tf32, strategy)
  warn_if_emulated_bfloat16(use_bfloat16, strategy)
  read_xla_flags()
  return strategy


def read_xla_flags():
  """Compiles a one-op program with XLA on the CPU (about 0.07 s), so that XLA reads `XLA_FLAGS` now: it ends the
  process on a flag it does not know (its line names it), and a CLI calls this before it writes anything (lock,
  run files), not at its first step. After `make_strategy`: a program run starts TensorFlow's runtime, after which
  the CPU can no longer be split into replicas."""
  with tf.device("/CPU:0"):
    tf.function(lambda x: x + 1.0, jit_compile=True, autograph=False)(tf.constant(1.0))


def fine_tuning_batch_sizes(strategy, train_batch_size):
  """(global, per-replica) batch of a fine-tuning CLI's `--train_batch_size`: global on TPU, per replica elsewhere
  (the original's GPU semantics)."""
  num_replicas = strategy.num_replicas_in_sync
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return train_batch_size, train_batch_size // num_replicas
  return train_batch_size * num_replicas, train_batch_size

