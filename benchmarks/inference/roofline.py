"""Decode step time against the HBM roofline: weight bytes per GPU / device copy bandwidth.

usage: python benchmarks/inference/roofline.py COPY_BW_JSON RUN_DIR
"""

from __future__ import annotations

import json
import sys

from gpulane.record import read_rows

GiB = float(1 << 30)


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        bw = json.load(fh)
    gbps = float(bw["copy_gbps_read_plus_write_median"])
    rows = [
        r for r in read_rows(sys.argv[2]) if r.get("op") == "decode" and r.get("status") == "ok"
    ]
    if not rows:
        print("no decode rows", file=sys.stderr)
        return 1
    for r in rows:
        weights = float(r["extra"]["weights_gib_per_gpu"]) * GiB
        roof_ms = weights / (gbps * 1e9) * 1e3
        step_ms = float(r["time_us"]) / 1e3
        p50 = float(r["itl_ms_p50"])
        print(
            json.dumps(
                {
                    "model": r["model"],
                    "tp": r["tp"],
                    "batch": r["batch"],
                    "input_len": r["input_len"],
                    "weight_bytes_per_gpu": int(weights),
                    "copy_gbps": round(gbps, 1),
                    "roofline_ms": round(roof_ms, 3),
                    "step_ms_mean": round(step_ms, 3),
                    "step_ms_p50": round(p50, 3),
                    "ratio_mean": round(step_ms / roof_ms, 3),
                    "ratio_p50": round(p50 / roof_ms, 3),
                    "target": "ratio <= 1.5",
                    "ok": step_ms / roof_ms <= 1.5,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
