"""whole_line builds a table line from the tokens take_whole's pattern captured by a plan
per layout: it must give what take_whole, table_start and measurements give (values and
their types, the printed tokens, the timestamp) on every captured table line and on lines
changed in each column (inf, nan, N/A, a whole number, a timestamp, cputime)."""

from __future__ import annotations

import pytest

from gpulane.collectives.nccl_tests.model import Columns, TableLine
from gpulane.collectives.nccl_tests.table import (
    measurements,
    parse_columns,
    table_start,
    take_whole,
    whole_line,
)
from tests.conftest import fixture_path

LOGS = sorted(
    [
        *fixture_path("h200x2").glob("nccl-tests-*.txt"),
        *fixture_path("public/nccl-tests").glob("*.txt"),
    ]
)


def _old(cols: list[tuple[str, int]], columns: Columns, line: str) -> TableLine | None:
    """The line as text.py read it before whole_line: take_whole, table_start, _emit."""
    values = take_whole(cols, line)
    if values is None:
        return None
    tl = table_start(values)
    tl.results = measurements(values, columns)
    stamp = [v for c, _, v, _ in values if c in ("date", "clock")]
    if len(stamp) == 2:
        tl.timestamp = f"{stamp[0]} {stamp[1]}"
    return tl


def _same(cols: list[tuple[str, int]], columns: Columns, line: str) -> bool:
    """whole_line agrees with the old read (repr: 1 and 1.0 differ); True when it took
    the line, False when it left it to the caller."""
    got = whole_line(cols, columns, line)
    if got is None:
        return False
    assert repr(got) == repr(_old(cols, columns, line)), line
    return True


def _captured() -> list[tuple[str, Columns, str]]:
    out = []
    for path in LOGS:
        columns = None
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("#") and "busbw" in line:
                columns = parse_columns(line.strip())
            elif columns is not None and line[:1] == " " and line.split()[:1] != []:
                out.append((path.name, columns, line))
    return out


CAPTURED = _captured()


def test_every_captured_table_line_reads_as_before() -> None:
    taken = sum(_same(columns.flat_cached, columns, line) for _, columns, line in CAPTURED)
    assert taken > 500  # the logs' lines, not a few
    # the layouts of the captured logs include -I 1's i_* columns and the old error column
    names = {c for _, columns, _ in CAPTURED for g in columns.groups for c in g}
    assert {"i_min", "i_cv", "error", "wrong"} <= names


NEW = next(c for name, c, _ in CAPTURED if name == "nccl-tests-all_reduce.txt")
LINE = next(line for name, _, line in CAPTURED if name == "nccl-tests-all_reduce.txt")


def _with(k: int, token: str) -> str:
    toks = LINE.split()
    toks[k] = token
    return "  ".join(toks)


@pytest.mark.parametrize("k", range(len(LINE.split())))
@pytest.mark.parametrize("token", ["inf", "-nan", "NaN", "N/A", "0", "7", "1e3", "+2.5"])
def test_a_changed_column_reads_as_before(k: int, token: str) -> None:
    _same(NEW.flat_cached, NEW, _with(k, token))


def test_inf_and_nan_are_no_figure_and_whole_numbers_stay_numbers() -> None:
    # time, algbw, busbw of the out-of-place result; #wrong of the in-place one
    line = "  ".join(
        ["1024", "256", "float", "sum", "-1", "inf", "nan", "3", "0", *LINE.split()[9:]]
    )
    got = whole_line(NEW.flat_cached, NEW, line)
    assert got is not None
    out = got.results[0]
    assert (out.time_us, out.algbw_gbps, out.busbw_gbps, out.wrong) == (None, None, 3, 0)
    assert type(out.busbw_gbps) is float and type(out.wrong) is int
    assert got.results[1].in_place and not out.in_place
    assert out.text["time"] == "inf" and list(out.text) == NEW.groups[0]


def test_a_timestamp_cputime_and_the_blank_redop_layout_read_as_before() -> None:
    header = "#  size  count  type  redop  root  cputime  algbw  busbw  #wrong  cputime  algbw  busbw  #wrong  timestamp"
    columns = parse_columns(header)
    assert columns is not None and columns.cputime and columns.timestamp
    line = f"{LINE}  2026-11-22 10:00:01"
    assert _same(columns.flat_cached, columns, line)
    got = whole_line(columns.flat_cached, columns, line)
    assert got is not None and got.timestamp == "2026-11-22 10:00:01"
    assert all(m.cputime for m in got.results)
    blank = columns.flat_blank_redop
    assert blank is not None
    short = "  ".join(t for k, t in enumerate(line.split()) if k != 3)
    assert _same(blank, columns, short)
    assert whole_line(blank, columns, short).redop is None  # type: ignore[union-attr]
