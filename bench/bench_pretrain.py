"""Benchmark: time of one full XLNet pretraining step, tokens/s, achieved GFLOP/s and the fraction of peak.

One step = forward of the two-stream model (content + query stream, mems, perm_mask, target_mapping) + the LM loss
(float32) + backward + `optimization.apply_gradients` (sum over replicas, clip by global norm 1.0, TF1 Adam update)
+ the mems update (the step returns `new_mems`, the next step consumes them). Inputs are built once, on device,
by the real record parser (`pretrain_input.parse_record`: two halves, `_local_perm`, one-hot `target_mapping`) from
random records in the original `data_utils.py` layout, then batched and made time-major.

  .venv/bin/python bench/bench_pretrain.py                         # small config, 4 modes
  .venv/bin/python bench/bench_pretrain.py --configs=small,base    # also the XLNet-Base shape (slow: ~minutes)
  .venv/bin/python bench/bench_pretrain.py --modes=fp32_jit --steps=20 --repeats=3

Configs (n_token 32000, untie_r, gelu, dropout/dropatt 0.1 as the original README's pretraining recipe, bi_data
True as the original default; both flags can be changed):
  small: n_layer 4, d_model 256, n_head 4, d_head 64, d_inner 1024, seq_len 256, reuse_len 128, mem_len 128, bsz 8,
         num_predict 43, perm_size 128.
  base:  n_layer 12, d_model 768, n_head 12, d_head 64, d_inner 3072, seq_len 512, reuse_len 256, mem_len 384,
         bsz 2, num_predict 85, perm_size 256.
Modes: fp32, fp32_jit (the whole step in `tf.function(jit_compile=True)`), bf16 (Keras "mixed_bfloat16": bfloat16
compute, float32 variables and loss), bf16_jit.

Timing: every step is timed alone (until its loss is on the host and a GPU has finished); after --warmup steps
(tracing/compilation) run --repeats x --steps steps; the table shows the median and the min. The VM is shared and
noisy: compare minima.

FLOPs are counted analytically, as matmul FLOPs (2 per multiply-add) of the forward pass times 3 (backward ~ 2x
forward). Per layer, with I = seq_len, M = mem_len, J = M + I keys, R = J + I relative positions (bi attention),
B = bsz, N = n_head, D = d_head, H = d_model, F = d_inner, P = num_predict, V = n_token:
  content stream h (I query rows):
    q projection 2*I*B*H*N*D; k and v projections of [mems; h] 2 * 2*J*B*H*N*D;
    ac = (q + r_w_bias).k 2*I*J*B*N*D; bd = (q + r_r_bias).k_r 2*I*R*B*N*D (before rel_shift);
    ef = (q + r_s_bias).seg_embed 2*I*B*N*D*2; attention x v 2*I*J*B*N*D; o projection 2*I*B*N*D*H;
    FFN 2 * 2*I*B*H*F.
  query stream g (only the P target rows are needed): the same terms with I -> P, except k/v (shared with h).
  positional projection k_r = r.W_r: 2*R*C*H*N*D with C = B distinct columns when dropout > 0 (each batch column
    has its own dropout mask on the positional embedding), else C = 2 with bi_data (forward, backward) or 1.
  plus once: the tied LM softmax 2*P*B*H*V.
step FLOPs = 3 * (n_layer * per-layer + LM). Not counted: embedding gathers, softmax/LayerNorm/GELU/dropout
element-wise work, Adam. This is the work the model needs; an implementation that attends from all I rows in the
query stream (the original scatters the P targets to I rows) or projects r per column without dropout does more
work than counted, so its achieved GFLOP/s here is a lower bound of its hardware rate.
Peak: --peak_fp32 / --peak_bf16 GFLOP/s, the measured 2-core matmul ceilings of this machine (TF/oneDNN 4096^2
matmul: ~380 fp32, ~690 bf16; stack_notes.md section 6).
"""

import os
import statistics
import time

from absl import app, flags

flags.DEFINE_list("configs", ["small"], "Configs to run: small, base.")
flags.DEFINE_list("modes", ["fp32", "fp32_jit", "bf16", "bf16_jit"], "Modes: fp32, fp32_jit, bf16, bf16_jit.")
flags.DEFINE_integer("steps", None, "Timed steps per repeat; default 10 (small) / 2 (base).")
flags.DEFINE_integer("repeats", None, "Timed repeats; default 2 (small) / 1 (base).")
flags.DEFINE_integer("warmup", 2, "Untimed steps first (tracing, XLA compilation).")
flags.DEFINE_bool("bi_data", True, "bi_data: first half of the batch forward, second half backward positions.")
flags.DEFINE_float("dropout", 0.1, "dropout of the run config.")
flags.DEFINE_float("dropatt", 0.1, "dropatt of the run config.")
flags.DEFINE_integer("intra_op", 0, "tf.config intra-op threads; 0 = TF default (number of cores).")
flags.DEFINE_integer("inter_op", 0, "tf.config inter-op threads; 0 = TF default.")
flags.DEFINE_bool("keep_freed_memory", True, "training.keep_freed_memory(), as run_pretrain.py does (glibc malloc "
                  "keeps freed buffers); false: glibc's defaults.")
flags.DEFINE_bool("use_tf32", False, "As run_pretrain.py: let float32 matmuls on NVIDIA GPUs use TensorFloat-32 "
                  "(default: strict float32).")
flags.DEFINE_float("peak_fp32", 380.0, "Nominal peak GFLOP/s for float32 matmuls (stack_notes.md, 2 cores).")
flags.DEFINE_float("peak_bf16", 690.0, "Nominal peak GFLOP/s for bfloat16 matmuls (stack_notes.md, 2 cores).")
flags.DEFINE_bool("measure_peak", True, "Also time a 2048^3 matmul (fp32, bf16) here and report % of that peak.")
flags.DEFINE_integer("seed", 0, "Seed of the weights and the random records.")
FLAGS = flags.FLAGS

CONFIGS = {
    "small": dict(n_layer=4, d_model=256, n_head=4, d_head=64, d_inner=1024, seq_len=256, reuse_len=128,
                  mem_len=128, bsz=8, num_predict=43, perm_size=128, n_token=32000),
    "base": dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072, seq_len=512, reuse_len=256,
                 mem_len=384, bsz=2, num_predict=85, perm_size=256, n_token=32000),
}
# Full step incl. Adam, fp32, 2 threads, measured on this kind of machine (issue 4): name -> (small, base) s/step.
REFERENCES = {"tensorflow/models TF2": (0.79, 8.2), "original TF1": (0.99, 9.9), "HF PyTorch": (1.35, 23.3)}
MODES = {"fp32": (False, False), "fp32_jit": (False, True), "bf16": (True, False), "bf16_jit": (True, True)}
SEP_ID, CLS_ID = 4, 3


def step_flops(c, bi_data, dropout):
  """Analytical FLOPs of one training step (see the module docstring for the formula)."""
  i, m, b, n, d, h, f, p, v = (c[k] for k in ("seq_len", "mem_len", "bsz", "n_head", "d_head", "d_model",
                                              "d_inner", "num_predict", "n_token"))
  j = m + i
  r = j + i
  nd = n * d

  def stream(rows):
    proj = 2 * rows * b * h * nd * 2  # q and o
    attn = 2 * rows * j * b * nd * 2 + 2 * rows * r * b * nd + 2 * rows * b * nd * 2  # ac, av; bd; ef
    ffn = 2 * 2 * rows * b * h * f
    return proj + attn + ffn

  columns = b if dropout > 0 else (2 if bi_data else 1)
  per_layer = stream(i) + stream(p) + 2 * 2 * j * b * h * nd + 2 * r * columns * h * nd
  return 3 * (c["n_layer"] * per_layer + 2 * p * b * h * v)


def measure_peak(dtype_name, n=2048, repeats=20):
  """Best GFLOP/s of an n x n x n matmul on this machine (TF graph, oneDNN), as stack_notes.md section 6."""
  import tensorflow as tf
  dtype = tf.as_dtype(dtype_name)
  a = tf.cast(tf.random.normal([n, n]), dtype)
  b = tf.cast(tf.random.normal([n, n]), dtype)
  matmul = tf.function(lambda: tf.matmul(a, b))
  matmul().numpy()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    matmul().numpy()
    best = min(best, time.perf_counter() - start)
  return 2 * n ** 3 / best / 1e9


def make_rows(c, seed, use_bfloat16=False):
  """Batch-major features of one batch of c["bsz"] rows, as the records reader yields them: built by the real
  parser (`parse_record`, float features in bfloat16 with `use_bfloat16`) from random records in the original
  layout (c: seq_len, reuse_len, num_predict, perm_size, n_token, bsz)."""
  import numpy as np
  import tensorflow as tf
  from xlnet_tf.tasks.pretrain.parser import parse_record

  rng = np.random.default_rng(seed)
  seq_len, reuse_len, num_predict = c["seq_len"], c["reuse_len"], c["num_predict"]
  rows = []
  for row in range(c["bsz"]):
    tok = rng.integers(10, c["n_token"], size=seq_len + 1)
    sep_a = reuse_len + 1 + rng.integers(0, seq_len - reuse_len - 4)
    tok[[sep_a, seq_len - 2]], tok[seq_len - 1] = SEP_ID, CLS_ID
    mask = np.zeros(seq_len, np.int64)
    n_1 = num_predict // 2
    mask[rng.choice(reuse_len, num_predict - n_1, replace=False)] = 1
    cand = [k for k in range(reuse_len, seq_len) if tok[k] not in (SEP_ID, CLS_ID)]
    mask[rng.choice(cand, n_1, replace=False)] = 1
    seg = np.array([0] * (sep_a + 1) + [1] * (seq_len - sep_a - 2) + [2])
    feats = {"input": tok[:seq_len], "is_masked": mask, "target": tok[1:], "seg_id": seg, "label": [row % 2]}
    feats = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in val]))
             for k, val in feats.items()}
    serialized = tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()
    rows.append(parse_record(tf.constant(serialized), seq_len, reuse_len, c["perm_size"], num_predict,
                             use_bfloat16=use_bfloat16, seed=tf.constant([seed, row], tf.int64)))
  return {k: tf.stack([r[k] for r in rows]) for k in rows[0]}


def make_batch(c, seed):
  """Time-major features of one batch (`make_rows`, float32), as the model takes them."""
  import tensorflow as tf
  batch = make_rows(c, seed)
  return {"input_k": tf.transpose(batch["input_k"]), "seg_id": tf.transpose(batch["seg_id"]),
          "perm_mask": tf.transpose(batch["perm_mask"], [1, 2, 0]),
          "target_mapping": tf.transpose(batch["target_mapping"], [1, 2, 0]),
          "input_q": tf.transpose(batch["input_q"]), "target": tf.transpose(batch["target"]),
          "target_mask": tf.transpose(batch["target_mask"])}


def run_mode(name, c, mode, bi_data, dropout, dropatt, steps, repeats, warmup, seed):
  """Builds the model and optimizer, warms up, times; returns a list of per-step seconds."""
  import keras
  import tensorflow as tf
  from xlnet_tf import RunConfig, XLNetConfig, XLNetModel
  from xlnet_tf.training import optimization

  use_bf16, jit = MODES[mode]
  keras.utils.set_random_seed(seed)
  config = XLNetConfig(n_layer=c["n_layer"], d_model=c["d_model"], n_head=c["n_head"], d_head=c["d_head"],
                       d_inner=c["d_inner"], ff_activation="gelu", untie_r=True, n_token=c["n_token"])
  run_config = RunConfig(is_training=True, use_tpu=False, use_bfloat16=use_bf16, dropout=dropout, dropatt=dropatt,
                         mem_len=c["mem_len"], reuse_len=c["reuse_len"], bi_data=bi_data)
  model = XLNetModel(config, run_config)
  optimizer = optimization.create_optimizer(1e-4, train_steps=100000, warmup_steps=0)
  variables = model.trainable_variables
  optimizer.build(variables)
  x = make_batch(c, seed)
  mems = [tf.zeros([c["mem_len"], c["bsz"], c["d_model"]], tf.float32) for _ in range(c["n_layer"])]

  def replica_step(x, mems):
    with tf.GradientTape() as tape:
      output, new_mems = model(x["input_k"], x["seg_id"], None, mems, x["perm_mask"], x["target_mapping"],
                               x["input_q"], training=True)
      per_token = model.get_lm_loss(output, x["target"])
      loss = tf.reduce_sum(per_token * x["target_mask"]) / tf.reduce_sum(x["target_mask"])
    grads = tape.gradient(loss, variables)
    gnorm, _ = optimization.apply_gradients(optimizer, grads, variables, clip=1.0)
    return loss, gnorm, [tf.cast(m, tf.float32) for m in new_mems]

  @tf.function(jit_compile=jit)
  def train_step(x, mems):
    return tf.distribute.get_strategy().run(replica_step, args=(x, mems))

  # A GPU runs the kernels after the call has returned: each step waits for them, so that it is timed until done.
  wait_for_device = tf.test.experimental.sync_devices if tf.config.list_logical_devices("GPU") else lambda: None
  times = []
  for k in range(warmup + steps * repeats):
    start = time.perf_counter()
    loss, gnorm, mems = train_step(x, mems)
    loss = float(loss)
    wait_for_device()
    if k >= warmup:
      times.append(time.perf_counter() - start)
    if k == 0 and not (loss == loss and loss < 1e4):
      raise RuntimeError(f"{name}/{mode}: the first loss is {loss}; the benchmarked step is broken.")
  return times


def main(_):
  unknown = [m for m in FLAGS.modes if m not in MODES] + [c for c in FLAGS.configs if c not in CONFIGS]
  if unknown:
    raise app.UsageError(f"Unknown --configs/--modes {unknown}: use configs {sorted(CONFIGS)} and modes "
                         f"{sorted(MODES)}.")
  import tensorflow as tf
  from xlnet_tf import training
  kept = FLAGS.keep_freed_memory and training.keep_freed_memory()
  wide = training.prefer_wide_xla_vectors()  # as run_pretrain.py, before anything is compiled
  training.set_float32_matmul_precision(FLAGS.use_tf32, tf.distribute.get_strategy())  # as run_pretrain.py
  if FLAGS.intra_op:
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op)
  if FLAGS.inter_op:
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op)
  nominal = {"fp32": FLAGS.peak_fp32, "bf16": FLAGS.peak_bf16}
  here = {k: measure_peak("float32" if k == "fp32" else "bfloat16") for k in nominal} if FLAGS.measure_peak else {}
  print(f"tensorflow {tf.__version__}, {os.cpu_count()} CPUs, intra_op {FLAGS.intra_op or 'default'}, "
        f"inter_op {FLAGS.inter_op or 'default'}, keep_freed_memory {kept}, 512-bit XLA vectors {wide}; "
        f"bi_data={FLAGS.bi_data}, dropout={FLAGS.dropout}, dropatt={FLAGS.dropatt}")
  print(f"peak GFLOP/s: nominal {nominal['fp32']:.0f} fp32 / {nominal['bf16']:.0f} bf16"
        + (f"; measured here (2048^3 matmul) {here['fp32']:.0f} fp32 / {here['bf16']:.0f} bf16" if here else ""))
  header = (f"{'config':6} {'mode':9} {'s/step med':>10} {'min':>7} {'tokens/s':>9} {'GFLOP/step':>10} "
            f"{'GFLOP/s':>8} {'%nominal':>8} {'%here':>6} {'vs best ref':>11}")
  print(header, flush=True)
  rows = []
  for name in FLAGS.configs:
    c = CONFIGS[name]
    small = name == "small"
    steps = FLAGS.steps or (10 if small else 2)
    repeats = FLAGS.repeats or (2 if small else 1)
    flops = step_flops(c, FLAGS.bi_data, FLAGS.dropout)
    best_ref = min(v[0 if small else 1] for v in REFERENCES.values())
    for mode in FLAGS.modes:
      times = run_mode(name, c, mode, FLAGS.bi_data, FLAGS.dropout, FLAGS.dropatt, steps, repeats, FLAGS.warmup,
                       FLAGS.seed)
      med, low = statistics.median(times), min(times)
      kind = mode.split("_")[0]
      gflops = flops / med / 1e9
      pct_here = f"{100 * gflops / here[kind]:5.1f}%" if here else "    -"
      row = (f"{name:6} {mode:9} {med:10.3f} {low:7.3f} {c['bsz'] * c['seq_len'] / med:9.0f} {flops / 1e9:10.1f} "
             f"{gflops:8.1f} {100 * gflops / nominal[kind]:7.1f}% {pct_here} {best_ref / med:10.2f}x")
      rows.append(row)
      print(row, flush=True)
  print("\n" + header)
  print("\n".join(rows))
  print("\nreferences (fp32, 2 threads, full step incl. Adam, measured for issue 4; GFLOP/s by the formula above, % of "
        "the nominal fp32 peak):")
  for ref, secs in REFERENCES.items():
    parts = []
    for name in FLAGS.configs:
      sec = secs[0 if name == "small" else 1]
      gflops = step_flops(CONFIGS[name], FLAGS.bi_data, FLAGS.dropout) / sec / 1e9
      parts.append(f"{name} {sec:5.2f} s/step {gflops:6.1f} GFLOP/s {100 * gflops / nominal['fp32']:5.1f}%")
    print(f"  {ref:22} " + "; ".join(parts))


if __name__ == "__main__":
  app.run(main)
