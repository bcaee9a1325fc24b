#!/usr/bin/env bash
# On a GPU machine: the front still counts its GPUs after session 6's driver check (a CPU
# host answers 0 without importing torch; a GPU host asks torch as before), and a default
# sweep still picks the GPUs by itself (device=auto, ranks=auto).
#   bash benchmarks/ci/run_gpu_world.sh OUT     # OUT/world.txt, OUT/sweep.txt
set -uo pipefail
out=${1:?usage: run_gpu_world.sh OUT}
mkdir -p "$out"
source benchmarks/gpu/env.sh
{
  echo "host=$(hostname) date=$(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name --format=csv,noheader
  for p in /dev/nvidiactl /dev/nvidia0 /proc/driver/nvidia /dev/kfd /dev/dxg; do
    [ -e "$p" ] && echo "present $p" || echo "absent $p"
  done
  python3 -c "
import sys, time
t = time.process_time()
from gpulane.session.world import gpu_driver_present, local_gpus
n = local_gpus()
print(f'driver={gpu_driver_present()} gpus={n} torch_imported={\"torch\" in sys.modules} cpu_s={time.process_time() - t:.2f}')
"
} >"$out/world.txt" 2>&1
gpulane sweep collectives=all_reduce sizes.min=1M sizes.max=64M iters=5 warmup=2 \
  results_dir="$out/runs" >"$out/sweep.txt" 2>&1
echo "sweep exit $?" >>"$out/sweep.txt"
rm -rf "$out/runs"
