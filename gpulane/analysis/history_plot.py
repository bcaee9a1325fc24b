"""The history plot: each key figure over time, the first regressed run marked."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpulane.analysis.history import UNIT, Series
from gpulane.analysis.plots.style import Plot, figure


def history_plot(all_series: list[Series], limit: int = 12) -> Plot:
    """Regressed series first, then the others, at most ``limit`` lines."""
    shown = sorted(all_series, key=lambda s: (s.regression is None, s.label()))[:limit]
    fig = figure(height=4.2)
    ax = fig.add_subplot()
    for s in shown:
        when = pd.to_datetime(s.runs["started_at"], utc=True, format="ISO8601")
        (line,) = ax.plot(when, s.runs["value"], marker="o", ms=3, label=s.label())
        if s.regression is not None:
            at = when.iloc[s.regression].to_pydatetime()
            ax.axvline(at, color=line.get_color(), ls="--", lw=1)
    units = sorted({UNIT.get(s.metric, "") for s in shown})
    ax.set_ylabel(" / ".join(u for u in units if u))
    ax.set_title("each figure over time (dashed: the first regressed run)")
    ax.legend(fontsize=7, loc="best")
    for label in ax.get_xticklabels():
        label.set_rotation(30)
        label.set_horizontalalignment("right")
    return Plot("history", "history", f"{len(shown)} figures over time", fig)


def plot_history(all_series: list[Series], path: Path, limit: int = 12) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(history_plot(all_series, limit).png())
    return path
