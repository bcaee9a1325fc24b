"""Foreign work for fault injection: keep one GPU busy (matmuls and device copies), or keep
one pair's link busy (peer copies both ways), for SECONDS. Started in the background by the
GPU scripts; nothing of gpulane's own runs in it.

    python3 benchmarks/gpu/foreign_load.py busy GPU SECONDS
    python3 benchmarks/gpu/foreign_load.py link GPU_A GPU_B SECONDS
    python3 benchmarks/gpu/foreign_load.py pcie GPU SECONDS
    python3 benchmarks/gpu/foreign_load.py hold GPU GIB SECONDS

``pcie`` keeps the GPU's host link full both ways (pinned 256 MiB copies in and out on two
streams): what a neighbour's data loader does to a node's copies. ``hold`` allocates GIB of
the GPU's memory and sits on it: what a forgotten notebook does to a model's fit.
"""

from __future__ import annotations

import sys
import time

import torch


def busy(gpu: int, seconds: float) -> None:
    dev = torch.device("cuda", gpu)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    big = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    big2 = torch.empty_like(big)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(20):
            a = (a @ b).clamp_(-1, 1)
            big2.copy_(big)
        torch.cuda.synchronize(dev)


def link(ga: int, gb: int, seconds: float) -> None:
    da, db = torch.device("cuda", ga), torch.device("cuda", gb)
    xa = torch.empty(1 << 30, dtype=torch.uint8, device=da)
    xb = torch.empty(1 << 30, dtype=torch.uint8, device=db)
    ya = torch.empty_like(xa)
    yb = torch.empty_like(xb)
    sa, sb = torch.cuda.Stream(da), torch.cuda.Stream(db)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10):
            with torch.cuda.stream(sa):
                yb.copy_(xa, non_blocking=True)
            with torch.cuda.stream(sb):
                ya.copy_(xb, non_blocking=True)
        sa.synchronize()
        sb.synchronize()


def pcie(gpu: int, seconds: float) -> None:
    dev = torch.device("cuda", gpu)
    host_in = torch.ones(256 << 20, dtype=torch.uint8).pin_memory()
    host_out = torch.empty_like(host_in).pin_memory()
    dev_in = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    dev_out = torch.ones_like(dev_in)
    s_in, s_out = torch.cuda.Stream(dev), torch.cuda.Stream(dev)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(8):
            with torch.cuda.stream(s_in):
                dev_in.copy_(host_in, non_blocking=True)
            with torch.cuda.stream(s_out):
                host_out.copy_(dev_out, non_blocking=True)
        s_in.synchronize()
        s_out.synchronize()


def hold(gpu: int, gib: float, seconds: float) -> None:
    dev = torch.device("cuda", gpu)
    held = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device=dev)
    held.fill_(1)
    torch.cuda.synchronize(dev)
    time.sleep(seconds)


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "busy":
        busy(int(sys.argv[2]), float(sys.argv[3]))
    elif what == "link":
        link(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    elif what == "pcie":
        pcie(int(sys.argv[2]), float(sys.argv[3]))
    elif what == "hold":
        hold(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(f"foreign_load.py: unknown load {what!r} (busy, link, pcie or hold)")
