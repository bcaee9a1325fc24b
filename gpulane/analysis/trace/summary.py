"""A trace in figures: totals by link and direction, a bandwidth histogram, the host
time blocked on copies, and how much copy time kernels ran alongside.

Bandwidth is bytes-weighted (all bytes over all copy time), so a thousand tiny copies do
not outvote the few large ones that carry the data. Overlap counts only copies seen on
the GPU (a host-side copy op has no device time to overlap).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpulane.analysis.trace.events import PCIE, CopyEvent, Trace, link_rule_text

# Bin edges in GB/s; the last bin is open. Chosen so that pageable PCIe (≈ 5-20),
# pinned PCIe Gen4/Gen5 (≈ 20-50 / 50-80) and HBM (> 200) land in different bins.
DEFAULT_BINS_GBPS: tuple[float, ...] = (0.0, 5.0, 20.0, 50.0, 80.0, 200.0, 500.0, 1000.0)


@dataclass
class Bin:
    lo: float
    hi: float | None
    count: int = 0
    bytes: int = 0
    time_us: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.lo:g}-{self.hi:g}" if self.hi is not None else f">{self.lo:g}"


def histogram(copies: Iterable[CopyEvent], edges: Sequence[float] = DEFAULT_BINS_GBPS) -> list[Bin]:
    """Copies by effective bandwidth: count, bytes and time per bin (GB/s; last bin open)."""
    bins = [Bin(lo, hi) for lo, hi in zip(edges, [*edges[1:], None], strict=True)]
    for c in copies:
        bw = c.gbps
        if bw is None:
            continue
        i = max(0, bisect.bisect_right(list(edges), bw) - 1)
        b = bins[i]
        b.count += 1
        b.bytes += c.bytes or 0
        b.time_us += c.dur_us
    return bins


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    total = 0.0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def _merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def overlap_length(a: Iterable[tuple[float, float]], b: Iterable[tuple[float, float]]) -> float:
    """Length of (union of a) ∩ (union of b)."""
    ma, mb = _merge(a), _merge(b)
    i = j = 0
    total = 0.0
    while i < len(ma) and j < len(mb):
        s = max(ma[i][0], mb[j][0])
        e = min(ma[i][1], mb[j][1])
        if e > s:
            total += e - s
        if ma[i][1] < mb[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass
class Group:
    """Totals of a set of copies."""

    count: int = 0
    bytes: int = 0
    time_us: float = 0.0
    blocking_count: int = 0
    blocking_us: float = 0.0

    @property
    def gbps(self) -> float | None:
        """Bytes-weighted effective bandwidth: all bytes over all copy time."""
        return self.bytes / (self.time_us * 1e3) if self.time_us > 0 else None

    def add(self, c: CopyEvent) -> None:
        self.count += 1
        self.bytes += c.bytes or 0
        self.time_us += c.dur_us
        if c.blocking:
            self.blocking_count += 1
            self.blocking_us += c.host_us if c.host_us is not None else c.dur_us

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "gbps": self.gbps}


@dataclass
class Summary:
    label: str
    copies: int
    bytes: int
    copy_time_us: float
    copy_busy_us: float  # union of copy intervals
    span_us: float
    gbps: float | None
    by_link: dict[str, Group]
    by_direction: dict[str, Group]
    histogram: list[Bin]
    blocking_count: int
    blocking_us: float
    async_count: int
    unknown_blocking: int
    line_rate_gbps: float | None
    line_rate_source: str | None
    pcie_gbps: float | None  # bytes-weighted over PCIe copies
    pcie_efficiency: float | None  # pcie_gbps / line rate
    kernels: int
    kernel_busy_us: float | None
    overlap_us: float | None  # copy time during which a kernel ran (same device)
    overlap_fraction: float | None
    inferred: bool
    streams: list[str]
    rule: str | None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["by_link"] = {k: v.to_dict() for k, v in self.by_link.items()}
        d["by_direction"] = {k: v.to_dict() for k, v in self.by_direction.items()}
        d["histogram"] = [{**dataclasses.asdict(b), "label": b.label} for b in self.histogram]
        return d


def summarize(
    trace: Trace,
    line_rate_gbps: float | None = None,
    line_rate_source: str | None = None,
    bins: Sequence[float] = DEFAULT_BINS_GBPS,
) -> Summary:
    copies = trace.copies
    total = Group()
    by_link: dict[str, Group] = {}
    by_dir: dict[str, Group] = {}
    for c in copies:
        total.add(c)
        by_link.setdefault(c.link, Group()).add(c)
        by_dir.setdefault(c.direction, Group()).add(c)
    pcie = by_link.get(PCIE)
    pcie_gbps = pcie.gbps if pcie else None
    eff = pcie_gbps / line_rate_gbps if pcie_gbps and line_rate_gbps else None
    overlap = overlap_frac = kernel_busy = None
    if trace.kernels:
        kernel_busy = union_length((k.start_us, k.start_us + k.dur_us) for k in trace.kernels)
        gpu_copies = [c for c in copies if c.source == "gpu"]
        if gpu_copies:
            overlap = 0.0
            devices = {c.device for c in gpu_copies}
            for d in devices:
                cs = [(c.start_us, c.end_us) for c in gpu_copies if c.device == d]
                ks = [
                    (k.start_us, k.start_us + k.dur_us)
                    for k in trace.kernels
                    if k.device == d or d is None or k.device is None
                ]
                overlap += overlap_length(cs, ks)
            busy = sum(
                union_length((c.start_us, c.end_us) for c in gpu_copies if c.device == d)
                for d in devices
            )
            overlap_frac = overlap / busy if busy > 0 else None
    streams = sorted({str(c.stream) for c in copies if c.stream is not None})
    inferred = any(c.link_inferred for c in copies)
    return Summary(
        label=trace.label,
        copies=total.count,
        bytes=total.bytes,
        copy_time_us=total.time_us,
        copy_busy_us=union_length((c.start_us, c.end_us) for c in copies),
        span_us=trace.span_us,
        gbps=total.gbps,
        by_link=by_link,
        by_direction=by_dir,
        histogram=histogram(copies, bins),
        blocking_count=total.blocking_count,
        blocking_us=total.blocking_us,
        async_count=sum(1 for c in copies if c.blocking is False),
        unknown_blocking=sum(1 for c in copies if c.blocking is None),
        line_rate_gbps=line_rate_gbps,
        line_rate_source=line_rate_source if line_rate_gbps else None,
        pcie_gbps=pcie_gbps,
        pcie_efficiency=eff,
        kernels=len(trace.kernels),
        kernel_busy_us=kernel_busy,
        overlap_us=overlap,
        overlap_fraction=overlap_frac,
        inferred=inferred,
        streams=streams,
        rule=link_rule_text(trace.hbm_threshold_gbps) if inferred else None,
    )
