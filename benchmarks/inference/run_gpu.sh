#!/usr/bin/env bash
# gpulane tokens benchmarks on the 2xH200 machine (NVLink NV18). About 6 minutes.
#
#   benchmarks/inference/run_gpu.sh OUTDIR
#
# 1. HBM roofline: Llama-3.1-8B shapes, TP=1, batch 1, decode step against
#    weight bytes per GPU / device copy bandwidth (measured here with torch).
# 2. TP=2 on NVLink and with the pcie-host and socket presets (NCCL_P2P_DISABLE=1;
#    + NCCL_SHM_DISABLE=1): decode and prefill tokens/s, plus an all_reduce sweep of each
#    build at the sizes the model sends, joined (`gpulane join`).
#    These use all 32 layers of 8B and a smaller grid (batch 1,16; input 1024; output 64)
#    so that the socket build, at ~4 GB/s, stays within the time.
# 3. The default `gpulane tokens` run (8B, TP=2, batch 1,8,32, input 512,2048,
#    output 128), timed with `time`; target under 3 minutes.
set -uo pipefail  # a failed step is recorded; the next still runs
OUT=${1:?usage: run_gpu.sh OUTDIR}
export NCCL_NVLS_ENABLE=0
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
mkdir -p "$OUT"
G=("$PY" -m gpulane.cli)
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

echo "== 1. roofline: llama3-8b TP=1 batch 1"
"$PY" "$HERE/copy_bw.py" | tee "$OUT/copy_bw.json"
"${G[@]}" tokens model=llama3-8b tp=1 pp=1 batch=1 input_len=512 output_len=128 \
  comm_off=false build=h200-tp1 results_dir="$OUT/roofline" 2>&1 | tee "$OUT/roofline.log"
"$PY" "$HERE/roofline.py" "$OUT/copy_bw.json" "$OUT/roofline" | tee "$OUT/roofline.json"

echo "== 2. TP=2 per build: nvlink, pcie-host, socket"
for p in nvlink pcie-host socket; do
  "${G[@]}" tokens model=llama3-8b tp=2 batch=1,16 input_len=1024 output_len=64 \
    warmup=1 iters=2 preset="$p" results_dir="$OUT/builds" 2>&1 | tee "$OUT/tokens-$p.log"
  "${G[@]}" sweep preset="$p" collectives=all_reduce dtype=bfloat16 sizes.min=8K \
    sizes.max=128M warmup=3 iters=10 results_dir="$OUT/builds" > "$OUT/sweep-$p.log" 2>&1
done
"${G[@]}" join "$OUT/builds" 2>&1 | tee "$OUT/join.txt"

echo "== 3. default gpulane tokens (8B on 2 GPUs), timed"
{ time "${G[@]}" tokens results_dir="$OUT/default" ; } 2>&1 | tee "$OUT/default.log"
echo "== done: $OUT"
