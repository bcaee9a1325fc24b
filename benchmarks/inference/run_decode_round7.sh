#!/usr/bin/env bash
# Decode steps with decode_attention=fused (one kernel: rotary, cache write, split-K
# attention and its merge) beside the compiled path as it was (the 8B with
# decode_attention=triton, the 72B with bmm), issue 32 round 7: one device call on the
# 2-GPU kind (nvidia-h200-x2) of at most 9 minutes.
#
#   COMMIT=$(git rev-parse --short HEAD) MODE=kernels bash benchmarks/inference/run_decode_round7.sh /tmp/r7 "$OUT"
#   tar xf decode-round7.tar && python benchmarks/inference/decode_round4.py r7 --judge compiled+fused
#
# Leaves TARDIR/decode-round7.tar (rewritten after every step, so a cut call still brings
# back what was measured); every step runs under `timeout`, is logged with its UTC time to
# OUTDIR/steps.log, and is skipped (saying so) when less than it needs is left of BUDGET_S.
#
# MODE=kernels (the first call):
#  1. machine.txt, copy_bw.json (the roofline's copy rate);
#  2. attention_kernels.py (GPU 0): the attention kernels alone over the fused kernel's
#     launch shapes, and cuBLAS with reduced-precision split-K reductions allowed or not;
#     beside it (GPU 1) profile_decode.py of the 8B at TP=1, compiled:triton and
#     compiled:fused alternated twice;
#  3. the profiles of TP rank 0's slices (one GPU each, collectives off): the 8B at TP=2
#     and 4, qwen2.5-72b (8 of 80 layers) at TP=1 and 4 (bmm against fused);
#  4. `gpulane tokens` of the 8B at TP=1, triton on GPU 0 beside fused on GPU 1, then the
#     GPUs swapped.
# MODE=kernels2: step 2 again (after a change to the kernel), the profile with
# TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 (profile-8b-tp1-cdt).
# MODE=steps (the last call): the all_reduce / all_gather sweep at 2 ranks; the profiles of
# the 8B at TP=1 and the 72B's TP=4 slice again (the kernel's launch rule as chosen); `gpulane
# tokens` of the 72B at TP=1 (bmm and fused, on both GPUs, swapped), the 8B and the 72B at
# TP=2 (the compiled path, then fused); the 8B at TP=1 again (fused on GPU 0 beside triton).
# MODE=tp4 (the 4-GPU kind): the sweep at 4 ranks; `gpulane tokens` at TP=4 of the 72B
# (bmm, fused, fused, bmm) and the 8B (triton, fused).
# MODE=h200 (one GPU, an H200: issue 32's 8B target is against 4000 GB/s): the 8B at TP=1,
# fused, triton, fused with TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 (build round7-cdt),
# then (as the budget allows) fused and fused with it again.
# Then decode_round4.py's table (OUTDIR/decode-round7.md).
# Models are built from their configs with random weights (no network, no checkpoints).
set -uo pipefail
OUT=${1:?usage: run_decode_round7.sh OUTDIR [TARDIR]}
TARDIR=${2:-$OUT}
BUDGET_S=${BUDGET_S:-540}
MODE=${MODE:-kernels}
LAYERS=${LAYERS:-8}
DENSE=${DENSE:-qwen2.5-72b}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=../gpu/env.sh
source benchmarks/gpu/env.sh  # NCCL_NVLS_ENABLE=0 and the other multicast switches
one_call_dirs  # OUT, TARDIR absolute; out (log()'s folder), PY, G
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

pack() { pack_measured decode-round7; }  # benchmarks/gpu/env.sh
after_step() { pack; }

machine_txt "ran: ${COMMIT:-unknown} (the working tree sent; git's HEAD above may be stale)" \
  "mode: $MODE"
echo "$(stamp) +0s budget ${BUDGET_S}s, $NGPU GPUs, MODE=$MODE" | tee "$OUT/steps.log"
NEED=2
case $MODE in tp4) NEED=4 ;; h200) NEED=1 ;; esac
if [ "$NGPU" -lt "$NEED" ]; then
  echo "MODE=$MODE needs $NEED GPUs, found $NGPU" | tee -a "$OUT/steps.log"
  exit 2
fi

# profile NAME GPU MODEL TP VARIANTS [ARGS...]: one TP rank's kernels, collectives off
profile() {
  local name=$1 gpu=$2 model=$3 tp=$4 variants=$5; shift 5
  local limit=150; [[ $name == *-cdt ]] && limit=240  # tuning times candidates
  run "profile-$name" 45 "$limit" env CUDA_VISIBLE_DEVICES="$gpu" \
    "$PY" benchmarks/inference/profile_decode.py --model "$model" --tp "$tp" --batch 1,16 \
    --input-len 1024 --steps 50 --variants "$variants" --out "$OUT/profile-$name" "$@"
}
# decode NAME GPUS TP MODEL [KEY=VALUE...]: decode steps, compute alone beside (build round7)
decode() {
  local name=$1 gpus=$2 tp=$3 model=$4; shift 4
  run "decode-$name" 40 110 env CUDA_VISIBLE_DEVICES="$gpus" "${G[@]}" tokens \
    model="$model" tp="$tp" pp=1 batch=1,16 input_len=1024 output_len=64 warmup=1 iters=1 \
    comm_off=true build=round7 results_dir="$OUT/decode" "$@"
}
T8=compiled:triton,compiled:fused,compiled:triton,compiled:fused
T72=compiled:bmm,compiled:fused,compiled:bmm,compiled:fused
D8=(decode_attention=triton)
D72=(layers="$LAYERS" decode_attention=bmm)
F8=(decode_attention=fused)
F72=(layers="$LAYERS" decode_attention=fused)

run copy_bw 20 40 bash -c "CUDA_VISIBLE_DEVICES=0 $PY benchmarks/inference/copy_bw.py >'$OUT/copy_bw.json'"
if [ "$MODE" = tp4 ]; then
  run sweep4 25 60 env CUDA_VISIBLE_DEVICES=0,1,2,3 "${G[@]}" sweep build=round7 \
    "collectives=[all_reduce,all_gather]" dtype=bfloat16 in_place=true graph=true \
    sizes.min=4K sizes.max=16M warmup=3 iters=10 ranks=4 device=cuda progress=false \
    results_dir="$OUT/sweep4"
  decode dense-tp4 0,1,2,3 4 "$DENSE" "${D72[@]}"
  decode dense-tp4-fused 0,1,2,3 4 "$DENSE" "${F72[@]}"
  decode 8b-tp4 0,1,2,3 4 llama3-8b "${D8[@]}"
  decode 8b-tp4-fused 0,1,2,3 4 llama3-8b "${F8[@]}"
  decode dense-tp4-fused-b 0,1,2,3 4 "$DENSE" "${F72[@]}"
  decode dense-tp4-b 0,1,2,3 4 "$DENSE" "${D72[@]}"
elif [ "$MODE" = h200 ]; then
  decode 8b-tp1-fused 0 1 llama3-8b "${F8[@]}"
  decode 8b-tp1 0 1 llama3-8b "${D8[@]}"
  TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 decode 8b-tp1-fused-cdt 0 1 llama3-8b \
    build=round7-cdt "${F8[@]}"
  decode 8b-tp1-fused-b 0 1 llama3-8b "${F8[@]}"
  TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 decode 8b-tp1-fused-cdt-b 0 1 llama3-8b \
    build=round7-cdt "${F8[@]}"
elif [ "$MODE" = kernels2 ]; then  # the kernels again, the 8B's TP=1 profile with CDT beside
  run kernels 60 200 env CUDA_VISIBLE_DEVICES=0 "$PY" benchmarks/inference/attention_kernels.py \
    --out "$OUT/kernels" &
  TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 profile 8b-tp1-cdt 1 llama3-8b 1 "$T8" &
  wait
elif [ "$MODE" = kernels ]; then
  run kernels 60 200 env CUDA_VISIBLE_DEVICES=0 "$PY" benchmarks/inference/attention_kernels.py \
    --out "$OUT/kernels" &
  profile 8b-tp1 1 llama3-8b 1 "$T8" &
  wait
  profile 8b-tp2 0 llama3-8b 2 "$T8" &
  profile 8b-tp4 1 llama3-8b 4 "$T8" &
  wait
  profile dense-tp4 0 "$DENSE" 4 "$T72" --layers "$LAYERS" &
  profile dense-tp1 1 "$DENSE" 1 "$T72" --layers "$LAYERS" &
  wait
  decode 8b-tp1-a 0 1 llama3-8b "${D8[@]}" &
  decode 8b-tp1-fused-a 1 1 llama3-8b "${F8[@]}" &
  wait
  decode 8b-tp1-fused-b 0 1 llama3-8b "${F8[@]}" &
  decode 8b-tp1-b 1 1 llama3-8b "${D8[@]}" &
  wait
else
  run sweep2 25 60 env CUDA_VISIBLE_DEVICES=0,1 "${G[@]}" sweep build=round7 \
    "collectives=[all_reduce,all_gather]" dtype=bfloat16 in_place=true graph=true \
    sizes.min=4K sizes.max=16M warmup=3 iters=10 ranks=2 device=cuda progress=false \
    results_dir="$OUT/sweep2"
  profile 8b-tp1 0 llama3-8b 1 "$T8" &
  profile dense-tp4 1 "$DENSE" 4 "$T72" --layers "$LAYERS" &
  wait
  decode dense-tp1-a 0 1 "$DENSE" "${D72[@]}" &
  decode dense-tp1-fused-a 1 1 "$DENSE" "${F72[@]}" &
  wait
  decode dense-tp1-fused-b 0 1 "$DENSE" "${F72[@]}" &
  decode dense-tp1-b 1 1 "$DENSE" "${D72[@]}" &
  wait
  decode 8b-tp2 0,1 2 llama3-8b "${D8[@]}"
  decode 8b-tp2-fused 0,1 2 llama3-8b "${F8[@]}"
  decode dense-tp2 0,1 2 "$DENSE" "${D72[@]}"
  decode dense-tp2-fused 0,1 2 "$DENSE" "${F72[@]}"
  decode 8b-tp1-fused-c 0 1 llama3-8b "${F8[@]}" &
  decode 8b-tp1-c 1 1 llama3-8b "${D8[@]}" &
  wait
fi

if [ "$(left)" -gt 5 ] && [ -d "$OUT/decode" ]; then
  timeout 60 "$PY" benchmarks/inference/decode_round4.py "$OUT" --judge compiled+fused \
    --md "$OUT/decode-round7.md" --rows "$OUT/decode-round7.jsonl" >"$OUT/decode-round7.txt" 2>&1
  rc=$?  # before $(stamp), which sets $? again
  echo "$(stamp) +${SECONDS}s table: exit $rc (1: a target missed)" | tee -a "$OUT/steps.log"
fi
pack
echo "== done in ${SECONDS} s: $TARDIR/decode-round7.tar"
