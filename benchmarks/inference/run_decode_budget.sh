#!/usr/bin/env bash
# The decode budget (issue 32, first measured in round 10): the per-kernel floor
# measured on its own (floor_probe.py) and the profiles of TP rank 0's slices
# (profile_decode.py, decode_attention=fused, two runs each) that decode_budget.py sets
# against the targets; one device call on one GPU of at most 9 minutes.
#
#   COMMIT=$(git rev-parse --short HEAD) bash benchmarks/inference/run_decode_budget.sh /tmp/r10 "$OUT"
#   tar xf decode-round10.tar && python benchmarks/inference/decode_budget.py r10
#
# Leaves TARDIR/decode-round10.tar (rewritten after every step); every step runs under
# `timeout`, is logged with its UTC time to OUTDIR/steps.log, and is skipped (saying so)
# when less than it needs is left of BUDGET_S:
#  1. machine.txt, copy_bw.json (the roofline's copy rate);
#  2. floor_probe.py: a chained kernel, a chained add + RMSNorm, and every weight product
#     of a decode layer of the 8B and the 72B at TP=1, 2 and 4, one row and 16
#     (floor.json);
#  3. profile_decode.py of the 8B's slices at TP=1, 2 and 4 and the 72B's (8 of 80 layers)
#     at TP=4, compiled:fused twice;
#  4. decode_budget.py's table (OUTDIR/decode-budget.md).
# Models are built from their configs with random weights (no network, no checkpoints).
set -uo pipefail
OUT=${1:?usage: run_decode_budget.sh OUTDIR [TARDIR]}
TARDIR=${2:-$OUT}
BUDGET_S=${BUDGET_S:-540}
LAYERS=${LAYERS:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=../gpu/env.sh
source benchmarks/gpu/env.sh  # NCCL_NVLS_ENABLE=0 and the other multicast switches
one_call_dirs  # OUT, TARDIR absolute; out (log()'s folder), PY, G

pack() { pack_measured decode-round10; }  # benchmarks/gpu/env.sh
after_step() { pack; }

machine_txt "ran: ${COMMIT:-unknown} (the working tree sent; git's HEAD above may be stale)"
echo "$(stamp) +0s budget ${BUDGET_S}s" | tee "$OUT/steps.log"

# profile NAME MODEL TP [ARGS...]: one TP rank's kernels on GPU 0, collectives off
profile() {
  local name=$1 model=$2 tp=$3; shift 3
  run "profile-$name" 45 150 env CUDA_VISIBLE_DEVICES=0 \
    "$PY" benchmarks/inference/profile_decode.py --model "$model" --tp "$tp" --batch 1,16 \
    --input-len 1024 --steps 50 --variants compiled:fused,compiled:fused \
    --out "$OUT/profile-$name" "$@"
}

run copy_bw 20 40 bash -c "CUDA_VISIBLE_DEVICES=0 $PY benchmarks/inference/copy_bw.py >'$OUT/copy_bw.json'"
run floor 40 150 env CUDA_VISIBLE_DEVICES=0 "$PY" benchmarks/inference/floor_probe.py --out "$OUT"
profile 8b-tp4 llama3-8b 4
profile dense-tp4 qwen2.5-72b 4 --layers "$LAYERS"
profile 8b-tp2 llama3-8b 2
profile 8b-tp1 llama3-8b 1

if [ "$(left)" -gt 5 ]; then
  timeout 60 "$PY" benchmarks/inference/decode_budget.py "$OUT" --md "$OUT/decode-budget.md" \
    >"$OUT/decode-budget.txt" 2>&1
  rc=$?  # before $(stamp), which sets $? again
  echo "$(stamp) +${SECONDS}s table: exit $rc" | tee -a "$OUT/steps.log"
fi
pack
echo "== done in ${SECONDS} s: $TARDIR/decode-round10.tar"
