"""Record a torch.profiler Chrome trace of what a serving step does to a GPU's paths, for
the conformance run's `gpulane trace` step: pinned and pageable host<->device copies,
device copies and a matmul, each a few times.

    python3 benchmarks/gpu/record_trace.py OUT.json [GPU]
"""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile


def record(path: str, gpu: int = 0) -> None:
    dev = torch.device("cuda", gpu)
    pinned = torch.ones(64 << 20, dtype=torch.uint8).pin_memory()
    pageable = torch.ones(64 << 20, dtype=torch.uint8)
    on_dev = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    torch.cuda.synchronize(dev)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(4):
            on_dev.copy_(pinned, non_blocking=True)
            pinned.copy_(on_dev, non_blocking=True)
            on_dev.copy_(pageable)
            b = a @ a
            on_dev.clone()
        torch.cuda.synchronize(dev)
    del b
    prof.export_chrome_trace(path)


if __name__ == "__main__":
    record(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
