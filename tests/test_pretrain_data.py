import bisect
import bz2
import dataclasses
import glob
import gzip
import json
import lzma
import os
import random
import re
import tarfile

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import fileio
from xlnet_tf.data import example_encoder
from xlnet_tf.data import tokenization as tk
from xlnet_tf.data.pretrain_spec import PretrainDataSpec
from xlnet_tf.tasks.pretrain import data as pretrain_data
from xlnet_tf.tasks.pretrain import sampling
from xlnet_tf.tasks.pretrain import text as pretrain_text
from xlnet_tf.tasks.pretrain.writer_options import WriterOptions, validate_options

GOLDEN_DIR = "tests/testdata/data/records/tfrecords"
GOLDEN_RECORDS = os.path.join(GOLDEN_DIR, "train-0-0.bsz-4.seqlen-32.reuse-16.bi.alpha-6.beta-1.fnp-6.tfrecords")
GOLDEN_CORPUS = "tests/testdata/data/corpus/*.txt"
GOLDEN_SPM = "tests/testdata/data/spm/spiece.model"
# The golden flags (tests/testdata/data: --use_tpu=False --bsz_per_host=4 --seq_len=32 --reuse_len=16 ...).
GOLDEN_SPEC = PretrainDataSpec(bsz_per_host=4, seq_len=32, reuse_len=16, bi_data=True, num_predict=6, mask_alpha=6,
                               mask_beta=1, uncased=False)
SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(PretrainDataSpec))
OPTION_FIELDS = tuple(f.name for f in dataclasses.fields(WriterOptions))


def _create_data(**kw):
  """`create_data` of GOLDEN_SPEC (num_core_per_host 1) with some values changed, the naming ones in the spec, the
  writer's other flags in its `WriterOptions`."""
  spec = dataclasses.replace(GOLDEN_SPEC, **{k: v for k, v in kw.items() if k in SPEC_FIELDS})
  options = WriterOptions(**{"num_core_per_host": 1, **{k: v for k, v in kw.items() if k in OPTION_FIELDS}})
  rest = {k: v for k, v in kw.items() if k not in SPEC_FIELDS + OPTION_FIELDS}
  return pretrain_data.create_data(spec, options, **rest)
FEATURES = ("input", "is_masked", "target", "seg_id", "label")


def read_records(path, seq_len):
  """All records of a file as numpy arrays (record order kept)."""
  spec = {k: tf.io.FixedLenFeature([1 if k == "label" else seq_len], tf.int64) for k in FEATURES}
  out = {k: [] for k in FEATURES}
  for batch in tf.data.TFRecordDataset(path).batch(4096):
    parsed = tf.io.parse_example(batch, spec)
    for k in FEATURES:
      out[k].append(parsed[k].numpy())
  return {k: np.concatenate(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def golden_sp():
  return tk.load_sentencepiece(GOLDEN_SPM)


def test_format_filename_matches_original_names():
  names = sorted(os.listdir(GOLDEN_DIR))
  assert names == [GOLDEN_SPEC.filename("record_info-train-0-0", "json"),
                   GOLDEN_SPEC.filename("train-0-0", "tfrecords")]
  spec = PretrainDataSpec(bsz_per_host=32, seq_len=512, reuse_len=256, bi_data=True, mask_alpha=6, mask_beta=1,
                          uncased=True, num_predict=85)
  assert spec.filename("train-0-0", "tfrecords") == (
      "train-0-0.bsz-32.seqlen-512.reuse-256.uncased.bi.alpha-6.beta-1.fnp-85.tfrecords")


def test_records_equal_the_original_exactly(golden_sp, tmp_path):
  """With the golden generator's seeds (numpy 100*task+pass_id = 0, python random.seed(3)), every record of every
  feature equals what the original data_utils.py wrote."""
  encoder = tk.BatchEncoder(golden_sp)
  shards = [pretrain_text.read_shard(p, encoder, uncased=False)[:2] for p in sorted(glob.glob(GOLDEN_CORPUS))]
  np_rng, py_rng = np.random.RandomState(0), random.Random(3)
  data, sent_ids, perm = pretrain_text.combine_shards(shards, np_rng)
  assert perm == np.random.RandomState(0).permutation(3).tolist()
  with fileio.atomic_files() as files:
    path, num_batch = pretrain_data.create_tfrecords(str(tmp_path), data, sent_ids, GOLDEN_SPEC,
                                                     WriterOptions(num_core_per_host=1), files=files,
                                                     start_table=tk.start_piece_table(golden_sp), rngs=(np_rng, py_rng))
  assert os.path.basename(path) == os.path.basename(GOLDEN_RECORDS)
  assert num_batch == 4437
  ours, gold = read_records(path, 32), read_records(GOLDEN_RECORDS, 32)
  for k in FEATURES:
    np.testing.assert_array_equal(ours[k], gold[k], err_msg=k)
  assert os.listdir(tmp_path) == [os.path.basename(path)]  # No temporary file left.


CONFIG_DIR = "tests/testdata/data_configs"
with open(os.path.join(CONFIG_DIR, "meta.json"), encoding="utf-8") as _f:
  CONFIG_META = json.load(_f)


@pytest.mark.parametrize("name", list(CONFIG_META["configs"]))  # About 0.1-0.4 s each.
def test_records_equal_the_original_in_other_configurations(name, tmp_path, monkeypatch):
  """create_data with the flags of tests/testdata/data_configs (written by generate_data_goldens.py with the
  original data_utils.py: bi_data False, uncased, use_eod False, seq_len 8 and 48, num_predict 1 to 32, other
  mask_alpha/mask_beta, several cores, task and pass_id > 0, split dev, id input) and the same seeds writes the same
  records."""
  meta = CONFIG_META["configs"][name]
  flags = dict(meta["flags"])
  assert meta["np_seed"] == 100 * flags["task"] + flags["pass_id"]
  spec = PretrainDataSpec(**{k: flags.pop(k) for k in SPEC_FIELDS})
  options = WriterOptions(**{k: flags.pop(k) for k in OPTION_FIELDS if k in flags})
  assert not flags, f"flags the test does not pass: {flags}"
  # The original's seeds: numpy 100*task + pass_id (make_rngs without seed) and python's random seeded as there.
  monkeypatch.setattr(pretrain_data, "make_rngs", lambda task, pass_id, seed=None: (
      np.random.RandomState(100 * task + pass_id), random.Random(meta["py_seed"])))
  info = pretrain_data.create_data(spec, options, input_glob=os.path.join(CONFIG_DIR, meta["corpus"], "*.txt"),
                                   sp_path=GOLDEN_SPM, save_dir=str(tmp_path))
  (path,) = info["filenames"]
  assert os.path.basename(path) == meta["record_file"]
  assert info["num_batch"] == meta["num_batch"]
  ours = read_records(path, spec.seq_len)
  gold = np.load(os.path.join(CONFIG_DIR, f"{name}.npz"))
  ours["label"] = ours["label"][:, 0]
  for k in FEATURES:
    np.testing.assert_array_equal(ours[k], gold[k], err_msg=k)


def test_flags_the_original_cannot_write_are_rejected():
  for rejected in CONFIG_META["rejected"].values():
    flags = dict(rejected["flags"])
    spec = PretrainDataSpec(**{k: flags.pop(k) for k in SPEC_FIELDS})
    with pytest.raises(pretrain_data.DataError, match="--reuse_len must be --seq_len/2"):
      validate_options(spec, WriterOptions(**{k: v for k, v in flags.items() if k in OPTION_FIELDS}))


def test_serialize_example_equals_protobuf_deterministic():
  rs = np.random.RandomState(0)
  cases = [
      {"input": rs.randint(0, 32000, 512), "is_masked": rs.randint(0, 2, 512), "target": rs.randint(0, 32000, 512),
       "seg_id": rs.randint(0, 3, 512), "label": [1]},
      {"b": [0, 127, 128, 16383, 16384, 65535, 65536, 2**31, 2**62], "a": [-1, -300, 5], "empty": []},
  ]
  cases.append({})
  cases.append({"x": list(range(0, 3_000_000, 997)), "y": [True, False]})
  protos = [tf.train.Example(features=tf.train.Features(feature={
      k: tf.train.Feature(int64_list=tf.train.Int64List(value=list(map(int, v)))) for k, v in features.items()}))
            for features in cases]
  expected = [proto.SerializeToString(deterministic=True) for proto in protos]
  assert example_encoder.serialize_examples(cases) == expected
  # Without the large values:
  assert example_encoder.serialize_examples(cases[:1] + cases[3:]) == expected[:1] + expected[3:]
  for features, proto, exp in zip(cases, protos, expected):
    assert example_encoder.serialize_example(features) == exp
    assert tf.train.Example.FromString(exp) == proto


def test_cheaper_numpy_draws_equal_the_originals_calls():
  ngrams = np.arange(1, 6, dtype=np.int64)
  pvals = 1. / np.arange(1, 6)
  pvals /= pvals.sum(keepdims=True)
  cdf = sampling._ngram_cdf(5)
  a, b = np.random.RandomState(7), np.random.RandomState(7)
  randint = sampling._legacy_randint(b)
  for i in range(20000):
    assert a.choice(ngrams, p=pvals) == bisect.bisect_right(cdf, b.random_sample()) + 1
    size = (i * 7919) % 700 + 1  # Includes 1 (no draw) and powers of two.
    assert (a.choice(size) if i % 2 else a.randint(size)) == randint(size)
  assert a.random_sample() == b.random_sample()  # Still in step.


def _trim_loop(a_len, b_len, tot_len):
  while a_len + b_len > tot_len:
    if a_len > b_len:
      a_len -= 1
    else:
      b_len -= 1
  return a_len, b_len


def test_trim_lengths_closed_form_equals_the_loop():
  for a_len in range(0, 40):
    for b_len in range(0, 40):
      for tot_len in (1, 2, 7, 13, 30):
        assert sampling._trim_lengths(a_len, b_len, tot_len) == _trim_loop(a_len, b_len, tot_len)


def _split_a_and_b_loops(data, sent_ids, begin_idx, tot_len, rng):
  """The original algorithm written with its scanning loops (spec e7), extend_target=True."""
  data_len = len(data)
  if begin_idx + tot_len >= data_len:
    return None
  end_idx, cut_points = begin_idx + 1, []
  while end_idx < data_len:
    if sent_ids[end_idx] != sent_ids[end_idx - 1]:
      if end_idx - begin_idx >= tot_len:
        break
      cut_points.append(end_idx)
    end_idx += 1
  if not cut_points or rng.random() < 0.5:
    label = 0
    a_end = rng.choice(cut_points) if cut_points else end_idx
    b_len = max(1, tot_len - (a_end - begin_idx))
    b_begin = rng.randint(0, data_len - 1 - b_len)
    b_end = b_begin + b_len
    while b_begin > 0 and sent_ids[b_begin - 1] == sent_ids[b_begin]:
      b_begin -= 1
    while b_end < data_len - 1 and sent_ids[b_end - 1] == sent_ids[b_end]:
      b_end += 1
  else:
    label = 1
    a_end = rng.choice(cut_points)
    b_begin, b_end = a_end, end_idx
  a_len, b_len = _trim_loop(a_end - begin_idx, b_end - b_begin, tot_len)
  a_end, b_end = begin_idx + a_len, b_begin + b_len
  if a_end >= data_len or b_end >= data_len:
    return None
  return data[begin_idx:a_end], data[b_begin:b_end], label, data[begin_idx + 1:a_end + 1], data[b_begin:b_end + 1]


def test_split_a_and_b_equals_the_scanning_loops():
  rs = np.random.RandomState(1)
  checked = 0
  for trial in range(400):
    n = rs.randint(10, 80)
    p_flip = [0.0, 0.05, 0.3, 0.9][trial % 4]  # Includes rows without any sentence boundary.
    sent_ids = np.cumsum(rs.rand(n) < p_flip) % 2 == 1
    data = np.arange(n, dtype=np.int64) + 100
    begin, tot_len = rs.randint(0, n), rs.randint(1, 20)
    ours = sampling._split_a_and_b(data, sent_ids, begin, tot_len, extend_target=True, rng=random.Random(trial))
    ref = _split_a_and_b_loops(data, sent_ids, begin, tot_len, random.Random(trial))
    assert (ours is None) == (ref is None)
    if ref is not None:
      a, b, label, _, a_tgt, b_tgt = ours
      assert label == ref[2]
      for x, y in zip((a, b, a_tgt, b_tgt), (ref[0], ref[1], ref[3], ref[4])):
        np.testing.assert_array_equal(x, y)
      assert len(a) + len(b) == tot_len and len(b_tgt) == len(b) + 1
      checked += 1
  assert checked > 150


def _sample_mask_literal(seg, is_start, rng, alpha, beta, goal):
  """The original `_sample_mask` loop (spec e8), with its numpy calls, the end-search bug and reverse=False."""
  seg_len = len(seg)
  mask = np.zeros(seg_len, bool)
  ngrams = np.arange(1, 6, dtype=np.int64)
  pvals = 1. / np.arange(1, 6)
  pvals /= pvals.sum(keepdims=True)
  num_predict, cur_len = 0, 0
  while cur_len < seg_len:
    if goal is not None and num_predict >= goal:
      break
    n = rng.choice(ngrams, p=pvals)
    if goal is not None:
      n = min(n, goal - num_predict)
    ctx_size = (n * alpha) // beta
    l_ctx = rng.choice(ctx_size)
    beg = cur_len + l_ctx
    while beg < seg_len and not is_start[seg[beg]]:
      beg += 1
    if beg >= seg_len:
      break
    end, cnt = beg + 1, 1
    while end < seg_len:
      if is_start[seg[beg]]:  # The bug: seg[beg], not seg[end].
        cnt += 1
        if cnt > n:
          break
      end += 1
    if end >= seg_len:
      break
    mask[beg:end] = True
    num_predict += end - beg
    cur_len = end + ctx_size - l_ctx
  while goal is not None and num_predict < goal:
    i = rng.randint(seg_len)
    if not mask[i]:
      mask[i] = True
      num_predict += 1
  return mask


def _runs(mask):
  """[(begin, end)] of the runs of True."""
  padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
  edges = np.flatnonzero(np.diff(padded))
  return list(zip(edges[::2], edges[1::2]))


def test_sample_mask_original_mode(golden_sp):
  table = tk.start_piece_table(golden_sp)
  rs = np.random.RandomState(3)
  for trial in range(300):
    seg = rs.randint(0, 1000, size=rs.choice([16, 37, 256]))
    goal = [None, 1, 8, 16][trial % 4]
    goal = None if goal is None else min(goal, len(seg))
    alpha, beta = [(6, 1), (4, 2), (3, 1)][trial % 3]
    masking = sampling.MaskSampling(mask_alpha=alpha, mask_beta=beta)
    ours = sampling._sample_mask(seg, table, np.random.RandomState(trial), masking, goal_num_predict=goal)
    ref = _sample_mask_literal(seg, table, np.random.RandomState(trial), alpha, beta, goal)
    np.testing.assert_array_equal(ours, ref)
    if goal is not None:
      assert ours.sum() == goal
    else:  # Span phase only: runs of <= 5 tokens, each starting at a start piece.
      assert all(end - beg <= 5 and table[seg[beg]] for beg, end in _runs(ours))
    rev = sampling._sample_mask(seg[::-1], table, np.random.RandomState(trial), masking, goal_num_predict=goal,
                                reverse=True)
    np.testing.assert_array_equal(rev, ours[::-1])  # reverse = same draws on the flipped segment.


def test_sample_mask_word_mode_masks_whole_words(golden_sp):
  table = tk.start_piece_table(golden_sp)
  text = open("tests/testdata/data/corpus/imdb-1.txt", encoding="utf-8").read()
  ids = np.array(tk.encode_ids(golden_sp, tk.preprocess_text(text)), np.int64)
  multi_token_words = 0
  word_spans = sampling.MaskSampling(mask_alpha=6, mask_beta=1, span_sampling="word")
  for k in range(60):
    seg = ids[k * 256:(k + 1) * 256]
    mask = sampling._sample_mask(seg, table, np.random.RandomState(k), word_spans)
    for beg, end in _runs(mask):
      words = int(table[seg[beg:end]].sum())
      assert table[seg[beg]] and (end == len(seg) or table[seg[end]]) and 1 <= words <= 5
      multi_token_words += (end - beg) > words
    for goal in (43, 42):
      assert sampling._sample_mask(seg, table, np.random.RandomState(k), word_spans, goal_num_predict=goal).sum() == goal
  assert multi_token_words > 0  # Spans really are longer than n tokens somewhere.


def test_stream_layout_bi_data_rows():
  data = np.arange(40, dtype=np.int64)
  sent_ids = (np.arange(40) // 3) % 2 == 0
  rows, sids = pretrain_data.stream_layout(data, sent_ids, bsz_per_host=8, num_core_per_host=2, bi_data=True)
  # 4 forward rows of 10 tokens; core 0 owns rows 0-3: forward rows 0, 1 then the same rows reversed in time.
  fwd = data.reshape(4, 10)
  expected = np.stack([fwd[0], fwd[1], fwd[0, ::-1], fwd[1, ::-1], fwd[2], fwd[3], fwd[2, ::-1], fwd[3, ::-1]])
  np.testing.assert_array_equal(rows, expected)
  np.testing.assert_array_equal(sids, sent_ids[expected])
  for c in range(2):
    core = rows[4 * c:4 * c + 4]
    np.testing.assert_array_equal(core[2:], core[:2, ::-1])
  rows, _ = pretrain_data.stream_layout(data[:39], sent_ids[:39], bsz_per_host=4, num_core_per_host=1, bi_data=False)
  np.testing.assert_array_equal(rows, data[:36].reshape(4, 9))  # Tail dropped.


def test_read_shard_drops_every_carriage_return_as_the_original_s_reader(golden_sp, tmp_path, caplog):
  """The original reads `for line in tf.gfile.Open(path)`: TensorFlow's readline drops every CR, so a CR inside a
  line joins its neighbours and CR-only line ends make one line; ours matches TensorFlow's lines, and warns."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  path = tmp_path / "cr.txt"
  path.write_bytes(b"The movie was great\rI loved it.\r\n\r\nOld Mac line one\rline two\r\rthree\nplain \r  \n"
                   b"a \r b\n")  # the last two: CRs beside spaces, which join nothing
  expected = []
  for line in tf.io.gfile.GFile(str(path)):  # TensorFlow's line reader, the original's
    expected += tk.encode_ids(golden_sp, tk.preprocess_text(line.strip())) if line.strip() else [tk.EOD_ID]
  with caplog.at_level("WARNING"):
    ids, _, lines = pretrain_text.read_shard(str(path), tk.BatchEncoder(golden_sp), uncased=False)
  assert ids.tolist() == expected and lines == 5
  assert tk.encode_ids(golden_sp, "greatI")[-1] in expected  # the words are joined
  assert "cr.txt: 2 line(s) hold a carriage return (CR) that ends no line (line 1 and more)" in caplog.text
  for text in (b"5 6\n\r", b"\r", b"\r\r", b"5\r6\r", b"5\n\n\r\r", b"5\n \r"):  # CRs after the last LF: no line
    path.write_bytes(text)
    lines = [line.split() for line in tf.io.gfile.GFile(str(path))]
    ids, _, count = pretrain_text.read_shard(str(path), None, uncased=False, from_raw_text=False)
    assert ids.tolist() == [int(t) for words in lines for t in words or [tk.EOD_ID]] and count == len(lines), text


def test_read_shard_sentence_ids_and_eod(golden_sp, tmp_path):
  encoder = tk.BatchEncoder(golden_sp)
  path = tmp_path / "a.txt"
  path.write_bytes(b"Hello world.\r\nGood.\n\nNew doc.\n\n\n")
  ids, sids, lines = pretrain_text.read_shard(str(path), encoder, uncased=False)
  hello, good, new = (tk.encode_ids(golden_sp, s) for s in ("Hello world.", "Good.", "New doc."))
  np.testing.assert_array_equal(ids, hello + good + [tk.EOD_ID] + new + [tk.EOD_ID, tk.EOD_ID])
  # Flips at each sentence; <eod> keeps the id of the sentence before it (two blank lines: two equal ids).
  expected = [True] * len(hello) + [False] * len(good) + [False] + [True] * len(new) + [True, True]
  np.testing.assert_array_equal(sids, expected)
  assert lines == 6
  ids, sids, _ = pretrain_text.read_shard(str(path), encoder, uncased=False, use_eod=False)
  np.testing.assert_array_equal(ids, hello + good + new)
  np.testing.assert_array_equal(sids, [True] * len(hello) + [False] * len(good) + [True] * len(new))
  ids, _, _ = pretrain_text.read_shard(str(path), encoder, uncased=True)
  assert ids[:2].tolist() == tk.encode_ids(golden_sp, "hello world.")[:2]

  path.write_text("5 6 7\n\n 9 \n")
  ids, sids, _ = pretrain_text.read_shard(str(path), encoder, uncased=False, from_raw_text=False, vocab_size=1000)
  assert ids.tolist() == [5, 6, 7, tk.EOD_ID, 9] and sids.tolist() == [True] * 4 + [False]
  path.write_bytes(b"12 3\r45\n")  # every CR dropped, as the original's lines: ids 12, 345
  assert pretrain_text.read_shard(str(path), encoder, uncased=False, from_raw_text=False)[0].tolist() == [12, 345]
  path.write_text("5 6\n7 x\n")
  with pytest.raises(pretrain_data.DataError, match=r"a.txt:2: --from_raw_text=False needs whitespace-separated integer"):
    pretrain_text.read_shard(str(path), encoder, uncased=False, from_raw_text=False)
  path.write_text("5 6\n7 1000\n")
  with pytest.raises(pretrain_data.DataError, match=r"a.txt:2: id 1000 is outside the vocabulary \[0, 1000\)"):
    pretrain_text.read_shard(str(path), encoder, uncased=False, from_raw_text=False, vocab_size=1000)
  path.write_bytes("fine\n\nstill fine\nbad \xe9 byte\n".encode("latin-1"))
  with pytest.raises(pretrain_data.DataError, match=r"a.txt:4: not UTF-8 \(byte 0xe9 at column 5\)"):
    pretrain_text.read_shard(str(path), encoder, uncased=False)
  path.write_bytes(gzip.compress(b"fine\n\nstill fine\n"))  # it was "not UTF-8 ... e.g. iconv -f latin1"
  with pytest.raises(pretrain_data.DataError, match=r"a.txt is gzip-compressed: the input is plain text. Decompress"):
    pretrain_text.read_shard(str(path), encoder, uncased=False)
  # bzip2, xz (Wikipedia's dumps are bzip2): the advice was latin1, whose "text" of their bytes became records
  # (sweep 26, B7); train_spm's check the same.
  for kind, data, command in (("bzip2", bz2.compress(b"fine text\n" * 50), "bunzip2 -k"),
                              ("xz", lzma.compress(b"fine text\n" * 50), "unxz -k")):
    path.write_bytes(data)
    line = f"{path} is {kind}-compressed: the input is plain text. Decompress it first ({command} {path})"
    with pytest.raises(pretrain_data.DataError, match=re.escape(line)):
      pretrain_text.read_shard(str(path), encoder, uncased=False)
    with pytest.raises(ValueError, match=re.escape(f"--input: {line}")):
      tk.check_text_files([str(path)])
  inner = tmp_path / "inner.txt"  # an uncompressed tar: UTF-8 to a decoder, its headers became text (rerun 26, N7)
  inner.write_text("fine text\n" * 50)
  with tarfile.open(path, "w") as archive:
    archive.add(inner, arcname="inner.txt")
  line = f"{path} is a tar archive: the input is plain text. Extract it first (tar -xf {path}) and pass its files."
  with pytest.raises(pretrain_data.DataError, match=re.escape(line)):
    pretrain_text.read_shard(str(path), encoder, uncased=False)
  with pytest.raises(ValueError, match=re.escape(f"--input: {line}")):
    tk.check_text_files([str(path)])


def test_nul_bytes_are_refused_by_data_utils_and_train_spm_alike(tmp_path):
  """A crash's zero-filled gap: data_utils.py read it into the records as text (sweep 33, B5); train_spm.py trained
  a vocabulary on it, which data_utils.py then refused the same text for."""
  from xlnet_tf.data import tokenization as tk  # pylint: disable=import-outside-toplevel
  path = tmp_path / "a.txt"
  path.write_bytes(b"fine text\n" * 50 + b"A sente" + b"\0" * 1000 + b"nce.\n")
  line = f"{path}:51: holds 1000 NUL bytes from column 8 (a file damaged, or not text). Fix or remove it (tr -d"
  with pytest.raises(ValueError, match=re.escape(f"--input: {line}")):
    tk.check_text_files([str(path)])


def test_combine_shards_inverts_to_keep_a_boundary():
  shards = [(np.array([1, 2]), np.array([True, False])), (np.array([3, 4, 5]), np.array([False, False, True])),
            (np.array([6]), np.array([True]))]
  rng = np.random.RandomState(100 * 2 + 1)
  data, sids, perm = pretrain_text.combine_shards(shards, rng)
  assert perm == np.random.RandomState(201).permutation(3).tolist()
  np.testing.assert_array_equal(data, np.concatenate([shards[k][0] for k in perm]))
  starts = np.cumsum([0] + [len(shards[k][0]) for k in perm])[1:-1]
  assert all(sids[s] != sids[s - 1] for s in starts)
  for k, s in zip(perm, np.cumsum([0] + [len(shards[k][0]) for k in perm])):  # Each shard kept or inverted whole.
    part = sids[s:s + len(shards[k][1])]
    assert (part == shards[k][1]).all() or (part == ~shards[k][1]).all()


def _small_run(tmp_path, name, **kw):
  args = dict(input_glob="tests/testdata/data/corpus/imdb-0.txt", sp_path=GOLDEN_SPM,
              save_dir=str(tmp_path / name), use_tpu=False)
  args.update(kw)
  info = _create_data(**args)
  with open(info["filenames"][0], "rb") as f:
    return info, f.read()


def test_seed_makes_output_reproducible(tmp_path):
  info1, bytes1 = _small_run(tmp_path, "a", seed=5)
  _, bytes2 = _small_run(tmp_path, "b", seed=5)
  _, bytes3 = _small_run(tmp_path, "c", seed=6)
  assert info1["num_batch"] > 100 and bytes1 == bytes2 and bytes1 != bytes3
  _, bytes4 = _small_run(tmp_path, "d", seed=5, pass_id=1)
  assert bytes4 != bytes1


def test_word_span_sampling_keeps_exact_counts(tmp_path):
  info, _ = _small_run(tmp_path, "w", seed=1, span_sampling="word", num_predict=9)
  recs = read_records(info["filenames"][0], 32)
  assert len(recs["input"]) == 4 * info["num_batch"]
  assert (recs["is_masked"][:, :16].sum(1) == 5).all() and (recs["is_masked"][:, 16:].sum(1) == 4).all()
  info, _ = _small_run(tmp_path, "all", seed=1, num_predict=32)  # The largest valid num_predict: everything.
  assert read_records(info["filenames"][0], 32)["is_masked"].all()


def test_failed_run_leaves_no_output(tmp_path):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text(open("tests/testdata/data/corpus/imdb-0.txt", encoding="utf-8").read())
  (corpus / "b.txt").write_bytes(b"ok\n\xff\xfe\n")
  with pytest.raises(pretrain_data.DataError, match=r"b.txt:2: not UTF-8"):
    _create_data(input_glob=str(corpus / "*.txt"), sp_path=GOLDEN_SPM, save_dir=str(tmp_path / "out"),
                 use_tpu=False)
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kw,message", [
    (dict(reuse_len=12), "--reuse_len must be --seq_len/2"),
    (dict(seq_len=31, reuse_len=15), "--seq_len must be even and >= 8"),
    (dict(num_predict=40), "--num_predict must be in [1, 32] for --seq_len=32"),
    (dict(num_predict=0), "--num_predict must be in"),
    (dict(bsz_per_host=6, num_core_per_host=2), "--bi_data needs --bsz_per_host divisible by 2*num_core_per_host=4"),
    (dict(bsz_per_host=6, num_core_per_host=4, bi_data=False), "divisible by --num_core_per_host"),
    (dict(mask_alpha=1, mask_beta=2), "mask_alpha >= mask_beta"),
    (dict(task=2, num_task=2), "--task must be in [0, --num_task)"),
    (dict(task=0, num_task=0), "--num_task must be at least 1 (the number of data_utils.py workers). Received: 0."),
    (dict(span_sampling="words"), "--span_sampling must be one of"),
])
def test_validate_options_rejects(kw, message):
  args = dict(bsz_per_host=4, num_core_per_host=1, seq_len=32, reuse_len=16, num_predict=6, mask_alpha=6,
              mask_beta=1, bi_data=True)
  args.update(kw)
  spec_args = {k: args.pop(k) for k in SPEC_FIELDS if k in args}
  with pytest.raises(ValueError) as e:  # the spec's own checks (ValueError) or the writer's (DataError)
    validate_options(PretrainDataSpec(**spec_args), WriterOptions(**args))
  assert message in str(e.value) and "\n" not in str(e.value)
