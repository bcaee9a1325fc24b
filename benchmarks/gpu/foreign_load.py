"""Foreign work for fault injection: keep one GPU busy (matmuls and device copies), or keep
one pair's link busy (peer copies both ways), for SECONDS. Started in the background by the
GPU scripts; nothing of gpulane's own runs in it.

    python3 benchmarks/gpu/foreign_load.py busy GPU SECONDS
    python3 benchmarks/gpu/foreign_load.py link GPU_A GPU_B SECONDS
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


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "busy":
        busy(int(sys.argv[2]), float(sys.argv[3]))
    elif what == "link":
        link(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(f"foreign_load.py: unknown load {what!r} (busy or link)")
