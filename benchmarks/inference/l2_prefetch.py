"""One-row products after an idle window, with the head of the weight prefetched into L2
during the window (``gpulane.inference.l2_prefetch``) or not: what ``l2_prefetch=MiB``
can gain a decode step, product by product.

    python benchmarks/inference/l2_prefetch.py [--out DIR] [--rounds 2]
    python benchmarks/inference/l2_prefetch.py --device cpu   # dry run of the logic

Each case is one weight of a TP rank's slice (the 8B at TP=1 and 4, the 72B at TP=4), its
product with one row. A CUDA graph runs, for each of ``copies`` weights (more bytes than
L2 holds, as a step's layers are): a window of ``torch.cuda._sleep`` (the stand-in for
attention, RMSNorm or an all-reduce: DRAM idle), then the product; with a budget, the
side stream prefetches the weight's head as the window opens, issued by each of
``l2_prefetch.LAUNCHES``. The figure is microseconds per (window + product), minus the
window alone, the median of ``--rounds`` rounds that alternate the order; the roofline is the weight's bytes over the measured copy rate.
Prints JSON lines; writes prefetch.jsonl under --out.
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

from gpulane.inference.l2_prefetch import DEFAULT, LAUNCHES, L2Prefetch, Launch, MiB

# (case, out features, in features): one TP rank's weights
WEIGHTS = [
    ("8b-tp1 qkv", 6144, 4096), ("8b-tp1 o_proj", 4096, 4096),
    ("8b-tp1 gate_up", 28672, 4096), ("8b-tp1 down", 4096, 14336),
    ("8b-tp4 qkv", 1536, 4096), ("8b-tp4 o_proj", 4096, 1024),
    ("8b-tp4 gate_up", 7168, 4096), ("8b-tp4 down", 4096, 3584),
    ("72b-tp4 qkv", 2560, 8192), ("72b-tp4 o_proj", 8192, 2048),
]  # fmt: skip
WINDOWS_US = [0, 3, 10]
BUDGETS_MIB = [0, 4, 8, 16]


def sleep_cycles_per_us() -> float:
    """torch.cuda._sleep's cycles per microsecond on this GPU (a graph of 20 sleeps)."""
    cycles = 100_000
    ms = profile_decode.graph_ms(lambda: [torch.cuda._sleep(cycles) for _ in range(20)], 10)
    return cycles * 20 / (ms * 1e3)


def case_rows(
    name: str, n: int, k: int, args: Any, dev: torch.device, gbps: float, per_us: float
) -> list[dict[str, Any]]:
    cuda = dev.type == "cuda"
    dt = torch.bfloat16 if cuda else torch.float32
    if not cuda:
        n, k = max(16, n // 256), max(16, k // 256)
    nbytes = n * k * (2 if cuda else 4)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size if cuda else 1 << 20
    copies = max(3, math.ceil(4 * l2 / nbytes))
    ws = [torch.randn(n, k, device=dev, dtype=dt) for _ in range(copies)]
    x = torch.randn(1, k, device=dev, dtype=dt)

    def body(window_us: float, budget: int, how: Launch) -> Any:
        pf = L2Prefetch(budget, how=how, dry=not cuda) if budget else None
        cycles = int(window_us * per_us)

        def fn() -> None:
            for w in ws:
                if pf is not None:
                    pf.ahead("o", "w", w)
                if cuda and cycles:
                    torch.cuda._sleep(cycles)
                F.linear(x, w)
            if pf is not None:
                pf.join()

        return fn

    def alone(window_us: float) -> Any:
        cycles = int(window_us * per_us)
        return lambda: [torch.cuda._sleep(cycles) for _ in ws] if cuda and cycles else None

    timed: dict[tuple[float, int, str], list[float]] = {}
    todo = [(0, DEFAULT)] + [(mib, how) for mib in BUDGETS_MIB if mib for how in LAUNCHES.values()]
    for r in range(args.rounds):
        for window in WINDOWS_US:
            base = 1e3 * profile_decode.graph_ms(alone(window), args.replays) / copies
            for mib, how in todo if r % 2 == 0 else todo[::-1]:
                fn = body(window, mib * MiB, how)
                us = 1e3 * profile_decode.graph_ms(fn, args.replays) / copies
                timed.setdefault((window, mib, how.name if mib else "-"), []).append(us - base)
    rows = []
    roof = nbytes / (gbps * 1e3)
    for (window, mib, how_name), vals in sorted(timed.items()):
        us = statistics.median(vals)
        off = statistics.median(timed[(window, 0, "-")])
        rows.append({
            "case": name, "n": n, "k": k, "mib": round(nbytes / MiB, 2), "copies": copies,
            "window_us": window, "budget_mib": mib, "launch": how_name, "product_us": round(us, 2),
            "saved_us": round(off - us, 2), "roofline_us": round(roof, 2),
            "over_roofline": round(us / roof, 3), "rounds": vals,
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
    gbps, _ = profile_decode.rates(dev)
    per_us = sleep_cycles_per_us() if cuda else 1.0
    head = {"gpu": torch.cuda.get_device_name(dev) if cuda else "cpu (dry run)",
            "copy_gbps": round(gbps, 1), "sleep_cycles_per_us": round(per_us, 1),
            "l2_bytes": torch.cuda.get_device_properties(dev).L2_cache_size if cuda else None}  # fmt: skip
    print(json.dumps(head), flush=True)
    rows: list[dict[str, Any]] = []
    try:
        for name, n, k in WEIGHTS if cuda else WEIGHTS[:2]:
            rows += case_rows(name, n, k, args, dev, gbps, per_us)
            if cuda:
                torch.cuda.empty_cache()
    finally:  # what was measured is kept when a later case fails
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            with (args.out / "prefetch.jsonl").open("w") as fh:
                for r in [head, *rows]:
                    fh.write(json.dumps(r) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
