"""`NEEDS_CPU_STATS`: skips a test that reads the CPU allocator's peak memory on a machine whose TensorFlow keeps no
statistics for it."""

import pytest
import tensorflow as tf


def cpu_allocator_counts():
  """Whether TensorFlow's CPU allocator keeps statistics on this machine: oneDNN's does, and TensorFlow turns oneDNN
  on by default only on CPUs with AVX-512 VNNI/BF16 or AMX. Elsewhere (an AVX2 CPU) `get_memory_info("CPU:0")`
  raises and the progress line leaves the figure out (docs/performance.md#memory)."""
  try:
    tf.config.experimental.get_memory_info("CPU:0")
    return True
  except ValueError:
    return False


NEEDS_CPU_STATS = pytest.mark.skipif(not cpu_allocator_counts(), reason="TensorFlow's CPU allocator keeps no "
                                     "statistics on this CPU (oneDNN is off by default without AVX-512 VNNI/BF16)")
