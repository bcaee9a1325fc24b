"""CUDA-graph capture, and the clock of a step: CUDA events on GPUs, the host's on CPUs."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpulane.inference.runner.state import RunnerState


@dataclass
class Timer:
    """Marks on the device (CUDA events) or the host clock, read after a synchronize."""

    torch: Any
    cuda: bool
    marks: list[Any] = field(default_factory=list)

    def mark(self) -> None:
        if self.cuda:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append(ev)
        else:
            self.marks.append(time.perf_counter())

    def intervals_s(self) -> list[float]:
        if self.cuda:
            self.torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(self.marks)]
        return [b - a for a, b in itertools.pairwise(self.marks)]


class Graphs(RunnerState):
    def _capture(self, fn: Callable[[], Any], pool: Any = None, warm: int = 1) -> Any:
        """fn captured in a CUDA graph, after ``warm`` runs on a side stream (as capture
        wants: allocator, cuBLAS and NCCL set up outside the capture)."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warm):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            fn()
        torch.cuda.synchronize()
        return g
