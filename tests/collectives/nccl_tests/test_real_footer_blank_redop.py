"""A complete old-layout nccl-tests table with the redop column blank that ends with its
footer: nccl-tests issue #78's alltoall result on 8 nodes of 8 V100 (comment by ngc7292,
2021-12-08; tests/fixtures/public/SOURCES.md). Unlike msccl#48's excerpt, nothing here
is cut: every line is a row, the footer is read, and the command exits 0.

The paste starts at the table, so the file names no ranks and no NCCL INFO line: the
world size is unknown (None), never guessed from busbw/algbw. The in-place column
printed ``1e+00`` on both lines while the footer says ``Out of bounds values : 0 OK``;
gpulane keeps judging the in-place rows by its bound (see the report of this change)."""

from __future__ import annotations

import pytest

from gpulane.collectives.nccl_tests.text import parse_text
from tests.collectives.nccl_tests.common import FIXTURES
from tests.parse_helpers import json_rows, run_parse

TABLE = (
    FIXTURES
    / "public"
    / "nccl-tests"
    / "nccltests78_64xV100_alltoall_OLDFMT_blank_redop_footer_TABLE.txt"
)


def test_complete_blank_redop_table_imports_whole_exit_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run_parse(capsys, "nccl-tests", str(TABLE), "--json")
    assert status == 0, err
    rows = json_rows(out)
    got = [(r["size_bytes"], r["in_place"], r["time_us"], r["busbw_gbps"]) for r in rows]
    assert got == [
        (268435456, False, 520935.0, 0.51),
        (268435456, True, 519562.0, 0.51),
        (536870912, False, 1041974.0, 0.51),
        (536870912, True, 1041299.0, 0.51),
    ]
    assert {r["op"] for r in rows} == {"alltoall"}
    assert {r["world_size"] for r in rows} == {None}
    assert not any("cut off" in (r["error"] or "") for r in rows)
    assert {r["extra"]["nccl_tests"]["avg_busbw_gbps"] for r in rows} == {0.507636}


def test_the_footer_ends_the_run_with_no_error() -> None:
    (run,) = parse_text(TABLE.read_text(), str(TABLE))
    assert run.errors == []  # the footer came: not an excerpt, not cut
    assert run.world_size is None and not run.header.ranks
