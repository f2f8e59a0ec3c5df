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

import cli  # first: start_script() runs before anything imports TensorFlow
import flag_configs
if __name__ == "__main__":
  cli.start_script()
import flags
from absl import flags as absl_flags
from absl import logging

from xlnet_tf import locks
from xlnet_tf.data.pretrain_spec import PretrainDataSpec
from xlnet_tf.tasks.pretrain import data as pretrain_data
from xlnet_tf.tasks.pretrain.writer_options import DataError, WriterOptions


def define_flags(flag_values=absl_flags.FLAGS):
  """The original `data_utils.py` flags (defined only when run as a script, as the original), and the new ones."""
  flags.define_data_utils_flags(flag_values=flag_values)


def writer_config(o):
  """(`PretrainDataSpec`, `WriterOptions`) of this script's flags (both validate them once). Raises `DataError`."""
  try:
    spec = PretrainDataSpec(bsz_per_host=o.bsz_per_host, seq_len=o.seq_len, reuse_len=o.reuse_len,
                            bi_data=o.bi_data, mask_alpha=o.mask_alpha, mask_beta=o.mask_beta, uncased=o.uncased,
                            num_predict=o.num_predict)
  except ValueError as e:
    raise DataError(str(e)) from None
  options = WriterOptions(num_core_per_host=o.num_core_per_host, use_tpu=o.use_tpu, split=o.split, task=o.task,
                          num_task=o.num_task, pass_id=o.pass_id, seed=o.seed, span_sampling=o.span_sampling,
                          use_eod=o.use_eod, from_raw_text=o.from_raw_text)
  return spec, options


def create_data(o, config=None):
  """Runs `pretrain_data.create_data` on `config` (`writer_config(o)` where None). Raises `DataError`."""
  spec, options = config or writer_config(o)
  return pretrain_data.create_data(spec, options, input_glob=o.input_glob, sp_path=o.sp_path, save_dir=o.save_dir)


def body(o):
  flag_configs.require_output_dirs(o, "save_dir")
  if o.bi_data and not o.use_tpu and o.num_core_per_host != 1:
    logging.warning("--use_tpu=False lays the bi_data records out for one core, as the original (its "
                    "--num_core_per_host=%d is not used): train them on one replica per host, or drop "
                    "--use_tpu=False to lay them out for --num_core_per_host replicas.", o.num_core_per_host)
  if o.num_passes is not None and o.num_passes > 1:
    logging.warning("--num_passes=%d is ignored, as by the original: this run writes pass --pass_id=%d only. Write "
                    "each pass with its own --pass_id (0 to %d).", o.num_passes, o.pass_id, o.num_passes - 1)
  spec, options = writer_config(o)
  with locks.directory_lock(o.save_dir, options.lock_name, "--save_dir",  # this task's records and record_info
                            temporaries=[f"tfrecords/{options.basename}.*.tmp-*",
                                         f"tfrecords/record_info-{options.basename}.*.tmp-*"]):
    # corpus_info.json: task 0 of every split and pass writes it, each under its own lock.
    locks.remove_stale_temporaries(o.save_dir, ["corpus_info.json.tmp-*"], only_dead=True)
    record_info = create_data(o, (spec, options))
  if record_info is not None:
    logging.info("Wrote %d batches to %s", record_info["num_batch"], record_info["filenames"][0])


if __name__ == "__main__":
  cli.run_script(define_flags, cli.cli_main("data_utils.py", body))
