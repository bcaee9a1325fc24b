"""Collective times: interpolation over the measured H200 curves, sends from all-gathers,
and a choice among several builds."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gpulane.collectives.nccl_tests.logs import rows_from_file
from gpulane.errors import InputError
from gpulane.planning.comm import CommTime, MeasuredComm
from tests.conftest import fixture_path
from tests.planning.common import flat_curve_rows, h200_rows


def test_measured_curves_prefer_graph_replays_and_cover_large_sizes() -> None:
    m = MeasuredComm(h200_rows())
    assert m.build == "nvlink"
    labels = [g.label for g in m.groups[("all_reduce", 2)]]
    assert labels[0] == "nccl graph bfloat16" and "nccl float" in labels
    graph = m.groups[("all_reduce", 2)][0].curve
    # a measured size: the graph replay's median
    i = graph.sizes.index(16384)
    assert m.time("all_reduce", 2, 16384) == CommTime(graph.times_us[i], "measured nccl graph bfloat16", False)  # fmt: skip
    # between two sizes: log-log
    lo, hi = graph.sizes.index(1 << 20), graph.sizes.index(1 << 21)
    t = m.time("all_reduce", 2, 3 << 19)
    assert t is not None
    frac = math.log(1.5) / math.log(2)
    want = math.exp(math.log(graph.times_us[lo]) * (1 - frac) + math.log(graph.times_us[hi]) * frac)
    assert t.time_us == pytest.approx(want) and not t.extrapolated
    # above the graph sweep's 64 MiB: the eager sweep that went to 8 GiB
    big = m.time("all_reduce", 2, 256 << 20)
    assert big is not None and big.source == "measured nccl float" and not big.extrapolated
    assert 700 < big.time_us < 1000  # 256 MiB at about 300 GB/s of bus bandwidth
    # above everything: linear in size
    huge = m.time("all_reduce", 2, 16 << 30)
    assert huge is not None and huge.extrapolated
    widest = max(m.groups[("all_reduce", 2)], key=lambda g: g.curve.sizes[-1]).curve
    assert widest.sizes[-1] == 8 << 30
    assert huge.time_us == pytest.approx(2 * widest.times_us[-1])
    assert m.peak_busbw("all_reduce", 2) == pytest.approx(345, rel=0.05)


def test_sends_from_a_two_rank_all_gather_of_twice_the_size() -> None:
    rows = [r for name in ("nt-all_reduce-pcie-host.txt", "nt-all_gather-pcie-host.txt")
            for r in rows_from_file(fixture_path(f"advise/{name}"), build="pcie-host")]  # fmt: skip
    m = MeasuredComm(rows)
    send = m.time("send", 2, 1 << 20)
    ag = m.time("all_gather", 2, 2 << 20)
    assert send is not None and ag is not None
    assert send.time_us == ag.time_us and "all_gather of 2x" in send.source
    sr = [replace(r, op="sendrecv", time_us=7.0) for r in flat_curve_rows(1.0, ("x",))]
    m2 = MeasuredComm(sr + flat_curve_rows(3.0))
    got = m2.time("send", 2, 4096)
    assert got is not None and got.time_us == pytest.approx(7.0)


def test_several_builds_need_a_choice() -> None:
    rows = h200_rows() + flat_curve_rows(1.0)
    with pytest.raises(InputError, match="build=LABEL"):
        MeasuredComm(rows)
    assert MeasuredComm(rows, "flat").time("all_reduce", 2, 1 << 20) == CommTime(
        1.0, "measured nccl graph bfloat16", False
    )


def test_a_frames_records_time_as_their_rows_do() -> None:
    """Benchmark scripts hand in a frame's records: pandas' NaN where a field is missing
    (a path, a transport) becomes None at the door, never a path named "nan"."""
    import pandas as pd

    from gpulane.record import rows_frame

    rows = h200_rows()
    rows = [replace(r, path=None, transport=None) if i % 2 else r for i, r in enumerate(rows)]
    records = rows_frame(rows).to_dict("records")
    assert any(isinstance(r["path"], float) for r in records) or any(
        r["path"] is None for r in records
    )
    for r in records[1::2]:  # as a parquet read back gives them
        r["path"], r["transport"] = float("nan"), pd.NA
    typed, frame = MeasuredComm(rows), MeasuredComm(records)
    assert typed.paths("all_reduce", 2) == frame.paths("all_reduce", 2) == {"NV18"}
    assert typed.transport("all_reduce", 2) == frame.transport("all_reduce", 2)
    for key, groups in typed.groups.items():
        assert [g.curve for g in groups] == [g.curve for g in frame.groups[key]]
