"""The fixed cost of a decode step's kernels on one GPU, measured on its own: issue 32's
per-kernel floor, without a model around it.

usage: python benchmarks/inference/floor_probe.py --out DIR [--device cpu] [--replays N]

Every probe is a CUDA graph replayed (``profile_decode.graph_ms``; ``--device cpu``: a dry
run of the logic on the host clock, timings meaningless), so that what is timed is what a
graph-replayed decode step pays per kernel:

- ``chain``: 256 launches of the smallest kernel (one element, ``+= 1``), each after the
  last: a kernel in a graph that reads next to nothing;
- ``norm``: 256 residual add + RMSNorm of one row (h = 4096 and 8192), each on the last
  one's output, compiled by inductor as the step compiles it: a latency-bound kernel's
  dependent round trips;
- ``products``: every weight product of a decode layer of llama3-8b and qwen2.5-72b at
  TP=1, 2 and 4 (TP rank 0's slice: QKV, o_proj, gate/up, down), one row and 16, as
  cuBLAS runs them in the step (``F.linear``). Each is timed over enough weight copies
  (256 MiB or more in all) that the copies do not stay in L2, as the step's weights do not.
  The fit, per row count: time = fixed + weight bytes / rate (least squares over the
  shapes), and each product's time above its weight bytes at the copy rate (``--copy-gbps``,
  else the median of DIR/copy_bw.json or DIR/../copy_bw.json, the first there).

Writes DIR/floor.json and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from benchmarks.inference import profile_decode  # noqa: E402
from gpulane.inference.shapes import packaged_shape  # noqa: E402
from gpulane.inference.sharding import rank_slices  # noqa: E402

MODELS = ("llama3-8b", "qwen2.5-72b")
TPS = (1, 2, 4)
ROWS = (1, 16)
CHAIN = 256  # kernels per chained graph
COPIES_BYTES = 256 << 20  # weight copies per product graph: well past any L2
MAX_COPIES = 64
EPS = 1e-5


def layer_products(model: str, tp: int) -> list[tuple[str, int, int]]:
    """(name, N, K) of the weight products of one decode layer on TP rank 0: y = x W^T with
    W of N x K, as gpulane.inference.model builds them (QKV and gate/up fused)."""
    shape = packaged_shape(model)
    assert shape is not None, model
    s = rank_slices(shape, tp)
    h = shape.hidden_size
    return [
        ("qkv", s.qkv_out, h),
        ("o_proj", h, s.o_in),
        ("gate_up", 2 * s.intermediate, h),
        ("down", h, s.intermediate),
    ]


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (x, y) points; at least two
    distinct x are needed."""
    n = len(points)
    if n < 2:
        raise ValueError("a line needs points at two or more distinct x")
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        raise ValueError("a line needs points at two or more distinct x")
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def fit_products(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per row count: ``fixed_us`` (the intercept) and ``rate_gbps`` (1 / slope, weight
    bytes per second) of time = fixed + bytes / rate."""
    out: dict[str, dict[str, float]] = {}
    for r in sorted({row["rows"] for row in rows}):
        pts = [(row["weight_bytes"], row["us"]) for row in rows if row["rows"] == r]
        fixed, slope = fit_line(pts)
        out[str(r)] = {
            "fixed_us": round(fixed, 2),
            "rate_gbps": round(1e-3 / slope, 1) if slope > 0 else float("inf"),
            "shapes": len(pts),
        }
    return out


def chain_us(device: str, replays: int) -> float:
    x = torch.zeros(1, device=device)

    def fn() -> None:
        for _ in range(CHAIN):
            x.add_(1)

    return profile_decode.graph_ms(fn, replays) * 1e3 / CHAIN


def norm_us(device: str, hidden: int, replays: int) -> float:
    """One compiled residual add + RMSNorm of one row, chained (each reads the last's output)."""

    def add_norm(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = x + r
        return F.rms_norm(r, (hidden,), w, EPS), r

    fused = torch.compile(add_norm, dynamic=False, fullgraph=True)
    dtype = torch.bfloat16
    x = torch.randn(1, hidden, device=device, dtype=dtype)
    r = torch.randn(1, hidden, device=device, dtype=dtype)
    w = torch.ones(hidden, device=device, dtype=dtype)
    fused(x, r, w)  # compile before the capture

    def fn() -> None:
        a, b = x, r
        for _ in range(CHAIN):
            a, b = fused(a, b, w)

    return profile_decode.graph_ms(fn, replays) * 1e3 / CHAIN


def product_us(device: str, rows: int, n: int, k: int, replays: int) -> tuple[float, int]:
    """(us per product, copies) of x [rows, k] @ W^T, W [n, k] bf16, over weight copies."""
    dtype = torch.bfloat16
    nbytes = n * k * 2
    copies = max(1, min(MAX_COPIES, -(-COPIES_BYTES // nbytes)))
    ws = [torch.randn(n, k, device=device, dtype=dtype) * 0.02 for _ in range(copies)]
    x = torch.randn(rows, k, device=device, dtype=dtype)

    def fn() -> None:
        for w in ws:
            F.linear(x, w)

    ms = profile_decode.graph_ms(fn, replays)
    ws.clear()
    if device == "cuda":
        torch.cuda.empty_cache()
    return ms * 1e3 / copies, copies


def copy_rate(out: Path, given: float | None) -> float | None:
    if given:
        return given
    for path in (out / "copy_bw.json", out.parent / "copy_bw.json"):
        try:
            return float(json.loads(path.read_text())["copy_gbps_read_plus_write_median"])
        except (OSError, ValueError, KeyError):
            continue
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--copy-gbps", type=float, default=None)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--tps", default=",".join(str(t) for t in TPS))
    args = ap.parse_args(argv)
    device = args.device
    profile_decode.CUDA = device == "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("floor_probe: no GPU visible; use --device cpu for a dry run", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    rate = copy_rate(args.out, args.copy_gbps)
    doc: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (dry run)",
        "torch": str(torch.__version__),
        "copy_gbps": rate,
        "chain_kernels": CHAIN,
        "chain_us": round(chain_us(device, args.replays), 3),
        "norm_us": {str(h): round(norm_us(device, h, args.replays), 3) for h in (4096, 8192)},
        "products": [],
    }
    seen: set[tuple[int, int, int]] = set()
    for model in args.models.split(","):
        for tp in (int(t) for t in args.tps.split(",")):
            for name, n, k in layer_products(model, tp):
                for rows in ROWS:
                    us, copies = product_us(device, rows, n, k, args.replays)
                    nbytes = n * k * 2
                    row: dict[str, Any] = {
                        "model": model, "tp": tp, "product": name, "rows": rows, "n": n,
                        "k": k, "weight_bytes": nbytes, "copies": copies, "us": round(us, 2),
                        "repeat": (rows, n, k) in seen,
                    }  # fmt: skip
                    seen.add((rows, n, k))
                    if rate:
                        row["roofline_us"] = round(nbytes / rate / 1e3, 2)
                        row["above_us"] = round(us - row["roofline_us"], 2)
                    doc["products"].append(row)
    unique = [r for r in doc["products"] if not r["repeat"]]
    doc["fit"] = fit_products(unique)
    (args.out / "floor.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{doc['gpu']}: a chained kernel {doc['chain_us']} us, add + RMSNorm {doc['norm_us']} us")
    for r, f in doc["fit"].items():
        print(f"products of {r} row(s): {f['fixed_us']} us + bytes / {f['rate_gbps']} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
