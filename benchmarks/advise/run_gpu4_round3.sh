#!/usr/bin/env bash
# The advisor on 4 GPUs, round 3 (issue 32): one device call of at most 9 minutes (4x H200).
#
#   bash benchmarks/advise/run_gpu4_round3.sh /tmp/r3 "$OUT"   # lent nvidia-h200-x4 / h100-x4
#   tar xf round3.tar && python benchmarks/advise/heldout4.py r3 --dense '' --md r3/heldout4.md
#
# Works in OUTDIR (/tmp/r3) and leaves TARDIR/round3.tar (what OUTDIR measured, in one
# file; rewritten after every phase, so a cut call still brings back what was measured)
# and prints progress; every
# step runs under `timeout`, is logged with its UTC time to OUTDIR/steps.log, and is
# skipped (saying so) when less than it needs is left of BUDGET_S (default 480 s), so the
# call ends before 9 minutes with whatever was measured. PART=table or PART=decode runs
# one half only (a second call, if the first was cut).
#
#  1. machine.txt, gpulane-topo.json, copy_bw.json (HBM copy and bf16 matrix rates).
#  2. table: `gpulane advise measure=true` for MOE (qwen3-30b-a3b, the model the pipeline
#     model was changed on) on 4 GPUs: it measures the collectives (2 and 4 ranks), probes
#     the topology, calibrates on TP=1 and TP=2 runs (GPUs 0,1); as soon as its sweeps are
#     written, HELDOUT (mixtral-8x7b, never looked at on 4 GPUs) is advised on those rows,
#     calibrating on GPUs 2,3 at the same time. Then the measured side: `gpulane tokens`
#     at TP=4, PP=2xTP=2 and PP=4 of both (OUTDIR/runs; the advisor never reads it).
#  3. decode: steps at batch 1 and 16, input 1024, output 64, compute alone beside
#     (comm_off=true) for llama3-8b (32 layers, decode_attention=triton: the live cache
#     only) and DENSE (qwen2.5-72b, 8 of 80 layers) at TP=1, 2, 4 (OUTDIR/decode), and
#     profile_decode.py's kernel counts for the 8B at TP=1 (OUTDIR/profile).
# Models are built from their configs with random weights (no network, no checkpoints).
set -uo pipefail
OUT=${1:?usage: run_gpu4_round3.sh OUTDIR [TARDIR]}
TARDIR=${2:-$OUT}
BUDGET_S=${BUDGET_S:-480}
PART=${PART:-all}
MOE=${MOE:-qwen3-30b-a3b}
HELDOUT=${HELDOUT:-mixtral-8x7b}
LAYERS=${LAYERS:-8}
DENSE=${DENSE:-qwen2.5-72b}
DENSE_ATTENTION=${DENSE_ATTENTION:-bmm}
GRID=(batch="${BATCHES:-4,32}" input_len="${INPUTS:-512}" output_len=64)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=../gpu/env.sh
source benchmarks/gpu/env.sh  # NCCL_NVLS_ENABLE=0 and the other multicast switches
one_call_dirs  # OUT, TARDIR absolute; out (log()'s folder), PY, G

# stamp, left and run (a budgeted step): benchmarks/gpu/env.sh
pack() {  # the tar of what was measured so far (again after every phase): comes back if cut
  # kept of each run directory: rows.jsonl, config.yaml, the probed topology.json (not the
  # Parquet copies, rank and NCCL logs, heartbeats); every file at the top; profile/
  local base list=/tmp/round3-files.$$
  base=$(basename "$OUT")
  (
    cd "$(dirname "$OUT")" || exit 1
    { find "$base" -maxdepth 1 -type f ! -name 'round3.tar*'
      find "$base" -mindepth 2 -type f \( -name rows.jsonl -o -name config.yaml \
        -o -name topology.json -o -path "$base/profile/*" \); } >"$list"
    tar -cf "$TARDIR/round3.tar.tmp" -T "$list" && mv "$TARDIR/round3.tar.tmp" "$TARDIR/round3.tar"
  )
  rm -f "$list"
}

machine_txt
echo "$(stamp) +0s budget ${BUDGET_S}s, part $PART: $MOE and $HELDOUT ($LAYERS layers), " \
  "decode llama3-8b and $DENSE" | tee "$OUT/steps.log"

run topo 20 40 bash -c "${G[*]} topo --json >'$OUT/gpulane-topo.json'"
run copy_bw 20 40 bash -c "CUDA_VISIBLE_DEVICES=0 $PY benchmarks/inference/copy_bw.py >'$OUT/copy_bw.json'"

advise() {  # advise NAME MODEL NEED LIMIT [KEY=VALUE...]: the advisor as a user runs it
  local name=$1 model=$2 need=$3 limit=$4; shift 4
  run "advise-$name" "$need" "$limit" "${G[@]}" advise model="$model" \
    model.num_layers="$LAYERS" gpus=4 "${GRID[@]}" measure=true results_dir="$OUT/advise" "$@"
}
measured() {  # measured NAME MODEL SPLIT: one 4-GPU split as a gpulane tokens run
  local name=$1 model=$2 split=$3 tag
  tag=${split// /-}
  tag=${tag//=/}
  # shellcheck disable=SC2086  # $split is two overrides
  run "tokens-$name-$tag" 35 75 "${G[@]}" tokens model="$model" layers="$LAYERS" $split \
    "${GRID[@]}" warmup=1 iters=1 comm_off=false build=advise-measured \
    results_dir="$OUT/runs"
}
decode() {  # decode NAME GPUS TP MODEL [KEY=VALUE...]: decode steps, compute alone beside
  local name=$1 gpus=$2 tp=$3 model=$4; shift 4
  run "decode-$name" 35 80 env CUDA_VISIBLE_DEVICES="$gpus" "${G[@]}" tokens model="$model" \
    tp="$tp" pp=1 batch=1,16 input_len=1024 output_len=64 warmup=1 iters=1 comm_off=true \
    build=advise-measured results_dir="$OUT/decode" "$@"
}
D8=(decode_attention="${DECODE_ATTENTION:-triton}")
D72=(layers="$LAYERS" decode_attention="$DENSE_ATTENTION")

if [ "$PART" != decode ]; then
  # the MoE model's advice measures the collectives; the held-out model's starts on its
  # rows once the sweeps are written (its own calibration then on GPUs 2,3)
  advise moe "$MOE" 90 170 &
  moe_pid=$!
  until grep -q "calibrating compute" "$OUT/advise-moe.txt" 2>/dev/null \
    || ! kill -0 "$moe_pid" 2>/dev/null || [ "$(left)" -lt 60 ]; do sleep 2; done
  (export CUDA_VISIBLE_DEVICES=2,3; advise heldout "$HELDOUT" 60 150 run="$OUT/advise") &
  wait
  pack
  for split in "tp=4 pp=1" "tp=2 pp=2" "tp=1 pp=4"; do
    measured moe "$MOE" "$split"
    measured heldout "$HELDOUT" "$split"
  done
  pack
fi

if [ "$PART" != table ]; then
  decode 8b-tp4 0,1,2,3 4 llama3-8b "${D8[@]}"
  decode dense-tp4 0,1,2,3 4 "$DENSE" "${D72[@]}"
  pack
  decode 8b-tp1 0 1 llama3-8b "${D8[@]}" &
  decode dense-tp2 1,2 2 "$DENSE" "${D72[@]}" &
  run profile-8b 40 75 env CUDA_VISIBLE_DEVICES=3 "$PY" benchmarks/inference/profile_decode.py \
    --model llama3-8b --batch 1,16 --input-len 1024 --steps 50 \
    --variants compiled:bmm,compiled:triton --out "$OUT/profile" &
  wait
  pack
  decode 8b-tp2 0,1 2 llama3-8b "${D8[@]}" &
  decode dense-tp1 2 1 "$DENSE" "${D72[@]}" &
  wait
fi

# the table (CPU; also runnable elsewhere from OUTDIR alone)
if [ "$(left)" -gt 5 ]; then
  timeout 30 "$PY" benchmarks/advise/heldout4.py "$OUT" --dense '' --md "$OUT/heldout4.md" \
    --rows "$OUT/heldout4.jsonl" >"$OUT/heldout4.txt" 2>&1
  rc=$?  # before $(stamp), which sets $? again
  echo "$(stamp) +${SECONDS}s table: exit $rc (1: a figure or pick missed)" | tee -a "$OUT/steps.log"
fi
pack
echo "== done in ${SECONDS} s: $TARDIR/round3.tar"
