import os

from xlnet_tf.pretrain_data import format_filename

GOLDEN_DIR = "tests/testdata/data/records/tfrecords"


def test_format_filename_matches_original_names():
  names = sorted(os.listdir(GOLDEN_DIR))
  kw = dict(bsz_per_host=4, seq_len=32, bi_data=True, mask_alpha=6, mask_beta=1, reuse_len=16, uncased=False,
            fixed_num_predict=6)
  assert names == [format_filename("record_info-train-0-0", suffix="json", **kw),
                   format_filename("train-0-0", suffix="tfrecords", **kw)]
  assert format_filename("train-0-0", 32, 512, True, "tfrecords", 6, 1, 256, True, 85) == (
      "train-0-0.bsz-32.seqlen-512.reuse-256.uncased.bi.alpha-6.beta-1.fnp-85.tfrecords")
