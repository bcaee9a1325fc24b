#!/usr/bin/env bash
# One device call on the lent 4-GPU machine (carry .whl and .debs): Slurm on GPUs
# (benchmarks/slurm/run_gpu.sh) and the copy tests that need a GPU
# (tests/transfers/test_gpu.py: a sample of several copies reports one copy's time).
#   bash benchmarks/gpu/call_slurm.sh OUTDIR
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
timeout 420 bash benchmarks/slurm/run_gpu.sh "$out/slurm" .debs >"$out/slurm.log" 2>&1
echo "slurm: exit $?" | tee -a "$out/calls.txt"
(source benchmarks/gpu/env.sh && timeout 120 python3 -m pytest -q -p no:cacheprovider \
  tests/transfers/test_gpu.py >"$out/test_gpu.txt" 2>&1)
echo "test_gpu: exit $?" | tee -a "$out/calls.txt"
tail -3 "$out/test_gpu.txt"
