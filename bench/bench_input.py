"""Benchmark: examples/s of the pretraining input pipeline (`xlnet_tf.tasks.pretrain.input`).

By default it writes synthetic records in the original `data_utils.py` format (random ids, `[reuse | A SEP B SEP
CLS]` layout, `num_predict` masked positions) to a temporary directory, with the original README's pretraining
shapes, and times `get_input_fn(...)()` (one device, batches of bsz_per_host rows):

  .venv/bin/python bench/bench_input.py                      # seq_len 512, reuse 256, num_predict 85, bsz 32
  .venv/bin/python bench/bench_input.py --record_info_dir=tests/testdata/data/records/tfrecords --seq_len=32 \\
      --reuse_len=16 --perm_size=8 --num_predict=6 --bsz_per_host=4 --bi_data --nouncased

Prints one line per variant (seeded or not, float32 or bfloat16): examples/s, median over --repeats timings of
--num_batches batches after --warmup batches (the VM is noisy; compare medians).
"""

import json
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

from xlnet_tf.data.pretrain_spec import PretrainDataSpec
from xlnet_tf.tasks.pretrain.input import ReaderOptions, get_input_fn

flags.DEFINE_string("record_info_dir", None, "Existing records to read; default: write synthetic ones to a tmp dir.")
flags.DEFINE_integer("bsz_per_host", 32, "Rows per step.", lower_bound=1)
flags.DEFINE_integer("seq_len", 512, "Sequence length.")
flags.DEFINE_integer("reuse_len", 256, "Reuse length.")
flags.DEFINE_integer("perm_size", 256, "Permutation block size.")
flags.DEFINE_integer("num_predict", 85, "Targets per record.")
flags.DEFINE_bool("bi_data", False, "Records were written with bi_data.")
flags.DEFINE_bool("uncased", True, "Records were written with uncased.")
flags.DEFINE_integer("mask_alpha", 6, "mask_alpha of the records.")
flags.DEFINE_integer("mask_beta", 1, "mask_beta of the records.")
flags.DEFINE_integer("num_steps_written", 40, "Synthetic records: steps of bsz_per_host rows to write.", lower_bound=1)
flags.DEFINE_integer("num_batches", 30, "Batches timed per repeat.", lower_bound=1)
flags.DEFINE_integer("warmup", 5, "Batches read before timing.", lower_bound=0)
flags.DEFINE_integer("repeats", 3, "Timed repeats per variant.", lower_bound=1)
flags.DEFINE_integer("n_token", 32000, "The vocabulary every record's ids are checked against as run_pretrain.py reads "
                     "them; 0: no check.")
FLAGS = flags.FLAGS


def write_synthetic_records(record_dir, num_steps, bsz_per_host, seq_len, reuse_len, num_predict, bi_data,
                            uncased, mask_alpha, mask_beta, seed=0):
  """Writes one record file and its record_info in the original format; returns the number of records."""
  rng = np.random.default_rng(seed)
  spec = PretrainDataSpec(bsz_per_host=bsz_per_host, seq_len=seq_len, bi_data=bi_data, mask_alpha=mask_alpha,
                          mask_beta=mask_beta, reuse_len=reuse_len, uncased=uncased, num_predict=num_predict)
  name = spec.filename("train-0-0", "tfrecords")
  n_1 = num_predict // 2
  with tf.io.TFRecordWriter(os.path.join(record_dir, name)) as writer:
    for _ in range(num_steps * bsz_per_host):
      tok = rng.integers(10, 32000, size=seq_len + 1)
      sep_a = reuse_len + 1 + rng.integers(0, seq_len - reuse_len - 4)
      tok[[sep_a, seq_len - 2]], tok[seq_len - 1] = 4, 3
      mask = np.zeros(seq_len, np.int64)
      mask[rng.choice(reuse_len, num_predict - n_1, replace=False)] = 1
      mask[reuse_len + rng.choice(seq_len - reuse_len, n_1, replace=False)] = 1
      seg = np.array([0] * (sep_a + 1) + [1] * (seq_len - sep_a - 2) + [2])
      feats = {"input": tok[:seq_len], "is_masked": mask, "target": tok[1:], "seg_id": seg,
               "label": [rng.integers(0, 2)]}
      feats = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))
               for k, v in feats.items()}
      writer.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
  with open(os.path.join(record_dir, spec.filename("record_info-train-0-0", "json")), "w") as f:
    json.dump({"filenames": [name], "num_batch": num_steps}, f)
  return num_steps * bsz_per_host


def time_variant(record_dir, seed, use_bfloat16):
  spec = PretrainDataSpec(bsz_per_host=FLAGS.bsz_per_host, seq_len=FLAGS.seq_len, reuse_len=FLAGS.reuse_len,
                          bi_data=FLAGS.bi_data, mask_alpha=FLAGS.mask_alpha, mask_beta=FLAGS.mask_beta,
                          uncased=FLAGS.uncased, num_predict=FLAGS.num_predict)
  input_fn, _ = get_input_fn(record_dir, "train", spec, ReaderOptions(FLAGS.perm_size, use_bfloat16, seed,
                                                                        n_token=FLAGS.n_token or None))
  it = iter(input_fn())
  for _ in range(FLAGS.warmup):
    next(it)
  rates = []
  for _ in range(FLAGS.repeats):
    start = time.perf_counter()
    for _ in range(FLAGS.num_batches):
      batch = next(it)
    batch["perm_mask"].numpy()
    rates.append(FLAGS.num_batches * FLAGS.bsz_per_host / (time.perf_counter() - start))
  return float(np.median(rates)), min(rates), max(rates)


def main(_):
  if FLAGS.record_info_dir is not None and not os.path.isdir(FLAGS.record_info_dir):
    sys.exit(f"bench_input.py: error: --record_info_dir {FLAGS.record_info_dir} is not a directory. Pass "
             "data_utils.py's <save_dir>/tfrecords, or leave it unset to time synthetic records.")
  with tempfile.TemporaryDirectory() as tmp:
    record_dir = FLAGS.record_info_dir
    if record_dir is None:
      record_dir = tmp
      start = time.perf_counter()
      n = write_synthetic_records(tmp, FLAGS.num_steps_written, FLAGS.bsz_per_host, FLAGS.seq_len, FLAGS.reuse_len,
                                  FLAGS.num_predict, FLAGS.bi_data, FLAGS.uncased, FLAGS.mask_alpha, FLAGS.mask_beta)
      print(f"wrote {n} synthetic records to {tmp} in {time.perf_counter() - start:.1f} s")
    print(f"seq_len {FLAGS.seq_len}, reuse_len {FLAGS.reuse_len}, perm_size {FLAGS.perm_size}, num_predict "
          f"{FLAGS.num_predict}, bsz {FLAGS.bsz_per_host}; {os.cpu_count()} CPUs")
    for seed in (None, 1):
      for bf16 in (False, True):
        med, lo, hi = time_variant(record_dir, seed, bf16)
        print(f"seed={seed!s:4} bfloat16={bf16!s:5}: {med:8.1f} examples/s (median; min {lo:.1f}, max {hi:.1f})")


if __name__ == "__main__":
  app.run(main)
