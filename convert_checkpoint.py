"""Converts XLNet weights between HuggingFace model directories and the original's TF1 checkpoint format.

  # HF hub model (downloaded with `huggingface-cli download xlnet/xlnet-base-cased --local-dir xlnet-base-cased`)
  python convert_checkpoint.py --input=xlnet-base-cased --output_dir=xlnet_cased_L-12_H-768_A-12
  # an original or fine-tuned checkpoint -> a directory transformers' XLNet*.from_pretrained loads
  python convert_checkpoint.py --input=exp/imdb/ckpt-1000 --model_config_path=xlnet_config.json \\
      --output_dir=imdb-hf --task_name=imdb

  # a pretraining checkpoint -> its weights alone, as released (the original's model_utils.py --clean_input_ckpt)
  python convert_checkpoint.py --input=exp/pretrain/ckpt-100000 --to=tf1 --output_dir=my_xlnet

To TF1: `xlnet_model.ckpt` (the original's variable names and layouts, no optimizer state), `xlnet_config.json`,
and `spiece.model` when the input has one. To HF: `model.safetensors` and `config.json` (and `spiece.model`). The
name map and what is not converted: docs/checkpoints.md. Every file is written atomically.
"""

import cli  # first: start_script() runs before anything imports TensorFlow
import flag_configs
if __name__ == "__main__":
  cli.start_script()
import flags
from absl import flags as absl_flags
from xlnet_tf import checkpoint_paths
from xlnet_tf import fileio
from xlnet_tf import convert
from xlnet_tf import hf_checkpoint


def define_flags(flag_values=absl_flags.FLAGS):
  flags.define_convert_flags(flag_values=flag_values)


def run(o, log_fn=print):
  """Converts as the options `o` (this script's flags) say; returns the path written."""
  given = o.input  # `<dir>/latest` (the original's form, as --help says) names the latest checkpoint in <dir>
  if given and given.endswith("/latest") and not fileio.exists(given):
    given = given[:-len("/latest")]
  if not (given and (fileio.exists(given + ".index") or checkpoint_paths.data_files(given))):  # a prefix is no file
    flag_configs.require_file(given, "input", "a HuggingFace XLNet model directory or an XLNet TF1 checkpoint",
                              directory_ok=True)
  if not o.output_dir:
    raise cli.FlagError("--output_dir is required: the directory the converted model goes to.")
  source = "hf" if hf_checkpoint.is_hf_directory(o.input) else "tf1"
  target = o.to or ("tf1" if source == "hf" else "hf")
  if source == target == "hf":
    raise cli.FlagError(f"--input {o.input} is already in the hf format (--to=hf). Pass --to=tf1 or another "
                        "--input.")
  unused = [f"--{name}" for name, used in (("summary_type", target == "hf"), ("task_name", source != target),
                                            ("model_config_path", source == "tf1")) if getattr(o, name) and not used]
  if unused:  # silently unused before: the converted model was not what the flag asked for
    raise cli.FlagError(f"{' and '.join(unused)} {'is' if len(unused) == 1 else 'are'} not read converting {source} "
                        f"to {target}: --summary_type only names the pooling of an HF config.json, --task_name the "
                        "head of a conversion between formats, --model_config_path the config of a TF1 --input. "
                        "Leave it unset.")
  if target == "tf1" and source == "tf1":
    return convert.clean_checkpoint(o.input, o.output_dir, o.model_config_path, log_fn=log_fn)
  if target == "tf1":
    return convert.convert_to_original(o.input, o.output_dir, o.task_name, log_fn=log_fn)
  return convert.convert_to_hf(o.input, o.output_dir, o.task_name, o.summary_type, o.model_config_path,
                                     log_fn=log_fn)


def body(o):
  run(o, log_fn=cli.print_line)


if __name__ == "__main__":
  cli.run_script(define_flags, cli.cli_main("convert_checkpoint.py", body))
