#!/usr/bin/env bash
# gpulane copy on the GPU machine: the default run (timed), the reference comparison, the
# importers on gpulane's own matrices. Usage: benchmarks/transfers/run_gpu.sh OUTDIR
# Everything goes to OUTDIR; a failing step is noted and the next one still runs.
set -x
OUT=${1:?usage: run_gpu.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}

{
  date -u; hostname; uname -a
  nvidia-smi
  nvidia-smi topo -m
  nvidia-smi -q -d PCIE 2>/dev/null | grep -E -i "gpu 0|generation|width|current|max" | head -40
  for f in /sys/bus/pci/devices/*/numa_node; do echo "$f $(cat "$f")"; done 2>/dev/null | grep -v " -1$" | head -20
  cat /sys/devices/system/node/online 2>/dev/null
  "$PY" -c "import torch, sys; print(sys.version); print('torch', torch.__version__, torch.version.cuda, torch.cuda.device_count())"
  "$PY" -c "import cupy; print('cupy', cupy.__version__)"
  "$PY" -c "import hydra, omegaconf; print('hydra', hydra.__version__, 'omegaconf', omegaconf.__version__)"
  git log -1 --oneline 2>/dev/null
} > "$OUT/machine.txt" 2>&1

# 1. The whole default run, timed (target: under 60 s wall on 2 GPUs).
TIMEFORMAT='wall %R s (user %U s, sys %S s)'
{ time "$PY" -m gpulane.cli copy results_dir="$OUT/runs" ; echo "exit status $?" ; } > "$OUT/copy-default.log" 2>&1
cp "$OUT"/runs/*/copy-bandwidth.png "$OUT/" 2>/dev/null

# 2. gpulane's timing against a plain cudaMemcpyAsync / cudaMemcpyPeerAsync loop.
"$PY" benchmarks/transfers/reference.py --out "$OUT/reference.json" > "$OUT/reference.log" 2>&1
echo "exit status $?" >> "$OUT/reference.log"

# 3. Host memory on the other NUMA node, when there is one (an error line on one-node hosts).
"$PY" -m gpulane.cli copy results_dir="$OUT/runs" numa=remote peer=false all_gpus=false \
  memory=[pageable,pinned] build=numa-remote > "$OUT/copy-numa-remote.log" 2>&1
echo "exit status $?" >> "$OUT/copy-numa-remote.log"

# 4. The p2p importer reads gpulane's own matrices back.
"$PY" -m gpulane.cli parse p2p "$OUT/copy-default.log" > "$OUT/parse-own-p2p.log" 2>&1
echo "exit status $?" >> "$OUT/parse-own-p2p.log"

# 5. Without CuPy's raw calls (torch copy_ only; write-combined and peer-off are skipped).
"$PY" -m gpulane.cli copy results_dir="$OUT/runs" engine=torch sizes.max=64M samples=5 \
  build=engine-torch > "$OUT/copy-engine-torch.log" 2>&1
echo "exit status $?" >> "$OUT/copy-engine-torch.log"

# 6. CUDA samples, if this machine has them built (for a side-by-side).
for tool in bandwidthTest p2pBandwidthLatencyTest nvbandwidth; do
  if command -v "$tool" >/dev/null 2>&1; then
    "$tool" > "$OUT/$tool.txt" 2>&1
  fi
done

ls -la "$OUT" "$OUT"/runs/* > "$OUT/files.txt" 2>&1
tail -n 3 "$OUT/copy-default.log"
cat "$OUT/reference.log"
exit 0
