#!/usr/bin/env bash
# Record the offload demo's two traces on a GPU and analyse them with `gpulane trace`.
#
#   benchmarks/trace/run_gpu.sh OUTDIR [extra offload_demo.py options]
#
# Writes into OUTDIR: bad.json.gz, good.json.gz, timings.json (offload_demo.py),
# report.txt (tables), trace.json (--json), rows/ (result rows), plots/ (PNGs),
# small/ (the --small traces, like the test fixtures), machine.txt, and run.log with
# every command and its exit status. A failing step is logged and the next one runs.
set -u
OUT=${1:?usage: run_gpu.sh OUTDIR [offload_demo options]}
shift || true
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
export NCCL_NVLS_ENABLE=0
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export MPLBACKEND=Agg
PY=${PYTHON:-python3}
LOG="$OUT/run.log"
: >"$LOG"
status=0

step() {  # step NAME CMD...: run, log the command and exit status, never abort
    local name=$1
    shift
    echo "== $name: $*" | tee -a "$LOG"
    "$@" >>"$LOG" 2>&1
    local rc=$?
    echo "== $name: exit $rc" | tee -a "$LOG"
    [ $rc -eq 0 ] || status=1
    return 0
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname)"
    echo "git: $(git -C "$ROOT" rev-parse --verify -q HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,pcie.link.width.max,driver_version --format=csv 2>&1 || true
    nvidia-smi topo -m 2>&1 || true
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1 || true
} >"$OUT/machine.txt"

step demo "$PY" benchmarks/trace/offload_demo.py --out "$OUT" "$@"
step demo-small "$PY" benchmarks/trace/offload_demo.py --out "$OUT/small" --small

if [ -f "$OUT/bad.json.gz" ] && [ -f "$OUT/good.json.gz" ]; then
    # Tables (also with the line rate from this machine's topology, when it can be probed)
    echo "== report: gpulane trace bad good --plot --out" | tee -a "$LOG"
    "$PY" -m gpulane.cli trace "$OUT/bad.json.gz" "$OUT/good.json.gz" \
        --plot "$OUT/plots" --out "$OUT/rows" --max-copies 40 >"$OUT/report.txt" 2>>"$LOG"
    rc=$?; echo "== report: exit $rc" | tee -a "$LOG"; [ $rc -eq 0 ] || status=1
    echo "== json: gpulane trace bad good --json" | tee -a "$LOG"
    "$PY" -m gpulane.cli trace "$OUT/bad.json.gz" "$OUT/good.json.gz" --json \
        >"$OUT/trace.json" 2>>"$LOG"
    rc=$?; echo "== json: exit $rc" | tee -a "$LOG"; [ $rc -eq 0 ] || status=1
    # The same with the PCIe Gen5 x16 line rate stated, in case the topology probe is absent
    "$PY" -m gpulane.cli trace "$OUT/bad.json.gz" "$OUT/good.json.gz" --line-rate-gbps 63.0 \
        --max-copies 5 >"$OUT/report-gen5x16.txt" 2>>"$LOG" || status=1
fi
if [ -f "$OUT/small/bad.json.gz" ] && [ -f "$OUT/small/good.json.gz" ]; then
    "$PY" -m gpulane.cli trace "$OUT/small/bad.json.gz" "$OUT/small/good.json.gz" \
        --line-rate-gbps 63.0 >"$OUT/small/report.txt" 2>>"$LOG" || status=1
fi

echo "outputs in $OUT (status $status):"
ls -la "$OUT" "$OUT/plots" 2>/dev/null
[ -f "$OUT/report.txt" ] && tail -n 20 "$OUT/report.txt"
exit $status
