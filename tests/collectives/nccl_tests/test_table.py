"""The nccl-tests result table: the column layout read from real header lines, and the
tokens each column takes, on real table lines (tests/fixtures/h200x2, public/nccl-tests)."""

from __future__ import annotations

import pytest

from gpulane.collectives.nccl_tests.model import Columns
from gpulane.collectives.nccl_tests.table import parse_columns, take, take_whole
from gpulane.collectives.nccl_tests.text import parse_text
from tests.conftest import fixture_path

NEW = ["time", "algbw", "busbw", "wrong"]
PER_ITER = [*NEW, "i_min", "i_max", "i_p99", "i_cv"]
OLD = ["time", "algbw", "busbw", "error"]
PRE = ["size", "count", "type", "redop", "root"]


def header_of(rel: str) -> str:
    text = fixture_path(rel).read_text()
    return next(ln.strip() for ln in text.splitlines() if ln.startswith("#") and "busbw" in ln)


def line_of(rel: str, size: str) -> str:
    text = fixture_path(rel).read_text()
    return next(ln for ln in text.splitlines() if ln.split()[:1] == [size])


ALL_REDUCE = "h200x2/nccl-tests-all_reduce.txt"
HEADER = header_of(ALL_REDUCE)
OLD_ALL_GATHER = header_of("public/nccl-tests/wohlbier_dgx2_12xV100_all_gather_OLDFMT_FAILED.txt")
LINE = line_of(ALL_REDUCE, "1048576")  # 1048576 262144 float sum -1 | 22.13 ... | 22.39 ...
COLS = Columns(PRE, [NEW, NEW]).flat()
# -C 1 -S 1 (writeResultHeader's labels: cputime, and a timestamp after in-place)
STAMPED_HEADER = (
    "#       size         count      type   redop    root  cputime   algbw   busbw  #wrong"
    "  cputime   algbw   busbw  #wrong            timestamp"
)


@pytest.mark.parametrize(
    ("header", "want"),
    [
        (HEADER, Columns(PRE, [NEW, NEW], False, False)),
        (header_of("h200x2/nccl-tests-broadcast.txt"), Columns(PRE, [NEW, NEW], False, False)),
        (
            header_of("h200x2/nccl-tests-all_reduce-per-iter.txt"),
            Columns(PRE, [PER_ITER, PER_ITER], False, False),
        ),
        (OLD_ALL_GATHER, Columns(["size", "count", "type"], [OLD, OLD], False, False)),
        (
            header_of("public/nccl-tests/wohlbier_dgx2_12xV100_reduce_scatter_OLDFMT.txt"),
            Columns(["size", "count", "type", "redop"], [OLD, OLD], False, False),
        ),
        (STAMPED_HEADER, Columns(PRE, [NEW, NEW], True, True)),
    ],
)
def test_columns_of_real_headers(header: str, want: Columns) -> None:
    assert parse_columns(header) == want


def _drop(header: str, label: str, nth: int = 1) -> str:
    """The header with the nth ``label`` blanked (a label lost to interleaved output)."""
    at = -1
    for _ in range(nth):
        at = header.index(f" {label}", at + 1)
    return header[:at] + " " * (len(label) + 1) + header[at + len(label) + 1 :]


@pytest.mark.parametrize(
    "damaged",
    [
        _drop(HEADER, "size"),
        _drop(HEADER, "count"),
        _drop(HEADER, "type"),
        _drop(HEADER, "time"),  # out-of-place's: its values would land in pre-columns
        _drop(HEADER, "algbw", 2),
        _drop(HEADER, "busbw"),
        HEADER.replace(" root ", " redop", 1),  # a column named twice
        HEADER.replace("#wrong", "algbw", 1),  # a placement naming algbw twice
        HEADER + "     time   algbw   busbw  #wrong",  # three placements
        HEADER.split(" time ")[0],  # no placement at all
        *(  # between type and the first time: only redop and root
            OLD_ALL_GATHER.replace(" time ", f" {label}  time ", 1)
            for label in ("algbw", "busbw", "#wrong", "error", "count")
        ),
    ],
)
def test_a_damaged_header_is_no_table_header(damaged: str) -> None:
    assert damaged != HEADER and damaged != OLD_ALL_GATHER
    assert parse_columns(damaged) is None


def _with(line: str, k: int, token: str) -> str:
    toks = line.split()
    toks[k] = token
    return "  ".join(toks)


@pytest.mark.parametrize("token", ["inf", "nan", "INF", "NaN", "12", "-1", "1e3", "s+m"])
@pytest.mark.parametrize(("column", "k"), [("type", 2), ("redop", 3)])
def test_word_columns_take_no_number(column: str, k: int, token: str) -> None:
    line = _with(LINE, k, token)
    assert take_whole(COLS, line) is None
    toks = [(t, line.index(t), line.index(t) + len(t)) for t in line.split()[: k + 1]]
    taken, rest = take(COLS, toks, line)
    assert [(c, v) for c, _, v, _ in taken] == [
        ("size", 1048576),
        ("count", 262144),
        ("type", "float"),
    ][:k]
    assert rest.startswith(token)


STAMPED = Columns(PRE, [NEW, NEW], True).flat()


@pytest.mark.parametrize(
    ("stamp", "ok"),
    [
        ("2026-11-22 10:00:01", True),
        ("11/22/2026 10:00:01", False),
        ("2026-11-22 10:00", False),
        ("10:00:01 2026-11-22", False),
    ],
)
def test_timestamp_columns_take_a_date_and_a_clock(stamp: str, ok: bool) -> None:
    taken = take_whole(STAMPED, f"{LINE}  {stamp}")
    if not ok:
        assert taken is None
        return
    assert taken is not None
    assert [(c, v) for c, _, v, _ in taken[-2:]] == [("date", "2026-11-22"), ("clock", "10:00:01")]


def test_each_table_line_keeps_its_line_number_values_and_printed_tokens() -> None:
    text = fixture_path(ALL_REDUCE).read_text()
    (run,) = parse_text(text, "r.txt")
    numbers = [k for k, ln in enumerate(text.splitlines(), start=1) if ln[:1] == " "]
    assert [tl.line for tl in run.lines] == numbers == list(range(13, 44))
    assert all(tl.complete is True and tl.timestamp is None for tl in run.lines)
    tl = run.lines[17]
    assert (tl.size_bytes, tl.count, tl.dtype, tl.redop, tl.root) == (
        1048576,
        262144,
        "float",
        "sum",
        -1,
    )
    assert [m.text for m in tl.results] == [
        {"time": "22.13", "algbw": "47.38", "busbw": "47.38", "wrong": "0"},
        {"time": "22.39", "algbw": "46.84", "busbw": "46.84", "wrong": "0"},
    ]
    assert [(m.in_place, m.time_us, m.algbw_gbps, m.busbw_gbps, m.wrong) for m in tl.results] == [
        (False, 22.13, 47.38, 47.38, 0),
        (True, 22.39, 46.84, 46.84, 0),
    ]


@pytest.mark.parametrize("bad", ["inf", "nan", "-nan", "-inf"])
def test_bandwidths_printed_inf_or_nan_are_no_number(bad: str) -> None:
    # nccl-tests divides by the measured time: a time of 0.00 prints inf (or nan for 0 B)
    text = fixture_path(ALL_REDUCE).read_text()
    line = _with(_with(_with(LINE, 5, "0.00"), 6, bad), 7, bad)
    (run,) = parse_text(text.replace(LINE, line), "r.txt")
    (tl,) = [t for t in run.lines if t.size_bytes == 1048576]
    oop, inp = tl.results
    assert (oop.time_us, oop.algbw_gbps, oop.busbw_gbps, oop.wrong) == (0.0, None, None, 0)
    assert oop.text == {"time": "0.00", "algbw": bad, "busbw": bad, "wrong": "0"}
    assert (inp.time_us, inp.algbw_gbps, inp.busbw_gbps) == (22.39, 46.84, 46.84)
