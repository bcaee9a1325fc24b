"""Device copy bandwidth with torch on GPU 0 (bytes read + written per second), for the
HBM roofline of `run_gpu.sh`, and the dense bf16 matrix rate (an 8192^3 product, random
data), for the FLOP roofline of a prefill. Prints one JSON object."""

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


def matmul_tflops(device: str | torch.device = "cuda", n: int = 8192, iters: int = 10) -> float:
    """Median bf16 TFLOP/s of an n x n x n product on random data (after 3 warm-ups)."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return 2 * n**3 / sorted(times)[len(times) // 2] / 1e12


def main() -> None:
    out = measure()
    out["matmul_bf16_tflops_median"] = matmul_tflops()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
