"""Two traces' summaries compared (gpulane.analysis.trace.diff)."""

from __future__ import annotations

from gpulane.analysis.trace.diff import compare
from gpulane.analysis.trace.summary import summarize
from tests.analysis.trace.traces import (
    bad_trace,
    good_trace,
)


def test_compare_says_which_way_things_went() -> None:
    changes = {
        c.key: c for c in compare(summarize(bad_trace(), 63.0), summarize(good_trace(), 63.0))
    }
    ratio = changes["pcie_gbps"].ratio
    assert changes["pcie_gbps"].better is True and ratio is not None and ratio > 4
    assert changes["blocking_us"].better is True and changes["blocking_us"].after == 0
    assert changes["overlap_fraction"].better is True
    assert changes["bytes"].delta == 0 and changes["bytes"].better is None
