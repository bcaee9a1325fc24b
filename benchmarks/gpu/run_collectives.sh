#!/usr/bin/env bash
# Collective sweeps on the 2xH200 machine: torch.distributed and NCCL-through-nccl4py
# beside nccl-tests (the user's own build, found through NCCL_TESTS_HOME), plain and
# CUDA-graph mode, float and bfloat16, with the nvlink / pcie-host / socket presets.
# Usage: benchmarks/gpu/run_collectives.sh OUTDIR [all|rerun|memory]
#        (NCCL_TESTS_HOME=<dir with *_perf>; rerun: the plain-mode and graph-register checks;
#        memory: the NCCL backend on torch, ncclMemAlloc and registered buffers, beside
#        nccl-tests plain, -G and -R 1)
set -u
out=${1:?OUTDIR}
part=${2:-all}
mkdir -p "$out"
source benchmarks/gpu/env.sh
runs="$out/runs"
common=(results_dir="$runs" progress=false warmup=5 iters=20)
big=(sizes.min=8 sizes.max=8G)
lat=(sizes.min=8 sizes.max=64M)

nvidia-smi topo -m >"$out/topo-m.txt" 2>&1
python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())' >"$out/versions.txt" 2>&1

if [ "$part" = memory ]; then
  for mem in torch nccl nccl-reg; do
    opts=(backend.memory=${mem%-reg})
    [ $mem = nccl-reg ] && opts+=(backend.register=true)
    step "nccl-$mem-graph" 200 gpulane sweep backend=nccl "${opts[@]}" \
      "collectives=[all_reduce,all_gather]" "dtype=[float,bfloat16]" "${lat[@]}" graph=true \
      graph_launches=20 "${common[@]}" build=nvlink-$mem
    step "nccl-$mem-plain" 200 gpulane sweep backend=nccl "${opts[@]}" \
      "collectives=[all_reduce,all_gather]" sizes.min=1M sizes.max=8G "${common[@]}" \
      build=nvlink-$mem
  done
  mpi=(mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
  for coll in all_reduce all_gather; do
    for reg in 0 1; do
      step "nt-$coll-float-R$reg" 120 "${mpi[@]}" "$NCCL_TESTS_HOME/${coll}_perf" -b 1M -e 8G \
        -f 2 -g 1 -w 5 -n 20 -R $reg
      for dt in float bfloat16; do
        step "nt-$coll-$dt-graph-R$reg" 120 "${mpi[@]}" "$NCCL_TESTS_HOME/${coll}_perf" -b 8 \
          -e 64M -f 2 -g 1 -w 5 -n 20 -G 20 -d $dt -R $reg
      done
    done
  done
  tar -czf "$out/runs.tgz" -C "$out" runs && rm -rf "$runs"
  exit 0
fi

if [ "$part" = rerun ]; then
  for backend in torch nccl; do
    step "$backend-plain" 300 gpulane sweep backend=$backend "collectives=[all_reduce,all_gather]" \
      "${big[@]}" "${common[@]}" build=nvlink
  done
  # Graph mode with NCCL's default graph mixing, and nccl-tests with graph buffer
  # registration off: which of the two explains nccl-tests' faster -G all_gather?
  step nccl-graph-mixing 300 gpulane sweep backend=nccl "collectives=[all_gather]" \
    sizes.min=1M sizes.max=64M graph=true graph_launches=20 +env.NCCL_GRAPH_MIXING_SUPPORT=1 \
    "${common[@]}" build=nvlink-mixing
  mpi=(mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
  step nt-all_gather-float-graph-noreg 120 "${mpi[@]}" -x NCCL_GRAPH_REGISTER=0 \
    "$NCCL_TESTS_HOME/all_gather_perf" -b 1M -e 64M -f 2 -g 1 -w 5 -n 20 -G 20
  step nt-all_gather-float-graph 120 "${mpi[@]}" "$NCCL_TESTS_HOME/all_gather_perf" \
    -b 8 -e 64M -f 2 -g 1 -w 5 -n 20 -G 20
  step nt-all_reduce-float 120 "${mpi[@]}" "$NCCL_TESTS_HOME/all_reduce_perf" -b 8 -e 8G -f 2 \
    -g 1 -w 5 -n 20
  step nt-all_gather-float 120 "${mpi[@]}" "$NCCL_TESTS_HOME/all_gather_perf" -b 8 -e 8G -f 2 \
    -g 1 -w 5 -n 20
  tar -czf "$out/runs.tgz" -C "$out" runs && rm -rf "$runs"
  exit 0
fi

# The default job, as a user runs it: NCCL over both GPUs.
step default 300 gpulane sweep "${common[@]}" build=nvlink
for backend in torch nccl; do
  step "$backend-plain" 300 gpulane sweep backend=$backend "collectives=[all_reduce,all_gather]" \
    "${big[@]}" "${common[@]}" build=nvlink
  step "$backend-graph" 300 gpulane sweep backend=$backend "collectives=[all_reduce,all_gather]" \
    "${lat[@]}" graph=true graph_launches=20 "${common[@]}" build=nvlink
  step "$backend-bf16-graph" 300 gpulane sweep backend=$backend \
    "collectives=[all_reduce,all_gather]" dtype=bfloat16 "${lat[@]}" graph=true \
    graph_launches=20 "${common[@]}" build=nvlink
  for preset in pcie-host socket; do
    step "$backend-$preset" 300 gpulane sweep backend=$backend preset=$preset \
      "collectives=[all_reduce,all_gather]" sizes.min=8 sizes.max=1G "${common[@]}"
  done
done
# torch with NCCL_GRAPH_MIXING_SUPPORT left at NCCL's default, to show what it costs
step torch-graph-mixing 300 gpulane sweep "collectives=[all_reduce]" "${lat[@]}" graph=true \
  graph_launches=20 +env.NCCL_GRAPH_MIXING_SUPPORT=1 "${common[@]}" build=nvlink-mixing

# nccl-tests, two processes under mpirun (-g 1), as gpulane runs its ranks.
if [ -n "${NCCL_TESTS_HOME:-}" ]; then
  mpi=(mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
  for coll in all_reduce all_gather; do
    for dt in float bfloat16; do
      step "nt-$coll-$dt" 300 "${mpi[@]}" "$NCCL_TESTS_HOME/${coll}_perf" -b 8 -e 8G -f 2 \
        -g 1 -w 5 -n 20 -d $dt
      step "nt-$coll-$dt-graph" 300 "${mpi[@]}" "$NCCL_TESTS_HOME/${coll}_perf" -b 8 -e 64M \
        -f 2 -g 1 -w 5 -n 20 -G 20 -d $dt
    done
    for preset in pcie-host socket; do
      extra=(-x NCCL_P2P_DISABLE=1)
      [ $preset = socket ] && extra+=(-x NCCL_SHM_DISABLE=1)
      step "nt-$coll-$preset" 300 "${mpi[@]}" "${extra[@]}" "$NCCL_TESTS_HOME/${coll}_perf" \
        -b 8 -e 1G -f 2 -g 1 -w 5 -n 20
    done
  done
  # The nccl_tests backend: gpulane driving the same binaries, rows in the same table.
  step nccl-tests-backend 300 gpulane sweep backend=nccl_tests launcher=mpirun \
    "collectives=[all_reduce,all_gather]" "${lat[@]}" "${common[@]}" build=nvlink
fi
tar -czf "$out/runs.tgz" -C "$out" runs && rm -rf "$runs"
