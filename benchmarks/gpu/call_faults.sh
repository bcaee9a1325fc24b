#!/usr/bin/env bash
# One device call on the lent 4-GPU machine (carry .whl): accept healthy, with a busy GPU,
# with a busy link, healthy again (benchmarks/accept/run_faults_gpu.sh), tarred for return.
#   bash benchmarks/gpu/call_faults.sh OUTDIR
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
timeout 560 bash benchmarks/accept/run_faults_gpu.sh "$out/faults"
echo "faults: exit $?"
cat "$out/faults/times.tsv"
