"""Which kernel runs a decode step's small weight products (``decode_products=``): cuBLAS
(``F.linear``), or with ``auto`` whichever of cuBLAS and gpulane's split-K kernel
(:mod:`gpulane.inference.gemv`) a timing of both finds faster, per (rows, weight shape).

The timing is like for like: each side is captured in a CUDA graph over weight copies of
their own (more bytes than L2 holds, as a step's layers are) and replayed, the first call
of each shape outside any capture (the step's warm-up runs, before its graph is captured).
Only weights up to :data:`SMALL_BYTES` are timed: larger ones stream at 90 % of the copy
rate or more under cuBLAS (round 7's profiles), and copies of them would cost memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from gpulane.inference.kernels import PRODUCT_CHOICES

__all__ = ["PRODUCT_CHOICES", "Products", "choose", "graph_us"]
SMALL_BYTES = 64 << 20  # weights timed for a choice; larger ones stay cuBLAS
MARGIN = 0.97  # the split-K kernel must be this much faster (3 %) to be chosen
MAX_ROWS = 16  # the split-K kernel's rows (gemv.MAX_ROWS, without importing triton)


def graph_us(fn: Any, calls: int, replays: int = 10) -> float:
    """Microseconds per call of fn(i), i = 0..calls-1, captured in one CUDA graph and replayed
    (warmed on a side stream first, as capture wants)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(calls):
            fn(i)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    del g
    return start.elapsed_time(end) * 1e3 / (replays * calls)


def choose(us_cublas: float, us_gemv: float) -> str:
    """The kernel a product takes from its two timings."""
    return "gemv" if us_gemv < MARGIN * us_cublas else "cublas"


@dataclass
class Products:
    """The decode step's product kernels; ``linear`` is ``F.linear`` with the choice made."""

    mode: str = "cublas"
    chosen: dict[tuple[int, int, int, bool], str] = field(default_factory=dict)
    timings_us: dict[str, dict[str, float]] = field(default_factory=dict)

    def pick(self, m: int, w: torch.Tensor, bias: torch.Tensor | None) -> str:
        """cublas or gemv for ``m`` rows of ``w`` (timed once per shape on a GPU)."""
        if self.mode != "auto" or not w.is_cuda or m > MAX_ROWS:
            return "cublas"
        n, k = w.shape
        if n * k * w.element_size() > SMALL_BYTES:
            return "cublas"
        key = (m, n, k, bias is not None)
        if key not in self.chosen:
            self.chosen[key] = self._time(m, w, bias)
        return self.chosen[key]

    def linear(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> Any:
        if self.pick(x.shape[0], w, bias) == "gemv":
            from gpulane.inference.gemv import gemv

            return gemv(x, w, bias)
        return F.linear(x, w, bias)

    def _time(self, m: int, w: torch.Tensor, bias: torch.Tensor | None) -> str:
        from gpulane.inference.gemv import gemv

        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("decode_products=auto: a new product shape inside a capture")
        n, k = w.shape
        l2 = torch.cuda.get_device_properties(w.device).L2_cache_size
        copies = max(3, math.ceil(2 * l2 / (n * k * w.element_size())))
        ws = [torch.randn_like(w) for _ in range(copies)]
        x = torch.randn(m, k, device=w.device, dtype=w.dtype)
        gemv(x, ws[0], bias)  # tunes its launch shape for this product, outside the graphs
        us = {
            "cublas": graph_us(lambda i: F.linear(x, ws[i], bias), copies),
            "gemv": graph_us(lambda i: gemv(x, ws[i], bias), copies),
        }  # the copies go with this frame
        self.timings_us[f"{m}x{n}x{k}"] = {s: round(t, 2) for s, t in us.items()}
        return choose(us["cublas"], us["gemv"])

    def describe(self) -> dict[str, Any]:
        """What the rows record: the mode, each timed shape's choice and timings."""
        return {
            "decode_products": self.mode,
            "products_chosen": {f"{m}x{n}x{k}": c for (m, n, k, _), c in self.chosen.items()},
            "products_timings_us": dict(self.timings_us),
        }
