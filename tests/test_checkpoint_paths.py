"""Finding checkpoints by their files (`checkpoint_paths`): a directory's latest, the prefix a path names."""

import os

import tensorflow as tf
import pytest

from xlnet_tf import checkpoint_paths as checkpoint


def test_the_latest_checkpoint_of_a_directory_named_like_a_glob_pattern(tmp_path):
  """TensorFlow's latest_checkpoint finds none in m[1] (it checks the files with a glob); ours does."""
  for name in ("m[1]", "m1"):
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), str(tmp_path / name),
                                         max_to_keep=None)
    manager.save(checkpoint_number=3 if name == "m[1]" else 7)
  assert tf.train.latest_checkpoint(str(tmp_path / "m[1]")) is None
  assert checkpoint.latest_checkpoint(str(tmp_path / "m[1]")) == str(tmp_path / "m[1]" / "ckpt-3")
  assert checkpoint.resolve_checkpoint_path(str(tmp_path / "m[1]")) == str(tmp_path / "m[1]" / "ckpt-3")
  assert checkpoint.latest_checkpoint(str(tmp_path / "none")) is None


def test_huggingface_weights_without_config_json_are_named(tmp_path):
  (tmp_path / "model.safetensors").write_bytes(b"{}")
  with pytest.raises(FileNotFoundError, match=rf"^{tmp_path} holds HuggingFace weights \(model.safetensors\) but no "
                                              r"config.json\. Put the model's config.json"):
    checkpoint.resolve_checkpoint_path(str(tmp_path))


def test_a_directory_without_its_state_file_resumes_from_its_highest_step(tmp_path):
  """Without the `checkpoint` state file (a copy that left it out) TensorFlow finds no checkpoint, and a run there
  started again from step 0, writing over them: the training run's checkpoint of the highest step is the latest."""
  for name in ("ckpt-2.index", "ckpt-10.index", "ckpt-30.index.tmp-1-ab", "model.ckpt.index", "ckpt-x.index"):
    (tmp_path / name).write_bytes(b"")
  assert checkpoint.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-10")
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')  # the state file, where there is one
  assert checkpoint.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-2")
  assert checkpoint.latest_checkpoint(str(tmp_path / "none")) is None
  (tmp_path / "other").mkdir()
  (tmp_path / "other" / "model.ckpt.index").write_bytes(b"")
  assert checkpoint.latest_checkpoint(str(tmp_path / "other")) is None  # not a training run's


def test_the_directory_of_a_checkpoint_is_absolute(tmp_path, monkeypatch):
  """Where a checkpoint's run files (run_flags.json) lie: a bare relative prefix gave "" before (the label check
  of --predict_ckpt=ckpt-4 was skipped); a HuggingFace model directory is its own."""
  hf = os.path.abspath("tests/testdata/hf/lm_safetensors")
  (tmp_path / "ckpt-4.index").write_bytes(b"")
  monkeypatch.chdir(tmp_path)
  assert checkpoint.directory_of("ckpt-4") == str(tmp_path)
  assert checkpoint.directory_of(str(tmp_path)) == str(tmp_path)  # its latest (highest) checkpoint's
  assert checkpoint.directory_of(hf) == hf
