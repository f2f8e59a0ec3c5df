"""training.out_of_memory: a device that cannot hold a step or a batch ends the run with one line naming the
allocation and the flags that make it fit, and nothing saved. The command lines' cases (a training step and an
evaluation on 4 GiB of address space) are in tests/test_bad_input.py."""

import glob

import pytest
import tensorflow as tf

from xlnet_tf import training
from xlnet_tf.config import RunConfig, XLNetConfig
from xlnet_tf.modeling.xlnet import XLNetModel
from xlnet_tf.tasks.classifier import task as classifier_task
from xlnet_tf.tasks.pretrain.task import PretrainTask
from xlnet_tf.training import out_of_memory

CONFIG = XLNetConfig(n_layer=1, d_model=4, n_head=1, d_head=4, d_inner=8, ff_activation="gelu", untie_r=True,
                     n_token=32)
# A sequence whose [L, L] attention scores no address space holds (12e6^2 bytes is over 2^47, even as bools): every
# allocator refuses them, whatever the machine's memory and overcommit setting.
HUGE_LEN = 12_000_000


# TensorFlow's CPU allocator where oneDNN is on (x86 CPUs with AVX512_VNNI and others): the lines name it as it is.
MKL = "allocator mklcpu"


def _error(message):
  return tf.errors.ResourceExhaustedError(None, None, message)


@pytest.mark.parametrize("message, line", [
    ("Graph execution error:\n\nDetected at node x defined at (most recent call last):\n  File \"run.py\", line 3\n"
     "{{function_node __inference_train_loop_9}} OOM when allocating tensor with shape[16,12,512,896] and type "
     "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n\t [[{{node MatMul_4}}]]\nHint: "
     "If you want to see a list of allocated tensors ...",
     "OOM when allocating tensor with shape[16,12,512,896] and type float on GPU:0 by allocator GPU_0_bfc"),
    ("Out of memory while trying to allocate 3221225472 bytes.\nBufferAssignment OOM Debugging.\n...",
     "Out of memory while trying to allocate 3221225472 bytes"),
    ("Attempting to reserve 10.10G at the bottom of memory. That was not possible. There are 7.20G free.",
     "Attempting to reserve 10.10G at the bottom of memory. That was not possible. There are 7.20G free"),
    ("Quota exceeded for quota metric 'Requests'", None),
])
def test_the_line_names_what_could_not_be_allocated(message, line):
  assert out_of_memory.allocation(_error(message)) == line
  assert out_of_memory.allocation(ValueError(message)) is None


@pytest.mark.parametrize("rows, steps, more", [(8, 1, 2), (4, 2, 4), (6, 2, 3), (6, 3, 6), (1, 1, None),
                                                (4, 4, None)])
def test_a_larger_accumulation_splits_the_rows_evenly(rows, steps, more):
  assert out_of_memory.larger_accumulation(rows, steps) == more


def test_a_real_out_of_memory_error_becomes_one_line_and_others_pass():
  with pytest.raises(MemoryError) as caught:
    with out_of_memory.reported("at step 3", "Pass --x", lambda: "; nothing was saved"):
      tf.zeros([2 ** 46])  # 256 TiB
  assert str(caught.value).replace(MKL, "allocator cpu") == ("Out of memory at step 3 (OOM when allocating tensor with shape[70368744177664] and "
                               "type float on CPU:0 by allocator cpu). Pass --x; nothing was saved.")
  quota = _error("Quota exceeded")
  with pytest.raises(tf.errors.ResourceExhaustedError) as caught:
    with out_of_memory.reported("at step 3", "Pass --x"):
      raise quota
  assert caught.value is quota


def _classifier_trainer(model_dir, gradient_accumulation_steps=1, use_bfloat16=False, **run_config):
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=use_bfloat16, dropout=0.0, dropatt=0.0,
                         **run_config)
  return training.Trainer(
      training.make_strategy("one_device"),
      lambda: classifier_task.build_model(CONFIG, run_config, "classification_imdb", n_class=2),
      classifier_task.ClassifierTask("classification_imdb"), str(model_dir),
      training.TrainConfig(learning_rate=1e-4, train_steps=2, global_batch_size=2, iterations=1, save_steps=1,
                           gradient_accumulation_steps=gradient_accumulation_steps))


def test_a_step_the_device_cannot_hold_saves_nothing_and_names_the_flags(tmp_path):
  """The real Trainer and step, on a batch whose attention scores no machine holds: a MemoryError (one line, the
  step, the allocation, the flags that make the step fit), no checkpoint."""
  trainer = _classifier_trainer(tmp_path)
  features = {"input_ids": tf.zeros([2, HUGE_LEN], tf.int32), "segment_ids": tf.zeros([2, HUGE_LEN], tf.int32),
              "input_mask": tf.zeros([2, HUGE_LEN]), "label_ids": tf.constant([0, 1])}
  with pytest.raises(MemoryError) as caught:
    trainer.train(lambda ctx, start: tf.data.Dataset.from_tensors(features).repeat(), log_fn=lambda line: None)
  line = str(caught.value).replace(MKL, "allocator cpu")
  assert line.startswith("Out of memory at step 1 (OOM when allocating tensor with shape["), line
  assert line.endswith(
      "on CPU:0 by allocator cpu). The step needs more memory than the device has: pass "
      "--gradient_accumulation_steps=2 (the same updates from fewer rows at a time), --recompute_grad (each layer's "
      "activations computed again in the backward pass), --use_bfloat16 (--use_fp16 on a GPU without bfloat16) or a "
      f"smaller --max_seq_length or --train_batch_size; nothing was saved, the latest checkpoint is none (no checkpoint in {tmp_path})."), line
  assert not glob.glob(str(tmp_path / "ckpt-*"))


def test_the_flags_named_are_those_the_run_does_not_use_yet(tmp_path):
  """A step already split into one-row micro-batches, recomputed and in bfloat16 leaves the sequence and batch; a
  pretraining run (bi_data: micro-batches of forward and backward pairs) names its mems and records."""
  trainer = _classifier_trainer(tmp_path / "c", gradient_accumulation_steps=2, recompute_grad=True,
                                use_bfloat16=True)
  assert trainer._memory_fixes() == (  # pylint: disable=protected-access
      "The step needs more memory than the device has: pass a smaller --max_seq_length or --train_batch_size")
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0, mem_len=4,
                         reuse_len=2, bi_data=True)
  trainer = training.Trainer(training.make_strategy("one_device"), lambda: XLNetModel(CONFIG, run_config),
                             PretrainTask(), str(tmp_path / "p"),
                             training.TrainConfig(learning_rate=1e-4, train_steps=2, global_batch_size=8,
                                                  gradient_accumulation_steps=2))
  assert trainer._memory_fixes() == (  # pylint: disable=protected-access
      "The step needs more memory than the device has: pass --gradient_accumulation_steps=4 (the same updates from "
      "fewer rows at a time), --recompute_grad (each layer's activations computed again in the backward pass), "
      "--use_bfloat16 (--use_fp16 on a GPU without bfloat16) or a smaller --mem_len or records of a shorter --seq_len "
      "(data_utils.py)")


def test_mems_the_device_cannot_hold_name_mem_len(tmp_path):
  """`--mem_len=100000000` ended in the generic line advising smaller batches or sequences: the mems are made when
  the Trainer is, before any step, and their line names --mem_len."""
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0,
                         mem_len=2 ** 40, reuse_len=2)
  with pytest.raises(MemoryError) as caught:
    training.Trainer(training.make_strategy("one_device"), lambda: XLNetModel(CONFIG, run_config), PretrainTask(),
                     str(tmp_path), training.TrainConfig(learning_rate=1e-4, train_steps=2, global_batch_size=2))
  line = str(caught.value)
  assert line.startswith(f"Out of memory holding the mems ({CONFIG.n_layer} x [{2 ** 40}, 2, {CONFIG.d_model}] floats "
                         "a replica) (OOM when allocating tensor with shape["), line
  assert line.endswith("). Pass a smaller --mem_len."), line
