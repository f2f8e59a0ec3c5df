"""Writes training-step goldens of the ORIGINAL run_squad.py, run_race.py, run_classifier.py: steps through the heads.

  python tests/testdata/generate_task_step_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/task_step

Runs the original `run_squad.py` / `run_race.py` / `run_classifier.py` `model_fn` in TRAIN mode
(github.com/zihangdai/xlnet at bbaa3a6, a checkout passed as --xlnet_src and never copied here) in TF1 graph mode
under the installed TensorFlow, with the stand-ins of generate_train_step_goldens.py (`tf1_for_the_original`), a
two-name `tf.estimator` stand-in (`ModeKeys`, `EstimatorSpec`: the spec's fields are returned as a dict) and, for
run_race.py's unused module-level imports, empty `scipy.stats` / `sklearn.metrics`. The flags are the scripts' own
absl definitions, parsed from an argv. The graph is the Estimator's: the global step first, then
`model_fn(features, None, TRAIN, {})`, which builds `function_builder.get_qa_outputs` + its loss (SQuAD),
`function_builder.get_race_loss` (RACE) or `get_classification_loss` (run_classifier.py, `get_model_fn(3)`),
`model_utils.get_train_op` and `model_utils.init_from_checkpoint` (trainable variables). Observed, not changed: the
head's outputs (the return value of `get_qa_outputs` / `get_race_loss` / ...), `get_train_op`'s return value (the
learning rate and the pre-clip gnorm model_fn drops) and the gradients `tf.clip_by_global_norm` receives (the step-1
gradients). With weight decay the global step's increment waits for the learning rate's read (a race in the
original; as generate_train_step_goldens.py). Each golden runs in a child process (the scripts define the same absl
flags), and again with oneDNN switched (`alt/*`: the original's own float32 drift); a long golden also from K
checkpoints moved by one ulp in a random half of every float variable's entries (`pert1/*` .. `pertK/*`, the keys
`alt/*` has, seed i: generate_train_step_goldens.perturbed_checkpoint; --perturbed_reruns, K = 4 by default).

Inputs: tests/testdata/squad/head/train_batch.npz (24 training features of L64_Q16_S24_cased, step k = rows
[8k, 8k+8)) from tests/testdata/squad/ckpt; RACE: the 4 training then the 8 dev questions of L64_QA16_cased
(tests/testdata/race/features, step k = questions [4k, 4k+4)) from tests/testdata/race/ckpt.

Long-horizon goldens (`*_long`: 300 steps cycling 20 stored batches, warm-up 30, poly decay over 300 steps; as the
pretraining ones of generate_train_step_goldens.py, `batch_of_step` says which batch each step ran; per step the
loss, learning rate, gnorm (and gnorm_dense), global step; after the last step every variable and slot; no head
outputs or step-1 gradients): SQuAD from 160 training features of L64_Q16_S24_cased (`squad_rows`); run_classifier.py
(classification, 3 labels) from tests/testdata/train_step/ckpt on 80 examples made as that folder's finetune goldens'
(`classifier_examples`, through the original `classifier_utils.convert_single_example`; inputs stored time-major as
there). Written, per task, to OUT_DIR/{squad,race,classifier}/ (a `ckpt` link to the task's checkpoint folder, the npz
files; MANIFEST written by hand; see `GOLDENS`). About three minutes on two cores (the two long files with all their
reruns: 100 s). Needs only the project's .venv (TensorFlow, numpy, sentencepiece, absl).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_train_step_goldens as train_step_goldens  # noqa: E402  pylint: disable=wrong-import-position

COMMON = dict(dropout=0.0, dropatt=0.0, clamp_len=-1, use_bfloat16=False, init="normal", init_std=0.02,
              init_range=0.1, use_tpu=False, num_hosts=1, num_core_per_host=1, do_train=True, train_steps=5,
              learning_rate=1e-3, decay_method="poly", min_lr_ratio=0.0, clip=1.0)
TASKS = {
    "squad": dict(script="run_squad", ckpt_dir=os.path.join(HERE, "squad", "ckpt"), batch=8, steps=3,
                  flags=dict(COMMON, max_seq_length=64, max_query_length=16, doc_stride=24, summary_type="last",
                             train_batch_size=8, adam_epsilon=1e-6)),
    "race": dict(script="run_race", ckpt_dir=os.path.join(HERE, "race", "ckpt"), batch=4, steps=3,
                 flags=dict(COMMON, max_seq_length=64, max_qa_length=16, summary_type="last", use_summ_proj=True,
                            train_batch_size=4, adam_epsilon=1e-6, uncased=False)),
    # run_classifier.py on the checkpoint of tests/testdata/train_step (its 3-class head `classification_toy`).
    "classifier": dict(script="run_classifier", mode="finetune", model_fn_args=(3,), batch=4, steps=3,
                       ckpt_dir=os.path.join(HERE, "train_step", "ckpt"),
                       flags=dict(COMMON, max_seq_length=12, summary_type="last", use_summ_proj=True,
                                  train_batch_size=4, adam_epsilon=1e-8, task_name="oracle", cls_scope="toy",
                                  is_regression=False)),
}
LONG = dict(train_steps=300, warmup_steps=30)  # a long-horizon golden: 300 steps cycling `batches` stored batches
GOLDENS = {
    "squad_adam_clip1": dict(task="squad", seed=21, flags=dict(lr_layer_decay_rate=1.0, weight_decay=0.0,
                                                               warmup_steps=0)),
    "squad_adamwd_lrlayer075_warmup": dict(task="squad", seed=22, flags=dict(lr_layer_decay_rate=0.75,
                                                                             weight_decay=0.01, warmup_steps=2)),
    # RACE's pre-clip norm here is 0.66-1.43: clip 0.5 binds at every step.
    "race_adam_clip05": dict(task="race", seed=23, flags=dict(lr_layer_decay_rate=1.0, weight_decay=0.0,
                                                              warmup_steps=0, clip=0.5)),
    "race_adamwd_lrlayer075_warmup_clip05": dict(task="race", seed=24, flags=dict(
        lr_layer_decay_rate=0.75, weight_decay=0.01, warmup_steps=2, clip=0.5)),
    "squad_adamwd_lrlayer075_long": dict(task="squad", seed=25, steps=300, batches=20, flags=dict(
        LONG, lr_layer_decay_rate=0.75, weight_decay=0.01)),
    "finetune_cls_adam_long": dict(task="classifier", seed=26, steps=300, batches=20, flags=dict(
        LONG, lr_layer_decay_rate=1.0, weight_decay=0.0)),
}
# The per-step inputs as the model_fn's features (batch-major, the input_fn's dtypes after `_decode_record`).
SQUAD_INPUTS = {"input_ids": np.int32, "segment_ids": np.int32, "input_mask": np.float32, "p_mask": np.float32,
                "cls_index": np.int32, "start_positions": np.int32, "end_positions": np.int32,
                "is_impossible": np.float32}
RACE_INPUTS = {"input_ids": np.int32, "segment_ids": np.int32, "input_mask": np.float32, "label_ids": np.int32}
INPUTS = {"squad": SQUAD_INPUTS, "race": RACE_INPUTS, "classifier": RACE_INPUTS}
HEADS = {"squad": "get_qa_outputs", "race": "get_race_loss", "classifier": "get_classification_loss"}


def squad_rows(count):
  """`count` training features of L64_Q16_S24_cased: head/train_batch.npz's 24 first (the 3-step goldens' batches),
  then every other answerable one (36) and unanswerable ones, in the file's order (38 of the first 160 answerable)."""
  with np.load(os.path.join(HERE, "squad", "head", "train_batch.npz")) as d:
    first = [int(r) for r in d["feature_rows"]]
  with np.load(os.path.join(HERE, "squad", "features", "L64_Q16_S24_cased_train.npz")) as d:
    rows = {k: d[k] for k in d.files}
  rest = [r for r in range(len(rows["input_ids"])) if r not in first]
  answerable = [r for r in rest if not rows["is_impossible"][r]]
  unanswerable = [r for r in rest if rows["is_impossible"][r]][:count - len(first) - len(answerable)]
  order = first + sorted(answerable + unanswerable)
  assert len(order) == count, len(order)
  return {k: v[order] for k, v in rows.items()}, order


def classifier_examples(count, seed=26):
  """`count` examples as the 3-step finetune goldens' (tests/testdata/train_step/GOLDENS_README.md): random token ids in
  [9, 1000), some single-segment, some longer than max_seq_length 12 (truncated), labels "0", "1", "2"."""
  rng = np.random.RandomState(seed)
  examples = []
  for i in range(count):
    tokens_a = [int(t) for t in rng.randint(9, 1000, size=rng.randint(1, 12))]
    tokens_b = [int(t) for t in rng.randint(9, 1000, size=rng.randint(1, 8))] if rng.rand() < 0.6 else None
    examples.append({"guid": f"train-{i}", "label": str(rng.randint(3)), "tokens_a": tokens_a, "tokens_b": tokens_b})
  return examples


def classifier_features(module, examples, max_seq_length):
  """The original `classifier_utils.convert_single_example` of each example (token ids as the tokenizer's output)."""
  import classifier_utils  # pylint: disable=import-outside-toplevel
  rows = {k: [] for k in RACE_INPUTS}
  for i, e in enumerate(examples):
    example = module.InputExample(e["guid"], list(e["tokens_a"]), e["tokens_b"] and list(e["tokens_b"]), e["label"])
    f = classifier_utils.convert_single_example(i, example, ["0", "1", "2"], max_seq_length, lambda ids: ids)
    for key, value in (("input_ids", f.input_ids), ("segment_ids", f.segment_ids), ("input_mask", f.input_mask),
                       ("label_ids", f.label_id)):
      rows[key].append(value)
  return {k: np.asarray(v) for k, v in rows.items()}


def task_inputs(golden, module=None):
  """[batches] dicts of the model_fn's features, one per distinct batch (numpy, batch-major), and how they were made."""
  task = golden["task"]
  spec = TASKS[task]
  b, count = spec["batch"], golden.get("batches", spec["steps"])
  if task == "squad":
    if "batches" in golden:
      rows, order = squad_rows(b * count)
      note = (f"squad/features/L64_Q16_S24_cased_train.npz rows {order} (head/train_batch.npz's 24, then the other "
              f"answerable and the first unanswerable ones in order); batch i = the {b} rows [{b}i, {b}i+{b})")
    else:
      with np.load(os.path.join(HERE, "squad", "head", "train_batch.npz")) as d:
        rows = {k: d[k] for k in d.files}
      note = "squad/head/train_batch.npz rows [8k, 8k+8) (L64_Q16_S24_cased training features)"
    rows["start_positions"], rows["end_positions"] = rows["start_position"], rows["end_position"]
  elif task == "classifier":
    examples = classifier_examples(b * count, golden["seed"])
    rows = classifier_features(module, examples, spec["flags"]["max_seq_length"])
    note = (f"{len(examples)} examples (meta examples: random token ids in [9, 1000), numpy RandomState("
            f"{golden['seed']})) through the original classifier_utils.convert_single_example; batch i = examples "
            f"[{b}i, {b}i+{b}) in order")
  else:
    parts = []
    for split in ("train", "dev"):
      with np.load(os.path.join(HERE, "race", "features", f"L64_QA16_cased_{split}.npz")) as d:
        parts.append({"input_ids": d["input_ids"], "segment_ids": d["segment_ids"], "input_mask": d["input_mask"],
                      "label_ids": d["label_id"], "is_real_example": d["is_real_example"]})
    rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    assert rows["is_real_example"].all()
    note = ("race/features/L64_QA16_cased_{train,dev}.npz, the 4 training then the 8 dev questions, step k = "
            "questions [4k, 4k+4)")
  assert len(rows["input_ids"]) >= b * count
  batches = [{k: rows[k][i * b:(i + 1) * b].astype(dtype) for k, dtype in INPUTS[task].items()} for i in range(count)]
  return batches, note, examples if task == "classifier" else None


def original_argv(golden, script, ckpt_dir, model_dir):
  flags = dict(TASKS[golden["task"]]["flags"], **golden["flags"])
  flags.update(model_config_path=os.path.join(ckpt_dir, "xlnet_config.json"),
               init_checkpoint=os.path.join(ckpt_dir, "xlnet_model.ckpt"), model_dir=model_dir)
  return [f"{script}.py"] + [f"--{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in flags.items()], flags


def import_script(xlnet_src, script):
  """The original script, imported on the TF1 stand-ins; its absl flags defined."""
  tf, data_utils, function_builder, model_utils = train_step_goldens.import_original(xlnet_src)
  del data_utils
  tf.estimator = types.SimpleNamespace(
      ModeKeys=types.SimpleNamespace(TRAIN="train", EVAL="eval", PREDICT="infer"),
      EstimatorSpec=lambda **fields: fields)
  for name, attrs in (("scipy", {}), ("scipy.stats", dict(pearsonr=None, spearmanr=None)), ("sklearn", {}),
                      ("sklearn.metrics", dict(matthews_corrcoef=None, f1_score=None))):
    if script == "run_race" and name not in sys.modules:  # run_race.py's unused imports; not installed here
      sys.modules[name] = types.ModuleType(name)
      sys.modules[name].__dict__.update(attrs)
  module = __import__(script)
  return tf, function_builder, model_utils, module


def run_golden(xlnet_src, name):
  """One golden's K steps of the original; returns (arrays without alt/*, meta)."""
  golden = GOLDENS[name]
  task = TASKS[golden["task"]]
  tf, function_builder, model_utils, module = import_script(xlnet_src, task["script"])
  batches, inputs_note, examples = task_inputs(golden, module)
  long = "batches" in golden  # a long-horizon golden: its inputs once per distinct batch, no head outputs or grad0
  k_steps = golden.get("steps", task["steps"])
  observed = {}

  def observe(owner, attr, key):
    real = getattr(owner, attr)

    def wrapper(*args, **kwargs):
      out = real(*args, **kwargs)
      observed[key] = (args, out)
      return out
    setattr(owner, attr, wrapper)
  observe(function_builder, HEADS[golden["task"]], "head")
  observe(model_utils, "get_train_op", "train_op")
  observe(tf, "clip_by_global_norm", "clip")

  with tempfile.TemporaryDirectory() as model_dir:
    argv, flag_values = original_argv(golden, task["script"], task["ckpt_dir"], model_dir)
    module.FLAGS(argv)
    tf.reset_default_graph()
    tf.set_random_seed(golden["seed"])
    global_step = tf.train.get_or_create_global_step()  # the Estimator creates it before model_fn
    features = {k: tf.placeholder(tf.as_dtype(v.dtype), v.shape, name=k) for k, v in batches[0].items()}
    spec = module.get_model_fn(*task.get("model_fn_args", ()))(features, None, tf.estimator.ModeKeys.TRAIN, {})
    _, learning_rate, gnorm = observed["train_op"][1]
    grads = list(observed["clip"][0][0])
    if module.FLAGS.weight_decay > 0:
      order = train_step_goldens.increment_after_the_learning_rate(tf, learning_rate)
    tvars = tf.trainable_variables()
    assert len(grads) == len(tvars)
    names = [v.name[:-2] for v in tvars]
    dense_grads = [tf.convert_to_tensor(g) for g in grads]
    slices = {n: (g.values, g.indices) for n, g in zip(names, grads) if isinstance(g, tf.IndexedSlices)}
    head = observed["head"][1]
    if long:
      outputs = {}
    elif golden["task"] == "squad":
      outputs = {k: head[k] for k in ("start_log_probs", "end_log_probs", "cls_logits")}
    else:
      outputs = {"per_example_loss": head[1], "logits": head[2]}
    fetch = dict(outputs, loss=spec["loss"], learning_rate=learning_rate, gnorm=gnorm,
                 gnorm_dense=tf.global_norm(dense_grads))
    out = {k: [] for k in list(fetch) + ["global_step"]}
    arrays = {}
    with tf.Session(config=train_step_goldens.session_config(tf)) as sess:
      sess.run(tf.global_variables_initializer())
      initial = {n: sess.run(v) for n, v in zip(names, tvars)}
      for k in range(k_steps):
        feed = {features[key]: value for key, value in batches[k % len(batches)].items()}
        extra = (dense_grads, slices) if k == 0 and not long else ()
        fetched, _, *first = sess.run([fetch, spec["train_op"], *extra], feed)
        for key, value in fetched.items():
          out[key].append(value)
        out["global_step"].append(sess.run(global_step))
        if extra:
          arrays.update({f"grad0/{n}": g for n, g in zip(names, first[0])})
          for n, (values, indices) in first[1].items():
            arrays[f"grad0_slices/{n}/values"], arrays[f"grad0_slices/{n}/indices"] = values, indices.astype(np.int64)
      final = {v.name[:-2]: sess.run(v) for v in tf.global_variables()}
    variables = [{"name": v.name[:-2], "shape": v.shape.as_list(), "dtype": v.dtype.base_dtype.name,
                  "trainable": v in tvars} for v in tf.global_variables()]
  for key in INPUTS[golden["task"]]:
    arrays[key] = np.stack([s[key] for s in batches])
  if golden["task"] == "classifier":  # time-major, as the finetune goldens of tests/testdata/train_step
    arrays["seg_ids"] = arrays.pop("segment_ids")
    for key in ("input_ids", "seg_ids", "input_mask"):
      arrays[key] = np.transpose(arrays[key], [0, 2, 1])
  if long:
    arrays["batch_of_step"] = np.arange(k_steps) % len(batches)
  for key, values in out.items():
    arrays[key] = np.asarray(values, np.int64 if key == "global_step" else np.float32)
  arrays.update({f"final/{n}": v for n, v in final.items()})
  loaded = [n for n in names if n in final and np.array_equal(initial[n], tf.train.load_checkpoint(
      os.path.join(task["ckpt_dir"], "xlnet_model.ckpt")).get_tensor(n))]
  assert len(loaded) == len(names), sorted(set(names) - set(loaded))
  slots = ("adam_m", "adam_v") if flag_values["weight_decay"] > 0 else ("Adam", "Adam_1")
  script_flags = {k: getattr(module.FLAGS, k) for k in flag_values}
  script_flags.update(model_dir="<local>", init_checkpoint="ckpt/xlnet_model.ckpt",
                      model_config_path="ckpt/xlnet_config.json")
  meta = {"mode": task.get("mode", golden["task"]), "script": f"{task['script']}.py",
          "config": json.load(open(os.path.join(task["ckpt_dir"], "xlnet_config.json"))),
          f"{task['script']}_flags": script_flags,
          f"{task['script']}_argv": [a.replace(model_dir, "<local>").replace(task["ckpt_dir"], "ckpt") for a in argv],
          "get_train_op_overrides": {}, "use_tpu_embedding_and_loss_path": False,
          "optimizer": "AdamWeightDecayOptimizer (model_utils)" if flag_values["weight_decay"] > 0 else
                       "tf.train.AdamOptimizer",
          "variables": variables, "trainable_loaded_from_ckpt": len(loaded),
          "slots": {v["name"]: {"m": f"{v['name']}/{slots[0]}", "v": f"{v['name']}/{slots[1]}"}
                    for v in variables if v["trainable"]},
          "grad_kinds": {n: "IndexedSlices" if n in slices else "dense" for n in names},
          "grad_aggregation": "tf1.13", "steps": k_steps, "distinct_batches": len(batches), "seed": golden["seed"],
          "global_step_order": order if flag_values["weight_decay"] > 0 else "Adam: increment after the updates",
          "inputs": inputs_note + ("; step k runs batch batch_of_step[k] = k % batches" if long else ""),
          "layout": "per-step arrays have a leading [K]; inputs and outputs batch-major as model_fn's features" + (
              " (run_classifier: inputs time-major [K, L, B] as tests/testdata/train_step's finetune goldens)"
              if golden["task"] == "classifier" else "") + ("; inputs [batches], once per distinct batch" if long
                                                             else ""),
          "generator": "tests/testdata/generate_task_step_goldens.py", "original_commit": "bbaa3a6",
          "tensorflow": tf.VERSION}
  if golden["task"] == "classifier":
    meta.update(label_list=["0", "1", "2"], examples=examples)
  return arrays, meta


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out_dir", default=os.path.join(HERE, "task_step"))
  parser.add_argument("--only", default=None, help="Comma-separated golden names (default: all).")
  parser.add_argument("--perturbed_reruns", type=int, default=None, help=(
      "K: also write K reruns of the original from 1-ulp-perturbed checkpoints as pert1/* .. pertK/* (default: "
      f"{train_step_goldens.PERTURBED_RERUNS} for a long golden, 0 otherwise)."))
  parser.add_argument("--child_out", default=None, help=argparse.SUPPRESS)  # one golden in this process
  parser.add_argument("--child_ckpt_dir", default=None, help=argparse.SUPPRESS)  # ... from this checkpoint
  args = parser.parse_args()
  if args.child_out:
    if args.child_ckpt_dir:
      TASKS[GOLDENS[args.only]["task"]]["ckpt_dir"] = args.child_ckpt_dir
    arrays, meta = run_golden(args.xlnet_src, args.only)
    np.savez(args.child_out, meta_json=np.asarray(json.dumps(meta, sort_keys=True)), **arrays)
    return
  names = args.only.split(",") if args.only else list(GOLDENS)
  with tempfile.TemporaryDirectory(prefix="xlnet-task-goldens-") as tmp:
    for name in names:
      task = GOLDENS[name]["task"]
      onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1")
      # The main run; the same with oneDNN switched (`alt`); from checkpoints moved by one ulp in half their entries
      # (`pert{i}`: over a long horizon these can drift up to 30x further than the alt rerun).
      reruns = (train_step_goldens.PERTURBED_RERUNS if args.perturbed_reruns is None and "batches" in GOLDENS[name]
                else args.perturbed_reruns or 0)
      kinds = [("main", onednn, None), ("alt", "0" if onednn != "0" else "1", None)] + [
          (f"pert{seed}", onednn, seed) for seed in range(1, reruns + 1)]
      runs = {}
      for kind, kind_onednn, seed in kinds:
        path = os.path.join(tmp, f"{name}_{kind}.npz")
        command = [sys.executable, __file__, f"--xlnet_src={args.xlnet_src}", f"--only={name}", f"--child_out={path}"]
        if seed is not None:
          ckpt_dir = os.path.join(tmp, f"{task}_{kind}")
          if not os.path.exists(ckpt_dir):
            import tensorflow as tf2  # pylint: disable=import-outside-toplevel
            train_step_goldens.perturbed_checkpoint(tf2.compat.v1, TASKS[task]["ckpt_dir"], ckpt_dir, seed)
          command.append(f"--child_ckpt_dir={ckpt_dir}")
        subprocess.run(command, check=True, env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS=kind_onednn))
        with np.load(path) as d:
          runs[kind] = {k: d[k] for k in d.files}
      arrays, alt = runs.pop("main"), runs["alt"]
      for kind, rerun in runs.items():
        arrays.update({f"{kind}/{k}": rerun[k] for k in ("loss", "gnorm")})
        arrays.update({f"{kind}/{k}": v for k, v in rerun.items() if k.startswith("final/")})
      folder = os.path.join(args.out_dir, task)
      os.makedirs(folder, exist_ok=True)
      link = os.path.join(folder, "ckpt")
      if not os.path.lexists(link):
        os.symlink(os.path.relpath(TASKS[task]["ckpt_dir"], folder), link)
      np.savez_compressed(os.path.join(folder, f"{name}.npz"), **arrays)
      print(f"{name}: loss {arrays['loss'][:3]} ... {arrays['loss'][-1]:.6f}, lr {arrays['learning_rate'][:3]}, gnorm "
            f"{arrays['gnorm'][:3]}, alt loss {alt['loss'][:3]}", flush=True)


if __name__ == "__main__":
  main()
