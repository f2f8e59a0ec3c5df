"""A device (a GPU's, a TPU's or the host's memory) that cannot hold a step: one line saying where it happened, the
allocation that failed and which flags make the step fit, in place of TensorFlow's traceback. The original's
README has a section on this ("Memory Issue during Finetuning"); here the line names what this run can change."""

import contextlib
import re

import tensorflow as tf

from xlnet_tf import stderr_filter

HALF_PRECISION = "--use_bfloat16 (--use_fp16 on a GPU without bfloat16)"  # half the activations' bytes
# An out-of-memory error's words (`stderr_filter.MEMORY_WORDS`); other ResourceExhaustedErrors pass through as they are.
_MEMORY = re.compile(stderr_filter.MEMORY_WORDS, re.I)


def allocation(error):
  """The line of a ResourceExhaustedError's message that says what could not be allocated (whitespace collapsed,
  no final full stop, at most 300 characters; a function's error starts with "Graph execution error:" and where
  its op was defined), or None when the error is not about memory."""
  if not isinstance(error, tf.errors.ResourceExhaustedError):
    return None
  line = next((line for line in error.message.splitlines() if _MEMORY.search(line)), None)
  return line and stderr_filter.error_text(line).rstrip(".")[:300]


def larger_accumulation(rows, steps):
  """The smallest --gradient_accumulation_steps above `steps` that splits `rows` (the per-replica rows, or pairs of
  forward and backward rows with bi_data) into equal micro-batches; None when each micro-batch is one already."""
  return next((n for n in range(steps + 1, rows + 1) if rows % n == 0), None)


@contextlib.contextmanager
def reported(where, fixes, then=lambda: ""):
  """Turns an out-of-memory error raised inside into a MemoryError of one line: `Out of memory {where} (the
  allocation). {fixes}{then()}.`; any other error passes through.

  Args:
    where: str, or () -> str called after the failure (e.g. "at step 41", the step that failed).
    fixes: str, the sentence saying which flags make it fit.
    then: () -> str, called after the failure, e.g. "; nothing was saved, the latest checkpoint is ...".
  """
  try:
    yield
  except tf.errors.ResourceExhaustedError as e:
    what = allocation(e)
    if what is None:
      raise
    raise MemoryError(f"Out of memory {where() if callable(where) else where} ({what}). {fixes}{then()}.") from None
