"""Builds (or runs) side by side: every figure they share, with ratios and path labels.

A *side* is a label and its rows (a build such as ``riser-x4``, or one run). For each kind
(collective, copy, tokens) rows are grouped by the figure key of :data:`store.FIGURE_KEYS`
(op, dtype, size, ... — copies are pooled over GPUs, taking the median), and the sides are
joined on that key. The first side is the reference: ``ratio:<side>`` is
``side / reference`` for every other side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

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
            merged["kind"] = kind
            merged["metric"] = metric
            merged["unit"] = unit
            merged["higher_is_better"] = up
            ref = merged[labels[0]]
            for label in labels[1:]:
                merged[f"ratio:{label}"] = merged[label] / ref
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
    return Comparison(labels, table, summarize(table, labels), all_rows)


def summarize(table: pd.DataFrame, labels: Sequence[str]) -> pd.DataFrame:
    """One line per (kind, op, metric): geometric-mean ratio over the shared figures and the
    ratio at the largest shared size — "how much worse is the riser build", in one number."""
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
            ratios = group[f"ratio:{label}"].dropna()
            ratios = ratios[ratios > 0]
            entry[f"geomean:{label}"] = (
                math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if len(ratios) else None
            )
            if len(largest):
                entry[f"largest:{label}"] = largest[f"ratio:{label}"].median()
        rows.append(entry)
    return pd.DataFrame(rows)


# -- rendering -----------------------------------------------------------------------------


def _fmt(value: Any, metric: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        if metric.startswith("ratio") or metric == "ratio":
            return f"{value:.3f}"
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.1f}"
    return str(value)


def display_frame(cmp: Comparison) -> pd.DataFrame:
    """The comparison as text cells, the way the terminal and Markdown show it."""
    out = []
    for r in cmp.table.to_dict("records"):
        line: dict[str, str] = {
            "kind": r["kind"],
            "figure": r["figure"],
            "metric": f"{r['metric']} ({r['unit']})" if r["unit"] else r["metric"],
        }
        for label in cmp.labels:
            line[label] = _fmt(r[label])
        for label in cmp.labels[1:]:
            line[f"{label}/{cmp.labels[0]}"] = _fmt(r[f"ratio:{label}"], "ratio")
        line["paths"] = " | ".join(str(r[f"path:{x}"]) for x in cmp.labels)
        out.append(line)
    return pd.DataFrame(out)


def summary_display(cmp: Comparison) -> pd.DataFrame:
    out = []
    for r in cmp.summary.to_dict("records"):
        line = {
            "kind": r["kind"],
            "op": r["op"],
            "metric": r["metric"],
            "figures": str(r["figures"]),
        }
        for label in cmp.labels[1:]:
            line[f"{label}/{cmp.labels[0]} geomean"] = _fmt(r.get(f"geomean:{label}"), "ratio")
            if "at" in r and isinstance(r.get("at"), str):
                line[f"{label}/{cmp.labels[0]} at {r['at']}"] = _fmt(
                    r.get(f"largest:{label}"), "ratio"
                )
        out.append(line)
    return pd.DataFrame(out).fillna("-") if out else pd.DataFrame()


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub Markdown table of text cells (no tabulate needed)."""
    if frame.empty:
        return "_no rows_\n"
    cols = [str(c) for c in frame.columns]

    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def to_markdown(cmp: Comparison) -> str:
    parts = [f"## Compare: {' vs '.join(cmp.labels)}", ""]
    if not cmp.summary.empty:
        parts += [
            "### Summary (ratios to " + cmp.labels[0] + ")",
            "",
            markdown_table(summary_display(cmp)),
        ]
    parts += ["### Figures", "", markdown_table(display_frame(cmp))]
    return "\n".join(parts)


def to_csv(cmp: Comparison) -> str:
    return str(cmp.table.to_csv(index=False))


def print_terminal(cmp: Comparison, file: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file)
    if file is not None or not console.is_terminal:
        console = Console(file=file, width=220)
    if cmp.table.empty:
        console.print("no shared figures between " + ", ".join(cmp.labels))
        return
    for title, frame in (
        (f"Summary: ratios to {cmp.labels[0]}", summary_display(cmp)),
        (f"Compare: {' vs '.join(cmp.labels)}", display_frame(cmp)),
    ):
        if frame.empty:
            continue
        t = Table(title=title, show_lines=False)
        for c in frame.columns:
            t.add_column(
                str(c),
                justify="left" if c in ("kind", "figure", "metric", "op", "paths") else "right",
            )
        for row in frame.itertuples(index=False):
            t.add_row(*[str(v) for v in row])
        console.print(t)
