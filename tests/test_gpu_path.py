"""The GPU path, checked on any machine: every op of the training loop (pretraining and each fine-tuning task, in
float32, bfloat16 and with --jit_compile) and of each task's inference forward has a GPU kernel for its dtypes, or
one of XLA's GPU compiler inside XLA-compiled functions (tests/helpers/gpu_kernels.py). An op without one would
run on the host in a GPU run: a round trip between host and device inside the loop."""

import numpy as np
import pytest
import tensorflow as tf

from helpers.gpu_kernels import check_gpu_kernels, check_training_loop
from xlnet_tf import training
from xlnet_tf.config import RunConfig, XLNetConfig
from xlnet_tf.modeling.xlnet import XLNetModel
from xlnet_tf.tasks.classifier import evaluation as classifier_eval
from xlnet_tf.tasks.classifier import task as classifier_task
from xlnet_tf.tasks.pretrain.task import PretrainTask
from xlnet_tf.tasks.race import evaluation as race_eval
from xlnet_tf.tasks.race import task as race_task
from xlnet_tf.tasks.squad import predict as squad_predict
from xlnet_tf.tasks.squad import task as squad_task

# The Linux x86-64 wheel the README installs is built with CUDA; a CPU-only build registers no GPU kernel to check.
pytestmark = pytest.mark.skipif(not tf.test.is_built_with_cuda(),
                                reason="this TensorFlow build has no GPU kernels (not built with CUDA)")

CONFIG = XLNetConfig(n_layer=2, d_model=8, n_head=2, d_head=6, d_inner=11, ff_activation="gelu", untie_r=True,
                     n_token=32)
BSZ, SEQ, NUM_PREDICT, MEM_LEN = 4, 7, 3, 5
SCOPE = "classification_imdb"


def _features(kind, rng):
  """A batch of the task's features, with the dtypes and shapes its reader yields."""
  def ids(*shape):
    return rng.integers(0, CONFIG.n_token, shape).astype(np.int32)

  def mask(*shape):
    return (rng.random(shape) < 0.3).astype(np.float32)

  if kind == "pretrain":
    return {"input_k": ids(BSZ, SEQ), "seg_id": rng.integers(0, 2, [BSZ, SEQ]).astype(np.int32),
            "input_q": mask(BSZ, SEQ), "perm_mask": mask(BSZ, SEQ, SEQ),
            "target_mapping": np.eye(NUM_PREDICT, SEQ, dtype=np.float32)[None].repeat(BSZ, 0),
            "target": ids(BSZ, NUM_PREDICT), "target_mask": np.ones([BSZ, NUM_PREDICT], np.float32)}
  shape = [BSZ, 4, SEQ] if kind == "race" else [BSZ, SEQ]
  features = {"input_ids": ids(*shape), "segment_ids": rng.integers(0, 2, shape).astype(np.int32),
              "input_mask": mask(*shape)}
  if kind == "squad":
    return dict(features, p_mask=mask(BSZ, SEQ), cls_index=np.full([BSZ], SEQ - 1, np.int32),
                start_positions=ids(BSZ) % SEQ, end_positions=ids(BSZ) % SEQ,
                is_impossible=mask(BSZ))
  return dict(features, label_ids=ids(BSZ) % (4 if kind == "race" else 2))


def _model_fn(kind, run_config):
  if kind == "pretrain":
    return lambda: XLNetModel(CONFIG, run_config)
  if kind == "classifier":
    return lambda: classifier_task.build_model(CONFIG, run_config, SCOPE, n_class=2)
  return lambda: {"squad": squad_task, "race": race_task}[kind].build_model(CONFIG, run_config)


def _run_config(is_training, use_bfloat16, kind, use_fp16=False):
  mems = dict(mem_len=MEM_LEN, reuse_len=4) if kind == "pretrain" else {}
  return RunConfig(is_training=is_training, use_tpu=False, use_bfloat16=use_bfloat16, dropout=0.1, dropatt=0.1,
                   use_fp16=use_fp16, **mems)


@pytest.fixture
def precision_policy():
  """Sets the Keras policy a CLI sets for --use_bfloat16 (training.start); restores float32 afterwards."""
  yield lambda use_bfloat16: tf.keras.mixed_precision.set_global_policy(
      "mixed_bfloat16" if use_bfloat16 else "float32")
  tf.keras.mixed_precision.set_global_policy("float32")


def _training_loop_kernels(tmp_path, kind, run_config, jit_compile):
  """`check_gpu_kernels` of the loop `Trainer.train` runs (one step) for a `kind` model built with `run_config`."""
  task = {"pretrain": PretrainTask, "classifier": lambda: classifier_task.ClassifierTask(SCOPE),
          "squad": squad_task.SquadTask, "race": race_task.RaceTask}[kind]()
  trainer = training.Trainer(
      training.make_strategy("one_device"), _model_fn(kind, run_config), task, str(tmp_path),
      training.TrainConfig(learning_rate=1e-4, train_steps=10, global_batch_size=BSZ, jit_compile=jit_compile))
  return check_training_loop(trainer, _features(kind, np.random.default_rng(0)))


SLOW = pytest.mark.slow  # the default suite's 15 minutes: by default pretraining (float32 and float16)


@pytest.mark.parametrize("kind, use_bfloat16, jit_compile", [
    ("pretrain", False, False), pytest.param("pretrain", True, False, marks=SLOW),
    pytest.param("pretrain", False, True, marks=SLOW), pytest.param("pretrain", True, True, marks=SLOW),
    pytest.param("classifier", False, False, marks=SLOW), pytest.param("squad", False, False, marks=SLOW),
    pytest.param("squad", True, False, marks=SLOW), pytest.param("race", False, True, marks=SLOW)])
def test_every_op_of_the_training_loop_runs_on_a_gpu(tmp_path, precision_policy, kind, use_bfloat16, jit_compile):
  precision_policy(use_bfloat16)
  missing, checked = _training_loop_kernels(tmp_path, kind, _run_config(True, use_bfloat16, kind), jit_compile)
  assert missing == []
  # The check reached into the loop's step: the attention's products, XLA-compiled with --jit_compile; Adam's update.
  assert ("BatchMatMulV2", jit_compile) in checked and ("ResourceApplyAdam", False) in checked


@pytest.mark.parametrize("kind, jit_compile", [("pretrain", False), pytest.param("pretrain", True, marks=SLOW),
                                               pytest.param("squad", False, marks=SLOW)])
def test_every_op_of_the_float16_training_loop_runs_on_a_gpu(tmp_path, kind, jit_compile):
  """--use_fp16: the loss-scaled step (the gradients, the replicas' finiteness, the update or the skip in a
  `tf.cond`, the scale's update) has GPU kernels too."""
  missing, checked = _training_loop_kernels(tmp_path, kind, _run_config(True, False, kind, use_fp16=True),
                                            jit_compile)
  assert missing == []
  assert ("ResourceApplyAdam", False) in checked and ("IsFinite", False) in checked


@pytest.mark.parametrize("kind, use_bfloat16, jit_compile", [
    ("classifier", False, False), ("classifier", True, True), pytest.param("squad", False, False, marks=SLOW),
    ("squad", True, True), pytest.param("race", False, False, marks=SLOW), ("race", False, True)])
def test_every_op_of_the_inference_forward_runs_on_a_gpu(precision_policy, kind, use_bfloat16, jit_compile):
  precision_policy(use_bfloat16)
  model = _model_fn(kind, _run_config(False, use_bfloat16, kind))()
  inference = {"classifier": lambda: classifier_eval.Inference(model, SCOPE, jit_compile=jit_compile),
               "squad": lambda: squad_predict.Inference(model, jit_compile=jit_compile),
               "race": lambda: race_eval.Inference(model, jit_compile=jit_compile)}[kind]()
  features = {k: tf.constant(v) for k, v in _features(kind, np.random.default_rng(1)).items()}
  step = inference._step  # pylint: disable=protected-access  # the function evaluation and prediction call
  missing, checked = check_gpu_kernels(step.get_concrete_function(features))
  assert missing == []
  assert ("BatchMatMulV2", jit_compile) in checked


def test_an_op_without_a_gpu_kernel_is_found():
  """The check itself: host-only ops (string formatting, a Python function) are reported, also inside a nested
  XLA-compiled function (where XLA has no kernel for them either)."""
  inner = tf.function(lambda x: tf.strings.to_number(tf.strings.as_string(x)), jit_compile=True)
  outer = tf.function(lambda x: inner(x) + tf.numpy_function(lambda a: a, [x], tf.float32) + tf.nn.softmax(x))
  found, checked = check_gpu_kernels(outer.get_concrete_function(tf.ones([2])))
  assert ("Softmax", False) in checked
  assert [f.split(" ")[0] for f in found] == ["AsString", "PyFunc", "StringToNumber"]
  assert "(XLA)" in found[0] and "(XLA)" not in found[1]
