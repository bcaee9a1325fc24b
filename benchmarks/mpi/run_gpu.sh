#!/usr/bin/env bash
# MPI backend on the 2xH200 machine: what the MPI library is, whether it is CUDA-aware, and
# `gpulane sweep backend=mpi launcher=mpirun` on both GPUs: device buffers (torch, then
# CuPy) when the MPI is CUDA-aware, else host (numpy) buffers from the GPU ranks; host
# buffers always, for comparison; and the torch backend (NCCL) started by mpirun.
# Usage: benchmarks/mpi/run_gpu.sh OUTDIR
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
source benchmarks/gpu/env.sh
runs="$out/runs"

# What MPI this is, and whether it takes device buffers.
{
  echo "# mpirun --version"; mpirun --version 2>&1 | head -2
  echo "# ompi_info CUDA"; ompi_info --parsable --all 2>/dev/null | grep -E "built_with_cuda_support:value|mpi_ext" || true
  echo "# mpi4py"
  python3 - <<'PY'
import mpi4py
from mpi4py import MPI
from gpulane.collectives.backends.mpi_library import cuda_support, library_version, loaded_libmpi
print("mpi4py", mpi4py.__version__, "config", mpi4py.get_config())
print("library", library_version(MPI), loaded_libmpi())
print(cuda_support(MPI))
PY
  python3 -c 'import torch, cupy; print("torch", torch.__version__, torch.version.cuda, torch.cuda.device_count(), "cupy", cupy.__version__)'
  nvidia-smi topo -m
} >"$out/mpi-info.txt" 2>&1
cat "$out/mpi-info.txt"
aware=$(python3 - <<'PY' 2>/dev/null
from mpi4py import MPI
from gpulane.collectives.backends.mpi_library import cuda_support
print("yes" if cuda_support(MPI).aware else "no")
PY
)
echo "CUDA-aware: ${aware:-unknown}" | tee -a "$out/steps.log"

# Sizes stop at 64 MiB (device) and 16 MiB (host): enough to see the bandwidth curve
# turn, within one call's time on the lent machine.
common=(backend=mpi launcher=mpirun results_dir="$runs" progress=false warmup=5 iters=20 timeout_s=120)
colls="collectives=all"
if [ "$aware" = yes ]; then
  step mpi-device-torch 150 gpulane sweep "${common[@]}" "$colls" sizes.min=8 sizes.max=64M \
    backend.buffers=device backend.array=torch build=mpi-device
  step mpi-device-bf16 90 gpulane sweep "${common[@]}" "collectives=[all_gather,alltoall,sendrecv]" \
    dtype=bfloat16 sizes.min=8 sizes.max=16M backend.buffers=device build=mpi-device
  step mpi-device-cupy 90 gpulane sweep "${common[@]}" "collectives=[all_reduce,all_gather]" \
    sizes.min=8 sizes.max=64M backend.buffers=device backend.array=cupy build=mpi-device-cupy
fi
# Host buffers from the GPU ranks (the only kind when the MPI is not CUDA-aware).
step mpi-host 150 gpulane sweep "${common[@]}" "$colls" sizes.min=8 sizes.max=16M device=cuda \
  backend.buffers=auto build=mpi-host
step mpi-host-forced 90 gpulane sweep "${common[@]}" "collectives=[all_reduce,sendrecv]" \
  sizes.min=8 sizes.max=16M backend.buffers=host build=mpi-host
# A corrupted element must be counted on this machine too (exit 1 expected).
step mpi-corrupt 60 gpulane sweep "${common[@]}" "collectives=[all_reduce]" sizes.min=1K \
  sizes.max=1M corrupt_rank=1 build=mpi-corrupt
# torch.distributed (NCCL) with ranks started by mpirun: rank discovery from OMPI_*.
step torch-mpirun 90 gpulane sweep backend=torch launcher=mpirun results_dir="$runs" \
  progress=false "collectives=[all_reduce,all_gather]" sizes.min=8 sizes.max=1G build=torch-mpirun
for f in "$runs"/*/rows.jsonl; do echo "$f $(wc -l <"$f")"; done >>"$out/steps.log" 2>/dev/null
cp "$out"/steps.log "$out"/summary.txt 2>/dev/null
