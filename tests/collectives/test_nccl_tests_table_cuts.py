"""The nccl-tests text table cut at each column of a line: the run says where it stopped,
in words, at the right line and placement (what `gpulane parse` reports as an error row).

(The parser moves to gpulane/collectives/nccl_tests/ on another branch: this file's import
follows it there.)"""

from __future__ import annotations

import pytest

from gpulane.collectives.nccl_tests_parse import parse_text, rows_from_log
from tests.conftest import fixture_path

TEXT = fixture_path("h200x2/nccl-tests-all_reduce.txt").read_text()
LINES = TEXT.splitlines()
AT = next(k for k, line in enumerate(LINES) if line.strip().startswith("1048576 "))
FULL = LINES[AT]  # 1048576 262144 float sum -1 | 22.13 47.38 47.38 0 | 22.xx ... 0


def cut(n_chars: int) -> str:
    return "\n".join(LINES[:AT]) + "\n" + FULL[:n_chars]


def columns_end() -> list[int]:
    ends, inside = [], False
    for k, ch in enumerate(FULL + " "):
        if ch != " " and not inside:
            inside = True
        elif ch == " " and inside:
            inside = False
            ends.append(k)
    return ends


@pytest.mark.parametrize("column", range(5, 13))
def test_a_line_cut_after_a_column_reports_its_placement(column: int) -> None:
    end = columns_end()[column - 1]  # the first `column` columns kept whole
    (run,) = parse_text(cut(end), "c.txt")
    (err,) = run.errors
    where = "out-of-place" if column < 9 else "in-place"
    assert (err.kind, err.line, err.size_bytes) == ("cut_off", AT + 1, 1048576)
    assert err.message == f"the line for 1048576 B stops before its {where} result"
    rows = rows_from_log(cut(end), "c.txt")
    bad = [r for r in rows if r.status == "error"]
    assert len(bad) == 1 and bad[0].size_bytes == 1048576 and bad[0].in_place is (column >= 9)
    ok = [r for r in rows if r.status == "ok"]
    assert max(r.size_bytes for r in ok) <= 1048576  # nothing past the cut
    if column >= 9:  # the out-of-place half was whole: its row stands
        whole = [r for r in ok if r.size_bytes == 1048576]
        assert [r.in_place for r in whole] == [False] and whole[0].time_us == 22.13


def test_the_whole_line_reports_nothing() -> None:
    (run,) = parse_text("\n".join(LINES[: AT + 1]) + "\n", "c.txt")
    assert not [e for e in run.errors if e.size_bytes == 1048576]


def _rows(text: str) -> list[tuple[object, ...]]:
    return [
        (r.size_bytes, r.in_place, r.status, r.time_us, r.busbw_gbps, r.wrong)
        for r in rows_from_log(text, "c.txt")
    ]


@pytest.mark.parametrize("column", [5, 7, 9, 11])
def test_a_line_split_by_interleaved_output_reads_as_one(column: int) -> None:
    # Another process's output broke the line: the rest of it follows on the next line.
    end = columns_end()[column - 1]
    split = [*LINES[:AT], FULL[:end], FULL[end:], *LINES[AT + 1 :]]
    assert _rows("\n".join(split) + "\n") == _rows(TEXT)


def test_a_split_line_whose_rest_never_comes_is_reported() -> None:
    end = columns_end()[6]
    broken = [*LINES[:AT], FULL[:end], "some other output", *LINES[AT + 1 :]]
    got = _rows("\n".join(broken) + "\n")
    assert (1048576, False, "error", None, None, None) in [
        (s, p, st, None, None, None) for s, p, st, *_ in got if s == 1048576
    ]
    assert [g for g in got if g[0] != 1048576] == [g for g in _rows(TEXT) if g[0] != 1048576]
