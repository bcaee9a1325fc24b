#!/usr/bin/env bash
# Decode steps with the weights' heads prefetched into L2 during the small kernels
# (l2_prefetch=MiB, gpulane.inference.l2_prefetch) beside the same step without, issue 32
# round 8: one device call of at most 9 minutes per MODE.
#
#   COMMIT=$(git rev-parse --short HEAD) MODE=probe bash benchmarks/inference/run_decode_round8.sh /tmp/r8 "$OUT"
#   tar xf decode-round8.tar && python benchmarks/inference/decode_round4.py r8 --judge compiled+fused+pf16
#
# Leaves TARDIR/decode-round8.tar (rewritten after every step, so a cut call still brings
# back what was measured); every step runs under `timeout`, is logged with its UTC time to
# OUTDIR/steps.log, and is skipped (saying so) when less than it needs is left of BUDGET_S.
# Every run uses decode_attention=fused (round 7's fastest) with and without the prefetch.
#
# MODE=probe (the 4-GPU kind):
#  1. machine.txt, copy_bw.json (the roofline's copy rate);
#  2. l2_prefetch.py on GPU 0 (one-row products after an idle window, by budget); beside
#     it, profile_decode.py of TP rank 0's slice (collectives off) of the 8B at TP=1, 2 and
#     4 on GPUs 1-3, fused without and with 8, 16 and 32 MiB, three launches of 16 MiB
#     and 16 MiB in the qkv and gate_up windows alone, the plain step first and last;
#  3. the profiles of qwen2.5-72b (8 of 80 layers) at TP=1 and 4, and `gpulane tokens` of
#     the 8B at TP=1 (fused on GPU 2 beside fused + PF MiB on GPU 3, then swapped).
# MODE=tp4 (the 4-GPU kind): the all_reduce / all_gather sweeps at 4 and 2 ranks; `gpulane
# tokens` at TP=4 of the 72B and the 8B, then at TP=2 of both (GPUs 0,1) beside the 8B at
# TP=1 (GPUs 2, 3), each without and with PF MiB.
# MODE=h200 (one GPU, an H200: issue 32's 8B target is against 4000 GB/s): the 8B at TP=1,
# fused and fused + PF MiB, alternated.
# Then decode_round4.py's table (OUTDIR/decode-round8.md).
# Models are built from their configs with random weights (no network, no checkpoints).
set -uo pipefail
OUT=${1:?usage: run_decode_round8.sh OUTDIR [TARDIR]}
TARDIR=${2:-$OUT}
BUDGET_S=${BUDGET_S:-540}
MODE=${MODE:-probe}
PF=${PF:-16}
LAYERS=${LAYERS:-8}
DENSE=${DENSE:-qwen2.5-72b}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=../gpu/env.sh
source benchmarks/gpu/env.sh  # NCCL_NVLS_ENABLE=0 and the other multicast switches
one_call_dirs  # OUT, TARDIR absolute; out (log()'s folder), PY, G
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

pack() { pack_measured decode-round8; }  # benchmarks/gpu/env.sh
after_step() { pack; }

machine_txt "ran: ${COMMIT:-unknown} (the working tree sent; git's HEAD above may be stale)" \
  "mode: $MODE, l2_prefetch: $PF MiB"
echo "$(stamp) +0s budget ${BUDGET_S}s, $NGPU GPUs, MODE=$MODE PF=$PF" | tee "$OUT/steps.log"
NEED=4
[ "$MODE" = h200 ] && NEED=1
if [ "$NGPU" -lt "$NEED" ]; then
  echo "MODE=$MODE needs $NEED GPUs, found $NGPU" | tee -a "$OUT/steps.log"
  exit 2
fi

# profile NAME GPU MODEL TP VARIANTS [ARGS...]: one TP rank's kernels, collectives off
profile() {
  local name=$1 gpu=$2 model=$3 tp=$4 variants=$5; shift 5
  run "profile-$name" 45 240 env CUDA_VISIBLE_DEVICES="$gpu" \
    "$PY" benchmarks/inference/profile_decode.py --model "$model" --tp "$tp" --batch 1,16 \
    --input-len 1024 --steps 50 --variants "$variants" --out "$OUT/profile-$name" "$@"
}
# decode NAME GPUS TP MODEL [KEY=VALUE...]: decode steps, compute alone beside (build round8)
decode() {
  local name=$1 gpus=$2 tp=$3 model=$4; shift 4
  run "decode-$name" 40 120 env CUDA_VISIBLE_DEVICES="$gpus" "${G[@]}" tokens \
    model="$model" tp="$tp" pp=1 batch=1,16 input_len=1024 output_len=64 warmup=1 iters=1 \
    comm_off=true build=round8 results_dir="$OUT/decode" decode_attention=fused "$@"
}
sweep() {  # sweep NAME GPUS RANKS: the collectives the advisor and the table read
  run "$1" 25 60 env CUDA_VISIBLE_DEVICES="$2" "${G[@]}" sweep build=round8 \
    "collectives=[all_reduce,all_gather]" dtype=bfloat16 in_place=true graph=true \
    sizes.min=4K sizes.max=16M warmup=3 iters=10 ranks="$3" device=cuda progress=false \
    results_dir="$OUT/$1"
}
V=compiled:fused,compiled:fused:pf16,compiled:fused:pf16@bulk16kx128w4,compiled:fused:pf16@line128bx256w2,compiled:fused:pf16-qkv.gate_up,compiled:fused:pf8,compiled:fused:pf32,compiled:fused
P=(l2_prefetch="$PF")
L=(layers="$LAYERS")

run copy_bw 20 40 bash -c "CUDA_VISIBLE_DEVICES=0 $PY benchmarks/inference/copy_bw.py >'$OUT/copy_bw.json'"
if [ "$MODE" = probe ]; then
  run kernels 60 200 env CUDA_VISIBLE_DEVICES=0 "$PY" benchmarks/inference/l2_prefetch.py \
    --out "$OUT/kernels" &
  profile 8b-tp1 1 llama3-8b 1 "$V" &
  profile 8b-tp2 2 llama3-8b 2 "$V" &
  profile 8b-tp4 3 llama3-8b 4 "$V" &
  wait
  profile dense-tp4 0 "$DENSE" 4 "$V" --layers "$LAYERS" &
  profile dense-tp1 1 "$DENSE" 1 "$V" --layers "$LAYERS" &
  { decode 8b-tp1-a 2 1 llama3-8b; decode 8b-tp1-pf-b 2 1 llama3-8b "${P[@]}"; } &
  { decode 8b-tp1-pf-a 3 1 llama3-8b "${P[@]}"; decode 8b-tp1-b 3 1 llama3-8b; } &
  wait
elif [ "$MODE" = tp4 ]; then
  sweep sweep4 0,1,2,3 4
  sweep sweep2 0,1 2
  decode dense-tp4 0,1,2,3 4 "$DENSE" "${L[@]}"
  decode dense-tp4-pf 0,1,2,3 4 "$DENSE" "${L[@]}" "${P[@]}"
  decode 8b-tp4-pf 0,1,2,3 4 llama3-8b "${P[@]}"
  decode 8b-tp4 0,1,2,3 4 llama3-8b
  { decode 8b-tp2 0,1 2 llama3-8b; decode 8b-tp2-pf 0,1 2 llama3-8b "${P[@]}"
    decode dense-tp2-pf 0,1 2 "$DENSE" "${L[@]}" "${P[@]}"; decode dense-tp2 0,1 2 "$DENSE" "${L[@]}"; } &
  { decode 8b-tp1-c 2 1 llama3-8b; decode 8b-tp1-pf-c 2 1 llama3-8b "${P[@]}"; } &
  { decode 8b-tp1-pf-d 3 1 llama3-8b "${P[@]}"; decode 8b-tp1-d 3 1 llama3-8b; } &
  wait
  decode dense-tp4-pf-b 0,1,2,3 4 "$DENSE" "${L[@]}" "${P[@]}"
  decode dense-tp4-b 0,1,2,3 4 "$DENSE" "${L[@]}"
elif [ "$MODE" = h200 ]; then
  decode 8b-tp1-a 0 1 llama3-8b
  decode 8b-tp1-pf-a 0 1 llama3-8b "${P[@]}"
  decode 8b-tp1-pf-b 0 1 llama3-8b "${P[@]}"
  decode 8b-tp1-b 0 1 llama3-8b
fi

if [ "$(left)" -gt 5 ] && [ -d "$OUT/decode" ]; then
  timeout 60 "$PY" benchmarks/inference/decode_round4.py "$OUT" --judge "compiled+fused+pf$PF" \
    --md "$OUT/decode-round8.md" --rows "$OUT/decode-round8.jsonl" >"$OUT/decode-round8.txt" 2>&1
  rc=$?  # before $(stamp), which sets $? again
  echo "$(stamp) +${SECONDS}s table: exit $rc (1: a target missed)" | tee -a "$OUT/steps.log"
fi
pack
echo "== done in ${SECONDS} s: $TARDIR/decode-round8.tar"
