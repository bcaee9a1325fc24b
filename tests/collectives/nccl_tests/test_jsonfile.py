"""nccl-tests' -J JSON output, read a result at a time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpulane.collectives.nccl_tests.jsonfile import parse_json
from gpulane.collectives.nccl_tests.logs import rows_from_log
from gpulane.errors import ParseError
from tests.collectives.nccl_tests.common import errors, measured
from tests.conftest import fixture_path


def test_json_header_facts() -> None:
    path = fixture_path("h200x2/nccl-tests-all_reduce.json")
    run = parse_json(path.read_text(), str(path))
    assert run.header.test == "all_reduce_perf" and run.op == "all_reduce"
    assert (run.header.nthreads, run.header.ngpus, run.header.processes) == (1, 2, 1)
    assert run.header.ranks[0].bus_id == "0000:00:06"
    assert run.header.start_time == "2026-11-21 23:51:08"
    assert (run.out_of_bounds, run.out_of_bounds_ok) == (0, True)
    assert run.avg_busbw_gbps == pytest.approx(110.807461) and run.avg_busbw_check is None
    assert run.finished and run.concluded and not run.errors


def test_cut_off_json_keeps_results() -> None:
    data = fixture_path("h200x2/nccl-tests-all_reduce.json").read_text()
    cut = data[: data.index('"size": 65536')]
    rows = rows_from_log(cut, "cut.json")
    assert len(measured(rows)) == 2 * 13
    (err,) = errors(rows)
    assert "JSON output ends after 32768 B" in (err.error or "")


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 20000), st.sampled_from(["all_reduce", "all_gather"]))
def test_fuzz_json_truncation(cut: int, name: str) -> None:
    data = fixture_path(f"h200x2/nccl-tests-{name}.json").read_text()
    try:
        rows = rows_from_log(data[:cut], "cut.json")
    except ParseError:
        return
    assert all(r.op == name for r in rows)
