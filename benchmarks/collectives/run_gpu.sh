#!/usr/bin/env bash
# nccl-tests against gpulane's backend=nccl, side by side, in ONE device command on the
# 2xH200 machine (issue 20). Builds nothing: nccl-tests must already be built (MPI=1) at
# $NCCL_TESTS_HOME; gpulane's C loop (backend.loop=c) is compiled by gpulane itself.
#
#   NCCL_TESTS_HOME=/path/to/nccl-tests/build bash benchmarks/collectives/run_gpu.sh OUT
#
# What it runs (all 2 ranks, float, sum, root 0, 5 warm-up and 20 timed iterations):
#  1. the default job as a user runs it (`gpulane sweep`): default.txt;
#  2. ROUNDS (3) rounds below 1 MiB (8 B-512 KiB), each alternating nccl-tests under
#     mpirun (-g 1) and gpulane for the 7 collectives: nccl-tests plain, backend=nccl plain
#     with backend.loop=c and with backend.loop=python, nccl-tests -G 20, backend=nccl
#     graph=true graph_launches=20 (odd rounds nccl-tests first, even rounds gpulane first);
#  3. once from 1 MiB to 8 GiB: nccl-tests plain and -G 1, backend=nccl plain and graph
#     (graph_launches=1: one replay of the 20 captured calls, as -G 1);
#  4. alltoall 1-8 GiB: backend.memory=torch beside the default ncclMemAlloc'd buffers, and
#     NCCL's INFO lines (init, env, P2P) of one 8 GiB alltoall from each side;
#  5. tables.md from all of it (benchmarks/collectives/ratios.py).
# Expect 7-8 minutes (from the step times of earlier runs there: nccl-tests 3-8 s a
# binary, gpulane 10-25 s a run); GRAPH_BIG=0 leaves out graph mode from 1 MiB (about
# 90 s). ROUNDS=N changes the number of rounds; STREAM_CHECK=1 adds, in
# each round, backend=nccl plain with backend.loop=python backend.stream=current (torch's
# legacy default stream, as gpulane issued before issue 20; about 12 s a round);
# BIND_CHECK=1 adds the C loop with the ranks bound to cores (about 14 s a round).
set -u
out=${1:?usage: run_gpu.sh OUT}
rounds=${ROUNDS:-3}
mkdir -p "$out"
source benchmarks/gpu/env.sh
export NCCL_NVLS_ENABLE=0
runs="$out/runs"
colls=(all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv)
list=$(IFS=,; echo "${colls[*]}")
g=(gpulane sweep backend=nccl "collectives=[$list]" results_dir="$runs" progress=false
   warmup=5 iters=20 torch_overhead=false)
mpi=(mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH)
nt=${NCCL_TESTS_HOME:-}
start=$SECONDS

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.nccl.version())'
  python3 -c 'import nccl.core, nccl.bindings.nccl as b; from nccl.bindings._internal import nccl as i; print("nccl4py", nccl.core.__version__, "libnccl", b.get_version(), i._inspect_loaded_library_path())'
  python3 -c 'from gpulane.collectives.backends.nccl_loop import library; print("C loop", library().path)'
  "${CC:-cc}" --version | head -1
  [ -n "$nt" ] && ldd "$nt/all_reduce_perf" | grep -i nccl
} >"$out/versions.txt" 2>&1
nvidia-smi topo -m >"$out/topo-m.txt" 2>&1

# nccl-tests for every collective: nt MODE TAG -b B -e E [more options]
ntests() {
  local mode=$1 tag=$2; shift 2
  [ -z "$nt" ] && { log "nt-$mode-$tag: skipped, NCCL_TESTS_HOME is not set"; return; }
  for c in "${colls[@]}"; do
    step "nt-$mode-$tag-$c" 120 "${mpi[@]}" "$nt/${c}_perf" -f 2 -g 1 -w 5 -n 20 "$@"
  done
}
small=(sizes.min=8 sizes.max=512K)
big=(sizes.min=1M sizes.max=8G)

# gpulane's three variants of round $r below 1 MiB
gl() {
  step "gl-plain-c-r$r" 120 "${g[@]}" "${small[@]}" backend.loop=c build=plain-c-r$r
  # PY_ROUNDS=N: the Python issuing loop only in the first N rounds (it answers one
  # question, whether Python's call cost is the floor; the C loop is what is compared)
  if [ "$r" -le "${PY_ROUNDS:-$rounds}" ]; then
    step "gl-plain-py-r$r" 120 "${g[@]}" "${small[@]}" backend.loop=python build=plain-py-r$r
  fi
  if [ "$r" -le "${GRAPH_ROUNDS:-$rounds}" ]; then
    step "gl-graph-r$r" 120 "${g[@]}" "${small[@]}" graph=true graph_launches=20 build=graph-r$r
  fi
  # BIND_CHECK=1: the C loop again with each rank bound to a core (launcher.bind=core), as
  # mpirun binds nccl-tests' ranks: the first candidate for issue 20's plain-mode misses
  if [ "${BIND_CHECK:-0}" = 1 ]; then
    step "gl-plain-c-bound-r$r" 120 "${g[@]}" "${small[@]}" backend.loop=c launcher.bind=core \
      build=plain-c-bound-r$r
  fi
  if [ "${STREAM_CHECK:-0}" = 1 ]; then
    step "gl-plain-cur-r$r" 120 "${g[@]}" "${small[@]}" backend.loop=python \
      backend.stream=current build=plain-cur-r$r
  fi
}

# 1. The default job, as a user starts it on this machine (its logs: logs/ of its run).
step default 240 gpulane sweep results_dir="$runs" progress=false

# nccl-tests -G 20 of round $r (GRAPH_ROUNDS=N: graph mode in the first N rounds only)
ntgraph() {
  [ "$r" -le "${GRAPH_ROUNDS:-$rounds}" ] && ntests graph "r$r" -b 8 -e 512K -G 20
}

# 2. Below 1 MiB: rounds of A/B.
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then
    ntests plain "r$r" -b 8 -e 512K; ntgraph; gl
  else
    gl; ntests plain "r$r" -b 8 -e 512K; ntgraph
  fi
  log "elapsed $((SECONDS - start)) s"
done

# 3. 1 MiB to 8 GiB, once.
ntests plain big -b 1M -e 8G
step gl-plain-big 300 "${g[@]}" "${big[@]}" build=plain-big
if [ "${GRAPH_BIG:-1}" = 1 ]; then
  ntests graph big -b 1M -e 8G -G 1
  step gl-graph-big 300 "${g[@]}" "${big[@]}" graph=true graph_launches=1 build=graph-big
fi
log "elapsed $((SECONDS - start)) s"

# 4. alltoall at 1-8 GiB: where the issue saw 0.925 of nccl-tests' busbw (ALLTOALL=0: not now)
if [ "${ALLTOALL:-1}" = 1 ]; then
step gl-alltoall-torchmem 180 gpulane sweep backend=nccl collectives=alltoall sizes.min=1G \
  sizes.max=8G backend.memory=torch results_dir="$runs" progress=false warmup=5 iters=20 \
  torch_overhead=false build=alltoall-torchmem
# NCCL's lines go to the run's logs/rank-N.log
info=(+env.NCCL_DEBUG=INFO "+env.NCCL_DEBUG_SUBSYS='INIT,ENV,P2P,TUNING'")
[ -n "$nt" ] && step nt-alltoall-info 120 "${mpi[@]}" -x NCCL_DEBUG=INFO \
  -x NCCL_DEBUG_SUBSYS=INIT,ENV,P2P,TUNING "$nt/alltoall_perf" -b 8G -e 8G -g 1 -w 2 -n 5
step gl-alltoall-info 180 gpulane sweep backend=nccl collectives=alltoall sizes.min=8G \
  sizes.max=8G results_dir="$runs" progress=false warmup=2 iters=5 torch_overhead=false \
  build=alltoall-info "${info[@]}"
log "elapsed $((SECONDS - start)) s"
fi

# 5. The tables.
python3 benchmarks/collectives/ratios.py "$out" >"$out/tables.md" 2>"$out/ratios.err"
log "tables: exit $? ($out/tables.md); total $((SECONDS - start)) s"
