"""The bad-input sweep: every command-line tool, fed bad files, flags and directories, ends with exit code 1, no
traceback, and a last line `{tool}: error: ...` naming the flag, file or value and what to do; nothing
half-written is left behind (no temporary file, no new checkpoint), and nothing the user owns is touched (a file
or directory passed where an output directory goes keeps its bytes). docs/reliability.md has the table.

All cases run as command lines started together by one fixture (three at a time, forked after one TensorFlow
import: tests/helpers/cli_forks.py); each case is one test."""

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers import cli_forks
from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
from xlnet_tf import checkpoint
from xlnet_tf import fileio
from xlnet_tf import convert
from xlnet_tf.data import corpora
from xlnet_tf.data import tokenization
from xlnet_tf.tasks.squad import corpus as squad_corpus
from xlnet_tf.tasks.squad import data as squad_data
from xlnet_tf.tasks.squad import records as squad_records
from xlnet_tf.tasks.race import corpus as race_corpus
from xlnet_tf.tasks.race import records as race_records

PY = sys.executable
SPM = "tests/testdata/data/spm/spiece.model"
CORPUS = "tests/testdata/data/corpus"
OWNED = b"the user's own bytes\n"  # in {w}/owned.bin and {w}/owned_dir/notes.txt: must stay as they are
BIG_ID = 5000  # an id beyond the vocabulary (TINY's n_token and the SentencePiece model's 1000 pieces)
LATE_FIX = ("Rewrite it with the SentencePiece model of the model's vocabulary (data_utils.py for pretraining "
            "records), give the model the vocabulary it was written with, or remove it")
TINY = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=24, n_token=1000, untie_r=True, ff_activation="gelu")
RECORD_FLAGS = ["--bsz_per_host=8", "--seq_len=32", "--reuse_len=16", "--num_predict=6", "--uncased=False"]
CSV_TASK = ["--task_name=csv", "--text_a_column=text", "--label_column=label"]
PRETRAIN = ["--train_batch_size=8", "--seq_len=32", "--reuse_len=16", "--perm_size=8", "--num_predict=6",
            "--mem_len=12", "--n_layer=2", "--d_model=16", "--n_head=2", "--d_head=8", "--d_inner=24", "--untie_r=True",
            "--ff_activation=gelu", "--train_steps=4", "--iterations=2", "--save_steps=2", "--seed=1"]

# (case id, tool, flags with {w} for the workspace, words the last line must contain)
CASES = [
    # data_utils.py
    ("du-no-input", "data_utils.py", ["--input_glob={w}/none/*.txt"], "matches no file"),
    ("du-not-utf8", "data_utils.py", ["--input_glob={w}/latin1/*.txt"], "{w}/latin1/x.txt:2: not UTF-8"),
    ("du-empty-input", "data_utils.py", ["--input_glob={w}/empty/*.txt"], "hold no text: {w}/empty/e.txt"),
    ("du-missing-spm", "data_utils.py", ["--sp_path={w}/missing.model"], "{w}/missing.model does not exist"),
    ("du-reuse-len", "data_utils.py", ["--reuse_len=10"], "--reuse_len must be --seq_len/2"),
    ("du-num-predict", "data_utils.py", ["--num_predict=33"], "--num_predict must be in [1, 32]"),
    ("du-odd-batch-bi-data", "data_utils.py", ["--bsz_per_host=3"], "--bi_data needs --bsz_per_host divisible"),
    ("du-save-dir-is-a-file", "data_utils.py", ["--save_dir={w}/owned.bin"],
     "Cannot use --save_dir {w}/owned.bin as a directory: it is a file, left as it is"),
    ("du-spm-is-a-directory", "data_utils.py", ["--sp_path={w}/empty"],
     "SentencePiece model {w}/empty is a directory. Pass the .model file itself as --sp_path"),
    # run_pretrain.py
    ("pt-no-records-flag", "run_pretrain.py", ["--record_info_dir="], "--record_info_dir is required"),
    ("pt-records-differ", "run_pretrain.py", ["--num_predict=5"], "fnp-6"),
    ("pt-records-of-another-batch-size", "run_pretrain.py", ["--train_batch_size=4"],
     "bsz_per_host: files have 8, you asked 4. Pass the values data_utils.py was run with, e.g. "
     "--train_batch_size=8."),  # run_pretrain.py has no --bsz_per_host
    ("pt-num-hosts-without-the-workers", "run_pretrain.py", ["--train_batch_size=8", "--num_hosts=2"],
     # the records' advice (--train_batch_size=16), then another refusal, neither naming the cause (sweep 26, C6)
     "--num_hosts=2 splits each batch over 2 hosts, one input pipeline and its record files each (the original's "
     "TPU hosts), but this run has 1 worker(s). Drop --num_hosts, or start 2 workers"),
    ("pt-perm-size", "run_pretrain.py", ["--perm_size=6"], "--perm_size must divide"),
    ("pt-odd-batch-bi-data", "run_pretrain.py", ["--train_batch_size=3"], "bi_data needs an even"),
    ("pt-reuse-len", "run_pretrain.py", ["--reuse_len=40"], "--reuse_len must be in"),
    ("pt-batch-zero", "run_pretrain.py", ["--train_batch_size=0"], "--train_batch_size must be a positive integer"),
    ("pt-num-hosts-zero", "run_pretrain.py", ["--num_hosts=0"], "--num_hosts must be a positive integer"),
    ("pt-mem-len-negative", "run_pretrain.py", ["--mem_len=-4"], "`mem_len` must be >= 0"),
    ("pt-save-steps-zero", "run_pretrain.py", ["--save_steps=0"], "--save_steps must be positive"),
    ("pt-save-steps-negative", "run_pretrain.py", ["--save_steps=-2"], "--save_steps must be positive"),
    ("pt-max-save-negative", "run_pretrain.py", ["--max_save=-1"], "--max_save must be >= 0"),
    ("pt-clip-negative", "run_pretrain.py", ["--clip=-1"], "--clip must be > 0"),
    ("pt-lr-layer-decay-negative", "run_pretrain.py", ["--lr_layer_decay_rate=-1"],
     "--lr_layer_decay_rate must be >= 0"),
    ("pt-adam-epsilon-negative", "run_pretrain.py", ["--adam_epsilon=-1"], "--adam_epsilon must be > 0"),
    ("pt-bad-dropout-in-a-run-s-model-dir", "run_pretrain.py", ["--model_dir={w}/pt_ok", "--dropout=1.5"],
     "`dropout` must be in [0, 1)"),
    ("pt-fp16-and-bf16", "run_pretrain.py", ["--use_fp16=True", "--use_bfloat16=True"],
     "--use_fp16 and --use_bfloat16 are both set"),
    ("pt-accumulation-splits-bi-data-pairs", "run_pretrain.py", ["--gradient_accumulation_steps=8"],
     "--gradient_accumulation_steps=8 must split the per-replica batch of 8 rows (--train_batch_size) into equal "
     "micro-batches of paired forward and backward rows (bi_data). Use a --gradient_accumulation_steps that divides 4"),
    ("pt-nan-loss", "run_pretrain.py", ["--learning_rate=1e30", "--clip=1e30", "--train_steps=20"],
     "is not finite at step"),
    ("pt-huge-init-std", "run_pretrain.py", ["--init_std=1e30"],  # the advice was --learning_rate alone (sweep 28)
     "Lower --learning_rate or check the data, or pass a smaller --init_std (received 1e+30)."),
    # ... resumed in a finished run's --model_dir with another --learning_rate: its run_flags.json stays that run's
    ("pt-nan-loss-in-a-run-s-model-dir", "run_pretrain.py",
     ["--model_dir={w}/pt_nan", "--learning_rate=1e30", "--clip=1e30", "--train_steps=20"], "is not finite at step"),
    ("pt-corrupt-record", "run_pretrain.py", ["--record_info_dir={w}/corrupt/tfrecords"],
     "is unreadable at record"),
    ("pt-record-info-lists-a-missing-file", "run_pretrain.py", ["--record_info_dir={w}/missing_file/tfrecords"],
     "does not exist"),
    ("pt-init-config-mismatch", "run_pretrain.py", ["--init_checkpoint={w}/other/xlnet_model.ckpt"],
     "--init_checkpoint {w}/other/xlnet_model.ckpt is another model than this run builds from the model flags "
     "({w}/other/xlnet_config.json: d_head 12 there, 8 here; d_model 24 there, 16 here): its weights would compute "
     "another function. Pass --model_config_path={w}/other/xlnet_config.json."),  # "Shape mismatch loading" before
    ("pt-init-shape-mismatch", "run_pretrain.py", ["--init_checkpoint={w}/other_bare/xlnet_model.ckpt"],
     "Shape mismatch loading {w}/other_bare/xlnet_model.ckpt"),
    ("pt-init-missing", "run_pretrain.py", ["--init_checkpoint={w}/nowhere/xlnet_model.ckpt"],
     "--init_checkpoint: Checkpoint {w}/nowhere/xlnet_model.ckpt not found"),
    ("pt-model-config-is-a-directory", "run_pretrain.py", ["--model_config_path={w}/empty"],
     "--model_config_path={w}/empty is a directory. Pass the xlnet_config.json of the model, or leave it unset"),
    ("pt-init-data-missing", "run_pretrain.py", ["--init_checkpoint={w}/ckpt_half/xlnet_model.ckpt"],
     "--init_checkpoint {w}/ckpt_half/xlnet_model.ckpt is incomplete or damaged "
     "({w}/ckpt_half/xlnet_model.ckpt.data-00000-of-00001; No such file or directory); download or export it again."),
    ("pt-half-written-checkpoint", "run_pretrain.py", ["--model_dir={w}/half"], "Cannot resume from {w}/half/ckpt-2"),
    ("pt-checkpoint-failing-its-checksum", "run_pretrain.py", ["--model_dir={w}/flipped"],
     "Cannot resume from {w}/flipped/ckpt-2: its files are incomplete or damaged (TensorBundle at {w}/flipped/ckpt-2 "),
    ("pt-model-dir-of-another-config", "run_pretrain.py", ["--model_dir={w}/bigger", "--train_steps=6"],
     "holds checkpoints of another model"),
    ("pt-model-dir-holds-a-user-s-config", "run_pretrain.py", ["--model_dir={w}/user_config"],  # replaced (B3)
     "--model_dir {w}/user_config holds the xlnet_config.json of another model (d_head 12 there, 8 here; d_model 24 "
     "there, 16 here) and no checkpoint of a run: the run would replace it with its own. Pass it as "
     "--model_config_path to train that model, or pass another --model_dir."),
    # bounds taken without a word (sweep 19, F9.4): 0 was read as unset and recorded as 0; past int64
    ("pt-n-token-zero", "run_pretrain.py", ["--n_token=0"], "--n_token must be a positive integer. Received: 0."),
    ("pt-train-steps-below-the-latest-step", "run_pretrain.py", ["--model_dir={w}/pt_ok", "--train_steps=1"],
     "--train_steps=1 is below the step of --model_dir's latest checkpoint (2): it is the run's total, not the steps "
     "to add, and nothing would be trained. Pass a --train_steps above 2 to train on, or another --model_dir."),
    ("pt-model-dir-without-its-config", "run_pretrain.py", ["--model_dir={w}/no_config", "--ff_activation=relu",
                                                            "--train_steps=4"],
     "--model_dir {w}/no_config holds a run's checkpoints and run_flags.json but not its xlnet_config.json (deleted?)"),
    ("pt-train-steps-negative", "run_pretrain.py", ["--train_steps=-5"],  # "Nothing to do", exit 0 (sweep 33, B4)
     "--train_steps must be a positive integer. Received: -5."),
    ("pt-num-passes-zero", "run_pretrain.py", ["--num_passes=0"],  # trained every pass (sweep 26, C5)
     "--num_passes must be a positive integer. Received: 0."),
    ("pt-train-steps-past-int64", "run_pretrain.py", ["--train_steps=9223372036854775808"],
     "train_steps must be below 2**63: TensorFlow counts steps in int64 (--train_steps). Received: "
     "9223372036854775808."),
    ("pt-gpus-it-lacks", "run_pretrain.py", ["--num_core_per_host=4"], "--num_core_per_host=4 asks for 4"),
    ("pt-tpu-without-a-name", "run_pretrain.py", ["--use_tpu=True"],
     "--strategy=tpu (or --use_tpu=True) needs the Cloud TPU to connect to, and none was named (by --tpu or the "
     "environment's TPU_NAME). Pass --tpu=NAME"),  # TensorFlow's "Please provide a TPU Name to connect to." before
    ("pt-tpu-named-without-use-tpu", "run_pretrain.py", ["--tpu=my-tpu"],
     "--tpu=my-tpu is for a Cloud TPU, but the run uses none (--use_tpu=False, --strategy=auto). Pass --use_tpu=True "
     "to run on it, or drop --tpu."),  # ignored before: the run trained on this machine
    ("pt-tpu-refused", "run_pretrain.py", ["--strategy=tpu", "--tpu=grpc://127.0.0.1:1"],
     "--tpu=grpc://127.0.0.1:1: cannot connect to the TPU at grpc://127.0.0.1:1 (Connection refused). Check that the "
     "TPU is up"),  # TensorFlow's connection waited for good, deaf to SIGTERM and Ctrl-C
    ("pt-tpu-local-without-a-tpu", "run_pretrain.py", ["--use_tpu=True", "--tpu=local"],
     "--tpu=local: no TPU found on this machine. Run on a TPU VM, or drop --use_tpu"),  # two chained tracebacks before
    ("pt-use-tpu-with-another-strategy", "run_pretrain.py", ["--use_tpu=True", "--strategy=mirrored"],
     "--use_tpu=True means --strategy=tpu, but --strategy=mirrored was passed. Drop --use_tpu"),  # overridden before
    ("pt-unknown-flag", "run_pretrain.py", ["--bsz_per_host=8"],
     "Unknown command line flag 'bsz_per_host'. Pass --helpshort or --helpfull to see the flags."),
    ("pt-not-a-number", "run_pretrain.py", ["--train_steps=abc"], "flag --train_steps=abc: invalid literal for int()"),
    ("pt-model-dir-with-wildcards", "run_pretrain.py", ["--model_dir={w}/m[1]"],
     "--model_dir {w}/m[1] has [ ] * or ? in its name"),
    ("pt-model-dir-is-a-file", "run_pretrain.py", ["--model_dir={w}/owned.bin"],
     "Cannot use --model_dir {w}/owned.bin as a directory: it is a file"),
    ("pt-xla-cache-dir-is-a-file", "run_pretrain.py", ["--xla_cache_dir={w}/owned.bin"],
     "Cannot use --xla_cache_dir {w}/owned.bin as a directory: it is a file, left as it is"),
    ("pt-n-token-below-corpus-info", "run_pretrain.py", ["--n_token=100"],
     "a vocabulary of 1000 ids (vocab_size in its corpus_info.json), more than the model's n_token=100 (--n_token)"),
    ("pt-ids-beyond-n-token", "run_pretrain.py", ["--record_info_dir={w}/no_info/tfrecords", "--n_token=100"],
     "outside the model's vocabulary [0, n_token=100). Pass --n_token"),
    ("pt-target-ids-beyond-n-token", "run_pretrain.py", ["--record_info_dir={w}/target_big_ids/tfrecords"],
     f"holds target token id {BIG_ID} (record 1), outside the model's vocabulary [0, n_token=1000). Pass --n_token"),
    # run_classifier.py
    ("cls-dropatt-negative", "run_classifier.py", ["--dropatt=-0.5"], "`dropatt` must be in [0, 1)"),
    ("cls-model-dir-of-a-pretraining-run", "run_classifier.py", ["--model_dir={w}/pt_ok"],
     "Cannot resume from {w}/pt_ok/ckpt-2: --model_dir {w}/pt_ok holds the checkpoints of another tool (its "
     "run_flags.json has flags this one lacks: "),  # it advised this run's flag values before
    ("cls-model-dir-of-a-pretraining-run-without-its-flags", "run_classifier.py", ["--model_dir={w}/pt_no_flags"],
     "Cannot resume from {w}/pt_no_flags/ckpt-2: it holds the model's backbone but not this run's "
     "model/classification_imdb"),
    ("cls-unknown-task", "run_classifier.py", ["--task_name=nosuchtask"], "Unknown --task_name 'nosuchtask'"),
    ("cls-empty-data-dir", "run_classifier.py", ["--data_dir={w}/empty"], "needs the directory"),
    ("cls-seq-too-short", "run_classifier.py", ["--max_seq_length=2"], "--max_seq_length must be at least 3"),
    ("cls-model-config-is-a-directory", "run_classifier.py", ["--model_config_path={w}/empty"],
     "--model_config_path={w}/empty is a directory. Pass the xlnet_config.json of the model"),  # a traceback before
    ("cls-missing-spm", "run_classifier.py", ["--spiece_model_file={w}/missing.model"], "does not exist"),
    ("cls-spm-name-too-long", "run_classifier.py", ["--spiece_model_file={w}/" + "s" * 215 + ".model"],
     "(244 bytes; at most 223 with the temporary names beside it): it begins with --spiece_model_file's file name"),
    ("cls-spm-garbage", "run_classifier.py", ["--spiece_model_file={w}/garbage.model"],
     "Pass the .model file written by scripts/train_spm.py as --spiece_model_file."),  # not data_utils' --sp_path
    ("cls-stsb-nan-label", "run_classifier.py",
     ["--task_name=sts-b", "--is_regression=True", "--data_dir={w}/stsb_nan"],
     "Regression label 'nan' in {w}/stsb_nan/train.tsv line 3 (task 'sts-b') is not a finite number. Fix the file."),
    ("cls-init-data-cut", "run_classifier.py", ["--init_checkpoint={w}/ckpt_cut/xlnet_model.ckpt"],
     "--init_checkpoint {w}/ckpt_cut/xlnet_model.ckpt is incomplete or damaged (Read less bytes than requested); "
     "download or export it again."),
    # csv/tsv tasks: a dev file's label found before training (it was found after), advice naming --labels
    ("cls-csv-dev-label-not-in-train", "run_classifier.py", ["--do_eval=True", *CSV_TASK, "--data_dir={w}/csv_dev"],
     "Label 'neutral' in {w}/csv_dev/dev.csv line 3 is not one of the labels of task 'csv': ['neg', 'pos']. Fix the "
     "file, or pass every class with --labels=neg,pos,neutral (unset, the labels are those of {w}/csv_dev/train.csv)."),
    ("cls-csv-header-only", "run_classifier.py", [*CSV_TASK, "--labels=neg,pos", "--data_dir={w}/csv_header_only"],
     "Task 'csv' found no training examples in {w}/csv_header_only/train.csv: it holds no row of one (a header "
     "alone?). Put the training examples there."),  # naming no file (sweep 33, C7)
    ("cls-csv-empty-dev", "run_classifier.py", [*CSV_TASK, "--do_eval=True", "--data_dir={w}/csv_empty_dev"],
     "Task 'csv' found no dev examples in {w}/csv_empty_dev/dev.csv: it holds no row of one (a header alone?). Put "
     "the dev examples there."),  # named --data_dir alone (sweep 34, S5)
    ("cls-csv-one-class", "run_classifier.py", [*CSV_TASK, "--data_dir={w}/csv_one_class"],
     "{w}/csv_one_class/train.csv holds one label only ('pos'), and the labels of task 'csv' are collected from it "
     "(--labels is unset): a classifier needs at least 2 classes. Pass every class with --labels"),
    ("cls-threshold-with-regression", "run_classifier.py", ["--do_train=False", "--do_predict=True",
                                                              "--predict_dir={w}/pred", "--is_regression=True",
                                                              "--predict_threshold=0.5"],
     "--predict_threshold=0.5 decides between 2 classes, but --is_regression=True predicts one number per example."),
    ("cls-threshold-with-3-classes", "run_classifier.py", ["--task_name=mnli_matched", "--predict_threshold=0.5"],
     "--predict_threshold=0.5 decides between 2 classes, but the task has 3 (contradiction, entailment, neutral), of "
     "which a prediction takes the highest score. Drop --predict_threshold."),  # ignored without a word (sweep 27)
    ("cls-num-hosts-negative", "run_classifier.py", ["--num_hosts=-2"],
     "--num_hosts must be a positive integer. Received: -2."),
    ("cls-num-hosts-zero-eval-only", "run_classifier.py", ["--do_train=False", "--do_eval=True", "--num_hosts=0"],
     "--num_hosts must be"),  # accepted without --do_train (sweep 23, C11)
    ("cls-warmup", "run_classifier.py", ["--train_steps=4", "--warmup_steps=-1"], "--warmup_steps must be at least 0"),
    ("cls-fp16-and-bf16", "run_classifier.py", ["--use_fp16=True", "--use_bfloat16=True"],
     "--use_fp16 and --use_bfloat16 are both set: pick one precision"),
    ("cls-tpu-refused", "run_classifier.py", ["--use_tpu=True", "--tpu=grpc://127.0.0.1:1"],
     "--tpu=grpc://127.0.0.1:1: cannot connect to the TPU at grpc://127.0.0.1:1 (Connection refused)"),
    ("cls-accumulation-not-dividing", "run_classifier.py", ["--gradient_accumulation_steps=3"],
     "--gradient_accumulation_steps=3 must split the per-replica batch of 2 rows (--train_batch_size) into equal "
     "micro-batches. Use a --gradient_accumulation_steps that divides 2"),
    ("cls-accumulation-not-positive", "run_classifier.py", ["--gradient_accumulation_steps=0"],
     "--gradient_accumulation_steps must be a positive integer. Received: 0."),
    ("cls-model-dir-is-the-released-model-s", "run_classifier.py",
     ["--init_checkpoint={w}/released/xlnet_model.ckpt", "--model_dir={w}/released"],
     "--model_dir {w}/released is the directory of --init_checkpoint {w}/released/xlnet_model.ckpt, which holds the "
     "model's xlnet_config.json: the run would write over it and put its checkpoints beside the model it starts "
     "from"),
    ("cls-eval-of-predict-ckpt", "run_classifier.py",  # it was "not a directory holding checkpoints" (sweep 23, C2)
     ["--do_train=False", "--do_eval=True", "--predict_ckpt={w}/released/xlnet_model.ckpt"],
     "--predict_ckpt {w}/released/xlnet_model.ckpt is read by --do_predict and --export_dir only, which this run does "
     "not do: --do_eval evaluates the checkpoints in --model_dir {w}/cases/cls-eval-of-predict-ckpt/model, as the "
     "original's."),
    ("cls-eval-of-predict-ckpt-beside-checkpoints", "run_classifier.py",  # their numbers, without a word (sweep 32, U5)
     ["--do_train=False", "--do_eval=True", "--model_dir={w}/cls_ok/model",
      "--predict_ckpt={w}/released/xlnet_model.ckpt"],
     "--predict_ckpt {w}/released/xlnet_model.ckpt is read by --do_predict and --export_dir only"),
    ("cls-predict-without-predict-dir", "run_classifier.py", ["--do_predict=True"],  # "{task}.tsv" (sweep 32)
     "--do_predict needs --predict_dir: where imdb.tsv and imdb.logits.json go."),
    ("cls-config-mismatch", "run_classifier.py", ["--init_checkpoint={w}/other/xlnet_model.ckpt"],
     "--init_checkpoint {w}/other/xlnet_model.ckpt is another model than this run builds from --model_config_path"),
    ("cls-corrupt-cached-records", "run_classifier.py", ["--output_dir={w}/cls_corrupt"], "is unreadable at record"),
    ("cls-cached-records-of-another-task", "run_classifier.py",
     ["--task_name=sts-b", "--is_regression=True", "--data_dir={w}/stsb", "--output_dir={w}/cls_other_task"],
     "The records in {w}/cls_other_task/spiece.model.len-32.train.tf_record do not hold the features this run reads "
     "(feature label_ids: Data types don't match. Data type: int64 but expected type: float): they were written for "
     "another task or other settings"),  # imdb's records under the name sts-b reads: not "unreadable"
    ("cls-output-dir-is-a-file", "run_classifier.py", ["--output_dir={w}/owned.bin"],
     "Cannot use --output_dir {w}/owned.bin as a directory: it is a file"),
    ("cls-model-dir-is-a-file", "run_classifier.py", ["--model_dir={w}/owned.bin"],
     "Cannot use --model_dir {w}/owned.bin as a directory: it is a file"),
    ("cls-predict-dir-is-a-file", "run_classifier.py", ["--do_predict=True", "--predict_dir={w}/owned.bin"],
     "Cannot use --predict_dir {w}/owned.bin as a directory: it is a file"),
    ("cls-predict-dir-below-a-file", "run_classifier.py", ["--do_predict=True", "--predict_dir={w}/owned.bin/pred"],
     "Cannot use --predict_dir {w}/owned.bin/pred as a directory: {w}/owned.bin is a file"),
    ("cls-export-dir-is-a-file", "run_classifier.py", ["--export_dir={w}/owned.bin"],
     "Cannot use --export_dir {w}/owned.bin as a directory: it is a file"),
    ("cls-export-dir-holds-other-files", "run_classifier.py", ["--export_dir={w}/owned_dir"],
     "Cannot use --export_dir {w}/owned_dir: it is a directory not written by this tool (no saved_model.pb)"),
    ("cls-spm-beyond-n-token", "run_classifier.py", ["--model_config_path={w}/tiny100.json"],
     "has 1000 pieces, more than the model's n_token=100"),
    ("cls-records-beyond-n-token", "run_classifier.py", ["--output_dir={w}/cls_big_ids"],
     f"holds token id {BIG_ID} (record 1), outside the model's vocabulary [0, n_token=1000)"),
    # ... past the first 256 records that are checked before the run: found as it is read, in training and eval
    ("cls-train-reads-an-id-beyond-n-token", "run_classifier.py",
     ["--output_dir={w}/cls_late_big_id", "--shuffle_buffer=1", "--train_batch_size=32", "--train_steps=12",
      "--iterations=12"],
     f"{{w}}/cls_late_big_id/spiece.model.len-32.train.tf_record holds token id {BIG_ID} (record 300), outside the "
     f"model's vocabulary [0, n_token=1000). {LATE_FIX}, then rerun; nothing was saved, the latest checkpoint is "
     "none (no checkpoint in {w}/cases/cls-train-reads-an-id-beyond-n-token/model)."),
    ("cls-eval-reads-an-id-beyond-n-token", "run_classifier.py",
     ["--do_train=False", "--do_eval=True", "--output_dir={w}/cls_late_big_id", "--model_dir={w}/cls_ok/model"],
     f"{{w}}/cls_late_big_id/spiece.model.len-32.dev.eval.tf_record holds token id {BIG_ID} (record 300), outside "
     f"the model's vocabulary [0, n_token=1000). {LATE_FIX}, then rerun."),
    ("cls-eval-no-checkpoint", "run_classifier.py",
     ["--do_train=False", "--do_eval=True", "--eval_all_ckpt=True", "--model_dir={w}/empty_model"],
     "no complete checkpoint (*.index and its .data-* files) in --model_dir {w}/empty_model"),
    # Out of memory (these cases run with 4 GiB of address space to add: `HEADROOM`); a traceback before.
    ("cls-out-of-memory-in-a-step", "run_classifier.py", ["--max_seq_length=65536"],
     "Out of memory at step 1 ("),  # TensorFlow's allocator's words or XLA's, whichever op fails first
    ("cls-out-of-memory-in-evaluation", "run_classifier.py",
     ["--do_train=False", "--do_eval=True", "--model_dir={w}/cls_ok/model", "--max_seq_length=65536",
      "--eval_batch_size=8"],
     "Out of memory running the model over {w}/cases/cls-out-of-memory-in-evaluation/records/"
     "spiece.model.len-65536.dev.eval.tf_record ("),
    # run_squad.py
    ("squad-not-json", "run_squad.py", ["--train_file={w}/latin1/x.txt"], "{w}/latin1/x.txt is not UTF-8"),
    ("squad-train-file-is-a-directory", "run_squad.py", ["--train_file={w}/empty"],
     "--train_file={w}/empty is a directory. Pass the SQuAD training JSON."),  # "[Errno 21] Is a directory" before
    ("squad-train-file-without-questions", "run_squad.py", ["--train_file={w}/squad_no_questions.json"],
     "hold no record (a --train_file without questions was preprocessed), so training would have no batch"),  # a hang before
    ("squad-doc-stride", "run_squad.py", ["--doc_stride=45"], "--doc_stride=45 is not below the paragraph window"),
    ("squad-output-dir-is-a-file", "run_squad.py", ["--output_dir={w}/owned.bin"],
     "Cannot use --output_dir {w}/owned.bin as a directory: it is a file"),
    ("squad-model-dir-is-a-file", "run_squad.py", ["--model_dir={w}/owned.bin"],
     "Cannot use --model_dir {w}/owned.bin as a directory: it is a file"),
    ("squad-predict-dir-is-a-file", "run_squad.py",
     ["--do_predict=True", "--predict_file={w}/squad/dev-v2.0.json", "--predict_dir={w}/owned.bin"],
     "Cannot use --predict_dir {w}/owned.bin as a directory: it is a file"),
    ("squad-predict-answer-without-text", "run_squad.py",
     ["--do_predict=True", "--predict_file={w}/squad_no_text.json", "--predict_dir={w}/squad_pred"],
     "question 'q-no-text': every answer needs a 'text' string"),
    ("squad-predict-duplicate-id", "run_squad.py",
     ["--do_predict=True", "--predict_file={w}/squad_dup_id.json", "--predict_dir={w}/squad_pred"],
     "SQuAD file {w}/squad_dup_id.json: data[0].paragraphs[0].qas[1]: question id 'q-twice' is also the id of "
     "data[0].paragraphs[0].qas[0]: predictions are keyed by id"),
    ("squad-spm-beyond-n-token", "run_squad.py", ["--model_config_path={w}/tiny100.json"],
     "has 1000 pieces, more than the model's n_token=100"),
    ("squad-records-beyond-n-token", "run_squad.py", ["--output_dir={w}/squad_big_ids"],
     f"holds token id {BIG_ID} (record 1), outside the model's vocabulary [0, n_token=1000)"),
    ("squad-predict-no-checkpoint", "run_squad.py",
     ["--do_train=False", "--do_predict=True", "--predict_all_ckpt=True", "--model_dir={w}/empty_model",
      "--predict_file={w}/squad/dev-v2.0.json", "--predict_dir={w}/squad_pred"],
     "no complete checkpoint (*.index and its .data-* files) in --model_dir {w}/empty_model"),
    # run_race.py
    ("race-missing-split", "run_race.py", ["--data_dir={w}/empty"], "{w}/empty"),
    ("race-qa-length", "run_race.py", ["--max_qa_length=61"], "--max_qa_length"),
    ("race-train-then-predict-a-missing-checkpoint", "run_race.py",  # after the whole training (sweep 32, U11)
     ["--do_predict=True", "--predict_dir={w}/race_pred_u11", "--predict_ckpt={w}/released/ckpt-99"],
     "--predict_ckpt: Checkpoint {w}/released/ckpt-99 not found ({w}/released/ckpt-99.index does not exist)."),
    ("race-eval-of-predict-ckpt", "run_race.py", ["--do_eval=True", "--predict_ckpt={w}/released/xlnet_model.ckpt"],
     "--predict_ckpt {w}/released/xlnet_model.ckpt is read by --do_predict only, which this run does not do"),
    ("race-huge-eval-batch", "run_race.py", ["--do_eval=True", "--eval_batch_size=100000000"],
     "--eval_batch_size=100000000 is more than 65536 examples a batch"),
    ("race-bad-dev-file-with-do-eval", "run_race.py", ["--data_dir={w}/race_bad_dev", "--do_eval=True"],
     "{w}/race_bad_dev/dev/high/bad.txt is not a RACE article file: not valid JSON"),
    ("race-output-dir-is-a-file", "run_race.py", ["--output_dir={w}/owned.bin"],
     "Cannot use --output_dir {w}/owned.bin as a directory: it is a file"),
    ("race-model-dir-is-a-file", "run_race.py", ["--model_dir={w}/owned.bin"],
     "Cannot use --model_dir {w}/owned.bin as a directory: it is a file"),
    ("race-predict-dir-is-a-file", "run_race.py", ["--do_predict=True", "--predict_dir={w}/owned.bin"],
     "Cannot use --predict_dir {w}/owned.bin as a directory: it is a file"),
    ("race-spm-beyond-n-token", "run_race.py", ["--model_config_path={w}/tiny100.json"],
     "has 1000 pieces, more than the model's n_token=100"),
    ("race-records-beyond-n-token", "run_race.py", ["--output_dir={w}/race_big_ids"],
     f"holds token id {BIG_ID} (record 1), outside the model's vocabulary [0, n_token=1000)"),
    ("race-eval-no-checkpoint", "run_race.py",
     ["--do_train=False", "--do_eval=True", "--eval_all_ckpt=True", "--model_dir={w}/empty_model"],
     "no complete checkpoint (*.index and its .data-* files) in --model_dir {w}/empty_model"),
    ("cls-hf-config-mismatch", "run_classifier.py", ["--init_checkpoint={w}/hf_bad_config", "--model_config_path="],
     "config.json does not match the weights"),
    ("cls-hf-of-another-config", "run_classifier.py",
     ["--init_checkpoint={w}/hf_ok", "--model_config_path={w}/tiny_wide.json"],
     "--init_checkpoint {w}/hf_ok is a HuggingFace model other than --model_config_path {w}/tiny_wide.json describes "
     "({w}/hf_ok/config.json vs {w}/tiny_wide.json: d_head 8 vs 12; d_model 16 vs 24). Drop --model_config_path"),
    # convert_checkpoint.py
    ("cv-cut-safetensors", "convert_checkpoint.py", ["--input={w}/hf_cut"], "is not a readable safetensors file"),
    ("cv-cut-h5", "convert_checkpoint.py", ["--input={w}/hf_cut_h5"], "is not a readable tf_model.h5"),
    ("cv-data-missing", "convert_checkpoint.py", ["--input={w}/ckpt_half/xlnet_model.ckpt"],
     "--input {w}/ckpt_half/xlnet_model.ckpt is incomplete or damaged ("),
    ("cv-hf-without-config", "convert_checkpoint.py", ["--input={w}/hf_no_config"],
     "{w}/hf_no_config holds HuggingFace weights (model.safetensors) but no config.json. Put the model's config.json"),
    ("cv-config-mismatch", "convert_checkpoint.py", ["--input={w}/hf_bad_config"],
     "config.json does not match the weights"),
    ("cv-unknown-head", "convert_checkpoint.py", ["--input=tests/testdata/hf/qa_simple_safetensors"],
     "unknown head XLNetForQuestionAnsweringSimple"),
    ("cv-d-head-hf-cannot-express", "convert_checkpoint.py",
     ["--input=tests/testdata/model/ckpt_untied", "--task_name=toy"], "d_head=6 is not d_model / n_head"),
    ("cv-output-dir-holds-a-tf1-model", "convert_checkpoint.py", ["--output_dir={w}/tiny_ckpt"],
     "--output_dir {w}/tiny_ckpt already holds a model (xlnet_config.json, xlnet_model.ckpt.data-00000-of-00001, "
     "xlnet_model.ckpt.index), which the conversion would replace"),
    ("cv-output-dir-holds-an-hf-model", "convert_checkpoint.py",
     ["--input={w}/tiny_ckpt/xlnet_model.ckpt", "--output_dir={w}/hf_ok"],
     "--output_dir {w}/hf_ok already holds a model (config.json, model.safetensors)"),
    ("cv-input-is-a-json-file", "convert_checkpoint.py", ["--input={w}/tiny.json"],
     "{w}/tiny.json is a file, not a checkpoint. Pass a checkpoint's prefix"),
    ("cv-output-dir-is-a-file", "convert_checkpoint.py", ["--output_dir={w}/tiny.json"],
     "Cannot use --output_dir {w}/tiny.json as a directory: it is a file"),
    ("cv-output-dir-is-the-input", "convert_checkpoint.py", ["--output_dir={w}/hf_ok/"],
     "--output_dir {w}/hf_ok/ is the directory of the --input: the converted model would be written beside the one "
     "it is made from. Pass a new or empty directory."),
    ("cv-output-dir-links-to-the-input", "convert_checkpoint.py", ["--output_dir={w}/hf_ok_link"],  # (sweep 33, A1)
     "--output_dir {w}/hf_ok_link is the directory of the --input (through a link, {w}/hf_ok): the converted model"),
]

# Bytes of address space a case may add to what it has when it starts: a device of that size (cli_forks).
HEADROOM = {"cls-out-of-memory-in-a-step": 4 << 30, "cls-out-of-memory-in-evaluation": 4 << 30}


def base_flags(tool, w, case_dir):
  if tool == "convert_checkpoint.py":
    return [f"--input={w}/hf_ok", f"--output_dir={case_dir}/out"]
  if tool == "data_utils.py":
    return [f"--input_glob={CORPUS}/*.txt", f"--sp_path={SPM}", f"--save_dir={case_dir}/out", "--use_tpu=False",
            "--bi_data=True", *RECORD_FLAGS]
  if tool == "run_pretrain.py":
    return [f"--record_info_dir={w}/records/tfrecords", f"--model_dir={case_dir}/model", *PRETRAIN]
  if tool == "run_classifier.py":
    return ["--do_train=True", "--task_name=imdb", f"--data_dir={w}/imdb", f"--spiece_model_file={SPM}",
            f"--model_config_path={w}/tiny.json", "--max_seq_length=32", f"--output_dir={case_dir}/records",
            f"--model_dir={case_dir}/model", "--train_batch_size=2", "--train_steps=2", "--iterations=1"]
  if tool == "run_squad.py":
    return ["--do_train=True", f"--train_file={w}/squad/train-v2.0.json", f"--spiece_model_file={SPM}",
            f"--model_config_path={w}/tiny.json", "--max_seq_length=64", "--max_query_length=16",
            "--doc_stride=32", f"--output_dir={case_dir}/records", f"--model_dir={case_dir}/model",
            "--train_batch_size=2", "--train_steps=2", "--iterations=1"]
  return ["--do_train=True", f"--data_dir={w}/race", f"--spiece_model_file={SPM}",
          f"--model_config_path={w}/tiny.json", "--max_seq_length=64", "--max_qa_length=32",
          f"--output_dir={case_dir}/records", f"--model_dir={case_dir}/model", "--train_batch_size=2",
          "--train_steps=2", "--iterations=1"]


def _put_an_id_beyond_the_vocabulary(record_dir, pattern, key="input_ids"):
  """Rewrites the record files matching `pattern` in record_dir with BIG_ID as an id of record 1's feature `key` (as
  records written with a bigger SentencePiece model would hold), without their fingerprint files (as the original
  writes them: reused by their names, whatever their size)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  paths = sorted(record_dir.glob(pattern))
  assert paths, f"no {pattern} in {record_dir}"
  for path in paths:
    examples = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]
    examples[1].features.feature[key].int64_list.value[-5] = BIG_ID
    with tf.io.TFRecordWriter(str(path)) as writer:
      for example in examples:
        writer.write(example.SerializeToString())
    path.with_name(path.name + ".source").unlink(missing_ok=True)


def _put_an_id_beyond_the_vocabulary_in_record_300(src, dst):
  """Writes `dst`: the records of `src` repeated to 320, with BIG_ID as an id of record 300 (past the first 256
  records, which the tools check before a run)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  examples = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(src))]
  examples = [examples[i % len(examples)] for i in range(320)]
  examples[300] = tf.train.Example.FromString(examples[300].SerializeToString())
  examples[300].features.feature["input_ids"].int64_list.value[-5] = BIG_ID
  with tf.io.TFRecordWriter(str(dst)) as writer:
    for example in examples:
      writer.write(example.SerializeToString())


def _export(config, path):
  run_config = RunConfig(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.0, dropatt=0.0)
  checkpoint.export_original_checkpoint(XLNetModel(XLNetConfig(**config), run_config), path)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
  """Builds the bad inputs in a workspace: (the workspace, a directory for the cases' logs)."""
  w = tmp_path_factory.mktemp("bad")
  logs = tmp_path_factory.mktemp("bad_logs")
  for name in ("none", "latin1", "empty"):
    (w / name).mkdir()
  (w / "latin1" / "x.txt").write_bytes("ok\nna\xefve\n".encode("latin-1"))
  (w / "empty" / "e.txt").write_text("")
  (w / "tiny.json").write_text(json.dumps(TINY))
  (w / "tiny100.json").write_text(json.dumps(dict(TINY, n_token=100)))
  (w / "tiny_wide.json").write_text(json.dumps(dict(TINY, d_model=24, d_head=12)))
  (w / "user_config").mkdir()  # a user's config where the run writes its own (sweep 33, B3)
  shutil.copy(w / "tiny_wide.json", w / "user_config" / "xlnet_config.json")
  (w / "owned.bin").write_bytes(OWNED)
  shutil.copy(SPM, w / ("s" * 215 + ".model"))
  (w / "owned_dir").mkdir()
  (w / "owned_dir" / "notes.txt").write_bytes(OWNED)
  (w / "empty_model").mkdir()
  (w / "other").mkdir()
  _export(dict(TINY, d_model=24, d_head=12), str(w / "other" / "xlnet_model.ckpt"))
  shutil.copytree(w / "other", w / "other_bare")  # no config beside it to compare: its shapes say it
  (w / "other_bare" / "xlnet_config.json").unlink()
  # HuggingFace directories: a good one (converted from TINY), one whose safetensors file or tf_model.h5 is cut
  # short, one whose config.json does not fit its weights.
  _export(TINY, str(w / "tiny_ckpt" / "xlnet_model.ckpt"))
  XLNetConfig(**TINY).to_json(str(w / "tiny_ckpt" / "xlnet_config.json"))
  convert.convert_to_hf(str(w / "tiny_ckpt" / "xlnet_model.ckpt"), str(w / "hf_ok"), log_fn=lambda line: None)
  (w / "hf_ok_link").symlink_to(w / "hf_ok")
  for name, src in (("hf_cut", w / "hf_ok"), ("hf_bad_config", w / "hf_ok"), ("hf_cut_h5", "tests/testdata/hf/lm_h5")):
    shutil.copytree(src, w / name)
  for path, size in ((w / "hf_cut" / "model.safetensors", 3000), (w / "hf_cut_h5" / "tf_model.h5", 20000)):
    path.write_bytes(path.read_bytes()[:size])
  hf_config = json.loads((w / "hf_ok" / "config.json").read_text())
  (w / "hf_bad_config" / "config.json").write_text(json.dumps(dict(hf_config, d_inner=TINY["d_inner"] + 1)))
  # Damaged downloads: a TF1 checkpoint without its data file, one whose data file is cut short, HF weights without
  # their config.json; a file that is no SentencePiece model.
  for name in ("ckpt_half", "ckpt_cut", "released"):
    shutil.copytree(w / "tiny_ckpt", w / name)
  (w / "ckpt_half" / "xlnet_model.ckpt.data-00000-of-00001").unlink()
  data = w / "ckpt_cut" / "xlnet_model.ckpt.data-00000-of-00001"
  data.write_bytes(data.read_bytes()[:data.stat().st_size // 2])
  (w / "hf_no_config").mkdir()
  shutil.copy(w / "hf_ok" / "model.safetensors", w / "hf_no_config")
  (w / "garbage.model").write_bytes(b"not a SentencePiece model\n" * 100)
  corpora.write_aclimdb(str(w / "imdb"), num_train=8, num_dev=4, seed=1)
  squad_corpus.write_squad_corpus(str(w / "squad"), num_train=4, num_dev=2, seed=0)
  # Files to predict that the evaluation cannot use: answers without text, two questions with one id.
  dev = json.loads((w / "squad" / "dev-v2.0.json").read_text())
  for name, break_it in (("squad_no_text", "text"), ("squad_dup_id", "id")):
    doc = copy.deepcopy(dev)
    questions = [qa for article in doc["data"] for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    if break_it == "id":
      questions[0]["id"] = questions[1]["id"] = "q-twice"
    else:
      next(qa for qa in questions if qa["answers"])["id"] = "q-no-text"
      for answer in (answer for qa in questions for answer in qa["answers"]):
        del answer["text"]
    (w / f"{name}.json").write_text(json.dumps(doc))
  (w / "squad_no_questions.json").write_text(json.dumps({"version": "v2.0", "data": []}))
  # STS-B with a regression label float() reads as nan (line 3), and a good one.
  for name, labels in (("stsb_nan", ["1.0", "nan", "3.5", "2.0"]), ("stsb", ["1.0", "4.2", "3.5", "2.0"])):
    (w / name).mkdir()
    (w / name / "train.tsv").write_text("".join(
        ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"] +
        [f"{i}\tmain\tx\t2012\t{i}\tnone\tnone\tA man plays guitar {i}.\tA person plays music.\t{label}\n"
         for i, label in enumerate(labels)]))
  # csv tasks: a dev file with a label the training file lacks; a training file of one label.
  for name, train_labels, dev_labels in (("csv_dev", ["pos", "neg"], ["pos", "neutral"]),
                                         ("csv_one_class", ["pos", "pos"], ["pos", "pos"]),
                                         ("csv_header_only", [], []), ("csv_empty_dev", ["pos", "neg"], [])):
    (w / name).mkdir()
    for split, labels in (("train", train_labels), ("dev", dev_labels)):
      (w / name / f"{split}.csv").write_text("".join(["text,label\n"] + [f"a film {i},{label}\n"
                                                                           for i, label in enumerate(labels)]))
  race_corpus.write_race_corpus(str(w / "race"), num_train=2, num_dev=2, num_test=2, max_article_words=40,
                                middle_max_words=30)
  # Good records, then a copy with one file truncated mid-record and a copy whose record_info names a lost file.
  (code, err), = cli_forks.run([["data_utils.py", f"--input_glob={CORPUS}/*.txt", f"--sp_path={SPM}",
                                 f"--save_dir={w}/records", "--use_tpu=False", "--bi_data=True", *RECORD_FLAGS]],
                               logs)
  assert code == 0, err[-2000:]
  # bi_data with --use_tpu=False: one core's layout, as the original, whatever --num_core_per_host (8 by default).
  assert "--use_tpu=False lays the bi_data records out for one core, as the original (its --num_core_per_host=8 is " \
         "not used)" in err, err[-2000:]
  for name in ("corrupt", "missing_file"):
    shutil.copytree(w / "records", w / name)
  record = sorted((w / "corrupt" / "tfrecords").glob("*.tfrecords"))[0]
  record.write_bytes(record.read_bytes()[:100])  # the first record is cut short
  sorted((w / "missing_file" / "tfrecords").glob("*.tfrecords"))[0].unlink()
  shutil.copytree(w / "records", w / "no_info")  # records without corpus_info.json: n_token is not checked there
  shutil.copytree(w / "records", w / "target_big_ids")  # records of another writer: its targets are no inputs
  _put_an_id_beyond_the_vocabulary(w / "target_big_ids" / "tfrecords", "*.tfrecords", key="target")
  (w / "no_info" / "corpus_info.json").unlink()
  # Model directories: one whose latest checkpoint lost its data file, one trained with a bigger model; cached
  # classifier records whose training file is cut short.
  setup = [["run_pretrain.py", f"--record_info_dir={w}/records/tfrecords", f"--model_dir={w}/{name}", *PRETRAIN,
            "--train_steps=2", *extra] for name, extra in (("bigger", ["--d_inner=32"]), ("pt_ok", []))]
  setup.append(["run_classifier.py", *base_flags("run_classifier.py", w, w / "cls_ok"), "--train_steps=1"])
  for code, err in cli_forks.run(setup, logs):  # three: one round of cli_forks' three at a time
    assert code == 0, err[-2000:]
  (w / "pt_ok_run_flags.json").write_bytes((w / "pt_ok" / "run_flags.json").read_bytes())
  for name in ("pt_nan", "half", "flipped", "no_config", "pt_no_flags"):  # for cases of their own: cases run three at a time
    shutil.copytree(w / "pt_ok", w / name)
  (w / "no_config" / "xlnet_config.json").unlink()  # another model trained on, exit 0 (sweep 34, R3)
  (w / "pt_no_flags" / "run_flags.json").unlink()  # advised to delete its good checkpoint (sweep 34, R6)
  for data in (w / "half").glob("ckpt-2.data-*"):
    data.unlink()
  data = next((w / "flipped").glob("ckpt-2.data-*"))
  flipped = bytearray(data.read_bytes())
  flipped[len(flipped) // 2] ^= 0xff  # two TensorFlow DATA_LOSS lines came before the tool's (sweep 34, R8)
  data.write_bytes(bytes(flipped))
  shutil.copytree(w / "cls_ok" / "records", w / "cls_corrupt")
  shutil.copytree(w / "cls_ok" / "records", w / "cls_other_task")  # imdb's: integer labels
  for source in (w / "cls_other_task").glob("*.source"):  # as the original wrote them: reused by their names
    source.unlink()
  cached = sorted(p for p in (w / "cls_corrupt").iterdir() if p.name.endswith(".tf_record") and "train" in p.name)
  cached[0].write_bytes(cached[0].read_bytes()[:200])  # cut inside a record: refused where the original wrote it
  cached[0].with_name(cached[0].name + ".source").unlink()  # (where a fingerprint says its size: written again)
  # Cached fine-tuning records (the names the tools look for) holding an id beyond the vocabulary.
  shutil.copytree(w / "cls_ok" / "records", w / "cls_big_ids")
  _put_an_id_beyond_the_vocabulary(w / "cls_big_ids", "*train*.tf_record")
  (w / "cls_late_big_id").mkdir()
  cached = sorted((w / "cls_ok" / "records").glob("*.train.tf_record"))
  assert len(cached) == 1, cached
  for mode in ("train", "dev.eval"):  # eval reads the training records under the eval name
    _put_an_id_beyond_the_vocabulary_in_record_300(cached[0],
                                                   w / "cls_late_big_id" / cached[0].name.replace("train", mode))
  sp_model = tokenization.load_sentencepiece(SPM)
  squad_records.prepare_train_records(str(w / "squad" / "train-v2.0.json"), sp_model, SPM, str(w / "squad_big_ids"),
                                      squad_data.FeatureOptions(max_seq_length=64, doc_stride=32, max_query_length=16))
  _put_an_id_beyond_the_vocabulary(w / "squad_big_ids", "*.train.tf_record")
  race_records.prepare_records(race_records.RecordsConfig(data_dir=str(w / "race"), spiece_model_file=SPM,
                                                       output_dir=str(w / "race_big_ids"), max_seq_length=64,
                                                       max_qa_length=32),
                               "train", tokenization.make_tokenize_fn(sp_model))
  shutil.copytree(w / "race", w / "race_bad_dev")  # found before training, not after it
  (w / "race_bad_dev" / "dev" / "high" / "bad.txt").write_text("{not json")
  _put_an_id_beyond_the_vocabulary(w / "race_big_ids", "*train*.tf_record")

  return w, logs


def _run_cases(cases, w, logs):
  """Runs the cases in the workspace w; {case id: (returncode, stderr, workspace, case dir)}."""
  case_dirs = [w / "cases" / case_id for case_id, *_ in cases]
  runs = cli_forks.run([[tool, *base_flags(tool, w, case_dir), *[e.format(w=w) for e in extra]]
                        for (_, tool, extra, _), case_dir in zip(cases, case_dirs)], logs,
                       headrooms=[HEADROOM.get(case_id) for case_id, *_ in cases])
  return {case[0]: (*run, w, case_dir) for case, run, case_dir in zip(cases, runs, case_dirs)}


# The cases that take longest (a device out of memory, an id found at record 300 of a training run): the default
# suite's 15 minutes; by default: tests/test_out_of_memory.py and cls-eval-reads-an-id-beyond-n-token.
SLOW_CASE_IDS = ("cls-out-of-memory-in-a-step", "cls-out-of-memory-in-evaluation",
                 "cls-train-reads-an-id-beyond-n-token")
DEFAULT_CASES = [case for case in CASES if case[0] not in SLOW_CASE_IDS]
SLOW_CASES = [case for case in CASES if case[0] in SLOW_CASE_IDS]


@pytest.fixture(scope="module")
def results(workspace):
  return _run_cases(DEFAULT_CASES, *workspace)


@pytest.fixture(scope="module")
def slow_results(workspace):
  return _run_cases(SLOW_CASES, *workspace)


@pytest.mark.parametrize("case_id,tool,extra,words", DEFAULT_CASES, ids=[c[0] for c in DEFAULT_CASES])
def test_bad_input(results, case_id, tool, extra, words):
  _check(results, case_id, tool, words)


@pytest.mark.slow
@pytest.mark.parametrize("case_id,tool,extra,words", SLOW_CASES, ids=[c[0] for c in SLOW_CASES])
def test_bad_input_that_takes_long(slow_results, case_id, tool, extra, words):
  _check(slow_results, case_id, tool, words)


def _check(results, case_id, tool, words):
  code, stderr, w, case_dir = results[case_id]
  assert code == 1, stderr[-3000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  last = stderr.strip().splitlines()[-1]
  assert last.startswith(f"{tool}: error: ") and words.format(w=w) in last, last
  left = [os.path.join(d, f) for d, dirs, files in os.walk(w) for f in files + dirs if fileio.is_temp_name(f)]
  assert not left, left
  assert not list(case_dir.glob("model/ckpt-*")), "a failed run wrote a checkpoint"
  assert (w / "owned.bin").read_bytes() == OWNED and (w / "owned_dir" / "notes.txt").read_bytes() == OWNED
  assert sorted(os.listdir(w / "owned_dir")) == ["notes.txt"] and not os.listdir(w / "empty_model")


def test_a_checkpoint_failing_its_checksum_is_one_line(results):
  """Two TensorFlow DATA_LOSS warnings, the checksum's numbers in each, came before the tool's line (sweep 34, R8)."""
  assert results["pt-checkpoint-failing-its-checksum"][1].strip().count("\n") == 0


def test_failed_runs_leave_the_run_files_of_the_run_before(results):
  """Runs that fail in a finished run's --model_dir (a flag it refuses; a checkpoint of another task it cannot
  resume; a resume with another --learning_rate whose loss is not finite before its first checkpoint: its
  run_flags.json said learning_rate 1e30 and changed_on_resume, and the next resume warned of a change never
  trained): the run's run_flags.json and checkpoints are as that run left them. A released model's directory given
  as --model_dir is as it was."""
  for case_id in ("pt-bad-dropout-in-a-run-s-model-dir", "cls-model-dir-of-a-pretraining-run",
                  "pt-nan-loss-in-a-run-s-model-dir"):
    assert results[case_id][0] == 1
  w = results["cls-model-dir-of-a-pretraining-run"][2]
  for name in ("pt_ok", "pt_nan"):
    assert (w / name / "run_flags.json").read_bytes() == (w / "pt_ok_run_flags.json").read_bytes(), name
    assert sorted(p.name for p in (w / name).glob("ckpt-*.index")) == ["ckpt-2.index"], name
  assert sorted(os.listdir(w / "released")) == sorted(os.listdir(w / "tiny_ckpt"))
  assert (w / "released" / "xlnet_config.json").read_bytes() == (w / "tiny_ckpt" / "xlnet_config.json").read_bytes()


def test_the_sweep_is_wide():
  assert len(DEFAULT_CASES) >= 25 and len({c[1] for c in DEFAULT_CASES}) == 6
  assert set(SLOW_CASE_IDS) == {c[0] for c in SLOW_CASES}


def test_skip_bad_records_reads_each_damaged_file_up_to_its_first_bad_record(tmp_path, monkeypatch):
  """The reader every tool uses (`records.record_dataset`), after `skip_unreadable_records` (--skip_bad_records):
  a file cut short is read up to its first bad record, the intact file whole, and the log names the damage."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from xlnet_tf.data import records  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(records, "_READ_LIMITS", {})
  paths = [str(tmp_path / f"{name}.tfrecord") for name in ("cut", "whole")]
  for path in paths:
    with tf.io.TFRecordWriter(path) as writer:
      for i in range(10):
        writer.write(f"{os.path.basename(path)}-{i}".encode())
  data = open(paths[0], "rb").read()
  open(paths[0], "wb").write(data[:len(data) // 2 + 20])  # records 0-4 whole, record 5 cut in its data
  with pytest.raises(tf.errors.DataLossError):
    list(records.record_dataset(paths))
  lines = []
  assert records.skip_unreadable_records(paths, lines.append) == 1
  assert lines[0].startswith(f"--skip_bad_records: {paths[0]} is unreadable from record 5 on (truncated record at")
  assert "{{" not in lines[0] and "[Op:" not in lines[0]  # the reason without TensorFlow's function and op names
  assert "' failed" not in lines[0]  # nor its stray quote ("truncated record at 120' failed with ...")
  assert lines[-1] == "--skip_bad_records: skipping the unreadable end of 1 of 2 record files."
  got = [r.decode() for r in records.record_dataset(paths).as_numpy_iterator()]
  assert got == [f"cut.tfrecord-{i}" for i in range(5)] + [f"whole.tfrecord-{i}" for i in range(10)]


def test_training_records_without_a_readable_record_are_one_line(tmp_path, monkeypatch):
  """A training cache whose every record --skip_bad_records skips, or an empty one, ended in the trainer's line for
  callers of its API: `dataset_fn's dataset must give a batch ... (end it with .repeat())` (sweep 32, U14)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from xlnet_tf.data import records  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(records, "_READ_LIMITS", {})
  path, empty = str(tmp_path / "train.tf_record"), tmp_path / "empty.tf_record"
  with tf.io.TFRecordWriter(path) as writer:
    for i in range(3):
      writer.write(f"record-{i}".encode())
  data = bytearray(open(path, "rb").read())
  data[14] ^= 1  # in the first record's data: its checksum fails
  open(path, "wb").write(bytes(data))
  empty.touch()
  spec, read = {"x": tf.io.FixedLenFeature([1], tf.int64)}, records.ReadConfig(batch_size=2, is_training=True)
  with pytest.raises(ValueError, match=f"^The training records {empty} hold no record \\(an empty file\\), so "
                                       "training would have no batch. Delete them and rerun"):
    records.fine_tuning_dataset(str(empty), spec, read)
  records.fine_tuning_dataset(path, spec, read)  # unreadable, not empty: the reading names the record
  assert records.skip_unreadable_records([path], lambda line: None) == 1
  with pytest.raises(ValueError, match=f"^The training records {path} hold no readable record \\(--skip_bad_records "
                                       f"skips every record of {path}: unreadable from its first record on\\)"):
    records.fine_tuning_dataset([path], spec, read)
  records.fine_tuning_dataset(path, spec, dataclasses.replace(read, is_training=False))  # evaluation: read once


def test_a_full_disk_while_writing_records_names_the_file_and_leaves_nothing(tmp_path):
  """data_utils.py under a file-size limit (its record file cannot be written whole, as on a full disk): one line
  naming the file, exit 1, and no record file, complete-looking or temporary, left behind."""
  import resource  # pylint: disable=import-outside-toplevel
  import signal  # pylint: disable=import-outside-toplevel

  def small_disk():
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG, as ENOSPC would

  proc = subprocess.run([PY, "data_utils.py", f"--input_glob={CORPUS}/*.txt", f"--sp_path={SPM}",
                         f"--save_dir={tmp_path}/out", "--use_tpu=False", "--bi_data=True", *RECORD_FLAGS],
                        capture_output=True, text=True, timeout=300, preexec_fn=small_disk)
  assert proc.returncode == 1, proc.stderr[-2000:]
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith(f"data_utils.py: error: Could not write {tmp_path}/out/tfrecords/train-0-0.") and \
      "File too large" in last, last
  assert "Traceback" not in proc.stderr
  assert not list((tmp_path / "out" / "tfrecords").glob("*.tfrecords*"))


def test_check_token_ids_reads_the_first_records_on_the_host(tmp_path):
  """The id check every tool runs before training (`token_checks.check_token_ids`): it names the file, the record, the
  worst id and n_token; looks at the first num_records records only; and leaves an unreadable file to the reader."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from xlnet_tf.data import example_encoder, token_checks  # pylint: disable=import-outside-toplevel
  paths = [str(tmp_path / f"{name}.tf_record") for name in ("a", "b")]
  for path, rows in zip(paths, ([[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 31, 40]])):
    with tf.io.TFRecordWriter(path) as writer:
      for ids in rows:
        writer.write(tf.train.Example(features=tf.train.Features(
            feature={"input_ids": example_encoder.int_feature(ids)})).SerializeToString())
  token_checks.check_token_ids(paths, 41, fix="-")
  token_checks.check_token_ids(paths, 32, fix="-", num_records=3)  # the bad record is the 4th
  with pytest.raises(ValueError, match=rf"^{paths[1]} holds token id 40 \(record 1\), outside the model's "
                                       r"vocabulary \[0, n_token=32\)\. Fix it\.$"):
    token_checks.check_token_ids(paths, 32, fix="Fix it.")
  with pytest.raises(ValueError, match="a.tf_record holds token id 6 \\(record 1\\)"):  # the largest
    token_checks.check_token_ids(paths[0], 1, fix="-")
  data = open(paths[1], "rb").read()
  open(paths[1], "wb").write(data[:len(data) - 10])  # the bad record cut short: unreadable, not checked
  token_checks.check_token_ids(paths, 32, fix="-")
  with tf.io.TFRecordWriter(paths[0]) as writer:  # a negative id: no vocabulary's (it blamed another vocabulary)
    writer.write(tf.train.Example(features=tf.train.Features(
        feature={"input_ids": example_encoder.int_feature([1, -7])})).SerializeToString())
  with pytest.raises(ValueError, match=rf"^{paths[0]} holds token id -7 \(record 0\), which no vocabulary has: the "
                                       r"file is damaged, or was not written as records of these tools\. Write it "
                                       r"again\.$"):
    token_checks.check_token_ids(paths, 32, fix="Another vocabulary's.")
