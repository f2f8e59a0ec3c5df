"""Finding checkpoints by their files (`checkpoint_paths`): a directory's latest, the prefix a path names."""

import gc
import os

import pytest
import tensorflow as tf

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


def _run_dir(directory, steps):
  """A training run's directory: the checkpoints ckpt-{step} of `steps` and the state file naming the last."""
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), str(directory), max_to_keep=None,
                                       checkpoint_name="ckpt")
  for step in steps:
    manager.save(checkpoint_number=step)


@pytest.mark.parametrize("removed, latest", [(["ckpt-4.index", "ckpt-4.data-00000-of-00001"], "ckpt-3"),
                                             (["ckpt-3.index", "ckpt-4.index"], "ckpt-2"),
                                             (["ckpt-4.index", "ckpt-3.data-00000-of-00001"], "ckpt-2")])
def test_a_state_file_naming_a_checkpoint_whose_files_are_gone_takes_the_latest_complete_one(
    tmp_path, caplog, removed, latest):
  """The state file names ckpt-4, whose files were deleted (as the advice to delete a damaged one said) or not all
  copied: TensorFlow takes the directory for one without checkpoints, and a resume started again from step 0, writing
  over ckpt-1.. ckpt-3. The newest complete one the state file lists is the latest, with a warning naming ckpt-4."""
  _run_dir(tmp_path / "m", [1, 2, 3, 4])
  for name in removed:
    (tmp_path / "m" / name).unlink()
  directory = str(tmp_path / "m")
  assert checkpoint.latest_checkpoint(directory) == f"{directory}/{latest}"
  assert checkpoint.resolve_checkpoint_path(directory) == f"{directory}/{latest}"  # --init_checkpoint, convert
  assert checkpoint.resolve_checkpoint_path(directory + "/latest") == f"{directory}/{latest}"
  assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
      f"{directory}/checkpoint names {directory}/ckpt-4 as the latest checkpoint, but its files are gone (no "
      f"ckpt-4.index): the latest complete checkpoint there, {directory}/{latest}, is taken."]


def test_a_state_file_naming_an_older_checkpoint_is_followed_with_a_warning_naming_the_later_one(tmp_path, caplog):
  """The state file names ckpt-1 beside a complete ckpt-3 (restored from a backup, or a save stopped before its state
  file): ckpt-1 is taken, as the state file says, and a training run wrote its ckpt-3 over the complete one without a
  word (sweep 27). One warning names it; none where the named one is the highest."""
  _run_dir(tmp_path / "m", [1, 3])
  directory = str(tmp_path / "m")
  assert checkpoint.latest_checkpoint(directory) == f"{directory}/ckpt-3"
  assert not [r for r in caplog.records if r.levelname == "WARNING"]
  (tmp_path / "m" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n')
  assert checkpoint.latest_checkpoint(directory) == f"{directory}/ckpt-1"
  assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
      f"{directory}/checkpoint names {directory}/ckpt-1 as the latest checkpoint, but {directory}/ckpt-3, of a later "
      "step, is there too (a state file restored from a backup, or a run stopped between a save's files and its "
      "state file): ckpt-1 is taken, as the state file says, and a training run there writes its later checkpoints "
      "over ckpt-3. To go on from it instead, delete the state file (the highest step is then taken)."]


def test_a_state_file_listing_no_complete_checkpoint_takes_the_highest_on_disk_or_none(tmp_path):
  _run_dir(tmp_path / "m", [3, 4])
  (tmp_path / "m" / "checkpoint").write_text('model_checkpoint_path: "ckpt-9"\nall_model_checkpoint_paths: "ckpt-9"\n')
  assert checkpoint.latest_checkpoint(str(tmp_path / "m")) == str(tmp_path / "m" / "ckpt-4")
  for name in ("ckpt-3.index", "ckpt-4.index"):
    (tmp_path / "m" / name).unlink()
  assert checkpoint.latest_checkpoint(str(tmp_path / "m")) is None


def test_a_missing_name_with_spaces_around_it_is_quoted(tmp_path):
  """`--init_checkpoint="D/ckpt-2 "` read as "Checkpoint D/ckpt-2 not found" where D/ckpt-2 exists (sweep 23, C11)."""
  with pytest.raises(FileNotFoundError, match=f"^Checkpoint '{tmp_path}/ckpt-2 ' not found"):
    checkpoint.resolve_checkpoint_path(f"{tmp_path}/ckpt-2 ")


def test_a_state_file_that_is_a_directory_is_one_line(tmp_path):
  """A resume trained, then failed to save, saying the checkpoint it had just written was both unwritten and the
  latest complete one (sweep 23, C7)."""
  _run_dir(tmp_path / "m", [2])
  (tmp_path / "m" / "checkpoint").unlink()
  (tmp_path / "m" / "checkpoint").mkdir()
  with pytest.raises(ValueError, match=f"^{tmp_path}/m/checkpoint is a directory, where a run keeps its `checkpoint` "
                                       "state file .* Move it away, then rerun.$"):
    checkpoint.latest_checkpoint(str(tmp_path / "m"))


def test_a_moved_directory_s_absolute_state_file_paths_name_the_checkpoint_beside_it(tmp_path):
  """TF1's Saver wrote absolute paths into the state file: a directory copied from another machine names them."""
  _run_dir(tmp_path / "m", [5])
  (tmp_path / "m" / "checkpoint").write_text('model_checkpoint_path: "/home/someone/exp/ckpt-5"\n')
  assert checkpoint.latest_checkpoint(str(tmp_path / "m")) == str(tmp_path / "m" / "ckpt-5")


def test_a_state_file_naming_a_checkpoint_outside_its_directory_takes_the_directory_s_own(tmp_path, caplog):
  """A copied run's state file naming the original's checkpoints by absolute path: the original's files were read
  where they still existed, and a resume trained them against the copy's run files, another pooling, exit 0 (sweep
  23, A2). The copy's own checkpoint of that name, else its latest complete one, with a warning."""
  _run_dir(tmp_path / "old", [5, 7])
  _run_dir(tmp_path / "copy", [5])
  state = f'model_checkpoint_path: "{tmp_path}/old/ckpt-5"\nall_model_checkpoint_paths: "{tmp_path}/old/ckpt-5"\n'
  (tmp_path / "copy" / "checkpoint").write_text(state)
  assert checkpoint.latest_checkpoint(str(tmp_path / "copy")) == str(tmp_path / "copy" / "ckpt-5")
  (tmp_path / "copy" / "checkpoint").write_text(state.replace("ckpt-5", "ckpt-7"))
  assert checkpoint.latest_checkpoint(str(tmp_path / "copy")) == str(tmp_path / "copy" / "ckpt-5")
  assert f"names {tmp_path}/old/ckpt-7 as the latest checkpoint, but it lies outside {tmp_path}/copy (the state " \
         "file of a copied or moved run?)" in caplog.text


def test_a_resume_after_the_latest_checkpoint_was_deleted_continues_from_the_one_before(tmp_path):
  """The advice for a damaged latest checkpoint is to delete its files: the rerun then resumed at step 0 and wrote
  over the checkpoints before it (rc 0, no line). It resumes from the one before, and a stop before its next save
  saves its step (the manager's latest is still the deleted one until then)."""
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  first = make_trainer(tmp_path, False)
  for step in (1, 2, 3):
    first.optimizer.iterations.assign(step)
    first.checkpoints.manager.save(checkpoint_number=step)
  data = (tmp_path / "ckpt-2.data-00000-of-00001").read_bytes()
  for path in tmp_path.glob("ckpt-3.*"):
    path.unlink()
  resumed = make_trainer(tmp_path, False)
  lines = []
  assert resumed.restore_or_init(None, log_fn=lines.append) == 2
  assert lines == [f"Resumed from {tmp_path}/ckpt-2 at step 2."]
  assert resumed.checkpoints.latest() == f"{tmp_path}/ckpt-2"
  assert (tmp_path / "ckpt-2.data-00000-of-00001").read_bytes() == data



def test_a_prefix_is_taken_as_the_prefix_where_a_directory_of_its_name_lies_beside_it(tmp_path):
  """run_squad.py --predict_all_ckpt --predict_dir=<model_dir> made ckpt-2/ beside ckpt-2.index: every tool then read
  the directory (`No checkpoint found in directory .../ckpt-2`), the checkpoint lost to them."""
  _run_dir(tmp_path / "m", [1, 2])
  (tmp_path / "m" / "ckpt-2").mkdir()
  (tmp_path / "m" / "ckpt-2" / "predictions.json").write_text("{}")
  prefix = str(tmp_path / "m" / "ckpt-2")
  assert checkpoint.resolve_checkpoint_path(prefix) == prefix
  assert checkpoint.directory_of(prefix) == str(tmp_path / "m")
  assert checkpoint.latest_checkpoint(str(tmp_path / "m")) == prefix


def test_a_directory_of_several_checkpoints_names_them_and_a_prefix_without_its_index_is_incomplete(tmp_path):
  """`No checkpoint found in directory D (found 2 *.index files)` said none was found and named neither; a prefix
  whose .data file is there without its .index was `not found` (convert_checkpoint.py: `does not exist`)."""
  import cli  # pylint: disable=import-outside-toplevel
  import convert_checkpoint  # pylint: disable=import-outside-toplevel
  # A writer's temporary (a conversion killed before its rename) is no checkpoint: it was read as the directory's
  # one, or named as one to pass (sweep 17, H6).
  for name in ("model.ckpt-100", "xlnet_model.ckpt", "xlnet_model.ckpt.tmp-99999-0123456789ab"):
    for suffix in (".index", ".data-00000-of-00001"):
      (tmp_path / (name + suffix)).write_bytes(b"")
  with pytest.raises(FileNotFoundError, match=f"^Directory {tmp_path} holds 2 checkpoints \\(model.ckpt-100, "
                                              "xlnet_model.ckpt\\), none of them named its latest by a `checkpoint` "
                                              f"state file: pass the prefix of one, e.g. {tmp_path}/"):
    checkpoint.resolve_checkpoint_path(str(tmp_path))
  (tmp_path / "model.ckpt-100.index").unlink()
  assert checkpoint.resolve_checkpoint_path(str(tmp_path)) == f"{tmp_path}/xlnet_model.ckpt"
  (tmp_path / "xlnet_model.ckpt.index").rename(tmp_path / "xlnet_model.ckpt.index.moved")
  with pytest.raises(FileNotFoundError, match=f"^No checkpoint found in directory {tmp_path} \\(no \\*.index file; "
                                              "xlnet_model.ckpt.tmp-99999-0123456789ab.index is what a writer killed "
                                              "while writing left: write it again\\)."):
    checkpoint.resolve_checkpoint_path(str(tmp_path))
  (tmp_path / "xlnet_model.ckpt.index.moved").rename(tmp_path / "xlnet_model.ckpt.index")
  message = (f"^Checkpoint {tmp_path}/model.ckpt-100 is incomplete: its model.ckpt-100.data-\\* file\\(s\\) are "
             "there, its model.ckpt-100.index is not")
  with pytest.raises(FileNotFoundError, match=message):
    checkpoint.resolve_checkpoint_path(str(tmp_path / "model.ckpt-100"))
  with pytest.raises(FileNotFoundError, match=message):
    convert_checkpoint.run(cli.defaults(convert_checkpoint.define_flags, input=str(tmp_path / "model.ckpt-100"),
                                        output_dir=str(tmp_path / "out")))


def test_a_saved_model_is_named_as_one(tmp_path):
  """A SavedModel directory given as a checkpoint (--predict_ckpt, convert --input) was `No checkpoint found`."""
  (tmp_path / "saved_model.pb").write_bytes(b"")
  with pytest.raises(FileNotFoundError, match=f"^{tmp_path} is a SavedModel \\(saved_model.pb: an export, for "
                                              "serving\\), not a checkpoint. Pass the --model_dir it was exported from"):
    checkpoint.resolve_checkpoint_path(str(tmp_path))


def test_an_empty_state_file_is_one_line_and_a_garbage_one_one_warning(tmp_path, caplog):
  """An empty `checkpoint` state file: TensorFlow's `Invalid checkpoint state loaded from D`, naming no file and no
  remedy. One of garbage: two TensorFlow warnings at each of the tools' 7 reads (14 lines), then ours and a
  second of ours saying there was no state file."""
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  gc.collect()  # an earlier test's failed restore, collected here, warns of its unrestored values
  caplog.clear()
  _run_dir(tmp_path, [1, 2])
  (tmp_path / "checkpoint").write_text("")
  message = (f"^{tmp_path}/checkpoint, the `checkpoint` state file, names no checkpoint \\(it is empty or cut "
             "short\\), which TensorFlow refuses. Delete it, then rerun")
  with pytest.raises(ValueError, match=message):
    checkpoint.latest_checkpoint(str(tmp_path))
  with pytest.raises(ValueError, match=message):
    make_trainer(tmp_path, False)  # its CheckpointManager reads the state file too
  (tmp_path / "checkpoint").write_text("garbage !!\n")
  for _ in range(3):
    assert checkpoint.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-2")
  make_trainer(tmp_path, False)
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert warnings == [
      f'{tmp_path}/checkpoint is not a `checkpoint` state file (1:1 : Message type "tensorflow.CheckpointState" has '
      'no field named "garbage".): it is ignored, as TensorFlow ignores it (the latest checkpoint there is the '
      "training run's of the highest step, ckpt-N). Delete it to silence this line."], warnings
