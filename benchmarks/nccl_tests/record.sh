#!/usr/bin/env bash
# Record gpulane's nccl-tests backend on the GPU machine (nvidia-h200-x2), from the repo root:
#   bash benchmarks/nccl_tests/record.sh OUTDIR
# NCCL_TESTS_HOME must name your own nccl-tests build (gpulane never builds it).
# It runs `gpulane sweep backend=nccl_tests` locally (-g 2), under mpirun (-g 1 per rank), with CUDA graphs, one run that fails on
# purpose, and `gpulane parse nccl-tests` over the logs. Everything lands in OUTDIR.
set -u
OUT=${1:?OUTDIR}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
step() { echo; echo "=== $* ($(date -u +%T))"; }

step machine
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvidia-smi topo -m | head -5
python3 --version; nvcc --version | tail -1; mpirun --version | head -1

step wheels
python3 -m pip install --no-index --no-deps -q --root-user-action=ignore .whl/omegaconf-*.whl .whl/hydra_core-*.whl \
  .whl/antlr4_python3_runtime-*.whl 2>&1 | tail -2

step "nccl-tests build (built beforehand by the caller, never by this script)"
: "${NCCL_TESTS_HOME:?set NCCL_TESTS_HOME to your nccl-tests build (a directory with *_perf)}"
ls "$NCCL_TESTS_HOME"/*_perf

R="$OUT/runs"
PY=$(command -v python3); G="$PY -m gpulane.cli"
step "sweep: local -g 2, seven collectives, 8 B .. 1 GiB"
timeout 150 $G sweep backend=nccl_tests backend.home="$NCCL_TESTS_HOME" build=nvlink results_dir="$R" \
  collectives=all sizes.max=${MAX:-1G} progress=false; echo "exit $?"

step "sweep: mpirun, one rank per GPU (-g 1), all_reduce and all_gather to 64 MiB, 50 iters"
timeout 120 $G sweep backend=nccl_tests backend.home="$NCCL_TESTS_HOME" launcher=mpirun build=nvlink-mpi \
  results_dir="$R" collectives=[all_reduce,all_gather] sizes.max=64M warmup=10 iters=50 \
  progress=false; echo "exit $?"

step "sweep: CUDA graphs (-G 20), all_reduce to 64 MiB"
timeout 120 $G sweep backend=nccl_tests backend.home="$NCCL_TESTS_HOME" build=nvlink-graph \
  results_dir="$R" sizes.max=64M warmup=10 iters=50 graph=true graph_launches=20 \
  progress=false; echo "exit $?"

step "sweep: pcie-host preset (NCCL_P2P_DISABLE=1), all_reduce to 1 GiB"
timeout 120 $G sweep backend=nccl_tests backend.home="$NCCL_TESTS_HOME" preset=pcie-host \
  results_dir="$R" sizes.max=1G progress=false; echo "exit $?"

step "sweep that fails on purpose: socket transport on an interface that does not exist"
timeout 120 $G sweep backend=nccl_tests backend.home="$NCCL_TESTS_HOME" preset=socket build=broken \
  +env.NCCL_SOCKET_IFNAME=nosuchif0 results_dir="$R" sizes.max=1M timeout_s=60 \
  progress=false; echo "exit $?"

step "sweep without a build: the message"
env -u NCCL_TESTS_HOME PATH=/usr/bin:/bin $G sweep backend=nccl_tests results_dir="$R" \
  progress=false; echo "exit $?"

step "parse: the logs again, one line per row"
for f in "$R"/*/nccl-tests-all_reduce-float.log; do
  echo "--- $f: $($G parse nccl-tests "$f" --json | wc -l) rows"
done
$G parse nccl-tests "$R"/*nvlink-mpi*/nccl-tests-all_reduce-float.log | head -40
$G parse nccl-tests "$R"/*broken*/nccl-tests-all_reduce-float.log

step "pack"
tar czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "$R"
ls -la "$OUT"
