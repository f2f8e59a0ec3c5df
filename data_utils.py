"""Pretraining data: text files -> the original XLNet pretraining TFRecords.

Same flags, outputs and record format as the original `data_utils.py`:

  python data_utils.py --bsz_per_host=32 --num_core_per_host=16 --seq_len=512 --reuse_len=256 \\
      --input_glob='data/*.txt' --save_dir=proc_data --bi_data=True --sp_path=spiece.model \\
      --mask_alpha=6 --mask_beta=1 --num_predict=85 --uncased=False

writes `save_dir/corpus_info.json`, `save_dir/tfrecords/{split}-{task}-{pass_id}.<fmt>.tfrecords` and
`save_dir/tfrecords/record_info-{split}-{task}-{pass_id}.<fmt>.json`. Input: one sentence per line, a blank line
between documents. Run N workers with `--num_task=N --task=i`, and each pass with its own `--pass_id`. The file
names encode bsz_per_host, seq_len, reuse_len, uncased, bi_data, mask_alpha, mask_beta and num_predict: the trainer
must be given the same values. New flags: `--seed` (reproducible output), `--span_sampling=word` (n-word spans).
"""

import sys

from absl import app
from absl import flags as absl_flags
from absl import logging

import flags
from xlnet_tf.tasks.pretrain import data as pretrain_data


def create_data_from_flags(flag_values):
  """Validates the parsed flags and runs `pretrain_data.create_data`. Raises `pretrain_data.DataError`."""
  fv = flag_values
  num_core_per_host = fv.num_core_per_host if fv.use_tpu else 1  # Forced to 1 without TPU, as the original.
  pretrain_data.validate_options(
      bsz_per_host=fv.bsz_per_host, num_core_per_host=num_core_per_host, seq_len=fv.seq_len,
      reuse_len=fv.reuse_len, num_predict=fv.num_predict, mask_alpha=fv.mask_alpha, mask_beta=fv.mask_beta,
      bi_data=fv.bi_data, split=fv.split, task=fv.task, num_task=fv.num_task, pass_id=fv.pass_id, seed=fv.seed,
      span_sampling=fv.span_sampling)
  return pretrain_data.create_data(
      input_glob=fv.input_glob, sp_path=fv.sp_path, save_dir=fv.save_dir, bsz_per_host=fv.bsz_per_host,
      num_core_per_host=fv.num_core_per_host, seq_len=fv.seq_len, reuse_len=fv.reuse_len, uncased=fv.uncased,
      bi_data=fv.bi_data, mask_alpha=fv.mask_alpha, mask_beta=fv.mask_beta, use_eod=fv.use_eod,
      from_raw_text=fv.from_raw_text, num_predict=fv.num_predict, split=fv.split, pass_id=fv.pass_id,
      num_task=fv.num_task, task=fv.task, use_tpu=fv.use_tpu, seed=fv.seed, span_sampling=fv.span_sampling)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  logging.set_verbosity(logging.INFO)
  try:
    record_info = create_data_from_flags(absl_flags.FLAGS)
  except pretrain_data.DataError as e:
    sys.exit(f"data_utils.py: error: {e}")
  if record_info is not None:
    logging.info("Wrote %d batches to %s", record_info["num_batch"], record_info["filenames"][0])


if __name__ == "__main__":
  flags.define_data_utils_flags()  # Only when run as a script, as the original.
  absl_flags.adopt_module_key_flags(flags)  # --helpshort lists them.
  app.run(main)
