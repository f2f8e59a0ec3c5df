"""The pretraining writer's options beyond the names of its records (`WriterOptions`: data_utils.py's other flags)
and the one check of what the writer's algorithms can satisfy (`validate_options`); `DataError`, the writer's
one-line error."""

import dataclasses

from xlnet_tf.config import check_field_types


SPAN_SAMPLING_CHOICES = ("original", "word")


SPLIT_CHOICES = ("train", "dev", "test")


class DataError(ValueError):
  """Bad input or options for the pretraining data writer; the message is one line naming the file or flag."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WriterOptions:
  """data_utils.py's flags that do not name the records (those are the `PretrainDataSpec`), with its defaults.

  Attributes:
    num_core_per_host: int, writer cores: with bi_data each core's rows are [forward | backward]. Forced to 1 when
      `use_tpu` is False, as the original.
    use_tpu: bool, the original's flag; False forces num_core_per_host to 1.
    split: one of SPLIT_CHOICES; task, num_task: this process reads files task, task + num_task, ...;
      pass_id: which pass over the data (its own shuffle and masks).
    seed: None for the original's seeding, else an int making the output reproducible.
    span_sampling: one of SPAN_SAMPLING_CHOICES: "original" (n-token spans) or "word" (n-word spans).
    use_eod: a blank line becomes `<eod>`. from_raw_text: False: lines hold integer ids.
    num_threads: SentencePiece encoding threads (None: all CPUs).
  """
  num_core_per_host: int = 8
  use_tpu: bool = True
  split: str = "train"
  task: int = 0
  num_task: int = 1
  pass_id: int = 0
  seed: int = None
  span_sampling: str = "original"
  use_eod: bool = True
  from_raw_text: bool = True
  num_threads: int = None

  def __post_init__(self):
    check_field_types(self)  # use_eod="False" was true (sweep 35)
    if not self.use_tpu:
      object.__setattr__(self, "num_core_per_host", 1)  # Forced, as the original.

  @property
  def basename(self):
    """`{split}-{task}-{pass_id}`: the start of this process's record and record_info file names."""
    return f"{self.split}-{self.task}-{self.pass_id}"

  @property
  def lock_name(self):
    """The lock data_utils.py holds in --save_dir while it writes this task's records (`locks.directory_lock`)."""
    return f"data_utils-{self.basename}"


def validate_options(spec, options):
  """Raises DataError unless the writer's algorithms can satisfy these options (names are the original flags).

  `spec` is the `PretrainDataSpec` (validated itself); `options` the `WriterOptions`.
  """
  def fail(msg):
    raise DataError(msg)

  bsz_per_host, seq_len, reuse_len = spec.bsz_per_host, spec.seq_len, spec.reuse_len
  num_predict, bi_data = spec.num_predict, spec.bi_data
  num_core_per_host, split, task, num_task = options.num_core_per_host, options.split, options.task, options.num_task
  pass_id, seed, span_sampling = options.pass_id, options.seed, options.span_sampling
  if bsz_per_host < 1 or num_core_per_host < 1:
    fail(f"--bsz_per_host and --num_core_per_host must be >= 1. Received: {bsz_per_host}, {num_core_per_host}.")
  if bsz_per_host % num_core_per_host:
    fail(f"--bsz_per_host must be divisible by --num_core_per_host. Received: {bsz_per_host} and "
         f"{num_core_per_host}. Pass a multiple of {num_core_per_host} (or --use_tpu=False for one core).")
  if bi_data and bsz_per_host % (2 * num_core_per_host):
    fail(f"--bi_data needs --bsz_per_host divisible by 2*num_core_per_host={2 * num_core_per_host} (each core "
         f"holds forward and backward rows). Received: --bsz_per_host={bsz_per_host}. Pass a multiple of "
         f"{2 * num_core_per_host} or --bi_data=False.")
  if seq_len % 2 or seq_len < 8:
    fail(f"--seq_len must be even and >= 8 (two halves of seq_len/2, the second holding A, B, 2 SEP and CLS). "
         f"Received: --seq_len={seq_len}.")
  if reuse_len != seq_len // 2:
    fail(f"--reuse_len must be --seq_len/2 (the original asserts both mask halves have seq_len/2 tokens). "
         f"Received: --reuse_len={reuse_len} with --seq_len={seq_len}. Pass --reuse_len={seq_len // 2}.")
  if num_predict is not None:
    half = seq_len // 2
    if num_predict < 1 or num_predict - num_predict // 2 > half:
      fail(f"--num_predict must be in [1, {seq_len}] for --seq_len={seq_len}: its halves "
           f"(num_predict - num_predict//2 and num_predict//2) must each fit in seq_len/2={half} tokens. "
           f"Received: --num_predict={num_predict}.")
  if split not in SPLIT_CHOICES:
    fail(f"--split must be one of {SPLIT_CHOICES}. Received: {split!r}.")
  if num_task < 1:  # it blamed --task (sweep 23, C11)
    fail(f"--num_task must be at least 1 (the number of data_utils.py workers). Received: {num_task}.")
  if not 0 <= task < num_task:
    fail(f"--task must be in [0, --num_task). Received: --task={task} --num_task={num_task}.")
  if pass_id < 0 or 100 * task + pass_id >= 2**32:
    fail(f"--pass_id must be >= 0 and 100*task+pass_id < 2**32 (numpy's seed). Received: --pass_id={pass_id}.")
  if seed is not None and seed < 0:
    fail(f"--seed must be >= 0 or unset. Received: --seed={seed}.")
  if span_sampling not in SPAN_SAMPLING_CHOICES:
    fail(f"--span_sampling must be one of {SPAN_SAMPLING_CHOICES}. Received: {span_sampling!r}.")
