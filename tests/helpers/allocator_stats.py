"""`NEEDS_CPU_STATS`: skips a test that reads the CPU allocator's peak memory on a machine whose TensorFlow keeps no
statistics for it: oneDNN's CPU allocator keeps them, and TensorFlow turns oneDNN on by default only on CPUs with
AVX-512 VNNI/BF16 or AMX; elsewhere (an AVX2 CPU) the progress line leaves the figure out
(docs/performance.md#memory)."""

import pytest

from xlnet_tf.training import reporting

NEEDS_CPU_STATS = pytest.mark.skipif(reporting.peak_memory_bytes("CPU:0") is None, reason="TensorFlow's CPU "
                                     "allocator keeps no statistics on this CPU (oneDNN is off by default without "
                                     "AVX-512 VNNI/BF16)")
