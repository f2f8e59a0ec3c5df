"""Replays the original's recorded training steps through xlnet-tf's Trainer and compares (training-step parity).

A golden file (`*.npz`, the format of `shared/goldens/train_step/README.md`) holds what the ORIGINAL
`train_gpu.py` / `run_classifier.py` / `run_squad.py` / `run_race.py` did for K optimizer steps from a TF1
checkpoint: the inputs each step (and tower) consumed, the loss (and tower losses, or the head's outputs: logits and
per-example losses, SQuAD's start/end log-probs and answer-class logits), learning rate and pre-clip `gnorm` of every
step, the mems, the first step's gradients and, after the last step, every variable, optimizer slot, beta power and
the global step (`meta_json["mode"]`: pretrain, finetune (run_classifier.py), squad or race). `replay` builds the
Trainer the way the CLI would (`cli_options`: the golden's own flags through the script's flag definitions and
Trainer builders), loads the checkpoint by its TF1 names as `--init_checkpoint` does, feeds the recorded inputs
through `Trainer.train` one step per call and collects the same quantities (`Trainer.batch_gradients` for each
step's tower losses and the first gradients); `compare` judges the differences against `TOLERANCES`. Every setting
comes from the golden's `meta_json`.

Path: a `*_tpupath` file (`meta_json["use_tpu_embedding_and_loss_path"]`: dense embedding gradient) is replayed
with --clip_mode=dense, a `*_gpu` file with the CLI's default (auto: the original's GPU norm). Towers become the
replicas --num_core_per_host asks for; on a CPU the caller must split the CPU into as many logical devices before
TensorFlow starts (scripts/check_train_step.py does).
"""

if __name__ == "__main__":  # run by its name it did nothing, exit 0
  raise SystemExit("step_parity.py is a library: run scripts/check_train_step.py.")

import json
import os
import re
import tempfile

import numpy as np
import tensorflow as tf

import cli
import flag_configs
import run_classifier
import run_start
import run_pretrain
import run_race
import run_squad
from xlnet_tf import XLNetConfig
from xlnet_tf import checkpoint as checkpoint_lib
from xlnet_tf.tasks.classifier import task as classifier_task
from xlnet_tf.tasks.race import data as race_data
from xlnet_tf.tasks.race import task as race_task
from xlnet_tf.tasks.squad import task as squad_task
from xlnet_tf.training.slot_names import original_optimizer_state


# Largest allowed difference per quantity, relative to the golden array's largest magnitude (at least 1e-12).
# Final variables: |ours - golden| <= final x (the variable's largest golden update) + final_abs, per variable, where
# the update is the golden's final value minus the checkpoint's. Entries whose gradient is in the rounding noise
# (golden sqrt(v) below noise_v of the variable's largest sqrt(v): their Adam direction m / sqrt(v) is set by
# rounding) may differ by up to noise_final of the update instead. grad0: relative to the variable's largest golden
# gradient, or to the step's largest gradient where the variable's is below grad0_noise of it (a gradient zero in exact
# arithmetic, e.g. the bias of logits under a softmax, which is shift-invariant: its float32 value is rounding noise).
# A variable whose gradient is rounding noise at every step (`noise_variables`) is moved by Adam in a direction the
# machine's rounding sets (m / sqrt(v) of noise is of size 1): its final value may differ from the golden's by up to
# noise_variable x the larger of the two updates, and ours must have moved less than ADAM_STEP_BOUND x the summed
# learning rate (Adam's largest step per unit learning rate, (1 - beta_1) / sqrt(1 - beta_2), is 3.16).
# Measured figures: docs/training_step.md.
TOLERANCES = {"loss": 5e-6, "tower_loss": 5e-6, "logits": 5e-6, "per_example_loss": 5e-6, "learning_rate": 1e-6,
              "gnorm": 5e-6, "new_mems": 5e-6, "grad0": 2e-5, "final": 1e-3, "final_abs": 1e-7, "noise_v": 1e-3,
              "noise_final": 5e-2, "slots": 1e-4, "beta_power": 1e-6, "global_step": 0, "grad0_noise": 1e-6,
              "noise_variable": 2.0}
ADAM_STEP_BOUND = 3.2
# The head outputs judged as `logits` are.
TOLERANCE_OF = {"start_log_probs": "logits", "end_log_probs": "logits", "cls_logits": "logits"}


# The per-step quantities each kind of golden must hold (README's tables); every one is compared. A long-horizon
# golden (`batch_of_step`: hundreds of steps over a few stored batches) holds the step's figures the Trainer reports
# every step ("long"; no head outputs) and, when pretraining, the mems after its last step only.
STEP_KEYS = {"pretrain": ("loss", "tower_loss", "learning_rate", "gnorm", "global_step", "new_mems"),
             "finetune": ("loss", "per_example_loss", "logits", "learning_rate", "gnorm", "global_step"),
             "squad": ("loss", "start_log_probs", "end_log_probs", "cls_logits", "learning_rate", "gnorm",
                       "global_step"),
             "race": ("loss", "per_example_loss", "logits", "learning_rate", "gnorm", "global_step"),
             "long": ("loss", "learning_rate", "gnorm", "global_step")}

# Reruns of the original a golden may hold (see tests/testdata/generate_train_step_goldens.py): `alt/*`, the same run
# with every matmul summing in another order (oneDNN switched), and, in a long golden, `pert1/*` .. `pertK/*`, the
# same run from the checkpoint moved by one ulp in a random half of every float variable's entries. A quantity may
# differ from the golden by up to DRIFT_FACTOR x the LARGEST difference of any of these reruns, where this is more
# than the tolerance above. Neither kind bounds the other: over 300 steps the alt rerun drifts 1.6-2.6x further than
# the perturbed ones on one pretraining golden and 3-30x less on a classifier golden, where 2x (3x) alt alone failed
# the original's own perturbed reruns; the largest over alt and four perturbed reruns passes a fifth one unseen
# (docs/training_step.md, "The original's noise floor").
DRIFT_FACTOR = {"loss": 2, "gnorm": 2, "new_mems": 2, "last_new_mems": 2, "final": 3, "slots": 3}
RERUN = re.compile(r"(alt|pert[0-9]+)/")


def reruns(g):
  """The prefixes of the original's reruns the golden holds: "alt/", "pert1/", ... ."""
  return sorted({match.group(0) for match in map(RERUN.match, g) if match})


def rerun_drift(g, prefixes, key, measure):
  """(the largest measure(g[prefix + key]) over the golden's reruns (`prefixes`, `reruns(g)`) that hold `key`, that
  rerun's prefix), or (None, None) when none does."""
  drifts = [(measure(g[prefix + key]), prefix) for prefix in prefixes if prefix + key in g]
  return max(drifts, key=lambda d: d[0]) if drifts else (None, None)


def step_keys(g, meta):
  if "batch_of_step" not in g:
    return STEP_KEYS[meta["mode"]]
  return STEP_KEYS["long"] + (("last_new_mems",) if meta["mode"] == "pretrain" else ())


# Golden keys that are inputs (fed, not compared) or not compared, and why.
INPUT_KEYS = {"pretrain": ("inp_k", "seg_id", "inp_q", "perm_mask", "target_mapping", "target", "target_mask"),
              "finetune": ("input_ids", "seg_ids", "input_mask", "label_ids"),
              "squad": ("input_ids", "segment_ids", "input_mask", "p_mask", "cls_index", "start_positions",
                        "end_positions", "is_impossible"),
              "race": ("input_ids", "segment_ids", "input_mask", "label_ids")}
# The CLI of each fine-tuning mode (`meta_json` holds its flags as `<script>_flags`).
SCRIPTS = {"finetune": run_classifier, "squad": run_squad, "race": run_race}
NOT_COMPARED = {"meta_json": "settings", "gnorm_dense": "the merged-gradient norm, for ports that merge (gnorm is "
                "compared: the original's IndexedSlices norm, which xlnet-tf reproduces)",
                "grad0_slices/": "the un-merged embedding rows behind gnorm[0] (gnorm and the merged grad0 are "
                "compared)"}


SLOT_SUFFIXES = ("/Adam", "/Adam_1", "/adam_m", "/adam_v")
OPTIMIZER_SCALARS = ("global_step", "beta1_power", "beta2_power")


def load(path):
  """The golden arrays of one file, and its meta_json as a dict."""
  with np.load(path) as data:
    arrays = {k: data[k] for k in data.files}
  return arrays, json.loads(str(arrays.pop("meta_json")))


def _ckpt_prefix(golden_dir):
  return os.path.join(golden_dir, "ckpt", "xlnet_model.ckpt")


def expected_files(golden_dir):
  """The golden files the folder must hold, by name without .npz: its MANIFEST (one name a line, # comments) if
  it has one, else every file named in README.md's table under `## Files` (`a_{gpu,tpupath}.npz` is two).

  Raises:
    ValueError: neither lists a file.
  """
  manifest = os.path.join(golden_dir, "MANIFEST")
  if os.path.isfile(manifest):
    with open(manifest) as f:
      names = [line.split("#")[0].strip() for line in f]
    names = [n[:-len(".npz")] if n.endswith(".npz") else n for n in names if n]
    source = manifest
  else:
    source = os.path.join(golden_dir, "README.md")
    text = open(source).read() if os.path.isfile(source) else ""
    section = text.split("\n## Files", 1)[1].split("\n#", 1)[0] if "\n## Files" in text else ""
    names = []
    for line in section.splitlines():
      if line.startswith("| `"):
        for token in re.findall(r"`([^`]+)\.npz`", line.split("|")[1]):
          match = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", token)
          names += [match.group(1) + alt + match.group(3) for alt in match.group(2).split(",")] if match else [token]
  if not names:
    raise ValueError(f"{golden_dir} lists no golden files: it needs a MANIFEST (one file name a line) or a "
                     "README.md whose `## Files` table names them.")
  return sorted(set(names)), source


def cli_options(meta, golden_dir, model_dir, **overrides):
  """The flag values the CLI (run_pretrain.py, run_classifier.py, run_squad.py or run_race.py) would parse for the
  golden's run: the original script's flags from meta_json, then the flags the golden's `get_train_op` saw
  (`get_train_op_overrides`, e.g. the pretraining lr_layer_decay_rate train_gpu.py has no flag for), then
  --clip_mode=dense for a `tpupath` golden; paths point into golden_dir and model_dir. `overrides`: further flags."""
  pretrain = meta["mode"] == "pretrain"
  script = run_pretrain if pretrain else SCRIPTS[meta["mode"]]
  values = dict(meta["train_gpu_flags"] if pretrain else meta[f"{script.__name__}_flags"])
  values.update(meta["get_train_op_overrides"])
  values.update(model_dir=model_dir, init_checkpoint=_ckpt_prefix(golden_dir))
  if not pretrain:
    values["model_config_path"] = os.path.join(golden_dir, "ckpt", "xlnet_config.json")
  if meta["use_tpu_embedding_and_loss_path"]:
    values["clip_mode"] = "dense"
  values.update(overrides)
  return cli.defaults(script.define_flags, **values)


_STRATEGIES = {}  # one per setting and process: two MirroredStrategies in one process mix up their collectives


def _strategy(o):
  key = (o.strategy, o.use_tpu, o.num_core_per_host)
  if key not in _STRATEGIES:
    _STRATEGIES[key] = flag_configs.start(o)
  return _STRATEGIES[key]


def build_trainer(golden_dir, meta, model_dir, log_fn=None, **overrides):
  """The Trainer the CLI builds for the golden's run (`cli_options`), initialised from `--init_checkpoint` as the
  CLI does. Returns (trainer, options)."""
  o = cli_options(meta, golden_dir, model_dir, **overrides)
  log_fn = log_fn or (lambda line: None)
  strategy = _strategy(o)
  if meta["mode"] == "pretrain":
    o = run_pretrain.for_strategy(o, strategy)
    run_pretrain.validate(o, strategy.num_replicas_in_sync)
    trainer = run_pretrain.build_trainer(o, strategy, run_pretrain.build_xlnet_config(o))
    trainer.restore_or_init(o.init_checkpoint, o.init_optimizer_state, log_fn)
  else:
    xlnet_config = XLNetConfig(json_path=o.model_config_path)
    build_model, task, tokens_per_example, _ = fine_tuning_task(meta, o, xlnet_config)
    trainer, _, _, _ = run_start.fine_tuning_trainer(o, strategy, build_model, task, xlnet_config,
                                                     tokens_per_example, log_fn)
  return trainer, o


def _numpy(names, tensors):
  return {name: t.numpy() for name, t in zip(names, tensors)}


def fine_tuning_task(meta, o, xlnet_config):
  """What the fine-tuning CLI of the golden's mode builds from its options `o`.

  Returns:
    (build_model: run_config -> the task's XLNetModel, the Trainer's task, tokens per example (for the log line),
    head_outputs: (model, batch-major features) -> {golden key: numpy array}, the head's outputs in training).
  """
  if meta["mode"] == "squad":
    return (lambda run_config: squad_task.build_model(xlnet_config, run_config), squad_task.SquadTask(),
            o.max_seq_length, lambda model, features: {k: v.numpy() for k, v in squad_task.qa_outputs(
                model, features, training=True).items()})
  if meta["mode"] == "race":
    model_args = run_race.build_model_args(o)
    return (lambda run_config: race_task.build_model(xlnet_config, run_config, **model_args), race_task.RaceTask(),
            race_data.NUM_CHOICES * o.max_seq_length, lambda model, features: _numpy(
                ("logits", "per_example_loss"), race_task.forward(model, features, training=True)))
  model_args = run_classifier.build_model_args(o, meta.get("label_list"))
  return (lambda run_config: classifier_task.build_model(xlnet_config, run_config, **model_args),
          classifier_task.ClassifierTask(model_args["scope"]), o.max_seq_length, lambda model, features: _numpy(
              ("logits", "per_example_loss"), classifier_task.forward(model, features, model_args["scope"],
                                                                      training=True)))


def batches(g, meta):
  """[K][T] dicts of batch-major features, as the CLI's input pipeline yields them (T: the golden's towers or
  replicas; 1 for SQuAD and RACE)."""
  if meta["mode"] in ("squad", "race"):  # batch-major as recorded; RACE's [B, 4L] as our records' [B, 4, L]
    choices = meta["mode"] == "race"
    shape = lambda x: x.reshape(x.shape[0], race_data.NUM_CHOICES, -1) if choices and x.ndim > 1 else x
    return [[{key: shape(g[key][k]) for key in INPUT_KEYS[meta["mode"]]}] for k in range(g["input_ids"].shape[0])]
  if meta["mode"] != "pretrain":  # time-major [K, L, B]; from several replicas [K, replicas, L, B] (labels [K, R, B])
    one = g["input_ids"].ndim == 3
    ids, seg, mask, labels = (g[key][:, None] if one else g[key] for key in ("input_ids", "seg_ids", "input_mask",
                                                                             "label_ids"))
    return [[{"input_ids": ids[k, r].T, "segment_ids": seg[k, r].T, "input_mask": mask[k, r].T,
              "label_ids": labels[k, r]} for r in range(ids.shape[1])] for k in range(ids.shape[0])]
  k_steps, towers = g["inp_k"].shape[:2]
  return [[{"input_k": g["inp_k"][k, t].T, "seg_id": g["seg_id"][k, t].T, "input_q": g["inp_q"][k, t].T,
            "perm_mask": np.transpose(g["perm_mask"][k, t], [2, 0, 1]),
            "target_mapping": np.transpose(g["target_mapping"][k, t], [2, 0, 1]),
            "target": g["target"][k, t].T, "target_mask": g["target_mask"][k, t].T} for t in range(towers)]
          for k in range(k_steps)]


def dataset_fn(step_batches):
  """`dataset_fn(input_context, start_step)`: step k's per-replica batches, replica by replica, from start_step."""
  flat = [replica for step in step_batches for replica in step]
  towers = len(step_batches[0])

  def fn(input_context, start_step):
    del input_context  # one input pipeline: it yields replica 0's batch, then replica 1's, ...
    rows = flat[start_step * towers:]
    return tf.data.Dataset.from_tensor_slices({k: np.stack([r[k] for r in rows]) for k in rows[0]})
  return fn


def final_state(trainer):
  """Every variable and the optimizer's whole state (slots, beta powers, global step), by the original's TF1 names,
  as numpy."""
  variables = checkpoint_lib.original_variable_map(trainer.model)
  state = {name: v.numpy() for name, v in variables.items()}
  state.update({name: np.asarray(v.numpy()) for name, v in
                original_optimizer_state(trainer.optimizer, variables).items()})
  return state


def replay(path, golden_dir=None, **overrides):
  """Runs the golden's steps through the CLI's Trainer (`overrides`: further flags, e.g. loss_weighting).

  Returns:
    (golden arrays, meta, ours: {per-step key: list over steps, "grad0": {TF1 name: array}, "final": {TF1 name:
    array}, "initial": {TF1 name: array} our weights before the first step}).
  """
  golden_dir = golden_dir or os.path.dirname(path)
  g, meta = load(path)
  step_batches = batches(g, meta)
  long = "batch_of_step" in g
  if long:  # one loop per step (--iterations=1), so that every step reports its figures
    step_batches = [step_batches[i] for i in g["batch_of_step"]]
    overrides = dict({"iterations": 1}, **overrides)
  towers = len(step_batches[0])
  data = dataset_fn(step_batches)
  ours = {key: [] for key in step_keys(g, meta)}
  with tempfile.TemporaryDirectory(prefix="xlnet-step-parity-") as model_dir:
    trainer, o = build_trainer(golden_dir, meta, model_dir, **overrides)
    if trainer.strategy.num_replicas_in_sync != towers:
      raise ValueError(f"The golden has {towers} towers; the CLI's options made {trainer.strategy.num_replicas_in_sync}"
                       " replicas.")
    variables = checkpoint_lib.original_variable_map(trainer.model)
    names = {id(v): name for name, v in variables.items()}
    ours["initial"] = {name: v.numpy() for name, v in variables.items()}
    if long:  # one run of every step, as the CLIs train; each step's figures at full precision
      metrics = []
      trainer.train(data, train_steps=len(step_batches), log_fn=lambda line: None, metrics_fn=metrics.append)
      for key, name in (("loss", "loss"), ("learning_rate", "lr"), ("gnorm", "gnorm"), ("global_step", "step")):
        ours[key] = [m[name] for m in metrics]
      if "last_new_mems" in ours:
        ours["last_new_mems"] = [_tower_mems(trainer, towers, o)]
      ours["final"] = final_state(trainer)
      return g, meta, ours
    head_outputs = None if meta["mode"] == "pretrain" else fine_tuning_task(
        meta, o, XLNetConfig(json_path=o.model_config_path))[3]
    for k, step in enumerate(step_batches):
      tower_losses, grads = trainer.batch_gradients(data)
      if k == 0:
        ours["grad0"] = {names[id(v)]: grad for v, grad in zip(trainer.model.trainable_variables, grads)}
      if head_outputs is None:
        ours["tower_loss"].append(tower_losses)
      else:  # the head's outputs before this step's update
        for key, value in head_outputs(trainer.model, step[0]).items():
          if key in ours:
            ours[key].append(value)
      result = trainer.train(data, train_steps=k + 1, log_fn=lambda line: None)
      ours["loss"].append(result["loss"])
      ours["learning_rate"].append(result["lr"])
      ours["gnorm"].append(result["gnorm"])
      ours["global_step"].append(trainer.step)
      if trainer.mems.variables and "new_mems" in ours:
        ours["new_mems"].append(_tower_mems(trainer, towers, o))
    ours["final"] = final_state(trainer)
  return g, meta, ours


def _tower_mems(trainer, towers, o):
  """The pretraining trainer's mems [N, M, global_b, D] as the golden's [T, N, M, b, D]; none (--mem_len=0, as
  train_gpu.py's default): M is 0, as the original's."""
  mems = trainer.mems.numpy()
  if mems is None:
    config = run_pretrain.build_xlnet_config(o)
    mems = np.zeros([config.n_layer, 0, o.train_batch_size, config.d_model], np.float32)
  return np.stack(np.split(mems, towers, axis=2))


MASKED = 1e29  # entries at least this large are the original's masked positions (its -1e30 logits, log-probs)


def _rel(ours, golden):
  """max |ours - golden| / max |golden|; masked entries (|golden| >= MASKED) must be the same in ours and are left
  out of both maxima (inf otherwise)."""
  ours, golden = np.asarray(ours, np.float64), np.asarray(golden, np.float64)
  if ours.shape != golden.shape:
    return float("inf")
  masked = np.abs(golden) >= MASKED
  if np.any(np.abs(ours[masked] - golden[masked]) > 1e-6 * np.abs(golden[masked])):
    return float("inf")
  ours, golden = ours[~masked], golden[~masked]
  if not golden.size:
    return 0.0
  return float(np.max(np.abs(ours - golden))) / max(float(np.max(np.abs(golden))), 1e-12)


def final_variable_diffs(golden_final, ours_final, initial, v_slot=None, rerun_finals=()):
  """How far one variable's final value is from the golden's, relative to the golden's largest update.

  Args:
    golden_final, ours_final, initial: arrays of one variable (initial: the checkpoint's value).
    v_slot: the golden's second-moment slot of the variable, or None.
    rerun_finals: the variable after each of the original's reruns (`alt/`, `pert{i}/`): every entry may also
      differ by DRIFT_FACTOR["final"] x the largest difference of any of them on the variable.

  Returns:
    (worst |ours - golden| / max|golden update| over the entries whose gradient is not in the rounding noise,
    the same over those that are (0 if none), how many of those exceed the first tolerance, whether the former
    are within tolerance, whether the latter are).
  """
  golden = np.asarray(golden_final, np.float64)
  if np.shape(ours_final) != golden.shape:
    return float("inf"), 0.0, 0, False, True
  update = float(np.max(np.abs(golden - initial))) if golden.size else 0.0
  diff = np.abs(np.asarray(ours_final, np.float64) - golden)
  noise = np.zeros(diff.shape, bool)
  if v_slot is not None and np.max(v_slot) > 0:  # v == 0: no gradient ever, nothing to amplify
    root = np.sqrt(np.asarray(v_slot, np.float64))
    noise = (root > 0) & (root < TOLERANCES["noise_v"] * np.max(root))
  drift = DRIFT_FACTOR["final"] * max((float(np.max(np.abs(r - golden))) for r in rerun_finals), default=0.0)
  strict_ok = bool(np.all(diff[~noise] <= TOLERANCES["final"] * update + TOLERANCES["final_abs"] + drift))
  noise_ok = bool(np.all(diff[noise] <= TOLERANCES["noise_final"] * update + TOLERANCES["final_abs"] + drift))
  scale = max(update, 1e-12)
  strict = float(np.max(diff[~noise])) / scale if (~noise).any() else 0.0
  loose = float(np.max(diff[noise])) / scale if noise.any() else 0.0
  over = int(np.sum(diff[noise] > TOLERANCES["final"] * update + TOLERANCES["final_abs"]))
  return strict, loose, over, strict_ok, noise_ok


def noise_variable_diff(golden_final, ours_final, initial, bound):
  """A variable whose gradient is rounding noise at every step (`noise_variables`), judged by Adam's reach: its final
  value may differ from the golden's by TOLERANCES["noise_variable"] x the larger of the two updates, and ours must
  have moved less than `bound` (ADAM_STEP_BOUND x the summed learning rate).

  Returns:
    (|ours - golden| over the larger update, worst entry; ok), (inf, False) where the shapes differ.
  """
  if np.shape(ours_final) != np.shape(golden_final):
    return float("inf"), False
  golden_u = float(np.max(np.abs(golden_final - initial)))
  ours_u = float(np.max(np.abs(ours_final - initial)))
  diff = float(np.max(np.abs(np.asarray(ours_final, np.float64) - golden_final)))
  ok = (diff <= TOLERANCES["noise_variable"] * max(golden_u, ours_u) + TOLERANCES["final_abs"]
        and ours_u <= bound + TOLERANCES["final_abs"])
  return diff / max(golden_u, ours_u, 1e-12), ok


def grad0_diffs(golden, ours):
  """{variable: max |ours - golden| / its scale} of the step-1 gradients, and the variables whose golden gradient is
  rounding noise (below TOLERANCES["grad0_noise"] of the largest gradient of the step), whose scale is that largest
  gradient instead of their own."""
  largest = max(float(np.max(np.abs(v), initial=0.0)) for v in golden.values())
  noise = sorted(n for n, v in golden.items() if np.max(np.abs(v), initial=0.0) < TOLERANCES["grad0_noise"] * largest)
  diffs = {n: _rel(ours[n], golden[n]) for n in golden if n not in noise}
  for n in noise:
    diffs[n] = _rel(np.append(np.ravel(ours[n]), largest), np.append(np.ravel(golden[n]), largest))
  return diffs, noise


def noise_variables(finals, slot_names):
  """The variables whose gradient was rounding noise at every step (zero in exact arithmetic, e.g. the bias of logits
  under a softmax; see grad0_diffs): the golden's largest sqrt(v) below TOLERANCES["grad0_noise"] of the largest
  sqrt(v) of any variable. `finals`: {TF1 name: the golden's final value}; `slot_names`: meta_json["slots"]."""
  roots = {n: float(np.sqrt(np.max(finals[s["v"]]))) for n, s in slot_names.items()
           if s["v"] in finals and finals[s["v"]].size}
  largest = max(roots.values(), default=0.0)
  return sorted(n for n, root in roots.items() if root < TOLERANCES["grad0_noise"] * largest)


def slot_diffs(finals, slot_names, slots, noise):
  """`diff(slot name, values)`: max |values - golden| over the golden slot's largest magnitude, or, for a slot of a
  variable in `noise` (`noise_variables`: its gradient is rounding noise, its moments float32 noise, 1e-9 where the
  others are 1e-2), over the largest golden slot of its kind (m or v), as grad0_diffs judges such a gradient."""
  kind = {s[key]: key for n, s in slot_names.items() for key in ("m", "v")}
  largest = {key: max((float(np.max(np.abs(finals[n]), initial=0.0)) for n in slots if kind.get(n) == key),
                      default=0.0) for key in ("m", "v")}

  def diff(name, values):
    if name.rsplit("/", 1)[0] not in noise or name not in kind:
      return _rel(values, finals[name])
    scale = largest[kind[name]]
    return _rel(np.append(np.ravel(values), scale), np.append(np.ravel(finals[name]), scale))
  return diff


def compare(g, meta, ours, initial):
  """Judges a replay: {row name: (worst difference, tolerance, ok, note)} (see TOLERANCES). Every quantity the golden
  holds is compared; a quantity the golden should hold but lacks, or ours lacks, or a golden key this checker does
  not know, is a failed row.

  Args:
    g, meta, ours: from `replay`.
    initial: {TF1 name: array} the checkpoint the golden starts from (`checkpoint.checkpoint_arrays`).
  """
  rows = {}

  def check(name, diff, tol, ok=None, note=""):
    rows[name] = (diff, tol, diff <= tol if ok is None else ok, note)

  def missing(name, what):
    rows[name] = (None, None, False, what)

  mode = meta["mode"]
  long = "batch_of_step" in g
  prefixes = reruns(g)  # the original's reruns the golden holds, read once
  known = (set(step_keys(g, meta)) | set(INPUT_KEYS[mode]) | {"meta_json", "gnorm_dense"} |
           {"batch_of_step"} | {prefix + k for prefix in prefixes for k in DRIFT_FACTOR})
  read_below = ("grad0/", "grad0_slices/", "final/", *(prefix + "final/" for prefix in prefixes))
  for key in sorted(g):
    if key not in known and not key.startswith(read_below):
      missing(f"unknown key {key}", "the golden holds it; this checker compares nothing of it")
  for key in step_keys(g, meta):
    if key not in g:
      missing(key, "the golden lacks it")
    elif not ours.get(key):
      missing(key, "xlnet-tf gave none")
    else:
      tol = TOLERANCES["new_mems" if key == "last_new_mems" else TOLERANCE_OF.get(key, key)]
      note = ""
      drift, prefix = rerun_drift(g, prefixes, key, lambda rerun, key=key: _rel(rerun, g[key]))
      if drift is not None:
        tol = max(tol, DRIFT_FACTOR[key] * drift)
        note = f"the original against itself: {drift:.1e} ({prefix[:-1]})"
      check(key, _rel(np.asarray(ours[key]), g[key]), tol, note=note)

  # Variables xlnet-tf's model holds but the original's graph for this run does not create (e.g. lm_loss/bias and
  # mask_emb when fine-tuning): the loss must not reach them and they must not move.
  original = {v["name"] for v in meta.get("variables", [])}
  if not original:
    missing("variables", "meta_json lacks the original graph's variable list")
  extra = sorted(n for n in ours.get("initial", {}) if n not in original)
  if original and extra:
    moved = [n for n in extra if np.any(ours.get("grad0", {}).get(n, 0)) or
             not np.array_equal(ours["final"].get(n), ours["initial"][n]) or
             any(np.any(v) for k, v in ours["final"].items() if k.startswith(n + "/"))]
    rows["extra variables"] = (None, None, not moved, f"{len(extra)} not in the original's graph: "
                               f"{', '.join(extra)}; " + (f"MOVED or have gradients: {moved}" if moved else
                                                          "zero gradient, unchanged, zero slots"))
  extra = set(extra)
  grads = {k[len("grad0/"):]: v for k, v in g.items() if k.startswith("grad0/")}
  ours_grads = {n: v for n, v in ours.get("grad0", {}).items() if n not in extra}
  if long:
    pass  # the step-1 gradients are the 3-step goldens' to check
  elif not grads:
    missing("grad0", "the golden lacks the step-1 gradients")
  elif set(grads) != set(ours_grads):
    missing("grad0", f"names differ: golden only {sorted(set(grads) - set(ours_grads))[:3]}, xlnet-tf only "
            f"{sorted(set(ours_grads) - set(grads))[:3]}")
  else:
    diffs, noise = grad0_diffs(grads, ours_grads)
    check("grad0", max(diffs.values()), TOLERANCES["grad0"], note=(
        f"{len(noise)} in the rounding noise, judged against the largest gradient: {', '.join(noise)}" if noise
        else ""))

  finals = {k[len("final/"):]: v for k, v in g.items() if k.startswith("final/")}
  ours_final = {n: v for n, v in ours["final"].items() if n not in extra and n.rsplit("/", 1)[0] not in extra}
  only_golden, only_ours = sorted(set(finals) - set(ours_final)), sorted(set(ours_final) - set(finals))
  if only_golden:
    missing("final: golden only", f"xlnet-tf does not hold {len(only_golden)}: {only_golden[:3]}")
  if only_ours:
    missing("final: ours only", f"the golden lacks {len(only_ours)}: {only_ours[:3]}")
  variables = [n for n in finals if n in ours_final and not n.endswith(SLOT_SUFFIXES) and
               n not in OPTIMIZER_SCALARS]
  no_initial = [n for n in variables if n not in initial]
  if no_initial:
    missing("final: no initial", f"the checkpoint lacks {no_initial[:3]}")
  variables = [n for n in variables if n in initial]
  slot_names = meta.get("slots", {})
  noise = noise_variables(finals, slot_names)
  noisy_vars = [n for n in variables if n in noise]
  if noisy_vars:
    bound = ADAM_STEP_BOUND * float(np.sum(np.asarray(g["learning_rate"], np.float64)))
    results = [noise_variable_diff(finals[n], ours_final[n], initial[n], bound) for n in noisy_vars]
    check("final noise variables", max(r[0] for r in results), TOLERANCES["noise_variable"], all(r[1] for r in results),
          f"of the larger update; moved within {ADAM_STEP_BOUND} x the summed learning rate: {', '.join(noisy_vars)}")
  variables = [n for n in variables if n not in noisy_vars]
  if variables:
    results = {n: final_variable_diffs(finals[n], ours_final[n], initial[n],
                                       finals.get(slot_names.get(n, {}).get("v", "")),
                                       [g[p + f"final/{n}"] for p in prefixes if p + f"final/{n}" in g])
               for n in variables}
    worst = max(results, key=lambda n: results[n][0])
    check("final variables", results[worst][0], TOLERANCES["final"], all(r[3] for r in results.values()),
          f"of the update; worst {worst}")
    noisy = [n for n in variables if results[n][2]]
    check("final noise entries", max(r[1] for r in results.values()), TOLERANCES["noise_final"],
          all(r[4] for r in results.values()), f"of the update; {sum(results[n][2] for n in noisy)} entries "
          f"over {TOLERANCES['final']:.0e} (in {len(noisy)} variables)")
  slots = [n for n in finals if n in ours_final and n.endswith(SLOT_SUFFIXES)]
  if slots:
    slot_diff = slot_diffs(finals, slot_names, slots, set(noise))
    drifts = {n: rerun_drift(g, prefixes, f"final/{n}", lambda rerun, n=n: slot_diff(n, rerun)) for n in slots}
    tols = {n: TOLERANCES["slots"] if drifts[n][0] is None else max(TOLERANCES["slots"],
                                                                    DRIFT_FACTOR["slots"] * drifts[n][0])
            for n in slots}
    diffs = {n: slot_diff(n, ours_final[n]) for n in slots}
    worst = max(slots, key=lambda n: diffs[n] / tols[n])
    drift, prefix = drifts[worst]
    check("final slots", diffs[worst], tols[worst], all(diffs[n] <= tols[n] for n in slots),
          f"worst {worst}" + (f" (the original against itself: {drift:.1e}, {prefix[:-1]})" if drift is not None
                              else "") + (f"; {len(noise)} variables' gradients in the rounding noise, their slots "
                                          f"judged against the largest slot: {', '.join(noise)}" if noise else ""))
  for n in ("beta1_power", "beta2_power"):
    if n in finals and n in ours_final:
      check(f"final {n}", _rel(ours_final[n], finals[n]), TOLERANCES["beta_power"])
  if "global_step" in finals and "global_step" in ours_final:
    check("final global_step", float(ours_final["global_step"] != finals["global_step"]), TOLERANCES["global_step"])
  return rows
