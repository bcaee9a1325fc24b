"""What an L2 prefetch does to the small kernel it runs beside: decode attention or an
RMSNorm as the window (instead of l2_prefetch.py's sleep), then the product that follows
it in a decode layer.

    python benchmarks/inference/l2_prefetch_windows.py [--out DIR] [--rounds 2]
    python benchmarks/inference/l2_prefetch_windows.py --device cpu   # dry run (logic)

Each case is a TP rank's slice at batch 1: the fused attention kernel over a cache of 1088
positions (1056 live) before o_proj, or an RMSNorm before QKV. A CUDA graph runs it over
``copies`` layers (caches and weights of their own, more bytes than L2 holds), and times
per layer: the window alone, the window beside a prefetch of the product's weight (no
product), the window then the product, and all three. The figures say how much longer
the window takes beside the prefetch, and how much of the product the prefetch saves.
Prints JSON lines; writes windows.jsonl under --out.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

import profile_decode  # beside this script: its graph timer
import torch
import torch.nn.functional as F

from gpulane.inference.l2_prefetch import LAUNCHES, L2Prefetch, MiB

D = 128
# (case, window, KV heads, group, hidden, out features, in features)
CASES = [
    ("8b-tp1 attention+o_proj", "attention", 8, 4, 4096, 4096, 4096),
    ("8b-tp4 attention+o_proj", "attention", 2, 4, 4096, 4096, 1024),
    ("72b-tp4 attention+o_proj", "attention", 2, 8, 8192, 8192, 2048),
    ("8b-tp1 norm+qkv", "norm", 8, 4, 4096, 6144, 4096),
    ("8b-tp4 norm+qkv", "norm", 2, 4, 4096, 1536, 4096),
]
BUDGETS_MIB = [8, 16]
HOW = ["bulk4kx32w1", "bulk16kx128w4"]


def window_fn(kind: str, kvh: int, g: int, hidden: int, copies: int, dev: torch.device) -> Any:
    """fn(i): layer i's window kernel, on its own cache."""
    cuda = dev.type == "cuda"
    dt = torch.bfloat16 if cuda else torch.float32
    if kind == "norm":
        xs = [torch.randn(1, hidden, device=dev, dtype=dt) for _ in range(copies)]
        w = torch.ones(hidden, device=dev, dtype=dt)
        return lambda i: F.rms_norm(xs[i], (hidden,), w, 1e-5)
    from gpulane.inference.fused_attention import fused_decode_attention

    clen, live = (1088, 1056) if cuda else (80, 70)
    caches = [torch.randn(2, 1, kvh, clen, D, device=dev, dtype=dt) for _ in range(copies)]
    q = torch.randn(1, kvh, g, D, device=dev, dtype=dt)
    lengths = torch.full((1,), live, device=dev, dtype=torch.int64)
    return lambda i: fused_decode_attention(q, caches[i][0], caches[i][1], lengths)


def case_rows(case: tuple[Any, ...], args: Any, dev: torch.device) -> list[dict[str, Any]]:
    name, kind, kvh, g, hidden, n, k = case
    cuda = dev.type == "cuda"
    dt = torch.bfloat16 if cuda else torch.float32
    if not cuda:
        n, k = max(16, n // 256), max(16, k // 256)
    nbytes = n * k * (2 if cuda else 4)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size if cuda else 1 << 20
    copies = min(64, max(3, math.ceil(4 * l2 / nbytes)))
    ws = [torch.randn(n, k, device=dev, dtype=dt) for _ in range(copies)]
    x = torch.randn(1, k, device=dev, dtype=dt)
    window = window_fn(kind, kvh, g, hidden, copies, dev)

    def graph(pf: L2Prefetch | None, product: bool) -> Any:
        def fn() -> None:
            for i, w in enumerate(ws):
                if pf is not None:
                    pf.ahead("o", "w", w)
                window(i)
                if product:
                    F.linear(x, w)
            if pf is not None:
                pf.join()

        return fn

    def us(fn: Any) -> float:
        return 1e3 * profile_decode.graph_ms(fn, args.replays) / copies

    todo = [(mib, how) for mib in BUDGETS_MIB for how in HOW]
    timed: dict[tuple[int, str, bool], list[float]] = {}
    for r in range(args.rounds):
        for mib, how in [(0, "-"), *todo] if r % 2 == 0 else [*todo[::-1], (0, "-")]:
            pf = L2Prefetch(mib * MiB, how=LAUNCHES[how], dry=not cuda) if mib else None
            for product in (False, True):
                timed.setdefault((mib, how, product), []).append(us(graph(pf, product)))
    med = {key: statistics.median(v) for key, v in timed.items()}
    alone, before = med[(0, "-", False)], med[(0, "-", True)] - med[(0, "-", False)]
    rows = []
    for mib, how in [(0, "-"), *todo]:
        win, both = med[(mib, how, False)], med[(mib, how, True)]
        rows.append({
            "case": name, "window": kind, "mib": round(nbytes / MiB, 2), "copies": copies,
            "budget_mib": mib, "launch": how, "window_us": round(win, 2),
            "window_slower_us": round(win - alone, 2), "window_then_product_us": round(both, 2),
            "product_us": round(both - win, 2), "saved_us": round(before + alone - both, 2),
            "rounds": {"window": timed[(mib, how, False)], "both": timed[(mib, how, True)]},
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of this script's logic")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    profile_decode.CUDA = cuda
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if not cuda:
        args.replays = 1
    head = {"gpu": torch.cuda.get_device_name(dev) if cuda else "cpu (dry run)"}
    print(json.dumps(head), flush=True)
    rows: list[dict[str, Any]] = []
    try:
        for case in CASES if cuda else [CASES[1], CASES[4]]:
            rows += case_rows(case, args, dev)
            if cuda:
                torch.cuda.empty_cache()
    finally:  # what was measured is kept when a later case fails
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            with (args.out / "windows.jsonl").open("w") as fh:
                for r in [head, *rows]:
                    fh.write(json.dumps(r) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
