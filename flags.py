"""The absl flags of the command-line tools, defined once (start-up: `cli.py`; checks: `flag_configs.py`).

Each `define_*_flags()` defines one group with the original XLNet flag names and defaults; each script's
`define_flags()` picks its groups and `cli.values()` reads back every flag defined here, as the plain namespace the
script's `run` takes. Library code in `xlnet_tf/` never reads flags.

Importing this module has no side effects (it defines nothing until a `define_*_flags()` is called).
"""

from absl import flags


class FlagError(ValueError):
  """A flag value the run cannot use; `cli.cli_main` prints it as one line (the tools raise it as `cli.FlagError`)."""


def define_data_utils_flags(flag_values=flags.FLAGS):
  """The flags of the original `data_utils.py` (names and defaults unchanged), plus --seed and --span_sampling."""
  fv = dict(flag_values=flag_values)
  flags.DEFINE_bool("use_tpu", True, "Whether to use TPUs. If False, num_core_per_host is forced to 1.", **fv)
  flags.DEFINE_integer("bsz_per_host", 32, "Batch size per host: the number of parallel streams (rows).", **fv)
  flags.DEFINE_integer("num_core_per_host", 8, "Number of TPU cores per host (sets the bi_data row layout).", **fv)
  flags.DEFINE_integer("seq_len", 512, "Sequence length.", **fv)
  flags.DEFINE_integer("reuse_len", 256, "Number of tokens that can be reused as memory. Must be seq_len/2.", **fv)
  flags.DEFINE_bool("uncased", True, "Lower-case the text (and add `uncased.` to the file names).", **fv)
  flags.DEFINE_bool("bi_data", True, "Write forward and backward (time-reversed) streams.", **fv)
  flags.DEFINE_integer("mask_alpha", 6, "How many tokens form a group (context size per masked token).", **fv)
  flags.DEFINE_integer("mask_beta", 1, "How many tokens to mask within each group.", **fv)
  flags.DEFINE_bool("use_eod", True, "A blank line (document end) emits an <eod> token.", **fv)
  flags.DEFINE_bool("from_raw_text", True, "Input is raw text (else lines of whitespace-separated ids).", **fv)
  flags.DEFINE_integer("num_predict", 85, "Number of tokens to predict per sequence.", **fv)
  flags.DEFINE_string("input_glob", "data/example/*.txt", "Input file glob: one sentence per line, blank line "
                      "between documents.", **fv)
  flags.DEFINE_string("sp_path", "", "Path to the SentencePiece model.", **fv)
  flags.DEFINE_string("save_dir", "proc_data/example", "Directory for the processed data (corpus_info.json and "
                      "tfrecords/).", **fv)
  flags.DEFINE_enum("split", "train", ["train", "dev", "test"], "Save the data as which split.", **fv)
  flags.DEFINE_integer("pass_id", 0, "ID of the current pass. Different passes sample different negative "
                       "segments and masks.", **fv)
  flags.DEFINE_integer("num_task", 1, "Number of total tasks (parallel workers).", **fv)
  flags.DEFINE_integer("task", 0, "The task ID of this worker: it processes sorted(glob)[task::num_task].", **fv)
  flags.DEFINE_integer("num_passes", None, "Accepted because the original README passes it; ignored, as the "
                       "original ignores it (write each pass with its own --pass_id).", **fv)
  # New flags (not in the original).
  flags.DEFINE_integer("seed", None, "Make the output reproducible: seeds numpy and python's random from "
                       "(seed, task, pass_id). Unset: the original's seeding (numpy by 100*task+pass_id, python's "
                       "random unseeded).", lower_bound=0, upper_bound=2 ** 32 - 1, **fv)
  flags.DEFINE_enum("span_sampling", "original", ["original", "word"], "`original`: masked spans of n tokens, the "
                    "released behaviour (issue #220). `word`: spans of n words, as the paper describes.", **fv)


def define_run_config_flags(dropout, dropatt, flag_values=flags.FLAGS):
  """[R] run-config flags every training script shares (`create_run_config`)."""
  fv = dict(flag_values=flag_values)
  flags.DEFINE_float("dropout", dropout, "Dropout rate.", **fv)
  flags.DEFINE_float("dropatt", dropatt, "Attention dropout rate.", **fv)
  flags.DEFINE_enum("init", "normal", ["normal", "uniform"], "Initialization method.", **fv)
  flags.DEFINE_float("init_std", 0.02, "Initialization std when init is normal.", **fv)
  flags.DEFINE_float("init_range", 0.1, "Initialization range when init is uniform.", **fv)
  flags.DEFINE_integer("clamp_len", -1, "Clamp length (-1: no clamping).", **fv)
  flags.DEFINE_bool("use_bfloat16", False, "Compute in bfloat16 (Keras mixed_bfloat16 policy: float32 variables "
                    "and loss).", **fv)
  flags.DEFINE_bool("float32_positions", False, "With --use_bfloat16: compute the relative positional encoding in "
                    "float32, then cast (new). False: in bfloat16, as the original, which rounds positions past 256 "
                    "and the sinusoids' arguments (an encoding off by up to 2.0 at distance 512; docs/design.md).",
                    **fv)
  flags.DEFINE_bool("use_fp16", False, "Compute in float16 (Keras mixed_float16 policy: float32 variables, Adam "
                    "slots and loss) with dynamic loss scaling, for GPUs without bfloat16 (T4, V100); steps whose "
                    "gradients overflow are skipped (docs/training_step.md#float16---use_fp16). Not with "
                    "--use_bfloat16.", **fv)
  flags.DEFINE_bool("recompute_grad", False, "Recompute each layer's activations in the backward pass instead of "
                    "keeping them: less memory for about one more forward per step, the same gradients (new).", **fv)


def define_optimizer_flags(learning_rate, train_steps, min_lr_ratio, adam_epsilon=1e-8, lr_layer_decay_rate=1.0,
                           flag_values=flags.FLAGS):
  """[O] optimizer flags (`model_utils.get_train_op`)."""
  fv = dict(flag_values=flag_values)
  flags.DEFINE_float("learning_rate", learning_rate, "Maximum learning rate.", **fv)
  flags.DEFINE_float("clip", 1.0, "Gradient clipping value (global norm).", **fv)
  flags.DEFINE_float("min_lr_ratio", min_lr_ratio, "Minimum ratio learning rate.", **fv)
  flags.DEFINE_integer("warmup_steps", 0, "Number of steps for linear lr warmup.", **fv)
  flags.DEFINE_float("adam_epsilon", adam_epsilon, "Adam epsilon.", **fv)
  flags.DEFINE_enum("decay_method", "poly", ["poly", "cos"], "Learning rate decay method.", **fv)
  flags.DEFINE_float("weight_decay", 0.0, "Weight decay rate (> 0: the original AdamWeightDecay).", **fv)
  flags.DEFINE_integer("train_steps", train_steps, "Total number of training steps.", **fv)
  flags.DEFINE_float("lr_layer_decay_rate", lr_layer_decay_rate, "Top layer: lr; layer below: lr * rate; ...",
                     **fv)
  flags.DEFINE_enum("clip_mode", "auto", ["auto", "indexed_slices", "dense", "per_core", "per_replica"],
                    "How the gradient norm is taken and clipped (new; docs/training_step.md). auto: as the original "
                    "on this path: per_core with --strategy=tpu (each core clips its own gradient, as "
                    "CrossShardOptimizer); else in pretraining indexed_slices (the replicas' summed gradient, the "
                    "word-embedding gradient counted as its un-merged rows, as TF 1.13 on GPU), in fine-tuning "
                    "per_replica (each replica clips its own gradient so counted, then they are summed, as the "
                    "Estimator's MirroredStrategy; on one device the same as indexed_slices). dense: the norm of "
                    "the merged, summed gradient.", **fv)
  flags.DEFINE_enum("loss_weighting", "replica_mean", ["replica_mean", "global_mean"],
                    "replica_mean: the loss is the mean of the replicas' (towers', cores') mean losses, as the "
                    "original. global_mean: one mean over the global batch (pretraining targets weighted equally "
                    "whichever replica holds them) (new).", **fv)
  flags.DEFINE_integer("gradient_accumulation_steps", 1, "Split each replica's batch into this many micro-batches, "
                       "run one after the other, and make ONE update from their summed gradients: the same update "
                       "as the whole --train_batch_size (loss normalisation, gradient norm and clip, Adam and "
                       "learning-rate step) in less memory; --train_steps counts updates (new).", **fv)


DEFAULT_STRATEGY = "auto"  # --strategy's default: the one --use_tpu=True may be given with (flag_configs.check_tpu)


def define_hardware_flags(num_core_per_host=None, iterations=1000, max_save=0, flag_values=flags.FLAGS):
  """[T] device, distribution and checkpointing flags, plus the new --strategy, --jit_compile, --use_tf32, --seed
  and --deterministic."""
  fv = dict(flag_values=flag_values)
  flags.DEFINE_bool("use_tpu", False, "Use TPUs (the same as --strategy=tpu).", **fv)
  flags.DEFINE_string("tpu", None, "The Cloud TPU name or grpc://ip:port URL (--strategy=tpu).", **fv)
  flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU (optional).", **fv)
  flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU (optional).", **fv)
  flags.DEFINE_string("master", None, "Kept for compatibility with the original; unused (use TF_CONFIG).", **fv)
  flags.DEFINE_integer("num_hosts", 1, "Number of hosts (workers). run_pretrain.py: the records' per-host batch is "
                       "train_batch_size / num_hosts. The fine-tuning tools do not use it: their workers come from "
                       "TF_CONFIG, their --train_batch_size is per replica.", **fv)
  flags.DEFINE_integer("num_core_per_host", num_core_per_host, "Replicas per host, as the original: above 1, one "
                       "per GPU (the original's MirroredStrategy(num_gpus=...)); a count the machine lacks is an "
                       "error. Unset: one device (or every TPU core with --strategy=tpu).", **fv)
  flags.DEFINE_integer("iterations", iterations, "Steps per host call (and the logging interval); a smaller "
                       "--save_steps shortens both.", **fv)
  flags.DEFINE_integer("save_steps", None, "Save a checkpoint every this many steps (unset: at the end only).",
                       **fv)
  flags.DEFINE_integer("max_save", max_save, "Checkpoints to keep (0: all).", **fv)
  flags.DEFINE_string("model_dir", None, "Where checkpoints, xlnet_config.json, run_flags.json and TensorBoard "
                      "logs go; a run restarted with the same model_dir resumes from its latest checkpoint.", **fv)
  flags.DEFINE_string("init_checkpoint", None, "Initialise the weights from this checkpoint: an original (TF1) "
                      "XLNet checkpoint such as xlnet_cased_L-24_H-1024_A-16/xlnet_model.ckpt, one of ours, or a "
                      "HuggingFace XLNet model directory (converted in memory; docs/checkpoints.md).", **fv)
  flags.DEFINE_enum("strategy", DEFAULT_STRATEGY, ["auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu"],
                    "tf.distribute strategy (new). auto: mirrored when --num_core_per_host > 1, else one device.",
                    **fv)
  flags.DEFINE_bool("jit_compile", False, "XLA-compile the forward and backward pass, and the forward pass of "
                    "evaluation and prediction (new).", **fv)
  flags.DEFINE_string("xla_cache_dir", None, "Keep the programs XLA compiles in this directory, so that a rerun or a "
                      "resume with the same shapes on the same kind of machine loads them instead of compiling again "
                      "(new; it pays most with --jit_compile on a GPU; an entry can take tens of MB). Unset: compile "
                      "in every run.", **fv)
  flags.DEFINE_bool("use_tf32", False, "On NVIDIA GPUs from Ampere on, let float32 matmuls use TensorFloat-32 "
                    "(TensorFlow's default): faster, but products with 10-bit mantissas, so the numbers differ from "
                    "float32 and from the original's. False: strict float32. TPUs keep XLA's default precision "
                    "either way, as the original (new).", **fv)
  flags.DEFINE_bool("skip_bad_records", False, "Train on the readable part of damaged record files instead of "
                    "stopping: each is read up to its first unreadable record, and the log names every damaged file "
                    "and where (new; reads every record once at start).", **fv)
  flags.DEFINE_integer("seed", None, "Seed for initialisation, dropout and the permutation sampling (new).",
                       lower_bound=0, upper_bound=2 ** 32 - 1, **fv)
  flags.DEFINE_bool("deterministic", False, "Deterministic ops (tf.config.experimental.enable_op_determinism), so "
                    "that a resumed run ends bit-identical to an uninterrupted one; needs --seed (new).", **fv)


def define_pretrain_flags(flag_values=flags.FLAGS):
  """The flags of the original `train.py`/`train_gpu.py` not in the shared groups, plus --mems_reset and
  --model_config_path."""
  fv = dict(flag_values=flag_values)
  flags.DEFINE_bool("init_optimizer_state", True, "With --init_checkpoint: also continue its optimizer slots and "
                    "global_step where it holds them, as the original's init_from_checkpoint(global_vars=True); "
                    "False: weights only (fresh moments, warm-up from step 0).", **fv)
  flags.DEFINE_integer("num_passes", 1, "Number of passes used for training (every matching record_info file is "
                       "read, as the original's filter never skips one).", **fv)
  flags.DEFINE_string("record_info_dir", None, "Directory holding the record files and their "
                      "`record_info-{split}-{task}-{pass_id}.*.json` (data_utils.py's <save_dir>/tfrecords; "
                      "comma-separate several).", **fv)
  flags.DEFINE_integer("train_batch_size", 16, "Global batch size over all hosts and replicas (per host: "
                       "train_batch_size / num_hosts, the bsz_per_host of the records).", **fv)
  # Data naming flags: must equal the data_utils.py flags the records were written with.
  flags.DEFINE_integer("seq_len", 0, "Sequence length for pretraining.", **fv)
  flags.DEFINE_integer("reuse_len", 0, "How many tokens to be reused in the next batch. Could be half of seq_len.",
                       **fv)
  flags.DEFINE_bool("uncased", False, "Use uncased inputs or not.", **fv)
  flags.DEFINE_integer("perm_size", None, "Window size of permutation (usually reuse_len).", **fv)
  flags.DEFINE_bool("bi_data", True, "Use bidirectional data streams, i.e., forward & backward.", **fv)
  flags.DEFINE_integer("mask_alpha", 6, "How many tokens to form a group.", **fv)
  flags.DEFINE_integer("mask_beta", 1, "How many tokens to mask within each group.", **fv)
  flags.DEFINE_integer("num_predict", None, "Number of tokens to predict in partial prediction.", **fv)
  flags.DEFINE_integer("n_token", None, "Vocab size. Unset: corpus_info.json's vocab_size (the SentencePiece "
                       "model's), else 32000 (the original hard-codes 32000).", **fv)
  # Memory.
  flags.DEFINE_integer("mem_len", 0, "Number of steps to cache.", **fv)
  flags.DEFINE_bool("same_length", False, "Same length attention (uni attention only).", **fv)
  flags.DEFINE_enum("mems_reset", "auto", ["auto", "never", "every_loop"], "`never`: carry mems for the whole run "
                    "(like train_gpu.py); `every_loop`: zero them every --iterations steps (like TPU train.py); "
                    "auto: as the original on this path, every_loop with --strategy=tpu, else never (new).", **fv)
  # Model.
  flags.DEFINE_string("model_config_path", None, "An xlnet_config.json; overrides the model flags below (new).",
                      **fv)
  flags.DEFINE_integer("n_layer", 6, "Number of layers.", **fv)
  flags.DEFINE_integer("d_model", 32, "Dimension of the model.", **fv)
  flags.DEFINE_integer("d_embed", 32, "Dimension of the embeddings (unused, as in the original).", **fv)
  flags.DEFINE_integer("n_head", 4, "Number of attention heads.", **fv)
  flags.DEFINE_integer("d_head", 8, "Dimension of each attention head.", **fv)
  flags.DEFINE_integer("d_inner", 32, "Dimension of inner hidden size in positionwise feed-forward.", **fv)
  flags.DEFINE_bool("untie_r", False, "Untie r_w_bias and r_r_bias.", **fv)
  flags.DEFINE_string("summary_type", "last", "Unused in pretraining, as in the original.", **fv)
  flags.DEFINE_string("ff_activation", "relu", "Activation type used in position-wise feed-forward.", **fv)
  flags.DEFINE_bool("track_mean", False, "Unused, as in the original.", **fv)


# The flags every fine-tuning script (run_classifier.py, run_squad.py, run_race.py) has: kind, name, default, help.
# A script passes its own default and help where the original script's differ (`define_fine_tuning_flags`).
_FINE_TUNING_FLAGS = (
    ("string", "model_config_path", None, "Model config path (xlnet_config.json)."),
    ("bool", "overwrite_data", False, "If False, will use cached data if available."),
    ("string", "output_dir", "", "Output dir for TF records."),
    ("string", "spiece_model_file", "", "Sentence Piece model path."),
    ("string", "tpu_job_name", None, "TPU worker job name (unused, as in the original)."),
    ("bool", "do_train", False, "Whether to do training."),
    ("integer", "train_batch_size", 8, "Batch size for training, PER REPLICA (per GPU) as in the original's GPU "
     "path; with --strategy=tpu (or --use_tpu) it is the global batch."),
    ("bool", "do_predict", False, "Whether to do prediction."),
    ("integer", "max_seq_length", 128, "Max sequence length."),
    ("integer", "shuffle_buffer", 2048, "Buffer size used for shuffle."),
    ("bool", "uncased", False, "Use uncased."),
    ("string", "predict_dir", None, "Dir for prediction files."),
    ("string", "predict_ckpt", None, "Checkpoint for --do_predict. If None, the last one in model_dir."),
    ("bool", "save_initial_checkpoint", True, "With --save_steps, a new run also saves the checkpoint of the step "
     "it starts from, before its first step (ckpt-0: the initial weights), as the original's Estimator does "
     "(--eval_all_ckpt evaluates it too). False: none (docs/design.md)."),
)


def define_fine_tuning_flags(flag_values=flags.FLAGS, **overrides):
  """Defines `_FINE_TUNING_FLAGS`; `overrides`: name -> (default, help) where a script's original differs."""
  for kind, name, default, help_text in _FINE_TUNING_FLAGS:
    default, help_text = overrides.get(name, (default, help_text))
    getattr(flags, f"DEFINE_{kind}")(name, default, help_text, flag_values=flag_values)


def _define_summary_flags(fv):
  flags.DEFINE_enum("summary_type", "last", ["last", "first", "mean", "attn"], "Method used to summarize a "
                    "sequence into a compact vector.", **fv)
  flags.DEFINE_bool("use_summ_proj", True, "Whether to use projection for summarizing sequences.", **fv)


def define_classifier_flags(flag_values=flags.FLAGS):
  """The flags of the original `run_classifier.py` not in the shared groups (names and defaults unchanged), plus
  the generic csv/tsv task's column flags and --export_dir (new)."""
  fv = dict(flag_values=flag_values)
  define_fine_tuning_flags(
      flag_values,
      overwrite_data=(False, "If False, will use cached data if available. The cached tfrecord names do not include "
                      "the task or num_passes (as the original's), but a cache made from other inputs or settings "
                      "is written again anyway (its fingerprint, {cache}.source, differs): set this to rebuild it "
                      "regardless, e.g. a cache the original wrote (no fingerprint)."),
      train_batch_size=(8, "Batch size for training, PER REPLICA (per GPU) as in the original's GPU path; with "
                        "--strategy=tpu (or --use_tpu) it is the global batch. The global batch is train_batch_size "
                        "x replicas on one_device/mirrored/multi_worker_mirrored."),
      predict_dir=(None, "Dir for saving prediction files ({task}.tsv, {task}.logits.json)."),
      predict_ckpt=(None, "Ckpt path for do_predict (and --export_dir). If None, use the last one in model_dir, "
                    "else --init_checkpoint (new)."))
  _define_summary_flags(fv)
  flags.DEFINE_string("data_dir", "", "Directory for input data.", **fv)
  # Evaluation and prediction.
  flags.DEFINE_bool("do_eval", False, "Whether to do eval.", **fv)
  flags.DEFINE_float("predict_threshold", 0, "Threshold for binary prediction (on logit1 - logit0).", **fv)
  flags.DEFINE_bool("predict_eval_padding", True, "With --do_eval, the prediction files end with rows for the eval "
                    "padding examples (up to a multiple of --eval_batch_size), as the original's, which padded the "
                    "one example list it evaluated and predicted. False: the real examples only (new).", **fv)
  flags.DEFINE_bool("glue_metrics", False, "Eval also reports GLUE's metrics that the original did not for its "
                    "tasks (STS-B: eval_spearmanr). False: the original's metrics and `Eval result` lines (new).", **fv)
  flags.DEFINE_enum("eval_split", "dev", ["dev", "test"], "Could be dev or test.", **fv)
  flags.DEFINE_integer("eval_batch_size", 128, "Batch size for evaluation.", **fv)
  flags.DEFINE_integer("predict_batch_size", 128, "Batch size for prediction.", **fv)
  flags.DEFINE_bool("eval_all_ckpt", False, "Eval all ckpts. If False, only evaluate the last one.", **fv)
  # Task.
  flags.DEFINE_string("task_name", None, "Task name: mnli_matched, mnli_mismatched, sts-b, imdb, yelp5, cola, "
                      "sst-2, mrpc, qqp, qnli, rte, wnli, or csv/tsv (a generic data set: see --text_a_column).",
                      **fv)
  flags.DEFINE_integer("num_passes", 1, "Num passes for processing training data (the shuffled training "
                       "examples are written this many times).", **fv)
  flags.DEFINE_string("cls_scope", None, "Classifier layer scope: the head is classification_{cls_scope}, "
                      "default classification_{task_name}.", **fv)
  flags.DEFINE_bool("is_regression", False, "Whether it's a regression task.", **fv)
  flags.DEFINE_bool("sorted_file_order", False, "imdb: read the review files sorted by name. False: in the order "
                    "the directory lists them (tf.io.gfile.listdir, the original's; it varies between file systems, "
                    "and so do the example and prediction order). See docs/design.md (new).", **fv)
  # The generic csv/tsv task (new): {train,dev,test}.{csv,tsv} in --data_dir.
  flags.DEFINE_string("text_a_column", None, "csv/tsv tasks: column of the first text (index or header name).",
                      **fv)
  flags.DEFINE_string("text_b_column", None, "csv/tsv tasks: column of the second text (unset: single text).",
                      **fv)
  flags.DEFINE_string("label_column", None, "csv/tsv tasks: column of the label (index or header name).", **fv)
  flags.DEFINE_list("labels", None, "csv/tsv tasks: the label list; its order fixes the label ids (unset: the "
                    "sorted labels found in the training file).", **fv)
  flags.DEFINE_bool("has_header", None, "csv/tsv tasks: the files start with a header row (unset: True, and a "
                    "warning where the columns are given by index).", **fv)
  # Serving (new).
  flags.DEFINE_string("export_dir", None, "Export a SavedModel that classifies raw text (tokenization in the "
                      "graph) from --predict_ckpt, else the last checkpoint in model_dir, else --init_checkpoint, "
                      "to this directory (new, empty "
                      "or an earlier SavedModel, which is replaced).", **fv)


def define_squad_flags(flag_values=flags.FLAGS):
  """The flags of the original `run_squad.py` not in the shared groups (names and defaults unchanged), plus the
  corrections of its two oddities and the checkpoint choice for prediction (new)."""
  fv = dict(flag_values=flag_values)
  define_fine_tuning_flags(
      flag_values,
      overwrite_data=(False, "If False, will use cached evaluation data if available. The cache names ignore "
                      "--doc_stride, --uncased and --predict_file (as the original's), but a cache made from other "
                      "inputs or settings is written again anyway (its fingerprint, {cache}.source, differs): set "
                      "this to rebuild it regardless, e.g. a cache the original wrote (no fingerprint)."),
      output_dir=("", "Output dir for TF records (and the cached evaluation features)."),
      do_train=(True, "Whether to do training (True by default, as in the original)."),
      train_batch_size=(48, "Batch size for training, PER REPLICA (per GPU) as in the original's GPU path; with "
                        "--strategy=tpu (or --use_tpu) it is the global batch."),
      do_predict=(False, "Whether to do predict (and evaluate when --predict_file has answers)."),
      max_seq_length=(512, "Max sequence length."),
      uncased=(False, "Use uncased data."),
      predict_dir=("", "Dir for predictions: predictions.json, nbest_predictions.json, null_odds.json."),
      predict_ckpt=(None, "Checkpoint for --do_predict. Unset: model_dir's latest, else --init_checkpoint (which the "
                    "original ignores there, xlnet#56; new)."))
  # Preprocessing.
  flags.DEFINE_bool("do_prepro", False, "Perform preprocessing only: write the training records of examples "
                    "[proc_id::num_proc] of --train_file to --output_dir.", **fv)
  flags.DEFINE_integer("num_proc", 1, "Number of preprocessing processes.", **fv)
  flags.DEFINE_integer("proc_id", 0, "Process id for preprocessing.", **fv)
  flags.DEFINE_string("summary_type", "last", "Unused, as in the original (the QA head summarises nothing).", **fv)
  flags.DEFINE_bool("init_global_vars", False, "Unused, as in the original.", **fv)
  flags.DEFINE_string("train_file", "", "Path of train file (SQuAD v2.0 or v1.1 JSON).", **fv)
  flags.DEFINE_string("predict_file", "", "Path of prediction file (SQuAD JSON; evaluated when it has answers).",
                      **fv)
  # Data preprocessing config.
  flags.DEFINE_integer("max_query_length", 64, "Max query length.", **fv)
  flags.DEFINE_integer("doc_stride", 128, "Doc stride: the shift between windows of a paragraph.", **fv)
  flags.DEFINE_integer("max_answer_length", 64, "Max answer length (in pieces).", **fv)
  # Prediction.
  flags.DEFINE_integer("predict_batch_size", 32, "Batch size for prediction.", **fv)
  flags.DEFINE_integer("n_best_size", 5, "n best size for predictions.", **fv)
  flags.DEFINE_integer("start_n_top", 5, "Beam size for span start.", **fv)
  flags.DEFINE_integer("end_n_top", 5, "Beam size for span end.", **fv)
  flags.DEFINE_string("target_eval_key", "best_f1", "The evaluation key that picks the best checkpoint with "
                      "--predict_all_ckpt (unused in the original).", **fv)
  # New.
  flags.DEFINE_bool("predict_all_ckpt", False, "Predict with every checkpoint of model_dir, each into "
                    "predict_dir/<checkpoint name>/ (new).", **fv)
  flags.DEFINE_bool("allow_last_token", False, "Let the last paragraph token of a window start or end an answer "
                    "(the original cannot: its bound is paragraph_len - 1) (new).", **fv)
  flags.DEFINE_bool("allow_empty_prediction", False, "Write \"\" to predictions.json where null_odds > "
                    "--null_threshold (the original never predicts \"\", xlnet#129) (new).", **fv)
  flags.DEFINE_float("null_threshold", None, "With --allow_empty_prediction: the null-odds threshold. Unset: the "
                     "best_f1_thresh found on --predict_file (it needs answers) (new).", **fv)


def define_race_flags(flag_values=flags.FLAGS):
  """The flags of the original `run_race.py` not in the shared groups (names and defaults unchanged), plus
  --fix_option_aliasing, --sorted_file_order, --eval_all_ckpt and the predict mode (new)."""
  fv = dict(flag_values=flag_values)
  define_fine_tuning_flags(
      flag_values,
      overwrite_data=(False, "If False, will use cached data if available. The cached tfrecord names include neither "
                      "max_qa_length, uncased, fix_option_aliasing nor sorted_file_order (as the original's), but a "
                      "cache made from other inputs or settings is written again anyway (its fingerprint, "
                      "{cache}.source, differs): set this to rebuild it regardless, e.g. a cache the original wrote "
                      "(no fingerprint)."),
      train_batch_size=(8, "Batch size for training, in questions (1 question = 4 sequences: the article with each "
                        "option), PER REPLICA as in the original's GPU path; with --strategy=tpu (or --use_tpu) it is "
                        "the global batch."),
      do_predict=(False, "Write the chosen option and the probabilities of every question of --eval_split to "
                  "--predict_dir (new)."),
      max_seq_length=(512, "Max length of each of the 4 sequences (article + question/option)."),
      predict_dir=(None, "Dir for the prediction file [high.|middle.]{eval_split}.predictions.json (new)."),
      predict_ckpt=(None, "Ckpt path for do_predict. If None, the last one in model_dir, else --init_checkpoint "
                    "(new)."))
  _define_summary_flags(fv)
  flags.DEFINE_string("data_dir", "", "Directory for input data: {train,dev,test}/{middle,high}/ (RACE's layout).",
                      **fv)
  # Evaluation and prediction.
  flags.DEFINE_bool("do_eval", False, "Whether to do eval.", **fv)
  flags.DEFINE_enum("eval_split", "dev", ["dev", "test"], "Could be dev or test.", **fv)
  flags.DEFINE_integer("eval_batch_size", 32, "Batch size for evaluation (and prediction), in questions.", **fv)
  flags.DEFINE_bool("eval_all_ckpt", False, "Eval all ckpts in model_dir. If False, only the last one (the "
                    "original's); with none there, --init_checkpoint (new).", **fv)
  # Data config.
  flags.DEFINE_integer("max_qa_length", 128, "Max length for the concatenated question and answer (its last tokens "
                       "are kept).", **fv)
  flags.DEFINE_bool("high_only", False, "Read only the high-school level (training and evaluation).", **fv)
  flags.DEFINE_bool("middle_only", False, "Read only the middle-school level (training and evaluation).", **fv)
  flags.DEFINE_bool("sorted_file_order", False, "Read the files of a level sorted by name. False: in the order "
                    "the directory lists them (tf.io.gfile.listdir, the original's; it varies between file systems, "
                    "and so do the example and prediction order). See docs/race.md (new).", **fv)
  flags.DEFINE_bool("fix_option_aliasing", False, "False: the original's features, where an option that fits "
                    "grows the article seen by the next options (how the released results were made). True: "
                    "every option sees the article alone. See docs/race.md (new).", **fv)


def define_convert_flags(flag_values=flags.FLAGS):
  """The flags of convert_checkpoint.py (new: the original has no converter)."""
  fv = dict(flag_values=flag_values)
  flags.DEFINE_string("input", None, "What to convert: a HuggingFace XLNet model directory (config.json with "
                      "model.safetensors, sharded safetensors, pytorch_model.bin or tf_model.h5), or an "
                      "original-format checkpoint (prefix, directory, or <dir>/latest; the original's or one of ours).",
                      **fv)
  flags.DEFINE_string("output_dir", None, "Directory for the converted model (created if absent).", **fv)
  flags.DEFINE_enum("to", None, ["tf1", "hf"], "Target format. Unset: the other one (hf for a checkpoint, tf1 for "
                    "an HF directory). tf1 for a checkpoint: its weights alone, without the optimizer's state (the "
                    "original model_utils.py's --clean_input_ckpt).", **fv)
  flags.DEFINE_string("task_name", None, "tf1: the classification head becomes classification_{task_name} "
                      "(regression_ for one label; unset: the HF config's finetuning_task, else `hf`). hf: picks the "
                      "classification_{task_name} (or regression_) head when the checkpoint holds several.", **fv)
  flags.DEFINE_enum("summary_type", None, ["last", "first", "mean", "attn"], "hf: the summary_type written to "
                    "config.json. Unset: the one the checkpoint was fine-tuned with (the run_flags.json "
                    "run_classifier.py / run_race.py wrote beside it), else last (the original's pooling is a flag, "
                    "not in its checkpoints). HF has no attn.", **fv)
  flags.DEFINE_string("model_config_path", None, "A checkpoint's xlnet_config.json (to hf, or to tf1 "
                      "from a checkpoint). Unset: the one beside the checkpoint.", **fv)


def define_train_spm_flags(flag_values=flags.FLAGS):
  """The flags of scripts/train_spm.py: the original README's `spm_train` settings as defaults (new: the original
  runs SentencePiece's own binary)."""
  fv = dict(flag_values=flag_values)
  flags.DEFINE_string("input", None, "Text files: a glob or a comma-separated list of files/globs.", **fv)
  flags.DEFINE_string("model_prefix", None, "Output prefix: writes {model_prefix}.model and {model_prefix}.vocab.",
                      **fv)
  flags.DEFINE_integer("vocab_size", 32000, "Vocabulary size (the README uses 32000).", **fv)
  flags.DEFINE_float("character_coverage", 0.99995, "Fraction of characters covered by the vocabulary.", **fv)
  flags.DEFINE_enum("model_type", "unigram", ["unigram", "bpe", "char", "word"], "SentencePiece model type.", **fv)
  flags.DEFINE_integer("input_sentence_size", 10000000, "Maximum number of sentences sampled for training.", **fv)
  flags.DEFINE_bool("shuffle_input_sentence", True, "Shuffle the sampled sentences.", **fv)
  flags.DEFINE_bool("hard_vocab_limit", True, "False: a small corpus may give fewer pieces than --vocab_size.", **fv)
  flags.DEFINE_integer("num_threads", None, "Trainer threads (default: all CPUs).", **fv)
  flags.DEFINE_bool("overwrite", False, "Replace an existing {model_prefix}.model and .vocab.", **fv)
  from xlnet_tf.data.tokenization import CONTROL_SYMBOLS, USER_DEFINED_SYMBOLS  # pylint: disable=g-import-not-at-top
  flags.DEFINE_string("control_symbols", ",".join(CONTROL_SYMBOLS), "spm_train's flag, accepted with the original "
                      "README's value only: the tools need these symbols at ids 3-7.", **fv)
  flags.DEFINE_string("user_defined_symbols", ",".join(USER_DEFINED_SYMBOLS), "spm_train's flag, accepted with the "
                      "original README's value only (<eop> at id 8, then the pieces it keeps whole).", **fv)
  flags.mark_flags_as_required(["input", "model_prefix"], **fv)
