import json
import pathlib
import types

import numpy as np
import pytest

import cli
import flag_configs
import run_start
from xlnet_tf import RunConfig, XLNetConfig

FIELDS = dict(n_layer=2, d_model=8, n_head=2, d_head=6, d_inner=11, ff_activation="gelu", untie_r=True,
              n_token=32)


def test_json_round_trip_is_sorted_indent_4(tmp_path):
  path = str(tmp_path / "sub" / "xlnet_config.json")
  XLNetConfig(**FIELDS).to_json(path)
  text = open(path).read()
  assert text == json.dumps(FIELDS, indent=4, sort_keys=True)
  assert XLNetConfig(json_path=path) == XLNetConfig(**FIELDS)


def test_reads_released_style_json():
  cfg = XLNetConfig(json_path="tests/testdata/model/ckpt_untied/xlnet_config.json")
  assert cfg.to_dict() == FIELDS


@pytest.mark.parametrize("change, message", [
    (dict(n_layer=None), "Missing: \\['n_layer'\\]"),
    (dict(d_embed=8), "unknown: \\['d_embed'\\]"),
    (dict(ff_activation="swish"), "ff_activation"),
    (dict(untie_r="yes"), "untie_r"),
    (dict(d_model=0), "d_model"),
    (dict(d_model=15), "'d_model' must be even: the relative positional embedding is d_model/2 sines and as many "
                       "cosines. Received: 15"),  # a traceback from inside the traced step before
    # A run hung building the model, and an out-of-memory line advised smaller batches, before:
    (dict(n_layer=10**30), "describes 7.67e\\+32 weights, 2.79e\\+21 TiB in float32, more than any device holds"),
    (dict(d_inner=10**12), "describes 3.4e\\+13 weights, 124 TiB in float32, .* Check its sizes: n_layer 2, d_model 8, "
                           "n_head 2, d_head 6, d_inner 1000000000000"),
])
def test_bad_fields_name_the_key(change, message):
  fields = dict(FIELDS, **change)
  fields = {k: v for k, v in fields.items() if v is not None}
  with pytest.raises(ValueError, match=message):
    XLNetConfig(**fields)


def test_a_json_with_a_key_more_is_read_as_the_original_reads_it(tmp_path, caplog):
  """The original's XLNetConfig reads the keys it needs: an xlnet_config.json with one more was refused here, with
  an empty "Missing: []" in the line (sweep 23, C11)."""
  (tmp_path / "xlnet_config.json").write_text(json.dumps(dict(FIELDS, foo=1)))
  assert XLNetConfig(json_path=str(tmp_path / "xlnet_config.json")) == XLNetConfig(**FIELDS)
  assert "holds keys that are no XLNet config keys, ignored (as by the original's XLNetConfig): foo." in caplog.text
  with pytest.raises(ValueError, match=r"must have exactly the keys \[.*\]. unknown: \['foo'\].$"):
    XLNetConfig(**dict(FIELDS, foo=1))
  # A run's run_flags.json passed as the config: its ~90 keys made a line of 2,000 characters (sweep 27).
  (tmp_path / "run_flags.json").write_text(json.dumps({f"flag_{i:02d}": i for i in range(90)}))
  with pytest.raises(ValueError) as error:
    XLNetConfig(json_path=str(tmp_path / "run_flags.json"))
  assert str(error.value).endswith("unknown: ['flag_00', 'flag_01', 'flag_02', 'flag_03', 'flag_04', 'flag_05', "
                                   "'flag_06', 'flag_07', '... (90 in all)'].") and len(str(error.value)) < 600


def test_the_weights_are_counted_as_the_released_models_have_them():
  large = XLNetConfig(json_path="tests/testdata/model/ckpt_untied/xlnet_config.json")
  for key, value in dict(n_layer=24, d_model=1024, n_head=16, d_head=64, d_inner=4096, n_token=32000).items():
    setattr(large, key, value)
  assert large.num_weights() == 360_267_776  # transformers' XLNetModel of xlnet-large-cased, without mask_emb


@pytest.mark.parametrize("text, message", [
    ("[1, 2, 3]", "holds a json list, not an object with the keys"),
    ('{"model_type": "xlnet", "d_model": 8}', "is a HuggingFace config.json \\(model_type 'xlnet'\\), not the "
                                            "original's xlnet_config.json. Pass its directory as --init_checkpoint")])
def test_a_json_that_is_no_xlnet_config_says_what_it_is(text, message, tmp_path):
  (tmp_path / "config.json").write_text(text)
  with pytest.raises(ValueError, match=message):
    XLNetConfig(json_path=str(tmp_path / "config.json"))


def test_a_repeated_key_is_refused_and_a_byte_order_mark_read(tmp_path):
  """A key given twice was taken at its last value without a word (n_layer 2, then 3: a 3-layer model); a file a
  Windows editor saved with a byte-order mark was "not valid json", with the advice to pass the file passed."""
  text = open("tests/testdata/model/ckpt_untied/xlnet_config.json", encoding="utf-8").read()
  (tmp_path / "twice.json").write_text(text.replace('"n_layer": 2,', '"n_layer": 2, "n_layer": 3,'))
  with pytest.raises(ValueError, match=r"twice.json gives n_layer more than once \(n_layer: 2, 3\). Keep one value"):
    XLNetConfig(json_path=str(tmp_path / "twice.json"))
  (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + text.encode())
  assert XLNetConfig(json_path=str(tmp_path / "bom.json")).n_layer == 2


def test_missing_file_is_clear(tmp_path):
  with pytest.raises(FileNotFoundError, match="model_config_path"):
    XLNetConfig(json_path=str(tmp_path / "nope.json"))


def test_create_run_config_finetune_drops_memory_options():
  o = types.SimpleNamespace(use_tpu=False, use_bfloat16=False, use_fp16=True, dropout=0.1, dropatt=0.1,
                            init="normal", init_range=0.1, init_std=0.02, clamp_len=-1, mem_len=128, reuse_len=64,
                            bi_data=True, same_length=True, recompute_grad=True, float32_positions=True)
  pre = flag_configs.create_run_config(o, True, False)
  fine = flag_configs.create_run_config(o, True, True)
  assert (pre.mem_len, pre.reuse_len, pre.bi_data, pre.same_length) == (128, 64, True, True)
  assert (fine.mem_len, fine.reuse_len, fine.bi_data, fine.same_length) == (None, None, False, False)
  assert fine.dropout == 0.1 and fine.clamp_len == -1
  assert pre.dtype_policy == fine.dtype_policy == "mixed_float16"
  assert pre.recompute_grad and fine.recompute_grad  # pretraining and fine-tuning alike
  assert pre.float32_positions and fine.float32_positions


def test_run_config_rejects_bad_init():
  with pytest.raises(ValueError, match="init"):
    RunConfig(False, False, False, 0.0, 0.0, init="xavier")
  for name in ("mem_len", "reuse_len"):  # a string from a hand-made config: compared or used later
    with pytest.raises(TypeError, match=f"`{name}` must be an integer or None. Received: '4'."):
      RunConfig(False, False, False, 0.0, 0.0, **{name: "4"})
  for value in ("4", None):  # None failed in the model's call (sweep 35)
    with pytest.raises(TypeError, match=rf"`clamp_len` must be an integer \(-1: no clamping\). Received: {value!r}."):
      RunConfig(False, False, False, 0.0, 0.0, clamp_len=value)
  for name in ("init_range", "init_std"):  # a negative one was taken as its size; 0: every new weight 0; inf: NaN
    for value in (-1.0, 0.0, float("inf"), True):  # True was taken as 1.0 (sweep 35)
      with pytest.raises(ValueError, match=rf"`{name}` must be a number > 0 \(--{name}: .* Received: {value}\."):
        RunConfig(False, False, False, 0.0, 0.0, **{name: value})


def test_finetune_heads_names_a_bad_class_count_or_task_name():
  from xlnet_tf import finetune_heads  # pylint: disable=import-outside-toplevel
  config = XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4, d_inner=8, ff_activation="gelu", untie_r=True,
                       n_token=20)
  run_config = RunConfig(False, False, False, 0.0, 0.0)
  for heads in ({"t": 0}, {"t": "2"}, {"glue/mnli": 3}, {"a b": 2}):  # Keras said `units=2`, or TF refused later
    with pytest.raises(ValueError, match="cls_heads maps a task name .* Received: "):
      finetune_heads(config, run_config, cls_heads=heads)


def test_finetune_heads_the_model_s_call_and_read_config_refuse_a_string_for_a_bool():
  """"False" is true: use_summ_proj="False" built the projection, ReadConfig(is_training="False") shuffled and
  repeated an evaluation, model(ids, training="False") ran dropout; reg_heads="sts" made a head per letter (sweep
  35)."""
  from xlnet_tf import finetune_heads  # pylint: disable=import-outside-toplevel
  from xlnet_tf.data.records import ReadConfig  # pylint: disable=import-outside-toplevel
  from xlnet_tf.modeling import ops  # pylint: disable=import-outside-toplevel
  config = XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4, d_inner=8, ff_activation="gelu", untie_r=True,
                       n_token=20)
  run_config = RunConfig(False, False, False, 0.0, 0.0)
  with pytest.raises(TypeError, match="^use_summ_proj must be True or False. Received: 'False'.$"):
    finetune_heads(config, run_config, use_summ_proj="False")
  with pytest.raises(TypeError, match=r"^cls_heads must be a dict \{task name: number of classes\}"):
    finetune_heads(config, run_config, cls_heads=["a"])
  for heads in ("sts", ["a/b"]):
    with pytest.raises(ValueError, match="^reg_heads must be a list of task names"):
      finetune_heads(config, run_config, reg_heads=heads)
  with pytest.raises(TypeError, match=r"^ReadConfig.is_training must be True or False. Received: 'False' \(str\).$"):
    ReadConfig(batch_size=2, is_training="False")
  with pytest.raises(TypeError, match="^training must be True, False or None. Received: 'False'.$"):
    ops.is_training("False")
  assert [ops.is_training(t) for t in (None, False, True)] == [False, False, True]


def test_the_data_and_task_configs_refuse_a_value_of_another_type():
  """"False" was true: bidirectional, lower-cased records (PretrainDataSpec), bfloat16 batches (ReaderOptions), the
  high RACE files alone (RecordsConfig), lower-cased SQuAD features (FeatureOptions); "8" and "0.5" failed deep in a
  pipeline or a comparison; a label list "01" was two labels (sweep 35)."""
  from xlnet_tf.data.pretrain_spec import PretrainDataSpec  # pylint: disable=import-outside-toplevel
  from xlnet_tf.tasks.classifier.metrics import PredictionFiles  # pylint: disable=import-outside-toplevel
  from xlnet_tf.tasks.pretrain.input import ReaderOptions  # pylint: disable=import-outside-toplevel
  from xlnet_tf.tasks.pretrain.writer_options import WriterOptions  # pylint: disable=import-outside-toplevel
  from xlnet_tf.tasks.race.records import RecordsConfig  # pylint: disable=import-outside-toplevel
  from xlnet_tf.tasks.squad.data import FeatureOptions  # pylint: disable=import-outside-toplevel
  spec = dict(bsz_per_host=4, seq_len=16, reuse_len=8, bi_data=True, mask_alpha=6, mask_beta=1)
  race = dict(data_dir="d", spiece_model_file="s", output_dir="o", max_seq_length=64, max_qa_length=16)
  for make, field, kind in (
      (lambda: PretrainDataSpec(**dict(spec, bi_data="False")), "PretrainDataSpec.bi_data", "True or False"),
      (lambda: WriterOptions(use_eod="False"), "WriterOptions.use_eod", "True or False"),
      (lambda: ReaderOptions(perm_size="8"), "ReaderOptions.perm_size", "an integer"),
      (lambda: ReaderOptions(perm_size=8, use_bfloat16="False"), "ReaderOptions.use_bfloat16", "True or False"),
      (lambda: FeatureOptions(max_seq_length=64, doc_stride=24, max_query_length=16, uncased="False"),
       "FeatureOptions.uncased", "True or False"),
      (lambda: RecordsConfig(**race, high_only="False"), "RecordsConfig.high_only", "True or False"),
      (lambda: PredictionFiles(predict_dir="p", task_name="t", predict_threshold="0.5"),
       "PredictionFiles.predict_threshold", "a number")):
    with pytest.raises(TypeError, match=f"^{field} must be {kind}. Received: '"):
      make()
  with pytest.raises(TypeError, match=r"^PredictionFiles.label_list must be a list of labels or None. Received: '01'"):
    PredictionFiles(predict_dir="p", task_name="t", label_list="01")
  assert ReaderOptions(perm_size=8, seed=None).seed is None and WriterOptions(seed=3).seed == 3
  # What worked before stays taken: a path for a str field (as its str), a numpy array of labels (as its list).
  files = PredictionFiles(predict_dir=pathlib.Path("p"), task_name="t", label_list=np.array(["neg", "pos"]))
  assert files.predict_dir == "p" and files.label_list == ["neg", "pos"]
  assert RecordsConfig(**dict(race, data_dir=pathlib.Path("d"))).data_dir == "d"


def test_heads_of_another_d_model_are_named():
  from xlnet_tf import XLNetModel, finetune_heads  # pylint: disable=import-outside-toplevel
  small, wide = (XLNetConfig(n_layer=1, d_model=d, n_head=2, d_head=4, d_inner=8, ff_activation="gelu", untie_r=True,
                             n_token=20) for d in (8, 16))
  run_config = RunConfig(False, False, False, 0.0, 0.0)
  with pytest.raises(ValueError, match=r"The heads \['sequnece_summary', 'classification_t'\] were built for another "
                                       r"d_model than this model's 16"):
    XLNetModel(wide, run_config, heads=finetune_heads(small, run_config, cls_heads={"t": 2}))


def test_a_dict_passed_as_the_json_path_names_the_fix():
  with pytest.raises(TypeError, match=r"pass a dict of fields as XLNetConfig\(\*\*fields\)"):
    XLNetConfig({"n_layer": 2})


@pytest.mark.parametrize("field, value, message", [
    ("mems_reset", "always", r"--mems_reset must be one of \('never', 'every_loop'\). Received: 'always'."),
    ("iterations", 0, "--iterations must be positive. Received: 0."),
    ("loss_weighting", "sum", r"--loss_weighting must be one of \('replica_mean', 'global_mean'\)."),
    ("clip_mode", "global", "--clip_mode must be one of .* Received: 'global'."),
    ("clip", -1.0, r"--clip must be > 0: .* Received: -1.0. To train without clipping .* e.g. --clip=1e9"),
    ("gradient_accumulation_steps", 0, r"--gradient_accumulation_steps must be a positive integer \(1: no "),
    # refused only after the training records were written (sweep 23, C6)
    ("learning_rate", -0.1, r"learning_rate must be a finite number >= 0 \(--learning_rate\). Received: -0.1."),
    # a NaN lr trained a step of NaNs; inf clips scaled by 0 * inf; train_steps 0 was `Nothing to do` (sweep 35)
    ("learning_rate", float("nan"), r"TrainConfig.learning_rate must be a finite number. Received: nan."),
    ("clip", float("inf"), r"TrainConfig.clip must be a finite number. Received: inf."),
    ("train_steps", 0, r"TrainConfig.train_steps must be a positive integer. Received: 0."),
    ("tokens_per_example", -3, r"TrainConfig.tokens_per_example must be a positive integer. Received: -3."),
    ("weight_decay", -1.0, r"weight_decay must be >= 0 \(--weight_decay\). Received: -1.0."),
    ("min_lr_ratio", -0.5, r"min_lr_ratio must be a finite number >= 0")])  # above 1: a rise, as the original
def test_train_config_rejects_a_bad_value_naming_the_flag(field, value, message):
  from xlnet_tf.training import TrainConfig  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match=message):
    TrainConfig(**{"learning_rate": 1e-4, "train_steps": 1, "global_batch_size": 1, field: value})


@pytest.mark.parametrize("clip_mode, resolved", [("auto", "per_replica"), ("dense", "dense")])
def test_fine_tuning_clips_each_replica_s_gradient_by_default(monkeypatch, clip_mode, resolved):
  """The original's fine-tuning scripts run `get_train_op` (its clip) once per MirroredStrategy replica: auto is
  per_replica there (pretraining's auto, `train_gpu.py`'s average-then-clip, is the Trainer's default)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import run_classifier  # pylint: disable=g-import-not-at-top
  from xlnet_tf import training  # pylint: disable=g-import-not-at-top
  from xlnet_tf.training import optimization  # pylint: disable=g-import-not-at-top
  made, written = [], []
  monkeypatch.setattr(training, "Trainer", lambda strategy, model_fn, task, model_dir, config: made.append(config))
  monkeypatch.setattr(run_start, "restore_or_init", lambda o, *args, **kwargs: written.append(o) and 0)
  o = cli.defaults(run_classifier.define_flags, clip_mode=clip_mode)
  run_start.fine_tuning_trainer(o, tf.distribute.get_strategy(), None, None, None, tokens_per_example=1)
  assert made[0].clip_mode == resolved
  assert made[0].save_at_start  # --save_initial_checkpoint's default: the Estimator's checkpoint of step 0
  assert written[0].clip_mode == resolved and o.clip_mode == clip_mode  # run_flags.json keeps the resolved value
  assert optimization.default_clip_mode(tf.distribute.get_strategy()) == "indexed_slices"


@pytest.mark.parametrize("there, here, replicas, compared", [
    (dict(clip_mode="auto", num_replicas=1), "per_replica", 1, "per_replica"),  # the same numbers on one replica
    (dict(clip_mode="auto", num_replicas=2), "per_replica", 2, "indexed_slices"),  # what auto meant then
    (dict(clip_mode="auto", num_replicas=2), "indexed_slices", 2, "indexed_slices"),
    (dict(clip_mode="auto", num_replicas=8, strategy="tpu"), "per_core", 8, "per_core"),
    (dict(clip_mode="dense", num_replicas=2), "per_replica", 2, "dense"),
    # Older still: no num_replicas; --strategy and --num_core_per_host tell it (2 GPUs), or do not (all of them).
    (dict(clip_mode="auto", strategy="auto", num_core_per_host=2), "per_replica", 2, "indexed_slices"),
    (dict(clip_mode="auto", strategy="auto", num_core_per_host=None), "per_replica", 1, "per_replica"),
    (dict(clip_mode="auto", strategy="mirrored", num_core_per_host=None), "per_replica", 1, "indexed_slices"),
    # Modes that are the same on one replica, where both runs have one.
    (dict(clip_mode="per_replica", num_replicas=1), "indexed_slices", 1, "indexed_slices"),
    (dict(clip_mode="per_core", num_replicas=1), "dense", 1, "dense"),
    (dict(clip_mode="per_core", num_replicas=1), "indexed_slices", 1, "per_core"),
    (dict(clip_mode="per_replica", num_replicas=2), "indexed_slices", 2, "per_replica"),
    (dict(clip_mode="per_replica", num_replicas=2), "indexed_slices", 1, "per_replica")])
def test_a_resume_compares_the_clip_mode_an_earlier_run_trained_with(there, here, replicas, compared):
  """run_flags.json of before 2026-11-29 keeps --clip_mode=auto, since resolved otherwise in fine-tuning on several
  replicas: a resume compares the mode that run trained with (a change warned of, none where there is none)."""
  compared_there = run_start._clip_mode_compared(there, here, replicas)  # pylint: disable=protected-access
  assert compared_there["clip_mode"] == compared


def test_train_config_of_a_cli_takes_its_flags():
  import run_pretrain  # pylint: disable=g-import-not-at-top
  o = cli.defaults(run_pretrain.define_flags, learning_rate=3e-4, clip=0.5, save_steps=7, mems_reset="every_loop",
                   gradient_accumulation_steps=4)
  config = flag_configs.train_config(o, 16, 512, mems_reset=o.mems_reset)
  assert config.gradient_accumulation_steps == 4
  assert config.clip_mode is None  # --clip_mode=auto: the strategy's (optimization.default_clip_mode)
  assert (config.learning_rate, config.clip, config.save_steps, config.mems_reset) == (3e-4, 0.5, 7, "every_loop")
  assert (config.global_batch_size, config.tokens_per_example, config.iterations) == (16, 512, o.iterations)
  assert config.optimizer_args() == dict(learning_rate=3e-4, train_steps=o.train_steps, warmup_steps=0,
                                         decay_method="poly", min_lr_ratio=o.min_lr_ratio, weight_decay=0.0,
                                         adam_epsilon=o.adam_epsilon)


def test_configs_refuse_values_of_the_wrong_type_where_they_are_given():
  """A notebook's TrainConfig(learning_rate="1e-3"), gradient_accumulation_steps=2.0 or global_batch_size=0, a
  RunConfig(is_training="False") (a true string: dropout on), dropout "0.1" or reuse_len -3, and XLNetModel's two
  configs swapped were taken, then failed deep in the schedule or the loop, or trained otherwise (sweep 17, P6)."""
  from xlnet_tf.modeling.xlnet import XLNetModel  # pylint: disable=import-outside-toplevel
  from xlnet_tf.training import TrainConfig  # pylint: disable=import-outside-toplevel
  good = dict(learning_rate=1e-3, train_steps=4, global_batch_size=8)
  TrainConfig(**dict(good, train_steps=np.int64(4), save_steps=None, clip=1, jit_compile=np.bool_(True)))  # numpy's
  for field, value, kind in (("learning_rate", "1e-3", "a number"), ("gradient_accumulation_steps", 2.0, "an integer"),
                             ("gradient_accumulation_steps", True, "an integer"), ("jit_compile", 1, "True or False"),
                             ("save_steps", 2.5, "an integer or None"), ("clip_mode", 3, "a string or None")):
    with pytest.raises(TypeError, match=f"^TrainConfig.{field} must be {kind}. Received: {value!r} "):
      TrainConfig(**dict(good, **{field: value}))
  with pytest.raises(ValueError, match=r"^TrainConfig.global_batch_size \(--train_batch_size\) must be a positive "
                                       "integer. Received: 0."):
    TrainConfig(**dict(good, global_batch_size=0))
  with pytest.raises(TypeError, match="^`is_training` must be True or False. Received: 'False'."):
    RunConfig("False", False, False, 0.1, 0.1)
  with pytest.raises(ValueError, match=r"^`dropout` must be in \[0, 1\). Received: '0.1'."):
    RunConfig(True, False, False, "0.1", 0.1)
  with pytest.raises(ValueError, match="^`reuse_len` must be >= 0"):
    RunConfig(True, False, False, 0.1, 0.1, reuse_len=-3)
  config, run_config = XLNetConfig(**FIELDS), RunConfig(False, False, False, 0.0, 0.0)
  with pytest.raises(TypeError, match="^Pass an XLNetConfig .* in that order. Received: RunConfig, XLNetConfig."):
    XLNetModel(run_config, config)
