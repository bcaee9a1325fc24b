"""The histogram and timeline PNGs of `gpulane trace --plot`
(gpulane.analysis.trace.plots)."""

from __future__ import annotations

from pathlib import Path

from gpulane.analysis.trace import plots
from tests.analysis.trace.traces import (
    pair,
)


def test_plots(tmp_path: Path) -> None:
    _bad, good, sb, sg = pair()
    h = plots.plot_histogram([sb, sg], tmp_path / "h.png")
    t = plots.plot_timeline(good, tmp_path / "sub" / "t.png")
    for p in (h, t):
        assert p.exists() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
