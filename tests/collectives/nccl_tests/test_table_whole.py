"""A whole table line read in one match (take_whole's pattern per layout) gives what the
token-by-token read gives, on every table line of the captured logs (tests/fixtures:
h200x2, public/nccl-tests) and on lines changed where the pattern and the readers could
part: a token past a reader's bounds, inf and nan in a word column, other blanks."""

from __future__ import annotations

import pytest

from gpulane.collectives.nccl_tests import table
from gpulane.collectives.nccl_tests.table import _whole_reader, parse_columns, take, take_whole
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
