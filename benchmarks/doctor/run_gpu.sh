#!/usr/bin/env bash
# Issue 25 on the 2x H200 machine (NVLink NV18): NCCL's transport on every row, the
# nccl_transport_matches_path rule, and `gpulane doctor` live. Under 2 minutes.
#
#   benchmarks/doctor/run_gpu.sh [OUTDIR]        (OUTDIR defaults to $OUT)
#
# 1. `gpulane sweep` (torch backend, all_reduce 1M-16M) once per preset: nvlink, pcie-host
#    (NCCL_P2P_DISABLE=1), socket (+ NCCL_SHM_DISABLE=1). Their rows' `transport` must
#    read P2P..., SHM and NET/Socket; the sweep header must say `# transport: ...`.
#    NCCL's own INFO files (<run>/nccl/*.log) are kept under OUTDIR/nccl-info/<preset>/:
#    real 2.28.9 captures for tests/fixtures.
# 2. `gpulane accept run=<pcie-host run> topology=live`: nccl_transport_matches_path must
#    FAIL on GPU0-GPU1 (NV18) naming NCCL_P2P_DISABLE=1; on the nvlink run it must PASS.
# 3. `gpulane doctor --json --run OUTDIR/runs` live (and the text report), plus the raw
#    captures the doctor reads (lspci -vvv, nvidia-smi -q / nvlink -e, cmdline, iommu
#    groups, modules) for fixtures.
# OUTDIR/check.txt says expected against got; exit status 0 when all is as expected.
set -u -o pipefail
out=${1:-${OUT:?usage: run_gpu.sh OUTDIR (or set OUT)}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
source benchmarks/gpu/env.sh
py=${PYTHON:-python3}
runs="$out/runs"
: >"$out/check.txt"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)  kernel: $(uname -r)"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv 2>&1
} >"$out/machine.txt"

verdict() {  # name ok|FAIL words...
  local name=$1 status=$2; shift 2
  echo "$status $name: $*" | tee -a "$out/check.txt"
}

# -- 1. three presets, one sweep each -------------------------------------------------
declare -A want=([nvlink]="P2P" [pcie-host]="SHM" [socket]="NET/Socket")
for preset in nvlink pcie-host socket; do
  step "sweep-$preset" 60 "$py" -m gpulane.cli sweep "preset=$preset" "build=$preset" \
    backend=torch collectives=[all_reduce] sizes.min=1M sizes.max=16M warmup=2 iters=5 \
    progress=false "results_dir=$runs"
  dir=$(grep -o "^# rows: [^ ]*" "$out/sweep-$preset.txt" | head -1 | sed 's/^# rows: //; s#/rows.jsonl$##')
  header=$(grep -m1 "^# transport:" "$out/sweep-$preset.txt" || true)
  got=$("$py" - "$dir/rows.jsonl" <<'EOF' 2>&1
import json, sys
rows = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
print(sorted({str(r.get("transport")) for r in rows}), sorted({k for r in rows for k in r.get("env", {})}))
EOF
)
  mkdir -p "$out/nccl-info/$preset"
  cp "$dir"/nccl/*.log "$out/nccl-info/$preset/" 2>/dev/null
  echo "$dir" >"$out/nccl-info/$preset/run-dir.txt"
  if [[ "$got" == *"'${want[$preset]}"* && -n "$header" ]]; then
    verdict "sweep $preset" ok "transport ${want[$preset]} expected; rows $got; header '$header'"
  else
    verdict "sweep $preset" FAIL "transport ${want[$preset]} expected; rows $got; header '$header'"
  fi
  eval "run_$(echo "$preset" | tr - _)=\"$dir\""
done

# -- 2. the rule on the pcie-host and the nvlink runs ----------------------------------
for preset in pcie-host nvlink; do
  dir_var="run_$(echo "$preset" | tr - _)"
  step "accept-$preset" 60 "$py" -m gpulane.cli accept "run=${!dir_var}" topology=live \
    doctor=false format=markdown "out=$out/accept-$preset"
  line=$(grep "nccl_transport_matches_path" "$out/accept-$preset.txt" | grep -v "^#" | head -3)
  if [ "$preset" = pcie-host ]; then
    [[ "$line" == *FAIL*GPU0-GPU1*"NCCL used SHM"*NCCL_P2P_DISABLE=1* ]] \
      && verdict "rule on pcie-host" ok "$line" || verdict "rule on pcie-host" FAIL "$line"
  else
    [[ "$line" == *PASS*GPU0-GPU1* ]] \
      && verdict "rule on nvlink" ok "$line" || verdict "rule on nvlink" FAIL "$line"
  fi
done

# -- 3. the doctor, live, and what it reads ----------------------------------------------
step doctor 60 env COLUMNS=120 "$py" -m gpulane.cli doctor --run "$runs"
"$py" -m gpulane.cli doctor --json --no-load --run "$runs" >"$out/doctor.json" 2>"$out/doctor-json.stderr"
rc=$?
"$py" - "$out/doctor.json" <<'EOF' >>"$out/check.txt" 2>&1 \
  && verdict "doctor --json" ok "exit $rc" || verdict "doctor --json" FAIL "exit $rc"
import json, sys
r = json.load(open(sys.argv[1]))
print("   doctor:", r["counts"], "checks run:", sorted(r["checks_run"]))
print("   findings:", [(f["severity"], f["check"], f["title"]) for f in r["findings"]])
assert {"transport", "nccl_env"} & {f["check"] for f in r["findings"]}, "the presets' runs should be found"
EOF
mkdir -p "$out/captures"
nvidia-smi nvlink -e >"$out/captures/nvidia-smi-nvlink-e.txt" 2>&1
nvidia-smi -q >"$out/captures/nvidia-smi-q.txt" 2>&1
lspci -vvv >"$out/captures/lspci-vvv.txt" 2>&1
cat /proc/cmdline >"$out/captures/cmdline.txt" 2>&1
cat /proc/modules >"$out/captures/modules.txt" 2>&1
{ grep -H . /sys/kernel/iommu_groups/*/type; ls -d /sys/kernel/iommu_groups/*/devices/*; } \
  >"$out/captures/iommu.txt" 2>&1
head -1 /proc/driver/nvidia/version >"$out/captures/driver-version.txt" 2>&1
rm -rf "$runs"/*/.heartbeat

echo "== check"; cat "$out/check.txt"
! grep -q "^FAIL" "$out/check.txt"
