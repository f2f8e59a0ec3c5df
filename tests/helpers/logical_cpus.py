"""Runs a command-line tool of this repository with the CPU split into N logical devices (for mirrored tests).

  python tests/helpers/logical_cpus.py N run_classifier.py --strategy=mirrored ...

`--strategy=mirrored` then mirrors over the N logical CPUs, as it would over N GPUs.
"""

import os
import runpy
import sys

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

num_devices, script = int(sys.argv[1]), sys.argv[2]
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
sys.argv = [script] + sys.argv[3:]
runpy.run_path(os.path.join(ROOT, script), run_name="__main__")
