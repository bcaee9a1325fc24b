"""The nccl-tests text table cut at each column of a line: the run says where it stopped,
in words, at the right line and placement (what `gpulane parse` reports as an error row);
lines split by other output, failures glued to a line or on the line after it."""

from __future__ import annotations

import pytest

from gpulane.collectives.nccl_tests.logs import rows_from_log
from gpulane.collectives.nccl_tests.text import parse_text
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


@pytest.mark.parametrize("column", range(3, 13))
def test_a_line_cut_after_a_column_reports_its_placement(column: int) -> None:
    # the first `column` columns kept whole, with the blank after the last: a file that
    # ends inside a token has it dropped (it may be the head of a longer one)
    end = columns_end()[column - 1] + 1
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
        assert whole[0].extra["line_complete"] is False and whole[0].extra["line"] == AT + 1
    assert (run.lines[-1].line, run.lines[-1].complete) == (AT + 1, False)
    assert all(tl.complete is True for tl in run.lines[:-1])


@pytest.mark.parametrize("column", [1, 2])
def test_size_and_count_alone_are_no_table_line(column: int) -> None:
    # not even size, count and type: some other output, and the run ends after 524288 B
    (run,) = parse_text(cut(columns_end()[column - 1] + 1), "c.txt")
    assert [(e.kind, e.line, e.size_bytes, e.message) for e in run.errors] == [
        ("cut_off", AT + 1, None,
         "the output ends after 524288 B, before the '# Out of bounds values' summary"),
    ]  # fmt: skip
    assert run.lines[-1].size_bytes == 524288


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
    (run,) = parse_text("\n".join(split) + "\n", "s.txt")
    (whole,) = parse_text(TEXT, "s.txt")
    joined = [tl for tl in run.lines if tl.size_bytes == 1048576]
    assert joined == [tl for tl in whole.lines if tl.size_bytes == 1048576]
    assert joined[0].complete is True and joined[0].line == AT + 1
    assert not run.errors


def test_a_split_line_whose_rest_never_comes_is_reported() -> None:
    end = columns_end()[6]
    broken = [*LINES[:AT], FULL[:end], "some other output", *LINES[AT + 1 :]]
    got = _rows("\n".join(broken) + "\n")
    assert (1048576, False, "error", None, None, None) in [
        (s, p, st, None, None, None) for s, p, st, *_ in got if s == 1048576
    ]
    assert [g for g in got if g[0] != 1048576] == [g for g in _rows(TEXT) if g[0] != 1048576]


def test_a_header_missing_a_column_name_reports_each_line_instead_of_shifting_values() -> None:
    # "root" lost from the header: every line has one field more than the header names
    damaged = TEXT.replace(" redop    root ", " redop    N/A  ", 1)
    assert damaged != TEXT
    rows = rows_from_log(damaged, "d.txt")
    assert rows and all(r.status == "error" for r in rows)
    assert all(r.wrong is None and r.time_us is None for r in rows)


def test_a_line_with_more_fields_than_its_header_is_reported() -> None:
    text = "\n".join([*LINES[:AT], FULL + "      0", *LINES[AT + 1 :]]) + "\n"
    (run,) = parse_text(text, "d.txt")
    got = [(e.kind, e.line, e.size_bytes, e.message) for e in run.errors]
    assert got == [
        ("damaged", AT + 1, 1048576,
         "the line for 1048576 B holds 14 fields, its table header names 13 columns"),
    ]  # fmt: skip
    rows = [r for r in rows_from_log(text, "d.txt") if r.size_bytes == 1048576]
    assert [r.status for r in rows] == ["error"] and rows[0].time_us is None
    assert rows[0].error == (
        f"d.txt:{AT + 1}: all_reduce_perf printed a damaged table at 1048576 B: the line for 1048576 B holds "
        "14 fields, its table header names 13 columns"
    )


def test_a_decimal_in_the_wrong_column_is_not_read_as_a_count() -> None:
    # the out-of-place time lost: the in-place time would land in #wrong
    toks = FULL.split()
    broken = "  ".join(toks[:5] + toks[6:])
    text = "\n".join([*LINES[:AT], broken, *LINES[AT + 1 :]]) + "\n"
    rows = [r for r in rows_from_log(text, "c.txt") if r.size_bytes == 1048576]
    assert rows and all(r.status == "error" for r in rows)
    assert all(r.wrong is None for r in rows)


def test_output_glued_to_a_whole_line_is_a_failure_of_that_run() -> None:
    glued = FULL + "vm: Test NCCL failure common.cu:1550 'invalid usage'"
    text = "\n".join([*LINES[:AT], glued]) + "\n"
    (run,) = parse_text(text, "g.txt")
    nccl = [e for e in run.errors if e.kind == "nccl"]
    assert nccl and nccl[0].line == AT + 1
    assert [(e.kind, e.line, e.size_bytes, e.count) for e in run.errors] == [
        ("nccl", AT + 1, None, 1)
    ]
    (tl,) = [t for t in run.lines if t.size_bytes == 1048576]
    assert (tl.line, tl.complete) == (AT + 1, True)
    # the in-place #wrong "0" with the failure glued to it: read as 0, printed "0"
    assert tl.results[1].text == {"time": "22.39", "algbw": "46.84", "busbw": "46.84", "wrong": "0"}
    rows = rows_from_log(text, "g.txt")
    got = [(r.status, r.in_place, r.wrong) for r in rows if r.size_bytes == 1048576]
    assert got == [("ok", False, 0), ("ok", True, 0)]
    assert all("line_complete" not in r.extra for r in rows if r.status == "ok")


def _failure(host: str = "vm") -> str:
    return f"{host}: Test NCCL failure common.cu:408 'unhandled cuda error'"


def _events(text: str) -> list[tuple[object, ...]]:
    (run,) = parse_text(text, "f.txt")
    return [(e.kind, e.line, e.size_bytes, e.in_place, e.count) for e in run.errors]


def test_a_failure_glued_to_the_preamble_keeps_the_root_an_integer() -> None:
    preamble = FULL[: FULL.index("-1") + 2]
    (run,) = parse_text("\n".join([*LINES[:AT], preamble + _failure()]) + "\n", "f.txt")
    (tl,) = [t for t in run.lines if t.size_bytes == 1048576]
    assert (tl.root, type(tl.root), tl.results, tl.complete) == (-1, int, [], False)
    assert _events("\n".join([*LINES[:AT], preamble + _failure()]) + "\n") == [
        ("nccl", AT + 1, 1048576, False, 1)
    ]


def test_a_failure_on_the_line_after_a_cut_line_is_that_lines_failure() -> None:
    # mpirun/srun pass each rank's output on by line: rank 1's failure may come on a line
    # of its own after rank 0's preamble and out-of-place half
    half = FULL[: FULL.index("22.39")]
    text = "\n".join([*LINES[:AT], half, _failure()]) + "\n"
    assert _events(text) == [("nccl", AT + 2, 1048576, True, 1)]  # and no cut_off
    rows = rows_from_log(text, "f.txt")
    assert [(r.status, r.in_place) for r in rows if r.size_bytes == 1048576] == [
        ("ok", False),
        ("error", True),
    ]


def test_a_failure_after_the_next_whole_line_is_not_the_cut_lines() -> None:
    half = FULL[: FULL.index("22.39")]
    text = "\n".join([*LINES[:AT], half, LINES[AT + 1], _failure()]) + "\n"
    assert _events(text) == [("cut_off", AT + 1, 1048576, True, 1), ("nccl", AT + 3, None, None, 1)]


def test_a_failure_from_a_host_named_by_a_number_is_read() -> None:
    # nccl-tests prints the host name up to its first dot: a host named 10.0.0.5 is "10"
    text = "\n".join([*LINES[: AT + 1], _failure("10")]) + "\n"
    assert _events(text) == [("nccl", AT + 2, None, None, 1)]
    (run,) = parse_text(text, "f.txt")
    assert "on 10:" in run.errors[0].message


def test_a_table_line_after_the_summary_is_not_a_result() -> None:
    summary = next(k for k, line in enumerate(LINES) if line.startswith("# Out of bounds"))
    text = "\n".join([*LINES[: summary + 1], FULL, *LINES[summary + 1 :]]) + "\n"
    (run,) = parse_text(text, "x.txt")
    (whole,) = parse_text(TEXT, "x.txt")
    assert run.lines == whole.lines and len(run.lines) == 31 and not run.errors


def test_a_size_cut_in_each_cycle_is_counted_each_time() -> None:
    # -N 2 (run_cycles) prints the table twice under one header
    first = next(k for k, line in enumerate(LINES) if line.strip().startswith("8 "))
    summary = next(k for k, line in enumerate(LINES) if line.startswith("# Out of bounds"))
    half = FULL[: FULL.index("22.39")]
    cycle = [*LINES[first:AT], half, "some other output", *LINES[AT + 1 : summary]]
    text = "\n".join([*LINES[:first], *cycle, *cycle, *LINES[summary:]]) + "\n"
    assert _events(text) == [("cut_off", AT + 1, 1048576, True, 2)]
