"""Writes training-step goldens of the ORIGINAL XLNet on two replicas: run_classifier.py and train_gpu.py, long horizon.

  python tests/testdata/generate_replica_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/replica_step

Runs the original code (github.com/zihangdai/xlnet at bbaa3a6, a checkout passed as --xlnet_src and never copied
here) in TF1 graph mode under the installed TensorFlow, with the stand-ins of generate_train_step_goldens.py
(`tf1_for_the_original`) and generate_task_step_goldens.py (`import_script`), from tests/testdata/train_step/ckpt
(untie_r true, gelu, its 3-class head `classification_toy`), on two logical CPUs:

  finetune_cls_2replica_long   run_classifier.py's TRAIN `model_fn` (`get_model_fn(3)`) once per replica of a
      tf.compat.v1 MirroredStrategy over /cpu:0 and /cpu:1, as the Estimator with train_distribute calls it
      (`call_for_each_replica` inside `_scale_loss_for_estimator_enabled`, which TF 2.x's Estimator enters: each
      replica's mean loss scaled by 1/replicas in compute_gradients, as TF 1.13 did unconditionally);
      `get_train_op`'s compute_gradients and clip_by_global_norm per replica, apply_gradients summing the replicas;
      init_from_checkpoint through the strategy's merge_call. 30 steps, 4 examples per replica (global batch 8), Adam,
      warm-up 3, lr_layer_decay_rate 0.75, clip 1.0; the 240 examples of generate_task_step_goldens.
      classifier_examples (seed 61) through the original convert_single_example, step k replica r = examples
      [8k + 4r, 8k + 4r + 4). Per step: the replicas' mean loss and mean pre-clip gnorm (what xlnet-tf logs), the
      learning rate, the global step.
  pretrain_2tower_long_gpu     train_gpu.train()'s graph with --num_core_per_host=2: the global batch (4) split by
      tf.split into two towers, per-tower `function_builder.get_loss` + tf.gradients under variable-scope reuse, each
      tower's mems carried step to step, `gpu_utils.average_grads_and_vars` (TF 1.13's IndexedSlices rows),
      `get_train_op`. 60 steps cycling 15 batches of the project's data_utils.py records of tests/testdata/data
      (seq 64, reuse 32, bi_data, num_predict 10, perm_size 16) read by the original input pipeline; mem_len 48,
      clamp_len -1, Adam, warm-up 6, poly decay (min_lr_ratio 0.001), clip 1.0. Layout of the long files of
      generate_train_step_goldens.py with a tower axis (tower t = rows [2t, 2t + 2) of the global batch).

The fine-tuning file has the layout of generate_task_step_goldens.py's long classifier golden, with a replica axis:
inputs [batches, replicas, L, B] (time-major), `batch_of_step`. Each golden is run in a child process, again with
oneDNN switched (`alt/*`: loss, gnorm, (last mems,) every final value: the original's own float32 drift) and from
checkpoints moved by one ulp in a random half of every float variable's entries (`pert1/*` ..,
generate_train_step_goldens.perturbed_checkpoint; --perturbed_reruns, by default 2 for the fine-tuning golden and 1
for the pretraining one, whose finals are larger: each file stays under 600 KB).
scripts/check_train_step.py --golden_dir=OUT_DIR replays both (two replicas on two logical CPUs). Written to OUT_DIR:
the npz files and a `ckpt` link to tests/testdata/train_step/ckpt (MANIFEST written by hand). About four minutes on
two cores. Needs only the project's .venv (TensorFlow, numpy, sentencepiece, absl).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_task_step_goldens as task_goldens  # noqa: E402  pylint: disable=wrong-import-position
import generate_train_step_goldens as train_goldens  # noqa: E402  pylint: disable=wrong-import-position

CKPT_DIR = os.path.join(HERE, "train_step", "ckpt")
REPLICAS = 2
GOLDENS = {
    "finetune_cls_2replica_long": dict(task="classifier", seed=61, steps=30, flags=dict(
        train_steps=30, warmup_steps=3, weight_decay=0.0, lr_layer_decay_rate=0.75, num_core_per_host=REPLICAS),
        perturbed_reruns=2),
    "pretrain_2tower_long_gpu": dict(task="pretrain", steps=60, batches=15, flags=dict(
        train_steps=60, warmup_steps=6, num_core_per_host=REPLICAS), perturbed_reruns=1),
}
PRETRAIN_DATA = dict(bsz=4, seq_len=64, reuse_len=32, num_predict=10, perm_size=16, bi_data=True)
PRETRAIN_FLAGS = dict(mem_len=48, reuse_len=32, bi_data=True, clamp_len=-1, same_length=False, num_predict=10,
                      train_batch_size=4, seq_len=64, perm_size=16, decay_method="poly", min_lr_ratio=0.001)


def split_cpu():
  import tensorflow as tf2  # pylint: disable=import-outside-toplevel
  tf2.config.set_logical_device_configuration(tf2.config.list_physical_devices("CPU")[0],
                                              [tf2.config.LogicalDeviceConfiguration()] * REPLICAS)


def run_classifier_replicas(xlnet_src, name, ckpt_dir):
  """The fine-tuning golden's steps of the original on two replicas: (arrays, rerun arrays)."""
  golden = dict(GOLDENS[name], batches=GOLDENS[name]["steps"] * REPLICAS)
  task = task_goldens.TASKS["classifier"]
  task["ckpt_dir"] = ckpt_dir
  tf, _, model_utils, module = task_goldens.import_script(xlnet_src, task["script"])
  batches, _, examples = task_goldens.task_inputs(golden, module)  # step k replica r: batch k * REPLICAS + r
  calls = []
  real_train_op = model_utils.get_train_op

  def observed_train_op(*args, **kwargs):
    calls.append(real_train_op(*args, **kwargs))
    return calls[-1]
  model_utils.get_train_op = observed_train_op
  from tensorflow.python.distribute import values as ds_values  # pylint: disable=import-outside-toplevel
  k_steps = golden["steps"]
  with tempfile.TemporaryDirectory() as model_dir:
    argv, flag_values = task_goldens.original_argv(golden, task["script"], ckpt_dir, model_dir)
    module.FLAGS(argv)
    tf.reset_default_graph()
    tf.set_random_seed(golden["seed"])
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{r}" for r in range(REPLICAS)])
    with strategy.scope():
      global_step = tf.train.get_or_create_global_step()
      features = [{k: tf.placeholder(tf.as_dtype(v.dtype), v.shape, name=f"{k}_{r}") for k, v in batches[0].items()}
                  for r in range(REPLICAS)]
      per_replica = {k: ds_values.PerReplica(tuple(f[k] for f in features)) for k in features[0]}

      def replica_fn(replica_features):
        spec = module.get_model_fn(*task["model_fn_args"])(replica_features, None, tf.estimator.ModeKeys.TRAIN, {})
        return spec["loss"], spec["train_op"]
      with strategy._scale_loss_for_estimator_enabled():  # pylint: disable=protected-access
        loss, train_op = strategy.extended.call_for_each_replica(replica_fn, args=(per_replica,))
      losses = list(strategy.experimental_local_results(loss))
      train_ops = list(strategy.experimental_local_results(train_op))
    assert len(calls) == REPLICAS, len(calls)
    learning_rate, gnorms = calls[0][1], [c[2] for c in calls]
    tvars = tf.trainable_variables()
    mirrored = [v for v in tf.global_variables() if "replica_" not in v.name]  # replica 0's copies name them
    out = {"loss": [], "gnorm": [], "learning_rate": [], "global_step": []}
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                            device_count={"CPU": REPLICAS})
    with tf.Session(config=config) as sess:
      sess.run(tf.global_variables_initializer())
      initial = {v.name[:-2]: sess.run(v) for v in tvars}
      for k in range(k_steps):
        feed = {}
        for r in range(REPLICAS):
          feed.update({features[r][key]: value for key, value in batches[k * REPLICAS + r].items()})
        step_losses, step_gnorms, lr, _ = sess.run([losses, gnorms, learning_rate, train_ops], feed)
        out["loss"].append(np.mean(step_losses))
        out["gnorm"].append(np.mean(step_gnorms))
        out["learning_rate"].append(lr)
        out["global_step"].append(sess.run(global_step))
      final = {v.name[:-2]: sess.run(v) for v in mirrored}
  reader = tf.train.load_checkpoint(os.path.join(ckpt_dir, "xlnet_model.ckpt"))
  names = [v.name[:-2] for v in tvars]
  assert all(np.array_equal(initial[n], reader.get_tensor(n)) for n in names), "not every variable was loaded"
  arrays = {}
  for key, golden_key in (("input_ids", "input_ids"), ("segment_ids", "seg_ids"), ("input_mask", "input_mask"),
                          ("label_ids", "label_ids")):
    stacked = np.stack([b[key] for b in batches]).reshape((k_steps, REPLICAS) + batches[0][key].shape)
    arrays[golden_key] = np.swapaxes(stacked, 2, 3) if stacked.ndim == 4 else stacked  # time-major [K, R, L, B]
  arrays["batch_of_step"] = np.arange(k_steps)
  for key, values in out.items():
    arrays[key] = np.asarray(values, np.int64 if key == "global_step" else np.float32)
  arrays.update({f"final/{n}": v for n, v in final.items()})
  script_flags = {k: getattr(module.FLAGS, k) for k in flag_values}
  script_flags.update(model_dir="<local>", init_checkpoint="ckpt/xlnet_model.ckpt",
                      model_config_path="ckpt/xlnet_config.json")
  variables = [{"name": v.name[:-2], "shape": v.shape.as_list(), "dtype": v.dtype.base_dtype.name,
                "trainable": v.name[:-2] in names} for v in mirrored]
  meta = {"mode": "finetune", "script": "run_classifier.py", "replicas": REPLICAS,
          "config": json.load(open(os.path.join(ckpt_dir, "xlnet_config.json"))),
          "run_classifier_flags": script_flags, "get_train_op_overrides": {}, "use_tpu_embedding_and_loss_path": False,
          "optimizer": "tf.train.AdamOptimizer", "variables": variables, "trainable_loaded_from_ckpt": len(names),
          "slots": {v["name"]: {"m": f"{v['name']}/Adam", "v": f"{v['name']}/Adam_1"} for v in variables
                    if v["trainable"]},
          "distribution": "tf.compat.v1 MirroredStrategy over /cpu:0, /cpu:1; model_fn per replica under "
                          "_scale_loss_for_estimator_enabled (the Estimator's loss scaling)",
          "loss": "mean of the replicas' losses", "gnorm": "mean of the replicas' pre-clip norms",
          "steps": k_steps, "distinct_batches": k_steps, "seed": golden["seed"], "label_list": ["0", "1", "2"],
          "examples": examples, "inputs": f"{len(examples)} examples (classifier_examples, seed {golden['seed']}) "
          "through the original convert_single_example; step k replica r = examples [8k + 4r, 8k + 4r + 4)",
          "layout": "per-step arrays [K]; inputs time-major [K, replicas, L, B] (label_ids [K, replicas, B])",
          "generator": "tests/testdata/generate_replica_goldens.py", "original_commit": "bbaa3a6",
          "tensorflow": tf.VERSION}
  arrays["meta_json"] = np.asarray(json.dumps(meta, sort_keys=True))
  rerun = {"loss": arrays["loss"], "gnorm": arrays["gnorm"]}
  rerun.update({k: v for k, v in arrays.items() if k.startswith("final/")})
  return arrays, rerun


def pretrain_records(tmp):
  """The project's data_utils.py (its records equal the original's) on tests/testdata/data: bsz 4, bi_data."""
  records = os.path.join(tmp, "records")
  d = PRETRAIN_DATA
  subprocess.run([sys.executable, os.path.join(train_goldens.ROOT, "data_utils.py"), f"--save_dir={records}",
                  f"--input_glob={os.path.join(HERE, 'data', 'corpus', '*.txt')}",
                  f"--sp_path={os.path.join(HERE, 'data', 'spm', 'spiece.model')}", f"--bsz_per_host={d['bsz']}",
                  "--num_core_per_host=1", f"--seq_len={d['seq_len']}", f"--reuse_len={d['reuse_len']}",
                  "--bi_data=true", f"--num_predict={d['num_predict']}", "--mask_alpha=6", "--mask_beta=1",
                  "--uncased=false", "--seed=5"], check=True)
  return os.path.join(records, "tfrecords")


def run_pretrain_towers(xlnet_src, name, ckpt_dir, records_dir):
  """The pretraining golden's steps of the original on two towers: (arrays, rerun arrays)."""
  import generate_forward_goldens  # pylint: disable=import-outside-toplevel
  golden = GOLDENS[name]
  g = train_goldens
  with open(os.path.join(ckpt_dir, "xlnet_config.json")) as f:
    g.CONFIG.clear()
    g.CONFIG.update(json.load(f))
  g.DATA.update(PRETRAIN_DATA)
  g.BASE_FLAGS.update(PRETRAIN_FLAGS)
  tf, _, _ = generate_forward_goldens.import_original(xlnet_src)  # modeling without the bi_data assert, as there
  # pylint: disable-next=import-outside-toplevel,multiple-imports
  import data_utils, function_builder, gpu_utils, model_utils
  tf.reset_default_graph()
  tf.set_random_seed(11)
  d = g.DATA
  input_fn, _ = data_utils.get_input_fn(
      tfrecord_dir=records_dir, split="train", bsz_per_host=d["bsz"], seq_len=d["seq_len"], reuse_len=d["reuse_len"],
      bi_data=True, num_hosts=1, num_core_per_host=1, perm_size=d["perm_size"], mask_alpha=6, mask_beta=1,
      uncased=False, num_passes=1, use_bfloat16=False, num_predict=d["num_predict"])
  example = tf.data.make_one_shot_iterator(input_fn({"batch_size": d["bsz"]})).get_next()
  with tf.Session(config=g.session_config(tf)) as sess:
    batches = [{k: v for k, v in sess.run(example).items() if k in g.FEATURES} for _ in range(golden["batches"])]

  tf.reset_default_graph()
  tf.set_random_seed(7)
  towers, b = REPLICAS, d["bsz"] // REPLICAS
  with tempfile.TemporaryDirectory() as model_dir:
    flags = g.flags_for(golden, model_dir, os.path.join(ckpt_dir, "xlnet_model.ckpt"))
    features = g.feature_placeholders(tf)
    examples = [{} for _ in range(towers)]
    for key in features:  # as train_gpu.train()
      for t, value in enumerate(tf.split(features[key], towers, 0)):
        examples[t][key] = value
    mems, losses, new_mems, tower_grads = [], [], [], []
    for t in range(towers):
      with tf.variable_scope(tf.get_variable_scope(), reuse=True if t > 0 else None):
        m = [tf.placeholder(tf.float32, [flags.mem_len, b, g.CONFIG["d_model"]]) for _ in range(g.CONFIG["n_layer"])]
        loss_t, new_t, _ = function_builder.get_loss(flags, examples[t], None, {"mems": m}, True)
        tvars = tf.trainable_variables()
        tower_grads.append(list(zip(tf.gradients(loss_t, tvars), tvars)))
      mems.append(m)
      losses.append(loss_t)
      new_mems.append(new_t["mems"])
    loss = tf.add_n(losses) / towers
    grads_and_vars = gpu_utils.average_grads_and_vars(tower_grads)
    train_op, learning_rate, gnorm = model_utils.get_train_op(flags, None, grads_and_vars=grads_and_vars)
    model_utils.init_from_checkpoint(flags, global_vars=True)
    global_step = tf.train.get_global_step()
    out = {k: [] for k in ("loss", "learning_rate", "gnorm", "gnorm_dense", "global_step", "new_mems")}
    mems_np = [[np.zeros(x.shape.as_list(), np.float32) for x in m] for m in mems]
    with tf.Session(config=g.session_config(tf)) as sess:
      sess.run(tf.global_variables_initializer())
      for k in range(golden["steps"]):
        feed = {features[key]: batches[k % len(batches)][key] for key in g.FEATURES}
        for t in range(towers):
          feed.update(zip(mems[t], mems_np[t]))
        loss_np, mems_np, gnorm_np, lr_np, _ = sess.run([loss, new_mems, gnorm, learning_rate, train_op], feed)
        for key, value in (("loss", loss_np), ("gnorm", gnorm_np), ("gnorm_dense", gnorm_np),
                           ("learning_rate", lr_np), ("global_step", sess.run(global_step))):
          out[key].append(value)
        out["new_mems"].append(np.stack([np.stack(x) for x in mems_np]))  # [T, N, M, b, D]
      out["final"] = {v.name[:-2]: sess.run(v) for v in tf.global_variables()}
    out["variables"] = [{"name": v.name[:-2], "shape": v.shape.as_list(), "dtype": v.dtype.base_dtype.name,
                         "trainable": v in tvars} for v in tf.global_variables()]
  arrays = g.to_arrays(golden, batches, out, flags, "ckpt/xlnet_model.ckpt")
  for key in ("inp_k", "seg_id", "inp_q", "perm_mask", "target_mapping", "target", "target_mask"):
    arrays[key] = np.stack(np.split(arrays[key][:, 0], towers, axis=-1), 1)  # [batches, T, ..., b]: batch axis last
  arrays["last_new_mems"] = out["new_mems"][-1][None]
  del arrays["gnorm_dense"]  # the IndexedSlices rule's gnorm is the one compared; no merged norm is recorded here
  meta = json.loads(str(arrays["meta_json"]))
  meta.update(towers=towers, bsz_per_core=b, generator="tests/testdata/generate_replica_goldens.py",
              inputs=f"data_utils.py records of tests/testdata/data/corpus ({PRETRAIN_DATA}), the original input "
              "pipeline's first 15 global batches of 4; tower t = rows [2t, 2t + 2) (train_gpu.train's tf.split)")
  arrays["meta_json"] = np.asarray(json.dumps(meta, sort_keys=True))
  rerun = {"loss": arrays["loss"], "gnorm": arrays["gnorm"], "last_new_mems": arrays["last_new_mems"]}
  rerun.update({k: v for k, v in arrays.items() if k.startswith("final/")})
  return arrays, rerun


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out_dir", default=os.path.join(HERE, "replica_step"))
  parser.add_argument("--only", default=None, help="Comma-separated golden names (default: all).")
  parser.add_argument("--perturbed_reruns", type=int, default=None, help=(
      "K: also write K reruns of the original from 1-ulp-perturbed checkpoints as pert1/* .. pertK/* (default: "
      "the golden's `perturbed_reruns`)."))
  parser.add_argument("--child_out", default=None, help=argparse.SUPPRESS)  # one golden in this process
  parser.add_argument("--child_ckpt_dir", default=CKPT_DIR, help=argparse.SUPPRESS)  # ... from this checkpoint
  parser.add_argument("--records_dir", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child_out:
    split_cpu()
    if GOLDENS[args.only]["task"] == "classifier":
      arrays, rerun = run_classifier_replicas(args.xlnet_src, args.only, args.child_ckpt_dir)
    else:
      arrays, rerun = run_pretrain_towers(args.xlnet_src, args.only, args.child_ckpt_dir, args.records_dir)
    np.savez(args.child_out, **arrays, **{f"rerun/{k}": v for k, v in rerun.items()})
    return
  names = args.only.split(",") if args.only else list(GOLDENS)
  os.makedirs(args.out_dir, exist_ok=True)
  link = os.path.join(args.out_dir, "ckpt")
  if not os.path.lexists(link):
    os.symlink(os.path.relpath(CKPT_DIR, args.out_dir), link)
  with tempfile.TemporaryDirectory(prefix="xlnet-replica-goldens-") as tmp:
    records_dir = pretrain_records(tmp) if any(GOLDENS[n]["task"] == "pretrain" for n in names) else tmp
    for name in names:
      onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1")
      reruns = GOLDENS[name]["perturbed_reruns"] if args.perturbed_reruns is None else args.perturbed_reruns
      # The main run; the same with oneDNN switched (`alt`); from checkpoints moved by one ulp in half their entries.
      kinds = [("main", onednn, None), ("alt", "0" if onednn != "0" else "1", None)] + [
          (f"pert{seed}", onednn, seed) for seed in range(1, reruns + 1)]
      runs = {}
      for kind, kind_onednn, seed in kinds:
        path = os.path.join(tmp, f"{name}_{kind}.npz")
        command = [sys.executable, __file__, f"--xlnet_src={args.xlnet_src}", f"--only={name}",
                   f"--child_out={path}", f"--records_dir={records_dir}"]
        if seed is not None:
          ckpt_dir = os.path.join(tmp, f"ckpt_{kind}")
          if not os.path.exists(ckpt_dir):
            import tensorflow as tf2  # pylint: disable=import-outside-toplevel
            train_goldens.perturbed_checkpoint(tf2.compat.v1, CKPT_DIR, ckpt_dir, seed)
          command.append(f"--child_ckpt_dir={ckpt_dir}")
        subprocess.run(command, check=True, env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS=kind_onednn))
        with np.load(path) as d:
          runs[kind] = {k: d[k] for k in d.files}
      main_run = runs.pop("main")
      arrays = {k: v for k, v in main_run.items() if not k.startswith("rerun/")}
      for kind, rerun in runs.items():
        arrays.update({f"{kind}/{k[len('rerun/'):]}": v for k, v in rerun.items() if k.startswith("rerun/")})
      np.savez_compressed(os.path.join(args.out_dir, f"{name}.npz"), **arrays)
      print(f"{name}: loss {arrays['loss'][:3]} ... {arrays['loss'][-1]:.6f}, lr {arrays['learning_rate'][:3]}, "
            f"gnorm {arrays['gnorm'][:3]}; alt loss drift {np.max(np.abs(arrays['alt/loss'] - arrays['loss'])):.1e}",
            flush=True)


if __name__ == "__main__":
  main()
