"""Converting a checkpoint between the original's format (TF1 names; the original's checkpoints and ours) and a
HuggingFace XLNet model directory, or to the original's format with its weights only, as `convert_checkpoint.py`
does: `hf_checkpoint` maps the names and reads and writes HF's files, `checkpoint` reads and writes the original
format."""

import contextlib
import json
import os

from xlnet_tf import checkpoint
from xlnet_tf import fileio
from xlnet_tf import hf_checkpoint
from xlnet_tf import hf_export
from xlnet_tf import hf_weights
from xlnet_tf import locks
from xlnet_tf.config import XLNetConfig, is_head_name
from xlnet_tf.data import json_text


# The files of a model of either format (and the run_flags.json beside one): an output directory holding one takes no
# converted model (one of the same format would be replaced; one of the other would shadow it or be shadowed, as
# readers of a directory prefer HF's).
TOKENIZER_CONFIG = "tokenizer_config.json"  # transformers' tokenizer settings: the casing (do_lower_case)
_MODEL_FILES = (hf_checkpoint.CONFIG_FILE, *hf_checkpoint.WEIGHT_FILES, "xlnet_config.json", "xlnet_model.ckpt.*",
                "run_flags.json", "tokenizer.json", "special_tokens_map.json")  # another model's tokenizer files,
# which no conversion writes, stayed beside an export (transformers prefers tokenizer.json; sweep 30, U10)


@contextlib.contextmanager
def _output_dir_held(output_dir, input_dir):
  """Holds --output_dir's lock (`.convert.lock` in it, `locks.directory_lock`) while the body converts into it, once
  it is found able to take a converted model: none of `_MODEL_FILES` (names or globs) may exist in it (anything else
  may), and it is not the directory of the --input (which would then hold two models, one of them read in place of
  the other). A ValueError (one line) otherwise, or where another conversion into it is running: two at once both
  said "Wrote", one replacing the other's model, as each had checked the directory before the other wrote (sweep 23,
  B4). The check is made under the lock, so no other conversion writes there between it and the body's files.
  Yields the lock's journal, for `fileio.atomic_files`: a rerun removes what a conversion killed while putting its
  files in place had made (it refused it as a model already there)."""
  if not output_dir:
    raise ValueError("--output_dir is required: the directory the converted model goes to.")
  fileio.check_output_dir(output_dir, "--output_dir")
  if fileio.real_path(output_dir) == fileio.real_path(input_dir):  # links followed (sweep 33, A1)
    link = "" if os.path.abspath(output_dir) == os.path.abspath(input_dir) else f" (through a link, {input_dir})"
    raise ValueError(f"--output_dir {output_dir} is the directory of the --input{link}: the converted model would be "
                     "written beside the one it is made from. Pass a new or empty directory.")
  export_parent, export_name = locks.export_lock(output_dir)  # an export replacing the directory (sweep 31)
  with locks.directory_lock(output_dir, name="convert", what="--output_dir",
                            others=[os.path.join(export_parent, locks.lock_file(export_name))]) as journal:
    # What a conversion killed while writing there left (a checkpoint's `xlnet_model.ckpt.tmp-P-H.index`): it was
    # taken for a model there, and the rerun refused.
    written = (*_MODEL_FILES, "spiece.model")
    locks.remove_stale_temporaries(output_dir, [name.rstrip(".*") + ".tmp-*" for name in written], only_dead=True)
    held = [os.path.basename(p) for name in _MODEL_FILES for p in fileio.glob_in(output_dir, name)]
    if held:
      raise ValueError(f"--output_dir {output_dir} already holds a model ({', '.join(held)}), which the conversion "
                       "would replace or be read in place of; it was left as it is. Pass a new or empty directory.")
    yield journal


def _read(path):
  with fileio.open_file(path, "rb") as f:
    return f.read()


def _check_copy(src_dir, output_dir, name="spiece.model"):
  """ValueError where output_dir holds a file `name` other than the one `_copy` would copy there."""
  src = os.path.join(src_dir, name)
  if fileio.exists(src):
    _check_held(output_dir, name, _read(src), src)


def _check_held(output_dir, name, data, source=None):
  """ValueError where output_dir holds a file `name` other than the bytes `data` (of `source`, where a file) the
  conversion writes there: a file of the user's, never replaced."""
  dst = os.path.join(output_dir, name)
  if fileio.exists(dst) and _read(dst) != data:
    raise ValueError(f"--output_dir {output_dir} already holds another {name}{f' than {source}' if source else ''}, "
                     "which the conversion would replace; it was left as it is. Pass a new or empty directory.")


def tokenizer_lowercases(directory):
  """An HF model directory's casing: `do_lower_case` of its tokenizer_config.json (what transformers'
  `XLNetTokenizer.save_pretrained` writes); None where there is none, or it says none.

  Raises:
    ValueError: the file is damaged (transformers' tokenizer refuses it), or its do_lower_case is no JSON true or
      false (a string "false" lower-cases there): one line naming it (it was taken for no casing: unchecked).
  """
  path = os.path.join(directory, TOKENIZER_CONFIG)
  if not fileio.exists(path):
    return None
  try:
    value = json_text.load(path)
  except (OSError, ValueError) as e:
    value = getattr(e, "strerror", None) or str(e)
  if not isinstance(value, dict) or value.get("do_lower_case", False) not in (True, False, None):
    what = (f"its do_lower_case is {json.dumps(value['do_lower_case'])}, not true or false" if isinstance(value, dict)
            else f"it is damaged ({value if isinstance(value, str) else 'not a JSON object'})")
    raise ValueError(f"{path}: {what}. It says whether the model's text was lower-cased, which is checked against "
                     "--uncased: fix it, or restore it from the model's download.")
  return value.get("do_lower_case")


def _spiece_notes(src_dir, n_token):
  """[a line] where src_dir's spiece.model has more pieces than the model's n_token (it is then not the model's
  tokenizer: ids past its embedding; the tools refuse the pair only when they fine-tune), else []."""
  import sentencepiece  # pylint: disable=import-outside-toplevel
  path = os.path.join(src_dir, "spiece.model")
  if not fileio.exists(path):
    return []
  try:  # an empty one loads as a model of 0 pieces, with SentencePiece's native lines
    pieces = sentencepiece.SentencePieceProcessor(model_proto=_read(path)).GetPieceSize() if fileio.size(path) else 0
  except RuntimeError:  # copied as it is; the tools that read it say what is wrong with it
    pieces = 0
  if not fileio.size(path):
    return [f"Warning: {path} is empty (a copy cut short?): not copied beside the model."]
  if not pieces:
    return [f"Warning: {path}, copied beside the model, is no SentencePiece model SentencePiece can read."]
  return [f"Warning: {path}, copied beside the model, has {pieces} pieces, more than the model's n_token={n_token}: "
          "it is not the model's tokenizer (its ids past the embedding). Replace it with the one the model was "
          "trained with."] if pieces > n_token else []


def _copy(src_dir, output_dir, write=fileio.atomic_write, name="spiece.model"):
  """Copies src_dir's spiece.model (or other file `name`), if any, into output_dir with `write(path, data)`;
  whether there was one."""
  src = os.path.join(src_dir, name)
  if fileio.exists(src) and fileio.size(src):  # an empty one is no file of its kind (a copy cut short)
    write(os.path.join(output_dir, name), _read(src))
    return True
  return False


def _copy_recorded_spiece(flags, output_dir, write):
  """Copies the SentencePiece model a fine-tuning run's run_flags.json (`flags`) names (--spiece_model_file) into
  output_dir as spiece.model where its bytes are still those it recorded (sha256); whether it did. The export lost
  the run's vocabulary otherwise, and with it the tools' check of --spiece_model_file (sweep 26, B8)."""
  path, recorded = flags.get("spiece_model_file"), flags.get("spiece_model_sha256")
  if not (path and recorded and fileio.exists(path) and fileio.sha256(path) == recorded):
    return False
  write(os.path.join(output_dir, "spiece.model"), _read(path))
  return True


def _check_config_beside(src_dir, model_config_path):
  """ValueError where --model_config_path describes another model than the xlnet_config.json beside the checkpoint,
  the record of the run that trained it: a flag won over it without a word (a gelu model exported as relu)."""
  beside = os.path.join(src_dir, "xlnet_config.json")
  if not model_config_path or not fileio.exists(beside):
    return
  diff = [f"{k} {a} there, {b} here"
          for k, a, b in XLNetConfig(json_path=beside).differences(XLNetConfig(json_path=model_config_path))]
  if diff:
    raise ValueError(f"--model_config_path {model_config_path} describes another model than {beside}, the config of "
                     f"the run that trained the checkpoint ({'; '.join(diff)}): the converted model would compute "
                     "otherwise. Leave --model_config_path unset.")


def _input_arrays(path):
  """{original name: array} of the weights of the --input checkpoint `path`; a ValueError naming --input where it
  is damaged, naming the weight where one holds NaN or infinity."""
  try:
    arrays = checkpoint.original_arrays(path)
  except checkpoint.DamagedCheckpointError as e:
    raise e.named("--input") from None
  hf_weights.check_finite(arrays, path)
  return arrays


def _run_flags(ckpt_dir):
  """The run_flags.json of the run that wrote the checkpoints in ckpt_dir, {} where there is none (the original's);
  a damaged one is a ValueError naming it (it was taken as none: an export pooled otherwise)."""
  from xlnet_tf.training import model_dir  # pylint: disable=import-outside-toplevel  (the converter needs no trainer)
  return model_dir.read_run_flags(ckpt_dir, use="whose pooling and labels the conversion carries over. Restore it "
                                  "from a copy of that run, or move it away to convert without them.") or {}


def _check_spiece_beside(ckpt_dir, flags, output_dir):
  """ValueError where the spiece.model beside the checkpoint, or one in output_dir (where the converted model is
  read with it: sweep 25, A1), is another SentencePiece model than the one its run's run_flags.json (`flags`,
  `_run_flags`) records (by sha256): the converted model shipped another vocabulary as its tokenizer."""
  recorded = flags.get("spiece_model_sha256")
  for directory, fix in ((ckpt_dir, "Put that file there, or move this one away to convert without it."),
                         (output_dir, "Move it away, or pass another --output_dir.")):
    path = os.path.join(directory, "spiece.model")
    if recorded and fileio.exists(path) and fileio.sha256(path) != recorded:
      what = ("is empty (0 bytes: a copy cut short?), not the SentencePiece model of the run that trained the "
              "checkpoint used" if not fileio.size(path) else  # "another model" (sweep 22, N8)
              "is another SentencePiece model than the run that trained the checkpoint used")
      raise ValueError(f"{path} {what} (its sha256 differs from {os.path.join(ckpt_dir, 'run_flags.json')}'s, of "
                       f"--spiece_model_file={flags.get('spiece_model_file')}): the converted model would tokenize "
                       f"with other pieces. {fix}")


def _fine_tuned_with(flags):
  """(summary_type, label_list, clamp_len) of the run that wrote a checkpoint, from its run_flags.json (`flags`,
  `_run_flags`), None for what it does not record (the original's checkpoints record none; a run_pretrain.py run no
  pooling or labels)."""
  if "record_info_dir" in flags or "max_query_length" in flags:  # run_pretrain's, run_squad's --summary_type: unused
    return None, None, flags.get("clamp_len")
  return flags.get("summary_type"), flags.get("label_list"), flags.get("clamp_len")


def _check_task_name(task_name):
  """ValueError unless task_name is None or names a head (`classification_{task_name}`): 5 was an AttributeError."""
  if task_name is not None and not (isinstance(task_name, str) and is_head_name(task_name)):
    raise ValueError(f"task_name must name a task (letters, digits, '_', '.', '-'), as --task_name. Received: "
                     f"{task_name!r}.")


def convert_to_hf(ckpt_path, output_dir, task_name=None, summary_type=None, model_config_path=None,
                  allow_d_head_override=False, log_fn=print):
  """An original-format checkpoint (the original's or ours) -> an HF model directory: `model.safetensors`,
  `config.json` and `spiece.model` (when beside the checkpoint). Every file is written atomically, the config last;
  an output_dir that already holds a model (HF's config or weights) is refused. The three files appear together
  (`fileio.atomic_files`), with the mode a new file gets.

  Args:
    summary_type: the pooling config.json states; None: the one the checkpoint was fine-tuned with (the run_flags.json
      beside it; its labels name HF's id2label too, its --clamp_len config.json's clamp_len), else `last`. Another
      one than that run's is a ValueError.
    model_config_path: its xlnet_config.json; None: the one beside the checkpoint.
  """
  from safetensors import numpy as safetensors_numpy  # pylint: disable=import-outside-toplevel
  _check_task_name(task_name)
  path = checkpoint.resolve_checkpoint_path(ckpt_path)
  with _output_dir_held(output_dir, os.path.dirname(path)) as journal:
    _check_copy(os.path.dirname(path), output_dir)
    _check_config_beside(os.path.dirname(path), model_config_path)
    flags = _run_flags(os.path.dirname(path))
    _check_spiece_beside(os.path.dirname(path), flags, output_dir)
    # the run's casing, which the tools compare (sweep 24, N-B1); transformers reads it too
    tokenizer = json.dumps({"do_lower_case": flags["uncased"], "tokenizer_class": "XLNetTokenizer"}, indent=2,
                           sort_keys=True) if isinstance(flags.get("uncased"), bool) else None
    if tokenizer:
      _check_held(output_dir, TOKENIZER_CONFIG, tokenizer.encode())
    xlnet_config = XLNetConfig(json_path=model_config_path or os.path.join(os.path.dirname(path), "xlnet_config.json"))
    trained_summary, label_list, clamp_len = _fine_tuned_with(flags)
    if trained_summary == "attn":  # the advice was to leave --summary_type unset, then refused as `attn` (sweep 26)
      raise ValueError(f"{path} was fine-tuned with --summary_type=attn ({os.path.dirname(path)}/run_flags.json), "
                       "a pooling HF's XLNet does not have (it pools with last, first or mean): its head cannot be "
                       "exported. Use it with this project's tools, or fine-tune with another --summary_type to "
                       "export.")
    if summary_type and trained_summary and summary_type != trained_summary:
      raise ValueError(f"--summary_type {summary_type}, but {path} was fine-tuned with "
                       f"--summary_type={trained_summary} ({os.path.join(os.path.dirname(path), 'run_flags.json')}): "
                       "the HF model would pool otherwise. Leave --summary_type unset.")
    unknown_summary, given_summary = not (summary_type or trained_summary), summary_type
    summary_type = summary_type or trained_summary or "last"
    arrays = _input_arrays(path)
    config, weights, notes = hf_export.original_to_hf(arrays, xlnet_config, path, summary_type, task_name,
                                                       allow_d_head_override, label_list, clamp_len)
    fileio.makedirs(output_dir)
    with fileio.atomic_files(journal, final=True) as out:  # one set: no weights without their config
      # The bytes, written as our other files: safetensors' own save_file writes through a hidden temporary file of
      # its own (left for good by a kill -9), with mode 0600, to local paths only.
      out.write(os.path.join(output_dir, "model.safetensors"),
                safetensors_numpy.save(weights, metadata={"format": "pt"}))
      copied = (_copy(os.path.dirname(path), output_dir, out.write) or
                _copy_recorded_spiece(flags, output_dir, out.write))
      if tokenizer:
        out.write(os.path.join(output_dir, TOKENIZER_CONFIG), tokenizer)
      out.write(os.path.join(output_dir, hf_checkpoint.CONFIG_FILE), json.dumps(config, indent=2, sort_keys=True))
  if given_summary and config["architectures"][0] not in hf_checkpoint.POOLING:  # it was written without a word
    notes.append(f"The model has no pooled head: config.json's summary_type {summary_type!r} is the pooling a head "
                 "that transformers adds to it (XLNetForSequenceClassification.from_pretrained) will use.")
  if unknown_summary and config["architectures"][0] in hf_checkpoint.POOLING:
    notes.append(f"Its pooling is unknown (no --summary_type, and no run_flags.json of the run that fine-tuned it "
                 f"beside {path}): config.json says summary_type 'last', the original's default. Convert again with "
                 "--summary_type if it was fine-tuned with another.")
  if not copied and flags.get("spiece_model_sha256"):
    notes.append(f"Warning: {output_dir} holds no spiece.model: the SentencePiece model the run that trained {path} "
                 f"read ({flags.get('spiece_model_file') or 'that of its records'}, sha256 "
                 f"{flags['spiece_model_sha256'][:12]}...) is not beside it, nor at that path with those bytes. "
                 f"Copy it into {output_dir} as spiece.model: transformers' XLNetTokenizer reads it there, and the "
                 "tools check a run's --spiece_model_file against it.")
  for line in notes + _spiece_notes(os.path.dirname(path), xlnet_config.n_token):
    log_fn(line)
  log_fn(f"Wrote {config['architectures'][0]} ({len(weights)} arrays) from {path} to {output_dir}: "
         f"model.safetensors, config.json{', spiece.model' if copied else ''}"
         f"{', ' + TOKENIZER_CONFIG if tokenizer else ''}.")
  return output_dir


def convert_to_original(directory, output_dir, task_name=None, log_fn=print):
  """An HF model directory -> `xlnet_model.ckpt` (the original's names and layouts), `xlnet_config.json`,
  `spiece.model` (when the directory has one) and, for a classification or multiple-choice model, a
  `run_flags.json` with its pooling and named labels (what a fine-tuning run keeps there: the tools then predict and
  export it as the HF model pools, and refuse another pooling or labels) in output_dir. An output_dir that already
  holds a model (a config or a checkpoint) is refused. The files appear together (`fileio.atomic_files`), the
  checkpoint last, its index after its data."""
  _check_task_name(task_name)
  with _output_dir_held(output_dir, directory) as journal:
    _check_copy(directory, output_dir)
    xlnet_config, arrays, info = hf_checkpoint.read_hf_checkpoint(directory, task_name)
    lowercases = tokenizer_lowercases(directory)
    fine_tuned_with = dict(info["fine_tuned_with"], **({"uncased": lowercases} if isinstance(lowercases, bool) else {}))
    ckpt = os.path.join(output_dir, "xlnet_model.ckpt")
    with fileio.atomic_files(journal, final=True) as out:  # one set: no checkpoint without its config
      copied = _copy(directory, output_dir, out.write)
      xlnet_config.to_json(os.path.join(output_dir, "xlnet_config.json"), write=out.write)
      if fine_tuned_with:
        out.write(os.path.join(output_dir, "run_flags.json"), json.dumps(fine_tuned_with, indent=2))
      checkpoint.write_original_checkpoint(arrays, ckpt, files=out)
  for line in info["notes"] + _spiece_notes(directory, xlnet_config.n_token):
    log_fn(line)
  log_fn(f"Wrote {ckpt} ({len(arrays)} variables, {info['description']}), xlnet_config.json"
         f"{', spiece.model' if copied else ''}{', run_flags.json' if fine_tuned_with else ''} from "
         f"{directory}.")
  return ckpt


def clean_checkpoint(ckpt_path, output_dir, model_config_path=None, log_fn=print):
  """An original-format checkpoint (the original's or ours, e.g. a pretraining run's `ckpt-N` with its optimizer
  state) -> its weights alone as the original's released checkpoint: `xlnet_model.ckpt` (the original names,
  `global_step` 0, no optimizer slot), with `xlnet_config.json` (model_config_path, else the one beside the
  checkpoint, copied as it is once it matches the weights), `spiece.model` (when beside the checkpoint) and a
  fine-tuning run's `run_flags.json` (its pooling and labels, which a later export to HF reads; a pretraining run's
  casing and clamp_len, which the tools compare), as the original
  `model_utils.py --clean_input_ckpt` does (it writes `model.ckpt-0` and no other file). An output_dir that already
  holds a model is refused; the files appear together (`fileio.atomic_files`), the checkpoint last."""
  path = checkpoint.resolve_checkpoint_path(ckpt_path)
  src_dir = os.path.dirname(path)
  with _output_dir_held(output_dir, src_dir) as journal:
    # A fine-tuning run's flags go with its weights: how it pooled, its labels, its casing and SentencePiece model.
    flags = _run_flags(src_dir)
    flag_files = ["run_flags.json"] if _fine_tuned_with(flags)[0] else []  # a pretraining run's: a release's layout
    for name in ["spiece.model", *flag_files]:
      _check_copy(src_dir, output_dir, name)
    _check_config_beside(src_dir, model_config_path)
    _check_spiece_beside(src_dir, flags, output_dir)
    arrays = _input_arrays(path)
    config_path = model_config_path or os.path.join(src_dir, "xlnet_config.json")
    if model_config_path or fileio.exists(config_path):
      hf_export.check_config(arrays, XLNetConfig(json_path=config_path), path)
    else:
      config_path = None
    ckpt = os.path.join(output_dir, "xlnet_model.ckpt")
    fileio.makedirs(output_dir)
    with fileio.atomic_files(journal, final=True) as out:  # one set, as convert_to_original's
      copied = _copy(src_dir, output_dir, out.write)
      casing = {k: flags[k] for k in ("uncased", "clamp_len") if k in flags}  # a pretraining run's (sweep 24, N-B1)
      if flag_files:
        _copy(src_dir, output_dir, out.write, "run_flags.json")
      elif casing:  # what the tools compare with the run that starts from it: the text read, the positions
        out.write(os.path.join(output_dir, "run_flags.json"), json.dumps(casing, indent=2))
      if config_path:
        out.write(os.path.join(output_dir, "xlnet_config.json"), _read(config_path))
      checkpoint.write_original_checkpoint(arrays, ckpt, files=out)
  written = ", ".join(["xlnet_config.json"] * bool(config_path) + ["spiece.model"] * copied +
                      ["run_flags.json"] * bool(flag_files or casing))
  log_fn(f"Wrote {ckpt} ({len(arrays)} variables: the weights of {path}, without its optimizer state)"
         f"{', ' + written if written else ''}.")
  if not config_path:
    log_fn(f"No xlnet_config.json beside {path}: pass --model_config_path to write the model's config beside its "
           "weights.")
  return ckpt
