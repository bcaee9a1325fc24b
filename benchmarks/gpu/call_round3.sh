#!/usr/bin/env bash
# Round 3 on the lent 4-GPU machine (issue 30), one device call, about 8 minutes on 4x H200:
#   1. benchmarks/accept/run_faults_gpu.sh: accept healthy (timed; stored as baseline),
#      with GPU2 kept busy by another process, with the GPU0-GPU1 link kept full, healthy
#      again; summary.md says whether each verdict and each named GPU is as expected
#      (busy-gpu2: GPU2; pair01: GPU0 and GPU1) and where each accept's seconds went.
#   2. benchmarks/slurm/run_gpu.sh: a single-node Slurm with gres/gpu for the 4 GPUs; srun
#      one task per GPU; gpulane sweep and accept (suite.localize=always) under
#      launcher=slurm and the local launcher; compare.md (rows, transport, topology,
#      localization the same).
# Everything lands in one tar, $OUT/round3.tar.gz (the work folder is /tmp/round3).
#
#   run(command="bash benchmarks/gpu/call_round3.sh", carry=[".whl", ".debs"],
#       kind="nvidia-h200-x4")
#
# The parts have their own limits (faults 360 s, Slurm what is left of 540 s), so the
# call ends before the device's 600 s limit with whatever was measured tarred.
set -u
OUT=${OUT:-/tmp/round3-out}
work=${1:-/tmp/round3}
mkdir -p "$OUT" "$work"
cd "$(dirname "$0")/../.." || exit 1
t0=$SECONDS
took() { echo "$1: exit $2 at $((SECONDS - t0)) s" | tee -a "$work/calls.txt"; }
pack() {
  tar -C "$(dirname "$work")" -czf "$OUT/round3.tar.gz" "$(basename "$work")"
  ls -la "$OUT/round3.tar.gz"
}
trap pack EXIT

DOCTOR_STEP=0 timeout -k 10 360 bash benchmarks/accept/run_faults_gpu.sh "$work/faults" \
  >"$work/faults.log" 2>&1
took faults $?
cat "$work/faults/summary.md" 2>/dev/null

left=$((540 - (SECONDS - t0)))
if [ "$left" -gt 120 ]; then
  GPULANE_SLURM_SWEEPS=1 timeout -k 10 "$left" bash benchmarks/slurm/run_gpu.sh \
    "$work/slurm" .debs >"$work/slurm.log" 2>&1
  took slurm $?
  tail -12 "$work/slurm/compare.md" 2>/dev/null
  grep "^===" "$work/slurm/steps.log" 2>/dev/null | tail -20
else
  echo "slurm: not run, $left s left" | tee -a "$work/calls.txt"
fi
