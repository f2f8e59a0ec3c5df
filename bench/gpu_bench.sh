#!/usr/bin/env bash
# The GPU side-by-side (docs/performance_log.md, "GPU"): HuggingFace's PyTorch XLNet and xlnet-tf on one card, the
# harness's workloads (`pretrain_step`, `finetune_fwd`) at the `gpu` and `base` sizes, strict float32, TF32 and
# bfloat16, each run its own process, with its peak memory; the card's matmul peaks beside them.
#
#   bash bench/gpu_bench.sh hf        # PyTorch only: matmul peaks, then the HF rows (needs no TensorFlow)
#   bash bench/gpu_bench.sh project   # xlnet-tf's rows, with the kit's TensorFlow (after `bash .kit/unpack.sh`)
#   bash bench/gpu_bench.sh table     # the table of every row so far
#
# The GPU machine has PyTorch and transformers but no TensorFlow, and takes files in pieces: the phases can run in
# separate calls on one warm machine (the HF phase while the kit's pieces are still being carried). Rows gather in
# $BENCH_DIR/results.jsonl (default /tmp/gpu_bench); a row already there is not run again. Each phase stops starting
# runs after BENCH_BUDGET_S seconds (default 240), kills a run at BENCH_HARD_S (default BUDGET + 60), then prints the
# table; with OUT set, results.jsonl, table.txt and the logs are copied there.
# On the device tool's machine a path carried in one call is gone in the next while /tmp stays: copy the harness
# there and point PERF_HARNESS_DIR at it (the calls of the 2026-11-28 run: docs/performance_log.md).
# Env: PERF_HARNESS_DIR (default .kit/perf: ../shared/perf with the kit's perf_extra), KIT_DIR (as .kit/unpack.sh),
#      BENCH_STEPS / BENCH_WARMUP (20 / 5), BENCH_FILTER (regex on row names), BENCH_RUN_TIMEOUT_S (150),
#      BENCH_DEVICE_CHECK=0 (PyTorch on the CPU, small peaks: a plumbing check without a GPU, with BENCH_FILTER),
#      BENCH_CUPTI_DIR (a folder with CUDA 12's libcupti.so.12: the profile rows then sum the GPU's kernels too).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PHASE="${1:?usage: bash bench/gpu_bench.sh hf|project|table}"
PERF="${PERF_HARNESS_DIR:-$ROOT/.kit/perf}"
KIT_DIR="${KIT_DIR:-$(cat "$ROOT/.kit/KIT_DIR" 2>/dev/null || echo /tmp/kit)}"
BD="${BENCH_DIR:-/tmp/gpu_bench}"
RES="$BD/results.jsonl"
T0=$(date +%s)
BUDGET="${BENCH_BUDGET_S:-240}"
HARD="${BENCH_HARD_S:-$((BUDGET + 60))}"
RUN_TIMEOUT="${BENCH_RUN_TIMEOUT_S:-150}"
FILTER="${BENCH_FILTER:-.}"
GPU=1; [[ "${BENCH_DEVICE_CHECK:-1}" == 0 ]] && GPU=0
DEV=cuda; [[ $GPU == 0 ]] && DEV=cpu
common=(--steps "${BENCH_STEPS:-20}" --warmup "${BENCH_WARMUP:-5}" --threads 16 --inter-threads 16)
mkdir -p "$BD/logs"; touch "$RES"
el() { echo $(( $(date +%s) - T0 )); }

# run NAME KIND ARGS...   KIND: hf (run_hf_gpu.py), proj (bench/run_project.py), projenv (the same with the first
# argument, VAR=value, in its environment), py (a Python script and its args)
run() {
  local name="$1" kind="$2"; shift 2
  [[ "$name" =~ $FILTER ]] || return 0
  if grep -q "\"run\": \"$name\"" "$RES"; then echo "[bench] $name: in results already"; return 0; fi
  local now; now=$(el)
  if (( now >= BUDGET )); then echo "[bench +${now}s] SKIPPED $name (budget of ${BUDGET}s used)"; return 0; fi
  local t=$(( HARD - now )); (( t > RUN_TIMEOUT )) && t=$RUN_TIMEOUT
  local -a cmd
  case "$kind" in
    hf)   cmd=(python3 "$PERF/run_hf_gpu.py" --device "$DEV" "${common[@]}" "$@") ;;
    proj) cmd=(python3 "$ROOT/bench/run_project.py" --project-dir "$ROOT" "${common[@]}" "$@") ;;
    projenv) cmd=(env "$1" python3 "$ROOT/bench/run_project.py" --project-dir "$ROOT" "${common[@]}" "${@:2}") ;;
    py)   cmd=(python3 "$@") ;;
  esac
  echo "[bench +${now}s] $name (timeout ${t}s)"
  local t1; t1=$(date +%s)
  ( cd "$ROOT" && PERF_HARNESS_DIR="$PERF" timeout -k 5 "$t" "${cmd[@]}" ) > "$BD/logs/$name.out" 2> "$BD/logs/$name.err"
  local rc=$?
  local line; line="$(grep -a '^{' "$BD/logs/$name.out" | tail -1)"
  if [[ -n "$line" ]]; then
    printf '%s\n' "$line" | python3 -c "import json, sys; r = json.loads(sys.stdin.read()); \
r.update(run='$name', run_wall_s=$(( $(date +%s) - t1 )), rc=$rc); print(json.dumps(r))" >> "$RES"
    echo "$line"
  fi
  if [[ $rc != 0 ]]; then
    echo "[bench] $name: exit $rc$([[ $rc == 124 ]] && echo ' (TIMEOUT)') -- last lines of its stderr:"
    grep -av '^W0000\|^I0000' "$BD/logs/$name.err" | tail -n 12 | sed 's/^/    /'
  fi
}

# rows PREFIX KIND BF16_FLAG TF32_FLAG: the rows of one implementation, most important first (the issue's `gpu` size, then the
# base pretraining step in bfloat16 for the fraction of the card's peak, then TF32, then the rest)
rows() {
  local p="$1" kind="$2" bf="$3" tf32="$4"
  run "${p}_fp32_pretrain_step_gpu"  "$kind" --workload pretrain_step --size gpu
  run "${p}_bf16_pretrain_step_gpu"  "$kind" --workload pretrain_step --size gpu "$bf"
  run "${p}_fp32_finetune_fwd_gpu"   "$kind" --workload finetune_fwd --size gpu
  run "${p}_bf16_finetune_fwd_gpu"   "$kind" --workload finetune_fwd --size gpu "$bf"
  run "${p}_bf16_pretrain_step_base" "$kind" --workload pretrain_step --size base "$bf"
  run "${p}_fp32_pretrain_step_base" "$kind" --workload pretrain_step --size base
  run "${p}_tf32_pretrain_step_gpu"  "$kind" --workload pretrain_step --size gpu "$tf32"
  run "${p}_tf32_finetune_fwd_gpu"   "$kind" --workload finetune_fwd --size gpu "$tf32"
  run "${p}_bf16_finetune_fwd_base"  "$kind" --workload finetune_fwd --size base "$bf"
  run "${p}_fp32_finetune_fwd_base"  "$kind" --workload finetune_fwd --size base
}

case "$PHASE" in
  hf)
    echo "[bench] $(date -u +%FT%TZ) phase hf, budget ${BUDGET}s, device $DEV"
    [[ $GPU == 1 ]] && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader \
      | sed 's/^/[bench] GPU: /'
    small=(); [[ $GPU == 0 ]] && small=(--n 512 --repeats 2)
    run peak_torch py "$PERF/peak_gpu.py" --framework torch --device "$DEV" "${small[@]}"
    run peak_torch_tf32 py "$PERF/peak_gpu.py" --framework torch --device "$DEV" --tf32 --dtypes float32 "${small[@]}"
    rows hf hf --bf16 --tf32
    ;;
  project)
    if [[ ! -f "$KIT_DIR/env.sh" ]]; then echo "bench: $KIT_DIR/env.sh missing: run bash .kit/unpack.sh first"; exit 1; fi
    # shellcheck disable=SC1091
    source "$KIT_DIR/env.sh"
    echo "[bench] $(date -u +%FT%TZ) phase project, budget ${BUDGET}s"
    # The profiler's GPU tracing needs CUDA 12's CUPTI (libcupti.so.12), which neither the kit nor the machine has:
    # BENCH_CUPTI_DIR names a folder with it (from the nvidia-cuda-cupti-cu12 wheel); without it the profiles are the
    # host's side only.
    [[ -n "${BENCH_CUPTI_DIR:-}" ]] && export LD_LIBRARY_PATH="$BENCH_CUPTI_DIR:$LD_LIBRARY_PATH"
    # The profiles first (the host's side and, with CUPTI, the GPU's kernels: what two runs of the rows did not reach,
    # and what the next change needs), then the issue's rows, each eager row beside its --jit_compile one, then the rest.
    prof=("$ROOT/bench/profile_step.py" --threads 16 --inter-threads 16 --warmup 5 --steps 3)
    run profile_fp32_finetune_fwd_gpu   py "${prof[@]}" --workload finetune_fwd --size gpu
    run profile_bf16_finetune_fwd_gpu   py "${prof[@]}" --workload finetune_fwd --size gpu --mixed_bf16
    run profile_fp32_pretrain_step_gpu  py "${prof[@]}" --workload pretrain_step --size gpu
    run profile_bf16_pretrain_step_base py "${prof[@]}" --workload pretrain_step --size base --mixed_bf16
    for prec in fp32 bf16; do
      flag=(); [[ $prec == bf16 ]] && flag=(--mixed_bf16)
      run "project_${prec}_pretrain_step_gpu"     proj --workload pretrain_step --size gpu "${flag[@]}"
      run "project_xla_${prec}_pretrain_step_gpu" proj --workload pretrain_step --size gpu "${flag[@]}" --jit_compile
      run "project_${prec}_finetune_fwd_gpu"      proj --workload finetune_fwd --size gpu "${flag[@]}"
      run "project_xla_${prec}_finetune_fwd_gpu"  proj --workload finetune_fwd --size gpu "${flag[@]}" --jit_compile
    done
    run project_bf16_pretrain_step_base     proj --workload pretrain_step --size base --mixed_bf16
    run project_xla_bf16_pretrain_step_base proj --workload pretrain_step --size base --mixed_bf16 --jit_compile
    run project_fp32_pretrain_step_base proj --workload pretrain_step --size base
    run project_tf32_pretrain_step_gpu  proj --workload pretrain_step --size gpu --use_tf32
    run project_tf32_finetune_fwd_gpu   proj --workload finetune_fwd --size gpu --use_tf32
    run project_bf16_finetune_fwd_base  proj --workload finetune_fwd --size base --mixed_bf16
    run project_fp32_finetune_fwd_base  proj --workload finetune_fwd --size base
    # run_pretrain.py twice with one --xla_cache_dir (and once without): nested XLA programs, then --jit_compile
    run compile_cache_small py "$ROOT/bench/compile_cache.py" --size=small --nojit_compile --harness_dir "$PERF"
    run compile_cache_small_xla py "$ROOT/bench/compile_cache.py" --size=small --no_reference --harness_dir "$PERF"
    run project_no_nested_xla_fp32_pretrain_step_gpu proj --workload pretrain_step --size gpu --no_nested_xla
    # What XLA's autotuning of the GPU's matmuls costs in compile time (its warm-up) and gives in step time.
    run project_xla_noautotune_bf16_pretrain_step_gpu projenv XLA_FLAGS=--xla_gpu_autotune_level=0 \
        --workload pretrain_step --size gpu --mixed_bf16 --jit_compile
    run compile_cache_gpu_xla_bf16 py "$ROOT/bench/compile_cache.py" --size=gpu --steps=3 --use_bfloat16 --no_reference \
        --harness_dir "$PERF"
    ;;
  table) ;;
  *) echo "bench: unknown phase $PHASE (hf, project or table)"; exit 2 ;;
esac

python3 - "$RES" <<'EOF_TABLE' | tee "$BD/table.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for p in (r for r in rows if r.get("impl", "").startswith("peak")):
  keys = [k for k in p if k.endswith("_gflop_s")]
  print("%-10s %s: %s" % (p["run"], p.get("device", ""), "  ".join("%s %.1f TFLOP/s" % (k[:-8], p[k] / 1e3) for k in keys)
                         if keys else p.get("unavailable", "?")))
for c in (r for r in rows if r.get("bench") == "compile_cache"):
  print("%s (jit_compile %s): %s" % (c["run"], c["jit_compile"], "; ".join(
      "%s: first step %.2f s, later %.3f s, compile ~%.2f s" % (x["run"], x["first_step_s"], x["step_s"], x["compile_s"])
      for x in c["runs"])))
for c in (r for r in rows if r.get("bench") == "profile_step"):
  print("%s: %s%s" % (c["run"], "%d ops per step; the host's op events %.1f ms per step, busy %.1f ms, idle %.1f ms" % (
      c["ops_per_step"], c["op_ms_per_step"], c["busy_ms_per_step"], c["idle_ms_per_step"]) if "ops_per_step" in c
      else "no host op events",
      "; GPU: %d kernels, busy %.1f ms of %.1f ms, by op type %s" % (
          c["gpu_kernels_per_step"], c["gpu_busy_ms_per_step"], c["gpu_span_ms_per_step"], c["gpu_ms_by_op_type"])
      if "gpu_busy_ms_per_step" in c else ""))
runs = [r for r in rows if "median_step_s" in r]
prec = lambda r: "bf16" if "+bf16" in r["impl"] else "tf32" if "+tf32" in r["impl"] else "fp32"
hf = {(r["workload"], r["size"], prec(r)): r["median_step_s"] for r in runs if r["impl"].startswith("hf_torch")}
print("| run | median ms | TFLOP/s | tokens/s | x HF | peak GiB | loss first > last |")
print("|---|---|---|---|---|---|---|")
for r in sorted(runs, key=lambda r: (r["size"], r["workload"], prec(r), r["impl"])):
  ref = hf.get((r["workload"], r["size"], prec(r)))
  x = "%.2f" % (ref / r["median_step_s"]) if ref and not r["impl"].startswith("hf_torch") else ""
  loss = "%.3f > %.3f" % (r["first_loss"], r["last_loss"]) if r.get("first_loss") is not None else ""
  print("| %s | %.2f | %.1f | %.0f | %s | %s | %s |" % (r["run"], r["median_step_s"] * 1e3, r["achieved_gflop_s"] / 1e3,
        r["tokens_per_s"], x, r.get("peak_mem_gib", r.get("max_memory_allocated_gib", "?")), loss))
print("x HF: HF's median / this median, same workload, size and precision. TFLOP/s: the harness's analytic FLOPs / median.")
EOF_TABLE
if [[ -n "${OUT:-}" ]]; then
  cp "$RES" "$BD/table.txt" "$OUT"/ 2>/dev/null
  tar -C "$BD" -czf "$OUT/bench_logs_$PHASE.tgz" logs 2>/dev/null
fi
echo "[bench +$(el)s] phase $PHASE done"
