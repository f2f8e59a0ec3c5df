"""The learning-on-real-text recipes of docs/squad.md and docs/race.md, shared by the slow tests of the SQuAD set
(tests/test_squad_corpus.py) and of the RACE set (tests/test_race_corpus.py, which starts RACE from the small model
pretrained on IMDB text)."""

import json
import re

import data_utils
import cli
import flag_configs
import run_pretrain
import run_squad
from xlnet_tf.data import corpora
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.squad import corpus

SPM = "tests/testdata/data/spm/spiece.model"  # 1000 pieces, trained on IMDB text
SMALL_CONFIG = dict(n_layer=3, d_model=96, n_head=4, d_head=24, d_inner=384, ff_activation="gelu", untie_r=True)


def logged_losses(lines):
  """The `loss` of every training log line `[step] | ... | loss x | ...`."""
  return [float(re.search(r"\| loss ([\d.]+)", line).group(1)) for line in lines if line.startswith("[")]


def demo_sentencepiece(root):
  """An 8000-piece SentencePiece model trained as the demo trains its own (scripts/demo.py: 8000 IMDB reviews,
  the original README's settings); its path."""
  corpora.write_pretraining_corpus(str(root / "spm_corpus"), 8000, num_files=4)
  return tokenization.train_sentencepiece(str(root / "spm_corpus" / "*.txt"), str(root / "spm" / "spiece"),
                                          tokenization.SpmTrainOptions(vocab_size=8000), quiet=True)


def write_small_config(root, spm):
  """root/xlnet_config.json: the small model with n_token = the pieces of `spm`; its path."""
  config = root / "xlnet_config.json"
  n_token = tokenization.load_sentencepiece(spm).GetPieceSize()
  config.write_text(json.dumps(dict(SMALL_CONFIG, n_token=n_token)))
  return str(config)


def pretrain_small(root, spm, train_steps, schedule_steps):
  """The small model pretrained with run_pretrain.py on the demo's records (data_utils.py on the text that
  `demo_sentencepiece(root)` wrote, the demo's data settings), float32, learning rate 5e-4 warmed up over 500 steps
  and decayed linearly as a `schedule_steps` schedule would, stopped after `train_steps` (min_lr_ratio makes the
  shorter schedule's slope the longer one's, up to float32 rounding).

  Returns (the config path, the last checkpoint, the training log lines)."""
  data = dict(seq_len=128, reuse_len=64, num_predict=21, bi_data=True, uncased=False, mask_alpha=6, mask_beta=1)
  data_utils.create_data(cli.defaults(
      data_utils.define_flags, use_tpu=False, bsz_per_host=16, num_core_per_host=1,
      input_glob=str(root / "spm_corpus" / "*.txt"), sp_path=spm, save_dir=str(root / "proc_data"), seed=1, **data))
  config = write_small_config(root, spm)
  warmup = 500
  o = cli.defaults(
      run_pretrain.define_flags, record_info_dir=str(root / "proc_data" / "tfrecords"),
      model_dir=str(root / "pretrain"), model_config_path=config, train_batch_size=16, perm_size=64, mem_len=64,
      learning_rate=5e-4, warmup_steps=warmup, train_steps=train_steps,
      min_lr_ratio=(schedule_steps - train_steps) / (schedule_steps - warmup), iterations=200,
      save_steps=train_steps, max_save=1, seed=1, strategy="one_device", **data)
  lines = []
  run_pretrain.run(o, flag_configs.start(o), log_fn=lines.append)  # as the CLI: seeded initialisation, kept memory
  return config, f"{o.model_dir}/ckpt-{train_steps}", lines


def train_squad(root, spm=SPM, max_seq_length=96, max_query_length=20, train_steps=3000, warmup_steps=None,
                min_lr_ratio=0.0):
  """Writes the SQuAD IMDB set and the small config (n_token: the pieces of `spm`) under `root`, fine-tunes from
  random weights and predicts on dev. warmup_steps: train_steps // 10 unless given.

  Returns (run_squad results, the set's counts, the training log lines, the config path, the model_dir)."""
  counts = corpus.write_squad_corpus(str(root / "squad"), num_train=11000, num_dev=300, seed=0, max_context_words=40,
                                     questions_per_context=4)
  config = write_small_config(root, spm)
  o = cli.defaults(
      run_squad.define_flags, do_train=True, do_predict=True, model_config_path=config, spiece_model_file=spm,
      train_file=str(root / "squad" / "train-v2.0.json"), predict_file=str(root / "squad" / "dev-v2.0.json"),
      output_dir=str(root / "squad_out"), model_dir=str(root / "squad_model"), predict_dir=str(root / "squad_pred"),
      max_seq_length=max_seq_length, max_query_length=max_query_length, doc_stride=32, train_batch_size=32,
      train_steps=train_steps, warmup_steps=train_steps // 10 if warmup_steps is None else warmup_steps,
      min_lr_ratio=min_lr_ratio, iterations=100, learning_rate=1e-3,
      lr_layer_decay_rate=1.0, dropout=0.0, dropatt=0.0, seed=0, strategy="one_device")
  lines = []
  # What the CLI's main() does before run(): seeds the initialisation with --seed (unseeded, two of three runs here
  # fell short of the test's former bounds), and glibc keeps freed buffers, so the steps do not fault their tensors
  # in again (in this process that made the SQuAD steps 2.4x faster: 4.6 against 2.0 steps/s on 2 cores).
  results = run_squad.run(o, flag_configs.start(o), log_fn=lines.append)
  return results, counts, lines, config, o.model_dir
