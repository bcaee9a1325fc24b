"""A whole table line read in one match (take_whole's pattern per layout) gives what the
token-by-token read gives, on every table line of the captured logs (tests/fixtures:
h200x2, public/nccl-tests) and on lines changed where the pattern and the readers could
part: a token past a reader's bounds, inf and nan in a word column, other blanks."""

from __future__ import annotations

import pytest

from gpulane.collectives.nccl_tests import table
from gpulane.collectives.nccl_tests.model import Columns, TableLine
from gpulane.collectives.nccl_tests.table import (
    _whole_reader,
    measurements,
    parse_columns,
    table_start,
    take,
    take_whole,
    whole_line,
)
from gpulane.collectives.nccl_tests.text import parse_text
from tests.conftest import fixture_path

LOGS = sorted(
    [
        *fixture_path("h200x2").glob("nccl-tests-*.txt"),
        *fixture_path("public/nccl-tests").glob("*.txt"),
    ]
)


def _by_tokens(cols: list[tuple[str, int]], line: str) -> list[table.Value] | None:
    """The line read a token at a time (take's readers), None unless it is whole."""
    toks = []
    at = 0
    for tok in line.split():
        at = line.index(tok, at)
        toks.append((tok, at, at + len(tok)))
        at += len(tok)
    if len(toks) != len(cols):
        return None
    taken, rest = take(cols, toks, line)
    return taken if len(taken) == len(cols) and not rest.strip() else None


def _table_lines() -> list[tuple[str, list[tuple[str, int]], str]]:
    out = []
    for path in LOGS:
        cols = None
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("#") and "busbw" in line:
                found = parse_columns(line.strip())
                cols = found.flat() if found is not None else None
            elif cols is not None and line[:1] == " " and line.split()[:1] != []:
                out.append((path.name, cols, line))
    return out


LINES = _table_lines()


def test_every_captured_table_line_is_one_match_and_reads_as_token_by_token() -> None:
    whole = 0
    for name, cols, line in LINES:
        want = _by_tokens(cols, line)
        if want is None:
            continue
        pattern, _ = _whole_reader(cols)
        assert pattern.fullmatch(line) is not None, (name, line)
        got = take_whole(cols, line)
        assert got == want, (name, line)
        assert [type(v) for _, _, v, _ in got] == [type(v) for _, _, v, _ in want]
        whole += 1
    assert whole > 500  # the logs' lines, not a few


LINE = next(line for name, _, line in LINES if name == "nccl-tests-all_reduce.txt")
COLS = next(cols for name, cols, _ in LINES if name == "nccl-tests-all_reduce.txt")


def _with(k: int, token: str, sep: str = "  ") -> str:
    toks = LINE.split()
    toks[k] = token
    return sep.join(toks)


@pytest.mark.parametrize(
    "line",
    [
        _with(0, "1" * 30),  # the longest size a reader takes
        _with(0, "1" * 31),  # one digit more: no number to the reader
        _with(5, "1" * 31 + ".5"),  # a time past the pattern's bound, within the reader's
        _with(5, "1" * 41 + ".5"),  # past both
        _with(5, "1.5e1234"),
        _with(5, "1.5e12345"),  # an exponent of 5 digits: no float to the reader
        _with(2, "inf"),
        _with(3, "NaN"),
        _with(2, "info"),  # a word that starts like inf
        _with(3, "nan_"),
        _with(5, "+INF"),
        _with(8, "N/A"),
        _with(8, "1.5"),  # #wrong is a count
        _with(4, "+7"),
        _with(1, "-16"),  # count has no sign
        _with(5, "1_000"),  # float() takes it, the reader does not
        _with(5, "١٢"),  # digits of another script
        _with(5, "12", "\u00a0 "),  # a blank that split() takes and the pattern does not
        LINE + "\n",
        "\t" + LINE.strip() + "  ",
        LINE + "  12",  # a token too many
        " ".join(LINE.split()[:-1]),  # one too few
    ],
)
def test_a_changed_line_reads_as_token_by_token(line: str) -> None:
    assert take_whole(COLS, line) == _by_tokens(COLS, line)


OLD_COLS = [
    *(("size", -1), ("count", -1), ("type", -1)),
    *((c, g) for g in (0, 1) for c in ("time", "algbw", "busbw", "error")),
]
STAMPED = [*COLS, ("date", -1), ("clock", -1)]


def _token_values(cols: list[tuple[str, int]], line: str) -> list[tuple[str, object]] | None:
    got = _by_tokens(cols, line)
    return None if got is None else [(c, v) for c, _, v, _ in got]


def test_the_token_readers_take_n_a_a_date_and_a_clock() -> None:
    # the readers the pattern stands in for, on the lines it leaves to them (a line cut by
    # other output, or with a blank the pattern refuses): N/A in error, -S 1's timestamp
    old = "  1024  256  float  1.5  0.68  0.68  N/A  1.4  0.73  0.73  2e-07"
    got = _token_values(OLD_COLS, old)
    assert got is not None
    assert got[6:] == [
        ("error", None),
        ("time", 1.4),
        ("algbw", 0.73),
        ("busbw", 0.73),
        ("error", 2e-07),
    ]
    assert _token_values(OLD_COLS, old.replace("N/A", "n/a")) is None
    stamped = f"{LINE}  2026-11-22 10:00:01"
    got = _token_values(STAMPED, stamped)
    assert got is not None
    assert got[-2:] == [("date", "2026-11-22"), ("clock", "10:00:01")]
    assert take_whole(STAMPED, stamped) == _by_tokens(STAMPED, stamped)
    assert _token_values(STAMPED, f"{LINE}  2026-11-22 10:00") is None
    assert _token_values(STAMPED, f"{LINE}  22-11-2026 10:00:01") is None


# --- whole_line: a table line built from the pattern's tokens by a plan per layout. It must
# give what take_whole, table_start and measurements give (values and their types, the
# printed tokens, the timestamp), on every captured table line and on lines changed in each
# column; and the reader, which takes most lines through it, must read a log as it reads
# the same log through take_whole's token reader.


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


def _runs(text: str) -> list[str]:
    return [repr((r.columns, r.lines, r.errors)) for r in parse_text(text, "log")]


def _table_lines_marked(text: str) -> str:
    """The log with a blank the pattern refuses (U+00A0) before each table line: every such
    line goes through the reader's token path (take_whole's reader, table_start, _emit)."""
    out = []
    for line in text.splitlines():
        table = line[:1] == " " and line.split()[:1] != [] and line.split()[0].isdigit()
        out.append("\u00a0" + line if table else line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_a_log_reads_the_same_through_whole_line_and_the_token_path(path) -> None:
    text = path.read_text(errors="replace")
    marked = _table_lines_marked(text)
    if "\u00a0" not in marked:
        pytest.skip("no table line")
    assert _runs(marked) == _runs(text)


def test_a_timestamped_log_reads_the_same_through_both_paths() -> None:
    path = fixture_path("h200x2") / "nccl-tests-all_reduce.txt"
    out = []
    for k, line in enumerate(path.read_text().splitlines()):
        if line.startswith("#") and "busbw" in line and "size" in line:
            line += "            timestamp"
        elif line[:1] == " " and line.split()[:1] != [] and line.split()[0].isdigit():
            line += f"  2026-11-22 10:00:{k % 60:02d}"
        out.append(line)
    text = "\n".join(out) + "\n"
    runs = parse_text(text, "log")
    stamps = [tl.timestamp for r in runs for tl in r.lines]
    assert stamps and all(s is not None and s.startswith("2026-11-22 10:00:") for s in stamps)
    assert _runs(_table_lines_marked(text)) == _runs(text)
