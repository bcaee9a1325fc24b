"""gpulane copy's timing against a plain CUDA copy loop on the same buffers.

Targets (issue 5): pinned H2D and D2H at 1 GiB at least 0.98 of a plain cudaMemcpyAsync
loop timed with CUDA events; GPU0 -> GPU1 peer copy within 0.98 of cudaMemcpyPeerAsync.

The reference is CuPy's runtime.memcpyAsync / memcpyPeerAsync in a loop of ``--loop``
copies between two events on one stream (no sleep kernel, no checks), repeated
``--rounds`` times; gpulane's figure is its own timing routine (Copier.time: sleep-queued
samples, median) on the very same tensors. The two alternate, round by round, so that
clock or thermal drift hits both alike. Prints a table and writes JSON.

usage: python3 benchmarks/transfers/reference.py [--size 1G] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from gpulane.transfers.measure import Copier, Plan
from gpulane.units import parse_size

TARGET = 0.98


def plain_loop(rt: Any, torch: Any, stream: Any, fn: Any, size: int, loop: int) -> float:
    """GB/s of ``loop`` back-to-back copies between two events."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    fn()  # warm
    stream.synchronize()
    start.record(stream)
    for _ in range(loop):
        fn()
    end.record(stream)
    stream.synchronize()
    ms = start.elapsed_time(end)
    return size * loop / (ms * 1e-3) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1G")
    ap.add_argument("--loop", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    size = parse_size(args.size)
    import torch

    n = torch.cuda.device_count()
    gpus = list(range(min(n, 2)))
    cp = Copier(gpus, size, samples=10, warmup=2, check=False)
    if cp.rt is None:
        print("CuPy is needed for the reference loop", file=sys.stderr)
        return 2
    rt = cp.rt
    hb = cp.host("pinned")
    dev0 = cp.device(0)
    s0 = dev0.streams[0]
    cases: list[tuple[str, Any, Any]] = []

    def raw_memcpy(dst: Any, src: Any, stream: Any) -> Any:
        d, s, h = int(dst.data_ptr()), int(src.data_ptr()), int(stream.cuda_stream)
        return lambda: rt.memcpyAsync(d, s, size, 4, h)

    cases.append(
        (
            "h2d pinned GPU0",
            raw_memcpy(dev0.dst, hb.src, s0),
            cp.copy_fn(dev0.dst, hb.src, size, s0),
        )
    )
    cases.append(
        (
            "d2h pinned GPU0",
            raw_memcpy(hb.dst, dev0.pattern, s0),
            cp.copy_fn(hb.dst, dev0.pattern, size, s0),
        )
    )
    if len(gpus) == 2:
        cp.set_peer_access(True)
        dev1 = cp.device(1)
        d, s, h = int(dev1.dst.data_ptr()), int(dev0.pattern.data_ptr()), int(s0.cuda_stream)
        ref_peer = lambda: rt.memcpyPeerAsync(d, 1, s, 0, size, h)  # noqa: E731
        cases.append(("p2p GPU0->GPU1 peer on", ref_peer, cp.peer_fn(0, 1, size, s0)))
    results = []
    for name, ref_fn, ours_fn in cases:
        refs, ours = [], []
        for _ in range(args.rounds):
            refs.append(plain_loop(rt, torch, s0, ref_fn, size, args.loop))
            (times,), _, _ = cp.time([Plan(s0, ours_fn)], size, True)
            ours.append(size / (statistics.median(times) * 1e-6) / 1e9)
        ref, our = statistics.median(refs), statistics.median(ours)
        ratio = our / ref
        results.append(
            {"case": name, "size": size, "reference_gbps": ref, "gpulane_gbps": our,
             "ratio": ratio, "target": TARGET, "pass": ratio >= TARGET,
             "reference_rounds": refs, "gpulane_rounds": ours}
        )  # fmt: skip
        print(
            f"{name:<26} plain loop {ref:8.2f} GB/s   gpulane {our:8.2f} GB/s   "
            f"ratio {ratio:.3f}  {'PASS' if ratio >= TARGET else 'FAIL'} (>= {TARGET})",
            flush=True,
        )
    hb.free()
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(
                {"device": torch.cuda.get_device_name(0), "gpus": n, "results": results},
                fh,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
