"""What the copy-tool importers share: trusted lines, matrix cells, rows, error rows, and
printing rows back the way the tools print them.

A number is trusted only when the line it sits on is complete: the line ended with its
line break, or its last value is followed by the blank the tool prints after it. Only the
last line of a file can be incomplete; a number on it may be the stub of a longer one
(``4366.8`` cut to ``436``), so it becomes an error row at the cut, never a value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpulane.errors import ParseError
from gpulane.record import Row
from gpulane.textio import iter_text_lines_ended, split_text_lines, strip_ansi

# (line number, text without its line break, whether the line break was there)
Line = tuple[int, str, bool]

MIB_PER_S_IN_GBPS = (1 << 20) / 1e9
_MISSING = {"n/a", "na", "-", "--"}


def file_lines(path: str | os.PathLike[str]) -> Iterator[Line]:
    """A captured file's lines, one at a time, ANSI codes removed (gpulane.textio decodes
    UTF-8 and UTF-16 with or without a byte-order mark)."""
    for number, text, ended in iter_text_lines_ended(path):
        yield number, strip_ansi(text), ended


def text_lines(text: str) -> Iterator[Line]:
    for number, line, ended in split_text_lines(text):
        yield number, strip_ansi(line), ended


def complete(line: Line) -> bool:
    """Whether every number on the line was printed in full (see the module's note)."""
    _, text, ended = line
    return ended or (bool(text) and text[-1] in " \t")


def cell_value(cell: str, source: str, line: int) -> float | None:
    """A printed figure; None for the tools' 'no value' cells (N/A, inf, nan)."""
    text = cell.strip()
    if text.lower() in _MISSING:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"expected a number, got {text!r}", source, line) from None
    if value != value or value in (float("inf"), float("-inf")):
        return None  # printed as inf or nan: the tool had no figure either
    return value


def default_build(source: str) -> str:
    return Path(source).stem or "import"


def copy_row(run_id: str, backend: str, source: str, build: str, **fields: Any) -> Row:
    return Row.copy(run_id=run_id, backend=backend, source=source, build=build, **fields)


def error_row(
    run_id: str,
    backend: str,
    source: str,
    build: str,
    line: int,
    message: str,
    *,
    op: str = "unknown",
    kind: str = "copy",
    event: str = "cut_off",
    **extra: Any,
) -> Row:
    """An error row at ``line``: what went missing there, naming the file and line."""
    row = Row(
        run_id=run_id,
        kind=kind,
        backend=backend,
        op=op,
        source=source,
        status="error",
        error=f"{source}:{line}: {message}",
        build=build,
        extra={"line": line, "event": event, **extra},
    )
    return row


def time_us(size: int | None, gbps: float | None) -> float | None:
    """Microseconds per copy of ``size`` bytes at ``gbps`` (bandwidthTest prints no time)."""
    if not size or not gbps:
        return None
    return size / (gbps * 1e9) * 1e6


def say(console: Any, text: str, style: str | None = None) -> None:
    """One line exactly as given (no markup, no highlighting)."""
    console.print(text, markup=False, highlight=False, style=style, soft_wrap=True)


def say_error(console: Any, row: Row) -> None:
    say(console, f"error: {row.error}", style="red")


def matrix_lines(
    columns: list[int], cells: dict[tuple[int, int], str], rows: list[int], corner: str
) -> list[str]:
    """A matrix as the CUDA samples print it (``%6d `` ids, ``%6.02f `` cells): a header
    of column ids, then one line per row id; a cell with no value prints N/A."""
    out = [(f"{corner:>6}" + "".join(f"{c:>6} " for c in columns)).rstrip()]
    for r in rows:
        line = f"{r:>6} " + "".join(f"{cells.get((r, c), 'N/A'):>6} " for c in columns)
        out.append(line.rstrip())
    return out
