"""What a page was made from, at any scale: the time range of the runs (not a list of
start times), the runs grouped by build and kind, the versions and settings that shaped
them (a value per key, or how many different values there were)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pandas as pd

from gpulane.analysis.report.html import e, section, table

LIST_AT_MOST = 4  # distinct values listed in a cell before "+N more"


def values_text(values: Any, limit: int = LIST_AT_MOST) -> str:
    """Sorted distinct values: ``a, b, c`` or ``a, b, c, d (+7 more)``."""
    vals = sorted({str(v) for v in values if v is not None and str(v) not in ("", "nan", "<NA>")})
    if not vals:
        return "-"
    more = len(vals) - limit
    return ", ".join(vals[:limit]) + (f" (+{more} more)" if more > 0 else "")


def time_range(started: pd.Series) -> str:
    """``2026-11-22 03:28 – 03:30 UTC (2 min)``, or one time, or '-'."""
    times = pd.to_datetime(started, utc=True, errors="coerce").dropna()
    if times.empty:
        return "-"
    first, last = times.min(), times.max()
    if first == last:
        return first.strftime("%Y-%m-%d %H:%M UTC")
    end = last.strftime("%H:%M" if first.date() == last.date() else "%Y-%m-%d %H:%M")
    return f"{first.strftime('%Y-%m-%d %H:%M')} – {end} UTC ({_span(last - first)})"


def _span(delta: pd.Timedelta) -> str:
    s = delta.total_seconds()
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def transport_of(rows: pd.DataFrame) -> str:
    """What NCCL used between the ranks: per row ``extra.nccl`` (transport and channels)
    or the ``transport`` field; 'unknown' when no row says."""
    found: list[str] = []
    transports = rows["transport"] if "transport" in rows.columns else [None] * len(rows)
    for extra, transport in zip(rows.get("extra", [None] * len(rows)), transports, strict=True):
        nccl = extra.get("nccl") if isinstance(extra, dict) else None
        if isinstance(nccl, dict) and nccl.get("transport"):
            channels = nccl.get("channels")
            found.append(str(nccl["transport"]) + (f", {channels} channels" if channels else ""))
        elif isinstance(transport, str) and transport:
            found.append(transport)
    return values_text(found) if found else "unknown"


def by_build_and_kind(frame: pd.DataFrame) -> pd.DataFrame:
    """One line per (build, kind): runs, rows, errors, time range, backends, ops, ranks."""
    out = []
    for key, rows in frame.groupby(["build", "kind"], sort=True, dropna=False):
        build, kind = cast(tuple[Any, Any], key)
        errors = int((rows["status"] != "ok").sum())
        out.append(
            {
                "build": "-" if pd.isna(build) else str(build),
                "kind": str(kind),
                "runs": rows["run_id"].nunique(),
                "rows": len(rows),
                "errors": errors,
                "when": time_range(rows["started_at"]),
                "backends": values_text(rows["backend"]),
                "ops": values_text(rows["op"]),
                "ranks": values_text(rows["world_size"]),
                "paths": values_text(rows["path"]),
                "NCCL transport": transport_of(rows) if kind == "collective" else "-",
            }
        )
    return pd.DataFrame(out)


def _dict_values(frame: pd.DataFrame, column: str) -> list[tuple[str, str]]:
    seen: dict[str, set[str]] = {}
    for v in frame.get(column, pd.Series(dtype=object)):
        for k, x in (v or {}).items():
            seen.setdefault(str(k), set()).add(str(x))
    return [(k, values_text(v, 3)) for k, v in sorted(seen.items())]


def summary_section(frame: pd.DataFrame, sources: Sequence[str]) -> str:
    errors = int((frame["status"] != "ok").sum()) if len(frame) else 0
    items = [
        ("rows from", values_text(sources, 3)),
        ("when", time_range(frame["started_at"]) if len(frame) else "-"),
        ("runs", str(frame["run_id"].nunique()) if len(frame) else "0"),
        ("rows", f"{len(frame)}" + (f", {errors} of them errors" if errors else "")),
        ("builds", values_text(frame["build"], 8)),
        ("hosts", values_text(frame["host"])),
        ("versions", "; ".join(f"{k} {v}" for k, v in _dict_values(frame, "versions")) or "-"),
        ("settings (env)", " ".join(f"{k}={v}" for k, v in _dict_values(frame, "env")) or "-"),
    ]
    facts = table(pd.DataFrame(items, columns=["", "value"]), "summary", wrap=["value"], left=[""])
    groups = by_build_and_kind(frame) if len(frame) else pd.DataFrame()
    grouped = (
        "<h3>Runs by build and kind</h3>"
        + table(
            groups,
            "runs-by-build",
            left=["build", "kind", "when", "backends", "ops", "paths", "NCCL transport"],
        )
        if len(groups)
        else "<p>No rows.</p>"
    )
    return section("summary-section", "Summary", facts + grouped)


def escape_list(items: Sequence[str]) -> str:
    return ", ".join(e(i) for i in items)
