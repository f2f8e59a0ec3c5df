"""Writes training-step goldens with the ORIGINAL XLNet code, for configurations that shared/goldens/train_step lacks.

  python tests/testdata/generate_train_step_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/train_step_tied

Runs the original `function_builder.get_loss`, `gpu_utils`, `model_utils.get_train_op` and `data_utils.get_input_fn`
(github.com/zihangdai/xlnet at bbaa3a6, a checkout passed as --xlnet_src and never copied here) in TF1 graph mode under
the installed TensorFlow, with the stand-ins shared/goldens/README.md lists (contrib `layer_norm`, `tf.layers.dense`
and `dropout`) and TF 1.13's aggregation of a dense and an IndexedSlices gradient (concatenated rows, not summed), as
`train_gpu.train()` builds its graph for one tower. The files have the layout of shared/goldens/train_step/README.md,
so `scripts/check_train_step.py --golden_dir=OUT_DIR` replays them. A long-horizon file (`*_long_*`) holds its inputs
once per distinct batch (`batch_of_step` says which batch each step ran). Every file also holds, as `alt/*` (loss,
gnorm, mems, every final value), the same run of the original with oneDNN switched, i.e. another summation order
in every matmul: the original's own float32 drift, which a port's differences are judged against. A long file also
holds, as `pert1/*` .. `pertK/*` (the same keys; --perturbed_reruns, K = 4 by default), the run from the checkpoint
moved by one ulp in a random half of every float variable's entries (seed i, `perturbed_checkpoint`): over 300 steps
such a start can drift up to 30x further than the alt rerun, and the judge takes the largest of all these drifts.

Written (see `GOLDENS` for the settings):
  ckpt/                      a TF1 checkpoint from the original graph: untie_r false, relu, d_head 6 (random values)
  pretrain_adamwd_{gpu,tpupath}.npz, pretrain_adam_gpu.npz           3 steps, clamp_len 6, mem_len 24, batch 5
  pretrain_{adam,adamwd}_long_gpu.npz                                300 steps cycling 20 batches
About three minutes on two cores (the two long files with all their reruns: 100 s). Needs only the project's .venv
(TensorFlow, numpy, sentencepiece).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIG = {"n_layer": 2, "d_model": 8, "n_head": 2, "d_head": 6, "d_inner": 11, "ff_activation": "relu",
          "untie_r": False, "n_token": 1000}
DATA = {"bsz": 5, "seq_len": 32, "reuse_len": 16, "num_predict": 6, "perm_size": 8, "mask_alpha": 6, "mask_beta": 1,
        "bi_data": False}
BASE_FLAGS = dict(use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0, init="normal", init_std=0.02,
                  init_range=0.1, mem_len=24, reuse_len=DATA["reuse_len"], bi_data=False, clamp_len=6,
                  same_length=False, num_predict=DATA["num_predict"], learning_rate=1e-3, warmup_steps=0,
                  decay_method="poly", train_steps=5, min_lr_ratio=0.001, weight_decay=0.0, adam_epsilon=1e-8,
                  clip=1.0, num_core_per_host=1, num_hosts=1, train_batch_size=DATA["bsz"], seq_len=DATA["seq_len"],
                  perm_size=DATA["perm_size"], mask_alpha=6, mask_beta=1, uncased=False, iterations=1)
GOLDENS = {
    "pretrain_adamwd_gpu": dict(steps=3, flags=dict(weight_decay=0.01)),
    "pretrain_adamwd_tpupath": dict(steps=3, flags=dict(weight_decay=0.01), tpu_path=True),
    "pretrain_adam_gpu": dict(steps=3, flags={}),
    "pretrain_adam_long_gpu": dict(steps=300, batches=20, flags=dict(train_steps=300, warmup_steps=30)),
    "pretrain_adamwd_long_gpu": dict(steps=300, batches=20, flags=dict(train_steps=300, warmup_steps=30,
                                                                        weight_decay=0.01)),
}


def tf1_for_the_original():
  """`tensorflow` as the original imports it: tf.compat.v1 in graph mode plus the stand-ins for what TF 2 removed."""
  import tensorflow as tf2  # pylint: disable=import-outside-toplevel
  from tensorflow.python.eager import backprop_util  # pylint: disable=import-outside-toplevel
  from tensorflow.python.ops import math_ops  # pylint: disable=import-outside-toplevel
  v1 = tf2.compat.v1
  v1.disable_v2_behavior()

  def aggregate_as_tf_1_13(grads):
    # TF 1.13 joined a dense gradient and IndexedSlices as rows (TF 2 sums them densely first).
    grads = [g for g in grads if g is not None]
    if len(grads) == 1:
      return grads[0]
    grads = [backprop_util.FlattenNestedIndexedSlices(x) for x in math_ops._as_indexed_slices_list(grads)]  # pylint: disable=protected-access
    return tf2.IndexedSlices(v1.concat([x.values for x in grads], 0), v1.concat([x.indices for x in grads], 0),
                             grads[0].dense_shape)
  backprop_util.AggregateIndexedSlicesGradients = aggregate_as_tf_1_13

  def layer_norm(inputs, begin_norm_axis=-1, scope=None, **_):
    assert begin_norm_axis == -1
    with v1.variable_scope(scope, "LayerNorm"):
      shape = inputs.shape[-1:]
      beta = v1.get_variable("beta", shape, initializer=v1.zeros_initializer())
      gamma = v1.get_variable("gamma", shape, initializer=v1.ones_initializer())
      mean, variance = v1.nn.moments(inputs, [inputs.shape.ndims - 1], keep_dims=True)
      return v1.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma, variance_epsilon=1e-12)

  def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None, name=None, reuse=None, **_):
    with v1.variable_scope(name, "dense", reuse=reuse):
      kernel = v1.get_variable("kernel", [inputs.shape[-1], units], initializer=kernel_initializer)
      rank = inputs.shape.ndims
      out = v1.tensordot(inputs, kernel, [[rank - 1], [0]]) if rank > 2 else v1.matmul(inputs, kernel)
      if use_bias:
        out = v1.nn.bias_add(out, v1.get_variable("bias", [units], initializer=v1.zeros_initializer()))
      return activation(out) if activation is not None else out

  def dropout(inputs, rate=0.5, noise_shape=None, training=False, **_):
    if not training or rate == 0:
      return inputs
    return v1.nn.dropout(inputs, rate=rate, noise_shape=noise_shape)

  tf = types.ModuleType("tensorflow")
  tf.__dict__.update({k: getattr(v1, k) for k in dir(v1) if not k.startswith("__")})
  tf.contrib = types.SimpleNamespace(layers=types.SimpleNamespace(layer_norm=layer_norm),
                                     framework=types.SimpleNamespace(list_variables=tf2.train.list_variables,
                                                                     load_checkpoint=tf2.train.load_checkpoint))
  tf.layers = types.SimpleNamespace(dense=dense, dropout=dropout)
  return tf


def import_original(xlnet_src):
  tf = tf1_for_the_original()
  sys.modules["tensorflow"] = tf
  sys.path.insert(0, xlnet_src)
  import data_utils, function_builder, model_utils  # pylint: disable=import-outside-toplevel,multiple-imports
  return tf, data_utils, function_builder, model_utils


def flags_for(golden, model_dir, init_checkpoint):
  f = dict(CONFIG, **BASE_FLAGS)  # CONFIG read now: a caller may have changed it after import
  f.update(golden["flags"], model_dir=model_dir, init_checkpoint=init_checkpoint)
  return types.SimpleNamespace(**f)


FEATURES = ("input_k", "seg_id", "input_q", "perm_mask", "target_mapping", "target", "target_mask")


def feature_placeholders(tf):
  b, l, p = DATA["bsz"], DATA["seq_len"], DATA["num_predict"]
  shapes = {"input_k": ([b, l], tf.int32), "seg_id": ([b, l], tf.int32), "input_q": ([b, l], tf.float32),
            "perm_mask": ([b, l, l], tf.float32), "target_mapping": ([b, p, l], tf.float32),
            "target": ([b, p], tf.int32), "target_mask": ([b, p], tf.float32)}
  return {k: tf.placeholder(dtype, shape, name=k) for k, (shape, dtype) in shapes.items()}


def read_batches(tf, data_utils, records_dir, count):
  """The first `count` batches of the original input pipeline over `records_dir` (batch-major numpy dicts)."""
  tf.reset_default_graph()
  tf.set_random_seed(11)
  input_fn, _ = data_utils.get_input_fn(
      tfrecord_dir=records_dir, split="train", bsz_per_host=DATA["bsz"], seq_len=DATA["seq_len"],
      reuse_len=DATA["reuse_len"], bi_data=False, num_hosts=1, num_core_per_host=1, perm_size=DATA["perm_size"],
      mask_alpha=DATA["mask_alpha"], mask_beta=DATA["mask_beta"], uncased=False, num_passes=1,
      use_bfloat16=False, num_predict=DATA["num_predict"])
  example = tf.data.make_one_shot_iterator(input_fn({"batch_size": DATA["bsz"]})).get_next()
  with tf.Session(config=session_config(tf)) as sess:
    return [{k: v for k, v in sess.run(example).items() if k in FEATURES} for _ in range(count)]


def session_config(tf):
  return tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def make_checkpoint(tf, function_builder, out_dir):
  """The original pretraining graph's variables, std 0.5 (LayerNorm gamma 1 +- 0.2), saved with global_step 0."""
  tf.reset_default_graph()
  with tempfile.TemporaryDirectory() as model_dir:
    flags = flags_for({"flags": {}}, model_dir, None)
    mems = {"mems": [tf.placeholder(tf.float32, [flags.mem_len, DATA["bsz"], CONFIG["d_model"]])
                     for _ in range(CONFIG["n_layer"])]}
    function_builder.get_loss(flags, feature_placeholders(tf), None, mems, True)
  tf.train.get_or_create_global_step()
  rng = np.random.RandomState(37)
  assigns = []
  for v in tf.trainable_variables():
    shape = v.shape.as_list()
    value = 1 + 0.2 * rng.randn(*shape) if v.name.endswith("gamma:0") else 0.5 * rng.randn(*shape)
    assigns.append(v.assign(value.astype(np.float32)))
  os.makedirs(os.path.join(out_dir, "ckpt"), exist_ok=True)
  path = os.path.join(out_dir, "ckpt", "xlnet_model.ckpt")
  with tf.Session(config=session_config(tf)) as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(assigns)
    tf.train.Saver().save(sess, path, write_meta_graph=False)
  with open(os.path.join(out_dir, "ckpt", "xlnet_config.json"), "w") as f:
    json.dump(CONFIG, f, indent=4, sort_keys=True)
  info = [{"name": v.name[:-2], "shape": v.shape.as_list(), "dtype": v.dtype.base_dtype.name}
          for v in tf.global_variables()]
  with open(os.path.join(out_dir, "ckpt", "oracle_ckpt_info.json"), "w") as f:
    json.dump({"config": CONFIG, "variables": info, "seed": 37, "init_std": 0.5, "ln_std": 0.2}, f, indent=1)
  return path


PERTURBED_RERUNS = 4  # how many 1-ulp-perturbed reruns a long golden holds (`pert{i}/*`, seeds 1..K) by default


def perturbed_checkpoint(tf, src_dir, dst_dir, seed):
  """src_dir's xlnet_model.ckpt (and xlnet_config.json) written to dst_dir with one ulp added or taken (at random) on
  a random half of every float32 variable's entries (numpy RandomState(seed), variables in name order, per variable
  first the half, then the direction): a start the original's own rounding could have reached. Returns the prefix."""
  reader = tf.train.load_checkpoint(os.path.join(src_dir, "xlnet_model.ckpt"))
  rng = np.random.RandomState(seed)
  values = {}
  for name in sorted(reader.get_variable_to_shape_map()):
    value = reader.get_tensor(name)
    if value.dtype == np.float32:
      pick = rng.rand(*value.shape) < 0.5
      toward = np.where(rng.rand(*value.shape) < 0.5, np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
      value = np.where(pick, np.nextafter(value, toward), value).astype(np.float32)
    values[name] = value
  os.makedirs(dst_dir, exist_ok=True)
  prefix = os.path.join(dst_dir, "xlnet_model.ckpt")
  with tf.Graph().as_default():
    variables = [tf.Variable(value, name=name) for name, value in values.items()]
    with tf.Session(config=session_config(tf)) as sess:
      sess.run(tf.global_variables_initializer())
      tf.train.Saver(variables).save(sess, prefix, write_meta_graph=False)
  shutil.copy(os.path.join(src_dir, "xlnet_config.json"), dst_dir)
  return prefix


def increment_after_the_learning_rate(tf, learning_rate):
  """Makes every assignment to the global step wait for the learning rate's read: with AdamWeightDecay the original's
  `get_train_op` increments the step with no dependency on that read, a race. Returns what was added, in words."""
  initializers = {v.initializer.name for v in tf.global_variables()}
  increments = [op for op in tf.get_default_graph().get_operations()
                if op.type in ("Assign", "AssignVariableOp") and "global_step" in op.inputs[0].name and
                op.name not in initializers]
  for op in increments:
    op._add_control_input(learning_rate.op)  # pylint: disable=protected-access
  return (f"weight decay: oracle added control input {learning_rate.op.name} -> "
          f"{', '.join(op.name for op in increments)} (learning rate read before the increment)")


def run_steps(tf, function_builder, model_utils, golden, batches, ckpt):
  """`train_gpu.train()`'s graph for one tower, fed `batches` in turn (step k: batch k % len). Returns arrays."""
  tf.reset_default_graph()
  tf.set_random_seed(7)
  with tempfile.TemporaryDirectory() as model_dir:
    flags = flags_for(golden, model_dir, ckpt)
    features = feature_placeholders(tf)
    mems = [tf.placeholder(tf.float32, [flags.mem_len, DATA["bsz"], CONFIG["d_model"]]) for _ in range(CONFIG["n_layer"])]
    flags.use_tpu = golden.get("tpu_path", False)  # the embedding and loss only, as shared/goldens' tpupath files
    loss, new_mems, _ = function_builder.get_loss(flags, features, None, {"mems": mems}, True)
    flags.use_tpu = False
    tvars = tf.trainable_variables()
    grads = tf.gradients(loss, tvars)
    train_op, learning_rate, gnorm = model_utils.get_train_op(flags, None, grads_and_vars=list(zip(grads, tvars)))
    if flags.weight_decay > 0:
      increment_after_the_learning_rate(tf, learning_rate)
    dense_grads = [tf.convert_to_tensor(g) for g in grads]
    gnorm_dense = tf.global_norm(dense_grads)
    model_utils.init_from_checkpoint(flags, global_vars=True)
    global_step = tf.train.get_global_step()
    names = [v.name[:-2] for v in tvars]
    out = {k: [] for k in ("loss", "learning_rate", "gnorm", "gnorm_dense", "global_step", "new_mems")}
    mems_np = [np.zeros(m.shape.as_list(), np.float32) for m in mems]
    with tf.Session(config=session_config(tf)) as sess:
      sess.run(tf.global_variables_initializer())
      for k in range(golden["steps"]):
        feed = {features[key]: batches[k % len(batches)][key] for key in FEATURES}
        feed.update(zip(mems, mems_np))
        fetches = [loss, new_mems["mems"], gnorm, gnorm_dense, learning_rate, train_op]
        if k == 0:
          fetches.append(dense_grads)
        fetched = sess.run(fetches, feed)
        loss_np, mems_np, gnorm_np, gnorm_dense_np, lr_np = fetched[:5]
        if k == 0:
          out["grad0"] = dict(zip(names, fetched[-1]))
        out["loss"].append(loss_np)
        out["gnorm"].append(gnorm_np)
        out["gnorm_dense"].append(gnorm_dense_np)
        out["learning_rate"].append(lr_np)
        out["global_step"].append(sess.run(global_step))
        out["new_mems"].append(np.stack(mems_np)[None])
      out["final"] = {v.name[:-2]: sess.run(v) for v in tf.global_variables()}
    out["variables"] = [{"name": v.name[:-2], "shape": v.shape.as_list(), "dtype": v.dtype.base_dtype.name,
                         "trainable": v in tvars} for v in tf.global_variables()]
  return out, flags


def to_arrays(golden, batches, out, flags, ckpt_rel):
  """The golden file's arrays in the layout of shared/goldens/train_step (time-major inputs, a tower axis)."""
  long = "batches" in golden
  arrays = {}
  layout = {"input_k": ("inp_k", [1, 0]), "seg_id": ("seg_id", [1, 0]), "input_q": ("inp_q", [1, 0]),
            "perm_mask": ("perm_mask", [1, 2, 0]), "target_mapping": ("target_mapping", [1, 2, 0]),
            "target": ("target", [1, 0]), "target_mask": ("target_mask", [1, 0])}
  steps_inputs = batches if long else [batches[k % len(batches)] for k in range(golden["steps"])]
  for key, (name, perm) in layout.items():
    arrays[name] = np.stack([np.transpose(b[key], perm)[None] for b in steps_inputs])
  arrays["inp_k"] = arrays["inp_k"].astype(np.int32)
  arrays["seg_id"] = arrays["seg_id"].astype(np.int32)
  arrays["target"] = arrays["target"].astype(np.int32)
  for key in ("loss", "learning_rate", "gnorm", "gnorm_dense"):
    arrays[key] = np.asarray(out[key], np.float32)
  arrays["global_step"] = np.asarray(out["global_step"], np.int64)
  if long:
    arrays["batch_of_step"] = np.arange(golden["steps"]) % len(batches)
    arrays["last_new_mems"] = out["new_mems"][-1][None]
  else:
    arrays["tower_loss"] = arrays["loss"][:, None]
    arrays["new_mems"] = np.stack(out["new_mems"])
    arrays.update({f"grad0/{n}": g for n, g in out["grad0"].items()})
  arrays.update({f"final/{n}": v for n, v in out["final"].items()})
  train_gpu_flags = {k: v for k, v in vars(flags).items() if k not in ("model_dir", "init_checkpoint")}
  decay = getattr(flags, "lr_layer_decay_rate", 1.0)  # train_gpu.py has no such flag; get_train_op reads it so
  train_gpu_flags.update(model_dir="<local>", init_checkpoint=ckpt_rel, lr_layer_decay_rate=decay, num_passes=1,
                         record_info_dir="<temporary: data_utils.py records of tests/testdata/data/corpus>")
  slots = ("adam_m", "adam_v") if flags.weight_decay > 0 else ("Adam", "Adam_1")
  meta = {"mode": "pretrain", "script": "train_gpu.py", "towers": 1, "bsz_per_core": DATA["bsz"],
          "config": CONFIG, "train_gpu_flags": train_gpu_flags,
          "get_train_op_overrides": {"lr_layer_decay_rate": decay, "use_tpu": False},
          "use_tpu_embedding_and_loss_path": bool(golden.get("tpu_path", False)),
          "optimizer": "AdamWeightDecayOptimizer (model_utils)" if flags.weight_decay > 0 else "tf.train.AdamOptimizer",
          "variables": out["variables"],
          "slots": {v["name"]: {"m": f"{v['name']}/{slots[0]}", "v": f"{v['name']}/{slots[1]}"}
                    for v in out["variables"] if v["trainable"]},
          "grad_aggregation": "tf1.13", "steps": golden["steps"],
          "distinct_batches": len(batches), "mems_at_step_1": "zeros",
          "generator": "tests/testdata/generate_train_step_goldens.py", "original_commit": "bbaa3a6"}
  arrays["meta_json"] = np.asarray(json.dumps(meta, sort_keys=True))
  return arrays


def rerun_arrays(golden, out):
  """What a golden keeps of a rerun of the original (`alt/*`, `pert{i}/*`): loss, gnorm, the (last) mems, every
  final value."""
  long = "batches" in golden
  arrays = {"loss": np.asarray(out["loss"], np.float32), "gnorm": np.asarray(out["gnorm"], np.float32),
            "last_new_mems" if long else "new_mems": out["new_mems"][-1][None] if long else np.stack(out["new_mems"])}
  arrays.update({f"final/{n}": v for n, v in out["final"].items()})
  return arrays


def write_records(tmp):
  """The project's `data_utils.py` (its records equal the original's) on tests/testdata/data: bsz 5, uni."""
  records = os.path.join(tmp, "records")
  subprocess.run([sys.executable, os.path.join(ROOT, "data_utils.py"), f"--save_dir={records}",
                    f"--input_glob={os.path.join(HERE, 'data', 'corpus', '*.txt')}",
                  f"--sp_path={os.path.join(HERE, 'data', 'spm', 'spiece.model')}",
                  f"--bsz_per_host={DATA['bsz']}", "--num_core_per_host=1", f"--seq_len={DATA['seq_len']}",
                  f"--reuse_len={DATA['reuse_len']}", "--bi_data=false", f"--num_predict={DATA['num_predict']}",
                  "--mask_alpha=6", "--mask_beta=1", "--uncased=false", "--seed=5"], check=True)
  return os.path.join(records, "tfrecords")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out_dir", default=os.path.join(HERE, "train_step_tied"))
  parser.add_argument("--only", default=None, help="Comma-separated golden names (default: all).")
  parser.add_argument("--perturbed_reruns", type=int, default=None, help=(
      "K: also write K reruns of the original from 1-ulp-perturbed checkpoints as pert1/* .. pertK/* (default: "
      f"{PERTURBED_RERUNS} for a long golden, 0 otherwise)."))
  parser.add_argument("--alt", action="store_true", help=argparse.SUPPRESS)  # the oneDNN-switched rerun
  parser.add_argument("--records_dir", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  os.makedirs(args.out_dir, exist_ok=True)
  if args.records_dir:
    generate(args)
    return
  with tempfile.TemporaryDirectory(prefix="xlnet-goldens-") as tmp:
    args.records_dir = write_records(tmp)
    generate(args)


def generate(args):
  records_dir = args.records_dir
  tf, data_utils, function_builder, model_utils = import_original(args.xlnet_src)
  ckpt = os.path.join(args.out_dir, "ckpt", "xlnet_model.ckpt")
  if not args.alt:
    make_checkpoint(tf, function_builder, args.out_dir)
  names = args.only.split(",") if args.only else list(GOLDENS)
  batches = read_batches(tf, data_utils, records_dir, max(g.get("batches", g["steps"]) for g in GOLDENS.values()))
  for name in names:
    golden = GOLDENS[name]
    used = batches[:golden.get("batches", golden["steps"])]
    out, flags = run_steps(tf, function_builder, model_utils, golden, used, ckpt)
    alt = rerun_arrays(golden, out)
    if args.alt:
      np.savez(os.path.join(args.records_dir, f"alt_{name}.npz"), **alt)
      continue
    arrays = to_arrays(golden, used, out, flags, "ckpt/xlnet_model.ckpt")
    # The same run with oneDNN switched (another summation order in every matmul): the original's own drift.
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0" if os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0" else "1")
    subprocess.run([sys.executable, __file__, f"--xlnet_src={args.xlnet_src}", f"--out_dir={args.out_dir}",
                    f"--records_dir={args.records_dir}", f"--only={name}", "--alt"], check=True, env=env)
    with np.load(os.path.join(args.records_dir, f"alt_{name}.npz")) as alt:
      arrays.update({f"alt/{k}": alt[k] for k in alt.files})
    # The same run from checkpoints moved by one ulp in half their entries: the original's own drift from a start
    # its rounding could have reached, which grows over a long horizon further than the alt rerun's (it can be weak).
    reruns = PERTURBED_RERUNS if args.perturbed_reruns is None and "batches" in golden else args.perturbed_reruns or 0
    for seed in range(1, reruns + 1):
      perturbed = perturbed_checkpoint(tf, os.path.dirname(ckpt), os.path.join(records_dir, f"pert{seed}"), seed)
      pert = rerun_arrays(golden, run_steps(tf, function_builder, model_utils, golden, used, perturbed)[0])
      arrays.update({f"pert{seed}/{k}": v for k, v in pert.items()})
    np.savez_compressed(os.path.join(args.out_dir, f"{name}.npz"), **arrays)
    print(f"{name}: loss {arrays['loss'][:3]} ... {arrays['loss'][-1]:.6f}, gnorm {arrays['gnorm'][:3]}",
          flush=True)


if __name__ == "__main__":
  main()
