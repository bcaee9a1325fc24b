"""Faults to plant on the GPU machine (benchmarks/accept/run_faults_gpu.sh starts one in
the background and ends it by its pid).

    python benchmarks/accept/faults.py busy GPU SECONDS    # matmuls in a loop on one GPU
    python benchmarks/accept/faults.py peer A B SECONDS    # peer copies A<->B, both ways

``busy``: another user's job on one GPU: bf16 matmuls back to back, SMs at 100 % and the
power at its cap. ``peer``: one pair's link kept full: 256 MiB copies GPU A -> B and B -> A
on two streams, without end, as a job that shuffles activations between two GPUs does;
the copy engines and that pair's NVLinks are taken, the other pairs' are not.
"""

from __future__ import annotations

import sys
import time

import torch


def busy(gpu: int, seconds: float) -> None:
    dev = torch.device("cuda", gpu)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            a = (a @ b).clamp_(-1, 1)
        torch.cuda.synchronize(dev)


def peer(x: int, y: int, seconds: float) -> None:
    n = 256 << 20
    bufs = {
        (x, y): (
            torch.empty(n, dtype=torch.uint8, device=f"cuda:{x}"),
            torch.empty(n, dtype=torch.uint8, device=f"cuda:{y}"),
        ),
        (y, x): (
            torch.empty(n, dtype=torch.uint8, device=f"cuda:{y}"),
            torch.empty(n, dtype=torch.uint8, device=f"cuda:{x}"),
        ),
    }
    streams = {k: torch.cuda.Stream(device=f"cuda:{k[0]}") for k in bufs}
    end = time.time() + seconds
    while time.time() < end:
        for k, (src, dst) in bufs.items():
            with torch.cuda.stream(streams[k]):
                for _ in range(8):
                    dst.copy_(src, non_blocking=True)
        for s in streams.values():
            s.synchronize()


def main(argv: list[str]) -> int:
    if argv[:1] == ["busy"] and len(argv) == 3:
        busy(int(argv[1]), float(argv[2]))
    elif argv[:1] == ["peer"] and len(argv) == 4:
        peer(int(argv[1]), int(argv[2]), float(argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
