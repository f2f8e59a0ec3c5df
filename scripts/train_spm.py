"""Trains a SentencePiece model with the original XLNet README's settings and checks the special-symbol ids.

  python scripts/train_spm.py --input='data/*.txt' --model_prefix=spm/spiece --vocab_size=32000

is the README's `spm_train --vocab_size=32000 --character_coverage=0.99995 --model_type=unigram
--control_symbols=<cls>,<sep>,<pad>,<mask>,<eod> --user_defined_symbols=<eop>,.,(,),",-,–,£,€
--shuffle_input_sentence=true --input_sentence_size=10000000`, and writes `{model_prefix}.model`/`.vocab` with ids
<unk> 0, <s> 1, </s> 2, <cls> 3, <sep> 4, <pad> 5, <mask> 6, <eod> 7, <eop> 8. Input: text, one sentence per line
(lines over 4192 bytes are skipped by SentencePiece). Pass the same text you pretrain on, or a sample of it.

Unlike `spm_train`, it does not replace an existing `{model_prefix}.model` or `.vocab` (a model others may have been
trained with) unless --overwrite is given, and a second run with the same --model_prefix while one trains is refused
(`model_prefix_lock`); a --model_prefix that is a directory is refused (the files would be written beside it, as
`<dir>.model`). An --input glob that reaches `{model_prefix}.model`/`.vocab` (a rerun over the corpus directory)
leaves them out with a line, and an --input that names one is refused. The numeric flags are checked before
training, with SentencePiece's ranges. SIGINT and SIGTERM stop it at once, the trainer included (it runs in a child
process), with one line and nothing written.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli  # pylint: disable=wrong-import-position  # first: start_script() runs before anything else is imported
if __name__ == "__main__":
  cli.start_script()
import flags  # pylint: disable=wrong-import-position
from xlnet_tf import fileio  # pylint: disable=wrong-import-position
from xlnet_tf import locks  # pylint: disable=wrong-import-position
from xlnet_tf import path_errors  # pylint: disable=wrong-import-position
from xlnet_tf.data import tokenization  # pylint: disable=wrong-import-position


def check_model_prefix(model_prefix, overwrite):
  """ValueError unless --model_prefix names files this run may write: not a directory, and no existing
  `{model_prefix}.model` or `.vocab` unless `overwrite`, and a UTF-8 name (SentencePiece's error named nothing)."""
  if not_utf8 := fileio.non_utf8_line(model_prefix, "--model_prefix=", taker="SentencePiece"):
    raise ValueError(not_utf8)
  if model_prefix.endswith(("/", os.sep)) or os.path.isdir(model_prefix):
    raise ValueError(f"--model_prefix={model_prefix} is a directory; it is the start of the file names, e.g. "
                     f"--model_prefix={os.path.join(model_prefix, 'spiece')} writes spiece.model and spiece.vocab "
                     "there.")
  if not os.path.basename(model_prefix).strip():  # it wrote the hidden `.model` and `.vocab` (sweep 32, U15)
    raise ValueError(f"--model_prefix={model_prefix!r} names no file: it is the start of the file names, e.g. "
                     f"--model_prefix={os.path.join(os.path.dirname(model_prefix), 'spiece')} writes spiece.model and "
                     "spiece.vocab.")
  if model_prefix.endswith((".model", ".vocab")):  # it wrote x.model.model, and `--sp_path=x.model` found nothing
    raise ValueError(f"--model_prefix={model_prefix} is the start of the file names, to which .model and .vocab are "
                     f"added: pass --model_prefix={model_prefix.rsplit('.', 1)[0]} to write {model_prefix}.")
  # SentencePiece writes `{name}.tmp-{pid}-{12 hex}.model` at the end of its training, which a name too long lost
  size, room = len(os.path.basename(model_prefix).encode("utf-8")), path_errors.temp_name_room(".model")
  if size > room:
    raise ValueError(f"--model_prefix={model_prefix}: its file name is too long ({size} bytes; at most {room} with the "
                     "temporary names written before the files are renamed). Pass a shorter one.")
  if os.path.dirname(model_prefix):
    fileio.check_output_dir(os.path.dirname(model_prefix), "--model_prefix's directory")
  held = [model_prefix + suffix for suffix in (".model", ".vocab") if os.path.exists(model_prefix + suffix)]
  if folders := [path for path in held if os.path.isdir(path)]:  # "Could not write D/m (Is a directory)" (sweep 23)
    raise ValueError(f"--model_prefix={model_prefix} would write {folders[0]}, which is a directory. Move it away, "
                     "or pass another --model_prefix.")
  if held and not overwrite:
    raise ValueError(f"--model_prefix={model_prefix} would replace {' and '.join(held)} (left as they are). Pass "
                     "another --model_prefix, or --overwrite to replace them.")


def model_prefix_lock(model_prefix):
  """`locks.directory_lock` on --model_prefix: `.spm-{name}.lock` in its directory, named after the prefix (another
  prefix there is not blocked). Two runs with one prefix at once both said "Wrote", the second's model replacing the
  first's although neither was given --overwrite (each had checked before the other wrote; sweep 23, B4)."""
  directory, name = os.path.split(os.path.abspath(model_prefix))
  return locks.directory_lock(directory, name=f"spm-{name}", what="--model_prefix", shown=model_prefix)


def check_symbols(o):
  """ValueError where --control_symbols or --user_defined_symbols (spm_train's flags, which the original README
  passes) are not the built-in values: the tools find the XLNet symbols by those ids."""
  for name, value in (("control_symbols", tokenization.CONTROL_SYMBOLS),
                      ("user_defined_symbols", tokenization.USER_DEFINED_SYMBOLS)):
    if tuple(getattr(o, name).split(",")) != value:
      raise ValueError(f"--{name}={getattr(o, name)}: the XLNet tools need --{name}={','.join(value)} (their ids are "
                       f"fixed); drop the flag, that value is built in.")


def body(o):
  check_symbols(o)
  tokenization.own_files_left_out(o.input, o.model_prefix, warn=False)  # an --input that is an output: refused first
  # the files already at --model_prefix are checked under the lock, once it has undone a killed run's half output
  check_model_prefix(o.model_prefix, overwrite=True)
  options = tokenization.SpmTrainOptions(
      vocab_size=o.vocab_size, character_coverage=o.character_coverage, model_type=o.model_type,
      input_sentence_size=o.input_sentence_size, shuffle_input_sentence=o.shuffle_input_sentence,
      hard_vocab_limit=o.hard_vocab_limit, num_threads=o.num_threads)
  try:
    with model_prefix_lock(o.model_prefix) as journal:  # one run per prefix; one that wrote it meanwhile is seen
      check_model_prefix(o.model_prefix, o.overwrite)
      path = tokenization.train_sentencepiece(o.input, o.model_prefix, options, journal=journal, final=True)
  except RuntimeError as e:  # SentencePiece's trainer: its message's first line says what
    line = str(e).strip().splitlines()[0]
    if "Vocabulary size" in line:  # e.g. `INTERNAL: src/trainer_interface.cc(744) [...] Vocabulary size too high`
      line = f"--vocab_size={o.vocab_size} does not fit --input: {line[line.index('Vocabulary size'):]}"
      if "too high" in line:
        line += " Or pass --hard_vocab_limit=false to accept fewer pieces."
    raise ValueError(line) from None
  sp = tokenization.load_sentencepiece(path)
  got = tokenization.vocab_size(sp)
  short = "" if got == o.vocab_size else (  # a char model's shortfall was said nowhere, exit 0 (sweep 33, B6)
      f" (not --vocab_size={o.vocab_size}: " + ("--model_type=char makes one piece per character)"
                                                if o.model_type == "char" else "--hard_vocab_limit=false)"))
  cli.print_line(f"Wrote {path}: vocab_size={got}{short}, XLNet special symbols at ids 0-8.")


if __name__ == "__main__":
  cli.run_script(flags.define_train_spm_flags, cli.cli_main("train_spm.py", body))
