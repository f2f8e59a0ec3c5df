"""Runner D of the side-by-side performance harness (`../shared/perf`), timing xlnet-tf's real steps.

`bench/compare.sh` runs the harness with this file in place of the harness's own `run_project.py`. What differs
from that runner (which times `XLNetModel` with a head and an optimizer of its own):

- pretrain_step is the step `run_pretrain.py` runs: a `training.Trainer` on a one-device strategy with
  `PretrainTask` (the model's own tied LM head `lm_loss/bias`, float32 loss, masked mean over the targets), the
  original optimizer (`optimization.create_optimizer`: TF1 Adam, epsilon 1e-8, here a constant lr 1e-4 as the
  workload says: `poly` decay with `min_lr_ratio=1`), the original GPU path's clipping (`indexed_slices`: global
  norm 1.0 over the gathered embedding rows), the mems as the trainer's per-replica variables, updated in the
  step. One timed step = one call of the trainer's `tf.function` loop with `num_steps=1`, fed by a `tf.data`
  dataset that repeats the workload's batch (already in memory, batch-major as the records reader gives it).
  `keep_freed_memory()` is called first, as every CLI does, and again after the iterator is built, as
  `Trainer.train` does (building it resets glibc's mmap threshold; `keep_freed_memory_after_input`).
- finetune_fwd is the same model call as the harness's runner (content stream, eval mode, no head).
- Both first make the start-up settings of `training.start` that apply to one process: `keep_freed_memory()`,
  `prefer_wide_xla_vectors()` (512-bit vectors in XLA's CPU code on CPUs with AVX-512 and native bfloat16) and
  `set_float32_matmul_precision()` (strict float32 on GPUs unless `--use_tf32`).

Inputs are the harness's (`common.make_pretrain_batch` / `make_finetune_batch`), so every runner computes on the
same numbers. Flags: the harness's, plus `--jit_compile` and `--mixed_bf16` as the harness's own runner,
`--use_tf32` as the CLIs', and `--no_nested_xla` (`ops.set_nested_xla(False)`: the element-wise chains as
TensorFlow's kernels instead of nested XLA programs, to measure what their launches cost on a GPU).
"""

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HARNESS = os.environ.get("PERF_HARNESS_DIR", os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HARNESS)
import common  # pylint: disable=wrong-import-position  # noqa: E402  (the harness's shared module)

IMPL = "project"
# The batch-major feature names of the pretraining reader (xlnet_tf.tasks.pretrain.input) for the harness's keys.
PRETRAIN_FEATURES = {"inp_k": "input_k", "seg_id": "seg_id", "inp_q": "input_q", "perm_mask": "perm_mask",
                     "target_mapping": "target_mapping", "target": "target", "target_mask": "target_mask"}


def build_step(cfg, jit_compile=False, mixed_bf16=False, project_dir=None, use_tf32=False, nested_xla=True):
  """The workload's step on xlnet-tf (see the module docstring).

  Returns:
    (step: () -> None, runs one step and returns when it is done; the model; losses: the list `step` appends the
    loss of each pretraining step to).
  """
  if project_dir:
    sys.path.insert(0, project_dir)
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import xlnet_tf  # pylint: disable=import-outside-toplevel
  from xlnet_tf import training  # pylint: disable=import-outside-toplevel
  from xlnet_tf.tasks.pretrain.task import PretrainTask  # pylint: disable=import-outside-toplevel
  from xlnet_tf.modeling import ops  # pylint: disable=import-outside-toplevel

  tf.config.threading.set_intra_op_parallelism_threads(cfg["threads"])
  tf.config.threading.set_inter_op_parallelism_threads(cfg["inter_threads"])
  training.keep_freed_memory()
  training.prefer_wide_xla_vectors()  # as every CLI (runtime.start), before anything is compiled
  training.set_float32_matmul_precision(use_tf32, tf.distribute.get_strategy())  # as every CLI: --use_tf32
  ops.set_nested_xla(nested_xla)  # --no_nested_xla: the element-wise chains as TensorFlow's kernels
  # A GPU runs the kernels after the call has returned: a step waits for them, so that it is timed until it is done.
  wait_for_device = tf.test.experimental.sync_devices if tf.config.list_logical_devices("GPU") else lambda: None
  tf.keras.utils.set_random_seed(cfg["seed"])
  xlnet_config = xlnet_tf.XLNetConfig(
      n_layer=cfg["n_layer"], d_model=cfg["d_model"], n_head=cfg["n_head"], d_head=cfg["d_head"],
      d_inner=cfg["d_inner"], ff_activation=cfg["ff_activation"], untie_r=cfg["untie_r"], n_token=cfg["n_token"])
  run_config = xlnet_tf.RunConfig(
      is_training=cfg["is_training"], use_tpu=False, use_bfloat16=mixed_bf16, dropout=cfg["dropout"],
      dropatt=cfg["dropatt"], mem_len=cfg["mem_len"] or None, reuse_len=cfg["reuse_len"] or None,
      bi_data=cfg["bi_data"], clamp_len=cfg["clamp_len"], same_length=cfg["same_length"])
  losses = []
  if cfg["workload"] == "pretrain_step":
    b = common.to_batch_major(common.make_pretrain_batch(cfg))
    features = {ours: tf.constant(b[theirs]) for theirs, ours in PRETRAIN_FEATURES.items()}
    o = cfg["optimizer"]
    strategy = training.make_strategy("one_device")
    trainer = training.Trainer(
        strategy, lambda: xlnet_tf.XLNetModel(xlnet_config, run_config), PretrainTask(),
        tempfile.mkdtemp(prefix="xlnet-bench-"),
        training.TrainConfig(learning_rate=o["learning_rate"], train_steps=10 ** 9, min_lr_ratio=1.0,
                             adam_epsilon=o["epsilon"], clip=o["clip_global_norm"], global_batch_size=cfg["bsz"],
                             iterations=1, jit_compile=jit_compile, tokens_per_example=cfg["seq_len"]))
    dataset = tf.data.Dataset.from_tensors(features).repeat()
    iterator = iter(strategy.distribute_datasets_from_function(lambda _: dataset))
    training.keep_freed_memory_after_input()  # as Trainer.train: the iterator reset glibc's mmap threshold
    loop = trainer._build_loop()  # pylint: disable=protected-access  # the loop Trainer.train runs
    one, at_loop_start = tf.constant(1), tf.constant(True)  # --iterations=1: every step starts a loop

    def step():
      loss, _, _, done = loop(iterator, one, at_loop_start)
      assert int(done) == 1
      losses.append(float(loss))
      wait_for_device()

    return step, trainer.model, losses

  model = xlnet_tf.XLNetModel(xlnet_config, run_config)
  b = common.make_finetune_batch(cfg)
  ids, seg, mask = (tf.constant(b[k]) for k in ("inp", "seg_id", "input_mask"))

  @tf.function(jit_compile=jit_compile or None)
  def forward(ids, seg, mask):
    output, _ = model(ids, seg_ids=seg, input_mask=mask, training=False)
    return output

  def step():
    forward(ids, seg, mask).shape  # pylint: disable=expression-not-assigned  # on a CPU: returns when it is done
    wait_for_device()

  return step, model, losses


def main():
  pre_p = argparse.ArgumentParser(add_help=False)
  pre_p.add_argument("--project-dir", default=os.environ.get("PERF_PROJECT_DIR", os.getcwd()))
  pre_p.add_argument("--jit_compile", action="store_true")
  pre_p.add_argument("--mixed_bf16", action="store_true")
  pre_p.add_argument("--use_tf32", action="store_true")
  pre_p.add_argument("--no_nested_xla", action="store_true")
  own, rest = pre_p.parse_known_args()
  impl = IMPL + ("+xla" if own.jit_compile else "") + ("+bf16" if own.mixed_bf16 else "") + (
      "+tf32" if own.use_tf32 else "") + ("+no_nested_xla" if own.no_nested_xla else "")
  cfg = common.parse_args(impl, rest)
  try:
    step, model, losses = build_step(cfg, own.jit_compile, own.mixed_bf16, own.project_dir, own.use_tf32,
                                     not own.no_nested_xla)
  except ImportError as e:
    common.unavailable(impl, cfg, f"xlnet_tf is not importable from {own.project_dir}: {e!r}")
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import xlnet_tf  # pylint: disable=import-outside-toplevel

  times, warm_s = common.time_steps(step, cfg)
  if losses:
    print("losses: %s" % ["%.4f" % loss for loss in losses], file=sys.stderr)
    if not all(loss == loss and abs(loss) < 1e6 for loss in losses):
      raise SystemExit(f"non-finite loss: {losses}")
  common.emit(impl, cfg, times, {
      "framework": "tensorflow %s, keras %s, xlnet_tf from %s (%s%s)" % (
          tf.__version__, tf.keras.__version__, os.path.dirname(xlnet_tf.__file__),
          "Trainer loop" if losses else "tf.function", ", jit_compile" if own.jit_compile else ""),
      "n_params": sum(int(v.shape.num_elements()) for v in model.trainable_variables),
      "warmup_s": round(warm_s, 3), "first_loss": losses[0] if losses else None,
      "last_loss": losses[-1] if losses else None})


if __name__ == "__main__":
  main()
