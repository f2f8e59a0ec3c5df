"""Pretraining data: raw text -> SentencePiece ids -> the original XLNet TFRecords (`data_utils.py`). Reading the
text is `text.py`'s, the masks and A/B splits `sampling.py`'s, the options and their check `writer_options.py`'s.

Reproduces the writer side of the original `data_utils.py` (`create_data`, `_create_data`, `batchify`,
`_split_a_and_b`, `_sample_mask`, `create_tfrecords`), quirks included by default:
- spans of `n` tokens instead of `n` words (the end search tests `seg[beg]`, issue #220); the apostrophe is missing
  from the start-piece punctuation; a span that would reach the segment end is dropped;
- `num_predict` is split between the halves as `num_predict - num_predict // 2` and `num_predict // 2` (43/42);
- `<eod>` gets the sentence id of the sentence before it; writing stops at the first row `_split_a_and_b` rejects.
`span_sampling="word"` fixes only the end search (spans of `n` words, the last one cut to the remaining budget).

Randomness: without `seed`, numpy is seeded with `100 * task + pass_id` (the shard order and the masks, as the
original) and the `random.Random` that picks A/B splits is unseeded, as the original's `random`. With `seed`, both
are seeded from `(seed, task, pass_id)`, so the same arguments write the same bytes (records are serialised with
sorted feature keys).

Differences from the original that do not change the records: `vocab_size` in corpus_info.json is the model's real
vocabulary size (the original hard-codes 32000); outputs are written under a temporary name and renamed when
complete; corpus_info.json is written after this task's records; a task too short for one batch writes nothing
(the original writes a file of 0 batches); record files of a task that this --num_task has not (those of another
run, which the trainer would read with these) are refused; bad input raises `DataError` with a one-line message.
"""

import fnmatch
import json
import logging
import os
import random

import numpy as np

from xlnet_tf import fileio
from xlnet_tf import locks
from xlnet_tf.data import tokenization
from xlnet_tf.data.example_encoder import serialize_examples
from xlnet_tf.data.tokenization import CLS_ID, SEP_ID
from xlnet_tf.tasks.pretrain.sampling import MaskSampling, _sample_mask, _split_a_and_b, sentence_starts
from xlnet_tf.tasks.pretrain.text import check_readable, combine_shards, read_shard
from xlnet_tf.tasks.pretrain.writer_options import DataError, validate_options


_LOG = logging.getLogger(__name__)


def make_rngs(task, pass_id, seed=None):
  """(numpy RandomState, random.Random) for one (task, pass).

  seed None: numpy seeded with `100 * task + pass_id` and python's unseeded, as the original. Otherwise both are
  seeded from `(seed, task, pass_id)`.
  """
  if seed is None:
    return np.random.RandomState(100 * task + pass_id), random.Random()
  return np.random.RandomState([seed, task, pass_id]), random.Random(f"xlnet-{seed}-{task}-{pass_id}")


def batchify(data, bsz_per_host, sent_ids=None):
  """Cuts a stream into `bsz_per_host` contiguous rows: row r is `data[r*T:(r+1)*T]`, T = len // bsz; tail dropped.

  Args:
    data: int64 [n] token ids.
    bsz_per_host: number of rows.
    sent_ids: optional bool [n], cut the same way.

  Returns:
    data int64 [bsz_per_host, T], and sent_ids bool [bsz_per_host, T] if given.
  """
  num_step = len(data) // bsz_per_host
  data = data[:bsz_per_host * num_step].reshape(bsz_per_host, num_step)
  if sent_ids is None:
    return data
  return data, sent_ids[:bsz_per_host * num_step].reshape(bsz_per_host, num_step)


def stream_layout(data, sent_ids, bsz_per_host, num_core_per_host, bi_data):
  """The rows of `create_tfrecords`.

  Without `bi_data`: `batchify(data, bsz_per_host)`. With it, the stream is cut into bsz_per_host/2 forward rows;
  core c owns rows [c*bsz_per_core, (c+1)*bsz_per_core): its first half are its forward rows and its second half
  the same rows reversed in time.

  Returns:
    data int64 [bsz_per_host, T], sent_ids bool [bsz_per_host, T].
  """
  if not bi_data:
    return batchify(data, bsz_per_host, sent_ids)
  bsz_per_core = bsz_per_host // num_core_per_host
  fwd, fwd_sid = batchify(data, bsz_per_host // 2, sent_ids)
  num_step = fwd.shape[1]
  shape = [num_core_per_host, 1, bsz_per_core // 2, num_step]
  fwd, fwd_sid = fwd.reshape(shape), fwd_sid.reshape(shape)
  data = np.concatenate([fwd, fwd[..., ::-1]], 1).reshape(bsz_per_host, num_step)
  sent_ids = np.concatenate([fwd_sid, fwd_sid[..., ::-1]], 1).reshape(bsz_per_host, num_step)
  return data, sent_ids



def create_tfrecords(save_dir, data, sent_ids, spec, options, *, start_table, rngs, files):
  """Writes one stream as the original `create_tfrecords`: records `[INP, A, SEP, B, SEP, CLS]`, row by row.

  For i = 0, reuse_len, 2*reuse_len, ... every one of the bsz_per_host rows gives one record whose first reuse_len
  tokens continue the previous record's (the memory), followed by A and B from `_split_a_and_b`. The batch is
  written, in row order, only if every row succeeded; the first failure ends the file.

  Args:
    save_dir: the tfrecords directory.
    data: int64 [n] token ids; sent_ids: bool [n] sentence ids.
    spec: `PretrainDataSpec`, the record settings (and the file name).
    options: `WriterOptions` (validated by `validate_options`): the cores, the span sampling and the file name's
      `{split}-{task}-{pass_id}` (`options.basename`).
    start_table: bool [vocab_size], `tokenization.start_piece_table`.
    rngs: (numpy RandomState for `_sample_mask`, `random.Random` for `_split_a_and_b`), as `make_rngs` gives.
    files: the `fileio.atomic_files` set the record file is written in (with its writer file and record_info).

  Returns:
    (path of the tfrecord file, number of batches written).
  """
  bsz_per_host, seq_len, reuse_len = spec.bsz_per_host, spec.seq_len, spec.reuse_len
  bi_data, num_predict = spec.bi_data, spec.num_predict
  num_core_per_host = options.num_core_per_host
  np_rng, py_rng = rngs
  bsz_per_core = bsz_per_host // num_core_per_host
  tokens = data.size  # the stream's, not those its rows keep: it said 0 tokens, 200000 of 284072 (sweep 33, B2)
  too_few = DataError(f"Task {options.task} has {tokens} tokens, too few for one batch of {bsz_per_host} rows of "
                      f"{seq_len} tokens: no record was written. Add text or lower --bsz_per_host/--seq_len.")
  if tokens // (bsz_per_host // 2 if bi_data else bsz_per_host) < seq_len:  # before laying out 1e8 rows (17 GB)
    raise too_few
  data, sent_ids = stream_layout(data, sent_ids, bsz_per_host, num_core_per_host, bi_data)
  _LOG.info("Raw data shape %s.", data.shape)
  save_path = os.path.join(save_dir, spec.filename(options.basename, "tfrecords"))
  assert reuse_len < seq_len - 3 and reuse_len == seq_len // 2, "validate_options first"

  starts = [sentence_starts(row) for row in sent_ids]
  data_len = data.shape[1]
  sep, cls = np.array([SEP_ID], np.int64), np.array([CLS_ID], np.int64)
  if num_predict is None:
    num_predict_0 = num_predict_1 = None
  else:
    num_predict_1 = num_predict // 2
    num_predict_0 = num_predict - num_predict_1
  sampling = MaskSampling(mask_alpha=spec.mask_alpha, mask_beta=spec.mask_beta, span_sampling=options.span_sampling)
  seg_tail = [0, 1, 2]

  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (only the writer needs it)
  num_batch = 0
  with tf.io.TFRecordWriter(files.path(save_path)) as writer:
    i = 0
    while i + seq_len <= data_len:
      if num_batch % 500 == 0:
        _LOG.info("Processing batch %d", num_batch)
      records = []
      for idx in range(bsz_per_host):
        inp = data[idx, i:i + reuse_len]
        tgt = data[idx, i + 1:i + reuse_len + 1]
        results = _split_a_and_b(data[idx], sent_ids[idx], begin_idx=i + reuse_len,
                                 tot_len=seq_len - reuse_len - 3, extend_target=True, rng=py_rng,
                                 starts=starts[idx])
        if results is None:
          _LOG.info("Break out with seq idx %d", i)
          break
        a_data, b_data, label, _, a_target, b_target = results
        reverse = bi_data and (idx // (bsz_per_core // 2)) % 2 == 1
        mask_0 = _sample_mask(inp, start_table, np_rng, sampling, reverse=reverse, goal_num_predict=num_predict_0)
        second = np.concatenate([a_data, sep, b_data, sep, cls])
        mask_1 = _sample_mask(second, start_table, np_rng, sampling, reverse=reverse, goal_num_predict=num_predict_1)
        cat_data = np.concatenate([inp, second])
        seg_id = np.repeat(seg_tail, [reuse_len + len(a_data) + 1, len(b_data) + 1, 1])
        tgt = np.concatenate([tgt, a_target, b_target, cls, cls])  # The last two CLS only pad.
        is_masked = np.concatenate([mask_0, mask_1])
        assert cat_data.shape[0] == seq_len and tgt.shape[0] == seq_len
        assert num_predict is None or int(is_masked.sum()) == num_predict
        records.append({"input": cat_data, "is_masked": is_masked, "target": tgt, "seg_id": seg_id,
                        "label": [label]})
      else:
        for record in serialize_examples(records):
          writer.write(record)
        num_batch += 1
        i += reuse_len
        continue
      break
  if num_batch == 0:  # Raised inside the caller's atomic_files: the empty file is not left behind.
    raise too_few
  _LOG.info("Done writing %s. Num of batches: %d", save_path, num_batch)
  return save_path, num_batch


def _check_no_other_run(tfrecord_dir, spec, options, writer):
  """Refuses the records of other runs that the trainer, which reads every `record_info-{split}-*` of this split and
  shape, would read with this run's: a record_info whose task this --num_task does not have (k >= num_task), and
  record files whose writer files (`record_files.check_writers`) do not fit this run's `writer` info (another
  SentencePiece model; with bi_data another --num_core_per_host; a text file of this task in another record file of
  this pass). Raises `DataError`."""
  from xlnet_tf.data import record_files  # pylint: disable=g-import-not-at-top  (imports TF)
  ours = os.path.join(tfrecord_dir, spec.filename(options.basename, "tfrecords"))
  named = []
  for path in fileio.glob_in(tfrecord_dir, record_files.record_info_glob(options.split, spec)):
    task = record_files.record_info_task(path)
    if task is not None and task >= options.num_task:
      raise DataError(f"{path} is the record_info of task {task}, which --num_task={options.num_task} does not "
                      f"have: it is another data_utils.py run's, and run_pretrain.py would read its records with "
                      f"these. Delete it (and the .tfrecords it lists) or pass another --save_dir.")
    try:
      with fileio.open_file(path) as f:
        listed = [os.path.join(tfrecord_dir, os.path.basename(n)) for n in json.load(f)["filenames"]]
    except (OSError, ValueError, KeyError, TypeError):  # said by the trainer, which reads it
      continue
    try:
      named += [(name, record_files.writer_info(name)) for name in listed if name != ours]  # ours: written again
    except ValueError as e:
      raise DataError(str(e)) from None
  for name, info in named:  # another --num_task splits the files otherwise: some text in two record files, or none
    if info and info.get("num_task") not in (None, options.num_task):
      raise DataError(f"{name} was written by a data_utils.py run of --num_task={info['num_task']} "
                      f"({name}{record_files.WRITER_SUFFIX}); this run's --num_task={options.num_task} splits the "
                      "text files otherwise, so some text would be in two record files, or in none. Pass "
                      f"--num_task={info['num_task']}, or delete the earlier run's records, or pass another --save_dir.")
  try:
    record_files.check_writers([*named, (ours, writer)], spec.bi_data, ours)
  except ValueError as e:
    raise DataError(str(e)) from None


def _one_name_each(file_paths, input_glob):
  """`file_paths` with each local file once: a second name of one (a symbolic or hard link beside it, or the same file
  through two patterns of the glob) is dropped with a warning; its text went into the records twice."""
  seen, kept, dropped = set(), [], []
  for path in file_paths:
    try:
      info = None if fileio.is_remote(path) else os.stat(path)
    except OSError:
      info = None  # unreadable: `check_readable` says so
    same = path if info is None else (info.st_dev, info.st_ino)  # hard links too
    (dropped if same in seen else kept).append(path)
    seen.add(same)
  if dropped:
    _LOG.warning("--input_glob=%s names %d file(s) twice (a link, or two patterns): %s%s read once.",
                 input_glob, len(dropped), ", ".join(dropped[:3]), " ..." if len(dropped) > 3 else "")
  return kept


_OWN_FILES = ("corpus_info.json", "corpus_info.json.tmp-*", locks.lock_file("data_utils-*"), "tfrecords",
              "tfrecords/*")


def _own_files_left_out(file_paths, input_glob, save_dir, own_lock):
  """`file_paths` without `save_dir` itself and data_utils.py's own files in it (`_OWN_FILES`: corpus_info.json, its
  lock files, tfrecords/), which a glob over a corpus directory that is also --save_dir, or holds it, reached: a rerun
  tokenized the corpus_info.json of the run before into its records, exit 0, and a first run with --save_dir a
  folder of the corpus refused the folder it had made. Those left out are named in one warning, but for this run's
  own lock (`own_lock`, the file name data_utils.py holds in `save_dir`), which a user never had read as text."""
  own_dir = fileio.real_path(save_dir)

  def is_own(path, full):
    name = full[len(own_dir) + 1:] if full.startswith(own_dir + "/") else None
    return (full == own_dir and fileio.isdir(path)
            or name is not None and any(fnmatch.fnmatchcase(name, p) for p in _OWN_FILES))
  own = {path: full for path in file_paths if is_own(path, full := fileio.real_path(path))}
  named = [path for path, full in own.items() if full != os.path.join(own_dir, own_lock)]
  if named:
    _LOG.warning("--input_glob=%s reaches --save_dir's own files, which are never inputs: %s%s left out.",
                 input_glob, ", ".join(named[:3]), " ..." if len(named) > 3 else "")
  return [path for path in file_paths if path not in own]


def _check_save_dir_names(save_dir):
  """DataError where --save_dir holds a directory named corpus_info.json or a file named tfrecords, where this run
  writes: found after the whole corpus was tokenized, with advice to free space or pass a writable --save_dir (sweep
  27, U13)."""
  try:
    fileio.check_file_names(save_dir, ["corpus_info.json"], "--save_dir", "corpus")
  except ValueError as e:
    raise DataError(str(e)) from None
  records = os.path.join(save_dir, "tfrecords")
  if fileio.exists(records) and not fileio.isdir(records):
    raise DataError(f"--save_dir {save_dir} holds a file named like the records' directory {records}: move it away, "
                    "or pass another --save_dir.")


def create_data(spec, options, *, input_glob, sp_path, save_dir):
  """Text files -> the original's pretraining records (the `data_utils.py` driver; arguments are its flags).

  Writes `save_dir/corpus_info.json` (task 0), `save_dir/tfrecords/{split}-{task}-{pass_id}.<fmt>.tfrecords` and
  `save_dir/tfrecords/record_info-{split}-{task}-{pass_id}.<fmt>.json` with `filenames` (the tfrecord path as
  `os.path.join(save_dir, "tfrecords", name)`, like the original) and `num_batch`, and beside the record file its
  writer file (`record_files.WRITER_SUFFIX`, ours alone). Task k reads
  `sorted(glob(input_glob))[k::num_task]`.

  Args:
    spec: `PretrainDataSpec`, the flags that name the records (bsz_per_host, seq_len, reuse_len, bi_data,
      mask_alpha, mask_beta, uncased, num_predict).
    options: `WriterOptions`, the other flags (cores, split, task, pass, seed, span sampling, input format).
    input_glob, sp_path, save_dir: the original `data_utils.py` flags.

  Returns:
    The record_info dict, or None when this task has no file.

  Raises:
    DataError: bad options or input (one-line message naming the flag or file).
  """
  validate_options(spec, options)
  task, num_task, pass_id = options.task, options.num_task, options.pass_id
  if not save_dir:
    raise DataError("--save_dir is empty. Pass the output directory.")
  _check_save_dir_names(save_dir)
  try:
    sp = tokenization.load_sentencepiece(sp_path)
  except (OSError, ValueError) as e:
    raise DataError(str(e)) from None
  if not input_glob:
    raise DataError("--input_glob is empty. Pass a glob of text files, e.g. --input_glob='data/*.txt'.")
  literal = [input_glob] if fileio.exists(input_glob) and not fileio.isdir(input_glob) else []  # "br[1]/c.txt"
  file_paths = _own_files_left_out(fileio.glob(input_glob) or literal, input_glob, save_dir,
                                   own_lock=locks.lock_file(options.lock_name))  # data_utils.py's
  if not file_paths:
    listed = " (one glob: not a comma-separated list, as train_spm.py's --input takes)" if "," in input_glob else ""
    listed += tokenization.bracket_hint(input_glob)
    raise DataError(f"--input_glob={input_glob} matches no file{listed}. Pass a glob of existing text files "
                    f"(one sentence per line, blank line between documents).")
  file_paths = _one_name_each(file_paths, input_glob)
  task_file_paths = file_paths[task::num_task]
  if not task_file_paths:
    _LOG.info("Exit: task %d has no file to process.", task)
    return None
  for path in task_file_paths:
    check_readable(path)

  encoder = tokenization.BatchEncoder(sp, num_threads=options.num_threads)
  vocab = tokenization.vocab_size(sp)
  shards, total_line_cnt = [], 0
  for path in task_file_paths:
    _LOG.info("Processing %s", path)
    input_data, sent_ids, line_cnt = read_shard(path, encoder, uncased=spec.uncased, use_eod=options.use_eod,
                                                from_raw_text=options.from_raw_text, vocab_size=vocab)
    total_line_cnt += line_cnt
    if line_cnt == 0:
      continue
    if input_data.size == 0:  # The original would fail on it (sent_ids[0] of an empty shard).
      _LOG.warning("Skipping %s: no tokens.", path)
      continue
    shards.append((input_data, sent_ids))
  _LOG.info("[Task %d] Total number line: %d", task, total_line_cnt)
  if task_file_paths and not shards:
    raise DataError(f"The input files of task {task} hold no text: {', '.join(task_file_paths[:3])}"
                    f"{' ...' if len(task_file_paths) > 3 else ''}. Add text or fix --input_glob.")

  tfrecord_dir = os.path.join(save_dir, "tfrecords")
  try:
    fileio.makedirs(tfrecord_dir)
  except fileio.PathError:  # a link to nowhere says so itself: it was said twice (sweep 32, U20)
    raise
  except Exception as e:  # pylint: disable=broad-except  (OSError, or tf.errors.OpError for remote paths)
    raise DataError(f"Cannot create {tfrecord_dir}: {getattr(e, 'strerror', None) or e}. Pass a writable "
                    f"--save_dir.") from None
  writer = {"num_core_per_host": options.num_core_per_host, "sp_model_sha256": fileio.sha256(sp_path),
            "num_task": num_task, "pass_id": pass_id,  # each text file by its real path, however the glob spelt it
            "input_files": [fileio.real_path(p) for p in task_file_paths],
            "num_input_files": len(file_paths)}  # of all tasks: a task >= it had no file, so writes no records
  _check_no_other_run(tfrecord_dir, spec, options, writer)

  rngs = make_rngs(task, pass_id, options.seed)
  data, sent_ids, perm = combine_shards(shards, rngs[0])
  _LOG.info("Using perm indices %s for pass %d", perm, pass_id)
  del shards
  from xlnet_tf.data import record_files  # pylint: disable=g-import-not-at-top  (imports TF)
  # The records, their writer file, record_info (which marks the end) and corpus_info.json replace the files of a
  # run before together: a rerun that failed between them left new records listed by the old run's files.
  with fileio.atomic_files() as files:
    save_path, num_batch = create_tfrecords(tfrecord_dir, data, sent_ids, spec, options, files=files,
                                            start_table=tokenization.start_piece_table(sp), rngs=rngs)
    if task == 0:
      corpus_info = {
          # The original writes its hard-coded VOCAB_SIZE=32000 here; we write the model's real size.
          "vocab_size": vocab,
          "bsz_per_host": spec.bsz_per_host,
          "num_core_per_host": options.num_core_per_host,
          "seq_len": spec.seq_len,
          "reuse_len": spec.reuse_len,
          "uncased": spec.uncased,
          "bi_data": spec.bi_data,
          "mask_alpha": spec.mask_alpha,
          "mask_beta": spec.mask_beta,
          "num_predict": spec.num_predict,
          "use_eod": options.use_eod,
          "sp_path": sp_path,
          "input_glob": input_glob,
      }
      files.write(os.path.join(save_dir, "corpus_info.json"), json.dumps(corpus_info))
    files.write(save_path + record_files.WRITER_SUFFIX, json.dumps(writer))
    record_info = {"filenames": [save_path], "num_batch": num_batch}
    record_path = os.path.join(tfrecord_dir, spec.filename(f"record_info-{options.basename}", "json"))
    files.write(record_path, json.dumps(record_info))
    # The run before's record_info goes first: a kill in the renames (records first, record_info last) leaves no
    # record_info, whose task then is not read, rather than new records listed by the old files.
    fileio.remove(record_path)
  return record_info
