"""`gpulane trace --json`: a trace, its summary and comparisons as plain JSON values.

The read state (bytes read, events skipped, truncated, warnings) is part of every trace's
document, so a script reading the JSON can tell a cut file from a whole one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpulane.analysis.trace.diff import Change
from gpulane.analysis.trace.events import Trace
from gpulane.analysis.trace.summary import Summary


def trace_json(trace: Trace, summary: Summary, include_copies: bool = True) -> dict[str, Any]:
    info = trace.info
    d: dict[str, Any] = {
        "file": info.path,
        "format": info.format,
        "read": {
            "size_bytes": info.size_bytes,
            "bytes_read": info.bytes_read,
            "events_read": info.events_read,
            "events_skipped": info.events_skipped,
            "truncated": info.truncated,
            "complete": info.complete,
            "warnings": list(info.warnings),
        },
        "has_gpu_activity": trace.has_gpu_activity,
        "hbm_threshold_gbps": trace.hbm_threshold_gbps,
        "summary": summary.to_dict(),
    }
    if include_copies:
        d["copies"] = [c.to_dict() for c in trace.copies]
    return d


def change_json(changes: Sequence[Change]) -> list[dict[str, Any]]:
    return [
        {
            "metric": c.key,
            "label": c.label,
            "unit": c.unit,
            "before": c.before,
            "after": c.after,
            "delta": c.delta,
            "ratio": c.ratio,
            "better": c.better,
        }
        for c in changes
    ]
