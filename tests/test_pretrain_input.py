"""Tests of the pretraining input pipeline (`xlnet_tf/tasks/pretrain/input.py` and `parser.py`), against the
original's outputs."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.data.pretrain_spec import PretrainDataSpec
from xlnet_tf.data.record_files import find_record_info, read_corpus_info
from xlnet_tf.tasks.pretrain.input import ReaderOptions, get_dataset, get_input_fn, validate_lengths
from xlnet_tf.tasks.pretrain.parser import local_perm, parse_record

GOLDEN_DIR = "tests/testdata/data/records/tfrecords"
GOLDEN_NPZ = "tests/testdata/data/records_original.npz"
SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(PretrainDataSpec))
READER_FIELDS = tuple(f.name for f in dataclasses.fields(ReaderOptions))


def _spec_args(kw):
  """Loose keyword values -> `get_input_fn` arguments: the naming ones become one spec, the reader's `options`.
  `find_record_info` takes them without `options`."""
  return dict({k: v for k, v in kw.items() if k not in SPEC_FIELDS + READER_FIELDS},
              spec=PretrainDataSpec(**{k: v for k, v in kw.items() if k in SPEC_FIELDS}),
              options=ReaderOptions(**{k: v for k, v in kw.items() if k in READER_FIELDS}))


GOLDEN_KW = _spec_args(dict(split="train", bsz_per_host=4, seq_len=32, reuse_len=16, bi_data=True, perm_size=8,
                            mask_alpha=6, mask_beta=1, uncased=False, num_predict=6))
SEP, CLS = 4, 3
EXACT_KEYS = ("input_k", "seg_id", "label", "target", "target_mask", "target_mapping", "input_q")


# ----------------------------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------------------------
def _example(inp, is_masked, target, seg_id, label):
  feats = {"input": inp, "is_masked": is_masked, "target": target, "seg_id": seg_id, "label": [label]}
  feats = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v])) for k, v in feats.items()}
  return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def _random_record(rng, seq_len, reuse_len, num_predict, head=(), last_target=None):
  """A record in the original format: [reuse | A SEP B SEP CLS], next-token targets, num_predict masked; `head`:
  the first tokens, `last_target`: the target of the last position (a token of no input)."""
  tok = rng.integers(10, 1000, size=seq_len + 1)
  tok[:len(head)] = head
  tok[seq_len] = tok[seq_len] if last_target is None else last_target
  sep_a = reuse_len + 1 + rng.integers(0, seq_len - reuse_len - 4)
  tok[[sep_a, seq_len - 2]] = SEP
  tok[seq_len - 1] = CLS
  n_1 = num_predict // 2
  mask = np.zeros(seq_len, np.int64)
  mask[rng.choice(reuse_len, num_predict - n_1, replace=False)] = 1
  mask[reuse_len + rng.choice(seq_len - reuse_len, n_1, replace=False)] = 1
  seg = np.array([0] * (sep_a + 1) + [1] * (seq_len - 1 - sep_a - 1) + [2])
  return _example(tok[:seq_len], mask, tok[1:], seg, rng.integers(0, 2)), mask


def _write_records(record_dir, task, num_steps, bsz_per_host=4, seq_len=16, reuse_len=8, num_predict=3,
                   bi_data=False, seed=0):
  """Writes one record file + record_info; record (step s, row r) starts with tokens [1000+r, 2000+s, 3000+task]."""
  rng = np.random.default_rng(seed + 100 * task)
  spec = PretrainDataSpec(bsz_per_host=bsz_per_host, seq_len=seq_len, bi_data=bi_data, mask_alpha=6, mask_beta=1,
                          reuse_len=reuse_len, num_predict=num_predict)
  os.makedirs(record_dir, exist_ok=True)
  name = spec.filename(f"train-{task}-0", "tfrecords")
  with tf.io.TFRecordWriter(os.path.join(record_dir, name)) as writer:
    for step in range(num_steps):
      for row in range(bsz_per_host):
        writer.write(_random_record(rng, seq_len, reuse_len, num_predict, (1000 + row, 2000 + step, 3000 + task))[0])
  info = {"filenames": [f"/elsewhere/save_dir/tfrecords/{name}"], "num_batch": num_steps}
  with open(os.path.join(record_dir, spec.filename(f"record_info-train-{task}-0", "json")), "w") as f:
    json.dump(info, f)


def _small_kw(**over):
  kw = dict(split="train", bsz_per_host=4, seq_len=16, reuse_len=8, bi_data=False, perm_size=4, mask_alpha=6,
            mask_beta=1, uncased=False, num_predict=3)
  kw.update(over)
  return _spec_args(kw)


def _take(ds, n):
  return [{k: v.numpy() for k, v in b.items()} for b in ds.take(n)]


def _check_invariants(batch, reuse_len, perm_size):
  """The properties every parsed batch has, whatever the sampled factorisation order."""
  pm, inp_q, inp_k = batch["perm_mask"], batch["input_q"], batch["input_k"]
  seq_len = inp_k.shape[1]
  assert set(np.unique(pm)) <= {0.0, 1.0}
  for b in range(inp_k.shape[0]):
    m = pm[b]
    func = (inp_k[b] == SEP) | (inp_k[b] == CLS)
    tgt = inp_q[b] == 1
    assert not (tgt & func).any()
    assert (m[:reuse_len, reuse_len:] == 1).all(), "the reuse half saw the second half"
    assert (m[reuse_len:, :reuse_len] == 0).all(), "the second half must see all of the reuse half"
    for half in (slice(0, reuse_len), slice(reuse_len, seq_len)):  # each half has its own order
      mh, t, f = m[half, half], tgt[half], func[half]
      unmasked = ~t & ~f
      masked_or_func = ~unmasked
      assert (mh[:, unmasked] == 0).all(), "every position sees the unmasked tokens"
      assert (mh[np.ix_(unmasked, masked_or_func)] == 1).all(), "an unmasked token saw a masked/functional token"
      assert (np.diag(mh)[t] == 1).all(), "a target saw itself in the query stream"
      assert (np.diag(mh)[f] == 0).all(), "SEP/CLS see themselves"
      block = np.arange(mh.shape[0]) // perm_size
      for i in np.flatnonzero(t):
        for j in np.flatnonzero(masked_or_func):
          if block[j] < block[i]:
            assert mh[i, j] == 0, "a later block must see the earlier blocks"
          if t[j] and i != j:
            assert mh[i, j] + mh[j, i] == 1, "two targets must be strictly ordered"
    positions = np.flatnonzero(tgt)
    if "target_mapping" in batch:
      tm, t, tmask = batch["target_mapping"][b], batch["target"][b], batch["target_mask"][b]
      n = len(positions)
      np.testing.assert_array_equal(tmask, [1] * n + [0] * (len(tmask) - n))
      np.testing.assert_array_equal(tm[:n], np.eye(seq_len)[positions])
      assert (tm[n:] == 0).all() and (t[n:] == 0).all()
      np.testing.assert_array_equal(t[:n], inp_k[b][positions])
    else:
      np.testing.assert_array_equal(batch["target_mask"][b], inp_q[b])
      np.testing.assert_array_equal(batch["target"][b][positions], inp_k[b][positions])


# ----------------------------------------------------------------------------------------------------------------
# Against the original
# ----------------------------------------------------------------------------------------------------------------
def test_original_records_give_the_original_batches():
  golden = np.load(GOLDEN_NPZ)
  # With every record's ids checked against the vocabulary (of the test SentencePiece model): the same batches.
  input_fn, info = get_input_fn(GOLDEN_DIR, **dict(GOLDEN_KW, options=dataclasses.replace(GOLDEN_KW["options"],
                                                                                         n_token=1000)))
  assert info["num_batch"] == 4437 and [os.path.dirname(f) for f in info["filenames"]] == [GOLDEN_DIR]
  batches = _take(input_fn(), 2)
  for i, batch in enumerate(batches):
    for key in EXACT_KEYS:
      assert batch[key].dtype == golden[key].dtype, key
      np.testing.assert_array_equal(batch[key], golden[key][i], err_msg=key)
    np.testing.assert_array_equal(batch["input_k"], golden["raw_input"][4 * i:4 * i + 4])
    _check_invariants(batch, reuse_len=16, perm_size=8)
    # The invariants hold for the original's own (random) perm_mask too.
    _check_invariants({k: golden[k][i] for k in golden.files if not k.startswith(("raw", "meta"))}, 16, 8)
  assert set(batches[0]) == {"seg_id", "label", "target_mapping", "target", "target_mask", "perm_mask", "input_k",
                             "input_q"}


CONFIG_DIR = "tests/testdata/data_configs"
with open(os.path.join(CONFIG_DIR, "meta.json"), encoding="utf-8") as _f:
  CONFIG_META = json.load(_f)


@pytest.mark.parametrize("name", list(CONFIG_META["input_goldens"]))  # About 0.5-1 s each.
def test_original_pipeline_features_in_other_configurations(name, tmp_path):
  """The records of tests/testdata/data_configs (the original data_utils.py's) give the batches of the original
  `get_input_fn` (written by generate_data_goldens.py), every feature but the random perm_mask: bi_data False,
  num_predict 30 and 32 (SEP and CLS masked: padded targets), seq_len 8, perm_size 2 to 16."""
  meta, golden_meta = CONFIG_META["configs"][name], CONFIG_META["input_goldens"][name]
  flags = meta["flags"]
  spec = PretrainDataSpec(**{k: flags[k] for k in SPEC_FIELDS})
  with np.load(os.path.join(CONFIG_DIR, f"{name}.npz")) as npz:
    records = [npz[k] for k in ("input", "is_masked", "target", "seg_id", "label")]
  with tf.io.TFRecordWriter(str(tmp_path / meta["record_file"])) as writer:
    for record in zip(*records):
      writer.write(_example(*record))
  with open(tmp_path / spec.filename(f"record_info-{flags['split']}-{flags['task']}-{flags['pass_id']}", "json"),
            "w", encoding="utf-8") as f:
    json.dump({"filenames": [f"/elsewhere/tfrecords/{meta['record_file']}"], "num_batch": meta["num_batch"]}, f)
  input_fn, info = get_input_fn(str(tmp_path), flags["split"], spec,
                                ReaderOptions(perm_size=golden_meta["perm_size"], n_token=1000))
  assert info["num_batch"] == meta["num_batch"]
  golden = np.load(os.path.join(CONFIG_DIR, f"{name}_input.npz"))
  batches = _take(input_fn(), golden_meta["batches"])
  for key in EXACT_KEYS:
    assert batches[0][key].dtype.name == golden_meta["dtypes"][key], key
    np.testing.assert_array_equal(np.stack([b[key] for b in batches]), golden[key], err_msg=key)
  for batch in batches[:2]:
    _check_invariants(batch, reuse_len=spec.reuse_len, perm_size=golden_meta["perm_size"])


def test_local_perm_against_hand_worked_masks():
  # inputs:  a   b   c  SEP  d   e  SEP CLS        masked: b, c, e and the CLS (functional: not a target).
  inputs = tf.constant([10, 11, 12, SEP, 13, 14, SEP, CLS], tf.int64)
  targets = tf.constant([11, 12, SEP, 13, 14, SEP, CLS, CLS], tf.int64)
  is_masked = tf.constant([0, 1, 1, 0, 0, 1, 0, 1]) > 0
  # perm_size 4, local order [2, 0, 3, 1] in both blocks: ranks 2 0 3 1 | 6 4 7 5.
  # Unmasked a, d get rank -1; rev_index = [-1, 0, 3, 1, -1, 4, 7, 5]. Targets b, c, e keep their rank for
  # themselves; SEP/CLS (and unmasked tokens) use rank + 1: self_rev = [0, 0, 3, 2, 0, 4, 8, 6].
  # perm_mask[i, j] = self_rev[i] <= rev_index[j] and j is masked or functional.
  expected = np.array([
      [0, 1, 1, 1, 0, 1, 1, 1],   # a (unmasked): sees no masked/functional token
      [0, 1, 1, 1, 0, 1, 1, 1],   # b (rank 0, first): sees only a, d; not itself
      [0, 0, 1, 0, 0, 1, 1, 1],   # c (rank 3): sees b (0) and SEP (1), not itself
      [0, 0, 1, 0, 0, 1, 1, 1],   # SEP (rank 1): sees b and itself
      [0, 1, 1, 1, 0, 1, 1, 1],   # d (unmasked)
      [0, 0, 0, 0, 0, 1, 1, 1],   # e (rank 4): sees the whole first block, not itself, nothing later
      [0, 0, 0, 0, 0, 0, 0, 0],   # SEP (rank 7, last): sees everything, itself included
      [0, 0, 0, 0, 0, 0, 1, 0],   # CLS (rank 5): all but the later SEP
  ], np.float32)
  perm_mask, new_targets, target_mask, input_k, input_q = local_perm(inputs, targets, is_masked, perm_size=4,
                                                                     seq_len=8, perm=[2, 0, 3, 1])
  np.testing.assert_array_equal(perm_mask.numpy(), expected)
  np.testing.assert_array_equal(target_mask.numpy(), [0, 1, 1, 0, 0, 1, 0, 0])
  np.testing.assert_array_equal(input_q.numpy(), target_mask.numpy())
  np.testing.assert_array_equal(new_targets.numpy(), inputs.numpy())  # current-token targets
  np.testing.assert_array_equal(input_k.numpy(), inputs.numpy())


def test_block_order_is_the_originals_row_shuffle():
  # The original: index = range(L).reshape(-1, P).T; shuffle its rows by pi; .T.reshape(-1). Ours with perm = pi
  # must give the same ranks (seen through the mask of an all-masked, non-functional segment: i sees j iff
  # rank j < rank i).
  pi = np.array([3, 0, 2, 1])
  ranks = np.arange(12).reshape(-1, 4).T[pi].T.reshape(-1)
  inputs = tf.range(20, 32, dtype=tf.int64)
  pm, *_ = local_perm(inputs, inputs, tf.ones([12], tf.bool), perm_size=4, seq_len=12, perm=pi)
  np.testing.assert_array_equal(pm.numpy(), (ranks[:, None] <= ranks[None, :]).astype(np.float32))


def test_invariants_on_random_records(tmp_path):
  rng = np.random.default_rng(7)
  records = [_random_record(rng, 24, 12, 6)[0] for _ in range(24)]
  for num_predict in (6, None):
    parsed = [parse_record(tf.constant(r), 24, 12, 4, num_predict, seed=tf.constant([5, i], tf.int64))
              for i, r in enumerate(records)]
    batch = {k: np.stack([p[k].numpy() for p in parsed]) for k in parsed[0]}
    _check_invariants(batch, reuse_len=12, perm_size=4)
    assert ("target_mapping" in batch) == (num_predict is not None)
    assert batch["target"].shape == ((24, 6) if num_predict else (24, 24))


def test_static_shapes_and_bfloat16():
  input_fn, _ = get_input_fn(GOLDEN_DIR, **dict(GOLDEN_KW, options=ReaderOptions(perm_size=8, use_bfloat16=True)))
  spec = input_fn().element_spec
  assert all(s.shape.is_fully_defined() for s in spec.values())
  assert spec["perm_mask"].shape == (4, 32, 32) and spec["target_mapping"].shape == (4, 6, 32)
  assert {k: s.dtype for k, s in spec.items()} == {
      "seg_id": tf.int32, "label": tf.int32, "target": tf.int32, "input_k": tf.int32, "perm_mask": tf.bfloat16,
      "target_mapping": tf.bfloat16, "target_mask": tf.bfloat16, "input_q": tf.bfloat16}


def test_single_device_batch_size_gives_per_core_chunks(tmp_path):
  # The per-core batches of the original input_fn: consecutive 2-row chunks of each 4-row step.
  _write_records(str(tmp_path), 0, 2)
  input_fn, _ = get_input_fn(str(tmp_path), **_small_kw(seed=0))
  whole = _take(input_fn(), 2)
  chunks = _take(input_fn(batch_size=2), 4)
  for key in whole[0]:
    np.testing.assert_array_equal(np.concatenate([c[key] for c in chunks]), np.concatenate([w[key] for w in whole]))
  assert all(v.shape[0] == 2 for v in chunks[0].values())
  uncached = _take(get_input_fn(str(tmp_path), **_small_kw(seed=0, cache=False))[0](), 2)
  for key in whole[0]:
    np.testing.assert_array_equal(uncached[1][key], whole[1][key])
  with pytest.raises(ValueError, match="batch_size must divide bsz_per_host=4"):
    input_fn(batch_size=3)


# ----------------------------------------------------------------------------------------------------------------
# Record discovery and bad settings
# ----------------------------------------------------------------------------------------------------------------
def test_record_info_mismatch_lists_what_is_there():
  kw = dict(GOLDEN_KW, spec=dataclasses.replace(GOLDEN_KW["spec"], uncased=True, num_predict=None))
  kw.pop("options")
  with pytest.raises(ValueError) as e:
    find_record_info(GOLDEN_DIR, **kw)
  msg = str(e.value)
  assert "\n" not in msg
  assert "record_info-train-0-0.bsz-4.seqlen-32.reuse-16.bi.alpha-6.beta-1.fnp-6.json" in msg
  assert "uncased: files have cased (no 'uncased.'), you asked uncased;" in msg
  assert "num_predict: files have fnp-6, you asked None" in msg
  assert "--uncased=False" in msg and "--num_predict=6" in msg
  assert "bsz_per_host" not in msg.split("Pass the values")[0]  # matching fields are not listed as differences

  with pytest.raises(ValueError, match=r"bsz_per_host: files have 4, you asked 8.*--bsz_per_host=4"):
    find_record_info(GOLDEN_DIR, **dict(kw, spec=dataclasses.replace(GOLDEN_KW["spec"], bsz_per_host=8)))
  # run_pretrain.py has no --bsz_per_host: it names its own flag (bsz_per_host = --train_batch_size / --num_hosts).
  with pytest.raises(ValueError, match=r"you asked 8\. Pass the values data_utils.py was run with, e\.g\. "
                                       r"--train_batch_size=4\.$"):
    find_record_info(GOLDEN_DIR, **dict(kw, spec=dataclasses.replace(GOLDEN_KW["spec"], uncased=False, num_predict=6,
                                                                     bsz_per_host=8)),
                     batch_flag=lambda bsz: f"--train_batch_size={bsz}")
  # Records of another split: run_pretrain.py has no --split (it was advised; sweep 32, U20).
  with pytest.raises(ValueError, match=r"split: files have train, you asked valid\. The trainer reads the 'valid' split "
                                       r"only: write its records with data_utils.py --split=valid\.$"):
    find_record_info(GOLDEN_DIR, **dict(kw, split="valid", spec=GOLDEN_KW["spec"]))
  with pytest.raises(FileNotFoundError, match="--record_info_dir 'no/such/dir' is not a directory"):
    find_record_info("no/such/dir", **kw)
  with pytest.raises(ValueError, match=r"pass --record_info_dir=tests/testdata/data/records/tfrecords"):
    find_record_info("tests/testdata/data/records", **kw)


def test_records_in_a_directory_named_like_a_glob_pattern(tmp_path):
  """[ ] in --record_info_dir (a glob would read them as a character class and find nothing)."""
  shutil.copytree(GOLDEN_DIR, tmp_path / "r[1]")
  kw = dict(GOLDEN_KW)
  kw.pop("options")
  info = find_record_info(str(tmp_path / "r[1]"), **kw)
  assert [os.path.dirname(f) for f in info["filenames"]] == [str(tmp_path / "r[1]")] and info["num_batch"] > 0
  with pytest.raises(ValueError, match="Found 1 record_info file"):
    find_record_info(str(tmp_path / "r[1]"), **dict(kw, spec=dataclasses.replace(kw["spec"], bsz_per_host=8)))


def test_record_info_listing_a_missing_file(tmp_path):
  _write_records(str(tmp_path), 0, 2)
  os.remove(tmp_path / _small_kw()["spec"].filename("train-0-0", "tfrecords"))
  kw = _small_kw()
  kw.pop("options")
  with pytest.raises(FileNotFoundError, match="lists '/elsewhere/save_dir/tfrecords/train-0-0.*does not exist"):
    find_record_info(str(tmp_path), **kw)


def test_comma_separated_dirs_and_basename_rewrite(tmp_path):
  _write_records(str(tmp_path / "a"), 0, 3)
  _write_records(str(tmp_path / "b"), 1, 2)
  kw = _small_kw()
  kw.pop("options")
  info = find_record_info(f"{tmp_path / 'a'},{tmp_path / 'b'}", **kw)
  assert info["num_batch"] == 5 and info["file_num_batch"] == [3, 2]
  assert [os.path.dirname(f) for f in info["filenames"]] == [str(tmp_path / "a"), str(tmp_path / "b")]
  # Records read twice per epoch (every document trained on twice), or a task's left out, without a word: refused.
  with pytest.raises(ValueError, match=r"--record_info_dir names one directory twice \('.*/a' and '.*/a/\./'\)"):
    find_record_info(f"{tmp_path / 'a'},{tmp_path / 'b'},{tmp_path / 'a'}/./", **kw)
  (info_path,) = tf.io.gfile.glob(f"{tmp_path}/b/record_info-*.json")
  listed = json.load(open(info_path))
  for names, what in ((listed["filenames"] * 2, "a record file twice"), ([], "no record file")):
    with open(info_path, "w") as f:
      json.dump(dict(listed, filenames=names), f)
    with pytest.raises(ValueError, match=f"record_info file {info_path} lists {what}"):
      find_record_info(f"{tmp_path / 'a'},{tmp_path / 'b'}", **kw)
  with open(info_path, "w") as f:  # one name, not a list of them: it was read as a list of its characters
    json.dump(dict(listed, filenames=listed["filenames"][0]), f)
  with pytest.raises(ValueError, match=f"record_info file {info_path} must be json with 'filenames' and 'num_batch' "
                                       r".* TypeError\(\"'filenames' is a str, not a list\"\)"):
    find_record_info(f"{tmp_path / 'a'},{tmp_path / 'b'}", **kw)
  for num_batch in (-1, 2.5, "3", True):  # -1 was taken as a count (sweep 32, U20), 2.5 as 2
    with open(info_path, "w") as f:
      json.dump(dict(listed, num_batch=num_batch), f)
    with pytest.raises(ValueError, match=f"record_info file {info_path} must be json with 'filenames' and 'num_batch' "
                                         f".* TypeError\\(\"'num_batch' is {re.escape(repr(num_batch))}, not a count"):
      find_record_info(f"{tmp_path / 'a'},{tmp_path / 'b'}", **kw)
  with open(info_path, "w") as f:
    json.dump(listed, f)
  shutil.copy(info_path, info_path.replace("record_info-train-1-0", "record_info-train-2-0"))
  with pytest.raises(ValueError, match=r"Two record_info files in .* list .*/b/train-1-0\."):
    find_record_info(f"{tmp_path / 'a'},{tmp_path / 'b'}", **kw)


def test_a_record_directory_named_with_a_comma_is_not_split_silently(tmp_path):
  """--record_info_dir is comma-separated (as the original's): `pd,v2/tfrecords` split into `pd` (a save_dir of
  another corpus) and `v2/tfrecords`, and the error that followed advised `pd/tfrecords`, the other corpus."""
  _write_records(str(tmp_path / "pd" / "tfrecords"), 0, 2)
  _write_records(str(tmp_path / "pd,v2" / "tfrecords"), 0, 3)
  (tmp_path / "pd" / "corpus_info.json").write_text('{"vocab_size": 7}')
  kw = _small_kw()
  kw.pop("options")
  line = (rf"^--record_info_dir '{tmp_path}/pd,v2/tfrecords' is read as a comma-separated list: it was split at its "
          rf"commas into 2 directories \('{tmp_path}/pd', 'v2/tfrecords'\), but it is one directory\. A directory "
          r"name in this flag may not hold a comma")
  with pytest.raises(ValueError, match=line):
    find_record_info(f"{tmp_path}/pd,v2/tfrecords", **kw)
  with pytest.raises(ValueError, match=line):  # the vocabulary of the other corpus was read before
    read_corpus_info(f"{tmp_path}/pd,v2/tfrecords")


@pytest.mark.parametrize("over, match", [
    (dict(perm_size=6), "--perm_size must divide both reuse_len and seq_len - reuse_len"),
    (dict(reuse_len=32), "--reuse_len must be smaller than --seq_len"),
    (dict(num_predict=40), r"--num_predict must be None or an integer in \[1, seq_len=32\]"),
    (dict(perm_size=0), "--perm_size must be a positive integer"),
])
def test_bad_lengths_are_one_line_errors(over, match):
  kw = dict(seq_len=32, reuse_len=16, perm_size=8, num_predict=6)
  kw.update(over)
  with pytest.raises(ValueError, match=match):
    validate_lengths(**kw)


def test_more_targets_than_num_predict_is_a_clear_error():
  info = find_record_info(GOLDEN_DIR, **{k: v for k, v in GOLDEN_KW.items() if k != "options"})
  ds = get_dataset(info["filenames"], dataclasses.replace(GOLDEN_KW["spec"], num_predict=2), ReaderOptions(8),
                   batch_size=4)
  with pytest.raises(tf.errors.InvalidArgumentError, match="more targets than num_predict=2"):
    _take(ds, 1)


def test_bi_data_rows_must_match_the_writer_cores():
  input_fn, _ = get_input_fn(GOLDEN_DIR, **GOLDEN_KW)  # corpus_info.json: num_core_per_host 1, bsz_per_host 4
  with pytest.raises(ValueError, match=r"num_core_per_host = 4 rows per core \(1 core\(s\) per host\), but each "
                     r"of the run's 2 replica\(s\) \(2 per worker, 1 worker\(s\)\) would get 2. Either run 1 "
                     r"replica\(s\) per worker \(--num_core_per_host=1\); or rewrite the records with "
                     r"data_utils.py --num_core_per_host=2 \(without --use_tpu=False, which lays them out for "
                     r"one core\).$"):
    input_fn(tf.distribute.InputContext(1, 0, 2))
  # --num_hosts=2 (a global batch of 2 hosts' records) in one process: the fix is --num_hosts, not the records.
  two_hosts, _ = get_input_fn(GOLDEN_DIR, **GOLDEN_KW, global_batch_size=8)
  with pytest.raises(ValueError, match=r"would get 8. Either pass --num_hosts=1: the run has 1 worker\(s\), not "
                                       r"the 2 hosts --num_hosts=2 splits the batch over.$"):
    two_hosts(tf.distribute.InputContext(1, 0, 1))
  # Two workers sharing the records (--num_hosts unset) of one core: each replica would get half a core's rows.
  with pytest.raises(ValueError, match=r"or pass --num_hosts=2 with records written with --bsz_per_host=2, at "
                                       r"least one file per worker.$"):
    input_fn(tf.distribute.InputContext(2, 0, 2))
  with pytest.raises(ValueError, match="bi_data needs an even number of rows per replica"):
    input_fn(batch_size=1)


def test_bi_data_rows_are_checked_against_the_writer_files_before_corpus_info(tmp_path):
  """The row layout comes from the writer file beside each record file: corpus_info.json is the last task-0 run's
  of its --save_dir (another seq_len's, say), or was not copied with the records; records laid out for 2 cores then
  trained on 1 replica with half its rows in the other direction, exit 0."""
  shutil.copytree(os.path.dirname(GOLDEN_DIR), tmp_path / "records")  # with its corpus_info.json: 1 core
  (record,) = tf.io.gfile.glob(f"{tmp_path}/records/tfrecords/*.tfrecords")
  with open(record + ".writer.json", "w") as f:
    json.dump({"num_core_per_host": 2, "input_files": ["a.txt"], "pass_id": 0}, f)
  input_fn, _ = get_input_fn(str(tmp_path / "records" / "tfrecords"), **GOLDEN_KW)
  with pytest.raises(ValueError, match=r"num_core_per_host = 2 rows per core \(2 core\(s\) per host\), but each "
                     r"of the run's 1 replica\(s\) \(1 per worker, 1 worker\(s\)\) would get 4. Either run 2 "
                     r"replica\(s\) per worker \(--num_core_per_host=2\)"):
    input_fn()
  assert len(_take(input_fn(batch_size=2), 1)) == 1


@pytest.mark.parametrize("content", ['{"num_core_per_host": 2, "sp_mo', '["a list"]'])
def test_a_writer_file_that_cannot_be_read_is_refused_not_taken_as_none(tmp_path, content):
  """A writer file cut short (a copy that failed) or not an object: taken as none, it turned the SentencePiece,
  --num_core_per_host and --num_task checks off without a word, and a run trained on records of another
  SentencePiece model (sweep 27, U1)."""
  shutil.copytree(os.path.dirname(GOLDEN_DIR), tmp_path / "records")
  (record,) = tf.io.gfile.glob(f"{tmp_path}/records/tfrecords/*.tfrecords")
  with open(record + ".writer.json", "w") as f:
    f.write(content)
  with pytest.raises(ValueError, match=rf"^{record}.writer.json, which says how data_utils.py wrote the records "
                                       r"beside it .* cannot be read \(.*\)\. Write the records again with "
                                       r"data_utils.py, or delete the file to read them unchecked, as the "
                                       r"original's\.$"):
    get_input_fn(str(tmp_path / "records" / "tfrecords"), **GOLDEN_KW)
  os.remove(record + ".writer.json")
  get_input_fn(str(tmp_path / "records" / "tfrecords"), **GOLDEN_KW)  # none: the original's records, unchecked


# ----------------------------------------------------------------------------------------------------------------
# Seeds, resume and sharding
# ----------------------------------------------------------------------------------------------------------------
def test_same_seed_same_batches_and_start_step_equals_skipping(tmp_path):
  _write_records(str(tmp_path), 0, 3)
  _write_records(str(tmp_path), 1, 2)  # two files: 5 steps per epoch
  run = lambda **kw: _take(get_input_fn(str(tmp_path), **_small_kw(seed=11, **kw))[0](), 13 - kw.get("start_step", 0))
  full = run()
  again = run()
  for a, b in zip(full, again):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])
  # Epochs see fresh orders; the other seed another order.
  assert not np.array_equal(full[0]["perm_mask"], full[5]["perm_mask"])
  np.testing.assert_array_equal(full[0]["input_k"], full[5]["input_k"])
  other = _take(get_input_fn(str(tmp_path), **_small_kw(seed=12))[0](), 1)
  assert not np.array_equal(full[0]["perm_mask"], other[0]["perm_mask"])
  for start in (2, 4, 7, 11):  # inside a file, at a file boundary, next epochs
    resumed = run(start_step=start)
    for a, b in zip(full[start:], resumed):
      for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=f"start_step={start} {key}")
  # Without per-file sizes the resume skips record by record: the same batches.
  info = find_record_info(str(tmp_path), **{k: v for k, v in _small_kw().items() if k != "options"})
  kw = dict(spec=_small_kw()["spec"], options=ReaderOptions(perm_size=4, seed=11), batch_size=4)
  skipped = _take(get_dataset(info["filenames"], start_step=7, **kw), 2)
  np.testing.assert_array_equal(skipped[1]["perm_mask"], full[8]["perm_mask"])


def test_no_seed_is_random(tmp_path):
  # Without a global seed, as run_pretrain.py without --seed. An earlier test of this process may have set one
  # (keras.utils.set_random_seed); with it, TensorFlow derives the same op seeds for every new pipeline, so two
  # seedless pipelines repeat each other's orders (TF's documented semantics; this test then failed in CI).
  tf.random.set_seed(None)
  _write_records(str(tmp_path), 0, 2)
  input_fn, _ = get_input_fn(str(tmp_path), **_small_kw())
  # With only a few masked tokens per half, two orders often give the same perm_mask: compare 16 batches (several
  # epochs) so a coincidence is negligible.
  a, b = _take(input_fn(), 16), _take(input_fn(), 16)
  assert any(not np.array_equal(x["perm_mask"], y["perm_mask"]) for x, y in zip(a, b))
  assert all(np.array_equal(x["input_k"], y["input_k"]) for x, y in zip(a, b))


def test_an_unseeded_resume_over_several_files_starts_at_the_top_of_its_order(tmp_path):
  """A resume without a seed draws another file order: skipping to the step's position in it read some records twice
  and others not that epoch (faith 19, C1). It starts at the top of the new order, as the original's restart; one
  file keeps its order, and a resume goes on where the run was."""
  tf.random.set_seed(None)
  for task in range(2):
    _write_records(str(tmp_path / "two"), task, 5)
  _write_records(str(tmp_path / "one"), 0, 5)
  for name, first in (("two", 0), ("one", 3)):
    input_fn, _ = get_input_fn(str(tmp_path / name), **_small_kw(start_step=3))
    assert [int(b["input_k"][0, 1]) - 2000 for b in _take(input_fn(), 1)] == [first], name


def test_shared_files_each_replica_gets_its_rows(tmp_path):
  _write_records(str(tmp_path), 0, 3)
  input_fn, _ = get_input_fn(str(tmp_path), **_small_kw(seed=3))
  single = _take(input_fn(), 4)
  # 2 pipelines (workers) x 1 replica: replica c gets rows [2c, 2c+2) of every step, in step order.
  per_pipe = [_take(input_fn(tf.distribute.InputContext(2, p, 2)), 4) for p in range(2)]
  for step in range(4):
    for c in range(2):
      got = per_pipe[c][step]
      np.testing.assert_array_equal(got["input_k"][:, 0], [1000 + 2 * c, 1001 + 2 * c])
      np.testing.assert_array_equal(got["input_k"][:, 1], [2000 + step % 3] * 2)
      for key in got:  # the same records, the same permutations as one pipeline reading everything
        np.testing.assert_array_equal(got[key], single[step][key][2 * c:2 * c + 2], err_msg=key)
  # 1 pipeline x 2 replicas: consecutive elements (-> consecutive replicas) are consecutive row chunks.
  one_pipe = _take(input_fn(tf.distribute.InputContext(1, 0, 2)), 4)
  np.testing.assert_array_equal([b["input_k"][0, 0] for b in one_pipe], [1000, 1002, 1000, 1002])
  np.testing.assert_array_equal(one_pipe[3]["perm_mask"], single[1]["perm_mask"][2:])
  # 2 pipelines x 2 replicas each: replica 3 = pipeline 1's second element of each step.
  two_two = _take(input_fn(tf.distribute.InputContext(2, 1, 4)), 4)
  np.testing.assert_array_equal([b["input_k"][0, 0] for b in two_two], [1002, 1003, 1002, 1003])


def test_shared_files_without_a_seed_are_read_in_one_mixed_order(tmp_path):
  """Pipelines (workers) sharing the files without a seed cannot draw one random order apart: they read the sorted
  listing, every run and epoch, so the passes of one task (the same text) came one after the other (faith 19, B2;
  the original shuffles the file names once a run). One order from the files' names now, the same in every one."""
  tf.random.set_seed(None)
  for task in range(6):
    _write_records(str(tmp_path), task, 1)
  input_fn, _ = get_input_fn(str(tmp_path), **_small_kw())
  per_pipe = [_take(input_fn(tf.distribute.InputContext(2, p, 2)), 12) for p in range(2)]
  files = [[int(b["input_k"][0, 2]) - 3000 for b in batches] for batches in per_pipe]
  assert files[0] == files[1] and sorted(files[0][:6]) == list(range(6)) and files[0][6:] == files[0][:6]
  assert files[0][:6] != list(range(6))


def test_file_slices_per_pipeline(tmp_path):
  for task in range(3):
    _write_records(str(tmp_path), task, 2)
  input_fn, info = get_input_fn(str(tmp_path), **_small_kw(seed=1, global_batch_size=8))
  assert len(info["filenames"]) == 3
  # Pipeline 0 reads file 0; pipeline 1 (the last) files 1 and 2. Local replica l gets rows [2l, 2l+2).
  p0 = _take(input_fn(tf.distribute.InputContext(2, 0, 4)), 8)
  p1 = _take(input_fn(tf.distribute.InputContext(2, 1, 4)), 8)
  assert {int(b["input_k"][0, 2]) for b in p0} == {3000}
  assert {int(b["input_k"][0, 2]) for b in p1} == {3001, 3002}
  for batches in (p0, p1):
    np.testing.assert_array_equal([b["input_k"][:, 0].tolist() for b in batches], [[1000, 1001], [1002, 1003]] * 4)
  with pytest.raises(ValueError, match="global_batch_size must be bsz_per_host=4 .* or bsz_per_host"):
    get_input_fn(str(tmp_path), **_small_kw(global_batch_size=6))[0](tf.distribute.InputContext(2, 0, 2))
  one_file = tmp_path / "one"
  _write_records(str(one_file), 0, 2)
  with pytest.raises(ValueError, match="there are only 1 files"):
    get_input_fn(str(one_file), **_small_kw(global_batch_size=12))[0](tf.distribute.InputContext(3, 0, 3))


def test_mirrored_strategy_replicas_receive_their_rows(tmp_path):
  """A real `distribute_datasets_from_function` on 2 logical CPUs (in a subprocess: devices are set at start)."""
  _write_records(str(tmp_path), 0, 3)
  script = textwrap.dedent(f"""
      import numpy as np, tensorflow as tf
      cpu = tf.config.list_physical_devices("CPU")[0]
      tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
      from xlnet_tf.data.pretrain_spec import PretrainDataSpec
      from xlnet_tf.tasks.pretrain.input import ReaderOptions, get_input_fn
      strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
      spec = PretrainDataSpec(bsz_per_host=4, seq_len=16, reuse_len=8, bi_data=False, mask_alpha=6, mask_beta=1,
                              num_predict=3)
      input_fn, _ = get_input_fn({str(tmp_path)!r}, split="train", spec=spec,
                                 options=ReaderOptions(perm_size=4, seed=2))
      it = iter(strategy.distribute_datasets_from_function(input_fn))
      for step in range(4):
        per_replica = strategy.experimental_local_results(next(it)["input_k"])
        for c, x in enumerate(per_replica):
          assert x.numpy()[:, 0].tolist() == [1000 + 2 * c, 1001 + 2 * c], (step, c, x.numpy())
          assert x.numpy()[:, 1].tolist() == [2000 + step % 3] * 2, (step, c, x.numpy())
      print("REPLICA_ROWS_OK")
  """)
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=os.getcwd())
  assert "REPLICA_ROWS_OK" in out.stdout, out.stderr[-3000:]


@pytest.mark.parametrize("feature", ["input", "target"])
def test_every_record_is_checked_against_the_vocabulary_as_it_is_read(feature, tmp_path):
  """An id beyond n_token in record 300 (past the first 256 that the tools check before a run) stops the pipeline
  with the marked error when that record is read, which `read_errors` turns into the line naming it; the records
  before it give the batches of an unchecked reader. The targets too: the loss reads them, and a writer other than
  data_utils.py need not make them of the inputs (sweep 30, U2: such a run trained on to its end)."""
  from xlnet_tf.data import read_errors  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  path = str(tmp_path / "train.tfrecords")
  bad = {"input": dict(head=(5000,)), "target": dict(last_target=5000)}[feature]
  with tf.io.TFRecordWriter(path) as writer:
    for i in range(320):  # 80 steps of 4 rows; tokens < 1000 except 5000 in record 300
      writer.write(_random_record(rng, 16, 8, 3, **(bad if i == 300 else {}))[0])
  spec = _small_kw()["spec"]
  read = lambda n_token: get_dataset([path], spec, ReaderOptions(perm_size=4, seed=3, n_token=n_token), batch_size=4)
  for checked, unchecked in zip(_take(read(1000), 75), _take(read(None), 75)):  # records 0-299
    for key in checked:
      np.testing.assert_array_equal(checked[key], unchecked[key], err_msg=key)
  with pytest.raises(tf.errors.InvalidArgumentError, match=rf"Token id outside the vocabulary: feature {feature}, "
                                                           r"n_token=1000\.") as error:
    _take(read(1000), 80)
  assert read_errors.describe_read_error(error.value, [path]).startswith(
      f"{path} holds {'target ' if feature == 'target' else ''}token id 5000 (record 300), outside the model's "
      "vocabulary [0, n_token=1000). Rewrite it")
  assert len(_take(read(5001), 80)) == 80


@pytest.mark.parametrize("kept,start_step,held", [(8, 0, "8"), (9, 0, "9"), (24, 3, "more than 20")],
                         ids=["cut_at_a_step", "cut_inside_a_step", "longer"])
def test_a_record_file_of_another_length_than_its_record_info_is_named(kept, start_step, held, tmp_path):
  """A record file cut short at a record boundary (a copy interrupted there) reads as complete to TensorFlow: the
  steps after it were read with their rows shifted, exit 0. Each file is checked to hold the steps its record_info
  says as it is read (also from a resumed step), and `read_errors` names it."""
  from xlnet_tf.data import read_errors  # pylint: disable=import-outside-toplevel
  record_dir = str(tmp_path / "records")
  _write_records(record_dir, 0, 5)
  _write_records(record_dir, 1, 3)
  (path,) = [p for p in tf.io.gfile.glob(f"{record_dir}/train-0-0.*.tfrecords")]
  rows = [r.numpy() for r in tf.data.TFRecordDataset(path)] + [b"extra"] * 4
  with tf.io.TFRecordWriter(path) as writer:
    for row in rows[:kept]:
      writer.write(row)
  input_fn, _ = get_input_fn(record_dir, start_step=start_step, **_small_kw(seed=1))
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    _take(input_fn(), 8)
  assert read_errors.describe_read_error(error.value, [path]) == (
      f"Record file {path} holds {held} records, but its record_info says 5 batches of 4 (20): it was cut short (a "
      "copy or a write that stopped?) or changed after data_utils.py wrote it, and the rows of every later step would "
      "be shifted. Copy it again, or write it again with data_utils.py")


def test_a_damaged_file_skipped_is_read_in_whole_steps_and_the_others_still_counted(tmp_path, monkeypatch):
  """--skip_bad_records read a damaged file up to its first bad record (6 records: not a whole step of 4, so every
  later step's rows were shifted) and turned the count check off for every file (a file cut short then read as
  complete, exit 0). Now the damaged file gives its whole steps (1) and the others are counted as before."""
  from xlnet_tf.data import records  # pylint: disable=import-outside-toplevel
  record_dir = str(tmp_path / "records")
  _write_records(record_dir, 0, 5)
  _write_records(record_dir, 1, 3)
  first, damaged = (tf.io.gfile.glob(f"{record_dir}/train-{t}-0.*.tfrecords")[0] for t in (0, 1))
  monkeypatch.setattr(records, "_READ_LIMITS", {damaged: 6})
  kw = _small_kw()
  input_fn, _ = get_input_fn(record_dir, spec=kw["spec"], options=ReaderOptions(perm_size=4), split="train")
  steps = _take(input_fn(), 6)  # an epoch: 5 + 1 steps
  heads = [{(int(task) - 3000, int(step) - 2000) for step, task in b["input_k"][:, 1:3]} for b in steps]
  assert all(len(h) == 1 for h in heads), heads  # every step's rows from one step of one file
  assert sorted(h.pop() for h in heads) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0)]
  rows = [r.numpy() for r in tf.data.TFRecordDataset(first)]
  with tf.io.TFRecordWriter(first) as writer:  # F1's cut file beside the damaged one: still named
    for row in rows[:9]:
      writer.write(row)
  with pytest.raises(tf.errors.InvalidArgumentError, match="A record file holds another number of records"):
    _take(get_input_fn(record_dir, spec=kw["spec"], options=ReaderOptions(perm_size=4), split="train")[0](), 12)


def test_records_of_other_lengths_are_named_as_such_not_as_unreadable(tmp_path):
  """Records of another seq_len under a record_info of this one (a hand-merged record_info of two runs) were
  called unreadable ("Rewrite the file"), naming no file: they read, and hold other features than the run parses."""
  from xlnet_tf.data import read_errors  # pylint: disable=import-outside-toplevel
  _write_records(str(tmp_path), 0, 3)  # seq_len 16
  (path,) = tf.io.gfile.glob(f"{tmp_path}/*.tfrecords")
  ds = get_dataset([path], _small_kw(seq_len=32, reuse_len=16)["spec"], ReaderOptions(perm_size=4), batch_size=4)
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    _take(ds, 1)
  line = read_errors.describe_read_error(error.value, [path])
  assert line.startswith(f"The records in {path} do not hold the features this run reads (feature ")
  assert "(e.g. pretraining records of another --seq_len, --reuse_len or --num_predict than this run's" in line


@pytest.mark.parametrize("text,problem", [('{"vocab_size": 10', r"\(Expecting ',' delimiter"),
                                          ("[1000]", r"\(a json list, not an object\)"),
                                          ('{"vocab_size": "1000"}', r"\(its vocab_size '1000' is not a positive "
                                                                     r"integer\)")])  # an XLNetConfig error after
def test_a_damaged_corpus_info_is_refused_not_guessed(text, problem, tmp_path):
  """corpus_info.json gives the model's n_token: one that cannot be read is an error naming it (it was taken as
  absent, and the model got n_token 32000 beside 1000-piece records, exit 0); none at all is None."""
  (tmp_path / "tfrecords").mkdir()
  assert read_corpus_info(str(tmp_path / "tfrecords")) is None
  (tmp_path / "corpus_info.json").write_text(text)
  with pytest.raises(ValueError, match=f"{tmp_path}/corpus_info.json, the corpus_info.json data_utils.py wrote with "
                                       f"these records, cannot be read {problem}.*pass --n_token"):
    read_corpus_info(str(tmp_path / "tfrecords"))
