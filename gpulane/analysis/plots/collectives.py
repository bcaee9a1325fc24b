"""Collective curves: bus bandwidth and latency against message size (log size axis; each
value axis log or linear by its data's range, and the caption says which).

One figure per collective (and per backend, dtype, graph mode or rank count where the
rows hold several: those are never drawn on one line), two axes side by side: busbw and
time per operation. One colour per series (build, run, side); out-of-place solid,
in-place dashed. When a figure holds only one of the two, its title says which. Several
runs of one series are drawn as their median with the min..max band around it.

``marks`` are points to flag (the accept report's failing figures): a red cross at the
value a check found, on the axis of its metric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpulane.analysis.plots import style

FACETS = ("backend", "dtype", "graph", "world_size")
VARIANT_STYLE = {False: "-", True: "--"}
VARIANT_NAME = {False: "out-of-place", True: "in-place"}


@dataclass(frozen=True)
class Mark:
    """A point to flag on a curve: the figure (as the rows label it), its size, which
    metric, the value."""

    figure: str
    size_bytes: int
    metric: str  # busbw_gbps, time_us or algbw_gbps
    value: float
    label: str


def _known(value: Any) -> bool:
    return bool(pd.notna(value))


def _facet_text(column: str, value: Any) -> str:
    if column == "graph":
        return "CUDA graph" if value is True else "eager"
    if column == "world_size":
        return f"{value} ranks"
    return str(value)


def panels(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per collective and per value of every facet that varies within it."""
    out = []
    for op, group in rows.groupby("op", sort=True):
        facets = [c for c in FACETS if c in group and group[c].astype(str).nunique() > 1]
        if not facets:
            same = [
                _facet_text(c, group[c].iloc[0])
                for c in FACETS
                if c in group and pd.notna(group[c].iloc[0])
            ]
            out.append((" · ".join([str(op), *same]), group))
            continue
        for key, part in group.groupby(facets, sort=True, dropna=False):
            keys: tuple[Any, ...] = key if isinstance(key, tuple) else (key,)
            words = [_facet_text(c, v) for c, v in zip(facets, keys, strict=True) if _known(v)]
            out.append((" · ".join([str(op), *words]), part))
    return out


def _variants(rows: pd.DataFrame) -> list[bool | None]:
    seen = {v if isinstance(v, bool) else None for v in rows["in_place"]}
    return sorted(seen, key=lambda v: (v is None, v))


def _draw(
    ax: Any,
    rows: pd.DataFrame,
    metric: str,
    series: str,
    colour_of: Mapping[str, str],
    variants: list[bool | None],
) -> list[float]:
    """Median line (and min..max band over runs) per series and variant; the values drawn."""
    drawn: list[float] = []
    # Lines in the order they first appear in the rows; one groupby for every line of the
    # axes (a groupby per line cost about 3 ms each: most of a report's CPU on 100 runs).
    line_of = rows.groupby([series, "in_place"], sort=False, dropna=False).ngroup()
    keep = rows[metric].notna() & (rows[metric] > 0)
    pts = rows[keep].assign(line_no=line_of[keep])
    if pts.empty:
        return drawn
    by_line = pts.groupby("line_no", sort=True)
    stats_of = pts.groupby(["line_no", "size_bytes"], sort=True)[metric].agg(
        ["median", "min", "max"]
    )
    runs_of = by_line["run_id"].nunique().to_dict()
    firsts = by_line[[series, "in_place"]].first().to_dict("index")
    for line_no, line_stats in stats_of.groupby(level=0, sort=True):
        stats = line_stats.droplevel(0)
        first = firsts[line_no]
        name, in_place = first[series], first["in_place"]
        variant = in_place if isinstance(in_place, bool) else None
        colour = colour_of.get(str(name), style.GREY)
        dashed = len(variants) > 1 and variant is True
        ax.plot(
            stats.index.astype(float),
            stats["median"],
            color=colour,
            linestyle="--" if dashed else "-",
            marker="o",
        )
        if runs_of[line_no] > 1:
            ax.fill_between(
                stats.index.astype(float), stats["min"], stats["max"], color=colour, alpha=0.15
            )
        drawn += list(stats["min"]) + list(stats["max"])
    return drawn


def collective_plots(
    frame: pd.DataFrame,
    series: str = "build",
    colour_of: Mapping[str, str] | None = None,
    marks: Sequence[Mark] = (),
) -> list[style.Plot]:
    """busbw and latency against size, one figure per collective panel (see :func:`panels`)."""
    rows = frame[(frame["kind"] == "collective") & (frame["status"] == "ok")]
    rows = rows.dropna(subset=["size_bytes"])
    rows = rows[rows["size_bytes"] > 0]
    if rows.empty:
        return []
    colour_of = dict(colour_of or style.colours(rows[series].dropna()))
    out = []
    with style.styled():
        for title, part in panels(rows):
            variants = _variants(part)
            fig = style.figure(height=3.7)
            axes = fig.subplots(1, 2)
            scales = []
            for ax, metric, label in (
                (axes[0], "busbw_gbps", "busbw (GB/s)"),
                (axes[1], "time_us", "time per operation (µs)"),
            ):
                drawn = _draw(ax, part, metric, series, colour_of, variants)
                figures = set(part["figure"])
                flagged = [m for m in marks if m.figure in figures and m.metric == metric]
                for m in flagged:
                    ax.plot(
                        [m.size_bytes], [m.value], linestyle="none", marker="X",
                        markersize=9, color=style.FAIL_COLOUR, zorder=5,
                    )  # fmt: skip
                    drawn.append(m.value)
                style.size_axis(ax, part["size_bytes"])
                scales.append("log" if style.scale_axis(ax, "y", drawn) else "linear")
                ax.set_ylabel(label)
            if len(variants) == 1:
                title += f" ({VARIANT_NAME.get(variants[0], 'variant not recorded')} only)"  # type: ignore[arg-type]
            fig.suptitle(title)
            handles = [
                style.line_handle(colour_of.get(str(n), style.GREY), _series_label(part, series, n))
                for n in part[series].dropna().unique()
            ]
            if len(variants) > 1:
                handles += [
                    style.line_handle(style.GREY, VARIANT_NAME[v], VARIANT_STYLE[v], None)
                    for v in variants
                    if v is not None
                ]
            if any(m.figure in set(part["figure"]) for m in marks):
                handles.append(style.line_handle(style.FAIL_COLOUR, "failing check", "none", "X"))
            style.legend_below(fig, handles)
            out.append(
                style.Plot(
                    name=style.slug("collective " + title.split(" (")[0]),
                    title=title,
                    alt=f"{title}: busbw ({scales[0]} axis) and time per operation "
                    f"({scales[1]} axis) against message size (log axis), one colour per " + series,
                    figure=fig,
                )
            )
    return out


def _series_label(rows: pd.DataFrame, series: str, name: Any) -> str:
    """The series name, with the path its run took: the transport NCCL used where the rows
    say (a build with P2P off over an NVLink pair ran through host memory, not NVLink),
    the topology's path label beside it; the path label alone where no transport is known."""
    mine = rows[rows[series] == name]
    paths = sorted({str(p) for p in mine["path"].dropna()})
    transports = sorted({str(t) for t in mine["transport"].dropna()}) if "transport" in mine else []
    if transports:
        where = ", ".join(transports) + (f"; topology {', '.join(paths)}" if paths else "")
        return f"{name} ({where})"
    return str(name) + (f" (topology {', '.join(paths)})" if paths else "")
