"""The history plot: each key figure over time, the first regressed run marked."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpulane.analysis.history import UNIT, Series


def plot_history(all_series: list[Series], path: Path, limit: int = 12) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = sorted(all_series, key=lambda s: (s.regression is None, s.label()))[:limit]
    fig, ax = plt.subplots(figsize=(10, 5))
    for s in shown:
        when = pd.to_datetime(s.runs["started_at"], utc=True, format="ISO8601")
        (line,) = ax.plot(when, s.runs["value"], marker="o", ms=3, label=s.label())
        if s.regression is not None:
            at = when.iloc[s.regression].to_pydatetime()
            ax.axvline(at, color=line.get_color(), ls="--", lw=1)  # type: ignore[arg-type]
    units = sorted({UNIT.get(s.metric, "") for s in shown})
    ax.set_ylabel(" / ".join(u for u in units if u))
    ax.set_title("gpulane history (dashed: first regressed run)")
    ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
