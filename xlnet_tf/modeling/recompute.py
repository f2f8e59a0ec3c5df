"""Recomputation of a layer's activations in the backward pass (`RunConfig.recompute_grad`, `--recompute_grad`).

Without it, the backward pass of a Transformer-XL layer reads what its forward kept: the attention scores and
probabilities ([N, B, I, J] each), their dropout masks, the feed-forward network's [I * B, F] activations. With
`recompute_grad(fn, layer)` the forward keeps only the layer's inputs; the backward pass runs the layer again, under
a tape of its own (`tf.recompute_grad`), and differentiates that run. Memory for activations is then one layer's
at a time plus the inputs of every layer, for about one more forward per step (docs/training_step.md).

The gradients are those without recomputation:
- Dropout draws the same masks in both runs: each `layers.Dropout` of the layer reads its seed generator's state
  once, before the recomputed function, and both runs draw their k-th mask from that state + [0, k]
  (`layers.fixed_seeds`), the seed the generator itself would give; after the forward each generator is advanced
  by the masks it drew. So the masks, and the dropout RNG state a checkpoint saves, are those of a run without
  recomputation.
- The floating-point tensors among the arguments, also inside tuples and NamedTuples (`attention.AttentionBiases`),
  are differentiated (inputs); every variable the function reads gets its gradient through `tf.recompute_grad`'s
  `variables`. Other arguments (the `AttentionContext` of masks and segments, a plain object; Python values, integer
  tensors) are passed through as they are: no gradient reaches tensors inside them (none needs one).
"""

import tensorflow as tf

from xlnet_tf.modeling import layers


def recompute_grad(fn, layer):
  """fn (the forward of `layer`, a Keras layer) with its activations recomputed in the backward pass.

  Args:
    fn: (*args, **kwargs) -> a tensor, or a nest of tensors and None; it must draw its dropout masks only from
      `layers.Dropout`s of `layer` (without noise_shape).
    layer: the Keras layer whose `Dropout` sublayers fn uses.

  Returns:
    A function with fn's arguments and results (see the module docstring for what is differentiated).
  """
  sublayers = layer._flatten_layers()  # pylint: disable=protected-access  # Keras's walk over nested layers
  dropouts = [d for d in sublayers if isinstance(d, layers.Dropout) and d.rate > 0]

  def call(*args, **kwargs):
    # Each state read once, outside the recomputation: a snapshot (the variable would be read again, advanced).
    states = {d: tf.identity(d.seed_generator.state.value) for d in dropouts}
    flat = tf.nest.flatten((args, kwargs))
    inputs = [i for i, x in enumerate(flat) if _differentiable(x)]
    drawn, outputs = {}, []

    def forward(*tensors):
      values = list(flat)
      for i, tensor in zip(inputs, tensors):
        values[i] = tensor
      fn_args, fn_kwargs = tf.nest.pack_sequence_as((args, kwargs), values)
      with layers.fixed_seeds(states) as draws:
        result = fn(*fn_args, **fn_kwargs)
      drawn.update(draws)  # the same in the recomputation: the same code draws the same number of masks
      outputs[:] = [result]
      return [x for x in tf.nest.flatten(result) if x is not None]  # tf.recompute_grad returns tensors only

    tensors = iter(tf.recompute_grad(forward)(*(flat[i] for i in inputs)))
    for dropout, draws in drawn.items():
      if draws:
        dropout.advance_seed(draws)
    structure = outputs[0]
    return tf.nest.pack_sequence_as(structure, [x if x is None else next(tensors)
                                                for x in tf.nest.flatten(structure)])

  return call


def _differentiable(x):
  return isinstance(x, (tf.Tensor, tf.Variable)) and x.dtype.is_floating
