"""Terminal tables and the side-by-side diff of `gpulane trace`
(gpulane.analysis.trace.report)."""

from __future__ import annotations

import io

from rich.console import Console

from gpulane.analysis.trace import report
from gpulane.analysis.trace.diff import compare
from gpulane.analysis.trace.read import read_trace
from gpulane.analysis.trace.summary import summarize
from tests.analysis.trace.traces import (
    pair,
)
from tests.conftest import fixture_path


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=160, highlight=False, color_system=None), buf


def test_render_trace_and_comparison() -> None:
    bad, _good, sb, sg = pair()
    console, buf = _console()
    report.render_trace(console, bad, sb, max_copies=2)
    report.render_comparison(console, [sb, sg], [compare(sb, sg)])
    out = buf.getvalue()
    assert "copies (2 of 4)" in out
    assert "pageable->device" in out and "blocking" in out
    assert "5-20" in out and "of the 63.0 GB/s line rate" in out
    assert "host blocked on copies" in out
    assert "side by side" in out and "bad.json.gz" in out and "good.json.gz" in out
    assert "weighted bandwidth, PCIe copies" in out and "pts" in out


def test_render_inferred_cpu_trace_states_the_rule() -> None:
    t = read_trace(fixture_path("traces/cpu/copies.json.gz"))
    console, buf = _console()
    report.render_trace(console, t, summarize(t))
    out = buf.getvalue()
    assert "H2H*" in out and "pcie*" in out
    assert "above 200 GB/s counted as on-device" in out
    assert "line rate unknown" in out and "no GPU kernel events" in out
