"""Writes the goldens of the ORIGINAL run_squad.py `main()` flow (--do_prepro, --do_train's input, --do_predict).

  python tests/testdata/generate_squad_flow_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/squad_flow

Runs the original `run_squad.main` (commit bbaa3a6) under TF1 graph mode (`tf1_for_the_original`, plus
`tf.contrib.data.map_and_batch`/`parallel_interleave` as tf.data calls) with a stand-in Estimator and
`configure_tpu`, on the data, SentencePiece model and flags of tests/testdata/squad, for each setting of SETTINGS:
`--do_prepro` once per proc_id (python's `random` and numpy seeded before each run), then one run with
--do_train and --do_predict. The stand-in's `train` calls the original `input_fn` and records the files it
globbed; its `predict` runs the original eval `input_fn` in a session and yields deterministic head outputs
(`fake_head`, a function of each record's unique_id, input_ids and p_mask). Per setting it writes
`<setting>.npz`: every record of every file the original wrote (`<file>/<feature>`, in file order), the eval
features pickle's contents (`pkl/<field>`, the layout of tests/testdata/squad/features) and the head outputs
(`head/<key>`, in record order); `<setting>/` the three prediction JSON files as written; and meta.json: the
flags, the file names of output_dir and predict_dir, per record file its feature kinds and count, the train
input's glob and files, the `Result | ...` line and the returned evaluation. README.md is written by hand. About
15 seconds on two cores.
"""

import argparse
import json
import os
import pickle
import random
import shutil
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_classifier_goldens as classifier_goldens  # pylint: disable=wrong-import-position

SQUAD = os.path.join(HERE, "squad")
SPM = os.path.join(SQUAD, "spm", "spiece.model")
TRAIN = os.path.join(SQUAD, "data", "train-v2.0.json")
DEV = os.path.join(SQUAD, "data", "dev-v2.0.json")
TRAIN_FEATURES = ("unique_ids", "input_ids", "input_mask", "p_mask", "segment_ids", "cls_index", "start_positions",
                  "end_positions", "is_impossible")
EVAL_FEATURES = TRAIN_FEATURES[:6]
PKL_FIELDS = ("unique_id", "example_index", "doc_span_index", "paragraph_len", "cls_index", "start_position",
              "end_position", "is_impossible", "input_ids", "segment_ids", "input_mask", "p_mask",
              "tok_start_to_orig_index", "tok_end_to_orig_index", "token_is_max_context")
HEAD_KEYS = ("unique_ids", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
             "cls_logits")
# The original main's flags that the flow reads; the rest keep the original's defaults.
BASE_FLAGS = dict(do_prepro=False, num_proc=1, proc_id=0, do_train=True, do_predict=True, overwrite_data=False,
                  use_tpu=False, num_hosts=1, save_steps=None, iterations=1000, train_steps=10, train_batch_size=8,
                  predict_batch_size=32, shuffle_buffer=2048, n_best_size=5, start_n_top=5, end_n_top=5,
                  max_answer_length=10, init_checkpoint=None, model_config_path=None)
SETTINGS = {  # name -> (flags changed from BASE_FLAGS, proc_ids to preprocess, random seed)
    "L64_Q16_S24_cased_np1": (dict(max_seq_length=64, max_query_length=16, doc_stride=24, uncased=False,
                                   num_proc=1), (0,), 11),
    "L80_Q12_S32_uncased_np3": (dict(max_seq_length=80, max_query_length=12, doc_stride=32, uncased=True,
                                     num_proc=3, n_best_size=4, start_n_top=4, end_n_top=3,
                                     predict_batch_size=7), (0, 1, 2), 12),
    "L64_Q16_S24_uncased_np3_only1": (dict(max_seq_length=64, max_query_length=16, doc_stride=24, uncased=True,
                                           num_proc=3, max_answer_length=4), (1,), 13),
    # 38 training examples in 40 shards: shard 39 is empty (an empty record file).
    "L64_Q16_S24_cased_np40_empty": (dict(max_seq_length=64, max_query_length=16, doc_stride=24, uncased=False,
                                          num_proc=40, predict_batch_size=316), (0, 3, 39), 14),
}


def fake_head(unique_id, input_ids, p_mask, start_n_top, end_n_top, gold=None):
  """Deterministic head outputs of one feature, of the original's shapes and dtypes: float32 log-probs sorted
  descending over the positions p_mask allows (the ends near their start), int32 indices, a float32 cls logit.
  gold: (start, end) of the training answer in this window, or None: then the head is right 3 times in 4 (the
  gold span on top, a low cls logit), so that the evaluation's threshold search has something to find."""
  length = len(input_ids)
  rng = np.random.RandomState((int(unique_id) * 7919 + int(np.sum(input_ids))) % 2**32)
  allowed = np.asarray(p_mask) == 0
  right = gold is not None and rng.rand() < 0.75

  def top(logits, k):
    logits = np.where(allowed, logits, -1e30)
    log_probs = (logits - np.logaddexp.reduce(logits[allowed])).astype(np.float32)
    order = np.argsort(-log_probs, kind="stable")[:k]
    return log_probs[order], order.astype(np.int32)

  start_logits = rng.randn(length) * 2
  if right:
    start_logits[gold[0]] = 10
  start_lp, start_idx = top(start_logits, start_n_top)
  ends = []
  for s in start_idx:
    end_logits = -np.abs(np.arange(length) - s - rng.randint(0, 5)) + rng.randn(length) * 0.7
    if right and s == gold[0]:
      end_logits[gold[1]] = 10
    ends.append(top(end_logits, end_n_top))
  return {"unique_ids": np.int32(unique_id), "start_top_log_probs": start_lp, "start_top_index": start_idx,
          "end_top_log_probs": np.concatenate([e[0] for e in ends]),
          "end_top_index": np.concatenate([e[1] for e in ends]),
          "cls_logits": np.float32(rng.randn() * 3 - (4 if right else 0))}


class StandInEstimator:
  """The Estimator main() builds: train runs the original input_fn and records what it read; predict runs the
  eval input_fn in a session and yields `fake_head` per record (yield_single_examples)."""
  tf = None
  flags = None
  gold = {}
  trained = []
  predicted = []

  def __init__(self, **_):
    pass

  def train(self, input_fn, max_steps):
    del max_steps
    with self.tf.Graph().as_default():
      self.trained.append(input_fn({}).element_spec)  # builds the original's training pipeline

  def predict(self, input_fn, yield_single_examples=True):
    assert yield_single_examples
    tf = self.tf
    with tf.Graph().as_default():
      batch = tf.data.make_one_shot_iterator(input_fn({})).get_next()
      with tf.Session() as sess:
        while True:
          try:
            values = sess.run(batch)
          except tf.errors.OutOfRangeError:
            break
          for r in range(len(values["unique_ids"])):
            out = fake_head(values["unique_ids"][r], values["input_ids"][r], values["p_mask"][r],
                            self.flags.start_n_top, self.flags.end_n_top,
                            self.gold.get(int(values["unique_ids"][r])))
            self.predicted.append(out)
            yield out


def import_original(xlnet_src):
  from generate_train_step_goldens import tf1_for_the_original  # pylint: disable=import-outside-toplevel
  tf = tf1_for_the_original()
  tf.contrib.data = types.SimpleNamespace(
      map_and_batch=lambda map_func, batch_size, num_parallel_batches=None, drop_remainder=False: (
          lambda d: d.map(map_func).batch(batch_size, drop_remainder=drop_remainder)),
      parallel_interleave=lambda map_func, cycle_length, sloppy=False: (
          lambda d: d.interleave(map_func, cycle_length=cycle_length)))
  tf.estimator = types.SimpleNamespace(Estimator=StandInEstimator)
  StandInEstimator.tf = tf
  globbed = []
  gfile = types.SimpleNamespace(**{k: getattr(tf.gfile, k) for k in dir(tf.gfile) if not k.startswith("_")})
  glob = tf.gfile.Glob

  def sorted_glob(pattern):  # The file system's order is not reproducible.
    found = sorted(glob(pattern))
    globbed.append((pattern, found))
    return found

  gfile.Glob = sorted_glob
  tf.gfile = gfile
  logged = []
  info = tf.logging.info
  tf.logging = types.SimpleNamespace(**{k: getattr(tf.logging, k) for k in dir(tf.logging) if not k.startswith("_")})
  tf.logging.info = lambda msg, *args: (logged.append(msg % args if args else msg), info(msg, *args))
  sys.modules["tensorflow"] = tf
  sys.path.insert(0, xlnet_src)
  import run_squad  # pylint: disable=import-outside-toplevel
  run_squad.model_utils.configure_tpu = lambda flags: None
  return tf, run_squad, globbed, logged


def gold_spans(run_squad, changes):
  """unique_id -> (start, end) of the answer in that window, from the original's training conversion of the
  training file (unshuffled: its features are the evaluation's windows of the same questions, in the same order)."""
  gold = {}

  def keep(feature):
    if not feature.is_impossible:
      gold[feature.unique_id] = (feature.start_position, feature.end_position)

  run_squad.convert_examples_to_features(run_squad.read_squad_examples(TRAIN, is_training=True), load_spm(),
                                         changes["max_seq_length"], changes["doc_stride"], changes["max_query_length"],
                                         True, keep)
  return gold


def load_spm():
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  sp_model = spm.SentencePieceProcessor()
  sp_model.Load(SPM)
  return sp_model


def pickle_arrays(features, max_seq_length):
  """The pickled InputFeatures as arrays: scalars [F] (None -> -1), sequences [F, L], per-token paragraph fields
  [F, L] with -1 after paragraph_len (token_is_max_context: its dict's values for keys 0..paragraph_len-1)."""
  num = len(features)
  out = {}
  for k in PKL_FIELDS:
    if k in ("input_ids", "segment_ids", "input_mask", "p_mask"):
      out[k] = np.array([getattr(f, k) for f in features], np.float32 if "mask" in k else np.int32)
    elif k in ("tok_start_to_orig_index", "tok_end_to_orig_index", "token_is_max_context"):
      out[k] = np.full((num, max_seq_length), -1, np.int8 if k == "token_is_max_context" else np.int32)
      for r, f in enumerate(features):
        value = getattr(f, k)
        if k == "token_is_max_context":
          assert sorted(value) == list(range(f.paragraph_len))
          value = [int(value[i]) for i in range(f.paragraph_len)]
        out[k][r, :len(value)] = value
    else:
      values = [getattr(f, k) for f in features]
      out[k] = np.array([-1 if v is None else v for v in values], np.int64 if k == "unique_id" else np.int32)
  return out


def run_setting(tf, run_squad, globbed, logged, name, changes, proc_ids, seed, out_dir):
  arrays, meta = {}, {"flags": changes, "proc_ids": list(proc_ids), "seed": seed}
  with tempfile.TemporaryDirectory() as work:
    output_dir, predict_dir = os.path.join(work, "out"), os.path.join(work, "pred")
    flags = dict(BASE_FLAGS, **changes, spiece_model_file=SPM, train_file=TRAIN, predict_file=DEV,
                 output_dir=output_dir, predict_dir=predict_dir, model_dir=os.path.join(work, "model"))
    for proc_id in proc_ids:
      run_squad.FLAGS = types.SimpleNamespace(**dict(flags, do_prepro=True, proc_id=proc_id))
      random.seed(seed)
      np.random.seed(seed)
      run_squad.main(None)
    meta["prepro_files"] = sorted(os.listdir(output_dir))
    run_squad.FLAGS = StandInEstimator.flags = types.SimpleNamespace(**flags)
    StandInEstimator.gold = gold_spans(run_squad, changes)
    random.seed(seed)
    np.random.seed(seed)
    del globbed[:], logged[:], StandInEstimator.trained[:], StandInEstimator.predicted[:]
    returned = []
    write_predictions = run_squad.write_predictions
    run_squad.write_predictions = lambda *a: returned.append(write_predictions(*a)) or returned[-1]
    try:
      run_squad.main(None)
    finally:
      run_squad.write_predictions = write_predictions
    assert len(StandInEstimator.trained) == 1
    meta["train_glob"] = [(os.path.relpath(p, output_dir), [os.path.relpath(f, output_dir) for f in found])
                          for p, found in globbed if p.endswith("train.tf_record")]
    meta["eval_glob"] = [(os.path.relpath(p, output_dir), [os.path.relpath(f, output_dir) for f in found])
                         for p, found in globbed if p.endswith("eval.tf_record")]
    meta["output_dir"] = sorted(os.listdir(output_dir))
    meta["predict_dir"] = sorted(os.listdir(predict_dir))
    meta["records"] = {}
    for f in meta["output_dir"]:
      path = os.path.join(output_dir, f)
      if f.endswith(".tf_record"):
        names = TRAIN_FEATURES if ".train." in f else EVAL_FEATURES
        values, kinds = classifier_goldens.read_example_records(tf, path, names)
        arrays.update({f"{f}/{k}": v for k, v in values.items()})
        meta["records"][f] = {"kinds": kinds, "num": len(values.get("unique_ids", []))}
      elif f.endswith(".pkl"):
        with open(path, "rb") as fin:
          features = pickle.load(fin)
        assert all(type(x).__name__ == "InputFeatures" for x in features)
        arrays.update({f"pkl/{k}": v for k, v in pickle_arrays(features, changes["max_seq_length"]).items()})
    head = StandInEstimator.predicted
    arrays.update({f"head/{k}": np.stack([np.asarray(h[k]) for h in head]) for k in HEAD_KEYS})
    (result,) = returned
    meta["returned"] = dict(result)
    meta["result_lines"] = [line for line in logged if line.startswith("Result | ")]
    setting_dir = os.path.join(out_dir, name)
    os.makedirs(setting_dir, exist_ok=True)
    for f in meta["predict_dir"]:
      shutil.copyfile(os.path.join(predict_dir, f), os.path.join(setting_dir, f))
    # Predicting again reads the cached features (the pickle) and writes the same files.
    run_squad.FLAGS = StandInEstimator.flags = types.SimpleNamespace(**dict(flags, do_train=False))
    del logged[:], StandInEstimator.predicted[:]
    run_squad.write_predictions = lambda *a: returned.append(write_predictions(*a)) or returned[-1]
    try:
      run_squad.main(None)
    finally:
      run_squad.write_predictions = write_predictions
    assert returned[-1] == result and any(line.startswith("Loading eval features") for line in logged)
    assert sorted(os.listdir(output_dir)) == meta["output_dir"]
    for f in meta["predict_dir"]:
      assert open(os.path.join(predict_dir, f)).read() == open(os.path.join(setting_dir, f)).read(), f
  np.savez_compressed(os.path.join(out_dir, f"{name}.npz"), **arrays)
  return meta


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out_dir", default=os.path.join(HERE, "squad_flow"))
  args = parser.parse_args()
  os.makedirs(args.out_dir, exist_ok=True)
  tf, run_squad, globbed, logged = import_original(args.xlnet_src)
  meta = {"base_flags": BASE_FLAGS, "spm": os.path.relpath(SPM, HERE), "train_file": os.path.relpath(TRAIN, HERE),
          "predict_file": os.path.relpath(DEV, HERE), "settings": {}}
  for name, (changes, proc_ids, seed) in SETTINGS.items():
    meta["settings"][name] = run_setting(tf, run_squad, globbed, logged, name, changes, proc_ids, seed,
                                         args.out_dir)
    print(name, meta["settings"][name]["output_dir"], meta["settings"][name]["result_lines"])
  with open(os.path.join(args.out_dir, "meta.json"), "w", encoding="utf-8") as f:
    json.dump(meta, f, indent=1)
    f.write("\n")


if __name__ == "__main__":
  main()
