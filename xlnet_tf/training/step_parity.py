"""Replays the original's recorded training steps through `Trainer` and compares (training-step parity).

A golden file (`*.npz`, the format of `shared/goldens/train_step/README.md`) holds what the ORIGINAL
`train_gpu.py` / `run_classifier.py` did for K optimizer steps from a TF1 checkpoint: the inputs each step (and
tower) consumed, the loss, learning rate and pre-clip `gnorm` of every step, the mems, the first step's gradients
and, after the last step, every variable, Adam slot, beta power and the global step. `replay` builds the same
model, loads the checkpoint by its TF1 names, feeds the recorded inputs through `Trainer.train` (the code path of
`run_pretrain.py` / `run_classifier.py`, one step per call) and collects the same quantities; `compare` measures the
differences and judges them against `TOLERANCES`.

Path: a `*_gpu` file is checked with clip_mode "indexed_slices" (the original's GPU/CPU norm), a `*_tpupath` file
(dense embedding gradient) with "dense". Towers become replicas of a MirroredStrategy over as many logical CPUs
(the caller must have split the CPU before TensorFlow started; see scripts/check_train_step.py).
"""

import json
import os
import tempfile

import numpy as np
import tensorflow as tf

from xlnet_tf import checkpoint as checkpoint_lib
from xlnet_tf.config import RunConfig, XLNetConfig
from xlnet_tf.modeling.transformer_xl import XLNetModel
from xlnet_tf.tasks.classifier import task as classifier_task
from xlnet_tf.tasks.pretrain import task as pretrain_task
from xlnet_tf.training import optimization
from xlnet_tf.training.trainer import Trainer, numpy_mems


# Largest allowed difference, relative to the golden array's largest magnitude (at least 1e-12), per quantity;
# "final" is absolute (variables are O(1)). Measured worst cases are in docs/training_step.md.
TOLERANCES = {"loss": 5e-6, "learning_rate": 1e-6, "gnorm": 5e-6, "new_mems": 5e-6, "grad0": 2e-5, "final": 1e-4,
              "slots": 1e-4, "beta_power": 1e-6, "global_step": 0}


def load(path):
  """The golden arrays of one file, and its meta_json as a dict."""
  with np.load(path) as data:
    arrays = {k: data[k] for k in data.files}
  return arrays, json.loads(str(arrays.pop("meta_json")))


def _flags(meta):
  return meta["train_gpu_flags"] if meta["mode"] == "pretrain" else meta["run_classifier_flags"]


def _pretrain_batches(g):
  """[K][T] dicts of batch-major features, as the pretraining input pipeline yields them."""
  k_steps, towers = g["inp_k"].shape[:2]
  out = []
  for k in range(k_steps):
    step = []
    for t in range(towers):
      step.append({"input_k": g["inp_k"][k, t].T, "seg_id": g["seg_id"][k, t].T, "input_q": g["inp_q"][k, t].T,
                   "perm_mask": np.transpose(g["perm_mask"][k, t], [2, 0, 1]),
                   "target_mapping": np.transpose(g["target_mapping"][k, t], [2, 0, 1]),
                   "target": g["target"][k, t].T, "target_mask": g["target_mask"][k, t].T})
    out.append(step)
  return out


def _finetune_batches(g):
  """[K][1] dicts of batch-major classifier features."""
  return [[{"input_ids": g["input_ids"][k].T, "segment_ids": g["seg_ids"][k].T, "input_mask": g["input_mask"][k].T,
            "label_ids": g["label_ids"][k]}] for k in range(g["input_ids"].shape[0])]


_STRATEGIES = {}  # one per tower count and process: two MirroredStrategies in one process mix up their collectives


def _strategy(towers):
  if towers not in _STRATEGIES:
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    if len(cpus) < towers:
      raise RuntimeError(f"A {towers}-tower golden needs {towers} logical CPUs; found {len(cpus)}. Split the CPU "
                         "with tf.config.set_logical_device_configuration before TensorFlow starts.")
    _STRATEGIES[towers] = (tf.distribute.OneDeviceStrategy("/cpu:0") if towers == 1 else
                           tf.distribute.MirroredStrategy(cpus[:towers]))
  return _STRATEGIES[towers]


def _dataset_fn(batches):
  """`dataset_fn(input_context, start_step)`: step k's per-replica batches, replica by replica, from start_step."""
  flat = [replica for step in batches for replica in step]
  towers = len(batches[0])

  def dataset_fn(input_context, start_step):
    del input_context  # one input pipeline: it yields replica 0's batch, then replica 1's, ...
    rows = flat[start_step * towers:]
    return tf.data.Dataset.from_tensor_slices({k: np.stack([r[k] for r in rows]) for k in rows[0]})
  return dataset_fn


def build_trainer(golden_dir, meta, towers, model_dir, clip_mode, loss_weighting="replica_mean"):
  """A Trainer set up as the original run of `meta` (flags, checkpoint), weights loaded by TF1 name."""
  f = _flags(meta)
  config = XLNetConfig(json_path=os.path.join(golden_dir, "ckpt", "xlnet_config.json"))
  pretrain = meta["mode"] == "pretrain"
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=False, dropout=f["dropout"],
                         dropatt=f["dropatt"], clamp_len=f["clamp_len"],
                         mem_len=f["mem_len"] if pretrain else None, reuse_len=f["reuse_len"] if pretrain else None,
                         bi_data=f["bi_data"] if pretrain else False,
                         same_length=f["same_length"] if pretrain else False)
  if pretrain:
    task = pretrain_task.PretrainTask()
    model_fn = lambda: XLNetModel(config, run_config)
    lr_layer_decay_rate = meta["get_train_op_overrides"].get("lr_layer_decay_rate", 1.0)
  else:
    scope = classifier_task.head_scope(f["task_name"], f.get("cls_scope"), f["is_regression"])
    task = classifier_task.ClassifierTask(scope)
    model_fn = lambda: classifier_task.build_model(config, run_config, scope, n_class=meta.get("n_class"),
                                                   summary_type=f["summary_type"],
                                                   use_summ_proj=f["use_summ_proj"])
    lr_layer_decay_rate = f["lr_layer_decay_rate"]
  optimizer_args = dict(learning_rate=f["learning_rate"], train_steps=f["train_steps"],
                        warmup_steps=f["warmup_steps"], decay_method=f["decay_method"],
                        min_lr_ratio=f["min_lr_ratio"], weight_decay=f["weight_decay"],
                        adam_epsilon=f["adam_epsilon"])
  trainer = Trainer(_strategy(towers), model_fn, task, model_dir, optimizer_args, clip=f["clip"],
                    lr_layer_decay_rate=lr_layer_decay_rate, global_batch_size=f["train_batch_size"],
                    mem_len=run_config.mem_len, iterations=1, clip_mode=clip_mode, loss_weighting=loss_weighting)
  report = trainer.load_weights(os.path.join(golden_dir, "ckpt", "xlnet_model.ckpt"))
  if report["kept_initial"]:
    raise ValueError(f"The golden checkpoint lacks {report['kept_initial']}.")
  return trainer


def _first_gradients(trainer, batch):
  """The first step's gradients, summed over replicas (each replica's share), by TF1 name, as numpy."""
  variables = trainer.model.trainable_variables
  names = {id(v): name for name, v in checkpoint_lib.original_variable_map(trainer.model).items()}
  data = trainer.strategy.distribute_datasets_from_function(lambda ctx: _dataset_fn([batch])(ctx, 0))

  def replica(features):
    mems = [tf.zeros_like(v) for v in trainer.mem_vars] if trainer.mem_vars else None
    _, weight_sum, grads, _, _ = trainer._forward_backward(features, mems)  # pylint: disable=protected-access
    weight = trainer._loss_weight(weight_sum)  # pylint: disable=protected-access
    grads, _ = trainer._share_gradients(grads, None, weight)  # pylint: disable=protected-access
    return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g) for v, g in zip(variables, grads)]

  per_replica = trainer.strategy.run(tf.function(replica), args=(next(iter(data)),))
  summed = [trainer.strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in per_replica]
  return {names[id(v)]: g.numpy() for v, g in zip(variables, summed)}


def _final_state(trainer):
  """Every variable, slot, beta power and the global step, by the original's TF1 names."""
  opt = trainer.optimizer
  variables = checkpoint_lib.original_variable_map(trainer.model)
  out = {name: v.numpy() for name, v in variables.items()}
  out.update({name: v.numpy() for name, v in optimization.original_slot_map(opt, variables).items()})
  step = int(opt.iterations.numpy())
  out["global_step"] = np.int64(step)
  if not isinstance(opt, optimization.AdamWeightDecay):  # TF1 keeps beta powers: beta^(t+1) after t steps
    out["beta1_power"] = np.float32(opt.beta_1 ** (step + 1))
    out["beta2_power"] = np.float32(opt.beta_2 ** (step + 1))
  return out


def replay(path, golden_dir=None, loss_weighting="replica_mean"):
  """Runs the golden's steps through a Trainer (--loss_weighting: the original's by default). Returns (golden
  arrays, meta, ours: dict of the same keys)."""
  golden_dir = golden_dir or os.path.dirname(path)
  g, meta = load(path)
  clip_mode = "dense" if meta["use_tpu_embedding_and_loss_path"] else "indexed_slices"
  batches = _pretrain_batches(g) if meta["mode"] == "pretrain" else _finetune_batches(g)
  towers = len(batches[0])
  ours = {"loss": [], "learning_rate": [], "gnorm": [], "global_step": [], "new_mems": []}
  with tempfile.TemporaryDirectory(prefix="xlnet-step-parity-") as model_dir:
    trainer = build_trainer(golden_dir, meta, towers, model_dir, clip_mode, loss_weighting)
    ours["grad0"] = _first_gradients(trainer, batches[0])
    dataset_fn = _dataset_fn(batches)
    for k in range(len(batches)):
      result = trainer.train(dataset_fn, train_steps=k + 1, log_fn=lambda line: None)
      for key in ("loss", "learning_rate", "gnorm"):
        ours[key].append(result["lr" if key == "learning_rate" else key])
      ours["global_step"].append(trainer.step)
      if trainer.mem_vars:
        mems = numpy_mems(trainer)  # [N, M, global_b, D] -> [T, N, M, b, D]
        ours["new_mems"].append(np.stack(np.split(mems, towers, axis=2)))
    ours["final"] = _final_state(trainer)
  return g, meta, ours


def _rel(ours, golden):
  ours, golden = np.asarray(ours, np.float64), np.asarray(golden, np.float64)
  return float(np.max(np.abs(ours - golden))) / max(float(np.max(np.abs(golden))), 1e-12)


def compare(g, meta, ours):
  """Per quantity: {name: (worst relative difference, tolerance, ok)}; see TOLERANCES."""
  rows = {}

  def check(name, diff, tol):
    rows[name] = (diff, tol, diff <= tol)

  for key in ("loss", "learning_rate", "gnorm", "global_step"):
    check(key, _rel(ours[key], g[key]), TOLERANCES[key])
  if ours["new_mems"]:
    check("new_mems", _rel(np.stack(ours["new_mems"]), g["new_mems"]), TOLERANCES["new_mems"])
  grad_names = [k[len("grad0/"):] for k in g if k.startswith("grad0/")]
  if grad_names:
    check("grad0", max(_rel(ours["grad0"][n], g[f"grad0/{n}"]) for n in grad_names), TOLERANCES["grad0"])
  finals = {k[len("final/"):]: v for k, v in g.items() if k.startswith("final/")}
  missing = sorted(set(finals) - set(ours["final"]))
  if missing:
    raise ValueError(f"The golden has final values xlnet-tf does not hold: {missing}.")
  slot_suffixes = ("/Adam", "/Adam_1", "/adam_m", "/adam_v")
  variables = [n for n in finals if not n.endswith(slot_suffixes) and n not in
               ("global_step", "beta1_power", "beta2_power")]
  check("final variables", max(float(np.max(np.abs(ours["final"][n] - finals[n]))) for n in variables),
        TOLERANCES["final"])
  slots = [n for n in finals if n.endswith(slot_suffixes)]
  check("final slots", max(_rel(ours["final"][n], finals[n]) for n in slots), TOLERANCES["slots"])
  for n in ("beta1_power", "beta2_power"):
    if n in finals:
      check(f"final {n}", _rel(ours["final"][n], finals[n]), TOLERANCES["beta_power"])
  check("final global_step", float(ours["final"]["global_step"] != finals["global_step"]),
        TOLERANCES["global_step"])
  return rows
