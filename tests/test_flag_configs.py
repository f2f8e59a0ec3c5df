"""flag_configs: the one-line checks of flag values (a file flag, an output directory, a number) and the start-up
from the options namespace."""

import types

import pytest

import cli
import flag_configs


def test_a_missing_spiece_model_flag_names_the_one_beside_the_checkpoint(tmp_path):
  """--spiece_model_file unset: where --init_checkpoint (a directory, or a checkpoint prefix) has a spiece.model
  beside it, as a released model's directory and an HF model directory do, the line names that file."""
  (tmp_path / "spiece.model").write_bytes(b"pieces")
  for init in (str(tmp_path), str(tmp_path / "xlnet_model.ckpt")):
    with pytest.raises(cli.FlagError) as error:
      flag_configs.require_spiece_model(types.SimpleNamespace(spiece_model_file=None, init_checkpoint=init))
    assert str(error.value) == ("--spiece_model_file is required: the SentencePiece model (spiece.model) of the model, "
                                f"such as {tmp_path / 'spiece.model'} beside --init_checkpoint.")
  for init in (None, str(tmp_path / "elsewhere" / "xlnet_model.ckpt")):
    with pytest.raises(cli.FlagError, match=r"^--spiece_model_file is required: the SentencePiece model "
                                            r"\(spiece.model\) of the model\.$"):
      flag_configs.require_spiece_model(types.SimpleNamespace(spiece_model_file=None, init_checkpoint=init))


@pytest.mark.parametrize("cores", [0, -1])
def test_a_num_core_per_host_below_one_is_refused(cores):
  """run_classifier.py --num_core_per_host=0 (or -1) trained on one device, the flag ignored."""
  import run_classifier  # pylint: disable=import-outside-toplevel
  with pytest.raises(cli.FlagError, match=f"^--num_core_per_host must be a positive integer. Received: {cores}.$"):
    flag_configs.start(cli.defaults(run_classifier.define_flags, num_core_per_host=cores))


def test_a_read_only_model_dir_is_refused_for_training_only(tmp_path, monkeypatch):
  """Evaluation, prediction and export only read --model_dir; a read-only one (an archived model, another user's
  run, a read-only mount) was refused by every fine-tuning tool with "Pass a writable directory" (sweep 19, F4); and
  --output_dir where it holds the cached records (F9.9)."""
  from xlnet_tf import fileio  # pylint: disable=import-outside-toplevel
  (tmp_path / "ro").mkdir()
  monkeypatch.setattr(fileio.os, "access", lambda path, mode: str(path) != str(tmp_path / "ro"))
  options = lambda do_train: types.SimpleNamespace(do_train=do_train, model_dir=str(tmp_path / "ro"),
                                                   output_dir=str(tmp_path / "out"), predict_dir=None)
  flag_configs.require_output_dirs(options(False), "model_dir", "output_dir", "predict_dir")
  with pytest.raises(cli.FlagError, match=f"^Cannot use --model_dir {tmp_path}/ro: it is .*Pass a writable directory"):
    flag_configs.require_output_dirs(options(True), "model_dir", "output_dir", "predict_dir")
  # --output_dir too, which holds the cached records they read (sweep 19, F9.9): refused where the run trains.
  flag_configs.require_output_dirs(types.SimpleNamespace(do_train=False, output_dir=str(tmp_path / "ro")), "output_dir")
  with pytest.raises(cli.FlagError, match=f"^Cannot use --output_dir {tmp_path}/ro: it is"):
    flag_configs.require_output_dirs(types.SimpleNamespace(do_train=True, output_dir=str(tmp_path / "ro")),
                                     "output_dir")


def test_a_file_flag_through_a_symbolic_link_to_nowhere_or_a_loop_says_so(tmp_path):
  """An input file behind a link to nowhere (an unmounted disk) or a link that loops was said not to exist, which
  `ls` contradicts (sweep 19, F9)."""
  (tmp_path / "a").symlink_to(tmp_path / "b")
  (tmp_path / "b").symlink_to(tmp_path / "a")
  (tmp_path / "c").symlink_to("/nowhere/spiece.model")
  lines = []
  for name in ("a", "c", "d"):
    with pytest.raises(cli.FlagError) as error:
      flag_configs.require_file(str(tmp_path / name), "spiece_model_file", "the SentencePiece model")
    lines.append(str(error.value))
  assert lines == [
      f"--spiece_model_file={tmp_path}/a is a symbolic link that loops ({tmp_path}/a -> {tmp_path}/b). Pass the "
      "SentencePiece model.",
      f"--spiece_model_file={tmp_path}/c is a symbolic link to /nowhere/spiece.model, which does not exist. Pass the "
      "SentencePiece model.",
      f"--spiece_model_file={tmp_path}/d does not exist. Pass the SentencePiece model."]


def test_an_init_checkpoint_that_does_not_exist_is_named_where_it_would_give_the_model(tmp_path):
  """--init_checkpoint mistyped, or a link to an unmounted disk, without --model_config_path: the line asked for a
  config the user has not got (the HF directory gives it), never saying the path is missing (sweep 27, U11)."""
  (tmp_path / "hf").symlink_to("/mnt/unmounted/hf")
  (tmp_path / "released.ckpt.index").write_bytes(b"")
  options = lambda init: types.SimpleNamespace(model_config_path=None, init_checkpoint=init, predict_ckpt=None)
  what = ("a HuggingFace model directory (its config.json then gives the model), or a TF1 checkpoint with "
          "--model_config_path.")
  lines = []
  for init in (tmp_path / "no_such_dir", tmp_path / "hf", tmp_path / "released.ckpt"):
    with pytest.raises(cli.FlagError) as error:
      flag_configs.require_model_config(options(str(init)))
    lines.append(str(error.value))
  assert lines == [f"--init_checkpoint={tmp_path}/no_such_dir does not exist. Pass {what}",
                   f"--init_checkpoint={tmp_path}/hf is a symbolic link to /mnt/unmounted/hf, which does not exist. "
                   f"Pass {what}",
                   "--model_config_path is required: the xlnet_config.json of the model (it may be omitted when "
                   "--init_checkpoint, or --predict_ckpt, is a HuggingFace model directory with config.json)."]
