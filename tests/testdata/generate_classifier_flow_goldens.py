"""Writes classifier eval / predict goldens with the ORIGINAL run_classifier.py `main()`: its log lines, the metrics
it returns and its prediction files, over several checkpoints.

  python tests/testdata/generate_classifier_flow_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/classifier_flow

Writes OUT_DIR/ckpt/<dir>/model.ckpt-N (`write_checkpoints`): tests/testdata/train_step/ckpt (n_token 1000, the
spm of tests/testdata/data/spm) with its head renamed as the original builds it (`classification_toy` for
`--cls_scope=toy`, `classification_imdb` of 2 classes: the first two columns, `regression_sts-b`: `regression_toyreg`)
and perturbed per checkpoint (numpy seeded), saved by a TF1 Saver in the order of CKPTS (so the `checkpoint` state
file names the last saved, not always the highest step), each with its `global_step` variable (normally N; one
copied as is, 0, under a name with another step). Then runs the original `run_classifier.main` (github.com/zihangdai
/xlnet at bbaa3a6, a checkout passed as --xlnet_src and never copied here) under `tensorflow.compat.v1` (imported by
`generate_classifier_goldens.import_original`) once per configuration (`configs`) on tests/testdata/classifier/raw,
with a copy of the checkpoint directory as --model_dir. `tf.gfile.ListDirectory` lists sorted (as there).
`model_utils.configure_tpu` and the Estimator are stand-ins (`flow_estimator`), doing what TF 1.13's do:
evaluate(checkpoint_path) builds the EVAL graph (global step, the original `model_fn` on the original `input_fn`),
adds the `loss` metric (`tf.metrics.mean` of the spec's loss), restores the checkpoint with a Saver of the global
variables, runs the metrics' update ops `steps` times and returns the values and the checkpoint's `global_step`;
predict(checkpoint_path or the state file's latest) runs the PREDICT `model_fn` over the input to its end and yields
one example at a time. TF 2 has no tf.contrib: `streaming_pearson_correlation` is TF 1.13's algorithm
(tensorflow/contrib/metrics/python/ops/metric_ops.py: three `streaming_covariance`s, batch-wise co-moment updates in
float32, cov / (sqrt(var_p) * sqrt(var_l))), written here in TF ops (`streaming_pearson_correlation`).

Written to OUT_DIR: `ckpt/`, `meta.json` (per configuration: task, model dir, flags; the lines main logged from
`Num of eval samples` on, with the model dir as `<model_dir>`; the results evaluate returned, per checkpoint; the
prediction files' text) and `<config>.npz` (`eval_logits` float32 [steps * eval_batch_size, n] (n = 1 squeezed for
regression) per evaluated checkpoint, in evaluation order, stacked; `eval_per_example_loss` likewise). README.md is
written by hand. About 20 seconds on two cores.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_classifier_goldens as classifier_goldens  # pylint: disable=wrong-import-position

BASE_CKPT = os.path.join(HERE, "train_step", "ckpt")
RAW = os.path.join(HERE, "classifier", "raw")
SPM = classifier_goldens.SPM
# The original main's flags; dropout 0 (its EVAL and PREDICT modes build with is_training False anyway).
BASE_FLAGS = dict(do_train=False, do_eval=True, do_predict=True, eval_split="dev", eval_batch_size=4,
                  predict_batch_size=3, train_batch_size=4, num_passes=1, overwrite_data=False, use_tpu=False,
                  save_steps=None, iterations=1000, train_steps=1000, predict_ckpt=None, eval_all_ckpt=True,
                  predict_threshold=0.0, num_core_per_host=1, num_hosts=1, uncased=False, max_seq_length=32,
                  cls_scope=None, init_checkpoint=None, dropout=0.0, dropatt=0.0, clamp_len=-1, summary_type="last",
                  use_summ_proj=True, use_bfloat16=False, init="normal", init_std=0.02, init_range=0.1,
                  shuffle_buffer=2048)
# Per checkpoint directory: the head (its scope there <- its scope in BASE_CKPT, columns kept), and the checkpoints
# in the order saved: (step in the name, global_step variable, perturbation seed, scale).
CKPTS = {
    "mnli": dict(head=("classification_toy", "classification_toy", 3),
                 ckpts=[(100, 100, 1, 0.5), (300, 300, 2, 0.5), (200, 200, 3, 0.5)]),
    "imdb": dict(head=("classification_imdb", "classification_toy", 2),
                 ckpts=[(5, 0, 0, 0.0), (10, 10, 4, 0.8), (40, 40, 5, 0.8)]),
    "sts-b": dict(head=("regression_sts-b", "regression_toyreg", 1),
                  ckpts=[(7, 7, 6, 0.5), (21, 21, 7, 0.5), (14, 14, 8, 0.5)]),
}


def configs():
  """name -> (task_name, checkpoint dir, flags changed from BASE_FLAGS)."""
  return {
      "mnli_matched_all": ("mnli_matched", "mnli", dict(cls_scope="toy")),
      "mnli_mismatched_last_uncased": ("mnli_mismatched", "mnli", dict(cls_scope="toy", eval_all_ckpt=False,
                                                                       uncased=True, max_seq_length=48)),
      "imdb_all_threshold": ("imdb", "imdb", dict(predict_threshold=1.5, eval_batch_size=3)),
      "imdb_predict_only": ("imdb", "imdb", dict(do_eval=False, predict_threshold=1.9, predict_batch_size=2)),
      "sts-b_all": ("sts-b", "sts-b", dict(is_regression=True)),
      "sts-b_predict_ckpt_test": ("sts-b", "sts-b", dict(is_regression=True, do_eval=False, eval_split="test",
                                                         predict_ckpt="model.ckpt-7")),
  }


def write_checkpoints(tf, root):
  """The checkpoint directories of CKPTS under `root` (the module docstring)."""
  reader = tf.train.load_checkpoint(os.path.join(BASE_CKPT, "xlnet_model.ckpt"))
  base = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
  if os.path.exists(root):
    shutil.rmtree(root)
  for directory, spec in CKPTS.items():
    scope, source, n = spec["head"]
    model_dir = os.path.join(root, directory)
    os.makedirs(model_dir)
    for step, global_step, seed, scale in spec["ckpts"]:
      rng = np.random.RandomState(seed)
      values = {k: v for k, v in base.items() if k.startswith("model/transformer/") or "sequnece_summary" in k}
      for part in ("kernel", "bias"):
        value = base[f"model/{source}/logit/{part}"][..., :n]
        values[f"model/{scope}/logit/{part}"] = (value + scale * rng.normal(size=value.shape)).astype(np.float32)
      with tf.Graph().as_default():
        variables = [tf.Variable(v, name=k) for k, v in sorted(values.items())]
        variables.append(tf.Variable(np.int64(global_step), name="global_step"))
        saver = tf.train.Saver(variables, max_to_keep=None)
        with tf.Session() as sess:
          sess.run(tf.global_variables_initializer())
          saver.save(sess, os.path.join(model_dir, "model.ckpt"), global_step=step, write_meta_graph=False)
    names = [f"model.ckpt-{step}" for step, *_ in spec["ckpts"]]
    with open(os.path.join(model_dir, "checkpoint"), "w", encoding="utf-8") as f:  # relative paths: portable
      f.write(f'model_checkpoint_path: "{names[-1]}"\n' + "".join(f'all_model_checkpoint_paths: "{n}"\n'
                                                                 for n in names))


def streaming_pearson_correlation(tf, predictions, labels, weights):
  """TF 1.13's `tf.contrib.metrics.streaming_pearson_correlation` (value, update_op), in its float32 ops."""

  def safe_div(num, den):
    return tf.where(tf.greater(den, 0), tf.truediv(num, den), 0 * num)

  def streaming_covariance(x, y, name):
    with tf.variable_scope(None, name):
      def local(var_name):
        return tf.get_variable(var_name, [], tf.float32, initializer=tf.zeros_initializer(), trainable=False,
                               collections=[tf.GraphKeys.LOCAL_VARIABLES, tf.GraphKeys.METRIC_VARIABLES])
      count, mean_x, mean_y, comoment = (local(n) for n in ("count", "mean_prediction", "mean_label", "comoment"))
      batch_count = tf.reduce_sum(weights)
      update_count = tf.assign_add(count, batch_count)
      prev_count = update_count - batch_count
      batch_mean_x = safe_div(tf.reduce_sum(x * weights), batch_count)
      delta_mean_x = safe_div((batch_mean_x - mean_x) * batch_count, update_count)
      update_mean_x = tf.assign_add(mean_x, delta_mean_x)
      prev_mean_x = update_mean_x - delta_mean_x
      batch_mean_y = safe_div(tf.reduce_sum(y * weights), batch_count)
      delta_mean_y = safe_div((batch_mean_y - mean_y) * batch_count, update_count)
      update_mean_y = tf.assign_add(mean_y, delta_mean_y)
      prev_mean_y = update_mean_y - delta_mean_y
      batch_comoment = tf.reduce_sum((x - batch_mean_x) * (y - batch_mean_y) * weights)
      delta_comoment = (batch_comoment + (prev_mean_x - batch_mean_x) * (prev_mean_y - batch_mean_y) *
                        (prev_count * batch_count / update_count))
      update_comoment = tf.assign_add(comoment, delta_comoment)
      value = tf.where(tf.less_equal(count, 1.), float("nan"), tf.truediv(comoment, count - 1))
      with tf.control_dependencies([update_comoment]):
        update = tf.where(tf.less_equal(count, 1.), float("nan"), tf.truediv(comoment, count - 1))
      return value, update

  with tf.variable_scope(None, "pearson_r"):
    weights = tf.cast(weights, tf.float32) + tf.zeros_like(labels)  # broadcast_weights
    cov, update_cov = streaming_covariance(predictions, labels, "covariance")
    var_p, update_var_p = streaming_covariance(predictions, predictions, "variance_predictions")
    var_l, update_var_l = streaming_covariance(labels, labels, "variance_labels")
    value = tf.truediv(cov, tf.sqrt(var_p) * tf.sqrt(var_l))
    update = tf.truediv(update_cov, tf.sqrt(update_var_p) * tf.sqrt(update_var_l))
  return value, update


def flow_estimator(tf, function_builder, observed, model_dir):
  """The Estimator class main() builds (the module docstring); the model_fn's outputs go to `observed`."""
  heads = {name: getattr(function_builder, name) for name in ("get_classification_loss", "get_regression_loss")}

  def graph(input_fn, mode):
    tf.reset_default_graph()
    global_step = tf.train.get_or_create_global_step()
    features = tf.data.make_one_shot_iterator(input_fn({})).get_next()
    for name, fn in heads.items():
      setattr(function_builder, name, lambda *a, fn=fn: observed.__setitem__("tensors", fn(*a)) or observed["tensors"])
    try:
      return global_step, features, FlowEstimator.model_fn(features, None, mode, {})
    finally:
      for name, fn in heads.items():
        setattr(function_builder, name, fn)

  class FlowEstimator:
    model_fn = None

    def __init__(self, model_fn, **_):
      FlowEstimator.model_fn = staticmethod(model_fn)

    def train(self, **_):
      raise AssertionError("no training here")

    def evaluate(self, input_fn, steps, checkpoint_path):
      global_step, _, spec = graph(input_fn, tf.estimator.ModeKeys.EVAL)
      metrics = dict(spec["eval_metric_ops"], loss=tf.metrics.mean(spec["loss"]))
      names = sorted(metrics)
      _, per_example_loss, logits = observed["tensors"]
      with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        tf.train.Saver().restore(sess, checkpoint_path)
        batches = [sess.run([[metrics[n][1] for n in names], logits, per_example_loss])[1:] for _ in range(steps)]
        values = sess.run([metrics[n][0] for n in names] + [global_step])
      observed.setdefault("logits", []).append(np.concatenate([b[0] for b in batches]))
      observed.setdefault("per_example_loss", []).append(np.concatenate([b[1] for b in batches]))
      results = dict(zip(names + ["global_step"], values))
      observed.setdefault("results", []).append({k: v.item() for k, v in results.items()})
      return results

    def predict(self, input_fn, yield_single_examples, checkpoint_path=None):
      assert yield_single_examples
      _, _, spec = graph(input_fn, tf.estimator.ModeKeys.PREDICT)
      observed["predict_ckpt"] = checkpoint_path or tf.train.latest_checkpoint(model_dir)
      with tf.Session() as sess:
        tf.train.Saver().restore(sess, observed["predict_ckpt"])
        while True:
          try:
            batch = sess.run(spec["predictions"])
          except tf.errors.OutOfRangeError:
            return
          for i in range(len(batch["logits"])):
            yield {k: v[i] for k, v in batch.items()}

  return FlowEstimator


def import_original(xlnet_src):
  tf, run_classifier = classifier_goldens.import_original(xlnet_src)
  tf.contrib.data = types.SimpleNamespace(map_and_batch=tf.data.experimental.map_and_batch)
  tf.contrib.metrics = types.SimpleNamespace(
      streaming_pearson_correlation=lambda p, l, weights: streaming_pearson_correlation(tf, p, l, weights))
  return tf, run_classifier


def run_config(tf, run_classifier, ckpt_root, task, directory, changes):
  """The original main on one configuration: (logged lines, observed, {file name: text})."""
  observed, logged = {}, []
  info = tf.logging.info
  with tempfile.TemporaryDirectory() as work:
    model_dir = os.path.join(work, "model")
    shutil.copytree(os.path.join(ckpt_root, directory), model_dir)
    flags = dict(BASE_FLAGS, **changes, task_name=task, data_dir=os.path.join(RAW, classifier_goldens.TASK_DIRS[task]),
                 spiece_model_file=SPM, output_dir=os.path.join(work, "out"), model_dir=model_dir,
                 predict_dir=os.path.join(work, "predict"), model_config_path=os.path.join(BASE_CKPT,
                                                                                           "xlnet_config.json"))
    flags.setdefault("is_regression", False)
    if flags["predict_ckpt"]:
      flags["predict_ckpt"] = os.path.join(model_dir, flags["predict_ckpt"])
    run_classifier.FLAGS = types.SimpleNamespace(**flags)
    tf.estimator = types.SimpleNamespace(
        ModeKeys=types.SimpleNamespace(TRAIN="train", EVAL="eval", PREDICT="infer"),
        EstimatorSpec=lambda **fields: fields,
        Estimator=flow_estimator(tf, run_classifier.function_builder, observed, model_dir))
    tf.logging.info = lambda msg, *args: (logged.append(msg % args if args else msg), info(msg, *args))
    try:
      run_classifier.main(None)
    finally:
      tf.logging.info = info
    predictions = {}
    if flags["do_predict"]:
      for name in sorted(os.listdir(flags["predict_dir"])):
        with open(os.path.join(flags["predict_dir"], name), encoding="utf-8") as f:
          predictions[name] = f.read()
      observed["predict_ckpt"] = os.path.relpath(observed["predict_ckpt"], model_dir)
  start = next(i for i, line in enumerate(logged) if line.startswith("Num of eval samples"))
  lines = [line.replace(model_dir, "<model_dir>") for line in logged[start:]
           if line.startswith(("Num of eval samples", "Add ", "=", "Eval result", "Best result"))]
  return lines, observed, predictions


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out_dir", default=os.path.join(HERE, "classifier_flow"))
  args = parser.parse_args()
  tf, run_classifier = import_original(args.xlnet_src)
  ckpt_root = os.path.join(args.out_dir, "ckpt")
  write_checkpoints(tf, ckpt_root)
  meta = {"base_flags": BASE_FLAGS, "spm": os.path.relpath(SPM, HERE),
          "model_config": os.path.relpath(os.path.join(BASE_CKPT, "xlnet_config.json"), HERE),
          "ckpts": CKPTS, "configs": {}}
  for name, (task, directory, changes) in configs().items():
    lines, observed, predictions = run_config(tf, run_classifier, ckpt_root, task, directory, changes)
    if "logits" in observed:
      np.savez_compressed(os.path.join(args.out_dir, f"{name}.npz"),
                          eval_logits=np.stack(observed["logits"]).astype(np.float32),
                          eval_per_example_loss=np.stack(observed["per_example_loss"]).astype(np.float32))
    data_dir = os.path.relpath(os.path.join(RAW, classifier_goldens.TASK_DIRS[task]), HERE)
    meta["configs"][name] = {"task_name": task, "data_dir": data_dir, "ckpt_dir": directory, "flags": changes,
                             "lines": lines,
                             "eval_results": observed.get("results"), "predict_ckpt": observed.get("predict_ckpt"),
                             "predictions": predictions}
    print(name, *lines, *predictions.items(), sep="\n")
  with open(os.path.join(args.out_dir, "meta.json"), "w", encoding="utf-8") as f:
    json.dump(meta, f, indent=1, ensure_ascii=False)
    f.write("\n")


if __name__ == "__main__":
  main()
