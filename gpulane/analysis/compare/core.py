"""Builds (or runs) side by side: every figure they share, with ratios and path labels.

A *side* is a label and its rows (a build such as ``riser-x4``, or one run). A side whose
rows of one kind come from different machines (GPU model, host, backend) is refused, one
line naming what differs (:mod:`.machines`): no figure is a mean of two machines. For each kind
(collective, copy, tokens) rows are grouped by the figure key of :data:`store.FIGURE_KEYS`
(op, dtype, size, ... — copies are pooled over GPUs, taking the median), and the sides are
joined on that key. The first side is the reference: ``ratio:<side>`` is
``side / reference`` for every other side, where both measured a figure above zero
(nccl-tests prints small busbw as 0.00: such a size has no ratio, and the summary says
which sizes it left out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpulane.analysis.compare.apart import apart_notes, distinguish
from gpulane.analysis.compare.machines import mixed_machines
from gpulane.analysis.rules.ranks import judged_rows, one_rank_note
from gpulane.analysis.store import FIGURE_KEYS, METRICS, key_frame
from gpulane.errors import InputError
from gpulane.units import format_size

DEFAULT_METRICS = ("busbw_gbps", "algbw_gbps", "tokens_per_s")


@dataclass
class Comparison:
    labels: list[str]
    table: pd.DataFrame  # kind, op, figure, size_bytes, metric, unit, higher_is_better, <side>...
    summary: pd.DataFrame  # kind, op, metric, n, geomean ratio and ratio at the largest size
    frame: pd.DataFrame  # all rows of all sides with a ``side`` column (for plots)
    # kinds measured by some side but not compared, and why ("... differ in world_size")
    notes: list[str] = field(default_factory=list)

    def value_columns(self) -> list[str]:
        return list(self.labels)


def unique_labels(labels: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        n = seen.get(label, 0) + 1
        seen[label] = n
        out.append(label if n == 1 else f"{label}#{n}")
    return out


def _side_figures(frame: pd.DataFrame, kind: str, metric: str) -> pd.DataFrame:
    rows = frame[(frame["kind"] == kind) & (frame["status"] == "ok")]
    rows = rows[rows[metric].notna()]
    if rows.empty:
        return pd.DataFrame()
    keys = key_frame(rows, kind).add_prefix("k:")
    cols = list(keys.columns)
    data = pd.concat(
        [keys, rows[[metric, "path", "figure", "size_bytes", "op"]].add_prefix("_")], axis=1
    )
    grouped = data.groupby(cols, dropna=False, sort=False)
    out = grouped.agg(
        value=(f"_{metric}", "median"),
        path=("_path", lambda s: ",".join(sorted({str(p) for p in s.dropna()})) or "-"),
        figure=("_figure", "first"),
        size_bytes=("_size_bytes", "first"),
        op=("_op", "first"),
    )
    return out.reset_index()


def compare(
    sides: Sequence[tuple[str, pd.DataFrame]],
    metrics: Sequence[str] = DEFAULT_METRICS,
    shared_only: bool = True,
) -> Comparison:
    """Join the sides' figures. ``shared_only``: keep figures every side has."""
    if len(sides) < 2:
        raise InputError("compare needs at least two builds or runs")
    for label, frame in sides:
        mixed = mixed_machines(label, frame)
        if mixed:
            raise InputError(
                f"{mixed}; compare those runs side by side (gpulane compare RUN RUN ...), or "
                "keep one machine with --where (e.g. --where \"backend == 'nccl-tests'\")"
            )
    # 1-rank collective rows measure no link (busbw 0 by definition): left out, said once
    judged = [(label, judged_rows(frame)) for label, frame in sides]
    lone = sum(n for _, (_, n) in judged)
    sides = [
        (label, frame if frame is not None else pd.DataFrame()) for label, (frame, _) in judged
    ]
    labels = unique_labels([label for label, _ in sides])
    tables: list[pd.DataFrame] = []
    for kind, kind_metrics in METRICS.items():
        for metric, unit, up in kind_metrics:
            if metric not in metrics:
                continue
            per_side = [_side_figures(frame, kind, metric) for _, frame in sides]
            if any(p.empty for p in per_side) and shared_only:
                continue
            keys = [f"k:{c}" for c in FIGURE_KEYS[kind]]
            merged: pd.DataFrame | None = None
            for label, part in zip(labels, per_side, strict=False):
                if part.empty:
                    continue
                part = part.rename(columns={"value": label, "path": f"path:{label}"})
                if merged is None:
                    merged = part
                else:
                    merged = merged.merge(
                        part.drop(columns=["figure", "size_bytes", "op"]),
                        on=keys,
                        how="inner" if shared_only else "outer",
                    )
                    if not shared_only:
                        # figures only the later side has: take their description from it
                        extra = part.set_index(keys)[["figure", "size_bytes", "op"]]
                        idx = merged.set_index(keys).index
                        for c in ("figure", "size_bytes", "op"):
                            filled = merged[c].isna()
                            if filled.any():
                                merged.loc[filled, c] = extra.reindex(idx[filled])[c].values
            if merged is None or merged.empty:
                continue
            for label in labels:
                if label not in merged.columns:
                    merged[label] = float("nan")
                    merged[f"path:{label}"] = "-"
                # an outer join leaves no path where a side lacks the figure
                merged[f"path:{label}"] = merged[f"path:{label}"].fillna("-")
            merged = distinguish(merged, kind)
            merged["kind"] = kind
            merged["metric"] = metric
            merged["unit"] = unit
            merged["higher_is_better"] = up
            ref = merged[labels[0]]
            for label in labels[1:]:
                merged[f"ratio:{label}"] = ratio(merged[label], ref)
            tables.append(merged)
    columns = ["kind", "op", "figure", "size_bytes", "metric", "unit", "higher_is_better"]
    columns += labels + [f"ratio:{x}" for x in labels[1:]] + [f"path:{x}" for x in labels]
    if tables:
        table = pd.concat(tables, ignore_index=True)
        table = table.sort_values(
            by=["kind", "metric", "op", "size_bytes", "figure"], na_position="last", kind="stable"
        )
        table = table[columns].reset_index(drop=True)
    else:
        table = pd.DataFrame(columns=columns)
    frames = []
    for label, (_, frame) in zip(labels, sides, strict=False):
        frames.append(frame.assign(side=label))
    all_rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    shared_kinds = set(table["kind"]) if len(table) else set()
    named = list(zip(labels, [frame for _, frame in sides], strict=True))
    kinds = [k for k, ms in METRICS.items() if any(m in metrics for m, _, _ in ms)]
    notes = apart_notes(named, kinds, shared_kinds)
    notes = ([one_rank_note(lone)] if lone else []) + notes
    return Comparison(labels, table, summarize(table, labels), all_rows, notes)


def ratio(side: pd.Series, ref: pd.Series) -> pd.Series:
    """``side / ref`` where both measured a figure above zero, else NaN (no ratio): a
    0.00 printed for a small size is not a measurement of nothing, and x/0 is not a ratio."""
    side = pd.to_numeric(side, errors="coerce").astype(float)
    ref = pd.to_numeric(ref, errors="coerce").astype(float)
    both = (side > 0) & (ref > 0)
    return (side / ref).where(both)


def _sizes_text(sizes: Sequence[Any]) -> str:
    known = sorted({int(s) for s in sizes if pd.notna(s)})
    if not known:
        return ""
    if len(known) <= 3:
        return ", ".join(format_size(s) for s in known)
    return f"{format_size(known[0])}..{format_size(known[-1])} ({len(known)} sizes)"


def summarize(table: pd.DataFrame, labels: Sequence[str]) -> pd.DataFrame:
    """One line per (kind, op, metric): geometric-mean ratio over the shared figures and the
    ratio at the largest shared size — "how much worse is the riser build", in one number.
    Only figures with a ratio (both sides above zero) count: ``used:<side>`` says how many,
    ``left_out:<side>`` which sizes were left out."""
    rows: list[dict[str, Any]] = []
    if table.empty or len(labels) < 2:
        return pd.DataFrame(rows)
    for (kind, op, metric), group in table.groupby(["kind", "op", "metric"], sort=True):
        entry: dict[str, Any] = {"kind": kind, "op": op, "metric": metric, "figures": len(group)}
        largest = group.dropna(subset=["size_bytes"])
        largest = (
            largest[largest["size_bytes"] == largest["size_bytes"].max()]
            if len(largest)
            else largest
        )
        if len(largest):
            entry["at"] = format_size(int(largest["size_bytes"].iloc[0]))
        for label in labels[1:]:
            ratios = group[f"ratio:{label}"]
            used = ratios.notna()
            logs = [math.log(float(r)) for r in ratios[used]]
            entry[f"geomean:{label}"] = math.exp(sum(logs) / len(logs)) if logs else None
            # the ratios' own spread (geometric standard deviation - 1): the noise of this
            # comparison, stated beside its geomean; None from fewer than 3 ratios
            entry[f"spread:{label}"] = _log_spread(logs)
            entry[f"used:{label}"] = int(used.sum())
            # figures both sides hold but one measured as 0 (or not at all): no ratio
            left = group[~used & group[label].notna() & group[labels[0]].notna()]
            entry[f"left_out:{label}"] = _sizes_text(list(left["size_bytes"]))
            if len(largest):
                at_largest = largest[f"ratio:{label}"].dropna()
                entry[f"largest:{label}"] = at_largest.median() if len(at_largest) else None
        rows.append(entry)
    return pd.DataFrame(rows)


def _log_spread(logs: list[float]) -> float | None:
    """exp(standard deviation of the log ratios) - 1: 0.05 for ratios that scatter by about
    5 % around their geometric mean; None for fewer than 3."""
    if len(logs) < 3:
        return None
    mean = sum(logs) / len(logs)
    var = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)
    return math.exp(math.sqrt(var)) - 1.0
