"""Original-format checkpoints: load, export, round trip, and the errors of a config that does not fit."""

import errno
import hashlib
import json
import os
import pathlib
import re
import shutil
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf import RunConfig, XLNetConfig, XLNetModel, export_original_checkpoint, load_original_checkpoint
from xlnet_tf import checkpoint
from xlnet_tf.checkpoint import checkpoint_arrays, original_variable_map
from xlnet_tf.modeling.heads import finetune_heads
from xlnet_tf.training import inference

UNTIED = "tests/testdata/model/ckpt_untied"
RUN = dict(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0)


def config(**change):
  fields = XLNetConfig(json_path=f"{UNTIED}/xlnet_config.json").to_dict()
  fields.update(change)
  return XLNetConfig(**fields)


def golden_model(**kw):
  kw.setdefault("summary_type", "last")
  kw.setdefault("cls_heads", {"toy": 3})
  kw.setdefault("reg_heads", ["toyreg"])
  return XLNetModel(config(), RunConfig(**RUN), heads=finetune_heads(config(), RunConfig(**RUN), **kw))


def test_a_checkpoint_holding_nan_is_refused_naming_the_weight(tmp_path):
  """Weights of a diverged run (or a damaged file) loaded without a word and predicted NaN for every example."""
  model = golden_model()
  load_original_checkpoint(model, UNTIED)
  kernel = next(v for v in model.weights if v.path.endswith("layer_1/ff/layer_2/kernel"))
  kernel.assign(np.full(kernel.shape, np.nan, np.float32))
  out = export_original_checkpoint(model, str(tmp_path / "nan" / "xlnet_model.ckpt"))
  with pytest.raises(ValueError, match=f"^{out}: model/transformer/layer_1/ff/layer_2/kernel holds NaN or infinite "
                                       "values .* from a diverged run"):
    load_original_checkpoint(golden_model(), out)


def test_load_then_export_is_bit_exact(tmp_path, monkeypatch):
  model = golden_model()
  report = load_original_checkpoint(model, UNTIED)  # a directory works too
  assert report["kept_initial"] == [] and report["unused"] == []
  out = export_original_checkpoint(model, str(tmp_path / "out" / "xlnet_model.ckpt"))
  original, exported = checkpoint_arrays(UNTIED), checkpoint_arrays(out)
  assert set(exported) == set(original)
  for name, value in original.items():
    assert exported[name].dtype == value.dtype, name
    np.testing.assert_array_equal(exported[name], value, err_msg=name)
  assert not tf.io.gfile.glob(str(tmp_path / "out" / "*tmp*"))  # nothing half-written left behind

  clone = golden_model()
  load_original_checkpoint(clone, out)
  for a, b in zip(model.trainable_variables, clone.trainable_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  # pathlib.Path works as a str (load_weights raised AttributeError: 'PosixPath' object has no attribute 'endswith'),
  # and a leading ~ is the home directory, as in the tools' flags (the readers said not found; the writer made a
  # directory named ~ in the working directory: sweep 17, P5, P7)
  assert checkpoint.load_weights(golden_model(), pathlib.Path(UNTIED))["unused"] == []
  assert load_original_checkpoint(golden_model(), pathlib.Path(out))["unused"] == []
  assert export_original_checkpoint(model, tmp_path / "path" / "xlnet_model.ckpt") == str(tmp_path / "path" /
                                                                                         "xlnet_model.ckpt")
  fresh = golden_model()
  monkeypatch.setenv("HOME", str(tmp_path))
  monkeypatch.chdir(tmp_path / "out")
  assert export_original_checkpoint(model, "~/home/xlnet_model.ckpt") == str(tmp_path / "home" / "xlnet_model.ckpt")
  assert checkpoint.load_weights(fresh, "~/home")["unused"] == []
  assert XLNetConfig(json_path="~/home/xlnet_config.json") == model.xlnet_config
  assert not os.path.exists(tmp_path / "out" / "~")
  with pytest.raises(IsADirectoryError, match=f"^XLNet config file {tmp_path}/home is a directory. Pass the path"):
    XLNetConfig(json_path="~/home")


def test_new_head_keeps_initial_values_and_is_reported(caplog):
  """A head the checkpoint lacks keeps its initial values; where the checkpoint holds another head (one of another
  name: its outputs from Python were random, without a word), a warning names both."""
  model = golden_model(cls_heads={"new": 5}, reg_heads=[])
  head_kernel = model.heads["classification_new"].logit.kernel
  before = head_kernel.numpy()
  report = load_original_checkpoint(model, f"{UNTIED}/xlnet_model.ckpt")
  assert report["kept_initial"] == ["model/classification_new/logit/bias", "model/classification_new/logit/kernel"]
  assert "model/classification_toy/logit/kernel" in report["unused"]
  assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
      f"{UNTIED}/xlnet_model.ckpt holds the head(s) classification_toy, regression_toyreg, not the model's "
      "classification_new, which keep their initial (random) values: the model's outputs of them are not the "
      "checkpoint's. To use the checkpoint's, build the model's heads under its names (finetune_heads(..., "
      "cls_heads={...}) names 'classification_{task}')."]
  np.testing.assert_array_equal(head_kernel.numpy(), before)
  assert "model/transformer/layer_1/ff/layer_2/kernel" in report["loaded"]


def test_a_head_of_another_number_of_classes_is_named_as_the_head_not_the_config():
  """The checkpoint's classification_toy has 3 classes; a model whose toy head has 2 cannot load it. The line said
  that the config did not fit and asked for the xlnet_config.json, which fits."""
  with pytest.raises(ValueError, match=r"\(its task head has another number of classes than this task's; pass the "
                                       r"labels it was fine-tuned with, or start the head afresh under another name "
                                       r"\(run_classifier.py: --cls_scope\)\): model/classification_toy/logit/"):
    load_original_checkpoint(golden_model(cls_heads={"toy": 2}, reg_heads=[]), f"{UNTIED}/xlnet_model.ckpt")


def test_a_head_bias_that_does_not_fit_its_kernel_is_named_as_damage(tmp_path):
  """A head whose bias has another length than its kernel's classes (a damaged checkpoint) was advised to pass the
  labels it was fine-tuned with (sweep 33, A9)."""
  arrays = {k: v for k, v in checkpoint_arrays(f"{UNTIED}/xlnet_model.ckpt").items() if k != "global_step"}
  arrays["model/classification_toy/logit/bias"] = np.zeros([5], np.float32)
  checkpoint.write_original_checkpoint(arrays, str(tmp_path / "xlnet_model.ckpt"))
  with pytest.raises(ValueError, match=r"\(its model/classification_toy/logit/bias does not fit its kernel: the "
                                       r"checkpoint is damaged; use an undamaged copy\)"):
    load_original_checkpoint(golden_model(cls_heads={"toy": 3}, reg_heads=[]), str(tmp_path / "xlnet_model.ckpt"))


def test_an_export_does_not_replace_a_checkpoint_or_pair_with_another_model_s_config(tmp_path):
  """export_original_checkpoint wrote over a checkpoint at its path, and beside another model's xlnet_config.json
  (another ff_activation loads without a shape mismatch: other numbers). Now both are refused unless overwrite=True,
  and the model's config is written beside its checkpoint."""
  model = golden_model(cls_heads={}, reg_heads=[])
  path = str(tmp_path / "xlnet_model.ckpt")
  export_original_checkpoint(model, path)
  assert XLNetConfig(json_path=str(tmp_path / "xlnet_config.json")) == model.xlnet_config
  before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
  with pytest.raises(ValueError, match=f"^{path} already holds a checkpoint, left as it is"):
    export_original_checkpoint(model, path)
  other = XLNetConfig(**dict(model.xlnet_config.to_dict(), ff_activation="relu"))
  other.to_json(str(tmp_path / "xlnet_config.json"))
  with pytest.raises(ValueError, match=r"xlnet_config.json is another model's config \(ff_activation differ\)"):
    export_original_checkpoint(model, str(tmp_path / "second.ckpt"))
  model.xlnet_config.to_json(str(tmp_path / "xlnet_config.json"))
  assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
  (tmp_path / "run_flags.json").write_text('{"summary_type": "mean"}')  # of the run whose model is replaced
  export_original_checkpoint(model, path, global_step=3, overwrite=True)
  assert checkpoint_arrays(path)["global_step"] == 3 and not (tmp_path / "run_flags.json").exists()
  # A training run's directory: its checkpoints are read with its xlnet_config.json and run_flags.json, which the
  # export replaced (another config then evaluated them, exit 0; sweep 17, H5). Refused, overwrite or not.
  run = tmp_path / "run"
  tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), str(run), None, checkpoint_name="ckpt").save(
      checkpoint_number=120)
  (run / "run_flags.json").write_text("{}")
  for overwrite in (False, True):
    with pytest.raises(ValueError, match=f"^{run} holds a training run \\(run_flags.json and its checkpoints, e.g. "
                                         f"{run}/ckpt-120\\): an export there would replace"):
      export_original_checkpoint(model, str(run / "xlnet_model.ckpt"), overwrite=overwrite)
  assert sorted(p.name for p in run.iterdir()) == ["checkpoint", "ckpt-120.data-00000-of-00001", "ckpt-120.index",
                                                   "run_flags.json"]


def test_an_export_refuses_an_overwrite_that_is_no_bool_and_a_directory_as_its_path(tmp_path):
  """overwrite="no" replaced the checkpoint; `D/` wrote D.index beside D, then read as D/.index; an existing
  directory as the prefix wrote D.index beside it; global_step "5" was TensorFlow's conversion error (sweep 35)."""
  model = golden_model(cls_heads={}, reg_heads=[])
  path = str(tmp_path / "xlnet_model.ckpt")
  export_original_checkpoint(model, path)
  before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
  with pytest.raises(TypeError, match="^overwrite must be True or False. Received: 'no'.$"):
    export_original_checkpoint(model, path, overwrite="no")
  for step in ("5", -3, True):
    with pytest.raises(ValueError, match=f"^global_step must be an integer >= 0. Received: {step!r}.$"):
      export_original_checkpoint(model, str(tmp_path / "other.ckpt"), global_step=step)
  (tmp_path / "d").mkdir()
  for prefix in (f"{tmp_path}/c/", f"{tmp_path}/d"):
    with pytest.raises(ValueError, match=f"^{prefix} is a directory: a checkpoint is a path prefix of files, e.g. "):
      export_original_checkpoint(model, prefix)
  assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
  assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["d"]


def test_optimizer_slots_and_global_step_are_ignored(tmp_path):
  arrays = checkpoint_arrays(UNTIED)
  extra = {f"{n}/Adam": v for n, v in arrays.items() if n.startswith("model/")}
  extra.update({f"{n}/Adam_1": v for n, v in arrays.items() if n.startswith("model/")})
  extra.update(beta1_power=np.float32(0.9), beta2_power=np.float32(0.999))
  names = sorted(arrays) + sorted(extra)
  values = {**arrays, **extra}
  prefix = str(tmp_path / "model.ckpt-1000")
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(values[n]) for n in names])
  report = load_original_checkpoint(golden_model(), prefix)
  assert report["unused"] == [] and report["kept_initial"] == []


@pytest.mark.parametrize("change, message", [
    (dict(d_inner=12), r"the config does not fit the checkpoint; use the xlnet_config.json that came with it\): "
                       r"model/transformer/layer_0/ff/layer_1/kernel: checkpoint \[8, 11\] vs model \[8, 12\]"),
    (dict(untie_r=False), r"came with it, whose attention biases are per layer: untie_r=True \(run_pretrain.py: "
                          r"--untie_r=True\)\): model/transformer/r_w_bias: checkpoint \[2, 2, 6\] vs model \[2, 6\]"),
    (dict(n_layer=3), r"missing from the checkpoint: \['model/transformer/layer_2/"),
    (dict(n_layer=1), r"checkpoint variables the model lacks: \['model/transformer/layer_1/"),
])
def test_config_that_does_not_fit_is_a_clear_error(change, message):
  model = XLNetModel(config(**change), RunConfig(**RUN))
  with pytest.raises(ValueError, match=message):
    load_original_checkpoint(model, UNTIED)


def test_missing_checkpoint_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="xlnet_model.ckpt"):
    load_original_checkpoint(golden_model(), str(tmp_path / "nope" / "xlnet_model.ckpt"))


@pytest.mark.parametrize("damage, reason", [("missing", "xlnet_model.ckpt.data-00000-of-00001; No such file"),
                                           ("cut", "Read less bytes than requested")])
def test_a_damaged_checkpoint_is_one_error_naming_it(tmp_path, damage, reason):
  """A checkpoint whose .data file is missing or cut short (a download or copy that stopped): one
  DamagedCheckpointError naming it, the reason and what to do, not TensorFlow's OpError or IndexError."""
  shutil.copytree(UNTIED, tmp_path / "ckpt")
  prefix = str(tmp_path / "ckpt" / "xlnet_model.ckpt")
  data = tmp_path / "ckpt" / "xlnet_model.ckpt.data-00000-of-00001"
  if damage == "missing":
    data.unlink()
  else:
    data.write_bytes(data.read_bytes()[:os.path.getsize(data) // 2])
  for read in (lambda: checkpoint.load_weights(golden_model(), prefix), lambda: checkpoint.original_arrays(prefix)):
    with pytest.raises(checkpoint.DamagedCheckpointError) as info:
      read()
    assert str(info.value).startswith(f"Checkpoint {prefix} is incomplete or damaged (") and reason in str(info.value)
    assert str(info.value.named("--init_checkpoint")).startswith(f"--init_checkpoint {prefix} is incomplete or ")
    assert str(info.value).endswith("); download or export it again.")
  for name in os.listdir(tmp_path / "ckpt"):  # a training run's own: no download or export makes it (sweep 32, U20)
    os.rename(tmp_path / "ckpt" / name, tmp_path / "ckpt" / name.replace("xlnet_model.ckpt", "ckpt-5"))
  with pytest.raises(checkpoint.DamagedCheckpointError, match=r"\); copy it again, or delete its files "
                                                              rf"\({tmp_path}/ckpt/ckpt-5\.\*\) to use the one before "
                                                              r"it\.$"):
    checkpoint.original_arrays(str(tmp_path / "ckpt" / "ckpt-5"))


def test_bfloat16_model_is_close_to_float32_golden():
  golden = np.load("tests/testdata/model/untied_finetune.npz")
  model = XLNetModel(config(), RunConfig(**dict(RUN, use_bfloat16=True)))
  load_original_checkpoint(model, UNTIED)
  assert model.trainable_variables[0].dtype == "float32"
  output, _ = model(golden["input_ids"], golden["seg_ids"], golden["input_mask"])
  assert output.dtype == tf.bfloat16
  err = np.abs(output.numpy().astype(np.float32) - golden["output"]).max()
  assert err < 0.1, err  # measured: 0.045 on outputs up to 2.7 (bfloat16 has 8 bits of mantissa)


class _TopLevelHead(keras.layers.Layer):
  """A head the original creates outside `model/` (as SQuAD's start_logits): `toplevel/dense/{kernel,bias}`."""

  outside_model_scope = True

  def __init__(self, **kwargs):
    super().__init__(name="toplevel", **kwargs)
    self.dense = keras.layers.Dense(2, name="dense")

  def build(self, input_shape=None):
    self.dense.build((None, config().d_model))


def test_a_head_outside_the_model_scope_keeps_its_top_level_name(tmp_path):
  model = XLNetModel(config(), RunConfig(**RUN), heads=[_TopLevelHead()])
  names = sorted(original_variable_map(model))
  assert [n for n in names if not n.startswith("model/")] == ["toplevel/dense/bias", "toplevel/dense/kernel"]
  # A checkpoint without the head: the head is optional (kept, reported), the backbone loads.
  report = load_original_checkpoint(model, UNTIED)
  assert report["kept_initial"] == ["toplevel/dense/bias", "toplevel/dense/kernel"]
  # Exported under the top-level names, and read back by them with nothing left over on either side.
  model.heads["toplevel"].dense.kernel.assign(np.arange(2 * config().d_model, dtype=np.float32).reshape(-1, 2))
  out = export_original_checkpoint(model, str(tmp_path / "xlnet_model.ckpt"))
  stored = checkpoint_arrays(out)
  assert "toplevel/dense/kernel" in stored and "model/toplevel/dense/kernel" not in stored
  clone = XLNetModel(config(), RunConfig(**RUN), heads=[_TopLevelHead()])
  report = load_original_checkpoint(clone, out)
  assert report["kept_initial"] == [] and report["unused"] == []
  np.testing.assert_array_equal(clone.heads["toplevel"].dense.kernel.numpy(),
                                model.heads["toplevel"].dense.kernel.numpy())


def test_a_resume_says_that_init_checkpoint_is_not_read(tmp_path):
  """A --model_dir holding checkpoints continues them and --init_checkpoint is not read (the original's Estimator
  did the same); the resume line says so, where the flag was dropped without a word."""
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  make_trainer(tmp_path, False).checkpoints.manager.save(checkpoint_number=0)
  lines = []
  assert make_trainer(tmp_path, False).restore_or_init("released/xlnet_model.ckpt", log_fn=lines.append) == 0
  assert lines == [f"Resumed from {tmp_path}/ckpt-0 at step 0. --init_checkpoint released/xlnet_model.ckpt is not "
                   "read: a --model_dir holding checkpoints continues them (as the original's Estimator); pass a new "
                   "--model_dir to start from it."]


def test_a_resumed_run_keeps_the_init_checkpoint_its_weights_came_from(tmp_path):
  """run_flags.json names the --init_checkpoint the weights came from: a resumed run does not read its own, and wrote
  it there all the same (the model then read as one fine-tuned from a checkpoint it never saw)."""
  import run_start  # pylint: disable=import-outside-toplevel
  from test_fp16 import CONFIG, make_trainer  # pylint: disable=import-outside-toplevel
  options = lambda init: types.SimpleNamespace(model_dir=str(tmp_path), init_checkpoint=init)
  first = make_trainer(tmp_path, False)
  assert run_start.restore_or_init(options(None), first, XLNetConfig(**CONFIG), print) == 0
  first.save()
  resumed = make_trainer(tmp_path, False)
  assert run_start.restore_or_init(options("released/xlnet_model.ckpt"), resumed, XLNetConfig(**CONFIG), print) == 0
  resumed.save()
  assert json.load(open(tmp_path / "run_flags.json")) == {"model_dir": str(tmp_path), "init_checkpoint": None,
                                                         "num_replicas": 1}


def test_a_resume_with_other_training_flags_says_so_and_keeps_the_change(tmp_path):
  """The same command with another --learning_rate (--seed, --weight_decay, --use_bfloat16, ...) resumed without a
  word, and run_flags.json then held the new values alone. It may (a lower rate is a use): it says so, and
  run_flags.json keeps the change; flags that leave the steps as they are (--do_eval, --recompute_grad) say nothing."""
  import run_files  # pylint: disable=import-outside-toplevel
  import run_start  # pylint: disable=import-outside-toplevel
  from test_fp16 import CONFIG, make_trainer  # pylint: disable=import-outside-toplevel
  options = lambda **kw: types.SimpleNamespace(**dict(dict(model_dir=str(tmp_path), init_checkpoint=None,
                                                             learning_rate=1e-3, do_eval=False, recompute_grad=False,
                                                             strategy="auto", mems_reset="every_loop", iterations=2,
                                                             train_steps=10), **kw))
  first = make_trainer(tmp_path, False)
  assert run_start.restore_or_init(options(), first, XLNetConfig(**CONFIG), print) == 0
  first.save()
  lines = []
  run_start.restore_or_init(options(do_eval=True, recompute_grad=True, strategy="one_device"),
                            make_trainer(tmp_path, False), XLNetConfig(**CONFIG),
                            lines.append)  # strategy: "auto" there, resolved to the same replicas
  assert not [line for line in lines if line.startswith("Warning")]
  changed = make_trainer(tmp_path, False)
  run_start.restore_or_init(options(learning_rate=1e-4), changed, XLNetConfig(**CONFIG), lines.append)
  assert json.load(open(tmp_path / "run_flags.json"))["learning_rate"] == 1e-3  # until its first checkpoint
  changed.save()
  assert lines[-1] == (
      "Warning: resumed with other flags than the run that wrote the checkpoints (learning_rate 0.001 there, 0.0001 "
      f"here): the steps from 0 on train with this run's values. {tmp_path}/run_flags.json records the change "
      "(changed_on_resume) with this run's first checkpoint.")
  flags = json.load(open(tmp_path / "run_flags.json"))
  assert flags["learning_rate"] == 1e-4
  assert flags["changed_on_resume"] == ["step 0: learning_rate 0.001 there, 0.0001 here"]
  # --iterations says where every_loop zeroes the mems: then it counts.
  run_start.restore_or_init(options(learning_rate=1e-4, iterations=4), make_trainer(tmp_path, False),
                            XLNetConfig(**CONFIG), lines.append)
  assert lines[-1].startswith("Warning: resumed with other flags than the run that wrote the checkpoints (iterations 2 "
                              "there, 4 here)")
  # --train_steps is where the learning rate's decay ends: another one gives every later step another rate.
  run_start.restore_or_init(options(learning_rate=1e-4, train_steps=20), make_trainer(tmp_path, False),
                            XLNetConfig(**CONFIG), lines.append)
  assert lines[-1].startswith("Warning: resumed with other flags than the run that wrote the checkpoints (train_steps "
                              "10 there, 20 here)")
  # A bfloat16 run written before --float32_positions computed its encoding exactly: resumed with the original's
  # encoding (this version's default), it is a change (sweep 18, R5); a float32 run's encoding is the same either way.
  written = json.load(open(tmp_path / "run_flags.json"))
  for use_bfloat16, changes in ((True, ["float32_positions True there, False here"]), (False, [])):
    there = {k: v for k, v in written.items() if k != "float32_positions"}
    here = options(learning_rate=written["learning_rate"], use_bfloat16=use_bfloat16, float32_positions=False)
    assert run_files.flag_changes(here, training_only=True, there=dict(there, use_bfloat16=use_bfloat16)) == changes
  # The new weights' spread: a resume reads its weights (it was said to train with this run's --init_std, sweep 36).
  here = options(learning_rate=written["learning_rate"], init_std=0.5, init="uniform")
  assert run_files.flag_changes(here, training_only=True, there=written) == []


def test_a_resume_on_other_records_says_so(tmp_path):
  """A fine-tuning run resumed on other training records (another --data_dir) said nothing, where pretraining
  warned: every training tool warns, by the names and sizes of the record files kept in run_flags.json."""
  import run_start  # pylint: disable=import-outside-toplevel
  from test_fp16 import CONFIG, dataset_fn, make_trainer  # pylint: disable=import-outside-toplevel
  model_dir, records = tmp_path / "model", tmp_path / "train.tf_record"
  records.write_bytes(b"x" * 10)
  options = types.SimpleNamespace(model_dir=str(model_dir), init_checkpoint=None, train_steps=4)
  first = make_trainer(model_dir, False, train_steps=2)
  assert run_start.restore_or_init(options, first, XLNetConfig(**CONFIG), print, data_files=[str(records)]) == 0
  first.train(dataset_fn, log_fn=lambda _: None)
  assert json.load(open(model_dir / "run_flags.json"))["record_sizes"] == [["train.tf_record", 10]]
  lines = []
  resume = lambda: run_start.restore_or_init(options, make_trainer(model_dir, False), XLNetConfig(**CONFIG),
                                             lines.append, data_files=[str(records)])
  assert resume() == 2 and not [line for line in lines if line.startswith("Warning")]
  records.write_bytes(b"x" * 12)
  assert resume() == 2
  assert lines[-1] == ("Warning: the records changed since the checkpoints in --model_dir were written (1 of 1 files "
                      "other, added, removed or in another order: train.tf_record): the resumed run reads them as they "
                      "are now, from the position its step counts in them, so its batches are not those of an "
                      "uninterrupted run.")
  flags_file = model_dir / "run_flags.json"  # damaged: ignored without a word, or a TypeError in the comparison
  for damaged in ("10", [10], [["train.tf_record"]]):
    flags_file.write_text(json.dumps(dict(json.load(open(flags_file)), record_sizes=damaged)))
    lines.clear()
    assert resume() == 2
    assert lines[1:] == [f"Warning: record_sizes in {flags_file} is damaged (not the [name, size] pairs of the record "
                         "files it read): whether the records changed since its checkpoints cannot be told."]


def test_a_finished_run_rerun_with_other_flags_warns_of_no_step(tmp_path):
  """A finished fine-tuning command run again with another --learning_rate warned that the steps from 2 on train
  with it, then trained none (and recorded no change, rightly)."""
  import run_start  # pylint: disable=import-outside-toplevel
  from test_fp16 import CONFIG, dataset_fn, make_trainer  # pylint: disable=import-outside-toplevel
  options = lambda rate: types.SimpleNamespace(model_dir=str(tmp_path), init_checkpoint=None, learning_rate=rate,
                                               train_steps=2)
  first = make_trainer(tmp_path, False, train_steps=2)
  assert run_start.restore_or_init(options(1e-3), first, XLNetConfig(**CONFIG), print) == 0
  first.train(dataset_fn, log_fn=lambda _: None)
  lines = []
  assert run_start.restore_or_init(options(5e-4), make_trainer(tmp_path, False, train_steps=2), XLNetConfig(**CONFIG),
                                   lines.append) == 2
  assert not [line for line in lines if line.startswith("Warning")]


def test_an_init_checkpoint_whose_step_is_past_train_steps_is_refused(tmp_path):
  """Continuing a pretrained checkpoint with --train_steps read as 'this many more': its optimizer's step (8) was
  already past --train_steps (4), and the run trained nothing, exit 0."""
  import cli  # pylint: disable=import-outside-toplevel
  import run_start  # pylint: disable=import-outside-toplevel
  from test_fp16 import CONFIG, dataset_fn, make_trainer  # pylint: disable=import-outside-toplevel
  first = make_trainer(tmp_path / "a", False, train_steps=2)
  first.restore_or_init()
  first.train(dataset_fn, log_fn=lambda _: None)
  options = lambda steps: types.SimpleNamespace(model_dir=str(tmp_path / "b"), init_checkpoint=str(tmp_path / "a"),
                                                train_steps=steps)
  with pytest.raises(cli.FlagError, match=r"brings its optimizer's step 2 \(--init_optimizer_state\), already at "
                                          r"--train_steps=2 or past it: nothing would be trained"):
    run_start.restore_or_init(options(2), make_trainer(tmp_path / "b", False), XLNetConfig(**CONFIG), print,
                              init_optimizer_state=True)
  assert not (tmp_path / "b" / "run_flags.json").exists()
  assert run_start.restore_or_init(options(4), make_trainer(tmp_path / "b", False), XLNetConfig(**CONFIG), print,
                                   init_optimizer_state=True) == 2


def test_checkpoints_fine_tuned_with_another_sentencepiece_model_are_refused(tmp_path):
  """run_flags.json keeps the sha256 of the SentencePiece model the run read: evaluating, predicting or resuming with
  another model (of the same name, or at the same path replaced) turned the same text into other ids, exit 0. The
  same model at another path is accepted."""
  import cli  # pylint: disable=import-outside-toplevel
  import run_files  # pylint: disable=import-outside-toplevel
  import run_start  # pylint: disable=import-outside-toplevel
  from test_fp16 import CONFIG, make_trainer  # pylint: disable=import-outside-toplevel
  spm, other = "tests/testdata/data/spm/spiece.model", "tests/testdata/squad/spm/spiece.model"
  options = lambda model: types.SimpleNamespace(model_dir=str(tmp_path), init_checkpoint=None, spiece_model_file=model)
  trainer = make_trainer(tmp_path, False)
  assert run_start.restore_or_init(options(spm), trainer, XLNetConfig(**CONFIG), print) == 0
  trainer.save()
  assert json.load(open(tmp_path / "run_flags.json"))["spiece_model_sha256"] == hashlib.sha256(
      open(spm, "rb").read()).hexdigest()
  shutil.copy(spm, tmp_path / "copied.model")
  run_files.check_trained_model(options(str(tmp_path / "copied.model")), str(tmp_path), XLNetConfig(**CONFIG))
  with pytest.raises(cli.FlagError) as error:
    run_files.check_trained_model(options(other), str(tmp_path), XLNetConfig(**CONFIG), "--predict_ckpt")
  assert str(error.value) == (
      f"The checkpoints in --predict_ckpt {tmp_path} were fine-tuned with other flags (--spiece_model_file={spm} "
      f"there, {other} here: another SentencePiece model (its sha256 differs); {tmp_path}/run_flags.json): the same "
      "weights would pool, read or place tokens otherwise, and score other numbers. Pass the values there, or another "
      "--predict_ckpt.")


def test_a_checkpoint_deleted_after_the_listing_is_skipped_and_the_rest_evaluated(tmp_path):
  """--eval_all_ckpt beside a training run with --max_save: a listed checkpoint deleted before its turn is skipped
  with a line (the whole evaluation ended there, advising another checkpoint prefix); so is one that is there but
  damaged (the evaluation stopped at it: sweep 27, U6), an error where none other could be read; none left is one
  line."""
  tiny = dict(n_layer=1, d_model=8, n_head=2, d_head=4, d_inner=8, ff_activation="gelu", untie_r=True, n_token=20)
  model = XLNetModel(XLNetConfig(**tiny), RunConfig(is_training=False, use_tpu=False, use_bfloat16=False,
                                                    dropout=0.0, dropatt=0.0))
  model(tf.zeros([4, 1], tf.int32), tf.zeros([4, 1], tf.int32), tf.zeros([4, 1]))
  listed = [(step, export_original_checkpoint(model, str(tmp_path / f"ckpt-{step}"))) for step in (1, 2, 3)]
  for path in tf.io.gfile.glob(str(tmp_path / "ckpt-2.*")):
    os.remove(path)
  lines = []
  work = lambda step, path: tf.train.load_checkpoint(path).get_variable_to_shape_map() and step
  assert inference.each_remaining(listed, work, lines.append) == [1, 3]
  assert lines == [f"Skipped {tmp_path}/ckpt-2: it was deleted after its directory was listed (a training run there "
                   "keeps its last --max_save checkpoints)."]
  data = str(tmp_path / "ckpt-1.data-00000-of-00001")
  with open(data, "r+b") as f:
    f.truncate(os.path.getsize(data) // 2)
  lines.clear()
  read = lambda step, path: checkpoint.original_arrays(path) and step
  assert inference.each_remaining(listed[::2], read, lines.append) == [3]
  assert lines == [f"Skipped {tmp_path}/ckpt-1: it is incomplete or damaged (Read less bytes than requested). Copy it "
                   f"again, or delete its files ({tmp_path}/ckpt-1.*)."]
  with pytest.raises(checkpoint.DamagedCheckpointError):
    inference.each_remaining(listed[:1], read, lines.append)
  with pytest.raises(FileNotFoundError, match=f"Every checkpoint listed was deleted before it was read \\({tmp_path}"):
    inference.each_remaining(listed[1:2], work, lines.append)
  # One that reads whole but that the model cannot use (NaN weights, another head) ended the evaluation of the
  # others (sweep 34, S3): `Inference.load` says so as an UnusableCheckpointError, which is skipped.
  arrays = {k: v for k, v in checkpoint_arrays(listed[2][1]).items() if k != "global_step"}
  name = next(n for n in arrays if n.endswith("ff/layer_2/bias"))
  arrays[name] = np.full_like(arrays[name], np.nan)
  checkpoint.write_original_checkpoint(arrays, str(tmp_path / "nan" / "ckpt-4"))
  with pytest.raises(inference.UnusableCheckpointError, match=f"{name} holds NaN or infinite values"):
    inference.Inference(model, lambda features: {}).load(str(tmp_path / "nan" / "ckpt-4"))
  lines.clear()
  load = lambda step, path: inference.Inference(model, lambda features: {}).load(path) and step
  assert inference.each_remaining([listed[2], (4, str(tmp_path / "nan" / "ckpt-4"))], load, lines.append) == [3]
  assert len(lines) == 1 and lines[0].startswith(f"Skipped {tmp_path}/nan/ckpt-4: {name} holds NaN")
  # A SavedModel listed by hand: "it was deleted after its directory was listed", then "Every checkpoint listed was
  # deleted" (sweep 36); its own error.
  (tmp_path / "export").mkdir()
  (tmp_path / "export" / "saved_model.pb").write_bytes(b"")
  with pytest.raises(FileNotFoundError, match=f"^{tmp_path}/export is a SavedModel"):
    inference.each_remaining([(None, str(tmp_path / "export"))],
                             lambda step, path: checkpoint.resolve_checkpoint_path(path), lines.append)


def test_a_cut_latest_checkpoint_is_one_line_and_deleting_it_resumes_from_the_one_before(tmp_path):
  """A cut .data file of the latest checkpoint ended a resume in the reader's traceback (IndexError: Read less bytes
  than requested); its line's advice, to delete its files, then led to a run from step 0 (A1)."""
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  from xlnet_tf import run_checkpoint  # pylint: disable=import-outside-toplevel
  first = make_trainer(tmp_path, False)
  for step in (1, 2):
    first.optimizer.iterations.assign(step)
    first.checkpoints.manager.save(checkpoint_number=step)
  data = tmp_path / "ckpt-2.data-00000-of-00001"
  data.write_bytes(data.read_bytes()[:1000])
  with pytest.raises(run_checkpoint.CannotResume) as error:
    make_trainer(tmp_path, False).restore_or_init(None)
  assert str(error.value) == (f"Cannot resume from {tmp_path}/ckpt-2: its files are incomplete or damaged (Read less "
                              f"bytes than requested); delete its files ({tmp_path}/ckpt-2.*) to resume from the "
                              "checkpoint before it, or pass another --model_dir.")
  import run_start  # pylint: disable=import-outside-toplevel
  from test_fp16 import CONFIG  # pylint: disable=import-outside-toplevel
  options = lambda **kw: types.SimpleNamespace(model_dir=str(tmp_path), init_checkpoint=None, **kw)
  (tmp_path / "run_flags.json").write_text(json.dumps({"do_eval": True, "learning_rate": 1e-3}))
  XLNetConfig(**CONFIG).to_json(str(tmp_path / "xlnet_config.json"))  # a run's files: both (sweep 34, R3)
  for changed in ({"do_eval": False, "learning_rate": 1e-3}, {"do_eval": True, "learning_rate": 1e-4}):
    with pytest.raises(run_checkpoint.CannotResume) as error:  # blamed on the flags changed (sweep 32, U10)
      run_start.restore_or_init(options(**changed), make_trainer(tmp_path, False), XLNetConfig(**CONFIG), print)
    assert str(error.value).startswith(f"Cannot resume from {tmp_path}/ckpt-2: its files are incomplete or damaged")
  for path in tmp_path.glob("ckpt-2.*"):
    path.unlink()
  assert make_trainer(tmp_path, False).restore_or_init(None) == 1
  other = tmp_path / "other"  # another's checkpoint that cannot be resumed: deleting it is never advised (sweep 16, N2)
  other.mkdir()
  for path in tmp_path.glob("ckpt-1.*"):
    (other / path.name.replace("ckpt-1", "model.ckpt-1")).write_bytes(path.read_bytes()[:1000])
  (other / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-1"\n')
  with pytest.raises(run_checkpoint.CannotResume) as error:
    make_trainer(other, False).restore_or_init(None)
  assert str(error.value).startswith(f"Cannot resume from {other}/model.ckpt-1: its files are incomplete or damaged (")
  assert str(error.value).endswith("); copy its files again, or pass another --model_dir.")


def test_a_checkpoint_of_mixed_files_is_one_line_without_tensorflow_s_node_names(tmp_path):
  """A copy whose .data file is another checkpoint's: the resume's line carried `{{function_node __wrapped__...}}`
  and was cut short inside the checksum's numbers, after advice about flags (sweep 23, C11; sweep 24)."""
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  from xlnet_tf import run_checkpoint  # pylint: disable=import-outside-toplevel
  first = make_trainer(tmp_path, False)
  for step in (1, 2):
    first.optimizer.iterations.assign(step)
    first.checkpoints.manager.save(checkpoint_number=step)
  shutil.copy(tmp_path / "ckpt-1.data-00000-of-00001", tmp_path / "ckpt-2.data-00000-of-00001")
  with pytest.raises(run_checkpoint.CannotResume) as error:
    make_trainer(tmp_path, False).restore_or_init(None)
  assert "{{" not in str(error.value) and "/job:" not in str(error.value), str(error.value)
  assert re.fullmatch(rf"Cannot resume from {tmp_path}/ckpt-2: its files are incomplete or damaged \(TensorBundle at "
                      rf"{tmp_path}/ckpt-2 shard 0 \(\d+ bytes\): Checksum does not match: stored \d+ vs\. calculated "
                      rf"on the restored bytes \d+\); delete its files \({tmp_path}/ckpt-2\.\*\) to resume from the "
                      r"checkpoint before it, or pass another --model_dir\.", str(error.value)), str(error.value)


def test_a_state_file_naming_files_that_are_gone_with_none_complete_is_no_run_from_step_0(tmp_path):
  """Every checkpoint cut short (a copy interrupted): the resume started again from step 0 with a warning and wrote
  over the state file, the one record of which checkpoint to copy again."""
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  first = make_trainer(tmp_path, False)
  first.optimizer.iterations.assign(3)
  first.checkpoints.manager.save(checkpoint_number=3)
  (tmp_path / "ckpt-3.index").unlink()
  with pytest.raises(FileNotFoundError) as error:
    make_trainer(tmp_path, False).restore_or_init(None)
  assert str(error.value) == (
      f"Cannot resume: {tmp_path}/checkpoint names {tmp_path}/ckpt-3 as the latest checkpoint, but its files are gone "
      "and there is no complete checkpoint in --model_dir (a copy cut short?). Copy the checkpoint's files again; to "
      "train from step 0 there, delete that state file; or pass another --model_dir.")
  (tmp_path / "checkpoint").unlink()
  assert make_trainer(tmp_path, False).restore_or_init(None) == 0


def test_the_checkpoint_chosen_to_predict_with_is_the_prefix_a_directory_names(tmp_path):
  """--predict_ckpt=<dir>/latest (or <dir>) predicted with <dir>'s latest checkpoint, and the line named
  `.../latest`."""
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), str(tmp_path), max_to_keep=None,
                                       checkpoint_name="ckpt")
  manager.save(checkpoint_number=2)
  for given in (f"{tmp_path}/latest", str(tmp_path), f"{tmp_path}/ckpt-2"):
    assert checkpoint.choose_checkpoint(None, given) == f"{tmp_path}/ckpt-2"
  hf = "tests/testdata/hf/lm_safetensors"
  assert checkpoint.choose_checkpoint(None, hf) == hf


def test_an_hf_model_directory_as_model_dir_to_read_is_said_to_be_one(tmp_path):
  """An HF directory as --model_dir for an evaluation or a prediction: "No checkpoint in --model_dir ... Train first"
  (--do_train said "pass it as --init_checkpoint"; sweep 25, C5). A directory without checkpoints keeps its line."""
  hf = "tests/testdata/hf/cls_bin"
  with pytest.raises(FileNotFoundError) as error:
    checkpoint.choose_checkpoint(hf)
  assert str(error.value) == (
      f"--model_dir {hf} is a HuggingFace model directory (config.json and weights), not a fine-tuning run's "
      "checkpoints: pass it as --predict_ckpt to predict or export with it; to evaluate it, convert it first "
      "(convert_checkpoint.py --to=tf1) and pass that directory as --model_dir.")
  with pytest.raises(FileNotFoundError, match=f"^No checkpoint in --model_dir {tmp_path}. Train first"):
    checkpoint.choose_checkpoint(str(tmp_path))
  assert checkpoint.no_checkpoint_line(hf, "x").startswith(f"--model_dir {hf} is a HuggingFace model directory")


def test_a_checkpoint_that_cannot_be_written_says_why_and_leaves_no_temporary_directory(tmp_path):
  """A full disk: the line held TensorFlow's `{{function_node __wrapped__SaveV2...}}` and its temporary file's name,
  cut at 200 characters before the reason (`No space left on device`), and `ckpt-N_temp/` stayed. Here a file-size
  limit makes the write fail as a full disk does (`File too large`, in the same place of TensorFlow's message)."""
  import resource  # pylint: disable=import-outside-toplevel
  import signal  # pylint: disable=import-outside-toplevel
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  trainer = make_trainer(tmp_path, False)
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))
  try:
    with pytest.raises(OSError) as error:
      trainer.checkpoints.save(1)
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, handler)
  assert str(error.value) == (f"Could not write checkpoint {tmp_path}/ckpt-1 (File too large). The latest complete "
                              f"checkpoint is still none (no checkpoint in {tmp_path}): free space (or fix the "
                              "directory), then rerun the same command to start again from step 0.")
  assert not os.path.exists(tmp_path / "ckpt-1_temp")


def test_a_save_whose_state_file_failed_names_the_checkpoint_a_rerun_resumes_from(tmp_path, monkeypatch):
  """A save cut after the checkpoint's files and before TensorFlow's `checkpoint` state file: the line said the
  latest complete checkpoint was "still none", while the rerun resumes from the one just written (sweep 19, F9);
  then `Could not write checkpoint D/ckpt-2`, naming neither the state file nor what failed (sweep 34)."""
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  trainer = make_trainer(tmp_path, False)
  save = trainer.checkpoints.manager.save

  def state_file_fails(checkpoint_number):
    save(checkpoint_number=checkpoint_number)
    os.remove(tmp_path / "checkpoint")  # TensorFlow's write of it (a temporary file, renamed) failed:
    raise tf.errors.PermissionDeniedError(None, None, f"{tmp_path}/checkpoint.tmp5f1e; Permission denied")
  monkeypatch.setattr(trainer.checkpoints.manager, "save", state_file_fails)
  with pytest.raises(OSError) as error:
    trainer.checkpoints.save(2)
  assert str(error.value) == (f"Wrote checkpoint {tmp_path}/ckpt-2, but not the state file {tmp_path}/checkpoint that "
                              "names it (Permission denied). Fix the directory (free space, permissions), then "
                              "rerun the same command to resume from it.")


def test_a_save_whose_pruning_failed_is_a_save_with_a_warning(tmp_path, monkeypatch, caplog):
  """A checkpoint written and named in the state file, then an older one that --max_save deletes could not be (an
  immutable file): `Could not write checkpoint D/ckpt-6 ... The latest complete checkpoint is D/ckpt-6: free space`,
  the run stopped and its run files were put back to the run's before (sweep 34, R4)."""
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  trainer = make_trainer(tmp_path, False)
  save = trainer.checkpoints.manager.save

  def pruning_fails(checkpoint_number):
    save(checkpoint_number=checkpoint_number)
    raise tf.errors.PermissionDeniedError(None, None, f"{tmp_path}/ckpt-1.index; Operation not permitted")
  monkeypatch.setattr(trainer.checkpoints.manager, "save", pruning_fails)
  assert trainer.checkpoints.save(2) == f"{tmp_path}/ckpt-2"
  assert trainer.checkpoints.latest() == f"{tmp_path}/ckpt-2"
  assert (f"Saved checkpoint {tmp_path}/ckpt-2, but an older one could not be deleted for --max_save (Operation not "
          "permitted): it is kept; delete it by hand.") in caplog.text


def test_a_save_that_left_its_index_cut_short_removes_it_and_names_the_checkpoint_before(tmp_path, monkeypatch):
  """A full disk inside TensorFlow's merge of the `.index` (written under its final name) left it cut short beside
  a whole `.data` file: the line named it the latest complete checkpoint, "rerun to resume from it", and the rerun
  refused it as damaged, advising to delete it (sweep 28, A4). Its files are removed, and the line names the one
  before."""
  from test_fp16 import make_trainer  # pylint: disable=import-outside-toplevel
  trainer = make_trainer(tmp_path, False)
  trainer.checkpoints.save(1)
  save, state = trainer.checkpoints.manager.save, (tmp_path / "checkpoint").read_text()

  def index_cut_short(checkpoint_number, index_made=True):
    save(checkpoint_number=checkpoint_number)
    index = tmp_path / f"ckpt-{checkpoint_number}.index"
    index.write_bytes(index.read_bytes()[:100])
    if not index_made:  # no inode left for it: the data part alone, under its final name (sweep 30, U13)
      index.unlink()
    (tmp_path / "checkpoint").write_text(state)
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
  for index_made in (True, False):
    monkeypatch.setattr(trainer.checkpoints.manager, "save",
                        lambda checkpoint_number, made=index_made: index_cut_short(checkpoint_number, made))
    with pytest.raises(OSError, match=f"The latest complete checkpoint is still {tmp_path}/ckpt-1: free space"):
      trainer.checkpoints.save(2)
    assert not [name for name in os.listdir(tmp_path) if name.startswith("ckpt-2")], index_made


def test_a_chosen_checkpoint_a_run_beside_deleted_is_chosen_again(tmp_path):
  """Predicting beside a training run that keeps one checkpoint (--max_save=1): model_dir's latest was deleted
  between being chosen and being read, and the line said it was not found (sweep 19, F9). The choice is made again;
  a checkpoint the user named is kept as named."""
  for name in ("ckpt-3.index", "ckpt-3.data-00000-of-00001"):
    (tmp_path / name).write_text("")
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\n')
  gone = str(tmp_path / "ckpt-2")
  assert checkpoint.chosen_again(gone, str(tmp_path)) == str(tmp_path / "ckpt-3")
  assert checkpoint.chosen_again(gone, str(tmp_path), explicit=gone) == gone
  assert checkpoint.chosen_again(str(tmp_path / "ckpt-3"), str(tmp_path)) == str(tmp_path / "ckpt-3")


def test_max_save_prunes_only_the_directory_s_own_checkpoints_oldest_first(tmp_path, caplog):
  """A copied run whose state file names the original's checkpoints: --max_save deleted the original's, exit 0
  (sweep 34, R1); a state file listing its entries out of order: it deleted the checkpoint resumed from (R2).
  `checkpoint_paths.keep_own_state`, which a training run calls before its CheckpointManager reads the file, lists
  the directory's own checkpoints by step."""
  from xlnet_tf import checkpoint_paths  # pylint: disable=import-outside-toplevel
  step = tf.Variable(0, dtype=tf.int64)
  ckpt = tf.train.Checkpoint(step=step)
  orig = tmp_path / "orig"
  manager = tf.train.CheckpointManager(ckpt, str(orig), max_to_keep=None, step_counter=step, checkpoint_name="ckpt")
  for value in (2, 4):
    step.assign(value)
    manager.save(checkpoint_number=value)
  shutil.copytree(orig, tmp_path / "copy")
  copy = tmp_path / "copy"
  (copy / "checkpoint").write_text(f'model_checkpoint_path: "{orig}/ckpt-4"\nall_model_checkpoint_paths: '
                                   f'"{orig}/ckpt-2"\nall_model_checkpoint_paths: "{orig}/ckpt-4"\n')
  out_of_order = tmp_path / "out_of_order"
  shutil.copytree(orig, out_of_order)
  (out_of_order / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\nall_model_checkpoint_paths: "ckpt-4"\n'
                                           'all_model_checkpoint_timestamps: 1e9\nall_model_checkpoint_paths: '
                                           '"ckpt-2"\nall_model_checkpoint_timestamps: 1e9\n')
  for directory in (copy, out_of_order):
    checkpoint_paths.keep_own_state(str(directory))
    resumed = tf.train.CheckpointManager(ckpt, str(directory), max_to_keep=1 if directory == copy else 2,
                                         step_counter=step, checkpoint_name="ckpt")
    step.assign(6)
    resumed.save(checkpoint_number=6)
    assert sorted(p.name for p in directory.glob("*.index")) == (
        ["ckpt-2.index", "ckpt-6.index"] if directory == copy else ["ckpt-4.index", "ckpt-6.index"])
  assert sorted(p.name for p in orig.glob("*.index")) == ["ckpt-2.index", "ckpt-4.index"]
  assert f"Left out, never deleted: {orig}/ckpt-2." in caplog.text


def test_a_checkpoint_named_with_a_zero_padded_step_is_taken_as_named(tmp_path):
  """`ckpt-04` without a state file was taken as ckpt-4, then refused as damaged, advising to delete `ckpt-4.*`,
  files that are not there (sweep 34, R5)."""
  step = tf.Variable(4, dtype=tf.int64)
  tf.train.Checkpoint(step=step).write(str(tmp_path / "ckpt-4"))
  for path in tmp_path.glob("ckpt-4.*"):
    path.rename(tmp_path / path.name.replace("ckpt-4", "ckpt-04"))
  assert checkpoint.latest_checkpoint(str(tmp_path)) == f"{tmp_path}/ckpt-04"
  step.assign(0)
  tf.train.Checkpoint(step=step).read(checkpoint.latest_checkpoint(str(tmp_path))).assert_consumed()
  assert int(step.numpy()) == 4


def test_an_hf_model_records_no_step():
  """Evaluating an HF model directory listed with the checkpoints ended in TensorFlow's "Couldn't find 'checkpoint'
  file or checkpoints in given directory" (sweep 36): it records no step, as a checkpoint without one."""
  assert checkpoint.recorded_step("tests/testdata/hf/cls_h5", default=-1) == -1
  assert checkpoint.recorded_step(f"{UNTIED}/xlnet_model.ckpt", default=-1) == 0
