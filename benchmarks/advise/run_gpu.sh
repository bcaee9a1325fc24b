#!/usr/bin/env bash
# The advisor on 4 GPUs (or GPUS=2), as measured in round 4 (issue 32): one device call of at most 9 minutes, the
# table only, with every split measured (PP=4 included; round 3b skipped it for budget).
#
#   bash benchmarks/advise/run_gpu.sh /tmp/r4 "$OUT"          # lent nvidia-h200-x4 / h100-x4
#   GPUS=2 bash benchmarks/advise/run_gpu.sh /tmp/r4 "$OUT"   # fallback: a 2-GPU kind
#   tar xf round4.tar && python benchmarks/advise/heldout4.py r4 --dense '' --gpus 4 --md r4/heldout4.md
#
# Works in OUTDIR and leaves TARDIR/round4.tar (what OUTDIR measured, rewritten after every
# step, so a cut call still brings back what was measured); every step runs under
# `timeout`, is logged with its UTC time and seconds to OUTDIR/steps.log, and is skipped
# (saying so) when less than it needs is left of BUDGET_S (default 510 s).
#
#  1. machine.txt, gpulane-topo.json (no copy_bw.json: this call times no decode ratios).
#  2. `gpulane advise gpus=$GPUS batch=4,32 input_len=512 output_len=64 measure=true` for MOE
#     (qwen3-30b-a3b, the model the advisor was changed on): it measures the collectives,
#     probes the topology, calibrates on TP=1 and TP=2 runs (GPUs 0,1). As soon as its sweeps
#     are written, HELDOUT (llama3-70b, 8 of 80 layers: never run on 4 GPUs by the project,
#     and none of its rows looked at while the advisor was changed) is advised on those rows,
#     calibrating on GPUs 2,3 at the same time (GPUS=2: after the MoE's, on GPUs 0,1).
#  3. `gpulane tokens` of both at every split (GPUS=4: PP=4 first, as round 3b never got to
#     it, then TP=4, then PP=2xTP=2; GPUS=2: PP=2, then TP=2), into OUTDIR/runs, which the
#     advisor never reads.
#  4. heldout4.py's table from OUTDIR alone (also runnable later on a CPU).
# Step times for the budget, from round 3b's steps.log (4x H200): advise of the MoE 167 s
# (sweeps and calibration), the held-out model's beside it 97 s, each tokens run 40-48 s.
# Models are built from their configs with random weights (no network, no checkpoints).
set -uo pipefail
OUT=${1:?usage: run_gpu.sh OUTDIR [TARDIR]}
TARDIR=${2:-$OUT}
BUDGET_S=${BUDGET_S:-510}
GPUS=${GPUS:-4}
MOE=${MOE:-qwen3-30b-a3b}
HELDOUT=${HELDOUT:-llama3-70b}
LAYERS=${LAYERS:-8}
GRID=(batch="${BATCHES:-4,32}" input_len="${INPUTS:-512}" output_len=64)
case "$GPUS" in
  4) SPLITS=("tp=1 pp=4" "tp=4 pp=1" "tp=2 pp=2") ;;
  2) SPLITS=("tp=1 pp=2" "tp=2 pp=1") ;;
  *) echo "run_gpu.sh: error: GPUS=$GPUS: 4 or 2" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=../gpu/env.sh
source benchmarks/gpu/env.sh  # NCCL_NVLS_ENABLE=0 and the other multicast switches
one_call_dirs  # OUT, TARDIR absolute; out (log()'s folder), PY, G

# stamp, left and run (a budgeted step, then after_step): benchmarks/gpu/env.sh
pack() {  # the tar of what was measured so far: rows.jsonl, config.yaml, topology.json of
  # each run directory (not the Parquet copies, rank and NCCL logs) and every top-level file
  local base list=/tmp/round4-files.$BASHPID
  base=$(basename "$OUT")
  (
    cd "$(dirname "$OUT")" || exit 1
    { find "$base" -maxdepth 1 -type f ! -name 'round4.tar*'
      find "$base" -mindepth 2 -type f \( -name rows.jsonl -o -name config.yaml \
        -o -name topology.json \); } >"$list"
    tar -cf "$TARDIR/round4.tar.tmp.$BASHPID" -T "$list" && mv "$TARDIR/round4.tar.tmp.$BASHPID" "$TARDIR/round4.tar"
  )
  rm -f "$list"
}
after_step() { pack; }  # the tar rewritten after every step

machine_txt "gpus: $GPUS"
echo "$(stamp) +0s budget ${BUDGET_S}s, gpus $GPUS: $MOE and $HELDOUT ($LAYERS layers)," \
  "splits: ${SPLITS[*]}" | tee "$OUT/steps.log"

run topo 20 40 bash -c "${G[*]} topo --json >'$OUT/gpulane-topo.json'"

advise() {  # advise NAME MODEL NEED LIMIT [KEY=VALUE...]: the advisor as a user runs it
  local name=$1 model=$2 need=$3 limit=$4; shift 4
  run "advise-$name" "$need" "$limit" "${G[@]}" advise model="$model" \
    model.num_layers="$LAYERS" gpus="$GPUS" "${GRID[@]}" measure=true results_dir="$OUT/advise" "$@"
}
measured() {  # measured NAME MODEL SPLIT: one split as a gpulane tokens run
  local name=$1 model=$2 split=$3 tag
  tag=${split// /-}
  tag=${tag//=/}
  # shellcheck disable=SC2086  # $split is two overrides
  run "tokens-$name-$tag" 35 75 "${G[@]}" tokens model="$model" layers="$LAYERS" $split \
    "${GRID[@]}" warmup=1 iters=1 comm_off=false build=advise-measured \
    results_dir="$OUT/runs"
}

if [ "$GPUS" = 4 ]; then
  # the held-out model starts on the MoE's collective rows once its sweeps are written,
  # its own calibration on GPUs 2,3 beside the MoE's on 0,1
  advise moe "$MOE" 90 175 &
  moe_pid=$!
  until grep -q "calibrating compute" "$OUT/advise-moe.txt" 2>/dev/null \
    || ! kill -0 "$moe_pid" 2>/dev/null || [ "$(left)" -lt 60 ]; do sleep 2; done
  (export CUDA_VISIBLE_DEVICES=2,3; advise heldout "$HELDOUT" 60 150 run="$OUT/advise") &
  wait
else
  advise moe "$MOE" 90 150
  advise heldout "$HELDOUT" 60 120 run="$OUT/advise"
fi
for split in "${SPLITS[@]}"; do
  measured moe "$MOE" "$split"
  measured heldout "$HELDOUT" "$split"
done

# the table (CPU; also runnable elsewhere from OUTDIR alone)
if [ "$(left)" -gt 5 ]; then
  timeout 30 "$PY" benchmarks/advise/heldout4.py "$OUT" --dense '' --gpus "$GPUS" \
    --md "$OUT/heldout4.md" --rows "$OUT/heldout4.jsonl" >"$OUT/heldout4.txt" 2>&1
  rc=$?  # before $(stamp), which sets $? again
  echo "$(stamp) +${SECONDS}s table: exit $rc (1: a figure or pick missed)" | tee -a "$OUT/steps.log"
fi
pack
echo "== done in ${SECONDS} s: $TARDIR/round4.tar"
