#!/usr/bin/env bash
# Acceptance on the 2x H200 machine (NVLink NV18), recorded for benchmarks/accept/README.md.
#
#   benchmarks/accept/run_gpu.sh OUTDIR [OVERRIDE...]
#
# 1. `gpulane accept` with the default rules (expect PASS), storing the run as baseline
#    `nvlink` (results_dir=OUTDIR/runs, so OUTDIR/runs/baselines/nvlink).
# 2. `gpulane accept preset=socket` (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1) against that
#    baseline (expect FAIL, naming all_reduce_busbw_nvlink and collective_busbw_vs_baseline).
# The reports (report.html, junit.xml, accept.json), the rows (rows/) and logs are copied to
# OUTDIR/nvlink and OUTDIR/socket. Extra OVERRIDEs go to both runs (e.g. suite.sizes_max=64M for a dry run).
# Exit status 0 when both outcomes are as expected.
set -u -o pipefail

OUT=${1:?usage: run_gpu.sh OUTDIR [OVERRIDE...]}
shift
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RUNS="$OUT/runs"
export NCCL_NVLS_ENABLE=0
PY=${PYTHON:-python3}
cd "$(dirname "$0")/../.."

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1
  nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.current,pcie.link.width.current,driver_version --format=csv 2>&1
  nvidia-smi topo -m 2>&1
} > "$OUT/machine.txt"

run_accept() {  # name, expected status, args...
  local name=$1 want=$2
  shift 2
  echo "== gpulane accept $*" | tee "$OUT/accept-$name.log"
  "$PY" -m gpulane.cli accept "results_dir=$RUNS" "$@" 2>&1 | tee -a "$OUT/accept-$name.log"
  local rc=${PIPESTATUS[0]}
  echo "== exit status $rc (expected $want)" | tee -a "$OUT/accept-$name.log"
  local group
  group=$(grep -o "^# accept.json: .*" "$OUT/accept-$name.log" | tail -1 | sed 's/^# accept.json: //; s#/accept.json$##')
  mkdir -p "$OUT/$name"
  if [ -n "$group" ] && [ -d "$group" ]; then
    cp "$group/report.html" "$group/junit.xml" "$group/accept.json" "$OUT/$name/" 2>/dev/null
    [ -f "$group/topology.json" ] && cp "$group/topology.json" "$OUT/$name/"
    echo "$group" > "$OUT/$name/run-dir.txt"
    # the rows behind every figure (benchmarks.check and `gpulane accept run=DIR` read them)
    mkdir -p "$OUT/$name/rows"
    (cd "$group" && find . -name rows.jsonl -exec cp --parents {} "$OUT/$name/rows/" \;)
  fi
  [ "$rc" = "$want" ]
}

ok=0
run_accept nvlink 0 build=nvlink --baseline nvlink "$@" || ok=1
run_accept socket 1 build=socket preset=socket --baseline nvlink "$@" || ok=1
"$PY" -m gpulane.cli compare nvlink socket --results-dir "$RUNS" --format markdown \
  --op all_reduce --op all_gather --size-min 1M -o "$OUT/compare.md" --plot "$OUT/plots" || ok=1
echo "outcome: $([ $ok = 0 ] && echo 'as expected (nvlink PASS, socket FAIL)' || echo 'NOT as expected')"
exit $ok
