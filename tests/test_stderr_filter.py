"""The CLIs' stderr filter: TensorFlow's C++ noise is dropped, every other line kept in order (also one written just
before the process dies), and `-v 1` shows everything."""

import json
import os
import subprocess
import sys

import pytest

from xlnet_tf import stderr_filter

# Lines a tiny bfloat16 run_pretrain.py printed (TF 2.21, a 2-core AMD EPYC), the long op dumps cut short.
NOISE = [
    "W0000 00:00:1795779700.010056   10378 op_level_cost_estimator.cc:699] Error in PredictCost() for the op: "
    'goo.gle/debugproto  op: "Softmax" attr { key: "T" value { type: DT_BFLOAT16 } } inputs { dtype: DT_BFLOAT16',
    "E0000 00:00:1795779701.864012   10378 util.cc:131] oneDNN supports DT_INT32 only on platforms with AVX-512. "
    "Falling back to the default Eigen-based implementation if present.",
    "I0000 00:00:1795779849.225280   13872 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders.",
    "E0000 00:00:1795779853.506038   13872 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1795779702.260431   10531 service.cc:153] XLA service 0x7fc64c0039d0 initialized for platform Host "
    "(this does not guarantee that XLA will be used). Devices:",
    "I0000 00:00:1795779703.765943   10530 device_compiler.h:208] Compiled cluster using XLA!  This line is logged at "
    "most once for the lifetime of the process.",
    "I1127 11:41:57.767117 140491356756864 functional_saver.py:440] Sharding callback duration: 60 microseconds",
    "INFO:tensorflow:Assets written to: /tmp/ex1.tmp-13759-8123270b2511/assets",  # the export's temporary name
    "I1130 06:13:55.392403 140096951319424 builder_impl.py:838] Assets written to: /tmp/ex1.tmp-1-8123270b2511/assets",
    "I1130 06:13:55.399316 140096951319424 fingerprinting_utils.py:49] Writing fingerprint to /tmp/ex1.tmp-1-81/fp.pb",
    # --xla_cache_dir, loading an entry on the machine that wrote it
    "E0000 00:00:1795809770.112576    4380 text_format.cc:378] Error parsing text-format "
    "tensorflow.XlaSerializedCacheEntry: 2:1: Expected identifier, got: 5",
    "E0000 00:00:1795809770.541177    4380 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. Target machine feature "
    "+prefer-no-scatter is not  supported on the host machine. Machine type used for XLA:CPU compilation doesn't "
    "match the machine type for execution. Compile machine features: [+64bit,+adx] vs host machine features: [adx]",
    # a resume's failed restore, torn down after the tool's own line said why (sweep 25, C4)
    "WARNING:tensorflow:Detecting that an object or model or tf.train.Checkpoint is being deleted with unrestored "
    "values. See the following logs for the specific values in question. To silence these warnings, use "
    "`status.expect_partial()`.",
    "W1130 13:38:50.059132 139717777386368 checkpoint.py:225] Detecting that an object or model or "
    "tf.train.Checkpoint is being deleted with unrestored values. See the following logs for the specific values",
    "WARNING:tensorflow:Value in checkpoint could not be found in the restored object: (root).save_counter",
    "W1130 13:38:50.059433 139717777386368 checkpoint.py:234] Value in checkpoint could not be found in the restored "
    "object: (root).mems",
]
SIGNAL = [
    "E0000 00:00:1795779701.864012   10378 util.cc:131] oneDNN failed to create a primitive: out of memory",
    "E0000 00:00:1795779853.506038   13872 cuda_platform.cc:52] failed call to cuDevicePrimaryCtxRetain: "
    "CUDA_ERROR_OUT_OF_MEMORY",
    "W0000 00:00:1795779700.010056   10378 op_level_cost_estimator.cc:699] Some other cost-model warning",
    "I1127 11:41:57.855973 140491356756864 trainer.py:488] Saved checkpoint /tmp/pt/ckpt-4",
    "W1127 11:41:57.855973 140491356756864 runtime.py:180] --use_bfloat16 on a CPU without native bfloat16",
    "run_pretrain.py: error: --record_info_dir is required: data_utils.py's <save_dir>/tfrecords directory.",
    "Traceback (most recent call last):",
    "E0000 00:00:1795809770.112576    4380 text_format.cc:378] Error parsing text-format tensorflow.TFRecordInfo",
    "E0000 00:00:1795809770.541177    4380 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. Target machine feature "
    "+avx512fp16 is not  supported on the host machine. This could lead to execution errors such as SIGILL.",
    "INFO:tensorflow:Exported a model",
    "I1130 06:13:55.392403 140096951319424 builder_impl.py:838] Another SavedModel line",
    "W1130 06:13:55.399316 140096951319424 fingerprinting_utils.py:49] Could not write the fingerprint",
    "WARNING:tensorflow:Skipping full serialization of Keras layer",
    "W1130 13:38:50.059132 139717777386368 checkpoint.py:225] Checkpoint was expected to be a trackable object",
    "WARNING:tensorflow:Value in the model could not be found",
    "W1130 13:38:50.059433 139717777386368 saver.py:234] Value in checkpoint could not be found in the restored "
    "object: (root).mems",
]


# TensorFlow 2.21's report of an allocation its BFC allocator (the GPU's) could not make, as written on a CPU with
# TF_CPU_ALLOCATOR_USE_BFC=true (the 21 bins' lines cut to 2), then the lines after it.
OOM_REPORT = [
    "W0000 00:00:1795935976.826648   22963 bfc_allocator.cc:502] Allocator (bfc_cpu_allocator_for_gpu) ran out of "
    "memory trying to allocate 762.94MiB (rounded to 800000000)requested by op Fill",
    "If the cause is memory fragmentation maybe the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' will "
    "improve the situation. ",
    "Current allocation summary follows.",
    "Current allocation summary follows.",
    "I0000 00:00:1795935976.826796   22963 bfc_allocator.cc:1049] BFCAllocator dump for bfc_cpu_allocator_for_gpu",
    "I0000 00:00:1795935976.826805   22963 bfc_allocator.cc:1056] Bin (256): \tTotal Chunks: 1, Chunks in use: 1. "
    "256B allocated for chunks. 256B in use in bin. 4B client-requested in use in bin.",
    "I0000 00:00:1795935976.826933   22963 bfc_allocator.cc:1056] Bin (268435456): \tTotal Chunks: 0, Chunks in use: "
    "0. 0B allocated for chunks. 0B in use in bin. 0B client-requested in use in bin.",
    "I0000 00:00:1795935976.826938   22963 bfc_allocator.cc:1072] Bin for 762.94MiB was 256.00MiB, Chunk State: ",
    "I0000 00:00:1795935976.826944   22963 bfc_allocator.cc:1085] Next region of size 4194304",
    "I0000 00:00:1795935976.826953   22963 bfc_allocator.cc:1105] InUse at 7f8e51af9040 of size 4194304 next "
    "18446744073709551615",
    "I0000 00:00:1795935976.826965   22963 bfc_allocator.cc:1105] Free  at 7f8e526fb140 of size 2096896 next "
    "18446744073709551615",
    "I0000 00:00:1795935976.826968   22963 bfc_allocator.cc:1110]      Summary of in-use Chunks by size: ",
    "I0000 00:00:1795935976.826972   22963 bfc_allocator.cc:1113] 1 Chunks of size 256 totalling 256B",
    "I0000 00:00:1795935976.826982   22963 bfc_allocator.cc:1117] Sum Total of in-use chunks: 4.00MiB",
    "I0000 00:00:1795935976.826985   22963 bfc_allocator.cc:1119] Total size in pool: 6.00MiB memory_limit_: "
    "256.00MiB available size: 250.00MiB curr_region_allocation_bytes_: 8.00MiB",
    "I0000 00:00:1795935976.826991   22963 bfc_allocator.cc:1128] Stats: ",
    "Limit:                       256.00MiB",
    "InUse:                         4.00MiB",
    "NumAllocs:                           3",
    "LargestFreeBlock:                   0B",
    "",
    "W0000 00:00:1795935976.827000   22963 bfc_allocator.cc:513] ****************************************xx*___",
    "W0000 00:00:1795935976.827036   22963 op_kernel.cc:1858] OP_REQUIRES failed at constant_op.cc:176 : "
    "RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[200000000] and type float on "
    "/job:localhost/replica:0/task:0/device:CPU:0 by allocator bfc_cpu_allocator_for_gpu",
    "W0000 00:00:1795926041.049613    9208 local_rendezvous.cc:412] Local rendezvous is aborting with status: "
    "RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[2,2,16384,16384] and type float on "
    "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
    "\t [[{{function_node while_cond_1_true_1216}}{{node while/cond_1/model_1/transformer_1/MatMul_4}}]]",
    "Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom "
    "to RunOptions for current allocation info. This isn't available when running in Eager mode.",
    "",
    # XLA's words (a nested XLA function of run_classifier.py's step)
    "W0000 00:00:1795936220.162740   23764 local_rendezvous.cc:412] Local rendezvous is aborting with status: "
    "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 512.00MiB.",
    "\t [[{{function_node while_cond_1_true_1216}}{{node while/cond_1/model_1/transformer_1/PartitionedCall_10}}]]",
    "Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom "
    "to RunOptions for current allocation info. This isn't available when running in Eager mode.",
    " [tf-allocator-allocation-error='']",
]
AFTER_THE_REPORT = [
    "loss: 3",  # the program's own, right after the report
    "W0000 00:00:1795926041.049907    9208 cpu_allocator_impl.cc:82] Allocation of 8589934592 exceeds 10% of free "
    "system memory.",
    "",  # a blank line after another line
    "W0000 00:00:1795935976.827036   22963 op_kernel.cc:1858] OP_REQUIRES failed at strided_slice_op.cc:117 : "
    "INVALID_ARGUMENT: slice index 5 of dimension 0 out of bounds.",
    "\t [[{{node strided_slice}}]]",
    "W0000 00:00:1795935966.826648   22963 bfc_allocator.cc:291] Allocator (GPU_0_bfc) ran out of memory trying to "
    "allocate 124.59MiB with freed_by_count=0. The caller indicates that this is not a failure, but may mean that "
    "there could be performance gains if more memory were available.",
    "tool.py: error: Out of memory at step 1 (OOM when allocating tensor with shape[200000000] and type float).",
]


# A damaged record file (run_pretrain.py over a record file cut in half, 2026-11-29): the CLI names the file and the
# record in its own line, after these.
DATA_LOSS_REPORT = [
    "W0000 00:00:1795983639.140678   32301 local_rendezvous.cc:412] Local rendezvous is aborting with status: "
    "DATA_LOSS: truncated record at 2211494' failed with Read less bytes than requested",
    "\t [[{{node MultiDeviceIteratorGetNextFromShard}}]]",
    "W0000 00:00:1795983639.145004   32298 local_rendezvous.cc:412] Local rendezvous is aborting with status: "
    "DATA_LOSS: truncated record at 2211494' failed with Read less bytes than requested",
    "\t [[{{node MultiDeviceIteratorGetNextFromShard}}]]",
    "\t [[RemoteCall]]",
    "\t [[while/body/_1/while/cond_1/then/_371/while/cond_1/IteratorGetNext]]",
]


# Cached records of another --max_seq_length (run_classifier.py, sweep 27: 15 such lines), and pretraining records
# of other features: the CLI names the file and the feature in its own line, after these.
OTHER_FEATURES_REPORT = [
    "W0000 00:00:1796065276.726183   23706 op_kernel.cc:1858] OP_REQUIRES failed at example_parsing_ops.cc:96 : "
    "INVALID_ARGUMENT: Name: <unknown>, Key: segment_ids, Index: 0.  Number of int64 values != expected.  Values "
    "size: 32 but output shape: [64]",
    "W0000 00:00:1796065278.152283   23775 local_rendezvous.cc:412] Local rendezvous is aborting with status: "
    "INVALID_ARGUMENT: Error in user-defined function passed to ParallelMapDatasetV2:13 transformation with "
    "iterator: Iterator::Root::Prefetch::ParallelMapV2: Name: <unknown>, Key: segment_ids, Index: 0.  Number of "
    "int64 values != expected.  Values size: 32 but output shape: [64]",
    "\t [[{{node ParseExample/ParseExampleV2}}]]",
    "\t [[MultiDeviceIteratorGetNextFromShard]]",
    "W0000 00:00:1796066310.060854    4096 local_rendezvous.cc:412] Local rendezvous is aborting with status: "
    "INVALID_ARGUMENT: Key: target.  Can't parse serialized Example: Some int64_list slice was not parsed",
    "W0000 00:00:1796066310.060854    4096 op_kernel.cc:1858] OP_REQUIRES failed at example_parsing_ops.cc:96 : "
    "INVALID_ARGUMENT: Feature: label_ids (data type: int64) is required but could not be found.",
]


# scripts/train_spm.py's trainer (SentencePiece 0.2, 2026-11-30), the settings cut to a few of their 60 lines.
SPM_SETTINGS = [
    "I0000 00:00:1796033346.833231   10896 sentencepiece_trainer.cc:149] Starts training with : ",
    "trainer_spec {", "  input: /tmp/small.txt", "  input_format: ", "  control_symbols: <cls>", "  unk_surface:  ⁇ ",
    "}", "normalizer_spec {", "  name: nmt_nfkc", "  normalization_rule_tsv: ", "}", "denormalizer_spec {}",
    "I0000 00:00:1796033346.833840   10896 trainer_interface.cc:461] Adding meta_piece: <s>",
    "I0000 00:00:1796033347.517744   10896 trainer_interface.cc:755] Saving model: /tmp/sp.tmp-1-8d273abae7d9.model",
]
AFTER_THE_SETTINGS = [
    "I0000 00:00:1796033346.833298   10896 trainer_interface.cc:232] Loading corpus: /tmp/small.txt",
    "--input: 4 of the 610 lines of /tmp/half.txt are longer than 4192 bytes, which SentencePiece skips. Put ...",
    "  an indented line of the tool's own",
]


def test_sentencepiece_s_settings_are_dropped_and_what_follows_them_kept():
  """The settings' 60 lines buried train_spm.py's own warnings (sweep 22, N5)."""
  got = list(stderr_filter.kept(SPM_SETTINGS[:-2] + AFTER_THE_SETTINGS[:1] + SPM_SETTINGS + AFTER_THE_SETTINGS[1:]))
  assert got == AFTER_THE_SETTINGS


def test_a_damaged_record_report_is_dropped():
  last = "run_pretrain.py: error: Record file F is unreadable at record 8873 (truncated record at 2211494 failed ...)."
  assert list(stderr_filter.kept(DATA_LOSS_REPORT + [last])) == [last]


def test_a_checkpoint_s_checksum_report_is_dropped():
  """A resume from a checkpoint with a flipped byte: its line came after these two (sweep 34, R8)."""
  report = [f"W0000 00:00:1796210752.366945    4852 {where} DATA_LOSS: TensorBundle at /r/ckpt-1 shard 0 (4000000 "
            "bytes): Checksum does not match: stored 1532799049 vs. calculated on the restored bytes 2067732529"
            for where in ("op_kernel.cc:1858] OP_REQUIRES failed at save_restore_v2_ops.cc:233 :",
                          "local_rendezvous.cc:412] Local rendezvous is aborting with status:")]
  last = "run_pretrain.py: error: Cannot resume from /r/ckpt-1: its files are incomplete or damaged (TensorBundle ..."
  assert list(stderr_filter.kept(report + [last])) == [last]


def test_a_report_of_records_of_other_features_is_dropped():
  last = ("run_classifier.py: error: The records in F do not hold the features this run reads (feature segment_ids: "
          "Number of int64 values != expected. ...")
  assert list(stderr_filter.kept(OTHER_FEATURES_REPORT + [last])) == [last]


def test_an_out_of_memory_report_is_dropped_and_what_follows_it_kept():
  got = list(stderr_filter.kept(OOM_REPORT + AFTER_THE_REPORT[:1] + OOM_REPORT + AFTER_THE_REPORT[1:]))
  assert got == AFTER_THE_REPORT
  assert list(stderr_filter.kept(line.encode() + b"\n" for line in OOM_REPORT + AFTER_THE_REPORT)) == [
      line.encode() + b"\n" for line in AFTER_THE_REPORT]


@pytest.mark.parametrize("line", NOISE)
def test_noise_is_dropped(line):
  assert stderr_filter.is_noise(line)


@pytest.mark.parametrize("line", SIGNAL)
def test_a_real_line_is_kept(line):
  assert not stderr_filter.is_noise(line)


# Writes the lines (alternately through Python's sys.stderr and straight to descriptor 2, as the C++ runtime does)
# after cli.filter_stderr(argv), then ends with os._exit: nothing waits for the filter, as in a crash.
_SCRIPT = """
import json, os, sys
sys.path.insert(0, os.getcwd())
import cli
cli.filter_stderr(json.loads(sys.argv[1]))
for i, line in enumerate(json.loads(sys.argv[2])):
  if i % 2:
    sys.stderr.write(line + "\\n")
    sys.stderr.flush()
  else:
    os.write(2, (line + "\\n").encode())
os._exit(3)
"""


def _stderr_of_a_process(argv):
  """(the stderr lines of _SCRIPT, the lines it wrote): noise and real lines in turn."""
  lines = [line for pair in zip(NOISE, SIGNAL, strict=True) for line in pair]
  proc = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(argv), json.dumps(lines)], capture_output=True,
                        text=True, timeout=60)
  assert proc.returncode == 3, proc.stderr
  return proc.stderr.splitlines(), lines


def test_a_process_shows_the_real_lines_in_order_even_when_it_dies():
  got, _ = _stderr_of_a_process(["tool.py", "--seed=1"])
  assert got == SIGNAL


def test_verbosity_1_shows_everything():
  for argv in (["tool.py", "-v", "1"], ["tool.py", "--verbosity=1", "--seed=1"]):
    got, lines = _stderr_of_a_process(argv)
    assert got == lines


# A CLI (cli.start_script, cli.run_script) whose body makes an allocation larger than the BFC allocator's limit.
_OOM_SCRIPT = """
import os, sys
sys.path.insert(0, os.getcwd())
import cli
cli.start_script()
import tensorflow as tf
def body(_):
  return tf.zeros([200_000_000]) + 1
cli.run_script(lambda: None, cli.cli_main("tool.py", body))
"""


@pytest.mark.slow  # the default suite's 15 minutes (10 s of it the allocator's retry); by default: kept()
def test_a_cli_out_of_memory_prints_its_line_without_tensorflow_s_report():
  """TensorFlow's BFC allocator (the GPU's, here on the CPU with 256 MiB) runs out of memory at the default log
  level: of the 40 lines TensorFlow writes (the allocator's dump, the kernel's and the rendezvous's errors), none
  reaches stderr; the CLI's line does."""
  env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPU_BFC_MEM_LIMIT_IN_MB="256", TF_CPP_MIN_LOG_LEVEL="0",
             CUDA_VISIBLE_DEVICES="")
  proc = subprocess.run([sys.executable, "-c", _OOM_SCRIPT], capture_output=True, text=True, env=env, timeout=120)
  lines = proc.stderr.splitlines()
  assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-3000:]
  assert lines[0].startswith("tool.py: error: Out of memory (OOM when allocating tensor with shape[200000000]"), lines


def test_the_cli_modules_import_no_tensorflow_and_define_no_flag():
  """A CLI imports `cli` (then `flags`) before TensorFlow so that `filter_stderr()` comes first: neither module may
  import TensorFlow, nor define a flag before a script's `define_flags()` asks."""
  script = ("import os, sys; sys.path.insert(0, os.getcwd()); import cli, flags; from absl import flags as f; "
            "print('tensorflow' in sys.modules, len(f.FLAGS.get_flags_for_module(flags)))")
  proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
  assert proc.stdout.split() == ["False", "0"], proc.stderr
