#!/usr/bin/env bash
# gpulane's own reference runs on a lent GPU machine (issue 31): the figures
# gpulane/conf/reference/ holds for that machine, from gpulane runs rather than hand-copied
# nccl-tests numbers. Run from the repository root in ONE device command:
#
#   bash benchmarks/reference/run_gpu.sh OUT          # e.g. OUT=benchmarks/reference/h200x4
#
# What it runs, ROUNDS (3) times: `gpulane sweep backend=nccl` over all_reduce, all_gather,
# reduce_scatter and alltoall from 256 MiB to 4 GiB on every local GPU (float, sum, 5
# warm-up and 20 timed iterations, NCCL_NVLS_ENABLE=0 as on every lent machine), each into
# OUT/runs/; then `gpulane accept --run` on the first run (so the runs can be added with
# `gpulane reference add` the way a site would), `gpulane history OUT/runs` and
# `gpulane export OUT/runs`. Not timed yet: each sweep is 4 collectives x 5 sizes x 2
# (in/out of place) x 25 iterations, seconds of GPU time, plus gpulane's start-up, 10-25 s
# a run on the 2x H200 machine (benchmarks/collectives/run_gpu.sh); expect a few minutes.
# Nothing is built.
#
# Afterwards, on the development machine: add OUT/runs to SOURCES in
# benchmarks/reference/build_table.py (with its conditions) and regenerate the table.
set -u
out=${1:?usage: run_gpu.sh OUT}
rounds=${ROUNDS:-3}
mkdir -p "$out"
source benchmarks/gpu/env.sh
export NCCL_NVLS_ENABLE=0
start=$SECONDS
{
  nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv
  nvidia-smi topo -m
} > "$out/machine.txt" 2>&1
for r in $(seq 1 "$rounds"); do
  echo "# round $r of $rounds at $((SECONDS - start)) s"
  gpulane sweep backend=nccl "collectives=[all_reduce,all_gather,reduce_scatter,alltoall]" \
    sizes.min=256M sizes.max=4G warmup=5 iters=20 torch_overhead=false progress=false \
    build=reference results_dir="$out/runs" > "$out/sweep-$r.txt" 2>&1
  echo "sweep $r rc=$?"
done
first=$(ls -d "$out"/runs/*/ | head -1)
gpulane accept --run "$first" --out "$out/accept" > "$out/accept.txt" 2>&1; echo "accept rc=$?"
gpulane history "$out/runs" > "$out/history.txt" 2>&1; echo "history rc=$?"
gpulane export "$out/runs" > "$out/export.om" 2>&1; echo "export rc=$?"
gpulane results "$out/runs" --op all_reduce --size-min 1G > "$out/results.txt" 2>&1
echo "# done in $((SECONDS - start)) s"
