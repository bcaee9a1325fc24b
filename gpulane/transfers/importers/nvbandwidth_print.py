"""The printout of `gpulane parse nvbandwidth`: each testcase as nvbandwidth prints it
(kept apart from the reader, :mod:`gpulane.transfers.importers.nvbandwidth`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpulane.record import Row
from gpulane.transfers.importers.common import say, say_error


def _cell(row: Row) -> str:
    extra = row.extra or {}
    value = extra.get("printed_latency", row.algbw_gbps)
    return "N/A" if value is None else f"{value:.2f}"


def _print_matrix(console: Any, rows: list[Row]) -> None:
    extra = rows[0].extra or {}
    say(console, str(extra.get("title")))
    cells = {(r.extra["row"], r.extra["col"]): _cell(r) for r in rows}
    cols = sorted({c for _, c in cells})
    row_ids = sorted({r for r, _ in cells})
    if "GPU(row)" in str(extra.get("title")):  # square: the diagonal prints N/A
        cols = row_ids = sorted(set(cols) | set(row_ids))
    say(console, "  " + "".join(f"{c:>10}" for c in cols))
    for r in row_ids:
        say(console, f"{r:>2}" + "".join(f"{cells.get((r, c), 'N/A'):>10}" for c in cols))
    say(console, "")
    total = extra.get("sum_gbps", extra.get("sum"))
    if total is not None:
        say(console, f"SUM {extra.get('sum_key')} {total:.2f}")


def render(rows: Iterable[Row], console: Any) -> None:
    """Each testcase as nvbandwidth prints it: ``Running <testcase>.``, the matrix title,
    the matrix and its SUM line; error rows in red."""
    source = test = None
    group: list[Row] = []
    for row in rows:
        extra = row.extra or {}
        if group and (row.source, extra.get("test"), extra.get("title")) != (
            group[0].source, (group[0].extra or {}).get("test"), (group[0].extra or {}).get("title"),
        ):  # fmt: skip
            _print_matrix(console, group)
            group = []
        if row.source != source:
            source, test = row.source, None
            say(console, f"{source}", style="bold")
        if extra.get("test") != test and extra.get("test"):
            test = extra.get("test")
            say(console, f"Running {test}.")
        if row.status == "error" and "row" not in extra:
            if group:
                _print_matrix(console, group)
                group = []
            say_error(console, row)
            continue
        group.append(row)
    if group:
        _print_matrix(console, group)
