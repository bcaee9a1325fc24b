#!/usr/bin/env bash
# First call on a lent 4-GPU machine (2026-11-27): does the carried environment work there,
# real NVML captures with and without foreign work (fixtures for the foreign-work parser),
# how much a busy GPU and a busy NVLink pair cost a 4-rank all_reduce (sizing the faults of
# benchmarks/accept/run_faults_gpu.sh), and whether the carried Slurm starts with gres/gpu.
#   benchmarks/gpu/smoke4.sh OUTDIR        (carry .whl and .debs)
set -u
out=${1:?OUTDIR}
mkdir -p "$out/cap"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
source benchmarks/gpu/env.sh
{
  date -u +%Y-%m-%dT%H:%M:%SZ; hostname; nproc
  python3 -c 'import torch, hydra, submitit, nccl4py; print("torch", torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count(), "hydra", hydra.__version__)'
} >"$out/versions.txt" 2>&1
cat "$out/versions.txt"
nvidia-smi topo -m >"$out/cap/topo-m.txt" 2>&1
nvidia-smi -q >"$out/cap/nvidia-smi-q.txt" 2>&1
nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.current,pcie.link.width.current,driver_version --format=csv >"$out/cap/query-gpu.csv" 2>&1
step topo-json 60 gpulane topo --json
python3 benchmarks/gpu/capture_gpu_state.py "$out/cap/nvml-idle.json"
nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv >"$out/cap/compute-apps-idle.csv" 2>&1

SW=(collectives=[all_reduce] sizes.min=1M sizes.max=1G warmup=5 iters=20 progress=false results_dir="$out/runs")
step sweep-healthy 120 gpulane sweep "${SW[@]}" build=healthy

python3 benchmarks/gpu/foreign_load.py busy 2 45 &
load=$!
sleep 12
python3 benchmarks/gpu/capture_gpu_state.py "$out/cap/nvml-busy-gpu2.json"
nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv >"$out/cap/compute-apps-busy-gpu2.csv" 2>&1
nvidia-smi -q -d PIDS,PERFORMANCE,POWER,TEMPERATURE,CLOCK,UTILIZATION >"$out/cap/nvidia-smi-q-busy-gpu2.txt" 2>&1
step sweep-busy-gpu2 100 gpulane sweep "${SW[@]}" build=busy-gpu2
step doctor-busy-gpu2 60 gpulane doctor
kill $load 2>/dev/null; wait $load 2>/dev/null

python3 benchmarks/gpu/foreign_load.py link 0 1 45 &
load=$!
sleep 10
python3 benchmarks/gpu/capture_gpu_state.py "$out/cap/nvml-link-01.json"
step sweep-link-01 100 gpulane sweep "${SW[@]}" build=link-01
kill $load 2>/dev/null; wait $load 2>/dev/null

step slurm 150 bash benchmarks/slurm/run_gpu.sh "$out/slurm" .debs
for f in "$out"/runs/*/rows.jsonl; do
  python3 - "$f" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = [r for r in rows if r.get("busbw_gbps") is not None]
print(sys.argv[1].split("/")[-2], ok[0].get("build") if ok else "-", [(r["size_bytes"] >> 20, r["in_place"], round(r["busbw_gbps"], 1)) for r in ok])
PY
done | tee "$out/summary.txt"
cat "$out/steps.log"
cd "$out/.." && tar czf "$out.tgz" "$(basename "$out")" 2>/dev/null
