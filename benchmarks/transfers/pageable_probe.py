# ruff: noqa: B023 - each lambda is called at once, inside its own loop turn
"""Pageable host->device copies by several routes, to see where pageable bandwidth goes.

usage: python3 benchmarks/transfers/pageable_probe.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gpulane.transfers.measure import Copier, Plan


def ev_time(stream: Any, fn: Callable[[], Any], reps: int = 5) -> float:
    out = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record(stream)
        fn()
        b.record(stream)
        stream.synchronize()
        out.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(out)


def main() -> None:
    for path in ("/sys/kernel/mm/transparent_hugepage/enabled",):
        try:
            with open(path) as fh:
                print(path, fh.read().strip())
        except OSError as e:
            print(path, e)
    import subprocess

    print(
        subprocess.run(
            ["bash", "-c", "lscpu | grep -i -E 'model name|cache|^CPU\\(s\\)'"],
            capture_output=True,
            text=True,
        ).stdout
    )
    for size in (32 << 20, 1 << 30):
        cp = Copier([0], size, samples=5, warmup=1, check=False)
        rt = cp.rt
        assert rt is not None, "CuPy is needed"
        dev = cp.device(0)
        s = dev.streams[0]
        hb = cp.host("pageable")
        gb = size / 1e9
        res = {}
        (t,), _, _ = cp.time([Plan(s, cp.copy_fn(dev.dst, hb.src, size, s))], size, False)
        res["copier h2d"] = gb / (statistics.median(t) * 1e-6)
        (t,), _, _ = cp.time([Plan(s, cp.copy_fn(hb.dst, dev.pattern, size, s))], size, False)
        res["copier d2h"] = gb / (statistics.median(t) * 1e-6)
        c = torch.empty(size, dtype=torch.uint8)
        c.fill_(1)
        res["torch copy_ h2d (torch-filled)"] = gb / ev_time(s, lambda: dev.dst.copy_(c))
        res["torch copy_ h2d (copier src)"] = gb / ev_time(s, lambda: dev.dst.copy_(hb.src))
        d, sp, h = int(dev.dst.data_ptr()), int(c.data_ptr()), int(s.cuda_stream)
        res["cupy kind=H2D (torch-filled)"] = gb / ev_time(
            s, lambda: rt.memcpyAsync(d, sp, size, 1, h)
        )
        res["cupy kind=default (torch-filled)"] = gb / ev_time(
            s, lambda: rt.memcpyAsync(d, sp, size, 4, h)
        )
        n = np.ones(size, dtype=np.uint8)
        sp2 = int(n.ctypes.data)
        res["cupy default (numpy ones)"] = gb / ev_time(
            s, lambda: rt.memcpyAsync(d, sp2, size, 4, h)
        )
        t0 = time.perf_counter()
        for _ in range(3):
            rt.memcpy(d, sp, size, 4)
        res["sync cudaMemcpy host clock"] = 3 * gb / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        x = c.numpy().copy()
        res["host memcpy (numpy copy) GB/s"] = gb / (time.perf_counter() - t0)
        del x
        print(
            f"size {size >> 20} MiB: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()),
            flush=True,
        )
        hb.free()
        cp.close()
        del cp


if __name__ == "__main__":
    main()
