"""benchmarks/parse/bench_parse.py's logs: the cut long table imports as the rows before
the cut and one error row at the cut, and every shape reaches about the size asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.parse.bench_parse import BUILDERS, build_long_cut_log
from gpulane.record import read_rows
from gpulane.session.imports import ImportRequest, import_files


def test_cut_long_table_ends_in_one_error_row(tmp_path: Path) -> None:
    log = tmp_path / "cut.log"
    build_long_cut_log(log, 200_000)
    assert not log.read_text().endswith("\n")  # cut in the middle of a line
    out = tmp_path / "out"
    assert import_files(ImportRequest("nccl-tests", [str(log)], out=str(out))) == 0
    rows = list(read_rows(out / "rows.jsonl"))
    errors = [r for r in rows if r.status == "error"]
    assert len(errors) == 1 and errors[0] is rows[-1]
    assert "cut off" in (errors[0].error or "")
    assert all(r.time_us is not None for r in rows[:-1])


@pytest.mark.parametrize("shape", sorted(BUILDERS))
def test_each_shape_has_its_size(tmp_path: Path, shape: str) -> None:
    log = tmp_path / f"{shape}.log"
    BUILDERS[shape](log, 300_000)
    assert 300_000 <= log.stat().st_size < 300_000 + 20_000
