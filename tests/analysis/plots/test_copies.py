"""The copy plot keeps solo and all-GPUs-at-once copies apart (issue 28: the all-at-once
total was drawn as the next point of the solo curve, and the mixed median marked)."""

from __future__ import annotations

import pytest

from gpulane.analysis.plots import copy_plots
from gpulane.analysis.plots.accept import failing_marks
from gpulane.analysis.rules import evaluate
from gpulane.analysis.store import frame_from_rows
from tests.analysis.rules.rule_sets import rule_set
from tests.analysis.rules.synthetic import GIB, collectives, host_copies, peer_copies, topology


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_solo_curve_and_all_at_once_panels(n: int) -> None:
    (plot,) = copy_plots(frame_from_rows(host_copies(n)))
    axes = {ax.get_title(): ax for ax in plot.figure.axes if ax.get_visible()}
    want = {"d2h pinned", "h2d pinned"}
    if n > 1:
        want |= {
            f"{op} pinned {n} GPUs at once, {w}" for op in ("d2h", "h2d") for w in ("each", "total")
        }
    assert set(axes) == want
    solo = axes["h2d pinned"]
    # the solo curve ends at 1 GiB, at the solo figure; no 4 GiB point, no 41 GB/s share
    xs, ys = solo.lines[0].get_xdata(), solo.lines[0].get_ydata()
    assert max(xs) == GIB and ys[-1] == pytest.approx(55.4)
    if n > 1:
        total = axes[f"h2d pinned {n} GPUs at once, total"]
        (bar,) = total.patches
        assert bar.get_height() == pytest.approx(41.0 * n)


def test_a_failing_gpu_is_marked_on_the_solo_panel_only() -> None:
    rows = host_copies(4, gpu_solo={"GPU1": 40.0}) + collectives(4) + peer_copies(4)
    frame = frame_from_rows(rows)
    v = evaluate(frame, rule_set(), topology(4))
    marks = failing_marks(v.checks, frame)
    assert {(m.figure, m.value) for m in marks if m.label == "pinned_h2d"} == {
        ("h2d pinned 1 GiB", 40.0)
    }
    (plot,) = copy_plots(frame, marks=marks)
    axes = {ax.get_title(): ax for ax in plot.figure.axes if ax.get_visible()}
    marked = [t for t, ax in axes.items() if any(line.get_marker() == "X" for line in ax.lines)]
    assert sorted(marked) == ["d2h pinned", "h2d pinned"]  # GPU1 is short both ways


def test_the_report_copy_table_keeps_them_apart_too() -> None:
    from gpulane.analysis.report.sections import copies_section

    html = copies_section(frame_from_rows(host_copies(4)), "build", {})
    # GPU0's 1 GiB h2d: the solo line (55.4) and its share while four copied (41.0)
    assert "one GPU at a time" in html and "one GPU&#x27;s share, 4 GPUs at once" in html
    assert "total of 4 GPUs at once" in html
    assert "48.2" not in html  # the median of 55.4 and 41.0 that issue 28 saw (as 48.85)
