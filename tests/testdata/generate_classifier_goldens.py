"""Writes classifier-record goldens with the ORIGINAL run_classifier.py, classifier_utils.py and prepro_utils.py.

  python tests/testdata/generate_classifier_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/classifier

Writes the raw task files (`write_raw`: the original layouts of imdb, yelp5, MNLI and STS-B, with hard text:
accents, ``''`` quotes, `<br />`, runs of spaces, a BOM, CRLF, lone CR, NEL and LS, non-ASCII digits, digit-comma
pieces, texts that need truncation alone and as a pair, empty and blank text_b, short and blank lines) to
OUT_DIR/raw, then runs the
original `run_classifier.main` (github.com/zihangdai/xlnet at bbaa3a6, a checkout passed as --xlnet_src and never
copied here) under `tensorflow.compat.v1` (`generate_train_step_goldens.tf1_for_the_original`) once per
configuration (`configs`), with --do_train, --do_eval and --do_predict and its FLAGS set as a namespace. Its
Estimator and `model_utils.configure_tpu` are stand-ins (`StubEstimator`: train does nothing, evaluate returns
zeros for a fake checkpoint `model.ckpt-1`, predict yields nothing), so main runs its data path unchanged: the
processors, `np.random.shuffle` of the training examples (numpy seeded with the configuration's `np_seed` just
before), `num_passes`, the `PaddingInputExample`s up to a multiple of --eval_batch_size, the record file names and
`file_based_convert_examples_to_features`. `tf.gfile.ListDirectory` lists sorted here, so the golden's imdb order
is the name order (the original's is the file system's: README.md).

Written to OUT_DIR: `raw/` (the inputs), `<config>.npz` (per record file kind K in train, eval, predict, every record
in file order: `K_input_ids` int32 [R, L], `K_input_mask` float32 [R, L], `K_segment_ids` int8 [R, L],
`K_label_ids` int32 [R] (float32 for sts-b), `K_is_real_example` int8 [R]), `meta.json` (per configuration: its
flags, the record file names, the feature kinds in the records, and per file the examples in the order written as
`example_key`s). README.md is written by hand. About 20 seconds on two cores.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SPM = os.path.join(HERE, "data", "spm", "spiece.model")
SOURCE_CORPUS = os.path.join(HERE, "data", "corpus", "imdb-0.txt")
TASK_DIRS = {"imdb": "imdb", "yelp5": "yelp5", "mnli_matched": "mnli", "mnli_mismatched": "mnli", "sts-b": "sts-b"}
KINDS = ("train", "eval", "predict")
FEATURES = ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example")
# The original main's flags that the data path reads; the rest are the original's defaults where they matter.
BASE_FLAGS = dict(do_train=True, do_eval=True, do_predict=True, eval_split="dev", eval_batch_size=4,
                  predict_batch_size=4, train_batch_size=4, num_passes=1, overwrite_data=False, use_tpu=False,
                  save_steps=None, iterations=1000, train_steps=1000, predict_ckpt=None, eval_all_ckpt=False,
                  num_core_per_host=1)

# Hard text, mixed into every task's files.
ACCENTS = ("Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u2014 \u201csmart\u201d and ``latex'' QUOTES, \u00c9L\u00c8VE "
           "\u00e5ngstr\u00f6m")
DIGITS = ("In 1999, 2,000 fans paid $3,50, then \u0661\u0662\u0663 \uff14\uff15\uff16 \u00b2\u00b3 \u00bd "
          "and 7,")
SPACES = "  lots   of\u00a0 spaces\u3000and \u2003 odd   blanks  "
MISC = "\ufb01ne \ufb02at \u2460 \u212b \u00bd Stra\u00dfe \u4e2d\u6587 \ud55c\uad6d\uc5b4 emoji \U0001f600 tab-free"


def reviews(start, count, join="<br /><br />"):
  """`count` reviews of SOURCE_CORPUS from `start`, their sentences joined by `join` (as aclImdb's files)."""
  with open(SOURCE_CORPUS, encoding="utf-8") as f:
    blocks = f.read().split("\n\n")
  return [join.join(block.strip().split("\n")) for block in blocks[start:start + count]]


def write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8", newline="") as f:
    f.write(text)


def write_raw(raw):
  """The raw task files of the docstring under `raw`."""
  if os.path.exists(raw):
    shutil.rmtree(raw)
  long = reviews(0, 12)
  # imdb: {train,test}/{neg,pos}/*txt; names that list differently sorted and by number; other files skipped.
  imdb = {
      "train/neg/0_3.txt": long[0] + " " + DIGITS,
      "train/neg/10_2.txt": "  " + ACCENTS + "<br />" + SPACES + "\n\n",
      "train/neg/2_1.txt": long[1],
      "train/neg/notes.md": "not a review",
      "train/pos/1_9.txt": "\ufeff" + long[2].replace(". ", ".\r\n"),  # BOM (kept), CRLF.
      "train/pos/11_10.txt": MISC + "<br /><br />" + long[3][:300],
      "train/pos/3_8.txt": "Short and <br/>sweet<br />, a lone\rreturn.",
      "train/pos/review_txt": "no dot but ends in txt: read " + ACCENTS,
      "test/neg/0_1.txt": long[4],
      "test/neg/5_4.txt": DIGITS + "<br /><br /><br />" + SPACES,
      "test/pos/0_10.txt": long[5],
      "test/pos/4_7.txt": ACCENTS.upper(),
      "test/pos/9_8.txt": MISC,
  }
  for name, text in imdb.items():
    write(os.path.join(raw, "imdb", name), text)
  # yelp5: label, text; csv quoting, "" and \" inside, embedded newline and literal \n, no header.
  yelp_train = [
      ("5", long[6]), ("1", 'He said ""wow"" and \\"left\\"'), ("3", ACCENTS + "\n" + DIGITS),
      ("2", "literal \\n newline \\n marks" + SPACES), ("4", MISC), ("1", long[7][:200] + ", " + long[8]),
  ]
  yelp_test = [("2", long[9]), ("4", 'quote "inside" ' + SPACES), ("5", DIGITS), ("3", ""), ("1", ACCENTS)]
  for name, rows in (("train.csv", yelp_train), ("test.csv", yelp_test)):
    text = "".join('"' + label + '","' + body.replace('"', '""') + '"\n' for label, body in rows)
    if name == "train.csv":  # Lone carriage returns, unquoted and quoted.
      text += '4,unquoted lone\rreturn\n"2","quoted lone\rreturn and\r\nCRLF"\n'
    write(os.path.join(raw, "yelp5", name), text)
  # MNLI: 12 columns in train (label1, gold_label), 16 in dev, 10 in test; no quoting; blank and short lines skipped.
  def mnli_row(i, a, b, gold, dev=False):
    parses = ["( x )", "( y )", "(ROOT x)", "(ROOT y)"]
    labels = [gold] * (5 if dev else 1)
    return "\t".join([str(i), str(1000 + i), f"{1000 + i}e", "fiction"] + parses + [a, b] + labels + [gold])
  header_train = "\t".join(["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                            "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1", "sentence2",
                            "label1", "gold_label"])
  header_dev = header_train.replace("label1\t", "label1\tlabel2\tlabel3\tlabel4\tlabel5\t")
  header_test = "\t".join(header_train.split("\t")[:10])
  mnli_train = [header_train,
                mnli_row(0, long[9], "It was a movie.", "entailment"),
                mnli_row(1, '"Hello," he said, ``quietly\'\'.', ACCENTS, "neutral"),
                "",
                "\t".join(["2", "short", "line"]),  # Incomplete: skipped.
                mnli_row(3, long[10], long[11], "contradiction"),
                mnli_row(4, DIGITS, "", "neutral"),  # Empty text_b: a single text.
                mnli_row(5, SPACES, "   ", "entailment"),  # Blank text_b: no tokens, a single text.
                mnli_row(6, "Tiny.", long[0], "contradiction"),
                mnli_row(7, MISC, MISC, "entailment")]
  write(os.path.join(raw, "mnli", "train.tsv"), "\n".join(mnli_train) + "\n")
  dev_rows = [(long[1], "A pair whose A is long.", "neutral"), ("x", "y", "entailment"),
              (ACCENTS, DIGITS, "contradiction"), (long[2][:150], long[3][:150], "neutral"), ("", "B only", "neutral"),
              ("a lone\rreturn in A", "B with \x85 NEL, \u2028 LS and \x0c FF", "entailment")]
  for name, rows in (("dev_matched.tsv", dev_rows), ("dev_mismatched.tsv", dev_rows[::-1] + dev_rows[:1])):
    lines = [header_dev] + [mnli_row(i, a, b, gold, dev=True) for i, (a, b, gold) in enumerate(rows)]
    lines.insert(3, "\t".join(["9", "9", "9e", "fiction", "(", ")", "(", ")", "only a"]))  # 9 columns: skipped.
    write(os.path.join(raw, "mnli", name), "\r\n".join(lines) + "\r\n")
  for name in ("test_matched.tsv", "test_mismatched.tsv"):
    lines = [header_test] + [mnli_row(i, a, b, "x").rsplit("\t", 2)[0] for i, (a, b, _) in enumerate(dev_rows[:3])]
    write(os.path.join(raw, "mnli", name), "\n".join(lines) + "\n")
  # STS-B: index genre filename year old_index source1 source2 sentence1 sentence2 score.
  def stsb_row(i, a, b, score=None):
    return "\t".join([f"{i:04d}", "main-news", "headlines", "2015", str(i), "none", "none", a, b] +
                     ([] if score is None else [score]))
  stsb_header = stsb_row(0, "sentence1", "sentence2", "score").replace("0000", "index", 1)
  stsb_train = [stsb_header, stsb_row(1, ACCENTS, DIGITS, "3.800"), stsb_row(2, long[4], long[5], "0"),
                stsb_row(3, "A man plays.", "A man is playing.", "5.000"), stsb_row(4, MISC, "", "2.5"),
                "\t".join(["0005", "main-news", "headlines"]),  # Incomplete: skipped.
                stsb_row(6, SPACES, long[6][:120], "1.25"), stsb_row(7, "Two.", "Three.", "4")]
  stsb_dev = [stsb_header, stsb_row(1, long[7], "short", "0.600"), stsb_row(2, DIGITS, DIGITS, "5"),
              stsb_row(3, "", "empty A", "1.000"), stsb_row(4, ACCENTS.lower(), ACCENTS, "4.75"),
              stsb_row(5, "cats", "dogs", "0.000"), stsb_row(6, "lone\rreturn", "x", "3")]
  stsb_test = [stsb_header.rsplit("\t", 1)[0]] + [stsb_row(i, a, b) for i, a, b in
                                                  ((1, ACCENTS, MISC), (2, long[8], "x"), (3, "y", ""))]
  for name, lines in (("train.tsv", stsb_train), ("dev.tsv", stsb_dev), ("test.tsv", stsb_test)):
    write(os.path.join(raw, "sts-b", name), "\n".join(lines) + "\n")


def configs():
  """name -> (task_name, flags changed from BASE_FLAGS, np_seed)."""
  out = {}
  seed = 100
  for task in TASK_DIRS:
    for max_seq_length in (32, 128):
      for uncased in (False, True):
        seed += 1
        out[f"{task}_L{max_seq_length}_{'uncased' if uncased else 'cased'}"] = (
            task, dict(max_seq_length=max_seq_length, uncased=uncased), seed)
  out["mnli_matched_L32_cased_test"] = ("mnli_matched", dict(max_seq_length=32, uncased=False, eval_split="test"), 7)
  out["sts-b_L32_cased_test"] = ("sts-b", dict(max_seq_length=32, uncased=False, eval_split="test"), 8)
  out["yelp5_L32_cased_passes3_bsz5"] = ("yelp5", dict(max_seq_length=32, uncased=False, num_passes=3,
                                                      eval_batch_size=5), 9)
  out["imdb_L32_cased_bsz1"] = ("imdb", dict(max_seq_length=32, uncased=False, eval_batch_size=1), 10)
  # Without --do_eval the predict records are the examples alone (with it, the list eval padded: above).
  out["mnli_mismatched_L32_uncased_predict_only"] = ("mnli_mismatched", dict(max_seq_length=32, uncased=True,
                                                                            do_train=False, do_eval=False), 11)
  return out


def example_key(example):
  """A short key naming an example (the same for ours): 12 hex digits of (text_a, text_b, label), or `<pad>`."""
  if not hasattr(example, "text_a"):
    return "<pad>"
  text = json.dumps([example.text_a, example.text_b, example.label])
  return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


class StubEstimator:
  """The Estimator main() builds: no model; evaluate returns zeros, predict nothing."""

  def __init__(self, **_):
    pass

  def train(self, **_):
    pass

  def evaluate(self, **_):
    return {"eval_accuracy": 0.0, "eval_loss": 0.0, "eval_pearsonr": 0.0}

  def predict(self, **_):
    return iter(())


def import_original(xlnet_src):
  sys.path.insert(0, HERE)
  from generate_train_step_goldens import tf1_for_the_original  # pylint: disable=import-outside-toplevel
  tf = tf1_for_the_original()
  tf.estimator = types.SimpleNamespace(Estimator=StubEstimator)
  gfile = types.SimpleNamespace(**{k: getattr(tf.gfile, k) for k in dir(tf.gfile) if not k.startswith("_")})
  listdir = tf.gfile.ListDirectory
  gfile.ListDirectory = lambda path: sorted(listdir(path))  # The file system's order is not reproducible.
  tf.gfile = gfile
  sys.modules["tensorflow"] = tf
  sys.path.insert(0, xlnet_src)
  import run_classifier  # pylint: disable=import-outside-toplevel
  run_classifier.model_utils.configure_tpu = lambda flags: None
  return tf, run_classifier


def read_example_records(tf, path, names):
  """Every record of a file ({feature: array [R, width], or [R] where the width is 1}, file order) and each
  feature's kind (`int64_list`/`float_list`); ({}, None) for an empty file. Every record holds exactly `names`."""
  out, kinds = {k: [] for k in names}, None
  for raw in tf.python_io.tf_record_iterator(path):
    feature = tf.train.Example.FromString(raw).features.feature
    assert sorted(feature) == sorted(names), list(feature)
    record_kinds = {k: feature[k].WhichOneof("kind") for k in names}
    assert kinds in (None, record_kinds), (kinds, record_kinds)
    kinds = record_kinds
    for k in names:
      out[k].append(list(getattr(feature[k], kinds[k]).value))
  if kinds is None:  # an empty file
    return {}, None
  arrays = {}
  for k in names:
    values = np.array(out[k])
    if values.shape[1] == 1:
      values = values[:, 0]
    dtype = np.float32 if kinds[k] == "float_list" else np.int64
    assert (values.astype(dtype) == values).all(), k
    arrays[k] = values.astype(dtype)
  return arrays, kinds


def read_records(tf, path):
  """Every record of a file (FEATURES, in file order), as compact arrays, and the kind of each feature."""
  arrays, kinds = read_example_records(tf, path, FEATURES)
  for k in FEATURES:
    dtype = {"input_ids": np.int32, "input_mask": np.float32, "segment_ids": np.int8, "is_real_example": np.int8,
             "label_ids": np.float32 if kinds[k] == "float_list" else np.int32}[k]
    assert (arrays[k].astype(dtype) == arrays[k]).all(), k
    arrays[k] = arrays[k].astype(dtype)
  return arrays, kinds


def run_config(tf, run_classifier, raw, task, changes, np_seed):
  """The original main on one configuration: {kind: (file name, arrays, kinds, example keys)} for the kinds it
  writes."""
  written = {}
  convert = run_classifier.file_based_convert_examples_to_features

  def recording_convert(examples, label_list, max_seq_length, tokenize_fn, output_file, num_passes=1):
    convert(examples, label_list, max_seq_length, tokenize_fn, output_file, num_passes)
    kind = os.path.basename(output_file).split(".")[-2]
    written[kind] = (os.path.basename(output_file), [example_key(e) for e in examples])  # After *= num_passes.

  with tempfile.TemporaryDirectory() as work:
    model_dir = os.path.join(work, "model")
    os.makedirs(model_dir)
    open(os.path.join(model_dir, "model.ckpt-1.index"), "w").close()
    flags = dict(BASE_FLAGS, **changes, task_name=task, data_dir=os.path.join(raw, TASK_DIRS[task]),
                 spiece_model_file=SPM, output_dir=os.path.join(work, "out"), model_dir=model_dir,
                 predict_dir=os.path.join(work, "predict"), is_regression=task == "sts-b")
    run_classifier.FLAGS = types.SimpleNamespace(**flags)
    run_classifier.file_based_convert_examples_to_features = recording_convert
    np.random.seed(np_seed)
    try:
      run_classifier.main(None)
    finally:
      run_classifier.file_based_convert_examples_to_features = convert
    out = {}
    for kind in [k for k in KINDS if k in written]:
      name, keys = written[kind]
      arrays, kinds = read_records(tf, os.path.join(work, "out", name))
      assert len(keys) == len(arrays["input_ids"]), (kind, len(keys))
      out[kind] = (name, arrays, kinds, keys)
    assert sorted(os.listdir(os.path.join(work, "out"))) == sorted(v[0] for v in out.values())
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out_dir", default=os.path.join(HERE, "classifier"))
  args = parser.parse_args()
  raw = os.path.join(args.out_dir, "raw")
  write_raw(raw)
  tf, run_classifier = import_original(args.xlnet_src)
  meta = {"base_flags": BASE_FLAGS, "spm": os.path.relpath(SPM, HERE), "configs": {}}
  for name, (task, changes, np_seed) in configs().items():
    out = run_config(tf, run_classifier, raw, task, changes, np_seed)
    arrays = {f"{kind}_{k}": v for kind, (_, a, _, _) in out.items() for k, v in a.items()}
    np.savez_compressed(os.path.join(args.out_dir, f"{name}.npz"), **arrays)
    meta["configs"][name] = {
        "task_name": task, "data_dir": os.path.join("raw", TASK_DIRS[task]), "flags": changes, "np_seed": np_seed,
        "files": {kind: {"name": f, "feature_kinds": kinds, "examples": keys}
                  for kind, (f, _, kinds, keys) in out.items()}}
    print(name, {kind: (f, len(keys)) for kind, (f, _, _, keys) in out.items()})
  with open(os.path.join(args.out_dir, "meta.json"), "w", encoding="utf-8") as f:
    json.dump(meta, f, indent=1)
    f.write("\n")


if __name__ == "__main__":
  main()
