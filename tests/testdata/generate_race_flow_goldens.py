"""Writes RACE flow goldens with the ORIGINAL run_race.py `main()`: record files and the metrics its eval logs.

  python tests/testdata/generate_race_flow_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/race_flow

Writes a small RACE tree with hard text (`write_data`: unicode, quotes, CR/LF, empty options and questions, options
that alias, several `_`, long articles and question+option strings that need truncation, a train/dev/test split) to
OUT_DIR/data, then runs the original `run_race.main` (github.com/zihangdai/xlnet at bbaa3a6, a checkout passed as
--xlnet_src and never copied here) under `tensorflow.compat.v1` (`generate_train_step_goldens.tf1_for_the_original`,
imported by `generate_task_step_goldens.import_script`) once per configuration (`configs`) with --do_train and
--do_eval and its FLAGS set as a namespace. python's `random` and numpy are seeded with the configuration's seed just
before main (its `random.shuffle` of the training examples). `tf.gfile.ListDirectory` lists sorted here, so the
order is the name order (the original's is the file system's). `model_utils.configure_tpu` is a stand-in and so is
the Estimator (`FlowEstimator`): train does nothing; evaluate does what TF 1.x `Estimator.evaluate` does with an
empty model_dir: builds the graph with the global step, calls the original EVAL `model_fn` on the original
`input_fn` (`init_from_checkpoint` loads --init_checkpoint, tests/testdata/race/ckpt), adds the `loss` metric
(`tf.metrics.mean` of the spec's loss), runs the metrics' update ops for `steps` batches and returns the values
(keys sorted, then `global_step`), which main logs as its `Eval | ...` line.

Written to OUT_DIR: `data/` (the inputs), `<config>.npz` (per record kind K in train, eval, every record in file
order: `K_input_ids` int32 [R, 4L], `K_input_mask` float32 [R, 4L], `K_segment_ids` int8 [R, 4L], `K_label_ids`
int32 [R], `K_is_real_example` int8 [R]; `eval_logits` float32 [R, 4] and `eval_per_example_loss` float32 [R], the
model_fn's per batch), `meta.json` (per configuration: data dir, flags, seed, the record file names, feature kinds
and per file the examples in the order written as `example_key`s, the eval steps, the returned metrics and the
logged `Eval | ...` line). README.md is written by hand. About 30 seconds on two cores.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_classifier_goldens as classifier_goldens  # pylint: disable=wrong-import-position
import generate_task_step_goldens as task_step_goldens  # pylint: disable=wrong-import-position

RACE = os.path.join(HERE, "race")
SPM = os.path.join(RACE, "spm", "spiece.model")
CKPT = os.path.join(RACE, "ckpt")
KINDS = ("train", "eval")
FEATURES = classifier_goldens.FEATURES
# The original main's flags; dropout 0 (as the Estimator's EVAL mode builds with is_training False anyway).
BASE_FLAGS = dict(do_train=True, do_eval=True, eval_split="dev", eval_batch_size=4, train_batch_size=2,
                  overwrite_data=False, use_tpu=False, save_steps=None, iterations=1000, train_steps=1000,
                  num_core_per_host=1, num_hosts=1, shuffle_buffer=2048, high_only=False, middle_only=False,
                  dropout=0.0, dropatt=0.0, clamp_len=-1, summary_type="last", use_summ_proj=True,
                  use_bfloat16=False, init="normal", init_std=0.02, init_range=0.1)

LONG_QUESTION = "According to the passage, which of the following statements about the old town is true _ ?"


def write_data(root):
  """The RACE tree of the docstring under `root`."""
  if os.path.exists(root):
    shutil.rmtree(root)
  long = classifier_goldens.reviews(0, 6)
  accents = classifier_goldens.ACCENTS
  misc = classifier_goldens.MISC
  files = {
      # Short articles: every option fits, so the original's option aliasing shows.
      "train/middle/m1.txt": dict(
          article="Tom has a dog.\r\nIt is \u201cbrown\u201d and ``small''. Caf\u00e9!",
          questions=["What does Tom have?", "The dog is _ and _.", "_"],
          options=[["a dog", "a cat", "", "a bird"], ["brown", "small", "brown", "\u00e9l\u00e8ve"],
                   ["x", "y", "z", "w"]],
          answers=["A", "B", "D"], id="m1"),
      "train/middle/m10.txt": dict(article=accents, questions=["", "Quote \"this\" _"],
                                   options=[["A", "B", "C", "D"], ["'a'", '"b"', "c_d", "  spaced  "]],
                                   answers=["C", "A"], id="m10"),
      "train/high/h2.txt": dict(article=long[0] + "\n\n" + long[1], questions=[LONG_QUESTION, "Why?"],
                                options=[[long[2][:200], "short", "", misc], ["because", "since", "as", "for"]],
                                answers=["A", "D"]),
      "dev/middle/1.txt": dict(article="A short one.\rLone return, tab\there.",
                               questions=["Which _ is it?", "Pick one."],
                               options=[["first", "second", "third", "fourth"], ["", "", "", ""]],
                               answers=["B", "A"]),
      "dev/middle/10.txt": dict(article=misc + " " + accents, questions=["What is _ __ _?"],
                                options=[["\u4e2d\u6587", "\ud55c\uad6d\uc5b4", "\U0001f600", "\u2460"]],
                                answers=["C"]),
      "dev/middle/2.txt": dict(article=long[2], questions=["What did the writer think?", LONG_QUESTION],
                               options=[["good", "bad", "so-so", "nothing"], [long[3][:300], "b", "c", "d"]],
                               answers=["D", "A"]),
      "dev/high/h1.txt": dict(article=long[4], questions=["The review is _."],
                              options=[["positive", "negative", "neutral", "mixed"]], answers=["B"]),
      "dev/high/h3.txt": dict(article="Tiny.", questions=["Tiny?", "_ _"],
                              options=[["yes", "no", "maybe", "so"], ["a", "b", "c", "d"]], answers=["A", "C"]),
      "test/middle/t1.txt": dict(article=accents + "\n" + long[5][:400], questions=["What _?", "Name it."],
                                 options=[["one", "two", "three", "four"], ["\u00c9", "\u00e9", "E", "e"]],
                                 answers=["A", "B"]),
      "test/middle/t0.txt": dict(article="Short.", questions=["Is it short?"],
                                 options=[["yes", "no", "yes", "no"]], answers=["C"]),
      "test/high/t2.txt": dict(article=long[1], questions=[LONG_QUESTION],
                               options=[["a", "b", "c", long[0][:250]]], answers=["D"]),
  }
  for i, (name, content) in enumerate(sorted(files.items())):
    path = os.path.join(root, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
      json.dump(content, f, ensure_ascii=bool(i % 2))  # half as \u escapes, half as UTF-8


def configs():
  """name -> (data dir below HERE, flags changed from BASE_FLAGS, seed)."""
  flow = os.path.join("race_flow", "data")
  return {
      "both_L64_QA16_cased_dev": (flow, dict(max_seq_length=64, max_qa_length=16, uncased=False), 1),
      "high_L48_QA10_uncased_dev": (flow, dict(max_seq_length=48, max_qa_length=10, uncased=True, high_only=True,
                                               eval_batch_size=3), 2),
      "middle_L64_QA16_uncased_test": (flow, dict(max_seq_length=64, max_qa_length=16, uncased=True,
                                                  middle_only=True, eval_split="test", eval_batch_size=5), 3),
      "both_L48_QA10_cased_test": (flow, dict(max_seq_length=48, max_qa_length=10, uncased=False, eval_split="test",
                                              eval_batch_size=2), 4),
      "goldens_L64_QA16_cased_dev": (os.path.join("race", "data"), dict(max_seq_length=64, max_qa_length=16,
                                                                        uncased=False, eval_batch_size=5), 5),
  }


def example_key(example):
  """A short key naming an example (the same for ours): 12 hex digits of (context, qa_list, label, level), or
  `<pad>`."""
  if not hasattr(example, "qa_list"):
    return "<pad>"
  text = json.dumps([example.context, list(example.qa_list), example.label, example.level])
  return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def import_original(xlnet_src):
  tf, function_builder, _, run_race = task_step_goldens.import_script(xlnet_src, "run_race")
  tf.contrib.data = types.SimpleNamespace(map_and_batch=tf.data.experimental.map_and_batch)
  gfile = types.SimpleNamespace(**{k: getattr(tf.gfile, k) for k in dir(tf.gfile) if not k.startswith("_")})
  listdir = tf.gfile.ListDirectory
  gfile.ListDirectory = lambda path: sorted(listdir(path))  # The file system's order is not reproducible.
  tf.gfile = gfile
  run_race.model_utils.configure_tpu = lambda flags: None
  return tf, function_builder, run_race


def flow_estimator(tf, function_builder, observed):
  """The Estimator class main() builds (see the module docstring); the model_fn's outputs go to `observed`."""
  get_race_loss = function_builder.get_race_loss

  def recording_race_loss(flags, features, is_training):
    out = get_race_loss(flags, features, is_training)
    observed["tensors"] = out
    return out

  class FlowEstimator:

    def __init__(self, model_fn, **_):
      self.model_fn = model_fn

    def train(self, **_):
      pass

    def evaluate(self, input_fn, steps):
      tf.reset_default_graph()
      global_step = tf.train.get_or_create_global_step()
      features = tf.data.make_one_shot_iterator(input_fn({})).get_next()
      function_builder.get_race_loss = recording_race_loss
      try:
        spec = self.model_fn(features, None, tf.estimator.ModeKeys.EVAL, {})
      finally:
        function_builder.get_race_loss = get_race_loss
      metrics = dict(spec["eval_metric_ops"], loss=tf.metrics.mean(spec["loss"]))
      names = sorted(metrics)
      _, per_example_loss, logits = observed["tensors"]
      with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        batches = [sess.run([[metrics[n][1] for n in names], logits, per_example_loss])[1:] for _ in range(steps)]
        values = sess.run([metrics[n][0] for n in names] + [global_step])
      observed["logits"] = np.concatenate([b[0] for b in batches])
      observed["per_example_loss"] = np.concatenate([b[1] for b in batches])
      observed["results"] = dict(zip(names + ["global_step"], values))
      return observed["results"]

  return FlowEstimator


def run_config(tf, function_builder, run_race, data_dir, changes, seed):
  """The original main on one configuration: ({kind: (file name, arrays, kinds, example keys)}, eval results)."""
  written, observed, logged = {}, {}, []
  convert = run_race.file_based_convert_examples_to_features

  def recording_convert(examples, tokenize_fn, output_file):
    convert(examples, tokenize_fn, output_file)
    kind = "train" if output_file.endswith(".train.tf_record") else "eval"
    written[kind] = (os.path.basename(output_file), [example_key(e) for e in examples])

  info = tf.logging.info
  with tempfile.TemporaryDirectory() as work:
    flags = dict(BASE_FLAGS, **changes, data_dir=data_dir, spiece_model_file=SPM, output_dir=os.path.join(work, "out"),
                 model_dir=os.path.join(work, "model"), model_config_path=os.path.join(CKPT, "xlnet_config.json"),
                 init_checkpoint=os.path.join(CKPT, "xlnet_model.ckpt"))
    run_race.FLAGS = types.SimpleNamespace(**flags)
    run_race.file_based_convert_examples_to_features = recording_convert
    tf.estimator.Estimator = flow_estimator(tf, function_builder, observed)
    tf.logging.info = lambda msg, *args: (logged.append(msg % args if args else msg), info(msg, *args))
    random.seed(seed)
    np.random.seed(seed)
    try:
      run_race.main(None)
    finally:
      run_race.file_based_convert_examples_to_features = convert
      tf.logging.info = info
    out = {}
    for kind in KINDS:
      name, keys = written[kind]
      arrays, kinds = classifier_goldens.read_records(tf, os.path.join(work, "out", name))
      assert len(keys) == len(arrays["input_ids"]), (kind, len(keys))
      out[kind] = (name, arrays, kinds, keys)
    assert sorted(os.listdir(os.path.join(work, "out"))) == sorted(v[0] for v in out.values())
  (eval_line,) = [line for line in logged if line.startswith("Eval | ")]
  (num_line,) = [line for line in logged if line.startswith("Num of eval samples")]
  return out, dict(eval_line=eval_line, num_line=num_line, logits=observed["logits"],
                   per_example_loss=observed["per_example_loss"],
                   results={k: v.item() for k, v in observed["results"].items()})


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out_dir", default=os.path.join(HERE, "race_flow"))
  args = parser.parse_args()
  write_data(os.path.join(args.out_dir, "data"))
  tf, function_builder, run_race = import_original(args.xlnet_src)
  meta = {"base_flags": BASE_FLAGS, "spm": os.path.relpath(SPM, HERE), "ckpt": os.path.relpath(CKPT, HERE),
          "configs": {}}
  for name, (data_dir, changes, seed) in configs().items():
    out, evaluation = run_config(tf, function_builder, run_race, os.path.join(HERE, data_dir), changes, seed)
    arrays = {f"{kind}_{k}": v for kind, (_, a, _, _) in out.items() for k, v in a.items()}
    arrays.update(eval_logits=evaluation["logits"].astype(np.float32),
                  eval_per_example_loss=evaluation["per_example_loss"].astype(np.float32))
    np.savez_compressed(os.path.join(args.out_dir, f"{name}.npz"), **arrays)
    flags = dict(changes)
    meta["configs"][name] = {
        "data_dir": data_dir, "flags": flags, "seed": seed,
        "files": {kind: {"name": f, "feature_kinds": kinds, "examples": keys}
                  for kind, (f, _, kinds, keys) in out.items()},
        "eval_steps": len(out["eval"][3]) // dict(BASE_FLAGS, **changes)["eval_batch_size"],
        "num_eval_line": evaluation["num_line"], "eval_results": evaluation["results"],
        "eval_line": evaluation["eval_line"]}
    print(name, {kind: (f, len(keys)) for kind, (f, _, _, keys) in out.items()}, evaluation["eval_line"])
  with open(os.path.join(args.out_dir, "meta.json"), "w", encoding="utf-8") as f:
    json.dump(meta, f, indent=1, ensure_ascii=False)
    f.write("\n")


if __name__ == "__main__":
  main()
