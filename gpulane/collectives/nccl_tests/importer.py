"""``gpulane parse nccl-tests``: nccl-tests logs (text, or ``-J`` JSON) as gpulane rows.

The importer contract every ``gpulane parse`` format keeps: :data:`WHAT` (one line of
help), :data:`OPTIONS` (this format's own options), :func:`stream_rows` (rows as they are
read; an error row naming file:line at a cut or failure) and :func:`render` (the rows
printed as the tool prints them). :func:`main` is the command until the common front
takes it over.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rich.console import Console

from gpulane.collectives.nccl_tests.logs import iter_rows_of_file
from gpulane.collectives.nccl_tests.render import render as _render
from gpulane.collectives.spec import collective
from gpulane.errors import InputError
from gpulane.record import Row

WHAT = "nccl-tests text or -J JSON"
OPTIONS: dict[str, str] = {"op": "collective, where the log does not name it"}

EXIT_HELP = (
    "exit status: 0 when every FILE measured something; 1 when every run in a FILE failed "
    "(nothing measured: its error rows say why); 2 for bad input (not nccl-tests output, "
    "an unreadable FILE, an --out DIR that already holds rows)"
)


def stream_rows(
    path: str, *, run_id: str | None = None, build: str | None = None, **options: str | None
) -> Iterator[Row]:
    """Rows of one nccl-tests log as it is read: one per size and placement, then an error
    row per failure or cut (naming file:line). ParseError when the file is not nccl-tests
    output; InputError for an unknown option or collective, before anything is read."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InputError(f"parse nccl-tests: unknown option {unknown[0]!r}; options: op")
    op = options.get("op")
    if op:
        try:
            collective(op)
        except InputError as err:
            raise InputError(f"--op: {err}") from err
    return iter_rows_of_file(path, op=op or None, run_id=run_id, build=build)


def render(rows: Iterable[Row], console: Console) -> None:
    """Print rows as nccl-tests prints its table, run by run, reading them once."""
    _render(rows, console)
