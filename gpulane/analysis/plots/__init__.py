"""Plots of rows in one house style (:mod:`.style`): collective curves (busbw and latency,
log size axis), copy bandwidth against line rate, token rates per batch with comm share, and
the accept report's current-against-baseline plots. Every function returns
:class:`style.Plot` objects; a page inlines ``plot.svg()``, ``--plot DIR`` writes
``plot.png()``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from gpulane.analysis.plots.collectives import Mark, collective_plots
from gpulane.analysis.plots.copies import copy_plots
from gpulane.analysis.plots.style import Plot, colours, unique_names
from gpulane.analysis.plots.tokens import split_name, tokens_plots
from gpulane.errors import InputError

__all__ = [
    "Mark",
    "Plot",
    "all_plots",
    "collective_plots",
    "colours",
    "copy_plots",
    "split_name",
    "tokens_plots",
    "write_pngs",
]


def all_plots(
    frame: pd.DataFrame, series: str = "build", colour_of: Mapping[str, str] | None = None
) -> list[Plot]:
    """Every plot the rows can fill: collectives, copies, token rates."""
    colour_of = colour_of or colours(frame[series].dropna()) if series in frame else {}
    return unique_names(
        collective_plots(frame, series, colour_of)
        + copy_plots(frame, series, colour_of)
        + tokens_plots(frame, series, colour_of)
    )


def write_pngs(plots: list[Plot], directory: str | Path) -> list[Path]:
    """``--plot DIR``: each plot as DIR/<name>.png."""
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for p in plots:
            path = out / f"{p.name}.png"
            path.write_bytes(p.png())
            written.append(path)
    except OSError as err:
        raise InputError(f"--plot: cannot write to {out}: {err.strerror or err}") from err
    return written
