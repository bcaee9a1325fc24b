"""Plots of rows as PNG bytes (matplotlib, Agg backend: no display needed).

- :func:`busbw_plot`: bus bandwidth against message size, one panel per collective and one
  line per build (or run), log-scaled size axis.
- :func:`copy_plot`: copy bandwidth against size, one panel per copy op and memory kind.
- :func:`tokens_plot`: tokens/s bars per configuration, one bar per build.
"""

from __future__ import annotations

import io
import math
from typing import Any

import pandas as pd

from gpulane.units import format_size


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return buf.getvalue()


def _size_axis(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(_ticker().LogLocator(base=16, numticks=12))
    ax.xaxis.set_minor_locator(_ticker().LogLocator(base=2, numticks=64))
    ax.xaxis.set_minor_formatter(_ticker().NullFormatter())
    ax.tick_params(axis="x", labelrotation=30)
    ax.xaxis.set_major_formatter(
        _ticker().FuncFormatter(lambda x, _pos: format_size(int(x)) if x >= 1 else "")
    )


def _ticker() -> Any:
    import matplotlib.ticker as ticker

    return ticker


def _grid(n: int) -> tuple[int, int]:
    cols = 1 if n == 1 else 2
    return math.ceil(n / cols), cols


def _lines(
    frame: pd.DataFrame, panel_cols: list[str], value: str, series: str, title: str, ylabel: str
) -> bytes | None:
    data = frame.dropna(subset=["size_bytes", value])
    data = data[data["size_bytes"] > 0]
    if data.empty:
        return None
    panels = list(data.groupby(panel_cols, dropna=False, sort=True))
    plt = _pyplot()
    nrows, ncols = _grid(len(panels))
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, 4.0 * nrows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, (key, group) in zip(axes.flat, panels, strict=False):
        for name, line in group.groupby(series, dropna=False, sort=True):
            pts = line.groupby("size_bytes")[value].median().sort_index()
            paths = sorted({str(p) for p in line["path"].dropna()})
            label = str(name) + (f" ({','.join(paths)})" if paths else "")
            ax.plot(pts.index, pts.values, marker="o", markersize=3, label=label)
        _size_axis(ax)
        keys = key if isinstance(key, tuple) else (key,)
        ax.set_title(" ".join(str(k) for k in keys if k is not None and str(k) != "nan"))
        ax.set_xlabel("size")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    return _png(fig)


def busbw_plot(frame: pd.DataFrame, series: str = "build") -> bytes | None:
    """busbw against size, one panel per collective op, one line per ``series`` value."""
    rows = frame[(frame["kind"] == "collective") & (frame["status"] == "ok")]
    return _lines(rows, ["op"], "busbw_gbps", series, "Bus bandwidth against size", "busbw (GB/s)")


def copy_plot(frame: pd.DataFrame, series: str = "build") -> bytes | None:
    """Copy bandwidth against size, one panel per (op, memory), one line per series."""
    rows = frame[(frame["kind"] == "copy") & (frame["status"] == "ok")].copy()
    rows["memory"] = rows["memory"].fillna("-")
    return _lines(
        rows, ["op", "memory"], "algbw_gbps", series, "Copy bandwidth against size", "GB/s"
    )


def tokens_plot(frame: pd.DataFrame, series: str = "build") -> bytes | None:
    """tokens/s bars: one group per configuration (figure), one bar per series value."""
    rows = frame[(frame["kind"] == "tokens") & (frame["status"] == "ok")]
    rows = rows.dropna(subset=["tokens_per_s"])
    if rows.empty:
        return None
    table = rows.pivot_table(
        index="figure", columns=series, values="tokens_per_s", aggfunc="median"
    )
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.4, 1.2 * len(table.index) * len(table.columns)), 4.2))
    width = 0.8 / max(1, len(table.columns))
    for i, col in enumerate(table.columns):
        xs = [x + i * width for x in range(len(table.index))]
        ax.bar(xs, table[col].fillna(0).values, width=width, label=str(col))
    ax.set_xticks([x + width * (len(table.columns) - 1) / 2 for x in range(len(table.index))])
    ax.set_xticklabels(table.index, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("tokens/s")
    ax.set_title("Token rate")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def all_plots(frame: pd.DataFrame, series: str = "build") -> dict[str, bytes]:
    """Every plot that the rows can fill, by name (busbw, copy, tokens)."""
    out: dict[str, bytes] = {}
    for name, fn in (("busbw", busbw_plot), ("copy", copy_plot), ("tokens", tokens_plot)):
        png = fn(frame, series)
        if png:
            out[name] = png
    return out
