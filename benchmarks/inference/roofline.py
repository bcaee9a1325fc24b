"""Decode step time against the HBM roofline: the bytes a step moves on a GPU
(:func:`gpulane.inference.roofline.step_cost`: weights once without the embedding table,
the embedding rows, the KV cache read and written, activations; ``docs/roofline.md``)
over the device copy bandwidth.

usage: python benchmarks/inference/roofline.py COPY_BW_JSON RUN_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from gpulane.inference.memory import cache_len
from gpulane.inference.roofline import step_cost
from gpulane.inference.shapes import dtype_bytes, shape_from_config
from gpulane.record import read_rows

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: benchmarks.* beside gpulane
    sys.path.insert(0, str(ROOT))

from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)

CONF = Path(__file__).resolve().parents[2] / "gpulane" / "conf" / "model"


def main() -> int:
    with open(real(Path(sys.argv[1])), encoding="utf-8") as fh:
        bw = json.load(fh)
    gbps = float(bw["copy_gbps_read_plus_write_median"])
    rows = [
        r.to_dict()
        for r in read_rows(real(Path(sys.argv[2])))
        if r.op == "decode" and r.status == "ok"
    ]
    if not rows:
        print("no decode rows", file=sys.stderr)
        return 1
    for r in rows:
        config = yaml.safe_load((CONF / f"{r['model']}.yaml").read_text())
        shape = shape_from_config(config).with_layers(int(r["layers"]))
        ctx = cache_len(int(r["input_len"]), int(r["output_len"]))
        # the busiest rank: stage 0 of a pipeline (the first stages take the extra layer)
        cost = step_cost(
            shape, "decode", int(r["batch"]), ctx, dtype_bytes(str(r["dtype"])),
            int(r["tp"]), int(r["pp"]), 0,
        )  # fmt: skip
        roof_ms = cost.memory_s(gbps) * 1e3
        step_ms = float(r["time_us"]) / 1e3
        p50 = float(r["itl_ms_p50"])
        print(
            json.dumps(
                {
                    "model": r["model"],
                    "tp": r["tp"],
                    "batch": r["batch"],
                    "input_len": r["input_len"],
                    "context": ctx,
                    "step_bytes": int(cost.bytes),
                    "weight_bytes": int(cost.weight_bytes),
                    "kv_read_bytes": int(cost.kv_read_bytes),
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
