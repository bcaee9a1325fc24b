"""Shared by the nccl-tests tests: the real captured logs and ways to look at rows.

Fixtures: tests/fixtures/h200x2/nccl-tests-* (captured on the 2x H200 machine: text and the
JSON of the same runs) and tests/fixtures/public/nccl-tests/ (real logs from public
repositories, see tests/fixtures/public/SOURCES.md). Failed and cut-off runs are made from
those real logs the way nccl-tests and the launchers print failures (src/common.h
NCCLCHECK/CUDACHECK/TESTCHECK, Open MPI and Slurm messages).
"""

from __future__ import annotations

import re
from typing import Any

from gpulane.collectives.nccl_tests.logs import rows_from_log
from gpulane.collectives.nccl_tests.render import format_float
from gpulane.record import Row
from tests.conftest import FIXTURES, fixture_path

H200 = sorted((FIXTURES / "h200x2").glob("nccl-tests-*"))
H200_TEXT = [p for p in H200 if p.suffix == ".txt"]
PUBLIC = sorted((FIXTURES / "public" / "nccl-tests").glob("*.txt"))
ALL = H200 + PUBLIC

REAL = fixture_path("h200x2/nccl-tests-all_reduce.txt").read_text()
MPI_REAL = fixture_path("h200x2/nccl-tests-mpi-all_reduce.txt").read_text()


def rows_of(rel: str, **kw: Any) -> list[Row]:
    path = fixture_path(rel)
    return rows_from_log(path.read_text(), str(path), **kw)


def measured(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.time_us is not None]


def errors(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.status != "ok"]


def data_lines(text: str) -> list[list[str]]:
    """The table lines of a log, split on whitespace (an independent reading)."""
    return [ln.split() for ln in text.splitlines() if re.match(r"^\s+\d+\s+\d+\s+[a-z]", ln)]


def half_tokens(row: Row) -> list[str]:
    """A row's time, algbw, busbw and #wrong as nccl-tests prints them."""
    wrong = "N/A" if row.wrong is None else str(row.wrong)
    assert row.time_us is not None and row.algbw_gbps is not None
    assert row.busbw_gbps is not None
    return [
        format_float(row.time_us, 7).strip(),
        format_float(row.algbw_gbps, 6).strip(),
        format_float(row.busbw_gbps, 6).strip(),
        wrong,
    ]


def cut_at(text: str, at_size: str) -> tuple[str, str]:
    """(text up to the table line of at_size, that line)."""
    lines = text.splitlines(keepends=True)
    k = next(i for i, ln in enumerate(lines) if ln.split()[:1] == [at_size])
    return "".join(lines[:k]), lines[k]
