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
