"""A small layer-wise weight-offload loop, done badly and done well, under torch.profiler.

bad:  weights in pageable host memory; each layer's weight is copied with a blocking
      ``.to(device)`` right before it is used, on the default stream.
good: weights in pinned host memory; the next layer's weight is prefetched with
      ``.to(device, non_blocking=True)`` on a side stream while the current layer
      computes; the compute stream waits on an event, not on the host.

Each mode writes a Chrome trace (``bad.json.gz``, ``good.json.gz``) that ``gpulane trace``
reads, and ``timings.json`` with the wall time per step measured on the host around
``torch.cuda.synchronize()``.

    python benchmarks/trace/offload_demo.py --out /tmp/offload
    python benchmarks/trace/offload_demo.py --out tests/fixtures/traces --small
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch


def make_weights(layers: int, dim: int, dtype: torch.dtype, pinned: bool) -> list[torch.Tensor]:
    weights = []
    for i in range(layers):
        g = torch.Generator().manual_seed(i)
        w = torch.randn(dim, dim, generator=g).to(dtype) * (dim**-0.5)
        weights.append(w.pin_memory() if pinned else w.contiguous())
    return weights


def compute(x: torch.Tensor, w: torch.Tensor, repeats: int) -> torch.Tensor:
    for _ in range(repeats):
        x = torch.tanh(x @ w)
    return x


def step_bad(
    x: torch.Tensor, weights: list[torch.Tensor], device: torch.device, repeats: int
) -> torch.Tensor:
    for w_host in weights:
        w = w_host.to(device)  # pageable source, blocking: the host waits for every layer
        x = compute(x, w, repeats)
    return x


def step_good(
    x: torch.Tensor,
    weights: list[torch.Tensor],
    device: torch.device,
    repeats: int,
    copy_stream: torch.cuda.Stream,
) -> torch.Tensor:
    compute_stream = torch.cuda.current_stream(device)

    def prefetch(i: int) -> tuple[torch.Tensor, torch.cuda.Event]:
        with torch.cuda.stream(copy_stream):
            w = weights[i].to(device, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record(copy_stream)
        return w, ready

    nxt = prefetch(0)
    for i in range(len(weights)):
        w, ready = nxt
        if i + 1 < len(weights):
            nxt = prefetch(i + 1)  # copy of layer i+1 overlaps compute of layer i
        compute_stream.wait_event(ready)
        w.record_stream(compute_stream)
        x = compute(x, w, repeats)
    return x


def run_mode(mode: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(args.device)
    torch.cuda.set_device(device)
    dtype = getattr(torch, args.dtype)
    weights = make_weights(args.layers, args.dim, dtype, pinned=(mode == "good"))
    x0 = torch.randn(args.batch, args.dim, device=device, dtype=dtype)
    copy_stream = torch.cuda.Stream(device)

    def step() -> torch.Tensor:
        if mode == "bad":
            return step_bad(x0, weights, device, args.repeats)
        return step_good(x0, weights, device, args.repeats, copy_stream)

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize(device)

    times = []
    for _ in range(args.timed):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)

    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True
    ) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize(device)
    trace = out / f"{mode}.json.gz"
    prof.export_chrome_trace(str(trace))
    layer_bytes = args.dim * args.dim * weights[0].element_size()
    return {
        "mode": mode,
        "trace": str(trace),
        "step_s_median": sorted(times)[len(times) // 2],
        "step_s_all": times,
        "bytes_per_step": layer_bytes * args.layers,
        "host_to_device_gbps_per_step": layer_bytes
        * args.layers
        / sorted(times)[len(times) // 2]
        / 1e9,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--out", required=True, help="directory for bad.json.gz, good.json.gz, timings.json"
    )
    p.add_argument("--mode", choices=["bad", "good", "both"], default="both")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--dim", type=int, default=8192, help="weight is dim x dim")
    p.add_argument("--batch", type=int, default=2048, help="activation rows")
    p.add_argument("--repeats", type=int, default=4, help="matmuls per layer")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--timed", type=int, default=5)
    p.add_argument("--steps", type=int, default=2, help="profiled steps")
    p.add_argument(
        "--small", action="store_true", help="tiny run for test fixtures (<200 KB traces)"
    )
    args = p.parse_args(argv)
    if args.small:
        args.layers, args.dim, args.batch, args.repeats = 4, 2048, 256, 2
        args.steps, args.timed = 1, 3
    if not torch.cuda.is_available():
        print("offload_demo: no CUDA device visible; this demo needs a GPU", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    modes = ["bad", "good"] if args.mode == "both" else [args.mode]
    results = [run_mode(m, args, out) for m in modes]
    info = {
        "command": " ".join([sys.executable, *sys.argv]),
        "host": platform.node(),
        "gpu": torch.cuda.get_device_name(torch.device(args.device)),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "CUDA_"))},
        "results": results,
    }
    (out / "timings.json").write_text(json.dumps(info, indent=2) + "\n")
    for r in results:
        print(
            f"{r['mode']:>4}: step {r['step_s_median'] * 1e3:8.2f} ms, "
            f"{r['host_to_device_gbps_per_step']:6.2f} GB/s of weights per step -> {r['trace']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
