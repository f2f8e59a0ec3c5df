"""Original (TF1) XLNet checkpoints: load them into our Keras model by name, and write ours in that format.

The one table between the two worlds is `original_variable_map(model)`: because every Keras variable path ends like
the original name, the table is the model's trainable variables keyed by `model/` + their path below the model
(without `model/` for a head the original creates outside that scope, as SQuAD's `start_logits`). Released
checkpoints (`xlnet_model.ckpt`) and checkpoints written by the original `run_classifier.py`/`train.py` load
directly; optimizer slots and `global_step` are ignored.

Every checkpoint concern lives here: the TF1 name table, loading an original checkpoint (`load_original_checkpoint`)
or one written by `training.Trainer` (`load_weights`, by the original names it stores under `weights/`), exporting
to the original format, and listing a directory's checkpoints by step; finding a directory's latest checkpoint, or
the prefix a path names, by its files is `checkpoint_paths`'. A checkpoint whose files are damaged (a `.data-*` file
missing or cut short) is one `DamagedCheckpointError`, not TensorFlow's error.
"""

import contextlib
import os
import re
import textwrap

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import trackable_object_graph_pb2

from xlnet_tf import fileio
from xlnet_tf import hf_checkpoint
from xlnet_tf import hf_weights
from xlnet_tf import stderr_filter
# Finding a directory's checkpoints by their files is checkpoint_paths'; its names are callers' names here too.
from xlnet_tf.checkpoint_paths import (  # pylint: disable=unused-import
    checkpoint_prefixes, data_files, directory_of, is_complete, is_run_checkpoint, latest_checkpoint,
    resolve_checkpoint_path)
from xlnet_tf.config import XLNetConfig, fits



# Checkpoint entries that are bookkeeping, not model weights.
_IGNORED = re.compile(r"(^|/)(global_step|beta1_power|beta2_power)(_\d+)?$|/(Adam|Adam_1|adam_m|adam_v)(_\d+)?$")


# Variables the original creates only in some graphs: pretraining (mask_emb, lm_loss) and fine-tuning heads, those
# under `model/` and those outside it (every name not under `model/`).
_OPTIONAL = re.compile(r"^(?!model/)|^model/(transformer/mask_emb/|lm_loss/|sequnece_summary/|classification_|"
                       r"regression_)")


def original_variable_map(model):
  """{original TF1 name: Keras variable} for every trainable variable of `model` (an XLNetModel).

  A variable's name is `model/` + its path below the model, except in a head layer whose class sets
  `outside_model_scope = True` (the original creates it at the top level, e.g. SQuAD's `start_logits/dense/kernel`):
  there the name is the path below the model alone.
  """
  table = {}
  prefix = model.name + "/"
  top_level = tuple(head.name + "/" for head in getattr(model, "head_list", ())
                    if getattr(head, "outside_model_scope", False))
  for var in model.trainable_variables:
    if not var.path.startswith(prefix):
      raise ValueError(f"Variable {var.path} is not under the model's scope {prefix!r}; cannot name it.")
    below = var.path[len(prefix):]
    name = below if below.startswith(top_level) else "model/" + below
    if name in table:
      raise ValueError(f"Two variables map to the original name {name}.")
    table[name] = var
  return table


class DamagedCheckpointError(ValueError):
  """A checkpoint whose files cannot be read whole (a `.data-*` file missing or cut short, a damaged index); the
  message names it as `name`: "Checkpoint", or the flag that passed it (`named`)."""

  def __init__(self, path, reason, name="Checkpoint", line=None):
    self.path, self.reason, self.name, self.line = path, reason, name, line  # line: the message whole, if not that
    advice = (f"copy it again, or delete its files ({path}.*) to use the one before it" if is_run_checkpoint(path)
              else "download or export it again")  # a training run's own ckpt-N was advised so (sweep 32, U20)
    super().__init__(line or f"{name} {path} is incomplete or damaged ({reason}); {advice}.")

  def named(self, name):
    """The same error, the checkpoint named as `name` (e.g. "--init_checkpoint")."""
    return DamagedCheckpointError(self.path, self.reason, name, self.line)


@contextlib.contextmanager
def reading(path):
  """Turns what TensorFlow raises while reading checkpoint `path` (an OpError for a missing `.data-*` file, an
  IndexError for one cut short, ...) into one `DamagedCheckpointError`."""
  try:
    yield
  except (tf.errors.OpError, IndexError, RuntimeError) as e:
    reason = textwrap.shorten(stderr_filter.error_text(str(getattr(e, "message", "") or e) or type(e).__name__), 300,
                              placeholder=" ...")
    pointers = filter(None, map(fileio.lfs_pointer_line, [f"{path}.index", *data_files(path)]))  # (sweep 32, U16)
    raise DamagedCheckpointError(path, reason, line=next(pointers, None)) from None


class Reader:
  """`tf.train.load_checkpoint(path)`, whose reads end in `DamagedCheckpointError` where the files are damaged. A
  prefix whose `.index` exists is that checkpoint, a directory of its name beside it or not (`load_checkpoint` took
  the directory, found no checkpoint in it, and every tool lost the run's checkpoint: sweep 28, A3)."""

  def __init__(self, path):
    self.path = path
    with reading(path):
      self._reader = (tf.compat.v1.train.NewCheckpointReader(path) if fileio.exists(f"{path}.index") else
                      tf.train.load_checkpoint(path))

  def get_variable_to_shape_map(self):
    return self._reader.get_variable_to_shape_map()

  def has_tensor(self, name):
    return self._reader.has_tensor(name)

  def get_tensor(self, name):
    with reading(self.path):
      return self._reader.get_tensor(name)


def load_original_checkpoint(model, ckpt_path):
  """Loads an original-format XLNet checkpoint into `model` by variable name.

  Every backbone variable (`model/transformer/...` except `mask_emb`) must be in the checkpoint with the
  model's shape, and the checkpoint must not have backbone variables the model lacks (a config that does not
  fit). Pretraining-only variables and heads the checkpoint lacks keep their initial values and are reported,
  as the original `init_from_checkpoint` does. Optimizer slots and `global_step` are ignored.

  Args:
    model: an XLNetModel (built; it builds itself in its constructor).
    ckpt_path: a checkpoint prefix, a directory, or `<dir>/latest`.

  Returns:
    dict with sorted lists: `loaded` (names assigned), `kept_initial` (model variables absent from the
    checkpoint), `unused` (checkpoint variables the model does not have, optimizer slots excluded).
  """
  ckpt_path = resolve_checkpoint_path(fileio.api_path(ckpt_path))
  _check_same_model(model, ckpt_path)
  report = _load_original(model, ckpt_path)
  fresh, held = (sorted({_head_of(n) for n in report[k]} - {None}) for k in ("kept_initial", "unused"))
  if fresh and held:  # as likely a head of another name as a head to fine-tune afresh: an inference of it is random
    logging.warning("%s holds the head(s) %s, not the model's %s, which keep their initial (random) values: the "
                    "model's outputs of them are not the checkpoint's. To use the checkpoint's, build the model's "
                    "heads under its names (finetune_heads(..., cls_heads={...}) names 'classification_{task}').",
                    ckpt_path, ", ".join(held), ", ".join(fresh))
  return report


def _check_same_model(model, ckpt_path, there=None, what=None):
  """ValueError where the XLNetConfig of the checkpoint (`there`, from the file `what`; else the xlnet_config.json
  beside it, if whole) has another ff_activation than `model`'s, which no shape shows: it loaded (sweep 35)."""
  what = what or os.path.join(os.path.dirname(ckpt_path), "xlnet_config.json")
  if there is None and fileio.exists(what):
    with contextlib.suppress(ValueError):  # damaged: the shapes still say whether the weights fit
      there = XLNetConfig(json_path=what)
  if there is not None and there.ff_activation != model.xlnet_config.ff_activation:
    raise ValueError(f"{ckpt_path} is another model than this one ({what}: ff_activation {there.ff_activation} there, "
                     f"{model.xlnet_config.ff_activation} here): its weights would compute another function. Build "
                     "the model with that config.")


def _load_original(model, ckpt_path):
  """`load_original_checkpoint` without its warning (the training tools say what a run starts afresh)."""
  reader = Reader(ckpt_path)
  keys = {name: name for name in reader.get_variable_to_shape_map() if not _IGNORED.search(name)}
  return assign_by_name(model, reader, keys, ckpt_path)


def _head_of(name):
  """The task head `model/{head}/...` a variable name belongs to; None for the backbone, the LM loss and the
  shared summary projection."""
  parts = name.split("/")
  if len(parts) < 3 or parts[0] != "model" or parts[1] in ("transformer", "lm_loss", "sequnece_summary"):
    return None
  return parts[1]


def assign_by_name(model, reader, keys, source):
  """Assigns the model's variables from `reader` by original name, with the rules of `load_original_checkpoint`.

  Args:
    model: an XLNetModel.
    reader: a `Reader` (or any reader with its methods, as `ArrayReader`).
    keys: {original name: checkpoint key} of the weights the checkpoint holds.
    source: the checkpoint's path, for messages.
  Returns the report of `load_original_checkpoint`.
  """
  ckpt_shapes = reader.get_variable_to_shape_map()
  shapes = {name: list(ckpt_shapes[key]) for name, key in keys.items()}
  table = original_variable_map(model)
  missing_backbone = sorted(n for n in table if n not in shapes and not _OPTIONAL.match(n))
  extra_backbone = sorted(n for n in shapes if n not in table and n.startswith("model/transformer/"))
  if missing_backbone or extra_backbone:
    raise ValueError(
        f"The model's config does not fit checkpoint {source}: model variables missing from the checkpoint: "
        f"{missing_backbone[:8]}{' ...' if len(missing_backbone) > 8 else ''}; checkpoint variables the model "
        f"lacks: {extra_backbone[:8]}{' ...' if len(extra_backbone) > 8 else ''}. Use the xlnet_config.json "
        "that came with the checkpoint.")
  names = [n for n, v in table.items() if n in shapes and shapes[n] != list(v.shape)]
  mismatched = [f"{n}: checkpoint {shapes[n]} vs model {list(table[n].shape)}" for n in names]
  if mismatched:
    more = f"; and {len(mismatched) - 3} more" if len(mismatched) > 3 else ""
    heads_only = not any(n.startswith(("model/transformer/", "model/lm_loss/")) for n in names)
    untie = ["untie_r=True" if len(shapes[n]) == 3 else "untie_r=False" for n in names
             if n.endswith(("/r_w_bias", "/r_r_bias", "/r_s_bias")) and len(shapes[n]) != len(table[n].shape)]
    torn = [n for n in names if n.endswith("/bias") and shapes.get(n[:-4] + "kernel", shapes[n])[-1:] != shapes[n]]
    what = (f"its {torn[0]} does not fit its kernel: the checkpoint is damaged; use an undamaged copy" if torn else
            "its task head has another number of classes than this task's; pass the labels it was fine-tuned with, "
            "or start the head afresh under another name (run_classifier.py: --cls_scope)" if heads_only else
            "the config does not fit the checkpoint; use the xlnet_config.json that came with it" +
            (f", whose attention biases are {'per layer' if untie[0].endswith('True') else 'shared'}: {untie[0]} "
             f"(run_pretrain.py: --{untie[0]})" if untie else ""))
    raise ValueError(f"Shape mismatch loading {source} ({what}): " + "; ".join(mismatched[:3]) + more)

  loaded, kept = [], []
  for name, var in table.items():
    if name in keys:
      value = reader.get_tensor(keys[name])
      hf_weights.check_finite({name: value}, source)  # NaN weights predicted NaN everywhere, exit 0
      var.assign(value.astype(var.dtype))
      loaded.append(name)
    else:
      kept.append(name)
  report = {"loaded": sorted(loaded), "kept_initial": sorted(kept),
            "unused": sorted(n for n in keys if n not in table)}
  logging.info("Loaded %d variables from %s.", len(loaded), source)
  for name in report["kept_initial"]:
    logging.info("Not in the checkpoint, keeps its initial value: %s", name)
  for name in report["unused"]:
    logging.info("In the checkpoint, not used by this model: %s", name)
  return report


def export_original_checkpoint(model, ckpt_path, global_step=0, overwrite=False):
  """Writes the model's weights as a TF1 checkpoint with the original names (readable by the original code,
  HuggingFace's TF-checkpoint loader and `load_original_checkpoint`), plus an int64 `global_step`, and the model's
  `xlnet_config.json` beside it, as a released model; see `write_original_checkpoint`. A checkpoint already at
  `ckpt_path`, or another model's xlnet_config.json beside it, is a ValueError unless `overwrite` (it was replaced,
  and a model of another config paired with that config.json loaded without a shape mismatch); overwriting removes a
  `run_flags.json` there (the replaced model's run: the tools would read its pooling and labels as this model's).
  A directory holding a training run (its run_flags.json and checkpoints) is a ValueError, `overwrite` or not: the
  export replaced the files that run's checkpoints are read with (another config evaluated them, exit 0)."""
  ckpt_path = fileio.api_path(ckpt_path)
  if not isinstance(overwrite, bool):  # "no" replaced the checkpoint (sweep 35)
    raise TypeError(f"overwrite must be True or False. Received: {overwrite!r}.")
  if not fits(int, global_step) or global_step < 0:
    raise ValueError(f"global_step must be an integer >= 0. Received: {global_step!r}.")
  if ckpt_path.endswith("/") or fileio.isdir(ckpt_path):  # "d/" wrote d.index, then read as d/.index
    raise ValueError(f"{ckpt_path} is a directory: a checkpoint is a path prefix of files, e.g. "
                     f"{os.path.join(ckpt_path, 'xlnet_model.ckpt')}.")
  directory = os.path.dirname(os.path.abspath(ckpt_path))
  config_path = os.path.join(directory, "xlnet_config.json")
  run = latest_checkpoint(directory) if fileio.exists(os.path.join(directory, "run_flags.json")) else None
  if run and is_run_checkpoint(run):
    raise ValueError(f"{directory} holds a training run (run_flags.json and its checkpoints, e.g. {run}): an export "
                     "there would replace the xlnet_config.json and run_flags.json its checkpoints are read with. "
                     "Pass a path in another directory.")
  config = model.xlnet_config
  if not overwrite and fileio.exists(ckpt_path + ".index"):
    raise ValueError(f"{ckpt_path} already holds a checkpoint, left as it is. Pass another path, or overwrite=True "
                     "to replace it.")
  there = XLNetConfig(json_path=config_path) if not overwrite and fileio.exists(config_path) else config
  if there != config:
    differ = ", ".join(k for k, _, _ in config.differences(there))
    raise ValueError(f"{config_path} is another model's config ({differ} differ), left as it is. Pass a path in "
                     "another directory, or overwrite=True to replace it.")
  with fileio.atomic_files() as out:  # the checkpoint and its config together
    write_original_checkpoint(original_variable_map(model), ckpt_path, global_step, files=out)
    config.to_json(config_path, write=out.write)
  stale = os.path.join(os.path.dirname(config_path), "run_flags.json")  # the replaced model's run: pooling, labels
  if overwrite and fileio.exists(stale):
    fileio.remove(stale)
  return ckpt_path


def write_original_checkpoint(arrays, ckpt_path, global_step=0, files=None):
  """Writes {original name: array or variable} as a TF1 checkpoint, plus an int64 `global_step`.

  The files `{ckpt_path}.index` and `{ckpt_path}.data-00000-of-00001` appear atomically (written under a
  temporary prefix, then renamed; the index last). With `files` (a `fileio.FileSet`), as one file of that set, when
  the whole set does.
  """
  names = sorted(arrays) + ["global_step"]
  tensors = [tf.convert_to_tensor(arrays[n]) for n in names[:-1]] + [tf.constant(global_step, tf.int64)]
  with fileio.atomic_files() if files is None else contextlib.nullcontext(files) as out:
    tf.raw_ops.SaveV2(prefix=out.prefix(ckpt_path, last_suffix=".index"), tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=tensors)
  return ckpt_path


class ArrayReader:
  """{name: numpy array} with the methods of a `tf.train.load_checkpoint` reader that `assign_by_name` uses."""

  def __init__(self, arrays):
    self.arrays = arrays

  def get_variable_to_shape_map(self):
    return {name: list(np.shape(a)) for name, a in self.arrays.items()}

  def get_tensor(self, name):
    return np.asarray(self.arrays[name])

  def has_tensor(self, name):
    return name in self.arrays


def checkpoint_arrays(ckpt_path):
  """{name: numpy array} of every entry of a checkpoint (for tests and tools)."""
  reader = Reader(resolve_checkpoint_path(ckpt_path))
  return {name: np.asarray(reader.get_tensor(name)) for name in reader.get_variable_to_shape_map()}


OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"  # present in object-based (TF2) checkpoints only


def named_weight_keys(reader):
  """{original name: checkpoint key} of the `weights` a Trainer checkpoint holds; {} if it has none.

  Args:
    reader: a `Reader` of an object-based (TF2) checkpoint.
  """
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
  ref = next((c for c in graph.nodes[0].children if c.local_name == "weights"), None)
  if ref is None:
    return {}
  keys = {}
  for child in graph.nodes[ref.node_id].children:
    attributes = graph.nodes[child.node_id].attributes
    if attributes:
      keys[child.local_name] = attributes[0].checkpoint_key
  return keys


def load_weights(model, ckpt_path):
  """Initialises `model` (an XLNetModel) by original variable name from an original TF1 checkpoint (released or
  fine-tuned by the original code), from a checkpoint written by `Trainer` (pretraining or fine-tuning), or from a
  HuggingFace XLNet model directory (`config.json` + safetensors, pytorch_model.bin or tf_model.h5; converted in
  memory by `hf_checkpoint`, its sequence-classification head named after the model's own).

  The rules are those of `checkpoint.load_original_checkpoint`: every backbone variable must be present with the
  model's shape; pretraining-only variables and heads the checkpoint lacks keep their initial values and are
  reported (so a pretraining checkpoint initialises a classifier, whose new head keeps its initialisation).

  Args:
    model: an XLNetModel.
    ckpt_path: a checkpoint prefix, a directory (its latest checkpoint, or an HF model) or `<dir>/latest`.

  Returns:
    dict with sorted lists `loaded`, `kept_initial` and `unused` (see `load_original_checkpoint`), `source`: what
    was read, and for an HF model whose head of another class count was not loaded `other_classes`: (its classes,
    the model's).
  """
  ckpt_path = fileio.api_path(ckpt_path)
  if hf_checkpoint.is_hf_directory(ckpt_path):
    table = original_variable_map(model)
    scopes = sorted({n.split("/")[1] for n in table if re.match(r"^model/(classification|regression)_", n)})
    there, arrays, info = hf_checkpoint.read_hf_checkpoint(ckpt_path,
                                                           cls_scope=scopes[0] if len(scopes) == 1 else None)
    _check_same_model(model, ckpt_path, there, os.path.join(ckpt_path, hf_checkpoint.CONFIG_FILE))
    pooling = getattr(model.heads.get("sequnece_summary"), "summary_type", None)
    if info["architecture"] in hf_checkpoint.POOLING and pooling not in (None, info["summary_type"]):  # sweep 35
      logging.warning("%s pools with summary_type %r (its config.json), this model's head with %r: its head reads "
                      "another summary than it was trained on (to pool as it does: --summary_type=%s).", ckpt_path,
                      info["summary_type"], pooling, info["summary_type"])
    for line in info["notes"]:
      logging.info("%s", line)
    tf_checkpoints = [os.path.basename(p) for p in checkpoint_prefixes(ckpt_path)]
    if tf_checkpoints:  # a model directory holding both: which one was read was said at INFO only
      logging.warning("%s holds a HuggingFace model and TF checkpoints (%s): the HuggingFace weights (%s) are read. "
                      "Pass a checkpoint's prefix (%s) to read it instead.", ckpt_path, ", ".join(tf_checkpoints),
                      info["description"], os.path.join(ckpt_path, tf_checkpoints[-1]))
    other = sorted(n for n, a in arrays.items() if _head_of(n) in scopes and n in table
                   and list(np.shape(a)) != list(table[n].shape))
    classes = (int(np.shape(arrays[other[0]])[-1]), int(table[other[0]].shape[-1])) if other else None
    if other:  # another task's head (of another class count): a fresh one, as a TF1 head of another name
      logging.info("The HF model's head has %s classes, this task's %s: it is not loaded (%s); the task's head "
                   "starts afresh.", *classes, ", ".join(other))
      arrays = {n: a for n, a in arrays.items() if n not in other}
    source = f"{ckpt_path} ({info['description']})"
    report = assign_by_name(model, ArrayReader(arrays), {n: n for n in arrays}, source)
    return dict(report, source=source, other_classes=classes)
  path = resolve_checkpoint_path(ckpt_path)
  _check_same_model(model, path)
  reader = Reader(path)
  if not reader.has_tensor(OBJECT_GRAPH_KEY):
    report = _load_original(model, path)
    logging.info("Initialised %d variables from original checkpoint %s.", len(report["loaded"]), path)
    return dict(report, source=f"{path} (original TF1 checkpoint)")
  keys = named_weight_keys(reader)
  if not keys:
    raise ValueError(f"Checkpoint {path} has no named weights (`weights/...`): it was not written by "
                     "xlnet_tf.training.Trainer (or by an older version of it). Pass an original XLNet checkpoint "
                     "or one written by run_pretrain.py / run_classifier.py.")
  return dict(assign_by_name(model, reader, keys, path), source=f"{path} (xlnet_tf checkpoint)")


load_checkpoint = load_weights  # the name for "any format": original TF1, ours, or a HuggingFace directory


def original_arrays(ckpt_path):
  """{original name: numpy array} of the weights of an original TF1 checkpoint or one written by `Trainer`
  (optimizer slots and `global_step` left out)."""
  path = resolve_checkpoint_path(ckpt_path)
  reader = Reader(path)
  if reader.has_tensor(OBJECT_GRAPH_KEY):
    keys = named_weight_keys(reader)
  else:
    keys = {name: name for name in reader.get_variable_to_shape_map() if not _IGNORED.search(name)}
  return {name: np.asarray(reader.get_tensor(key)) for name, key in keys.items()}


_STEP_SUFFIX = re.compile(r"-(\d+)$")


def checkpoint_step(path):
  """A checkpoint's step: its `-N` suffix, else its `global_step` (original) or optimizer step (ours); or None."""
  match = _STEP_SUFFIX.search(path)
  if match:
    return int(match.group(1))
  return recorded_step(path)


def recorded_step(path, default=None):
  """The step a checkpoint holds, whatever its name: its `global_step` variable (original; what an Estimator's
  evaluate reports as `global_step`) or optimizer step (ours); `default` if it records none (an HF model)."""
  reader = None if hf_checkpoint.is_hf_directory(path) else Reader(path)  # TF's "Couldn't find 'checkpoint' file"
  for key in ("global_step", "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"):
    if reader is not None and reader.has_tensor(key):
      return int(reader.get_tensor(key))
  return default


def list_checkpoints(model_dir):
  """[(step, prefix)] of every checkpoint (`*.index`) in model_dir, sorted by step (None first).

  Unlike the original (which parses `int(name.split("-")[-1])` and crashes on e.g. `model.ckpt`), a checkpoint
  without a step suffix is listed with the step it records, if any. One whose `.data-*` files are not all there (a
  copy cut short) is left out with a warning naming it: evaluating it ended the run, the others unread.
  """
  if not model_dir or not tf.io.gfile.isdir(model_dir):
    raise FileNotFoundError(f"--model_dir {model_dir!r} is not a directory holding checkpoints. Train first "
                            "(--do_train=True) or point --model_dir at the fine-tuning output.")
  entries = []
  for prefix in checkpoint_prefixes(model_dir):
    if not is_complete(prefix):
      logging.warning("Left out checkpoint %s: it has its .index but not every .data-* file it names (a copy cut "
                      "short). Copy it again, or delete its files.", prefix)
      continue
    entries.append((checkpoint_step(prefix), prefix))
  return sorted(entries, key=lambda e: (-1 if e[0] is None else e[0], e[1]))


def choose_checkpoint(model_dir, explicit=None, fallback=None):
  """The one checkpoint to predict or export with: `explicit` (--predict_ckpt) if given (the prefix a directory or
  `<dir>/latest` names, so that the lines name the checkpoint read; an HF directory as it is), else model_dir's
  latest (its `checkpoint` state file), else its highest step, else `fallback` (e.g. --init_checkpoint where the
  original's Estimator would start from it).

  Raises:
    FileNotFoundError: none of these; the message names model_dir.
  """
  if explicit:
    return named_checkpoint(explicit)
  if model_dir and fileio.isdir(model_dir):
    latest = latest_checkpoint(model_dir)
    # list_checkpoints reads every checkpoint's step: only where the state file names none.
    listed = [] if latest else list_checkpoints(model_dir)
    if latest or listed:
      return latest or listed[-1][1]
  if fallback:
    return named_checkpoint(fallback)
  raise FileNotFoundError(no_checkpoint_line(model_dir, f"No checkpoint in --model_dir {model_dir}. Train first "
                                                        "(--do_train=True) or pass --predict_ckpt."))


def no_checkpoint_line(model_dir, line):
  """`line`, what a tool says of a --model_dir without checkpoints, or where --model_dir is a HuggingFace model
  directory, that and how to use it (--do_train says: as --init_checkpoint): an evaluation and a prediction said only
  "no complete checkpoint ... Train first" (sweep 25, C5)."""
  if not (model_dir and hf_checkpoint.is_hf_directory(model_dir)):
    return line
  return (f"--model_dir {model_dir} is a HuggingFace model directory (config.json and weights), not a fine-tuning "
          "run's checkpoints: pass it as --predict_ckpt to predict or export with it; to evaluate it, convert it "
          "first (convert_checkpoint.py --to=tf1) and pass that directory as --model_dir.")


def chosen_again(ckpt, model_dir, explicit=None, fallback=None):
  """`ckpt` (`choose_checkpoint(model_dir, explicit, fallback)`'s) where its files are still there, else that choice
  made again: a training run beside keeps only its last --max_save and deleted model_dir's latest since it was
  chosen (a prediction then failed, naming it as not found)."""
  if explicit or fileio.exists(ckpt + ".index") or hf_checkpoint.is_hf_directory(ckpt):
    return ckpt
  return choose_checkpoint(model_dir, explicit, fallback)


def named_checkpoint(path):
  """The checkpoint a path given for one names, as the lines name what was read: the prefix a directory or
  `<dir>/latest` names (`resolve_checkpoint_path`), an HF directory as it is."""
  return path if hf_checkpoint.is_hf_directory(path) else resolve_checkpoint_path(path)
