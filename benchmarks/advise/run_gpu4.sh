#!/usr/bin/env bash
# The advisor on 4 GPUs (issue 32), in one device call of about 8 minutes (4x H200).
#
#   bash benchmarks/advise/run_gpu4.sh OUTDIR        # on the lent nvidia-h200-x4 / h100-x4
#   python benchmarks/advise/heldout4.py OUTDIR --md OUTDIR/heldout4.md   # CPU, afterwards
#
# Steps, in order of what matters most (each under `timeout`, each logged with its UTC
# time and seconds to OUTDIR/steps.log; a step that would not fit in what is left of
# BUDGET_S seconds is skipped and says so, so a partial run is still read by heldout4.py):
#  1. machine.txt; gpulane-topo.json (`gpulane topo --json`, for the record; not named
#     topology.json, so that the advice finds only the one it probed itself); copy_bw.json
#     (HBM copy rate and bf16 matrix rate, benchmarks/inference/copy_bw.py).
#  2. `gpulane advise measure=true` for DENSE (qwen2.5-72b, 8 of 80 layers) on 4 GPUs,
#     batch 4,32, input 512,2048, output 64: it measures the collectives (gpulane sweep,
#     2 and 4 ranks), probes the topology and writes it beside them, runs the short
#     calibration of the model itself (TP=1 and TP=2) and prints its advice
#     (advise-dense.txt); everything it made is under OUTDIR/advise.
#  3. the same for MOE (qwen3-30b-a3b, 8 of 48 layers: 128 experts, top-8) on the
#     collective rows of step 2 (measure=true then only calibrates; GPUs 0,1), while
#     GPUs 2,3 time llama3-8b's decode step at TP=1 and TP=2 (batch 1,16, input 1024,
#     output 64, compute-only times beside; OUTDIR/decode).
#  4. the measured side: `gpulane tokens` of both models at TP=4, PP=2xTP=2 and PP=4,
#     same grid (OUTDIR/runs; the advisor never reads these), split by split.
#  5. llama3-8b's decode step at TP=4. The 70B-class decode figures come from DENSE's
#     runs (TP=1 and TP=2 calibration of step 2, TP=4 of step 4).
# Models: qwen2.5-72b and qwen3-30b-a3b were never run by this project before (held out).
set -uo pipefail
OUT=${1:?usage: run_gpu4.sh OUTDIR}
BUDGET_S=${BUDGET_S:-470}
DENSE=${DENSE:-qwen2.5-72b}
DENSE_LAYERS=${DENSE_LAYERS:-8}
MOE=${MOE:-qwen3-30b-a3b}
MOE_LAYERS=${MOE_LAYERS:-8}
# the workloads (env overrides, e.g. INPUTS=512 to halve the time of every run)
GRID=(batch="${BATCHES:-4,32}" input_len="${INPUTS:-512,2048}" output_len=64)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
out=$OUT  # benchmarks/gpu/env.sh's log() writes to $out/steps.log
# shellcheck source=../gpu/env.sh
source benchmarks/gpu/env.sh
PY=${PYTHON:-python3}
G=("$PY" -m gpulane.cli)

# stamp, left and run (a budgeted step): benchmarks/gpu/env.sh

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
echo "$(stamp) +0s budget ${BUDGET_S}s: $DENSE ($DENSE_LAYERS layers), $MOE ($MOE_LAYERS layers)" \
  | tee "$OUT/steps.log"

# 1. topology and rates (stdout straight to the JSON files; their stderr to NAME.txt)
run topo 20 60 bash -c "${G[*]} topo --json >'$OUT/gpulane-topo.json'"
run copy_bw 20 60 bash -c "CUDA_VISIBLE_DEVICES=0 $PY benchmarks/inference/copy_bw.py >'$OUT/copy_bw.json'"

advise() {  # advise NAME MODEL LAYERS [KEY=VALUE...]: the advisor as a user runs it
  local name=$1 model=$2 layers=$3; shift 3
  run "advise-$name" 90 200 "${G[@]}" advise model="$model" model.num_layers="$layers" \
    gpus=4 "${GRID[@]}" measure=true results_dir="$OUT/advise" "$@"
}
measured() {  # measured NAME MODEL LAYERS SPLIT: one 4-GPU split as a gpulane tokens run
  local name=$1 model=$2 layers=$3 split=$4 tag
  tag=${split// /-}
  tag=${tag//=/}
  # shellcheck disable=SC2086  # $split is two overrides
  run "tokens-$name-$tag" 45 120 "${G[@]}" tokens model="$model" layers="$layers" $split \
    "${GRID[@]}" warmup=1 iters=1 comm_off=false build=advise-measured \
    results_dir="$OUT/runs"
}
# decode_attention=triton: attention over the live positions of the cache only (two
# kernels); the 70B-class rows keep the default (bmm over the whole cache)
D=(model=llama3-8b pp=1 batch=1,16 input_len=1024 output_len=64 warmup=1 iters=1
   comm_off=true decode_attention="${DECODE_ATTENTION:-triton}" build=advise-measured
   results_dir="$OUT/decode")

# 2. dense: the collectives (4 and 2 ranks), the topology, the calibration, the advice
advise dense "$DENSE" "$DENSE_LAYERS"

# 3. the MoE model's advice on those collective rows (measure=true then only calibrates:
# TP=1 and TP=2 runs, here on GPUs 0,1), while GPUs 2,3 time the 8B's decode steps at
# TP=1 and TP=2 (disjoint GPUs: neither run shares a GPU or a link with the other)
if [ $((BUDGET_S - SECONDS)) -ge 60 ]; then
  (export CUDA_VISIBLE_DEVICES=0,1; advise moe "$MOE" "$MOE_LAYERS" run="$OUT/advise") &
  {
    run decode-8b-tp1 40 100 env CUDA_VISIBLE_DEVICES=2 "${G[@]}" tokens tp=1 "${D[@]}"
    run decode-8b-tp2 40 100 env CUDA_VISIBLE_DEVICES=2,3 "${G[@]}" tokens tp=2 "${D[@]}"
  } &
  wait
fi

# 4. the measured side, split by split for both models (a cut run keeps both models)
for split in "tp=4 pp=1" "tp=2 pp=2" "tp=1 pp=4"; do
  measured dense "$DENSE" "$DENSE_LAYERS" "$split"
  measured moe "$MOE" "$MOE_LAYERS" "$split"
done

# 5. the 8B's decode step at TP=4
run decode-8b-tp4 40 100 "${G[@]}" tokens tp=4 "${D[@]}"

# the table (CPU work; also runnable elsewhere from OUTDIR alone)
"$PY" benchmarks/advise/heldout4.py "$OUT" --md "$OUT/heldout4.md" --rows "$OUT/heldout4.jsonl" \
  >"$OUT/heldout4.txt" 2>&1
rc=$?
echo "$(stamp) +${SECONDS}s table: exit $rc (heldout4.md; 1: a figure or pick missed)" \
  | tee -a "$OUT/steps.log"
echo "== done: $OUT"
