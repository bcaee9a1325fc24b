#!/usr/bin/env bash
# Decode steps of main's compiled path at TP=1, 2 and 4 on the lent 4-GPU kind (issue 32,
# round 6): one device call of at most 9 minutes.
#
#   bash benchmarks/inference/run_decode_round6.sh /tmp/r6 "$OUT"     # nvidia-h200-x4 / h100-x4
#   tar xf decode-round6.tar && python benchmarks/inference/decode_round4.py r6 --judge compiled
#
# Works in OUTDIR and leaves TARDIR/decode-round6.tar (what OUTDIR measured, rewritten after
# every step, so a cut call still brings back what was measured); every step runs under
# `timeout`, is logged with its UTC time to OUTDIR/steps.log, and is skipped (saying so)
# when less than it needs is left of BUDGET_S (default 540 s).
#
#  1. machine.txt, copy_bw.json (the HBM copy rate: the roofline's), the CUDA-graph
#     all_reduce / all_gather sweeps at 4 and 2 ranks (a step's collective time: sweep4/,
#     sweep2/).
#  2. profile_decode.py, one GPU each, four at once: the kernels of TP rank 0's slice of
#     llama3-8b at TP=1, 2 and 4 and of DENSE (qwen2.5-72b, 8 of 80 layers) at TP=4,
#     collectives off (OUTDIR/profile-*), batch 1 and 16; then the same four with
#     TORCHINDUCTOR_ENABLE_PDL=1 (inductor's kernels with programmatic dependent launch:
#     OUTDIR/profile-*-pdl), the one launch-latency lever that needs no new kernel.
#  3. `gpulane tokens` decode steps at batch 1 and 16, input 1024, output 64, compute alone
#     beside (comm_off=true), the compiled path (the 8B with decode_attention=triton,
#     the 72B with bmm), TP=1 and 2 of both models side by side on disjoint GPUs, then TP=4
#     of each (OUTDIR/decode); where the budget holds, the TP=4 runs again with PDL on
#     (build round6-pdl).
#  4. decode_round4.py's table of the compiled rows against issue 32's targets
#     (OUTDIR/decode-round6.md; CPU, also runnable from the tar).
#
# MODE=autotune instead: inductor's max-autotune (compile_mode=max-autotune-no-cudagraphs:
# every product of the compiled functions timed against triton templates, which can take
# their elementwise neighbours) beside the default, alternated in the same call: the four
# profiles in each mode (OUTDIR/profile-*-at, profile-*), then the TP=4 tokens runs of both
# models, default then autotune (build round6 / round6-at), then TP=1 of the 8B.
# MODE=cdt: the same with TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 alone (default mode
# otherwise: one-row products become tuned reductions with their norm or SiLU x up
# inside, 16-row products stay cuBLAS): profiles (-cdt), TP=4 tokens runs (round6-cdt).
# Step times for the budget, from round 5's steps.log (2x H200): a tokens run 37-51 s, a
# profile of two variants 24 s, a sweep 14 s.
# Models are built from their configs with random weights (no network, no checkpoints).
set -uo pipefail
OUT=${1:?usage: run_decode_round6.sh OUTDIR [TARDIR]}
TARDIR=${2:-$OUT}
BUDGET_S=${BUDGET_S:-540}
MODE=${MODE:-pdl}
AT=max-autotune-no-cudagraphs
LAYERS=${LAYERS:-8}
DENSE=${DENSE:-qwen2.5-72b}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=../gpu/env.sh
source benchmarks/gpu/env.sh  # NCCL_NVLS_ENABLE=0 and the other multicast switches
one_call_dirs  # OUT, TARDIR absolute; out (log()'s folder), PY, G
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

# stamp, left and run (a budgeted step, then after_step): benchmarks/gpu/env.sh
pack() { pack_measured decode-round6; }  # benchmarks/gpu/env.sh
after_step() { pack; }  # the tar rewritten after every step

machine_txt
echo "$(stamp) +0s budget ${BUDGET_S}s, $NGPU GPUs: decode llama3-8b and $DENSE ($LAYERS layers)," \
  "TP=1, 2, 4" | tee "$OUT/steps.log"
if [ "$NGPU" -lt 4 ]; then
  echo "this script needs 4 GPUs (TP=4), found $NGPU" | tee -a "$OUT/steps.log"
  exit 2
fi

run copy_bw 20 40 bash -c "CUDA_VISIBLE_DEVICES=0 $PY benchmarks/inference/copy_bw.py >'$OUT/copy_bw.json'"
sweep() {  # sweep RANKS GPUS: the collectives a decode step issues, as CUDA-graph replays
  run "sweep$1" 25 60 env CUDA_VISIBLE_DEVICES="$2" "${G[@]}" sweep build=round6 \
    "collectives=[all_reduce,all_gather]" dtype=bfloat16 in_place=true graph=true \
    sizes.min=4K sizes.max=16M warmup=3 iters=10 ranks="$1" device=cuda progress=false \
    results_dir="$OUT/sweep$1"
}
sweep 4 0,1,2,3
[ "$MODE" = pdl ] && sweep 2 0,1  # only MODE=pdl runs a TP=2 step

# profile NAME GPU MODEL TP VARIANT PDL [ARGS...]: one TP rank's kernels, collectives off
profile() {
  local name=$1 gpu=$2 model=$3 tp=$4 variant=$5 pdl=$6 limit=120; shift 6
  [[ $name == *-at || $name == *-cdt ]] && limit=240  # tuning times candidates
  run "profile-$name" 45 "$limit" env CUDA_VISIBLE_DEVICES="$gpu" TORCHINDUCTOR_ENABLE_PDL="$pdl" \
    "$PY" benchmarks/inference/profile_decode.py --model "$model" --tp "$tp" --batch 1,16 \
    --input-len 1024 --steps 50 --variants "$variant" --out "$OUT/profile-$name" "$@"
}
profiles() {  # profiles SUFFIX PDL [ARGS...]: the four slices at once, one GPU each
  local suffix=$1 pdl=$2; shift 2
  profile "8b-tp1$suffix" 0 llama3-8b 1 compiled:triton "$pdl" "$@" &
  profile "8b-tp2$suffix" 1 llama3-8b 2 compiled:triton "$pdl" "$@" &
  profile "8b-tp4$suffix" 2 llama3-8b 4 compiled:triton "$pdl" "$@" &
  profile "dense-tp4$suffix" 3 "$DENSE" 4 compiled:bmm "$pdl" --layers "$LAYERS" "$@" &
  wait
}

# decode NAME GPUS TP MODEL BUILD [KEY=VALUE...]: decode steps, compute alone beside
decode() {
  local name=$1 gpus=$2 tp=$3 model=$4 build=$5 limit=100; shift 5
  [[ $name == *-at || $name == *-cdt ]] && limit=200  # and the prefill shapes' too
  run "decode-$name" 40 "$limit" env CUDA_VISIBLE_DEVICES="$gpus" "${G[@]}" tokens \
    model="$model" tp="$tp" pp=1 batch=1,16 input_len=1024 output_len=64 warmup=1 iters=1 \
    comm_off=true build="$build" results_dir="$OUT/decode" "$@"
}
D8=(decode_attention=triton)
D72=(layers="$LAYERS" decode_attention=bmm)
if [ "$MODE" = autotune ]; then
  # max-autotune first (its compilations time every product: the longer step), so a cut
  # call still has both modes' profiles
  profiles -at 0 --compile-mode "$AT"
  profiles "" 0
  decode dense-tp4 0,1,2,3 4 "$DENSE" round6 "${D72[@]}"
  decode dense-tp4-at 0,1,2,3 4 "$DENSE" round6-at "${D72[@]}" compile_mode="$AT"
  decode 8b-tp4 0,1,2,3 4 llama3-8b round6 "${D8[@]}"
  decode 8b-tp4-at 0,1,2,3 4 llama3-8b round6-at "${D8[@]}" compile_mode="$AT"
  decode 8b-tp1 0 1 llama3-8b round6 "${D8[@]}" &
  decode 8b-tp1-at 1 1 llama3-8b round6-at "${D8[@]}" compile_mode="$AT" &
  wait
elif [ "$MODE" = cdt ]; then
  export TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1
  profiles -cdt 0
  decode dense-tp4-cdt 0,1,2,3 4 "$DENSE" round6-cdt "${D72[@]}"
  decode 8b-tp4-cdt 0,1,2,3 4 llama3-8b round6-cdt "${D8[@]}"
  unset TORCHINDUCTOR_COORDINATE_DESCENT_TUNING
  profiles "" 0
  decode dense-tp4 0,1,2,3 4 "$DENSE" round6 "${D72[@]}"
  decode 8b-tp4 0,1,2,3 4 llama3-8b round6 "${D8[@]}"
else
  profiles "" 0
  profiles -pdl 1
  decode 8b-tp1 0 1 llama3-8b round6 "${D8[@]}" &
  decode dense-tp1 1 1 "$DENSE" round6 "${D72[@]}" &
  decode 8b-tp2 2,3 2 llama3-8b round6 "${D8[@]}" &
  wait
  decode dense-tp2 0,1 2 "$DENSE" round6 "${D72[@]}"
  decode dense-tp4 0,1,2,3 4 "$DENSE" round6 "${D72[@]}"
  decode 8b-tp4 0,1,2,3 4 llama3-8b round6 "${D8[@]}"
  export TORCHINDUCTOR_ENABLE_PDL=1
  decode dense-tp4-pdl 0,1,2,3 4 "$DENSE" round6-pdl "${D72[@]}"
  decode 8b-tp4-pdl 0,1,2,3 4 llama3-8b round6-pdl "${D8[@]}"
  unset TORCHINDUCTOR_ENABLE_PDL
fi

# the table (CPU; also runnable elsewhere from OUTDIR alone)
if [ "$(left)" -gt 5 ]; then
  timeout 60 "$PY" benchmarks/inference/decode_round4.py "$OUT" --judge compiled \
    --md "$OUT/decode-round6.md" --rows "$OUT/decode-round6.jsonl" >"$OUT/decode-round6.txt" 2>&1
  rc=$?  # before $(stamp), which sets $? again
  echo "$(stamp) +${SECONDS}s table: exit $rc (1: a target missed)" | tee -a "$OUT/steps.log"
fi
pack
echo "== done in ${SECONDS} s: $TARDIR/decode-round6.tar"
