"""What a trace holds once read, whatever its format: copies, kernels and how the file read.

Both readers (chrome, nsys) produce these, and everything after them (summary, rows,
report) reads only these, so a new trace format is one new reader.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_HBM_THRESHOLD_GBPS = 200.0

PCIE, ON_DEVICE, PEER, HOST = "pcie", "on-device", "peer", "host"
LINKS = (PCIE, ON_DEVICE, PEER, HOST)
DIRECTIONS = ("H2D", "D2H", "D2D", "P2P", "H2H", "H2D/D2H")

# The link a copy of a known direction travels; readers use it when the trace says the kind.
LINK_OF = {"H2D": PCIE, "D2H": PCIE, "D2D": ON_DEVICE, "P2P": PEER, "H2H": HOST}


@dataclass
class CopyEvent:
    """One copy. Times in microseconds from the trace's own clock; bytes as moved."""

    name: str
    direction: str  # one of DIRECTIONS
    link: str  # one of LINKS
    start_us: float
    dur_us: float
    bytes: int | None
    direction_inferred: bool = False
    link_inferred: bool = False
    blocking: bool | None = None  # the host thread waited for this copy
    blocking_reason: str | None = None
    host_us: float | None = None  # host time of the call that issued it (the wait, if blocking)
    stream: int | str | None = None
    device: int | None = None
    peer_device: int | None = None
    src_memory: str | None = None  # pageable, pinned, device, managed
    dst_memory: str | None = None
    op: str | None = None  # aten op that issued it
    thread: int | str | None = None
    source: str = "gpu"  # gpu: a GPU memcpy activity; cpu: a host-side op only

    @property
    def gbps(self) -> float | None:
        if self.bytes is None or self.dur_us <= 0:
            return None
        return self.bytes / (self.dur_us * 1e3)

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["gbps"] = self.gbps
        return d


@dataclass
class Kernel:
    name: str
    start_us: float
    dur_us: float
    device: int | None = None
    stream: int | str | None = None


@dataclass
class ReadInfo:
    """What was read from a file, and what could not be."""

    path: str
    format: str  # "torch-chrome" or "nsys-sqlite"
    size_bytes: int
    bytes_read: int  # bytes of (decompressed) text that events were read from
    events_read: int = 0
    events_skipped: int = 0
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.truncated and self.events_skipped == 0


@dataclass
class Trace:
    info: ReadInfo
    copies: list[CopyEvent]
    kernels: list[Kernel]
    has_gpu_activity: bool  # the trace has GPU-side copy or kernel events
    has_gpu: bool  # the trace came from a process with a GPU (device properties, CUDA calls)
    span_us: float = 0.0
    hbm_threshold_gbps: float = DEFAULT_HBM_THRESHOLD_GBPS
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return Path(self.info.path).name


def link_rule_text(threshold_gbps: float) -> str:
    """The bandwidth rule in words: the host-copy reader warns with it and the summary
    states it, so that a reader of either sees which copies were classified by guess."""
    return (
        f"copies seen only as host-side ops: above {threshold_gbps:g} GB/s counted as "
        f"on-device (HBM), at or below as PCIe (--hbm-threshold-gbps to change)"
    )


def host_waited(call: str, call_end_us: float, copy_end_us: float) -> tuple[bool, str | None]:
    """Whether the host waited for a copy, from the runtime call that issued it: a
    synchronous cudaMemcpy always waits; any call that returned only after the copy had
    finished waited too. Both readers use this one rule, so their answers cannot drift."""
    if call.startswith("cudaMemcpy") and "Async" not in call:
        return True, f"{call} (synchronous call)"
    if call_end_us >= copy_end_us:
        return True, f"{call} returned after the copy finished"
    return False, None
