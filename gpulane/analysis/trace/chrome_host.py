"""Copies of a Chrome trace that has no GPU memcpy events: read from host-side copy_ ops.

A CPU-only profile, or a GPU profile taken without CUDA activities, still has every
``aten::copy_`` with its shapes and duration. Bytes come from the shapes; the link is
inferred by the stated bandwidth rule (faster than ``threshold`` GB/s: on-device, else
PCIe); a copy_ with a device synchronize inside it made the host wait. Every such copy
is marked inferred, and the trace's warnings say so.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpulane.analysis.trace.aten import CPU_COPY_OPS, SYNC_CALLS, copy_bytes, non_blocking
from gpulane.analysis.trace.events import ON_DEVICE, PCIE, CopyEvent, ReadInfo, link_rule_text
from gpulane.analysis.trace.fields import event_args, number


@dataclass
class _Span:
    start: float
    end: float
    ev: dict[str, Any]


class _Nesting:
    """Which host events lie inside which, per thread (for "sync inside this copy_")."""

    def __init__(self, events: Iterable[tuple[Any, float, float, dict[str, Any]]]) -> None:
        self.by_thread: dict[Any, tuple[list[float], list[_Span]]] = {}
        tmp: dict[Any, list[_Span]] = {}
        for key, s, e, ev in events:
            tmp.setdefault(key, []).append(_Span(s, e, ev))
        for key, spans in tmp.items():
            spans.sort(key=lambda sp: sp.start)
            self.by_thread[key] = ([sp.start for sp in spans], spans)

    def inside(self, key: Any, start: float, end: float) -> list[_Span]:
        got = self.by_thread.get(key)
        if not got:
            return []
        starts, spans = got
        i = bisect.bisect_left(starts, start)
        out = []
        while i < len(spans) and spans[i].start <= end:
            if spans[i].end <= end + 1e-6:
                out.append(spans[i])
            i += 1
        return out


def host_copies(
    cpu_ops: list[dict[str, Any]],
    runtime: list[dict[str, Any]],
    has_gpu: bool,
    threshold: float,
    info: ReadInfo,
) -> list[CopyEvent]:
    """Copies seen only as host-side aten::copy_ ops (no GPU activity in the trace)."""
    ops = _outermost([op for op in cpu_ops if op.get("name") in CPU_COPY_OPS])
    syncs = [rt for rt in runtime if str(rt.get("name", "")).startswith(SYNC_CALLS)]
    nest = _Nesting(
        (rt.get("tid"), float(number(rt.get("ts")) or 0.0), _end(rt), rt) for rt in syncs
    )
    copies: list[CopyEvent] = []
    no_shapes = 0
    for op in ops:
        ts = float(number(op.get("ts")) or 0.0)
        end = _end(op)
        a = event_args(op)
        nbytes = copy_bytes(a)
        if nbytes is None:
            no_shapes += 1
        dur = end - ts
        nb = non_blocking(a)
        inner = nest.inside(op.get("tid"), ts, end)
        synced = bool(inner)
        blocking = True if synced else (None if nb is None else not nb)
        if not has_gpu:
            blocking = True  # a host copy keeps the host busy for its whole duration
        gbps = nbytes / (dur * 1e3) if nbytes is not None and dur > 0 else None
        link = ON_DEVICE if gbps is not None and gbps > threshold else PCIE
        direction = "H2H" if not has_gpu else ("D2D" if link == ON_DEVICE else "H2D/D2H")
        copies.append(
            CopyEvent(
                name=str(op.get("name")),
                direction=direction,
                link=link,
                start_us=ts,
                dur_us=dur,
                bytes=nbytes,
                direction_inferred=True,
                link_inferred=True,
                blocking=blocking,
                blocking_reason=(
                    "host copy" if not has_gpu else ("synchronize" if synced else None)
                ),
                host_us=dur,
                op=str(op.get("name")),
                thread=op.get("tid"),
                source="cpu",
            )
        )
    if no_shapes:
        info.warnings.append(
            f"{no_shapes} copy ops without tensor shapes: record the trace with "
            f"record_shapes=True to get their bytes"
        )
    if copies:
        info.warnings.append(
            "no GPU memcpy events in this trace: direction and link are inferred; "
            + link_rule_text(threshold)
        )
        if not has_gpu:
            info.warnings.append(
                "no GPU in this trace (CPU-only profile): its copies are host-memory copies "
                "(H2H), split into PCIe-like and HBM-like only by the bandwidth rule"
            )
    return copies


def _end(ev: dict[str, Any]) -> float:
    return float(number(ev.get("ts")) or 0.0) + float(number(ev.get("dur")) or 0.0)


def _outermost(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ops not nested inside another op of the list on the same thread (a copy_ that
    calls copy_ is one copy)."""
    by_thread: dict[Any, list[dict[str, Any]]] = {}
    for op in ops:
        by_thread.setdefault(op.get("tid"), []).append(op)
    out = []
    for thread_ops in by_thread.values():
        thread_ops.sort(key=lambda o: (float(number(o.get("ts")) or 0.0), -_end(o)))
        open_end = -math.inf
        for op in thread_ops:
            if float(number(op.get("ts")) or 0.0) < open_end:
                continue
            out.append(op)
            open_end = _end(op)
    out.sort(key=lambda o: float(number(o.get("ts")) or 0.0))
    return out
