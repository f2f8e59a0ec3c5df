"""Which ops of a traced function could not run on a GPU, checked on any machine.

The TensorFlow 2.21 wheel registers its GPU kernels whether or not a GPU is present. An op without a GPU kernel for
its dtypes would be placed on the host in a GPU run: a copy to the host and back inside the training loop. An op in
an XLA-compiled function (`jit_compile=True`) needs a kernel of XLA's GPU compiler instead (`XLA_GPU_JIT`).
"""

import functools

import tensorflow as tf
from tensorflow.python.framework import kernels

_FUNC_ATTRS = ("f", "then_branch", "else_branch", "body", "cond", "branches")


def _kernel_defs(op_type, device_types):
  try:
    registered = kernels.get_registered_kernels_for_op(op_type).kernel
  except Exception:  # pylint: disable=broad-except  # not an op of this build: no kernel anywhere
    return []
  return [k for k in registered if k.device_type in device_types]


def _allows(kernel_def, node):
  """Whether the node's type attributes meet the kernel's type constraints."""
  for constraint in kernel_def.constraint:
    allowed = set(constraint.allowed_values.list.type)
    attr = node.attr.get(constraint.name)
    if not allowed or attr is None:
      continue
    types = [attr.type] if attr.HasField("type") else list(attr.list.type)
    if any(t not in allowed for t in types):
      return False
  return True


def _called_functions(node):
  names = []
  for key in _FUNC_ATTRS:
    attr = node.attr.get(key)
    if attr is not None:
      names += [attr.func.name] if attr.HasField("func") else [f.name for f in attr.list.func]
  return names


@functools.cache
def _register_xla_kernels():
  """XLA registers its kernels (`XLA_GPU_JIT` among them) when it first compiles: once per process."""
  tf.function(lambda x: x + 1, jit_compile=True)(tf.constant(1.0))


def _must_compile(attrs):
  attr = attrs.get("_XlaMustCompile")
  return attr is not None and attr.b


def check_gpu_kernels(concrete_function):
  """Looks up a GPU kernel for every op of concrete_function (every nested function included) and its dtypes.

  Returns:
    (missing, checked): missing, a sorted list of "op_type {type attributes} in function" strings, empty when
    every op can run on a GPU; checked, the set of (op_type, in_xla) of every op looked at.
  """
  _register_xla_kernels()
  graph_def = concrete_function.graph.as_graph_def()
  library = {f.signature.name: f for f in graph_def.library.function}
  missing, seen, checked = set(), set(), set()

  def visit(nodes, where, xla):
    for node in nodes:
      called = ([node.op] if node.op in library else []) + _called_functions(node)
      for name in called:
        inner_xla = xla or _must_compile(node.attr) or _must_compile(library[name].attr)
        if (name, inner_xla) not in seen:
          seen.add((name, inner_xla))
          visit(library[name].node_def, name, inner_xla)
      if node.op in library or node.op == "Placeholder":  # a call, or an argument of the function
        continue
      checked.add((node.op, xla))
      device_types = ("XLA_GPU_JIT",) if xla else ("GPU", "DEFAULT")
      if not any(_allows(k, node) for k in _kernel_defs(node.op, device_types)):
        types = {k: tf.as_dtype(v.type).name for k, v in sorted(node.attr.items()) if v.HasField("type")}
        missing.add(f"{node.op} {types} in {where}{' (XLA)' if xla else ''}")

  visit(graph_def.node, "the function", _must_compile(concrete_function.function_def.attr))
  return sorted(missing), checked


def check_training_loop(trainer, features):
  """`check_gpu_kernels` of the loop `trainer.train` runs, fed `features` (a dict of arrays: one batch)."""
  dataset = tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in features.items()}).repeat()
  iterator = iter(trainer.strategy.distribute_datasets_from_function(lambda _: dataset))
  loop = trainer._build_loop()  # pylint: disable=protected-access  # the loop Trainer.train runs
  return check_gpu_kernels(loop.get_concrete_function(iterator, tf.constant(1), tf.constant(True)))
