#!/usr/bin/env bash
# Forked local ranks (launcher.start=fork, the default since session 5) against new
# processes (start=exec) on GPUs: the same 2-GPU sweeps, alternated, torch (NCCL through
# torch.distributed) and nccl (nccl4py), each run's exit status, its busbw table and the
# machine's CPU seconds it took. One device call:
#   bash benchmarks/ci/run_gpu_start.sh $OUT      (on nvidia-h200-x2 / nvidia-h100-x2)
set -uo pipefail
OUT=${1:?usage: run_gpu_start.sh OUT}
mkdir -p "$OUT/runs"
source benchmarks/gpu/env.sh
cpu() { awk '/^cpu /{print ($2+$3+$4+$7+$8)/100}' /proc/stat; }
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
for round in 1 2; do
  for backend in torch nccl; do
    for start in fork exec; do
      name="$backend-$start-$round"
      a=$(cpu); t0=$(date +%s.%N)
      timeout 300 python3 -m gpulane sweep backend=$backend device=cuda ranks=2 \
        collectives=[all_reduce] sizes.min=1M sizes.max=256M warmup=5 iters=20 \
        progress=false launcher.start=$start build=$name results_dir="$OUT/runs" \
        > "$OUT/$name.txt" 2>&1
      rc=$?
      awk -v n="$name" -v rc=$rc -v a="$a" -v b="$(cpu)" -v t0="$t0" -v t1="$(date +%s.%N)" \
        'BEGIN { printf "run=%s rc=%d cpu_s=%.2f wall_s=%.2f\n", n, rc, b - a, t1 - t0 }' \
        | tee -a "$OUT/start.txt"
    done
  done
done
tar -C "$OUT" -czf "$OUT/gpu-start.tgz" start.txt gpus.txt $(cd "$OUT" && ls *-*.txt)
