#!/usr/bin/env bash
# Decode steps before and after decode_kernels=gemv (issue 32, round 4): one device call
# of at most 8 minutes on 2 GPUs (nvidia-h200-x2: TP=1 and TP=2), and TP=4 as well where
# 4 GPUs are present.
#
#   bash benchmarks/inference/run_decode_round4.sh /tmp/r4 "$OUT"
#   tar xf decode-round4.tar && python benchmarks/inference/decode_round4.py r4 --md r4/decode-round4.md
#
# Works in OUTDIR and leaves TARDIR/decode-round4.tar (what OUTDIR measured, rewritten
# after every phase, so a cut call still brings back what was measured); every step
# runs under `timeout`, is logged with its UTC time to OUTDIR/steps.log, and is skipped
# (saying so) when less than it needs is left of BUDGET_S (default 450 s).
#
#  1. machine.txt, copy_bw.json (HBM copy rate: the roofline's), and the CUDA-graph
#     all_reduce / all_gather sweeps of build round4 at 2 ranks (and 4): the collective
#     time of a step (sweep2/, sweep4/).
#  2. decode steps at batch 1 and 16, input 1024, output 64, compute alone beside
#     (comm_off=true), before (decode_kernels=compiled: the compiled path with cuBLAS
#     products) then after (decode_kernels=gemv), for llama3-8b (32 layers; before with
#     decode_attention=triton) and DENSE (qwen2.5-72b, 8 of 80 layers; before with
#     decode_attention=bmm) at TP=1, 2 (and 4): OUTDIR/decode.
#  3. profile_decode.py's kernel counts of the 8B at TP=1, compiled:triton against
#     gemv:triton (OUTDIR/profile).
#  4. decode_round4.py's table (OUTDIR/decode-round4.md; CPU, also runnable from the tar).
# Models are built from their configs with random weights (no network, no checkpoints).
set -uo pipefail
OUT=${1:?usage: run_decode_round4.sh OUTDIR [TARDIR]}
TARDIR=${2:-$OUT}
BUDGET_S=${BUDGET_S:-450}
LAYERS=${LAYERS:-8}
DENSE=${DENSE:-qwen2.5-72b}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
mkdir -p "$OUT" "$TARDIR"
OUT=$(cd "$OUT" && pwd)
TARDIR=$(cd "$TARDIR" && pwd)
out=$OUT  # benchmarks/gpu/env.sh's log() writes to $out/steps.log
# shellcheck source=../gpu/env.sh
source benchmarks/gpu/env.sh  # NCCL_NVLS_ENABLE=0 and the other multicast switches
PY=${PYTHON:-python3}
G=("$PY" -m gpulane.cli)
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

stamp() { date -u +%H:%M:%S; }
left() { echo $((BUDGET_S - SECONDS)); }
# run NAME NEED_S LIMIT_S CMD...: CMD under `timeout`, output to OUT/NAME.txt; skipped
# when fewer than NEED_S seconds of the budget are left; the limit never passes the budget
run() {
  local name=$1 need=$2 limit=$3 l; shift 3
  l=$(left)
  if [ "$l" -lt "$need" ]; then
    echo "$(stamp) +${SECONDS}s $name: SKIPPED ($l s of the budget left, needs ~$need)" \
      | tee -a "$OUT/steps.log"
    return 0
  fi
  [ "$limit" -gt "$l" ] && limit=$l
  echo "$(stamp) +${SECONDS}s $name: start (limit ${limit}s): $*" | tee -a "$OUT/steps.log"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >"$OUT/$name.txt" 2>&1
  local rc=$?
  echo "$(stamp) +${SECONDS}s $name: exit $rc in $((SECONDS - t0)) s" | tee -a "$OUT/steps.log"
  grep -E "^  batch|error|Error" "$OUT/$name.txt" | head -6
  return 0
}
pack() {  # the tar of what was measured so far: rows.jsonl and config.yaml of each run,
  # every file at the top, profile/ (not the Parquet copies, rank logs, heartbeats)
  local base list=/tmp/round4-files.$$
  base=$(basename "$OUT")
  (
    cd "$(dirname "$OUT")" || exit 1
    { find "$base" -maxdepth 1 -type f ! -name 'decode-round4.tar*'
      find "$base" -mindepth 2 -type f \( -name rows.jsonl -o -name config.yaml \
        -o -path "$base/profile/*" \); } >"$list"
    tar -cf "$TARDIR/decode-round4.tar.tmp" -T "$list" \
      && mv "$TARDIR/decode-round4.tar.tmp" "$TARDIR/decode-round4.tar"
  )
  rm -f "$list"
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
} >"$OUT/machine.txt" 2>&1
head -6 "$OUT/machine.txt"
echo "$(stamp) +0s budget ${BUDGET_S}s, $NGPU GPUs: decode llama3-8b and $DENSE ($LAYERS layers)," \
  "compiled then gemv" | tee "$OUT/steps.log"
if [ "$NGPU" -lt 2 ]; then
  echo "this script needs 2 GPUs (TP=2), found $NGPU" | tee -a "$OUT/steps.log"
  exit 2
fi

run copy_bw 20 40 bash -c "CUDA_VISIBLE_DEVICES=0 $PY benchmarks/inference/copy_bw.py >'$OUT/copy_bw.json'"
sweep() {  # sweep RANKS GPUS: the collectives a decode step issues, as CUDA-graph replays
  run "sweep$1" 25 60 env CUDA_VISIBLE_DEVICES="$2" "${G[@]}" sweep build=round4 \
    "collectives=[all_reduce,all_gather]" dtype=bfloat16 in_place=true graph=true \
    sizes.min=4K sizes.max=16M warmup=3 iters=10 ranks="$1" device=cuda progress=false \
    results_dir="$OUT/sweep$1"
}
sweep 2 0,1
[ "$NGPU" -ge 4 ] && sweep 4 0,1,2,3
pack

# decode NAME GPUS TP MODEL KERNELS [KEY=VALUE...]: decode steps, compute alone beside
# (gemv's first run on a machine also compiles its triton kernels and tunes them: longer)
decode() {
  local name=$1 gpus=$2 tp=$3 model=$4 kernels=$5 need=40 limit=100; shift 5
  [ "$kernels" = gemv ] && need=50 limit=150
  run "decode-$name-$kernels" "$need" "$limit" env CUDA_VISIBLE_DEVICES="$gpus" "${G[@]}" tokens \
    model="$model" tp="$tp" pp=1 batch=1,16 input_len=1024 output_len=64 warmup=1 iters=1 \
    comm_off=true decode_kernels="$kernels" build=round4 results_dir="$OUT/decode" "$@"
}
pair() {  # pair NAME GPUS TP MODEL [KEY=VALUE...]: before, then after (alternated)
  local name=$1 gpus=$2 tp=$3 model=$4; shift 4
  decode "$name" "$gpus" "$tp" "$model" compiled "$@"
  decode "$name" "$gpus" "$tp" "$model" gemv "$@"
}
D8=(decode_attention=triton)
D72=(layers="$LAYERS" decode_attention=bmm)
profile() {  # profile GPU: kernel counts of the 8B at TP=1, before and after
  run profile-8b 60 110 env CUDA_VISIBLE_DEVICES="$1" "$PY" benchmarks/inference/profile_decode.py \
    --model llama3-8b --batch 1,16 --input-len 1024 --steps 50 \
    --variants compiled:triton,gemv:triton --out "$OUT/profile"
}

# TP=1 of both models side by side (one GPU each; the profile on a third where there is one)
pair 8b-tp1 0 1 llama3-8b "${D8[@]}" &
pair dense-tp1 1 1 "$DENSE" "${D72[@]}" &
[ "$NGPU" -ge 4 ] && profile 2 &
wait
pack
if [ "$NGPU" -ge 4 ]; then
  pair 8b-tp2 0,1 2 llama3-8b "${D8[@]}" &
  pair dense-tp2 2,3 2 "$DENSE" "${D72[@]}" &
  wait
  pack
  pair dense-tp4 0,1,2,3 4 "$DENSE" "${D72[@]}"
  pack
  pair 8b-tp4 0,1,2,3 4 llama3-8b "${D8[@]}"
else
  pair dense-tp2 0,1 2 "$DENSE" "${D72[@]}"
  pack
  pair 8b-tp2 0,1 2 llama3-8b "${D8[@]}"
  pack
  profile 0
fi
pack

# the table (CPU; also runnable elsewhere from OUTDIR alone)
if [ "$(left)" -gt 5 ]; then
  timeout 60 "$PY" benchmarks/inference/decode_round4.py "$OUT" --md "$OUT/decode-round4.md" \
    --rows "$OUT/decode-round4.jsonl" >"$OUT/decode-round4.txt" 2>&1
  echo "$(stamp) +${SECONDS}s table: exit $? (1: a target missed)" | tee -a "$OUT/steps.log"
fi
pack
echo "== done in ${SECONDS} s: $TARDIR/decode-round4.tar"
