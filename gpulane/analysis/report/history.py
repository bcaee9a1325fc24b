"""The report's history section: key figures over every run under a results directory,
and the regressions `gpulane history` flags there (same code, same words)."""

from __future__ import annotations

import os

from gpulane.analysis.history import key_series, load_runs, regression_lines, series
from gpulane.analysis.history_plot import history_plot
from gpulane.analysis.report.html import e, figure, section


def history_section(results_dir: str | os.PathLike[str]) -> str:
    found = series(load_runs(results_dir))
    regressed = [s for s in found if s.regression is not None]
    plot = history_plot([*regressed, *[s for s in key_series(found) if s.regression is None]])
    lines = regression_lines(regressed)
    body = "".join(f"<li>{e(line)}</li>" for line in lines)
    verdict = (
        f'<ul id="history-regressions">{body}</ul>'
        if lines
        else '<p id="history-regressions">no regression beyond the runs\' own noise</p>'
    )
    runs = sum(len(s.runs) for s in key_series(found))
    intro = f"<p>{e(str(results_dir))}: {len(found)} figures, {runs} key-figure points.</p>"
    return section("history", "History", intro + verdict + figure(plot))
