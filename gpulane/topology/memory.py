"""How much memory this host and its GPUs have, read without starting anything: the host's
from /proc/meminfo, the GPUs' through NVML (which creates no CUDA context, so the front
can ask before any rank takes a GPU)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


def host_available_bytes() -> int | None:
    """MemAvailable: what new allocations can get without swapping (None when unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass(frozen=True)
class GpuMemory:
    index: int  # as CUDA numbers it in this process (after CUDA_VISIBLE_DEVICES)
    name: str
    free: int
    total: int


@contextmanager
def _nvml() -> Iterator[Any]:
    import pynvml

    pynvml.nvmlInit()
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def _handle(nvml: Any, cuda_index: int) -> Any:
    """The NVML handle of the GPU CUDA numbers ``cuda_index`` here: NVML counts every GPU,
    CUDA only those CUDA_VISIBLE_DEVICES lets it see, in that order."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return nvml.nvmlDeviceGetHandleByIndex(cuda_index)
    entry = [v.strip() for v in visible.split(",") if v.strip()][cuda_index]
    if entry.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(entry))
    return nvml.nvmlDeviceGetHandleByUUID(entry)


def gpu_memory(cuda_indices: Sequence[int]) -> list[GpuMemory] | None:
    """Free and total memory of these GPUs; None when NVML cannot say (no driver, no
    nvidia-ml-py, a MIG slice or a GPU it does not know)."""
    try:
        with _nvml() as nvml:
            out = []
            for i in cuda_indices:
                handle = _handle(nvml, i)
                info = nvml.nvmlDeviceGetMemoryInfo(handle)
                name = nvml.nvmlDeviceGetName(handle)
                name = name.decode() if isinstance(name, bytes) else str(name)
                out.append(GpuMemory(i, name, int(info.free), int(info.total)))
            return out
    except Exception:  # any NVML failure leaves the memory unknown, never the run
        return None


def gpu_total_bytes(cuda_index: int = 0) -> int | None:
    """Total memory of one GPU (None when NVML cannot say)."""
    found = gpu_memory([cuda_index])
    return found[0].total if found else None
