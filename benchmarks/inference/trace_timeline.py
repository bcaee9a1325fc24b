"""Where a profiled prefill's time went, per rank: GPU busy and idle time, NCCL kernels
against compute kernels, the host's time in the collective calls, and how far apart the
ranks entered each collective.

    python benchmarks/inference/trace_timeline.py RUN_DIR/trace-prefill-*-rank*.json[.gz]

Reads the Chrome traces that `gpulane tokens profile=true` writes (torch.profiler, CPU and
CUDA). Prints one JSON object per rank, then the skew between ranks.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def summary(path: Path) -> dict[str, Any]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    events = json.loads(raw)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    nccl = [e for e in kernels if "nccl" in e["name"].lower()]
    compute = [e for e in kernels if "nccl" not in e["name"].lower()]
    span = (
        max(e["ts"] + e["dur"] for e in kernels) - min(e["ts"] for e in kernels) if kernels else 0
    )
    busy = union_us([(e["ts"], e["ts"] + e["dur"]) for e in kernels])
    cpu_coll = [
        e
        for e in events
        if e.get("cat") == "cpu_op" and e["name"] in ("c10d::allreduce_", "record_param_comms")
    ]
    host = [e for e in events if e.get("cat") == "cpu_op" and e["name"].startswith("aten::")]
    host_span = max(e["ts"] + e["dur"] for e in host) - min(e["ts"] for e in host) if host else 0
    return {
        "trace": path.name,
        "gpu_span_ms": round(span / 1e3, 3),
        "gpu_busy_ms": round(busy / 1e3, 3),
        "gpu_idle_ms": round((span - busy) / 1e3, 3),
        "compute_kernels": len(compute),
        "compute_kernel_ms": round(sum(e["dur"] for e in compute) / 1e3, 3),
        "nccl_kernels": len(nccl),
        "nccl_kernel_ms": round(sum(e["dur"] for e in nccl) / 1e3, 3),
        "nccl_kernel_us_median": round(statistics.median(e["dur"] for e in nccl), 1)
        if nccl
        else None,
        "host_collective_calls": len([e for e in cpu_coll if e["name"] == "c10d::allreduce_"]),
        "host_collective_us_median": round(
            statistics.median(e["dur"] for e in cpu_coll if e["name"] == "c10d::allreduce_"), 1
        )
        if any(e["name"] == "c10d::allreduce_" for e in cpu_coll)
        else None,
        "host_aten_span_ms": round(host_span / 1e3, 3),
        "_nccl_starts": sorted(e["ts"] for e in nccl),
        "_nccl_durs": [e["dur"] for e in sorted(nccl, key=lambda e: e["ts"])],
    }


def main(paths: list[str]) -> int:
    out = [summary(Path(p)) for p in paths]
    for s in out:
        print(json.dumps({k: v for k, v in s.items() if not k.startswith("_")}))
    if len(out) == 2 and out[0]["_nccl_starts"] and out[1]["_nccl_starts"]:
        a, b = out[0]["_nccl_starts"], out[1]["_nccl_starts"]
        skew = [abs(x - y) for x, y in zip(a, b, strict=False)]
        print(
            json.dumps(
                {
                    "collectives_compared": len(skew),
                    "start_skew_us_median": round(statistics.median(skew), 1),
                    "start_skew_us_max": round(max(skew), 1),
                    "nccl_kernel_us_rank0_first5": [round(d, 1) for d in out[0]["_nccl_durs"][:5]],
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
