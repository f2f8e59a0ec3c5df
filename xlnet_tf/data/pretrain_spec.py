"""`PretrainDataSpec`: the data_utils.py settings that name pretraining record files (the original's
`format_filename`), shared by the writer (`tasks/pretrain/data.py`), the reader (`tasks/pretrain/input.py`) and
`record_files.find_record_info`.
"""

import dataclasses
import numbers

from xlnet_tf.config import check_field_types
from xlnet_tf.data.records import is_int_at_least


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainDataSpec:
  """The settings that name pretraining record files: data_utils.py's flags, shared by the writer and the reader.

  Validated once here (what any record name can hold); the writer and the reader check what only they need
  (`pretrain.data.validate_options`, `pretrain.input.validate_lengths`).

  Attributes:
    bsz_per_host: int, rows per step in the records.
    seq_len: int, tokens per record. reuse_len: int, the memory prefix (< seq_len; the writer needs seq_len/2).
    bi_data: bool, forward and backward rows. mask_alpha, mask_beta: the span masking parameters.
    uncased: bool, lower-cased text. num_predict: int or None (no "fnp-" in the name, no target_mapping).
  """
  bsz_per_host: int
  seq_len: int
  reuse_len: int
  bi_data: bool
  mask_alpha: int
  mask_beta: int
  uncased: bool = False
  num_predict: int = None

  def __post_init__(self):
    if not is_int_at_least(self.bsz_per_host, 1):
      raise ValueError(f"--bsz_per_host must be a positive integer. Received: {self.bsz_per_host!r}.")
    for name in ("seq_len", "reuse_len"):
      value = getattr(self, name)
      if not is_int_at_least(value, 1):
        raise ValueError(f"--{name} must be a positive integer. Received: {name}={value!r}.")
    if self.reuse_len >= self.seq_len:
      raise ValueError(f"--reuse_len must be smaller than --seq_len (both halves are permuted separately). "
                       f"Received: reuse_len={self.reuse_len}, seq_len={self.seq_len}. Use the values of "
                       "data_utils.py (usually reuse_len = seq_len / 2).")
    num_predict = self.num_predict
    if num_predict is not None and (not isinstance(num_predict, numbers.Integral) or isinstance(num_predict, bool)):
      raise ValueError(f"--num_predict must be None or an integer in [1, seq_len={self.seq_len}]. Received: "
                       f"num_predict={self.num_predict!r}. Use the value data_utils.py was run with.")
    if self.mask_alpha < 1 or self.mask_beta < 1 or self.mask_alpha < self.mask_beta:
      raise ValueError(f"--mask_alpha and --mask_beta must be >= 1 with mask_alpha >= mask_beta (the context of a "
                       f"1-token span, mask_alpha//mask_beta, must be >= 1). Received: --mask_alpha="
                       f"{self.mask_alpha} --mask_beta={self.mask_beta}.")
    check_field_types(self)  # bi_data="False" wrote bidirectional records (sweep 35)

  def filename(self, prefix, suffix):
    """The original's file-name convention (its `format_filename`) for record files and record_info files.

    `{prefix}.bsz-{bsz}.seqlen-{seq_len}.reuse-{reuse_len}.[uncased.]{bi|uni}.alpha-{a}.beta-{b}.[fnp-{n}.]{suffix}`
    """
    uncased_str = "uncased." if self.uncased else ""
    bi_str = "bi" if self.bi_data else "uni"
    fnp_str = f"fnp-{self.num_predict}." if self.num_predict is not None else ""
    return (f"{prefix}.bsz-{self.bsz_per_host}.seqlen-{self.seq_len}.reuse-{self.reuse_len}.{uncased_str}{bi_str}"
            f".alpha-{self.mask_alpha}.beta-{self.mask_beta}.{fnp_str}{suffix}")
