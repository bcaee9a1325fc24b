"""The result table of nccl-tests' text output: its column layout, and the values of a
line's tokens read against it.

``size count type [redop] [root]`` then, per placement (out-of-place first),
``time|cputime algbw busbw #wrong|error`` and, with ``-I 1``, ``i_min i_max i_p99 i_cv%``,
and with ``-S 1`` a trailing timestamp; values ``N/A``, ``inf``, ``nan``.
"""

from __future__ import annotations

import math
import re
from operator import itemgetter
from typing import Any

from gpulane.collectives.nccl_tests.model import Columns, Measurement, TableLine

# One value read from a line: (column, placement index or -1, value, the printed token).
Value = tuple[str, int, Any, str]

# Integers of at most 30 digits (Python refuses to convert very long digit strings).
_UINT_RE = re.compile(r"^\d{1,30}$", re.ASCII)
_INT_RE = re.compile(r"^[-+]?\d{1,30}$", re.ASCII)
_FLOAT_RE = re.compile(
    r"^[-+]?(?:\d{1,40}\.?\d{0,40}|\.\d{1,40})(?:[eE][-+]?\d{1,4})?$|^[-+]?(?:inf|nan)$",
    re.I | re.ASCII,
)
_WORD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DATE_RE = re.compile(r"^\d{4}-\d\d-\d\d$")
_CLOCK_RE = re.compile(r"^\d\d:\d\d:\d\d$")


def to_int(text: str | None) -> int | None:
    if text is None or not _INT_RE.match(text.strip()):
        return None
    return int(text)


def finite(value: float | None) -> float | None:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return value


_MISSING = object()


def _uint(tok: str) -> Any:
    return int(tok) if _UINT_RE.match(tok) else _MISSING


def _int(tok: str) -> Any:
    return int(tok) if _INT_RE.match(tok) else _MISSING


def _word(tok: str) -> Any:
    return tok if _WORD_RE.match(tok) and tok.lower() not in ("inf", "nan") else _MISSING


def _float(tok: str) -> Any:
    return float(tok) if _FLOAT_RE.match(tok) else _MISSING


def _float_or_na(tok: str) -> Any:
    return None if tok == "N/A" else _float(tok)


def _count_or_na(tok: str) -> Any:
    # #wrong is a count: a decimal there is another column's value
    return None if tok == "N/A" else (float(tok) if _UINT_RE.match(tok) else _MISSING)


def _date(tok: str) -> Any:
    return tok if _DATE_RE.match(tok) else _MISSING


def _clock(tok: str) -> Any:
    return tok if _CLOCK_RE.match(tok) else _MISSING


# What each column accepts; time, algbw, busbw, i_min, i_max, i_p99, i_cv: a float.
_READ = {
    "size": _uint,
    "count": _uint,
    "root": _int,
    "type": _word,
    "redop": _word,
    "wrong": _count_or_na,
    "error": _float_or_na,
    "date": _date,
    "clock": _clock,
}


def _accept(col: str, tok: str) -> Any:
    """The value of a token in a column, or _MISSING when it cannot be that column."""
    return _READ.get(col, _float)(tok)


_LABEL_RE = re.compile(
    r"#wrong|cputime|timestamp|i_min|i_max|i_p99|i_cv%?|size|count|type|redop|root|"
    r"time|algbw|busbw|error"
)


def parse_columns(line: str) -> Columns | None:
    """The column layout from the ``#  size  count  type ...`` header line."""
    labels = _LABEL_RE.findall(line.lstrip("#"))
    pre: list[str] = []
    groups: list[list[str]] = []
    stamp = cputime = False
    for lab in labels:
        name = {"#wrong": "wrong", "i_cv%": "i_cv", "cputime": "time"}.get(lab, lab)
        if lab == "cputime":
            cputime = True
        if name == "time":
            groups.append(["time"])
        elif name == "timestamp":
            stamp = True
        elif not groups:
            pre.append(name)
        else:
            groups[-1].append(name)
    if pre[:3] != ["size", "count", "type"] or not groups or len(groups) > 2:
        return None
    if any(p not in ("redop", "root") for p in pre[3:]) or len(set(pre)) != len(pre):
        return None
    for g in groups:
        if g[:3] != ["time", "algbw", "busbw"] or len(set(g)) != len(g):
            return None
    return Columns(pre, groups, stamp, cputime)


def table_start(taken: list[Value]) -> TableLine:
    vals = {c: v for c, g, v, _ in taken if g == -1}
    return TableLine(
        line=0,
        size_bytes=int(vals["size"]),
        count=vals.get("count"),
        dtype=vals.get("type"),
        redop=vals.get("redop"),
        root=vals.get("root"),
    )


# (not a decimal's own fraction: "12.86" in an integer column is no "12" with ".86" glued)
_GLUED_RE = re.compile(
    r"^([-+]?\d{1,30}(?:\.\d{1,30})?(?:[eE][-+]?\d{1,3})?)(?!\.\d)(\D.*)$", re.ASCII
)
# one field of a table line: a number or N/A
FIELD_RE = re.compile(r"^(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|N/A)$")
_NUMERIC_COLS = (
    "root",
    "time",
    "algbw",
    "busbw",
    "wrong",
    "error",
    "i_min",
    "i_max",
    "i_p99",
    "i_cv",
)


def redop_blank(cols: list[tuple[str, int]], line: str) -> bool:
    """The line leaves the redop column of ``cols`` empty: the token where the redop
    would stand is no word (a number: the root or the time after it)."""
    try:
        at = cols.index(("redop", -1))
    except ValueError:
        return False
    toks = line.split(None, at + 1)
    return len(toks) > at and _word(toks[at]) is _MISSING


def take_whole(cols: list[tuple[str, int]], line: str) -> list[Value] | None:
    """The values of a line that is exactly one table line (the common case, read
    without the positions that :func:`take` needs); None when it is not."""
    fast = _whole_reader(cols)
    found = fast[0].fullmatch(line)
    if found is not None:  # every token of its column: one match for the whole line
        matched = found.groups()
        if len(max(matched, key=len)) <= _LONGEST:
            return [
                (c, g, read(tok), tok)
                for (c, g), read, tok in zip(cols, fast[1], matched, strict=True)
            ]
    # What the pattern leaves to the readers (other blanks, or no table line at all).
    toks = line.split()
    if len(toks) != len(cols):
        return None
    out: list[Value] = []
    reader = _READ.get  # _accept without its call per token
    for (col, g), tok in zip(cols, toks, strict=True):
        value = reader(col, _float)(tok)
        if value is _MISSING:
            return None
        out.append((col, g, value, tok))
    return out


# A line's tokens as each column's reader accepts them (the same sets or fewer: a line
# the pattern refuses is read token by token), in one regular expression per layout.
# Its repeats are unbounded (bounded ones make the match twice as slow): a line matched
# counts only where no token is longer than _LONGEST, within every reader's bounds.
_FLOAT_TOKEN = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d{1,4})?|[-+]?(?i:inf|nan)"
_WORD_TOKEN = r"(?!(?i:inf|nan)\b)[A-Za-z_]\w*"
_LONGEST = 30
_TOKEN = {
    "size": r"\d+",
    "count": r"\d+",
    "root": r"[-+]?\d+",
    "type": _WORD_TOKEN,
    "redop": _WORD_TOKEN,
    "wrong": r"N/A|\d+",
    "error": "N/A|" + _FLOAT_TOKEN,
    "date": r"\d{4}-\d\d-\d\d",
    "clock": r"\d\d:\d\d:\d\d",
}


def _na_float(tok: str) -> float | None:
    return None if tok == "N/A" else float(tok)


# The value of a token the pattern took, by column (str: the token itself).
_CONVERT: dict[str, Any] = {
    "size": int,
    "count": int,
    "root": int,
    "type": str,
    "redop": str,
    "wrong": _na_float,
    "error": _na_float,
    "date": str,
    "clock": str,
}
# layout id -> (the layout, its pattern, its converters): made once per table header
_WHOLE: dict[int, tuple[list[tuple[str, int]], re.Pattern[str], tuple[Any, ...]]] = {}


def _whole_reader(cols: list[tuple[str, int]]) -> tuple[re.Pattern[str], tuple[Any, ...]]:
    """The pattern of a whole table line of this layout and its columns' converters."""
    known = _WHOLE.get(id(cols))
    if known is None or known[0] is not cols:
        if len(_WHOLE) >= 64:  # layouts of a long run of logs: keep a few
            _WHOLE.clear()
        tokens = r"\s+".join(f"({_TOKEN.get(c, _FLOAT_TOKEN)})" for c, _ in cols)
        pattern = re.compile(rf"\s*{tokens}\s*", re.ASCII)
        known = (cols, pattern, tuple(_CONVERT.get(c, float) for c, _ in cols))
        _WHOLE[id(cols)] = known
    return known[1], known[2]


def whole_line(cols: list[tuple[str, int]], columns: Columns, line: str) -> TableLine | None:
    """The table line (its results, ``line`` 0, ``complete``) of a line that the pattern of
    :func:`take_whole` reads whole, built from the tokens it captured by a plan made once
    per layout: the values :func:`table_start` and :func:`measurements` would give for
    take_whole's values, without a (column, placement, value, token) tuple per value or
    the dicts they gather them in. None where the pattern refuses the line (take_whole's
    token reader is left to the caller)."""
    pattern, convert, plan = _line_plan(cols, columns)
    found = pattern.fullmatch(line)
    if found is None:
        return None
    toks = found.groups()
    if len(max(toks, key=len)) > _LONGEST:
        return None
    vals = [read(tok) for read, tok in zip(convert, toks, strict=True)]
    vals.append(None)  # what a column the layout lacks reads as (index -1)
    size, count, dtype, redop, root, date, clock = plan.pre(vals)
    tl = TableLine(0, int(size), count, dtype, redop, root)
    if date is not None and clock is not None:
        tl.timestamp = f"{date} {clock}"
    cputime = columns.cputime
    for in_place, numbers, names, printed in plan.groups:
        t, a, b, lo, hi, p99, cv, w, e = numbers(vals)
        # absent, N/A, inf or nan: None (v - v is 0.0 for a finite float only)
        tl.results.append(
            Measurement(
                in_place,
                None if t is None or t - t != 0.0 else t,
                None if a is None or a - a != 0.0 else a,
                None if b is None or b - b != 0.0 else b,
                None if w is None or not math.isfinite(w) else int(w),
                None if e is None else float(e),
                cputime,
                None if lo is None or lo - lo != 0.0 else lo,
                None if hi is None or hi - hi != 0.0 else hi,
                None if p99 is None or p99 - p99 != 0.0 else p99,
                None if cv is None or cv - cv != 0.0 else cv,
                None,
                dict(zip(names, printed(toks), strict=True)),
            )
        )
    return tl


class _Plan:
    """Where a layout's values stand in a whole line's values (-1: the layout lacks it)."""

    def __init__(self, cols: list[tuple[str, int]], columns: Columns) -> None:
        at = {col: k for k, col in enumerate(cols)}
        pre = ("size", "count", "type", "redop", "root", "date", "clock")
        self.pre = itemgetter(*(at.get((c, -1), -1) for c in pre))
        self.groups: list[tuple[bool, Any, tuple[str, ...], Any]] = []
        for g in range(len(columns.groups)):
            mine = [(k, c) for k, (c, gg) in enumerate(cols) if gg == g]
            names = tuple(c for _, c in mine)
            numbers = itemgetter(*(at.get((c, g), -1) for c in (*_FLOATS, "wrong", "error")))
            printed = _getter([k for k, _ in mine])
            self.groups.append((g == 1, numbers, names, printed))


def _getter(indexes: list[int]) -> Any:
    """The items at ``indexes`` as a tuple (itemgetter's for one is the item itself)."""
    if len(indexes) == 1:
        return lambda items: (items[indexes[0]],)
    return itemgetter(*indexes)


# layout id -> (the layout, its Columns, its pattern, converters and plan)
_PLANS: dict[int, tuple[list[tuple[str, int]], Columns, tuple[re.Pattern[str], Any, _Plan]]] = {}


def _line_plan(
    cols: list[tuple[str, int]], columns: Columns
) -> tuple[re.Pattern[str], tuple[Any, ...], _Plan]:
    known = _PLANS.get(id(cols))
    if known is None or known[0] is not cols or known[1] is not columns:
        if len(_PLANS) >= 64:  # layouts of a long run of logs: keep a few
            _PLANS.clear()
        pattern, convert = _whole_reader(cols)
        known = (cols, columns, (pattern, convert, _Plan(cols, columns)))
        _PLANS[id(cols)] = known
    return known[2]


def take(
    cols: list[tuple[str, int]], toks: list[tuple[str, int, int]], line: str
) -> tuple[list[Value], str]:
    """The values of the leading tokens that fit the columns, and the text after them.

    A number with other output glued to it (nccl-tests prints a failure right after the
    last field it wrote: ``-1vm: Test NCCL failure``) counts as the number."""
    out: list[Value] = []
    tail_from = 0
    for (col, g), (tok, start, end) in zip(cols, toks, strict=False):
        value = _accept(col, tok)
        if value is _MISSING:
            m = _GLUED_RE.match(tok) if col in _NUMERIC_COLS else None
            if m is not None:
                value = _accept(col, m.group(1))
                if value is not _MISSING:
                    out.append((col, g, value, m.group(1)))
                    return out, line[start + len(m.group(1)) :]
            return out, line[start:]
        out.append((col, g, value, tok))
        tail_from = end
    return out, line[tail_from:] if out else line


# The float columns of a placement, in Measurement's order after busbw's wrong, error.
_FLOATS = ("time", "algbw", "busbw", "i_min", "i_max", "i_p99", "i_cv")


def measurements(values: list[Value], cols: Columns) -> list[Measurement]:
    out: list[Measurement] = []
    got: list[dict[str, Any]] = [{} for _ in cols.groups]  # per placement: column -> value
    text: list[dict[str, str]] = [{} for _ in cols.groups]  # column -> printed token
    for c, gg, v, tok in values:
        if gg >= 0:
            got[gg][c] = v
            text[gg][c] = tok
    for g, names in enumerate(cols.groups):
        vals = got[g]
        if len(vals) < len(names):
            break
        w = vals.get("wrong")
        e = vals.get("error")
        # absent, N/A, inf or nan: None (v - v is 0.0 for a finite float only)
        t, a, b, lo, hi, p99, cv = [
            None if v is None or v - v != 0.0 else v for v in map(vals.get, _FLOATS)
        ]
        out.append(
            Measurement(
                g == 1,
                t,
                a,
                b,
                None if w is None or not math.isfinite(w) else int(w),
                None if e is None else float(e),
                cols.cputime,
                lo,
                hi,
                p99,
                cv,
                None,
                text[g],
            )
        )
    return out
