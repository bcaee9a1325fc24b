"""Token rates per batch, and the share of each step spent in communication.

One figure per model and request shape (input and output length): a column per phase
(prefill, decode, then any other op such as a vLLM benchmark), tokens/s in the top row
and comm share in the bottom row (left out when no row has one), the batch sizes along
the x axis. One colour per series; each split of the GPUs (TP=2, PP=2, TP=2×PP=2) has
its own marker and line style. Several runs of one point: the median, with the min..max
as an error bar.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpulane.analysis.plots import style

PHASE_ORDER = {"prefill": 0, "decode": 1}
SPLIT_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"))


def split_name(tp: Any, pp: Any) -> str:
    """TP=2, PP=2, TP=2×PP=2, or 1 GPU; '-' where the row does not say."""
    t = int(tp) if pd.notna(tp) else None
    p = int(pp) if pd.notna(pp) else None
    if t is None and p is None:
        return "-"
    t, p = t or 1, p or 1
    if t > 1 and p > 1:
        return f"TP={t}×PP={p}"
    if p > 1:
        return f"PP={p}"
    if t > 1:
        return f"TP={t}"
    return "1 GPU"


def _shape_title(key: tuple[Any, ...]) -> str:
    model, input_len, output_len = key
    words = [str(model) if pd.notna(model) else "model not recorded"]
    if pd.notna(input_len):
        words.append(f"input {int(input_len)}")
    if pd.notna(output_len):
        words.append(f"output {int(output_len)}")
    return ", ".join(words)


def _points(ax: Any, rows: pd.DataFrame, value: str, series: str, colour_of: Mapping[str, str],
            batches: list[Any], split_style: Mapping[str, tuple[str, str]], scale: float) -> list[float]:  # fmt: skip
    drawn: list[float] = []
    xs = {b: i for i, b in enumerate(batches)}
    # One groupby for every line of the axes: a groupby per line cost about 3 ms each,
    # most of a report's CPU on 100 runs of token rows (cProfile, issue 45).
    pts = rows.dropna(subset=[value])
    every = pts.groupby([series, "split", "batch_key"], sort=False)[value]
    stats_of = every.agg(["median", "min", "max"]) * scale
    for (name, split), line_stats in stats_of.groupby(level=[0, 1], sort=False):
        stats = line_stats.droplevel([0, 1])
        stats = stats.reindex([b for b in batches if b in stats.index])
        linestyle, marker = split_style.get(str(split), ("-", "o"))
        colour = colour_of.get(str(name), style.GREY)
        x = [xs[b] for b in stats.index]
        ax.plot(x, stats["median"], color=colour, linestyle=linestyle, marker=marker)
        if (stats["max"] > stats["min"]).any():
            ax.errorbar(
                x, stats["median"],
                yerr=[stats["median"] - stats["min"], stats["max"] - stats["median"]],
                color=colour, linestyle="none", capsize=2, linewidth=0.8,
            )  # fmt: skip
        drawn += list(stats["min"]) + list(stats["max"])
    ax.set_xticks(range(len(batches)), [str(b) for b in batches])
    ax.set_xlim(-0.5, len(batches) - 0.5)
    ax.set_xlabel("batch")
    ax.grid(False, axis="x")
    return drawn


def tokens_plots(
    frame: pd.DataFrame, series: str = "build", colour_of: Mapping[str, str] | None = None
) -> list[style.Plot]:
    rows = frame[(frame["kind"] == "tokens") & (frame["status"] == "ok")].copy()
    rows = rows.dropna(subset=["tokens_per_s"])
    if rows.empty:
        return []
    rows["split"] = [split_name(t, p) for t, p in zip(rows["tp"], rows["pp"], strict=True)]
    rows["batch_key"] = rows["batch"].map(lambda b: int(b) if pd.notna(b) else "-")
    colour_of = dict(colour_of or style.colours(rows[series].dropna()))
    splits = sorted(rows["split"].unique())
    split_style = {s: SPLIT_STYLES[i % len(SPLIT_STYLES)] for i, s in enumerate(splits)}
    out = []
    with style.styled():
        for key, part in rows.groupby(
            ["model", "input_len", "output_len"], sort=True, dropna=False
        ):
            phases = sorted(part["op"].unique(), key=lambda op: (PHASE_ORDER.get(op, 9), op))
            shares = part["comm_share"].notna().any()
            batches = sorted(part["batch_key"].unique(), key=lambda b: (b == "-", str(b).zfill(9)))
            nrows = 2 if shares else 1
            fig = style.figure(
                width=min(style.WIDTH_IN, 3.4 * len(phases) + 1.5), height=2.8 * nrows + 0.9
            )
            axes = fig.subplots(nrows, len(phases), squeeze=False)
            for col, phase in enumerate(phases):
                mine = part[part["op"] == phase]
                ax = axes[0][col]
                drawn = _points(
                    ax, mine, "tokens_per_s", series, colour_of, batches, split_style, 1.0
                )
                style.scale_axis(ax, "y", drawn)
                ax.set_title(f"{phase}: tokens/s")
                if shares:
                    ax = axes[1][col]
                    _points(ax, mine, "comm_share", series, colour_of, batches, split_style, 100.0)
                    ax.set_ylim(0, 100)
                    ax.set_title(f"{phase}: comm share of a step (%)")
            title = "Token rates: " + _shape_title(key)
            fig.suptitle(title)
            handles = [
                style.line_handle(colour_of.get(str(n), style.GREY), str(n), "-", None)
                for n in part[series].dropna().unique()
            ]
            handles += [
                style.line_handle(style.GREY, s, *split_style[s])
                for s in splits
                if s in set(part["split"])
            ]
            style.legend_below(fig, handles, ncols=5)
            out.append(
                style.Plot(
                    name=style.slug("tokens " + _shape_title(key)),
                    title=title,
                    alt=f"{title}: tokens/s and comm share per batch, per split and {series}",
                    figure=fig,
                )
            )
    return out
