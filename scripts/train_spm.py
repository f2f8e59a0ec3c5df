"""Trains a SentencePiece model with the original XLNet README's settings and checks the special-symbol ids.

  python scripts/train_spm.py --input='data/*.txt' --model_prefix=spm/spiece --vocab_size=32000

is the README's `spm_train --vocab_size=32000 --character_coverage=0.99995 --model_type=unigram
--control_symbols=<cls>,<sep>,<pad>,<mask>,<eod> --user_defined_symbols=<eop>,.,(,),",-,–,£,€
--shuffle_input_sentence=true --input_sentence_size=10000000`, and writes `{model_prefix}.model`/`.vocab` with ids
<unk> 0, <s> 1, </s> 2, <cls> 3, <sep> 4, <pad> 5, <mask> 6, <eod> 7, <eop> 8. Input: text, one sentence per line
(lines over 4192 bytes are skipped by SentencePiece). Pass the same text you pretrain on, or a sample of it.

Unlike `spm_train`, it does not replace an existing `{model_prefix}.model` or `.vocab` (a model others may have been
trained with) unless --overwrite is given; a --model_prefix that is a directory is refused (the files would be written
beside it, as `<dir>.model`). The numeric flags are checked before training, with SentencePiece's ranges.
"""

import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from xlnet_tf.data import tokenization

flags.DEFINE_string("input", None, "Text files: a glob or a comma-separated list of files/globs.")
flags.DEFINE_string("model_prefix", None, "Output prefix: writes {model_prefix}.model and {model_prefix}.vocab.")
flags.DEFINE_integer("vocab_size", 32000, "Vocabulary size (the README uses 32000).")
flags.DEFINE_float("character_coverage", 0.99995, "Fraction of characters covered by the vocabulary.")
flags.DEFINE_enum("model_type", "unigram", ["unigram", "bpe", "char", "word"], "SentencePiece model type.")
flags.DEFINE_integer("input_sentence_size", 10000000, "Maximum number of sentences sampled for training.")
flags.DEFINE_bool("shuffle_input_sentence", True, "Shuffle the sampled sentences.")
flags.DEFINE_bool("hard_vocab_limit", True, "False: a small corpus may give fewer pieces than --vocab_size.")
flags.DEFINE_integer("num_threads", None, "Trainer threads (default: all CPUs).")
flags.DEFINE_bool("overwrite", False, "Replace an existing {model_prefix}.model and .vocab.")
flags.mark_flags_as_required(["input", "model_prefix"])


def check_model_prefix(model_prefix, overwrite):
  """ValueError unless --model_prefix names files this run may write: not a directory, and no existing
  `{model_prefix}.model` or `.vocab` unless `overwrite`."""
  if model_prefix.endswith(("/", os.sep)) or os.path.isdir(model_prefix):
    raise ValueError(f"--model_prefix={model_prefix} is a directory; it is the start of the file names, e.g. "
                     f"--model_prefix={os.path.join(model_prefix, 'spiece')} writes spiece.model and spiece.vocab "
                     "there.")
  held = [model_prefix + suffix for suffix in (".model", ".vocab") if os.path.exists(model_prefix + suffix)]
  if held and not overwrite:
    raise ValueError(f"--model_prefix={model_prefix} would replace {' and '.join(held)} (left as they are). Pass "
                     "another --model_prefix, or --overwrite to replace them.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  try:
    check_model_prefix(flags.FLAGS.model_prefix, flags.FLAGS.overwrite)
    options = tokenization.SpmTrainOptions(
        vocab_size=flags.FLAGS.vocab_size, character_coverage=flags.FLAGS.character_coverage,
        model_type=flags.FLAGS.model_type, input_sentence_size=flags.FLAGS.input_sentence_size,
        shuffle_input_sentence=flags.FLAGS.shuffle_input_sentence, hard_vocab_limit=flags.FLAGS.hard_vocab_limit,
        num_threads=flags.FLAGS.num_threads)
    path = tokenization.train_sentencepiece(flags.FLAGS.input, flags.FLAGS.model_prefix, options)
  except (OSError, ValueError, RuntimeError) as e:
    sys.exit(f"train_spm.py: error: {str(e).strip().splitlines()[0]}")
  sp = tokenization.load_sentencepiece(path)
  print(f"Wrote {path}: vocab_size={tokenization.vocab_size(sp)}, XLNet special symbols at ids 0-8.")


if __name__ == "__main__":
  app.run(main)
