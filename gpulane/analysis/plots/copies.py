"""Copy bandwidth against the line rate of the path it crossed.

One panel per copy (op, memory, direction mode, and how many GPUs copied at once): the
median GB/s over GPUs (and runs) per size with its min..max band, one colour per series, and the line rate the rows were held
to (``expected_gbps``; the caller fills it from the topology where the rows lack it) as a
dotted line. A panel measured at one size only is drawn as bars, the line rate as a tick
over each bar.

Solo copies (one GPU at a time) and all-GPUs-at-once copies are separate panels: each
GPU's share while all copied, and their total (at N x the size, against the sum of the
line rates), are other measurements than the solo curve, never its next point
(rules.measurement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from gpulane.analysis.plots import style
from gpulane.analysis.plots.collectives import Mark
from gpulane.analysis.rules.measurement import (
    AGGREGATE,
    CONCURRENT,
    concurrency,
    copy_mode,
    shown_figure,
)
from gpulane.record import Row, frame_rows


def _panel_title(key: tuple[Any, ...]) -> str:
    op, memory, bidirectional, at_once = key
    words = [str(op)]
    if pd.notna(memory) and str(memory) not in ("-", ""):
        words.append(str(memory))
    if bidirectional is True:
        words.append("bidirectional")
    if at_once:
        words.append(str(at_once))
    return " ".join(words)


def _at_once(rec: Row) -> str:
    """'' for a solo copy; how many GPUs copied at once, and whether the row is one GPU's
    share or the total, otherwise."""
    mode = copy_mode(rec)
    if mode == CONCURRENT:
        return f"{concurrency(rec)} GPUs at once, each"
    if mode == AGGREGATE:
        return f"{concurrency(rec)} GPUs at once, total"
    return ""


def _rate(rows: pd.DataFrame) -> float | None:
    rates = pd.to_numeric(rows["expected_gbps"], errors="coerce").dropna()
    return float(rates.median()) if len(rates) else None


def _curves(ax: Any, part: pd.DataFrame, series: str, colour_of: Mapping[str, str]) -> list[float]:
    drawn: list[float] = []
    for name, line in part.groupby(series, sort=False):
        colour = colour_of.get(str(name), style.GREY)
        stats = line.groupby("size_bytes")["algbw_gbps"].agg(["median", "min", "max"])
        stats = stats.sort_index()
        ax.plot(stats.index.astype(float), stats["median"], color=colour, marker="o")
        if len(line) > len(stats):
            ax.fill_between(
                stats.index.astype(float), stats["min"], stats["max"], color=colour, alpha=0.15
            )
        rate = _rate(line)
        if rate is not None:
            ax.axhline(rate, color=colour, linestyle=":", linewidth=1.4)
            drawn.append(rate)
        drawn += list(stats["max"]) + list(stats["min"])
    style.size_axis(ax, part["size_bytes"])
    return drawn


def _bars(ax: Any, part: pd.DataFrame, series: str, colour_of: Mapping[str, str]) -> None:
    names = list(part[series].dropna().unique())
    for x, name in enumerate(names):
        line = part[part[series] == name]
        colour = colour_of.get(str(name), style.GREY)
        value = float(line["algbw_gbps"].median())
        ax.bar([x], [value], color=colour, width=0.6)
        if len(line) > 1:
            ax.errorbar(
                [x], [value],
                yerr=[[value - line["algbw_gbps"].min()], [line["algbw_gbps"].max() - value]],
                color="#24292f", capsize=3, linewidth=1,
            )  # fmt: skip
        rate = _rate(line)
        if rate is not None:
            ax.hlines(rate, x - 0.4, x + 0.4, color=colour, linestyles=":", linewidth=2)
    ax.set_xticks(range(len(names)), [str(n) for n in names])
    ax.grid(False, axis="x")
    size = int(part["size_bytes"].iloc[0]) if part["size_bytes"].notna().any() else None
    from gpulane.units import format_size

    ax.set_xlabel(f"at {format_size(size)}" if size else "")
    ax.set_ylim(bottom=0)


def _mark(ax: Any, part: pd.DataFrame, marks: Sequence[Mark], bars: bool, series: str) -> bool:
    figures = set(part["shown"])
    mine = [m for m in marks if m.figure in figures and m.metric == "algbw_gbps"]
    for m in mine:
        x: float = float(m.size_bytes)
        if bars:  # over the current side's bar
            names = list(part[series].dropna().unique())
            x = float(names.index("current")) if "current" in names else 0.0
        ax.plot([x], [m.value], linestyle="none", marker="X", markersize=9,
                color=style.FAIL_COLOUR, zorder=5)  # fmt: skip
    return bool(mine)


def copy_plots(
    frame: pd.DataFrame,
    series: str = "build",
    colour_of: Mapping[str, str] | None = None,
    marks: Sequence[Mark] = (),
) -> list[style.Plot]:
    rows = frame[(frame["kind"] == "copy") & (frame["status"] == "ok")].copy()
    rows = rows.dropna(subset=["algbw_gbps", "size_bytes"])
    rows = rows[rows["algbw_gbps"] > 0]
    if rows.empty:
        return []
    rows["memory"] = rows["memory"].fillna("-")
    rows["bidirectional"] = rows["bidirectional"].map(lambda v: v is True)
    recs = frame_rows(rows)
    rows["at_once"] = [_at_once(r) for r in recs]
    rows["shown"] = [shown_figure(r) for r in recs]
    colour_of = dict(colour_of or style.colours(rows[series].dropna()))
    parts = list(rows.groupby(["op", "memory", "bidirectional", "at_once"], sort=True))
    with style.styled():
        nrows, ncols = style.grid_shape(len(parts))
        fig = style.figure(height=2.9 * nrows + 0.6)
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for ax in axes.flat[len(parts) :]:
            ax.set_visible(False)
        flagged = False
        for ax, (key, part) in zip(axes.flat, parts, strict=False):
            bars = part["size_bytes"].nunique() == 1
            if bars:
                _bars(ax, part, series, colour_of)
                flagged = _mark(ax, part, marks, True, series) or flagged
            else:
                drawn = _curves(ax, part, series, colour_of)
                flagged = _mark(ax, part, marks, False, series) or flagged
                style.scale_axis(ax, "y", drawn + [m.value for m in marks])
            ax.set_title(_panel_title(key))
            ax.set_ylabel("GB/s")
        fig.suptitle("Copy bandwidth against line rate")
        handles = [
            style.line_handle(colour_of.get(str(n), style.GREY), str(n))
            for n in rows[series].dropna().unique()
        ]
        if rows["expected_gbps"].notna().any():
            handles.append(style.line_handle(style.GREY, "line rate of the path", ":", None))
        else:
            handles.append(
                style.line_handle("#ffffff", "line rate unknown (no topology)", "-", None)
            )
        if flagged:
            handles.append(style.line_handle(style.FAIL_COLOUR, "failing check", "none", "X"))
        style.legend_below(fig, handles)
    return [
        style.Plot(
            name="copies",
            title="Copy bandwidth against line rate",
            alt="copy bandwidth against size per copy kind, with the path's line rate dotted",
            figure=fig,
        )
    ]
