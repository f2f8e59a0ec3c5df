"""Pretraining data: raw text -> SentencePiece ids -> the original XLNet TFRecords (`data_utils.py`)."""


def format_filename(prefix, bsz_per_host, seq_len, bi_data, suffix, mask_alpha=5, mask_beta=1, reuse_len=None,
                    uncased=False, fixed_num_predict=None):
  """The original's file-name convention for record files and record_info files.

  `{prefix}.bsz-{bsz}.seqlen-{seq_len}.[reuse-{reuse_len}.][uncased.]{bi|uni}.alpha-{a}.beta-{b}.[fnp-{n}.]{suffix}`
  """
  reuse_str = f"reuse-{reuse_len}." if reuse_len is not None else ""
  uncased_str = "uncased." if uncased else ""
  bi_str = "bi" if bi_data else "uni"
  fnp_str = f"fnp-{fixed_num_predict}." if fixed_num_predict is not None else ""
  return (f"{prefix}.bsz-{bsz_per_host}.seqlen-{seq_len}.{reuse_str}{uncased_str}{bi_str}"
          f".alpha-{mask_alpha}.beta-{mask_beta}.{fnp_str}{suffix}")
