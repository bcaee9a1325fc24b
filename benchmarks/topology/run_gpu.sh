#!/usr/bin/env bash
# Live topology probe on a GPU machine, beside nvidia-smi's own view, for the record.
#   benchmarks/topology/run_gpu.sh OUTDIR
# Writes: machine.txt, gpulane-topo.txt, gpulane-topo.json, gpulane-topo-under-load.txt,
# nvidia-smi-topo-m.txt, nvidia-smi-topo-p2p-{r,w,n,a,p}.txt, nvidia-smi-nvlink-s.txt,
# nvidia-smi-q.txt, sysfs-pci.txt, lspci-tv.txt, lspci-vvv.txt (where the tools exist),
# gpulane-topo-files.json (the captures read back as files), check.txt (live vs captures).
set -u
out=${1:?usage: run_gpu.sh OUTDIR}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "kernel: $(uname -r)"
  echo "python: $($py --version 2>&1)"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv
} >"$out/machine.txt" 2>&1

run() { # name cmd...
  local name=$1; shift
  "$@" >"$out/$name" 2>"$out/$name.stderr"
  echo "$? $*" >>"$out/exit-codes.txt"
  [ -s "$out/$name.stderr" ] || rm -f "$out/$name.stderr"
}

run gpulane-topo.txt env COLUMNS=200 $py -m gpulane.cli topo
run gpulane-topo.json $py -m gpulane.cli topo --json
run gpulane-topo-under-load.txt env COLUMNS=200 $py -m gpulane.cli topo --under-load
if command -v nvidia-smi >/dev/null; then
  run nvidia-smi-topo-m.txt nvidia-smi topo -m
  for m in r w n a p; do run "nvidia-smi-topo-p2p-$m.txt" nvidia-smi topo -p2p "$m"; done
  run nvidia-smi-nvlink-s.txt nvidia-smi nvlink -s
  run nvidia-smi-q.txt nvidia-smi -q
fi
for d in /sys/bus/pci/devices/*; do
  printf '%s %s %s %s x%s max: %s x%s numa=%s -> %s\n' "$d" "$(cat "$d/vendor")" "$(cat "$d/class")" \
    "$(cat "$d/current_link_speed" 2>/dev/null)" "$(cat "$d/current_link_width" 2>/dev/null)" \
    "$(cat "$d/max_link_speed" 2>/dev/null)" "$(cat "$d/max_link_width" 2>/dev/null)" \
    "$(cat "$d/numa_node" 2>/dev/null)" "$(readlink -f "$d")"
done >"$out/sysfs-pci.txt"
if command -v lspci >/dev/null; then
  run lspci-tv.txt lspci -tv
  run lspci-vvv.txt lspci -D -vvv
fi

# The same captures read back as files, as a user on another machine would.
args=()
[ -s "$out/nvidia-smi-topo-m.txt" ] && args+=(--topo-file "$out/nvidia-smi-topo-m.txt")
for m in r w n a p; do
  [ -s "$out/nvidia-smi-topo-p2p-$m.txt" ] && args+=(--p2p-file "$m=$out/nvidia-smi-topo-p2p-$m.txt")
done
[ -s "$out/nvidia-smi-q.txt" ] && args+=(--smi-q-file "$out/nvidia-smi-q.txt")
[ -s "$out/nvidia-smi-nvlink-s.txt" ] && args+=(--nvlink-file "$out/nvidia-smi-nvlink-s.txt")
[ -s "$out/sysfs-pci.txt" ] && args+=(--sysfs-file "$out/sysfs-pci.txt")
[ -s "$out/lspci-tv.txt" ] && args+=(--lspci-file "$out/lspci-tv.txt")
[ -s "$out/lspci-vvv.txt" ] && args+=(--lspci-file "$out/lspci-vvv.txt")
if [ ${#args[@]} -gt 0 ]; then
  run gpulane-topo-files.json $py -m gpulane.cli topo "${args[@]}" --json
fi

# Live against the captures of this machine (tests/fixtures/h200x2) and against worst_path.
$py - "$out" >"$out/check.txt" 2>&1 <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
live = json.loads((out / "gpulane-topo.json").read_text())
pairs = {(p["a"], p["b"]): p["label"] for p in live["pairs"]}
print("live pairs:", pairs)
for g in live["gpus"]:
    print(g["name"], g["bus_id"], g["model"], "pcie", g["pcie"], "upstream", len(g["pcie_upstream"]))
print("warnings:", live["warnings"])
print("missing:", live["missing"])
from gpulane.topology.live import worst_path_for_gpus
print("worst_path_for_gpus([0, 1]) =", worst_path_for_gpus([0, 1]))
from gpulane.topology.live import probe_topology
from gpulane.topology.bandwidth import expected_host_gbps, expected_pair_gbps
t = probe_topology()
if len(t.gpus) >= 2:
    print("expected_pair_gbps(GPU0, GPU1) =", expected_pair_gbps(t, "GPU0", "GPU1"))
if t.gpus:
    print("expected_host_gbps(GPU0) =", expected_host_gbps(t, "GPU0"))
fx = Path("tests/fixtures/h200x2")
if fx.exists():
    from gpulane.topology.topo_matrix import parse_topo_matrix
    m = parse_topo_matrix((fx / "topo-m.txt").read_text(), "fixture")
    want = {k: v for k, v in m.labels.items() if k[0] < k[1]}
    got = {k: v for k, v in pairs.items() if k[0].startswith("GPU") and k[1].startswith("GPU")}
    print("fixture labels:", want)
    print("AGREE (labels)" if want == got else "DIFFER (labels)")
    ok = all(g["pcie"] and g["pcie"]["gen"] == 5 and g["pcie"]["width"] == 16 for g in live["gpus"])
    print("AGREE (Gen5 x16)" if ok else "DIFFER (PCIe)")
PY
cat "$out/check.txt"
