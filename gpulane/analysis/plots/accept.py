"""The accept report's plots: the current run against its baseline with the failing
points marked, and every numeric check's margin to its threshold.

A failing check names its figure (``all_reduce float 256 MiB in-place``), its value and
unit; the figure is found among the current rows to place the mark at its size, on the
busbw (GB/s) or time (us) axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from gpulane.analysis.plots import style
from gpulane.analysis.plots.collectives import Mark, collective_plots
from gpulane.analysis.plots.copies import copy_plots
from gpulane.analysis.plots.tokens import tokens_plots
from gpulane.analysis.rules import FAIL, Check
from gpulane.analysis.rules.measurement import shown_figure
from gpulane.record import frame_rows

SIDE_COLOURS = {"current": style.PALETTE[0], "baseline": style.GREY}
# how far a bar may reach either way (%): a 98.9% shortfall and a +600% margin stay readable
CLIP = (-100.0, 200.0)


def failing_marks(checks: Sequence[Check], current: pd.DataFrame) -> list[Mark]:
    """Marks at the figures of failing checks that have a value."""
    out = []
    # a copy check names its measurement (solo, one GPU's share, the total at once)
    shown = pd.Series(
        [shown_figure(r) for r in frame_rows(current)], index=current.index, dtype=object
    )
    for c in checks:
        if c.status != FAIL or c.value is None or not c.figure:
            continue
        rows = current[shown == c.figure].dropna(subset=["size_bytes"])
        if rows.empty:
            continue
        kind = str(rows["kind"].iloc[0])
        if c.unit == "us":
            metric = "time_us"
        elif kind == "copy":
            metric = "algbw_gbps"
        else:
            metric = "busbw_gbps"
        out.append(Mark(c.figure, int(rows["size_bytes"].iloc[0]), metric, c.value, c.rule))
    return out


def baseline_plots(
    current: pd.DataFrame, baseline: pd.DataFrame | None, checks: Sequence[Check]
) -> list[style.Plot]:
    """Collective, copy and token-rate curves of the current rows beside the baseline's,
    the failing collective and copy points marked. With no baseline and nothing failing
    there are none: they would be the report's own collective and copy plots again (on
    1x H200 they were two thirds of the 7 s accept's page took to draw)."""
    sides = [current.assign(side="current")]
    if baseline is not None and len(baseline):
        sides.append(baseline.assign(side="baseline"))
    marks = failing_marks(checks, current)
    if len(sides) == 1 and not marks:
        return []
    frame = pd.concat(sides, ignore_index=True)
    plots = collective_plots(frame, "side", SIDE_COLOURS, marks)
    plots += copy_plots(frame, "side", SIDE_COLOURS, marks)
    plots += tokens_plots(frame, "side", SIDE_COLOURS)
    for p in plots:
        p.name = "accept-" + p.name
    return plots


def margin_plot(checks: Sequence[Check]) -> style.Plot | None:
    """One bar per numeric check: how far its value is from the threshold, in %; below
    zero is a shortfall (failing checks red)."""
    numeric = [c for c in checks if c.margin is not None and c.value is not None]
    if not numeric:
        return None
    numeric.sort(key=lambda c: (c.status != FAIL, c.rule, c.subject))
    with style.styled():
        fig = style.figure(height=0.3 * len(numeric) + 1.5)
        ax = fig.subplots()
        ys = list(range(len(numeric)))[::-1]
        for y, c in zip(ys, numeric, strict=True):
            pct = 100.0 * float(c.margin or 0.0)
            shown = min(max(pct, CLIP[0]), CLIP[1])
            colour = style.FAIL_COLOUR if c.status == FAIL else "#1a7f37"
            ax.barh([y], [shown], color=colour, height=0.6)
            text = f"{pct:+.1f}%" + (" (bar clipped)" if shown != pct else "")
            # beside the zero line on the empty side: never over the bar or the labels
            ax.text(3 if pct < 0 else shown + 3, y, text, va="center", ha="left", fontsize=8)
        labels = [
            f"{c.rule} · {c.subject}" + (f" · {c.figure}" if c.figure else "") for c in numeric
        ]
        ax.set_yticks(ys, [x if len(x) <= 70 else x[:67] + "..." for x in labels], fontsize=8)
        ax.axvline(0, color="#24292f", linewidth=1)
        ax.set_xlim(CLIP[0] * 1.05, CLIP[1] * 1.1)
        ax.set_xlabel("margin to the threshold (%): below 0 misses it")
        ax.grid(False, axis="y")
        fig.suptitle("Every numeric check against its threshold")
    return style.Plot(
        name="accept-margins",
        title="Checks against their thresholds",
        alt="margin of every numeric check to its threshold; failing checks in red",
        figure=fig,
    )
