#!/usr/bin/env bash
# Record gpulane's nccl-tests backend on the GPU machine (nvidia-h200-x2), from the repo root:
#   bash benchmarks/nccl_tests/record.sh OUTDIR
# It builds nccl-tests from the source in .nccl-tests/ (the user's own build, as gpulane
# expects; gpulane itself never builds it), then runs `gpulane sweep backend=nccl_tests`
# locally (-g 2), under mpirun (-g 1 per rank), with CUDA graphs, one run that fails on
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

step build nccl-tests
NCCL_HOME=""
if [ ! -f /usr/include/nccl.h ]; then
  NCCL_HOME=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null)
  [ -n "$NCCL_HOME" ] && [ ! -e "$NCCL_HOME/lib/libnccl.so" ] && ln -s libnccl.so.2 "$NCCL_HOME/lib/libnccl.so"
fi
MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi
for d in $(mpicc --showme:incdirs 2>/dev/null); do [ -f "$d/mpi.h" ] && MPI_HOME=$(dirname "$d"); done
echo "NCCL_HOME=${NCCL_HOME:-system} MPI_HOME=$MPI_HOME"
[ -x .nccl-tests/build/all_reduce_perf ] && echo "(already built)" ||
( cd .nccl-tests && time timeout 300 make -j 32 MPI=1 MPI_HOME="$MPI_HOME" ${NCCL_HOME:+NCCL_HOME=$NCCL_HOME} \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$OUT/build.log" 2>&1 ) || { tail -30 "$OUT/build.log"; }
ls .nccl-tests/build/*_perf
[ -n "$NCCL_HOME" ] && export LD_LIBRARY_PATH="$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}"

R="$OUT/runs"
PY=$(command -v python3); G="$PY -m gpulane.cli"
step "sweep: local -g 2, seven collectives, 8 B .. 1 GiB"
timeout 150 $G sweep backend=nccl_tests backend.home=.nccl-tests build=nvlink results_dir="$R" \
  collectives=all sizes.max=${MAX:-1G} progress=false; echo "exit $?"

step "sweep: mpirun, one rank per GPU (-g 1), all_reduce and all_gather to 64 MiB, 50 iters"
timeout 120 $G sweep backend=nccl_tests backend.home=.nccl-tests launcher=mpirun build=nvlink-mpi \
  results_dir="$R" collectives=[all_reduce,all_gather] sizes.max=64M warmup=10 iters=50 \
  progress=false; echo "exit $?"

step "sweep: CUDA graphs (-G 20), all_reduce to 64 MiB"
timeout 120 $G sweep backend=nccl_tests backend.home=.nccl-tests build=nvlink-graph \
  results_dir="$R" sizes.max=64M warmup=10 iters=50 graph=true graph_launches=20 \
  progress=false; echo "exit $?"

step "sweep: pcie-host preset (NCCL_P2P_DISABLE=1), all_reduce to 1 GiB"
timeout 120 $G sweep backend=nccl_tests backend.home=.nccl-tests preset=pcie-host \
  results_dir="$R" sizes.max=1G progress=false; echo "exit $?"

step "sweep that fails on purpose: socket transport on an interface that does not exist"
timeout 120 $G sweep backend=nccl_tests backend.home=.nccl-tests preset=socket build=broken \
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
