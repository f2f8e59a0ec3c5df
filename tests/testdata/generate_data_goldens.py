"""Writes pretraining-record goldens with the ORIGINAL data_utils.py, for configurations tests/testdata/data lacks.

  python tests/testdata/generate_data_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/data_configs

Runs the original `data_utils.create_data` (github.com/zihangdai/xlnet at bbaa3a6, a checkout passed as --xlnet_src
and never copied here) under `tensorflow.compat.v1` (`generate_train_step_goldens.tf1_for_the_original`, and
protobuf taking numpy bools as 0 and 1, as TF 1.13's did), its `FLAGS` set per configuration (`CONFIGS`), python's
`random` seeded with the configuration's `py_seed` just before (the original leaves it unseeded; numpy it seeds
itself with `100*task + pass_id`). Input: `corpus/`, four shards
cut from tests/testdata/data/corpus/imdb-0.txt (`write_corpus`: reviews 0-9, 10-19, 20-29, 30-39; the third without
its last blank line, the fourth with one blank line doubled), SentencePiece model tests/testdata/data/spm.

Written to OUT_DIR: `corpus/*.txt`, `corpus_ids/*.txt` (the same as token ids), `<name>.npz` per configuration
(every record in file order: `input`, `target` int16 [R, seq_len], `is_masked`, `seg_id` int8 [R, seq_len], `label`
int8 [R]), for the configurations of `INPUT_GOLDENS` `<name>_input.npz` (the original `get_input_fn`'s batches, every
feature but perm_mask, [n, bsz_per_host, ...] as small ints), `meta.json` (every configuration's flags, corpus,
seeds, record file name and `num_batch`; the input goldens' perm_size, batch count and dtypes; the flags the original
rejects). README.md is written by hand. About 15 seconds on two cores.
"""

import argparse
import glob
import json
import os
import random
import sys
import tempfile
import types

import numpy as np
import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_CORPUS = os.path.join(HERE, "data", "corpus", "imdb-0.txt")
SPM = os.path.join(HERE, "data", "spm", "spiece.model")
# data_utils.py's flags (its defaults where the golden of tests/testdata/data does not set them) ...
BASE_FLAGS = dict(use_tpu=False, bsz_per_host=4, num_core_per_host=1, seq_len=32, reuse_len=16, num_predict=6,
                  mask_alpha=6, mask_beta=1, bi_data=True, uncased=False, use_eod=True, from_raw_text=True,
                  split="train", task=0, num_task=1, pass_id=0)
# ... and each configuration's changes to them, with the seed of python's `random`.
CONFIGS = {
    "uni": dict(bi_data=False, py_seed=11),
    "uncased": dict(uncased=True, py_seed=12),
    "no_eod": dict(use_eod=False, py_seed=13),
    "seq48_np12": dict(seq_len=48, reuse_len=24, num_predict=12, py_seed=14),
    "np13_alpha4_beta2": dict(num_predict=13, mask_alpha=4, mask_beta=2, py_seed=15),  # Odd: halves 7 and 6.
    # Halves of 15 of 16 tokens: the span loop ends at the segment end and the random fill does most of the work;
    # alpha 3 beta 2 makes ctx_size 1 for n = 1 (numpy's choice(1) draws nothing).
    "np30_alpha3_beta2": dict(num_predict=30, mask_alpha=3, mask_beta=2, py_seed=16),
    "np32": dict(num_predict=32, py_seed=17),  # Every position.
    "np1_uni": dict(num_predict=1, bi_data=False, py_seed=18),  # The second half's goal is 0.
    "bsz8_core2": dict(use_tpu=True, bsz_per_host=8, num_core_per_host=2, py_seed=19),
    "bsz8_core2_notpu": dict(bsz_per_host=8, num_core_per_host=2, py_seed=20),  # Forced to one core.
    "bsz6_core3_uni": dict(use_tpu=True, bsz_per_host=6, num_core_per_host=3, bi_data=False, py_seed=21),
    "task1_of_2_dev": dict(num_task=2, task=1, split="dev", py_seed=22),  # numpy seed 100.
    "pass1": dict(pass_id=1, py_seed=23),  # numpy seed 1.
    "task1_pass2_uncased_uni_no_eod": dict(num_task=2, task=1, pass_id=2, uncased=True, bi_data=False,
                                           use_eod=False, py_seed=24),  # numpy seed 102.
    # The shortest records: A and B share 1 token (the trimming loop shortens B on a tie: B is empty), halves of 4.
    "seq8_np5": dict(seq_len=8, reuse_len=4, num_predict=5, py_seed=25),
    "ids_input": dict(from_raw_text=False, corpus="corpus_ids", py_seed=26),  # Lines of token ids.
}
# Flags the original cannot write records with (an assertion fails); ours rejects them too (`validate_options`).
REJECTED = {
    "seq48_reuse20": dict(seq_len=48, reuse_len=20, num_predict=12, py_seed=0),
}
# Configurations whose records also go through the original input pipeline (`get_input_fn`, its parser and
# `_local_perm`): the first `batches` batches (None: all) of bsz_per_host rows, every feature but the random
# perm_mask.
INPUT_GOLDENS = {"uni": dict(perm_size=8, batches=None), "np30_alpha3_beta2": dict(perm_size=4, batches=None),
                 "np32": dict(perm_size=16, batches=None), "seq8_np5": dict(perm_size=2, batches=500)}
INPUT_FEATURES = ("input_k", "seg_id", "input_q", "target", "target_mask", "target_mapping", "label")
FEATURE_DTYPES = {"input": np.int16, "target": np.int16, "is_masked": np.int8, "seg_id": np.int8, "label": np.int8}


def write_corpus(out_dir, ids_dir, prepro_utils):
  """The four shards of the docstring from SOURCE_CORPUS (one sentence per line, a blank line after each review),
  and the same shards as lines of token ids in `ids_dir` (the original `prepro_utils` and SPM)."""
  with open(SOURCE_CORPUS, encoding="utf-8") as f:
    reviews = f.read().split("\n\n")[:40]
  os.makedirs(out_dir, exist_ok=True)
  for k in range(4):
    part = reviews[10 * k:10 * k + 10]
    if k == 3:
      part[4] += "\n"  # One more blank line: two <eod> in a row.
    text = "\n\n".join(part) + ("\n" if k == 2 else "\n\n")
    with open(os.path.join(out_dir, f"shard-{k}.txt"), "w", encoding="utf-8") as f:
      f.write(text)
  sp = spm.SentencePieceProcessor()
  sp.Load(SPM)
  os.makedirs(ids_dir, exist_ok=True)
  for k in range(4):
    with open(os.path.join(out_dir, f"shard-{k}.txt"), encoding="utf-8") as f:
      lines = f.read().split("\n")
    ids = [" ".join(map(str, prepro_utils.encode_ids(sp, prepro_utils.preprocess_text(line.strip()))))
           if line.strip() else "" for line in lines]
    with open(os.path.join(ids_dir, f"shard-{k}.txt"), "w", encoding="utf-8") as f:
      f.write("\n".join(ids))


def import_original_data_utils(xlnet_src):
  sys.path.insert(0, HERE)
  from generate_train_step_goldens import tf1_for_the_original  # pylint: disable=import-outside-toplevel
  tf = tf1_for_the_original()
  # Protobuf no longer takes numpy bools as int64 values (the `is_masked` feature); TF 1.13's took them as 0 and 1.
  train = types.ModuleType("tensorflow.train")
  train.__dict__.update(vars(tf.train))
  int64_list = tf.train.Int64List
  train.Int64List = lambda value=(): int64_list(value=[int(v) for v in value])
  tf.train = train
  sys.modules["tensorflow"] = tf
  sys.path.insert(0, xlnet_src)
  import data_utils, prepro_utils  # pylint: disable=import-outside-toplevel,multiple-imports
  return tf, data_utils, prepro_utils


def flags_of(config):
  return dict(BASE_FLAGS, **{k: v for k, v in config.items() if k not in ("py_seed", "corpus")})


def run_original(data_utils, flags, py_seed, corpus_glob, save_dir):
  """The original `create_data` with these flags; returns its record_info (filenames, num_batch)."""
  data_utils.FLAGS = types.SimpleNamespace(**flags, input_glob=corpus_glob, sp_path=SPM, save_dir=save_dir)
  random.seed(py_seed)
  data_utils.create_data(None)
  (info_path,) = glob.glob(os.path.join(save_dir, "tfrecords", "record_info-*.json"))
  with open(info_path, encoding="utf-8") as f:
    return json.load(f)


def read_records(tf, path):
  """Every record of a file as int arrays (FEATURE_DTYPES), in file order."""
  out = {k: [] for k in FEATURE_DTYPES}
  for raw in tf.python_io.tf_record_iterator(path):
    feature = tf.train.Example.FromString(raw).features.feature
    assert sorted(feature) == sorted(FEATURE_DTYPES), sorted(feature)
    for k in FEATURE_DTYPES:
      out[k].append(list(feature[k].int64_list.value))
  arrays = {}
  for k, dtype in FEATURE_DTYPES.items():
    values = np.array(out[k], np.int64)
    if k == "label":
      values = values[:, 0]
    assert np.iinfo(dtype).min <= values.min() and values.max() <= np.iinfo(dtype).max
    arrays[k] = values.astype(dtype)
  return arrays


def read_input_batches(tf, data_utils, flags, tfrecord_dir, perm_size, count):
  """The first `count` batches of the original input pipeline (batch-major), as small ints, and their dtypes."""
  tf.reset_default_graph()
  tf.set_random_seed(11)
  input_fn, _ = data_utils.get_input_fn(
      tfrecord_dir=tfrecord_dir, split=flags["split"], bsz_per_host=flags["bsz_per_host"], seq_len=flags["seq_len"],
      reuse_len=flags["reuse_len"], bi_data=flags["bi_data"], num_hosts=1, num_core_per_host=1, perm_size=perm_size,
      mask_alpha=flags["mask_alpha"], mask_beta=flags["mask_beta"], uncased=flags["uncased"],
      use_bfloat16=False, num_predict=flags["num_predict"])
  example = tf.data.make_one_shot_iterator(input_fn({"batch_size": flags["bsz_per_host"]})).get_next()
  config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
  with tf.Session(config=config) as sess:
    batches = [sess.run({k: example[k] for k in INPUT_FEATURES}) for _ in range(count)]
  dtypes = {k: batches[0][k].dtype.name for k in INPUT_FEATURES}
  out = {}
  for k in INPUT_FEATURES:
    values = np.stack([b[k] for b in batches])
    small = values.astype(np.int16 if k in ("input_k", "target") else np.int8)
    assert (small == values).all(), k
    out[k] = small
  return out, dtypes


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out_dir", default=os.path.join(HERE, "data_configs"))
  args = parser.parse_args()
  tf, data_utils, prepro_utils = import_original_data_utils(args.xlnet_src)
  write_corpus(os.path.join(args.out_dir, "corpus"), os.path.join(args.out_dir, "corpus_ids"), prepro_utils)
  meta = {"base_flags": BASE_FLAGS, "configs": {}, "rejected": {}, "input_goldens": {}}
  for name, config in CONFIGS.items():
    flags = flags_of(config)
    corpus = config.get("corpus", "corpus")
    with tempfile.TemporaryDirectory() as save_dir:
      info = run_original(data_utils, dict(flags), config["py_seed"], os.path.join(args.out_dir, corpus, "*.txt"),
                          save_dir)
      (path,) = info["filenames"]
      arrays = read_records(tf, path)
      if name in INPUT_GOLDENS:
        perm_size, count = INPUT_GOLDENS[name]["perm_size"], INPUT_GOLDENS[name]["batches"] or info["num_batch"]
        batches, dtypes = read_input_batches(tf, data_utils, flags, os.path.dirname(path), perm_size, count)
        np.savez_compressed(os.path.join(args.out_dir, f"{name}_input.npz"), **batches)
        meta["input_goldens"][name] = {"perm_size": perm_size, "batches": count, "dtypes": dtypes}
    num_records = len(arrays["label"])
    assert num_records == info["num_batch"] * flags["bsz_per_host"], (num_records, info)
    np.savez_compressed(os.path.join(args.out_dir, f"{name}.npz"), **arrays)
    meta["configs"][name] = {"flags": flags, "corpus": corpus, "py_seed": config["py_seed"],
                             "np_seed": 100 * flags["task"] + flags["pass_id"],
                             "record_file": os.path.basename(path), "num_batch": info["num_batch"]}
    print(f"{name}: {info['num_batch']} batches, {num_records} records, {os.path.basename(path)}")
  for name, config in REJECTED.items():
    flags = flags_of(config)
    with tempfile.TemporaryDirectory() as save_dir:
      try:
        run_original(data_utils, dict(flags), config["py_seed"], os.path.join(args.out_dir, "corpus", "*.txt"),
                     save_dir)
      except AssertionError:
        meta["rejected"][name] = {"flags": flags, "original": "AssertionError in create_tfrecords"}
        print(f"{name}: rejected by the original (AssertionError)")
      else:
        raise RuntimeError(f"The original wrote records with {flags}.")
  with open(os.path.join(args.out_dir, "meta.json"), "w", encoding="utf-8") as f:
    json.dump(meta, f, indent=1, sort_keys=True)
    f.write("\n")


if __name__ == "__main__":
  main()
