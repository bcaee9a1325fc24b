"""Totals, histogram, blocking and overlap of a trace (gpulane.analysis.trace.summary)."""

from __future__ import annotations

import pytest

from gpulane.analysis.trace.events import PCIE, CopyEvent
from gpulane.analysis.trace.summary import histogram, overlap_length, summarize, union_length
from tests.analysis.trace.traces import (
    LAYER_BYTES,
    bad_trace,
    good_trace,
)


def test_bad_offload_is_blocking_and_slow_good_is_async_and_fast() -> None:
    bad, good = bad_trace(), good_trace()
    assert all(c.blocking for c in bad.copies)
    assert all(c.blocking_reason for c in bad.copies)
    assert all(c.blocking is False for c in good.copies)
    # bad copies ride the default stream that the kernels use; good ones a side stream
    kernel_streams = {k.stream for k in bad.kernels}
    assert {c.stream for c in bad.copies} <= kernel_streams
    assert not {c.stream for c in good.copies} & {k.stream for k in good.kernels}

    sb, sg = summarize(bad, 63.0, "test"), summarize(good, 63.0, "test")
    assert sb.pcie_gbps is not None and sg.pcie_gbps is not None
    assert sb.pcie_gbps < 20 < 40 < sg.pcie_gbps
    assert sb.blocking_count == 4 and sg.blocking_count == 0
    assert sb.blocking_us > 3000 and sg.blocking_us == 0
    # host waited at least as long as the copies themselves took
    assert sb.blocking_us >= sb.copy_time_us
    assert sb.overlap_fraction == 0.0
    assert sg.overlap_fraction is not None and sg.overlap_fraction > 0
    assert sb.pcie_efficiency is not None and sb.pcie_efficiency < 0.3
    assert sg.pcie_efficiency is not None and sg.pcie_efficiency > 0.7
    # histogram: bad in 5-20 GB/s, good in 50-80 GB/s, by count, bytes and time
    bins_b = {b.label: b for b in sb.histogram}
    bins_g = {b.label: b for b in sg.histogram}
    assert bins_b["5-20"].count == 4 and bins_b["5-20"].bytes == 4 * LAYER_BYTES
    assert bins_g["50-80"].count == 4 and bins_g["50-80"].time_us == pytest.approx(sg.copy_time_us)


def _copy(nbytes: int, dur_us: float, start: float = 0.0) -> CopyEvent:
    return CopyEvent("c", "H2D", PCIE, start, dur_us, nbytes)


def test_histogram_bins() -> None:
    copies = [
        _copy(1000, 1.0),
        _copy(10_000, 1.0),
        _copy(60_000, 1.0),
        _copy(300_000, 1.0),
        _copy(10, 0.0),
    ]
    bins = {b.label: b for b in histogram(copies)}
    assert bins["0-5"].count == 1 and bins["5-20"].count == 1  # 1000 B in 1 us = 1 GB/s
    assert sum(b.count for b in bins.values()) == 4  # the zero-duration copy has no bandwidth
    assert bins["50-80"].bytes == 60_000 and bins["200-500"].time_us == 1.0


def test_union_and_overlap() -> None:
    assert union_length([(0, 2), (1, 3), (5, 6)]) == 4
    assert union_length([]) == 0
    assert overlap_length([(0, 10)], [(2, 3), (2.5, 4), (9, 12)]) == 3
    assert overlap_length([(0, 1)], []) == 0
