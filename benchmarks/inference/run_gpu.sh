#!/usr/bin/env bash
# gpulane tokens benchmarks on the 2xH200 machine (NVLink NV18).
#
#   benchmarks/inference/run_gpu.sh OUTDIR [all|roofline|builds|builds-socket|default|
#                                           decode|decode-70b|prefill|fast]
#
# (the parts, so that each fits one call on the lent machine; all runs every part)
# roofline: Llama-3.1-8B shapes, TP=1, batch 1, decode step against weight bytes per
#    GPU / device copy bandwidth (measured here with torch), and where the step's time
#    goes (profile_decode.py: graph step, its matrix products alone, eager kernels).
# builds, builds-socket: TP=2 and PP=2 (and TP=1 on one GPU, the advisor's calibration)
#    on NVLink and with the pcie-host and socket presets (NCCL_P2P_DISABLE=1;
#    + NCCL_SHM_DISABLE=1): decode and prefill tokens/s, plus all_reduce and send/recv
#    sweeps of each build at the sizes the model sends, joined (`gpulane join`).
#    All 32 layers of 8B on a smaller grid (batch 1,16; input 1024; output 64) so that
#    the socket build, at ~4 GB/s, stays within the time.
# default: the default `gpulane tokens` run (8B, TP=2, batch 1,8,32, input 512,2048,
#    output 128), timed with `time`; target under 3 minutes.
# decode (issue 22, ~3 min): 8B decode step before (compile=false) and after
#    (compile=true), batch 1 and 16: TP=1 in one process (profile_decode.py: eager:bmm,
#    compiled:bmm, compiled:triton, with kernel counts), TP=2 through `gpulane tokens`;
#    the CUDA-graph all_reduce/all_gather sweep of the build (the measured collective
#    time); step_ratio.py: ratio = step / (HBM roofline + collectives), target 1.2.
# decode-70b (~3 min): llama3-70b TP=2 (both H200s; 141 GB of bf16 weights do not fit
#    one 141 GB H200, so no TP=1), batch 1 and 16, before and after; same table.
# prefill (~3 min): 8k-token prefill of 8B, TP=1 (profile_decode.py --prefill 8192,
#    eager and compiled) and TP=2 (gpulane tokens), against the FLOP roofline at the
#    measured bf16 matrix rate (+ collectives); target 1.3.
# fast: decode, decode-70b and prefill in one go (~10 min: near a device call's limit;
#    decode + prefill in one call and decode-70b in another is safer).
# advise-nvlink (~6 min), advise-pcie-host, advise-socket (~5 min each; one call each;
#    advise: all three, ~16 min, more than one call allows):
#    the held-out validation of benchmarks/advise/heldout.py. nvlink also runs the
#    calibration (llama3-8b TP=1 on one GPU and TP=2 with compute-only times, batch 1,16,
#    input 512, output 16); each build: its CUDA-graph all_reduce/all_gather/sendrecv
#    sweep and llama3-70b (16 of 80 layers) and mixtral-8x7b (8 of 32 layers) at TP=2 and
#    PP=2, batch 1,16, input 512, output 16; then heldout.py builds the table
#    (OUT/advise/heldout.md).
set -uo pipefail  # a failed step is recorded; the next still runs
OUT=${1:?usage: run_gpu.sh OUTDIR [all|roofline|builds|builds-socket|default|decode|decode-70b|prefill|fast|advise|advise-nvlink|advise-pcie-host|advise-socket]}
PART=${2:-all}
want() {
  [ "$PART" = all ] || [ "$PART" = "$1" ] ||
    { [ "$PART" = fast ] && case "$1" in decode|decode-70b|prefill) true ;; *) false ;; esac; } ||
    { [ "$PART" = advise ] && case "$1" in advise-*) true ;; *) false ;; esac; }
}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
mkdir -p "$OUT"
G=("$PY" -m gpulane.cli)
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# DECODE_ATTENTION=NAME sets decode_attention for every run here (default: the config's)
ATT=()
[ -n "${DECODE_ATTENTION:-}" ] && ATT=(decode_attention="$DECODE_ATTENTION")

if want roofline; then
  echo "== roofline: llama3-8b TP=1 batch 1"
  "$PY" "$HERE/copy_bw.py" | tee "$OUT/copy_bw.json"
  CUDA_VISIBLE_DEVICES=0 "$PY" "$HERE/profile_decode.py" --out "$OUT/profile" \
    | tee "$OUT/profile.log"
  "${G[@]}" tokens model=llama3-8b tp=1 pp=1 batch=1 input_len=512 output_len=128 \
    comm_off=false build=h200-tp1 "${ATT[@]}" results_dir="$OUT/roofline" 2>&1 \
    | tee "$OUT/roofline.log"
  "$PY" "$HERE/roofline.py" "$OUT/copy_bw.json" "$OUT/roofline" | tee "$OUT/roofline.json"
fi

builds() {  # builds PRESET...: TP=2, PP=2 and the collectives the model sends, per build
  local grid=(model=llama3-8b batch=1,16 input_len=1024 output_len=64 warmup=1 iters=2 "${ATT[@]}")
  for p in "$@"; do
    "${G[@]}" tokens "${grid[@]}" tp=2 pp=1 preset="$p" build="$p" \
      results_dir="$OUT/builds" 2>&1 | tee "$OUT/tokens-$p.log"
    "${G[@]}" tokens "${grid[@]}" tp=1 pp=2 preset="$p" build="$p" \
      results_dir="$OUT/builds" 2>&1 | tee "$OUT/tokens-pp2-$p.log"
    "${G[@]}" sweep preset="$p" build="$p" "collectives=[all_reduce,sendrecv]" \
      dtype=bfloat16 sizes.min=8K sizes.max=128M warmup=3 iters=10 \
      results_dir="$OUT/builds" > "$OUT/sweep-$p.log" 2>&1
  done
}
if want builds; then
  echo "== TP=1 on one GPU (the advisor's calibration), same grid"
  CUDA_VISIBLE_DEVICES=0 "${G[@]}" tokens model=llama3-8b batch=1,16 input_len=1024 \
    output_len=64 warmup=1 iters=2 tp=1 pp=1 build=h200-tp1 "${ATT[@]}" results_dir="$OUT/tp1" \
    2>&1 | tee "$OUT/tokens-tp1.log"
  echo "== TP=2 and PP=2 per build: nvlink, pcie-host"
  builds nvlink pcie-host
fi
if want builds-socket; then
  echo "== TP=2 and PP=2: socket"
  builds socket
fi
if want builds || want builds-socket; then
  "${G[@]}" join "$OUT/builds" 2>&1 | tee "$OUT/join.txt"
fi

if want default; then
  echo "== default gpulane tokens (8B on 2 GPUs), timed"
  { time "${G[@]}" tokens results_dir="$OUT/default" ; } 2>&1 | tee "$OUT/default.log"
fi
rates() {  # copy bandwidth and bf16 matrix rate, once per OUTDIR
  [ -s "$OUT/copy_bw.json" ] || CUDA_VISIBLE_DEVICES=0 "$PY" "$HERE/copy_bw.py" | tee "$OUT/copy_bw.json"
}
graph_sweep() {  # the build's collectives as a decode step issues them: CUDA-graph replays
  [ -d "$OUT/sweep" ] && return 0
  "${G[@]}" sweep build=nvlink "collectives=[all_reduce,all_gather]" dtype=bfloat16 \
    in_place=true graph=true sizes.min=8K sizes.max=128M warmup=3 iters=10 ranks=2 \
    device=cuda progress=false results_dir="$OUT/sweep" > "$OUT/sweep-graph.log" 2>&1
}
before_after() {  # before_after NAME ARGS...: gpulane tokens with compile=false, then true
  local name=$1; shift
  for c in false true; do
    echo "== $name compile=$c"
    { time "${G[@]}" tokens "$@" compile="$c" build=nvlink "${ATT[@]}" \
        results_dir="$OUT/$name" ; } 2>&1 | tee "$OUT/tokens-$name-compile-$c.log"
  done
}
ratios() {
  "$PY" "$HERE/step_ratio.py" "$OUT" --md "$OUT/step-ratio.md" --rows "$OUT/step-ratio.jsonl"
}

if want decode; then
  echo "== decode step before/after: llama3-8b TP=1 (one process) and TP=2"
  rates
  CUDA_VISIBLE_DEVICES=0 "$PY" "$HERE/profile_decode.py" --model llama3-8b --batch 1,16 \
    --input-len 512 --steps 50 --variants eager:bmm,compiled:bmm,compiled:triton \
    --out "$OUT/profile" > "$OUT/profile.log" 2>&1
  grep '^{"batch"' "$OUT/profile.log" || tail -20 "$OUT/profile.log"
  before_after tp2 model=llama3-8b tp=2 pp=1 batch=1,16 input_len=512 output_len=48 \
    warmup=1 iters=2
  graph_sweep
  ratios
fi
if want decode-70b; then
  echo "== decode step before/after: llama3-70b TP=2 (does not fit one H200: no TP=1)"
  rates
  before_after 70b model=llama3-70b tp=2 pp=1 batch=1,16 input_len=512 output_len=32 \
    warmup=1 iters=1 comm_off=false
  graph_sweep
  ratios
fi
if want prefill; then
  echo "== prefill of 8k tokens before/after: llama3-8b TP=1 (one process) and TP=2"
  rates
  CUDA_VISIBLE_DEVICES=0 "$PY" "$HERE/profile_decode.py" --model llama3-8b --batch 1 \
    --input-len 512 --steps 50 --variants eager:bmm,compiled:bmm --prefill 8192 \
    --out "$OUT/profile-prefill" > "$OUT/profile-prefill.log" 2>&1
  grep '^{"input_len"' "$OUT/profile-prefill.log" || tail -20 "$OUT/profile-prefill.log"
  before_after prefill-tp2 model=llama3-8b tp=2 pp=1 batch=1 input_len=8192 output_len=4 \
    warmup=1 iters=3
  graph_sweep
  ratios
fi
advise_build() {  # advise_build PRESET: the build's collectives and the held-out runs
  local p=$1 dir="$OUT/advise" m split
  echo "== held-out models on $p"
  "${G[@]}" sweep preset="$p" build="$p" "collectives=[all_reduce,all_gather,sendrecv]" \
    dtype=bfloat16 graph=true sizes.min=8K sizes.max=128M warmup=3 iters=10 ranks=2 \
    device=cuda progress=false results_dir="$dir/coll" > "$OUT/advise-sweep-$p.log" 2>&1 ||
    tail -5 "$OUT/advise-sweep-$p.log"
  for m in "model=llama3-70b layers=16" "model=mixtral-8x7b layers=8"; do
    for split in "tp=2 pp=1" "tp=1 pp=2"; do
      # shellcheck disable=SC2086  # $m and $split are lists of overrides
      "${G[@]}" tokens $m $split batch=1,16 input_len=512 output_len=16 warmup=1 iters=2 \
        comm_off=false preset="$p" build="$p" "${ATT[@]}" results_dir="$dir/runs" 2>&1 \
        | tee -a "$OUT/advise-$p.log" | grep -E "^  batch|error"
    done
  done
}
if want advise-nvlink; then
  echo "== calibration: llama3-8b TP=1 (one GPU) and TP=2 (compute-only times)"
  CUDA_VISIBLE_DEVICES=0 "${G[@]}" tokens model=llama3-8b tp=1 pp=1 batch=1,16 input_len=512 \
    output_len=16 warmup=1 iters=2 build=nvlink "${ATT[@]}" results_dir="$OUT/advise/calib" \
    2>&1 | tee "$OUT/advise-calib-tp1.log" | grep -E "^  batch|error"
  "${G[@]}" tokens model=llama3-8b tp=2 pp=1 batch=1,16 input_len=512 output_len=16 \
    warmup=1 iters=2 comm_off=true build=nvlink "${ATT[@]}" results_dir="$OUT/advise/calib" \
    2>&1 | tee "$OUT/advise-calib-tp2.log" | grep -E "^  batch|error"
  advise_build nvlink
fi
want advise-pcie-host && advise_build pcie-host
want advise-socket && advise_build socket
if [ -d "$OUT/advise/calib" ] && [ -d "$OUT/advise/runs" ]; then
  # one call's builds; the three calls' OUT/advise directories together:
  # python benchmarks/advise/heldout.py OUT1/advise OUT2/advise OUT3/advise
  "$PY" "$ROOT/benchmarks/advise/heldout.py" "$OUT/advise" --md "$OUT/advise/heldout.md" \
    --rows "$OUT/advise/heldout.jsonl"
fi
echo "== done: $OUT"
