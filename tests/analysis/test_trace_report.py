"""Tables, side-by-side diff and plots for `gpulane trace` (gpulane.analysis.trace_report)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from gpulane.analysis import trace_report as report
from gpulane.analysis.trace import compare, read_trace, summarize
from tests.conftest import fixture_path


def _pair():  # type: ignore[no-untyped-def]
    bad = read_trace(fixture_path("traces/h200/bad.json.gz"))
    good = read_trace(fixture_path("traces/h200/good.json.gz"))
    return bad, good, summarize(bad, 63.0, "test"), summarize(good, 63.0, "test")


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=160, highlight=False, color_system=None), buf


def test_render_trace_and_comparison() -> None:
    bad, _good, sb, sg = _pair()
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


def test_plots(tmp_path: Path) -> None:
    _bad, good, sb, sg = _pair()
    h = report.plot_histogram([sb, sg], tmp_path / "h.png")
    t = report.plot_timeline(good, tmp_path / "sub" / "t.png")
    for p in (h, t):
        assert p.exists() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_json_documents() -> None:
    bad, _good, sb, sg = _pair()
    doc = report.trace_json(bad, sb)
    text = json.dumps(doc)
    back = json.loads(text)
    assert back["read"]["complete"] is True
    assert len(back["copies"]) == 4 and back["copies"][0]["gbps"] > 0
    assert back["summary"]["histogram"][1]["label"] == "5-20"
    changes = report.change_json(compare(sb, sg))
    assert any(c["metric"] == "blocking_us" and c["better"] for c in changes)
