#!/usr/bin/env bash
# Localization on the 4-GPU machine (nvidia-h200-x4 or nvidia-h100-x4): accept healthy,
# with one GPU kept busy by another process, with one pair's link kept full, and healthy
# again; the time to each verdict. About 6-7 minutes on 4x H200.
#
#   benchmarks/accept/run_faults_gpu.sh OUTDIR [OVERRIDE...]
#
# 1. healthy:   gpulane accept --baseline healthy (stored: it passes)      expect exit 0
# 2. busy-gpu2: foreign_load.py busy 2 (bf16 matmuls + 1 GiB device copies on GPU2)  expect exit 1,
#               a `localize` check naming GPU2 with its pid and clocks
# 3. pair01:    foreign_load.py link 0 1 (1 GiB peer copies GPU0<->GPU1)    expect exit 1,
#               a `localize` check naming the pair GPU0-GPU1 (NV18)
# 4. healthy-again: the faults ended                                        expect exit 0
# Each fault process is started here and ended by its own pid. The NVML captures for the
# test fixtures (capture_nvml.py) are taken idle and with each fault on: copy
# OUTDIR/nvml/nvml-busy-gpu2.json to tests/fixtures/h200x4/.
# OUTDIR: machine.txt, times.tsv (step, exit, seconds), steps.log, nvml/, summary.md
# (benchmarks/accept/summarize_faults.py: verdicts, names, seconds per phase), and per step
# accept.log, accept.json, junit.xml, topology.json, localize.json, gpu_state/ and rows/.
# DOCTOR_STEP=0 leaves out the stand-alone `gpulane doctor` on the busy GPU (11 s; it was
# recorded in round 2) where device time is short.
set -u -o pipefail

OUTDIR=${1:?usage: run_faults_gpu.sh OUTDIR [OVERRIDE...]}
shift
mkdir -p "$OUTDIR"
out=$(cd "$OUTDIR" && pwd)
cd "$(dirname "$0")/../.." || exit 1
source benchmarks/gpu/env.sh
PY=${PYTHON:-python3}
RUNS="$out/runs"
PATTERN=${PATTERN:-pairs}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1
  nvidia-smi --query-gpu=index,name,pci.bus_id,power.limit,clocks.max.sm,driver_version --format=csv 2>&1
  nvidia-smi topo -m 2>&1
} >"$out/machine.txt"
printf 'step\texit\tseconds\texpected\n' >"$out/times.tsv"

accept() {  # NAME EXPECTED_EXIT ARGS...: one accept, timed, its outputs kept
  local name=$1 want=$2
  shift 2
  log "accept $name: $*"
  local t0=$SECONDS
  timeout 240 "$PY" -m gpulane.cli accept "results_dir=$RUNS" "build=$name" \
    "suite.localize_pattern=$PATTERN" "$@" >"$out/$name.accept.log" 2>&1
  local rc=$? secs=$((SECONDS - t0))
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$secs" "$want" >>"$out/times.tsv"
  echo "=== accept $name: exit $rc (expected $want) in $secs s" | tee -a "$out/steps.log"
  grep -E "localize|no_foreign|FAIL|PASS" "$out/$name.accept.log" | head -20 | tee -a "$out/steps.log"
  local group
  group=$(grep -o "^# accept.json: .*" "$out/$name.accept.log" | tail -1 | sed 's/^# accept.json: //; s#/accept.json$##')
  mkdir -p "$out/$name"
  if [ -n "$group" ] && [ -d "$group" ]; then
    cp "$group/accept.json" "$group/junit.xml" "$group/report.html" "$out/$name/" 2>/dev/null
    [ -f "$group/topology.json" ] && cp "$group/topology.json" "$out/$name/"
    (cd "$group" && find . \( -name rows.jsonl -o -name localize.json -o -name gpu_state.json \) \
      -exec cp --parents {} "$out/$name/" \;)
  fi
}

start_fault() {  # NAME ARGS...: the fault in the background; its pid in $fault_pid
  local name=$1
  shift
  "$PY" benchmarks/gpu/foreign_load.py "$@" >"$out/fault-$name.log" 2>&1 &
  fault_pid=$!
  log "fault $name: pid $fault_pid: foreign_load.py $*"
  sleep 8  # up to speed: CUDA context, first kernels, clocks at the power cap
}

stop_fault() {
  kill "$fault_pid" 2>/dev/null
  wait "$fault_pid" 2>/dev/null
  log "fault ended (pid $fault_pid)"
  sleep 3
}

trap 'kill "${fault_pid:-0}" 2>/dev/null' EXIT
mkdir -p "$out/nvml"
step nvml-idle 60 "$PY" benchmarks/accept/capture_nvml.py "$out/nvml" idle

accept healthy 0 save_baseline=healthy "$@"

start_fault busy-gpu2 busy 2 400
step nvml-busy-gpu2 60 "$PY" benchmarks/accept/capture_nvml.py "$out/nvml" busy-gpu2
[ "${DOCTOR_STEP:-1}" = 1 ] && step doctor-busy-gpu2 120 "$PY" -m gpulane.cli doctor
accept busy-gpu2 1 --baseline healthy "$@"
stop_fault

start_fault pair01 link 0 1 400
step nvml-pair01 60 "$PY" benchmarks/accept/capture_nvml.py "$out/nvml" pair01
accept pair01 1 --baseline healthy "$@"
stop_fault

accept healthy-again 0 --baseline healthy "$@"

"$PY" benchmarks/accept/summarize_faults.py "$out" >"$out/summary.md" 2>&1
cat "$out/summary.md" >>"$out/steps.log"
log "done: $(awk -F'\t' 'NR>1 && $2!=$4 {bad=bad" "$1} END {print bad ? "NOT as expected:" bad : "every exit as expected"}' "$out/times.tsv")"
