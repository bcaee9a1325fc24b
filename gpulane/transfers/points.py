"""One measured copy point, its statistics, and the result row it becomes.

Bidirectional copies are kept per direction: ``op`` is the direction the row measured
(h2d, d2h, or p2p from ``src`` to ``dst``), ``bidirectional`` is True, and the bandwidth is
that direction's own, measured while the reverse copy ran at the same time. The two rows of
one bidirectional measurement share ``extra.pair_id``; their sum is what
p2pBandwidthLatencyTest prints as "Bidirectional" bandwidth. Efficiency is always against
one direction's line rate, so unidirectional and bidirectional rows compare directly.

``time_us`` is the median over the timed samples (each sample the device time of one copy,
averaged over the copies repeated in it), ``time_us_p50`` the same median, ``time_us_p99``
the 99th percentile; ``algbw_gbps`` is size / median time. The mean goes in ``extra``.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpulane.record import Row
from gpulane.topology.bandwidth import LineRate
from gpulane.transfers.efficiency import efficiency

BACKEND = "gpulane-copy"
OPS = ("h2d", "d2h", "p2p")
MEMORY = ("pageable", "pinned", "pinned-wc", "device")


@dataclass
class Point:
    op: str  # h2d, d2h, p2p
    src: str  # "host", "GPU0", ...
    dst: str
    memory: str  # pageable, pinned, pinned-wc (host side), device (peer copies)
    size: int
    times_us: list[float]  # one per timed sample, per copy
    bidirectional: bool = False
    peer_access: bool | None = None
    reps: int = 1
    wrong: int | None = None  # 4-byte words that differ after the copy; None: not checked
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


@dataclass(frozen=True)
class Stats:
    median_us: float
    p99_us: float
    mean_us: float
    min_us: float
    gbps: float  # size / median


def summarize(times_us: Sequence[float], size: int) -> Stats:
    if not times_us:
        raise ValueError("no samples")
    med = statistics.median(times_us)
    gbps = size / (med * 1e-6) / 1e9 if med > 0 else float("inf")
    return Stats(
        median_us=med,
        p99_us=percentile(times_us, 99),
        mean_us=statistics.fmean(times_us),
        min_us=min(times_us),
        gbps=gbps,
    )


def link_fields(label: str) -> dict[str, Any]:
    """``PCIe Gen5 x16`` -> ``{"pcie_gen": 5, "pcie_width": 16}``; {} for NVLink or a
    staged path (its figure is not one link's)."""
    m = re.fullmatch(r"PCIe Gen(\d+) x(\d+)", label.strip())
    return {"pcie_gen": int(m.group(1)), "pcie_width": int(m.group(2))} if m else {}


def to_row(
    point: Point,
    *,
    run_id: str,
    build: str,
    link: LineRate | None,
    path: str | None = None,
    world_size: int | None = None,
    host: str | None = None,
    env: dict[str, str] | None = None,
    versions: dict[str, str] | None = None,
) -> Row:
    st = summarize(point.times_us, point.size)
    expected = link.gbps if link is not None else None
    extra = dict(point.extra)
    extra.update(
        time_us_mean=st.mean_us,
        time_us_min=st.min_us,
        samples=len(point.times_us),
        reps=point.reps,
    )
    if link is not None:
        extra.update(link=link.label, expected_from=link.source)
        extra.update(link_fields(link.label))
    versions = dict(versions or {})
    if extra.get("gpu_model") and "gpu" not in versions:
        versions["gpu"] = str(extra["gpu_model"])  # what the reference table matches on
    if extra.get("host_numa") is not None and extra.get("gpu_numa") is not None:
        local = extra["host_numa"] == extra["gpu_numa"]
        extra["host_memory"] = "local" if local else "remote"
    status, error = "ok", None
    if point.wrong:
        status, error = "wrong", f"{point.wrong} of {point.size // 4} words differ after the copy"
    return Row.copy(
        run_id=run_id,
        backend=BACKEND,
        op=point.op,
        build=build,
        host=host,
        world_size=world_size,
        size_bytes=point.size,
        count=point.size,
        dtype="uint8",
        iters=len(point.times_us) * point.reps,
        time_us=st.median_us,
        time_us_p50=st.median_us,
        time_us_p99=st.p99_us,
        algbw_gbps=st.gbps,
        busbw_gbps=st.gbps,
        wrong=point.wrong,
        bidirectional=point.bidirectional,
        memory=point.memory,
        src=point.src,
        dst=point.dst,
        peer_access=point.peer_access,
        expected_gbps=expected,
        efficiency=efficiency(st.gbps, expected),
        path=path,
        source="measured",
        env=dict(env or {}),
        versions=versions,
        extra=extra,
        status=status,
        error=error,
    )


def aggregate_row(rows: Sequence[Row], link: LineRate | None, test: str) -> Row:
    """The sum of per-GPU rows that ran at the same time (all GPUs to or from the host)."""
    first = rows[0]
    total = sum(r.algbw_gbps or 0.0 for r in rows)
    expected = link.gbps if link is not None else None
    worst = max((r.time_us or 0.0) for r in rows)
    wrong = None if all(r.wrong is None for r in rows) else sum(r.wrong or 0 for r in rows)
    gpus = [r.dst if first.op == "h2d" else r.src for r in rows]
    extra: dict[str, Any] = {"test": test, "gpus": gpus, "aggregate": True}
    if link is not None:
        extra.update(link=link.label, expected_from=link.source)
    return Row.copy(
        run_id=first.run_id,
        backend=first.backend,
        op=first.op,
        build=first.build,
        host=first.host,
        world_size=len(rows),
        size_bytes=(first.size_bytes or 0) * len(rows),
        count=(first.size_bytes or 0) * len(rows),
        dtype=first.dtype,
        time_us=worst,
        algbw_gbps=total,
        busbw_gbps=total,
        wrong=wrong,
        bidirectional=first.bidirectional,
        memory=first.memory,
        src="host" if first.op == "h2d" else "all",
        dst="all" if first.op == "h2d" else "host",
        expected_gbps=expected,
        efficiency=efficiency(total, expected),
        source="measured",
        env=dict(first.env),
        versions=dict(first.versions),
        extra=extra,
        status="ok" if not wrong else "wrong",
        error=None if not wrong else f"{wrong} words differ after the copies",
    )
