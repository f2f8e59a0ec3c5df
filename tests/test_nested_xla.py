"""The nested XLA programs (`ops.xla_function`: GELU, LayerNorm, the score sum, the cross-entropy, the dropout's
bits, ...) switched off (`ops.set_nested_xla(False)`, the benchmarks' A/B of what their launches cost on a GPU):
the same training step in TensorFlow's own kernels, every op of it with a GPU kernel."""

import numpy as np
import pytest
import tensorflow as tf

from test_gpu_path import _training_loop_kernels, _run_config as gpu_run_config
from test_recompute import _assert_same_run, _steps
from xlnet_tf.modeling import ops


@pytest.fixture
def nested_xla():
  """`ops.set_nested_xla`, restored to the default afterwards."""
  yield ops.set_nested_xla
  ops.set_nested_xla(True)


@pytest.mark.parametrize("pretrain", [pytest.param(True, marks=pytest.mark.slow), False])  # slow: 15 minutes
def test_the_step_without_nested_xla_equals_the_step_with_it(nested_xla, pretrain):
  """Two forward-backward passes with dropout (two streams and mems in pretraining): losses, mems, every gradient
  and the dropout RNG state agree to float32 rounding (XLA fuses and orders some float operations differently)."""
  with_xla = _steps(False, pretrain)
  nested_xla(False)
  without = _steps(False, pretrain)
  _assert_same_run(without, with_xla, rtol=2e-5, atol=1e-6)


def test_without_nested_xla_the_graph_holds_no_xla_program(nested_xla):
  """The switch reaches every call: a traced step then calls no XLA-compiled function."""
  nested_xla(False)
  x = tf.constant(np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4))
  graph = tf.function(lambda: ops.gelu(x)).get_concrete_function().graph
  library = graph.as_graph_def().library.function
  assert not [f.signature.name for f in library if f.attr.get("_XlaMustCompile") and f.attr["_XlaMustCompile"].b]
  nested_xla(True)
  graph = tf.function(lambda: ops.gelu(x)).get_concrete_function().graph
  assert [f for f in graph.as_graph_def().library.function if f.attr["_XlaMustCompile"].b]


@pytest.mark.skipif(not tf.test.is_built_with_cuda(), reason="this TensorFlow build has no GPU kernels")
@pytest.mark.slow  # the default suite's 15 minutes; by default: test_gpu_path.py
@pytest.mark.parametrize("kind", ["pretrain", "classifier"])
def test_without_nested_xla_every_op_of_the_training_loop_runs_on_a_gpu(tmp_path, nested_xla, kind):
  nested_xla(False)
  missing, checked = _training_loop_kernels(tmp_path, kind, gpu_run_config(True, False, kind), False)
  assert missing == []
  assert ("Tanh", False) in checked or ("Sigmoid", False) in checked  # GELU's ops, outside any XLA program
