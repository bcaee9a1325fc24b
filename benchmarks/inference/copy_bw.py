"""Device copy bandwidth with torch on GPU 0 (bytes read + written per second), for the
HBM roofline of `run_gpu.sh`. Prints one JSON object."""

from __future__ import annotations

import json

import torch


def main() -> None:
    n = 2 << 30  # 2 GiB per buffer
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    best = min(times)
    median = sorted(times)[len(times) // 2]
    print(
        json.dumps(
            {
                "gpu": torch.cuda.get_device_name(0),
                "buffer_bytes": n,
                "copy_gbps_read_plus_write_median": 2 * n / median / 1e9,
                "copy_gbps_read_plus_write_best": 2 * n / best / 1e9,
            }
        )
    )


if __name__ == "__main__":
    main()
