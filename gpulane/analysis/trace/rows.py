"""A trace as result rows (kind ``copy``, source ``trace``), so that a profiled program's
copies sit in the same table as ``gpulane copy`` measured on the same build.

Copies are grouped by what makes their bandwidth comparable (direction, size, memory
kinds, blocking, device, stream, link); one row per group holds the mean and percentiles
of its copy times and the bytes-weighted bandwidth.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from gpulane.analysis.trace.events import PCIE, CopyEvent, Trace
from gpulane.record import Row

# A copy's direction as the op name the copy rows of `gpulane copy` use.
_OP_OF = {
    "H2D": "h2d",
    "D2H": "d2h",
    "D2D": "d2d",
    "P2P": "p2p",
    "H2H": "h2h",
    "H2D/D2H": "h2d/d2h",
}


def _pct(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def trace_rows(
    trace: Trace,
    run_id: str,
    build: str | None = None,
    line_rate_gbps: float | None = None,
) -> list[Row]:
    """One row per (direction, size, memory, blocking, device, stream) group of copies."""
    groups: dict[tuple[Any, ...], list[CopyEvent]] = {}
    for c in trace.copies:
        key = (
            c.direction,
            c.bytes,
            c.src_memory,
            c.dst_memory,
            c.blocking,
            c.device,
            c.peer_device,
            str(c.stream) if c.stream is not None else None,
            c.link,
        )
        groups.setdefault(key, []).append(c)
    backend = "nsys" if trace.info.format == "nsys-sqlite" else "torch-profiler"
    rows = []
    for key, cs in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        direction, nbytes, src_mem, dst_mem, blocking, device, peer, stream, link = key
        times = [c.dur_us for c in cs]
        total_bytes = sum(c.bytes or 0 for c in cs)
        total_us = sum(times)
        gbps = total_bytes / (total_us * 1e3) if total_us > 0 and nbytes is not None else None
        gpu = f"GPU{device}" if device is not None else None
        src = dst = None
        if direction == "H2D":
            src, dst = "host", gpu
        elif direction == "D2H":
            src, dst = gpu, "host"
        elif direction == "D2D":
            src = dst = gpu
        elif direction == "P2P":
            src, dst = gpu, (f"GPU{peer}" if peer is not None else None)
        elif direction == "H2H":
            src = dst = "host"
        memory = src_mem if direction in ("H2D", "H2H") else dst_mem if direction == "D2H" else None
        if direction in ("D2D", "P2P"):
            memory = "device"
        expected = line_rate_gbps if link == PCIE else None
        extra: dict[str, Any] = {
            "trace_file": trace.info.path,
            "trace_format": trace.info.format,
            "link": link,
            "inferred": any(c.link_inferred for c in cs),
            "blocking": blocking,
            "stream": stream,
            "copy_time_us": total_us,
            "total_bytes": total_bytes,
            "blocking_us": sum(c.host_us or c.dur_us for c in cs if c.blocking),
        }
        if trace.info.truncated:
            extra["trace_truncated"] = True
        row = Row.copy(
            run_id=run_id,
            backend=backend,
            op=_OP_OF.get(direction, direction.lower()),
            source="trace",
            world_size=1,
            size_bytes=nbytes,
            count=len(cs),
            iters=len(cs),
            time_us=statistics.fmean(times),
            time_us_p50=_pct(times, 0.5),
            time_us_p99=_pct(times, 0.99),
            algbw_gbps=gbps,
            busbw_gbps=gbps,
            bidirectional=False,
            memory=memory,
            src=src,
            dst=dst,
            expected_gbps=expected,
            efficiency=(gbps / expected) if gbps and expected else None,
            extra=extra,
        )
        if build:
            row.build = build
        rows.append(row)
    return rows
