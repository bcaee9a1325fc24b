#!/usr/bin/env bash
# Decode steps with the small products (QKV, o_proj up to 64 MiB) on gpulane's split-K
# kernel where a timing finds it faster than cuBLAS (decode_products=auto,
# gpulane.inference.products) beside cuBLAS alone, both with decode_attention=fused, issue
# 32 round 9: one device call of at most 9 minutes.
#
#   COMMIT=$(git rev-parse --short HEAD) MODE=tp4 bash benchmarks/inference/run_decode_round9.sh /tmp/r9 "$OUT"
#   tar xf decode-round9.tar && python benchmarks/inference/decode_round4.py r9 --judge compiled+fused+gemv
#
# Leaves TARDIR/decode-round9.tar (rewritten after every step, so a cut call still brings
# back what was measured); every step runs under `timeout`, is logged with its UTC time to
# OUTDIR/steps.log, and is skipped (saying so) when less than it needs is left of BUDGET_S.
#
# MODE=tp4 (the 4-GPU kind):
#  1. machine.txt, copy_bw.json (the roofline's copy rate);
#  2. products_bench.py on GPU 0 (both kernels on every product auto chooses for); beside
#     it, profile_decode.py of TP rank 0's slice (collectives off) of the 8B at TP=4, 2 and
#     1 on GPUs 1-3, fused without and with auto, alternated; then the 72B's TP=4 slice;
#  3. the all_reduce / all_gather sweeps at 4 and 2 ranks; `gpulane tokens` at TP=4 of the
#     8B and the 72B (8 of 80 layers), without and with auto, alternated; then the 8B at
#     TP=2 (GPUs 0,1) beside the 8B at TP=1 (GPUs 2, 3), each without and with auto.
# MODE=h200 (one GPU, an H200: issue 32's 8B target is against 4000 GB/s): the 8B at TP=1,
# without and with auto, alternated.
# Then decode_round4.py's table (OUTDIR/decode-round9.md).
# Models are built from their configs with random weights (no network, no checkpoints).
set -uo pipefail
OUT=${1:?usage: run_decode_round9.sh OUTDIR [TARDIR]}
TARDIR=${2:-$OUT}
BUDGET_S=${BUDGET_S:-540}
MODE=${MODE:-tp4}
LAYERS=${LAYERS:-8}
DENSE=${DENSE:-qwen2.5-72b}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=../gpu/env.sh
source benchmarks/gpu/env.sh  # NCCL_NVLS_ENABLE=0 and the other multicast switches
one_call_dirs  # OUT, TARDIR absolute; out (log()'s folder), PY, G
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

pack() { pack_measured decode-round9; }  # benchmarks/gpu/env.sh
after_step() { pack; }

machine_txt "ran: ${COMMIT:-unknown} (the working tree sent; git's HEAD above may be stale)" \
  "mode: $MODE"
echo "$(stamp) +0s budget ${BUDGET_S}s, $NGPU GPUs, MODE=$MODE" | tee "$OUT/steps.log"
NEED=4
[ "$MODE" = h200 ] && NEED=1
if [ "$NGPU" -lt "$NEED" ]; then
  echo "MODE=$MODE needs $NEED GPUs, found $NGPU" | tee -a "$OUT/steps.log"
  exit 2
fi

# profile NAME GPU MODEL TP [ARGS...]: one TP rank's kernels, collectives off
profile() {
  local name=$1 gpu=$2 model=$3 tp=$4; shift 4
  run "profile-$name" 45 150 env CUDA_VISIBLE_DEVICES="$gpu" \
    "$PY" benchmarks/inference/profile_decode.py --model "$model" --tp "$tp" --batch 1,16 \
    --input-len 1024 --steps 50 --out "$OUT/profile-$name" \
    --variants compiled:fused,compiled:fused:auto,compiled:fused:auto,compiled:fused "$@"
}
# decode NAME GPUS TP MODEL [KEY=VALUE...]: decode steps, compute alone beside (build round9)
decode() {
  local name=$1 gpus=$2 tp=$3 model=$4; shift 4
  run "decode-$name" 40 120 env CUDA_VISIBLE_DEVICES="$gpus" "${G[@]}" tokens \
    model="$model" tp="$tp" pp=1 batch=1,16 input_len=1024 output_len=64 warmup=1 iters=1 \
    comm_off=true build=round9 results_dir="$OUT/decode" decode_attention=fused "$@"
}
sweep() {  # sweep NAME GPUS RANKS: the collectives the table reads
  run "$1" 25 60 env CUDA_VISIBLE_DEVICES="$2" "${G[@]}" sweep build=round9 \
    "collectives=[all_reduce,all_gather]" dtype=bfloat16 in_place=true graph=true \
    sizes.min=4K sizes.max=16M warmup=3 iters=10 ranks="$3" device=cuda progress=false \
    results_dir="$OUT/$1"
}
A=(decode_products=auto)
L=(layers="$LAYERS")

run copy_bw 20 40 bash -c "CUDA_VISIBLE_DEVICES=0 $PY benchmarks/inference/copy_bw.py >'$OUT/copy_bw.json'"
if [ "$MODE" = tp4 ]; then
  run products 40 120 env CUDA_VISIBLE_DEVICES=0 "$PY" benchmarks/inference/products_bench.py \
    --out "$OUT/kernels" &
  profile 8b-tp4 1 llama3-8b 4 &
  profile 8b-tp2 2 llama3-8b 2 &
  profile 8b-tp1 3 llama3-8b 1 &
  wait
  profile dense-tp4 0 "$DENSE" 4 --layers "$LAYERS"
  sweep sweep4 0,1,2,3 4
  sweep sweep2 0,1 2
  decode 8b-tp4 0,1,2,3 4 llama3-8b
  decode 8b-tp4-gemv 0,1,2,3 4 llama3-8b "${A[@]}"
  decode dense-tp4-gemv 0,1,2,3 4 "$DENSE" "${L[@]}" "${A[@]}"
  decode dense-tp4 0,1,2,3 4 "$DENSE" "${L[@]}"
  { decode 8b-tp2 0,1 2 llama3-8b; decode 8b-tp2-gemv 0,1 2 llama3-8b "${A[@]}"; } &
  { decode 8b-tp1-a 2 1 llama3-8b; decode 8b-tp1-gemv-b 2 1 llama3-8b "${A[@]}"; } &
  { decode 8b-tp1-gemv-a 3 1 llama3-8b "${A[@]}"; decode 8b-tp1-b 3 1 llama3-8b; } &
  wait
  decode 8b-tp4-gemv-b 0,1,2,3 4 llama3-8b "${A[@]}"
  decode 8b-tp4-b 0,1,2,3 4 llama3-8b
elif [ "$MODE" = h200 ]; then
  decode 8b-tp1-a 0 1 llama3-8b
  decode 8b-tp1-gemv-a 0 1 llama3-8b "${A[@]}"
  decode 8b-tp1-gemv-b 0 1 llama3-8b "${A[@]}"
  decode 8b-tp1-b 0 1 llama3-8b
fi

if [ "$(left)" -gt 5 ] && [ -d "$OUT/decode" ]; then
  timeout 60 "$PY" benchmarks/inference/decode_round4.py "$OUT" --judge compiled+fused+gemv \
    --md "$OUT/decode-round9.md" --rows "$OUT/decode-round9.jsonl" >"$OUT/decode-round9.txt" 2>&1
  rc=$?  # before $(stamp), which sets $? again
  echo "$(stamp) +${SECONDS}s table: exit $rc (1: a target missed)" | tee -a "$OUT/steps.log"
fi
pack
echo "== done in ${SECONDS} s: $TARDIR/decode-round9.tar"
