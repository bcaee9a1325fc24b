"""Two traces' summaries side by side: what changed, by how much, and whether for the better."""

from __future__ import annotations

from dataclasses import dataclass

from gpulane.analysis.trace.summary import Summary

# Metrics compared side by side: (key, label, unit, better) where better is "higher",
# "lower" or None (no direction).
COMPARED: tuple[tuple[str, str, str, str | None], ...] = (
    ("copies", "copies", "", None),
    ("bytes", "bytes copied", "B", None),
    ("copy_time_us", "copy time (sum)", "us", "lower"),
    ("gbps", "weighted bandwidth, all copies", "GB/s", "higher"),
    ("pcie_gbps", "weighted bandwidth, PCIe copies", "GB/s", "higher"),
    ("pcie_efficiency", "PCIe bandwidth / line rate", "", "higher"),
    ("blocking_count", "blocking copies", "", "lower"),
    ("blocking_us", "host time blocked on copies", "us", "lower"),
    ("async_count", "asynchronous copies", "", None),
    ("overlap_fraction", "copy time overlapped with kernels", "", "higher"),
    ("span_us", "trace span", "us", "lower"),
)


@dataclass
class Change:
    key: str
    label: str
    unit: str
    before: float | None
    after: float | None
    delta: float | None
    ratio: float | None
    better: bool | None  # the change goes the good way (None: no direction or no change)


def compare(before: Summary, after: Summary) -> list[Change]:
    """Differences of the compared metrics from ``before`` to ``after``."""
    out = []
    for key, label, unit, better in COMPARED:
        b = getattr(before, key)
        a = getattr(after, key)
        b = float(b) if b is not None else None
        a = float(a) if a is not None else None
        delta = a - b if a is not None and b is not None else None
        ratio = a / b if a is not None and b else None
        good: bool | None = None
        if delta is not None and better and abs(delta) > 1e-12:
            good = (delta > 0) == (better == "higher")
        out.append(Change(key, label, unit, b, a, delta, ratio, good))
    return out
