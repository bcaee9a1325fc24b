#!/usr/bin/env bash
# Round 3's last device call on the lent 4-GPU machine (nvidia-h200-x4), under 10 minutes:
#   1. the advisor's table again (issue 32) with the code that times the host's issue of
#      eager prefills (extra.eager_host_ms / host_ms): qwen3-30b-a3b and glm-4.5-air (8
#      layers; glm never run on 4 GPUs, the held-out model), PART=table of
#      benchmarks/advise/run_gpu4_round3.sh, budget 400 s;
#   2. healthy accepts on a warm machine (issue 30's time to a verdict), as many as fit
#      (at most 3), each timed, accept.json kept.
# One tar: $OUT/round3b.tar.gz.
#   run(command="bash benchmarks/gpu/call_round3b.sh", carry=[".whl"], kind="nvidia-h200-x4")
set -u
OUT=${OUT:-/tmp/round3b-out}
work=/tmp/round3b
mkdir -p "$OUT" "$work/accept"
cd "$(dirname "$0")/../.." || exit 1
pack() { tar -C /tmp -czf "$OUT/round3b.tar.gz" --exclude='*.parquet' --exclude='*.png' \
  --exclude='report.html' --exclude='rank*.log' round3b; ls -la "$OUT/round3b.tar.gz"; }
trap pack EXIT
BUDGET_S=400 PART=table MOE=qwen3-30b-a3b HELDOUT=glm-4.5-air \
  bash benchmarks/advise/run_gpu4_round3.sh "$work/advise" "$work" >"$work/advise.log" 2>&1
echo "advise table: exit $? at $SECONDS s" | tee -a "$work/calls.txt"
tail -30 "$work/advise.log"
out=$work/accept
source benchmarks/gpu/env.sh
printf 'step\texit\tseconds\n' >"$work/accept/times.tsv"
for i in 1 2 3; do
  [ $SECONDS -gt 480 ] && break
  t0=$SECONDS
  timeout 90 python3 -m gpulane.cli accept "results_dir=$work/accept/runs" "build=healthy-$i" \
    >"$work/accept/healthy-$i.log" 2>&1
  rc=$?
  printf 'healthy-%s\t%s\t%s\n' "$i" "$rc" "$((SECONDS - t0))" | tee -a "$work/accept/times.tsv"
  grep -E "^(PASS|FAIL|INCOMPLETE)|verdict" "$work/accept/healthy-$i.log" | head -3
done
