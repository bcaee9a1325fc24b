"""Device copy bandwidth with torch on GPU 0 (bytes read + written per second), for the
HBM roofline of `run_gpu.sh`. Prints one JSON object."""

from __future__ import annotations

import json

import torch


def measure(device: str | torch.device = "cuda", iters: int = 20) -> dict[str, object]:
    """Copy bandwidth of one GPU, read + written bytes per second (median and best)."""
    n = 2 << 30  # 2 GiB per buffer
    a = torch.empty(n, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return {
        "gpu": torch.cuda.get_device_name(device),
        "buffer_bytes": n,
        "copy_gbps_read_plus_write_median": 2 * n / sorted(times)[len(times) // 2] / 1e9,
        "copy_gbps_read_plus_write_best": 2 * n / min(times) / 1e9,
    }


def main() -> None:
    print(json.dumps(measure()))


if __name__ == "__main__":
    main()
