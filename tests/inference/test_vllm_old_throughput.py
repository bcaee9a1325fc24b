"""vLLM benchmark printouts of 2023-2024 (issue 43): benchmark_serving printed
``Throughput: 5.99 requests/s`` alone (vllm-project/vllm issue #359). Read as a
throughput row with its requests/s and no tokens/s (the file has none), exit 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulane.errors import ParseError
from gpulane.inference.vllm_import import read_vllm
from tests.conftest import fixture_path
from tests.parse_helpers import encoded_copy, random_cut, run_parse

OLD = "public/vllm/vllm359_a100_benchmark_serving_2023_requests_only.txt"


def test_requests_only_throughput_line_is_read() -> None:
    rows = list(read_vllm(fixture_path(OLD)))
    assert len(rows) == 1
    row = rows[0]
    assert row.op == "throughput" and row.error is None
    assert row.extra["requests_per_second"] == 5.99
    assert row.tokens_per_s is None  # the file names no tokens/s
    assert "note" not in row.extra
    assert row.extra["line"] == 4


def test_cli_reads_it_with_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_parse(capsys, "vllm", str(fixture_path(OLD)))
    assert status == 0, err
    assert "throughput" in out


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le"])
def test_utf16_copy_reads_the_same(tmp_path: Path, codec: str) -> None:
    rows = list(read_vllm(encoded_copy(tmp_path, fixture_path(OLD), codec, "old.txt")))
    assert [r.extra["requests_per_second"] for r in rows] == [5.99]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_cut_copy_holds_no_foreign_figure(data: st.DataObject) -> None:
    with random_cut(data, fixture_path(OLD), None, "old.txt") as (path, _kept):
        try:
            rows = list(read_vllm(path))
        except ParseError as err:
            assert str(path) in str(err)
            return
    for row in rows:
        if row.error is None:
            assert row.extra["requests_per_second"] == 5.99
