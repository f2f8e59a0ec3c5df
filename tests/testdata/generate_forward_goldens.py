"""Writes forward-pass goldens of the ORIGINAL XLNet for configurations tests/testdata/model's cases miss.

  python tests/testdata/generate_forward_goldens.py --xlnet_src=/path/to/zihangdai/xlnet \
      --out_dir=tests/testdata/model_configs

Runs the original `xlnet.XLNetModel` (`get_sequence_output`, `get_new_memory`, `get_pooled_out`) and the heads of
`modeling.py` (`summarize_sequence`, `classification_loss`, `regression_loss`, `lm_loss`) as `function_builder`
calls them (github.com/zihangdai/xlnet at bbaa3a6, a checkout passed as --xlnet_src and never copied here) in TF1
graph mode, with the stand-ins of generate_train_step_goldens.py (`tf1_for_the_original`), from the checkpoints
tests/testdata/model/ckpt_{untied,tied}. As for those goldens, the original's `assert bsz%2 == 0` in
`relative_positional_encoding` (always False on a tensor: `bi_data` cannot run upstream) is removed from the
source before it is compiled; nothing else is changed. `attn_type` "uni" (which `XLNetModel` hard-codes to "bi") is
passed by wrapping `modeling.transformer_xl`; each layer's content (and query) stream output is recorded by
wrapping `modeling.positionwise_ffn`. bfloat16 cases build the graph in `tf.tpu.bfloat16_scope()`, as
`function_builder.get_loss` does, with the stand-ins' variables in their input's dtype (`in_input_dtype`, as TF1's
own layers). `CASES` lists the configurations; model_configs/README.md says what each one adds to
tests/testdata/model. About 30 seconds on two cores. Needs only the project's .venv.
"""

import argparse
import contextlib
import json
import os
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_train_step_goldens as train_step_goldens  # noqa: E402  pylint: disable=wrong-import-position

CKPT_DIR = os.path.join(HERE, "model")
HEADS = {"untied": dict(summary_type="last", cls={"toy": 3}, reg=["toyreg"]),
         "tied": dict(summary_type="attn", cls={"toy": 2}, reg=[])}
SEQ, BSZ = 12, 4
SEP, CLS, PAD_SEG = 4, 3, 4
# Every case runs with dropout 0.1 and dropatt 0.1 and is_training False (dropout must be the identity).
RUN = dict(is_training=False, use_tpu=False, use_bfloat16=False, dropout=0.1, dropatt=0.1, init="normal",
           init_range=0.1, init_std=0.02, mem_len=None, reuse_len=None, bi_data=False, clamp_len=-1,
           same_length=False)
# name: (what differs from tests/testdata/model, settings). Settings: run (RunConfig fields), attn_type, mlen (input
# memory length; 0: none), seq, no_mask / no_seg (input_mask / seg_ids None), summary (summary_type, use_summ_proj),
# pretrain (two-stream with perm_mask, target_mapping unless num_predict is None), input_mask in pretraining,
# ckpts (default both). A case's seed is 100 + its index here: add new cases at the end.
CASES = {
    "finetune_uni": ("fine-tuning with attn_type uni (causal mask + padding mask)", dict(attn_type="uni")),
    "finetune_uni_same_length_mems": ("fine-tuning, uni, same_length, mems (mlen 4, mem_len 6, reuse_len 5)",
                                      dict(attn_type="uni", mlen=4, run=dict(same_length=True, mem_len=6,
                                                                             reuse_len=5))),
    "finetune_bi_same_length_mems": ("fine-tuning, bi with same_length (no effect upstream), mems",
                                     dict(mlen=4, run=dict(same_length=True, mem_len=6, reuse_len=5))),
    "finetune_clamp": ("fine-tuning, clamp_len 3 < seq_len 12", dict(run=dict(clamp_len=3))),
    "finetune_clamp_mems": ("fine-tuning, clamp_len 5, mems (mlen 4, mem_len 6, reuse_len 5)",
                            dict(mlen=4, run=dict(clamp_len=5, mem_len=6, reuse_len=5))),
    "finetune_uni_clamp_mems": ("fine-tuning, uni, clamp_len 5, mems (mlen 4, mem_len 6)",
                                dict(attn_type="uni", mlen=4, run=dict(clamp_len=5, mem_len=6))),
    "finetune_bidata_clamp_mems": ("one stream with bi_data (bsz 4), clamp_len 5, mems (mlen 4, mem_len 6)",
                                   dict(mlen=4, run=dict(bi_data=True, clamp_len=5, mem_len=6))),
    "finetune_reuse_no_mems": ("reuse_len 5 < mem_len 8 and no input memory: new_mems = first 5 states",
                               dict(run=dict(mem_len=8, reuse_len=5))),
    "finetune_reuse_short_memlen": ("mem_len 3 < reuse_len 5, mems (mlen 4): new_mems = last 3 of mems+first 5",
                                    dict(mlen=4, run=dict(mem_len=3, reuse_len=5))),
    "finetune_long_mems": ("mems longer than the sequence (mlen 16 > seq 12), mem_len 20, reuse_len None",
                           dict(mlen=16, run=dict(mem_len=20))),
    "finetune_memlen0": ("mems (mlen 4) with mem_len 0: no new memory (the original returns None per layer)",
                         dict(mlen=4, run=dict(mem_len=0))),
    "finetune_no_mask_no_seg": ("input_mask and seg_ids None (no padding mask, no segment term)",
                                dict(no_mask=True, no_seg=True)),
    "finetune_uni_no_mask": ("uni with input_mask None (the causal mask alone)",
                             dict(attn_type="uni", no_mask=True)),
    "finetune_tpu": ("use_tpu True: the one-hot embedding lookup", dict(run=dict(use_tpu=True))),
    "summary_first_proj": ("summary_type first, use_summ_proj", dict(summary=("first", True))),
    "summary_first_noproj": ("summary_type first, no projection", dict(summary=("first", False))),
    "summary_mean_proj": ("summary_type mean (over all positions, padding included), use_summ_proj",
                          dict(summary=("mean", True))),
    "summary_mean_noproj": ("summary_type mean, no projection", dict(summary=("mean", False))),
    "summary_last_noproj": ("summary_type last, no projection", dict(summary=("last", False))),
    "summary_attn_noproj": ("summary_type attn, no projection (tied: the checkpoint with abs_attn)",
                            dict(summary=("attn", False), ckpts=("tied",))),
    "summary_attn_no_mask": ("summary_type attn with input_mask None (no padding; tied only)",
                             dict(summary=("attn", True), no_mask=True, ckpts=("tied",))),
    "pretrain_tpu": ("two-stream, use_tpu True: one-hot embedding and the one-hot LM loss; mems (mlen 4)",
                     dict(pretrain=True, mlen=4, run=dict(use_tpu=True, mem_len=6, reuse_len=6))),
    "pretrain_mask_perm": ("two-stream with an input_mask (left padding) and a perm_mask together; mems",
                           dict(pretrain=True, input_mask=True, mlen=4, run=dict(mem_len=6))),
    "pretrain_uni_bidata_clamp": ("two-stream, uni, bi_data (bsz 4), clamp_len 3, same_length False, mems",
                                  dict(pretrain=True, attn_type="uni", mlen=4,
                                       run=dict(bi_data=True, clamp_len=3, mem_len=6, reuse_len=6))),
    "finetune_bf16": ("use_bfloat16 (bfloat16_scope: float32 variables read as bfloat16), mems (mlen 4, mem_len 6)",
                      dict(bf16=True, mlen=4, run=dict(use_bfloat16=True, mem_len=6, reuse_len=5))),
    "pretrain_bf16_tpu": ("two-stream in bfloat16 with use_tpu (the one-hot LM loss runs in bfloat16), mems",
                          dict(pretrain=True, bf16=True, mlen=4, run=dict(use_bfloat16=True, use_tpu=True, mem_len=6))),
    "pretrain_no_seg_long_mems": ("two-stream with seg_id None, mems longer than the sequence (mlen 16)",
                                  dict(pretrain=True, no_seg=True, mlen=16, run=dict(mem_len=16, reuse_len=6))),
}
NUM_PREDICT = 5


def import_original(xlnet_src):
  """(tf, xlnet, modeling) of the original, `modeling` compiled without the bi_data assert."""
  tf = train_step_goldens.tf1_for_the_original()
  sys.modules["tensorflow"] = tf
  path = os.path.join(xlnet_src, "modeling.py")
  with open(path) as f:
    source = f.read()
  assert source.count("assert bsz%2 == 0") == 1, "not the original modeling.py of bbaa3a6"
  modeling = types.ModuleType("modeling")
  modeling.__file__ = path
  code = compile(source.replace("assert bsz%2 == 0", "pass"), path, "exec")
  exec(code, modeling.__dict__)  # pylint: disable=exec-used
  sys.modules["modeling"] = modeling
  sys.path.insert(0, xlnet_src)
  import xlnet  # pylint: disable=import-outside-toplevel
  return tf, xlnet, modeling


def in_input_dtype(tf, stand_in):
  """A stand-in (`dense`, `layer_norm`) whose variables have its input's dtype, as TF1's own layers: under
  `bfloat16_scope`, float32 variables read as bfloat16."""
  def wrapped(inputs, *args, **kwargs):
    def getter(next_getter, *getter_args, **getter_kwargs):
      getter_kwargs["dtype"] = inputs.dtype.base_dtype
      return next_getter(*getter_args, **getter_kwargs)
    with tf.variable_scope(tf.get_variable_scope(), custom_getter=getter, auxiliary_name_scope=False):
      return stand_in(inputs, *args, **kwargs)
  return wrapped


def finetune_inputs(rng, seq_len, bsz, no_mask):
  """Time-major ids, seg ids and input_mask as classifier_utils lays them out: LEFT padding (id 0, seg 4, mask 1),
  A <sep> B <sep> <cls>, seg 0/1/2. Ids include the vocabulary's last (31). no_mask: no padding."""
  ids = rng.randint(5, 32, size=(bsz, seq_len))
  ids[:, 1] = 31
  seg = np.zeros((bsz, seq_len), np.int64)
  mask = np.zeros((bsz, seq_len), np.float32)
  pad_lens = [0] * bsz if no_mask else [0] + sorted(rng.randint(1, seq_len - 6, size=bsz - 1).tolist())
  for b, pad in enumerate(pad_lens):
    a_len = (seq_len - pad - 3) // 2
    ids[b, :pad], seg[b, :pad], mask[b, :pad] = 0, PAD_SEG, 1
    sep1 = pad + a_len
    ids[b, sep1], ids[b, -2], ids[b, -1] = SEP, SEP, CLS
    seg[b, sep1 + 1:-1] = 1
    seg[b, -1] = 2
  return ids.T.astype(np.int32), seg.T.astype(np.int32), mask.T, np.array(pad_lens, np.int32)


def pretrain_inputs(rng, seq_len, bsz, num_predict, with_mask):
  """Two-stream inputs as the original `_local_perm` builds them (numpy): targets, a random factorization order,
  perm_mask [L, L, B] (1 = i may not attend to j), inp_q, target_mapping [P, L, B], target, target_mask."""
  ids = rng.randint(0, 32, size=(bsz, seq_len))
  ids[:, 0] = 31
  seg = (np.arange(seq_len)[None] >= rng.randint(3, seq_len - 3, size=(bsz, 1))).astype(np.int32)
  pad_lens = [0] * bsz if not with_mask else [0] + rng.randint(1, 4, size=bsz - 1).tolist()
  mask = np.zeros((bsz, seq_len), np.float32)
  perm = np.zeros((bsz, seq_len, seq_len), np.float32)
  inp_q = np.zeros((bsz, seq_len), np.float32)
  tmap = np.zeros((bsz, num_predict, seq_len), np.float32)
  target = np.zeros((bsz, num_predict), np.int32)
  tmask = np.zeros((bsz, num_predict), np.float32)
  for b in range(bsz):
    mask[b, :pad_lens[b]] = 1
    n_tgt = rng.randint(2, num_predict + 1)
    tgt_pos = np.sort(rng.choice(np.arange(pad_lens[b], seq_len), n_tgt, replace=False))
    is_tgt = np.zeros(seq_len, bool)
    is_tgt[tgt_pos] = True
    rank = rng.permutation(seq_len)
    rev = np.where(is_tgt, rank, -1)  # non-targets are seen by everyone
    self_rev = np.where(is_tgt, rev, rev + 1)
    perm[b] = ((self_rev[:, None] <= rev[None, :]) & is_tgt[None, :]).astype(np.float32)
    inp_q[b] = is_tgt
    tmap[b, np.arange(n_tgt), tgt_pos] = 1
    target[b, :n_tgt] = ids[b, tgt_pos]
    tmask[b, :n_tgt] = 1
  return dict(inp_k=ids.T.astype(np.int32), seg_id=seg.T, input_mask=mask.T, perm_mask=perm.transpose(1, 2, 0),
              inp_q=inp_q.T, target_mapping=tmap.transpose(1, 2, 0), target=target.T, target_mask=tmask.T)


def run_case(tf, xlnet, modeling, ckpt, name, settings, seed):
  rng = np.random.RandomState(seed)
  ckpt_dir = os.path.join(CKPT_DIR, f"ckpt_{ckpt}")
  with open(os.path.join(ckpt_dir, "xlnet_config.json")) as f:
    config = json.load(f)
  run = dict(RUN, **settings.get("run", {}))
  attn_type = settings.get("attn_type", "bi")
  seq_len, mlen = settings.get("seq", SEQ), settings.get("mlen", 0)
  heads = dict(HEADS[ckpt])
  heads["summary_type"], heads["use_summ_proj"] = settings.get("summary", (heads["summary_type"], True))
  pretrain = settings.get("pretrain", False)
  if pretrain:
    heads = None
    data = pretrain_inputs(rng, seq_len, BSZ, NUM_PREDICT, settings.get("input_mask", False))
    if not settings.get("input_mask"):  # as function_builder.two_stream_loss
      data.pop("input_mask")
  else:
    ids, seg, mask, pad_lens = finetune_inputs(rng, seq_len, BSZ, settings.get("no_mask", False))
    data = dict(input_ids=ids, seg_ids=seg, input_mask=mask, pad_lens=pad_lens)
  if settings.get("no_mask"):
    data.pop("input_mask")
  if settings.get("no_seg"):
    data.pop("seg_id" if pretrain else "seg_ids")
  if mlen:
    data["mems"] = rng.randn(config["n_layer"], mlen, BSZ, config["d_model"]).astype(np.float32)

  tf.reset_default_graph()
  bf16 = settings.get("bf16", False)
  if bf16:  # float inputs as the original's input functions give them with use_bfloat16; stored as read
    for key, value in data.items():
      if value.dtype == np.float32:
        data[key] = tf.Session().run(tf.cast(tf.cast(value, tf.bfloat16), tf.float32))
  feeds = {k: tf.cast(tf.constant(v), tf.bfloat16) if bf16 and v.dtype == np.float32 else tf.constant(v)
           for k, v in data.items() if k != "pad_lens"}
  layer_outputs = []
  ffn, transformer_xl = modeling.positionwise_ffn, modeling.transformer_xl

  def recording_ffn(*args, **kwargs):
    out = ffn(*args, **kwargs)
    layer_outputs.append(out)
    return out

  modeling.positionwise_ffn = recording_ffn
  modeling.transformer_xl = lambda **kw: transformer_xl(**dict(kw, attn_type=attn_type))
  precision_scope = tf.tpu.bfloat16_scope() if bf16 else contextlib.nullcontext()
  stand_ins = tf.layers.dense, tf.contrib.layers.layer_norm
  if bf16:
    tf.layers.dense, tf.contrib.layers.layer_norm = (in_input_dtype(tf, f) for f in stand_ins)
  precision_scope.__enter__()
  try:
    xlnet_config = xlnet.XLNetConfig(json_path=os.path.join(ckpt_dir, "xlnet_config.json"))
    run_config = xlnet.RunConfig(**run)
    mems = list(tf.unstack(feeds["mems"])) if mlen else None
    model = xlnet.XLNetModel(
        xlnet_config, run_config, input_ids=feeds["inp_k" if pretrain else "input_ids"],
        seg_ids=feeds.get("seg_id" if pretrain else "seg_ids"), input_mask=feeds.get("input_mask"), mems=mems,
        perm_mask=feeds.get("perm_mask"), target_mapping=feeds.get("target_mapping"), inp_q=feeds.get("inp_q"))
  finally:
    modeling.positionwise_ffn, modeling.transformer_xl = ffn, transformer_xl
  fetch = {"output": model.get_sequence_output()}
  new_mems = model.get_new_memory()
  if any(m is not None for m in new_mems):
    fetch["new_mems"] = tf.stack(new_mems)
  if pretrain:  # two calls per layer: the query stream's, then the content stream's
    fetch["layer_outputs_g"] = tf.stack(layer_outputs[0::2])
    fetch["layer_outputs_h"] = tf.stack(layer_outputs[1::2])
    with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
      fetch["lm_loss"] = modeling.lm_loss(
          hidden=fetch["output"], target=feeds["target"], n_token=xlnet_config.n_token,
          d_model=xlnet_config.d_model, initializer=model.get_initializer(), lookup_table=model.get_embedding_table(),
          tie_weight=True, bi_data=run_config.bi_data, use_tpu=run_config.use_tpu)
    # `lm_loss` keeps its logits `einsum(...) + softmax_b` to itself: the add's output.
    adds = [op for op in tf.get_default_graph().get_operations()
            if "/lm_loss/" in op.name and op.type in ("Add", "AddV2") and
            op.outputs[0].shape.ndims == 3]
    assert len(adds) == 1, [op.name for op in adds]
    fetch["lm_logits"] = adds[0].outputs[0]
    fetch["total_loss"] = tf.reduce_sum(fetch["lm_loss"] * feeds["target_mask"]) / tf.reduce_sum(feeds["target_mask"])
  else:
    fetch["layer_outputs_h"] = tf.stack(layer_outputs)
    pooled = model.get_pooled_out(heads["summary_type"], heads["use_summ_proj"])
    fetch["pooled"] = pooled
    labels = rng.randint(0, 2, size=BSZ).astype(np.int32)
    with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
      for scope, n_class in heads["cls"].items():
        _, fetch[f"cls_logits_{scope}"] = modeling.classification_loss(
            hidden=pooled, labels=labels, n_class=n_class, initializer=model.get_initializer(),
            scope=f"classification_{scope}", return_logits=True)
      for scope in heads["reg"]:
        _, fetch[f"reg_logits_{scope}"] = modeling.regression_loss(
            hidden=pooled, labels=labels.astype(np.float32), initializer=model.get_initializer(),
            scope=f"regression_{scope}", return_logits=True)
  precision_scope.__exit__(None, None, None)
  tf.layers.dense, tf.contrib.layers.layer_norm = stand_ins
  fetch = {k: tf.cast(v, tf.float32) for k, v in fetch.items()}
  variables = tf.global_variables()
  saved = {n for n, _ in tf.train.list_variables(os.path.join(ckpt_dir, "xlnet_model.ckpt"))}
  missing = [v.name for v in variables if v.name[:-2] not in saved]
  assert not missing, f"{name}: variables not in the checkpoint {missing}"
  with tf.Session(config=train_step_goldens.session_config(tf)) as sess:
    tf.train.Saver({v.name[:-2]: v for v in variables}).restore(sess, os.path.join(ckpt_dir, "xlnet_model.ckpt"))
    out = sess.run(fetch)
  meta = dict(case=name, ckpt=ckpt, config=config, run_config=run, attn_type=attn_type, heads=heads, mlen=mlen,
              pretrain=pretrain, seed=seed, tensorflow=tf.VERSION, layout="time-major [len, bsz, ...]")
  return dict(data, **out, meta_json=json.dumps(meta, indent=1, sort_keys=True))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlnet_src", required=True, help="A checkout of github.com/zihangdai/xlnet (bbaa3a6).")
  parser.add_argument("--out_dir", default=os.path.join(HERE, "model_configs"))
  parser.add_argument("--only", default=None, help="Comma-separated case names (default: all).")
  args = parser.parse_args()
  tf, xlnet, modeling = import_original(args.xlnet_src)
  os.makedirs(args.out_dir, exist_ok=True)
  for i, (name, (_, settings)) in enumerate(CASES.items()):
    if args.only and name not in args.only.split(","):
      continue
    for ckpt in settings.get("ckpts", ("untied", "tied")):
      arrays = run_case(tf, xlnet, modeling, ckpt, name, settings, seed=100 + i)
      np.savez_compressed(os.path.join(args.out_dir, f"{ckpt}_{name}.npz"), **arrays)
      print(f"{ckpt}_{name}: {', '.join(f'{k} {np.shape(v)}' for k, v in arrays.items() if k != 'meta_json')}")


if __name__ == "__main__":
  main()
