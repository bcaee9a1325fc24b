from __future__ import annotations

import pytest

from gpulane.record import Row
from gpulane.topology.bandwidth import LineRate
from gpulane.transfers.points import Point, aggregate_row, percentile, summarize, to_row


def test_summarize_median_and_p99() -> None:
    st = summarize([10.0, 12.0, 11.0, 100.0], 1_000_000)
    assert st.median_us == 11.5
    assert st.min_us == 10.0
    assert st.p99_us == pytest.approx(100.0 - 0.03 * 88.0)
    assert st.gbps == pytest.approx(1e6 / 11.5e-6 / 1e9)
    assert percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError):
        summarize([], 8)


def test_row_fields_and_efficiency() -> None:
    # 1 GiB in 19.35 ms: 55.49 GB/s of a Gen5 x16 link.
    p = Point("h2d", "host", "GPU0", "pinned", 1 << 30, [19350.0] * 5, reps=1, wrong=0)
    row = to_row(p, run_id="r", build="b", link=LineRate(63.008, "PCIe Gen5 x16", "nvml"))
    assert isinstance(row, Row)
    assert (row.kind, row.op, row.src, row.dst, row.memory) == (
        "copy",
        "h2d",
        "host",
        "GPU0",
        "pinned",
    )
    assert row.bidirectional is False
    assert row.algbw_gbps == pytest.approx(55.49, abs=0.01)
    assert row.expected_gbps == 63.008
    assert row.efficiency == pytest.approx((row.algbw_gbps or 0) / 63.008)
    assert row.time_us == row.time_us_p50 == 19350.0
    assert row.status == "ok" and row.wrong == 0
    assert row.extra["link"] == "PCIe Gen5 x16"
    assert row.source == "measured"


def test_wrong_data_marks_the_row() -> None:
    p = Point("d2h", "GPU1", "host", "pageable", 4096, [3.0], wrong=7)
    row = to_row(p, run_id="r", build="b", link=None)
    assert row.status == "wrong" and "7 of 1024 words" in (row.error or "")
    assert row.efficiency is None and row.expected_gbps is None


def test_aggregate_sums_concurrent_rows() -> None:
    rows = [
        to_row(Point("h2d", "host", g, "pinned", 1 << 30, [t], wrong=0), run_id="r", build="b",
               link=LineRate(63.008, "PCIe Gen5 x16"))
        for g, t in (("GPU0", 20000.0), ("GPU1", 21000.0))
    ]  # fmt: skip
    agg = aggregate_row(rows, LineRate(126.016, "sum of 2 host links", "sum"), "all-gpus")
    assert agg.algbw_gbps == pytest.approx(sum(r.algbw_gbps or 0 for r in rows))
    assert agg.efficiency == pytest.approx((agg.algbw_gbps or 0) / 126.016)
    assert (agg.src, agg.dst, agg.world_size) == ("host", "all", 2)
    assert agg.extra["gpus"] == ["GPU0", "GPU1"] and agg.extra["aggregate"]
    assert agg.time_us == 21000.0 and agg.wrong == 0
