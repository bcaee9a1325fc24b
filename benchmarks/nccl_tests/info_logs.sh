#!/usr/bin/env bash
# Issue 28: an nccl-tests log run with NCCL_DEBUG=INFO keeps its transport when parsed.
# On the lent GPU machine (4x H200 or 4x H100), from the repo root:
#   source benchmarks/gpu/env.sh
#   NCCL_TESTS_HOME=.nccl-tests/build bash benchmarks/nccl_tests/info_logs.sh OUTDIR
# About 1 minute. Writes OUTDIR/<preset>.log (nccl-tests' own output with NCCL's INFO lines:
# new real fixtures for tests/fixtures/h200x4/), OUTDIR/<preset>.jsonl (gpulane parse
# nccl-tests --json of it) and prints the transport each log's rows carry:
# default -> P2P/CUMEM (NV18), NCCL_P2P_DISABLE=1 -> SHM, +NCCL_SHM_DISABLE=1 -> NET/Socket.
set -u
OUT=${1:?OUTDIR}
mkdir -p "$OUT"
: "${NCCL_TESTS_HOME:?set NCCL_TESTS_HOME to your nccl-tests build (a directory with *_perf)}"
NGPUS=$(nvidia-smi -L | wc -l)
PY=$(command -v python3)
run() {  # name, then environment assignments
  local name=$1; shift
  env "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH \
    timeout 120 "$NCCL_TESTS_HOME/all_reduce_perf" -g "$NGPUS" -b 8 -e 256M -f 4 -w 5 -n 20 \
    > "$OUT/$name.log" 2>&1
  echo "$name: all_reduce_perf exit $?"
  "$PY" -m gpulane.cli parse nccl-tests "$OUT/$name.log" --build "$name" --json > "$OUT/$name.jsonl"
  "$PY" - "$OUT/$name.jsonl" <<'PY'
import json, sys
rows = [json.loads(x) for x in open(sys.argv[1]) if x.startswith("{")]
ok = [r for r in rows if r["status"] == "ok"]
nccl = (ok or rows)[0]["extra"].get("nccl") or {}
print(f"  {len(ok)} rows; transport {sorted({r['transport'] for r in ok}, key=str)}; "
      f"NCCL {nccl.get('version')}, {nccl.get('channels')} channels, pairs {len(nccl.get('pairs') or [])}")
PY
}
run nvlink NCCL_NVLS_ENABLE=0
run pcie-host NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1
run socket NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
