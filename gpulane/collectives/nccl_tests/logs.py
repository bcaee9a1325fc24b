"""nccl-tests logs, text or ``-J`` JSON, from a file (streamed) or from text in memory.

:func:`iter_runs` reads a file a line at a time through :func:`gpulane.textio.iter_text_lines`
(UTF-8 or UTF-16, with or without a byte-order mark) and hands each test over as it ends;
:func:`parse_log` and :func:`rows_from_log` read text already in memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gpulane.collectives.nccl_tests.jsonfile import iter_json_runs
from gpulane.collectives.nccl_tests.model import TestRun
from gpulane.collectives.nccl_tests.rows import iter_rows, rows_from_runs
from gpulane.collectives.nccl_tests.text import iter_text_runs
from gpulane.errors import ParseError
from gpulane.record import Row
from gpulane.textio import iter_text_lines

# A run's table lines held before their rows are made; a longer table is handed over in
# parts, so that memory does not grow with a single endless table.
HAND_OVER_LINES = 4096


def looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] == "{"


def ends_with_newline(path: str | Path) -> bool:
    """Whether a file's last line is terminated (in UTF-8 or UTF-16 of either order)."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(fh.tell() - 2, 0))
        tail = fh.read()
    return tail[-1:] in (b"\n", b"\r") or tail in (b"\n\x00", b"\r\x00")


def runs_of_lines(
    lines: Iterable[tuple[int, str]],
    source: str,
    op: str | None = None,
    hand_over: int | None = None,
    terminated: bool = True,
) -> Iterator[TestRun]:
    """The tests of (line number, line) pairs, text or JSON by the first non-blank line.
    ``terminated`` False: the last line had no line end (see iter_text_runs)."""
    it = iter(lines)
    head: list[tuple[int, str]] = []
    for number, line in it:
        head.append((number, line))
        if line.strip():
            break
    rest = itertools.chain(head, it)
    if head and looks_like_json(head[-1][1]):
        return iter_json_runs(rest, source, op, hand_over)
    return iter_text_runs(rest, source, op, hand_over, terminated)


def iter_runs(
    path: str | Path, op: str | None = None, hand_over: int | None = HAND_OVER_LINES
) -> Iterator[TestRun]:
    """The tests of a log file, read a line at a time (see runs_of_lines)."""
    try:
        terminated = ends_with_newline(path)
    except OSError as err:
        raise ParseError(f"cannot read: {err.strerror or err}", str(path)) from None
    yield from runs_of_lines(iter_text_lines(path), str(path), op, hand_over, terminated)


def iter_rows_of_file(path: str | Path, *, op: str | None = None, **kwargs: Any) -> Iterator[Row]:
    """Rows of a log file as they are read; ParseError when it is not nccl-tests output."""
    return iter_rows(iter_runs(path, op), source=str(path), **kwargs)


def parse_log(text: str, source: str = "<text>", op: str | None = None) -> list[TestRun]:
    """Every test in a log (text or JSON). ``op`` names the collective where the log does not
    (no '# Collective test starting' line, no command line, no JSON args)."""
    if not isinstance(text, str):
        raise ParseError("not text", source)
    lines = enumerate(text.splitlines(), start=1)
    return list(runs_of_lines(lines, source, op, terminated=text.endswith(("\n", "\r"))))


def rows_from_log(
    text: str,
    source: str = "<text>",
    *,
    op: str | None = None,
    run_id: str | None = None,
    build: str | None = None,
    **kwargs: Any,
) -> list[Row]:
    """Rows of an nccl-tests log (text or JSON); ParseError when it is not one."""
    return rows_from_runs(
        parse_log(text, source, op), run_id=run_id, build=build, source=source, **kwargs
    )


def rows_from_file(path: str | Path, **kwargs: Any) -> list[Row]:
    """Rows of an nccl-tests log file (read a line at a time)."""
    return list(iter_rows_of_file(path, **kwargs))
