#!/usr/bin/env bash
# Acceptance on a lent GPU machine (2 or 4 GPUs, NVLink), recorded for
# benchmarks/accept/README.md. Everything is written under OUTDIR.
#
#   benchmarks/accept/run_gpu.sh OUTDIR [OVERRIDE...]
#
# 1. healthy:  `gpulane accept build=nvlink save_baseline=nvlink` -- the suite (topo, sweep
#              all_reduce + all_gather 64 KiB..1 GiB, copy 1 MiB..1 GiB solo and all GPUs at
#              once, peer copies), the default rules; expected PASS, exit 0; the run is
#              stored as baseline `nvlink` (OUTDIR/runs/baselines/nvlink).
# 2. recheck:  `gpulane accept run=<group of 1> --baseline nvlink` -- no measuring; the
#              rows against their own baseline: expected PASS, exit 0.
# 3. typo:     `gpulane accept run=<group of 1> --baseline nvlnk` -- expected exit 2, one
#              line listing the stored baselines.
# 4. socket:   `gpulane accept build=socket preset=socket --baseline nvlink` with the
#              sweep only, up to 256 MiB, 5 iterations (NCCL over sockets is ~100x slower):
#              expected FAIL, exit 1, naming collective_busbw_vs_baseline.
# The reports (report.html, junit.xml, accept.json, topology.json), the rows (rows/) and
# the logs go to OUTDIR/<case>/ and OUTDIR/accept-<case>.log; OUTDIR/timing.txt holds the
# seconds each case took. Extra OVERRIDEs go to the measuring runs (1 and 4), e.g.
# `--allow-skip nccl_transport_matches_path` or `suite.sizes_max=64M` for a dry run.
# Exit status 0 when every outcome is as expected.
set -u -o pipefail

OUT=${1:?usage: run_gpu.sh OUTDIR [OVERRIDE...]}
shift
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RUNS="$OUT/runs"
export NCCL_NVLS_ENABLE=0
PY=${PYTHON:-python3}
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1
  nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,driver_version --format=csv 2>&1
  nvidia-smi topo -m 2>&1
} > "$OUT/machine.txt"
: > "$OUT/timing.txt"

# The healthy suite, quick: collectives from 64 KiB (the latency rule looks at <= 64 KiB,
# the busbw rules at >= 64 MiB and 1 GiB), copies from 1 MiB (the rules look at 1 GiB).
QUICK=(suite.sizes_min=64K
       "suite.copy_overrides=['memory=[pinned]','directions=[h2d,d2h]','peer_access=[true]','latency=false','sizes.min=1M']")

run_accept() {  # case name, expected exit status, args...
  local name=$1 want=$2
  shift 2
  local log="$OUT/accept-$name.log" t0 t1
  echo "== gpulane accept $*" | tee "$log"
  t0=$(date +%s%N)
  "$PY" -m gpulane.cli accept "results_dir=$RUNS" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  t1=$(date +%s%N)
  echo "$name $(( (t1 - t0) / 1000000 )) ms, exit $rc (expected $want)" | tee -a "$OUT/timing.txt"
  echo "== exit status $rc (expected $want)" | tee -a "$log"
  local group
  group=$(grep -o "^# accept.json: .*" "$log" | tail -1 | sed 's/^# accept.json: //; s#/accept.json$##')
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
run_accept healthy 0 build=nvlink save_baseline=nvlink "${QUICK[@]}" "$@" || ok=1
GROUP=$(cat "$OUT/healthy/run-dir.txt" 2>/dev/null || true)
if [ -n "$GROUP" ]; then
  run_accept recheck 0 "run=$GROUP" --baseline nvlink out="$OUT/recheck" || ok=1
  run_accept typo 2 "run=$GROUP" --baseline nvlnk out="$OUT/typo" || ok=1
  grep -q "gpulane: error: baseline: 'nvlnk' .*(stored: nvlink)" "$OUT/accept-typo.log" || ok=1
else
  echo "no healthy group: recheck and typo not run" | tee -a "$OUT/timing.txt"
  ok=1
fi
run_accept socket 1 build=socket preset=socket --baseline nvlink suite.copy=false \
  suite.sizes_min=64K suite.sizes_max=256M "suite.sweep_overrides=['iters=5','warmup=2']" "$@" || ok=1
grep -q "^accept: FAIL: .*failed rules: .*collective_busbw_vs_baseline" "$OUT/accept-socket.log" || ok=1
echo "outcome: $([ $ok = 0 ] && echo 'as expected (healthy PASS + baseline stored, recheck PASS, typo exit 2, socket FAIL)' || echo 'NOT as expected')" | tee -a "$OUT/timing.txt"
exit $ok
