"""``gpulane parse nccl-tests``: nccl-tests logs (text, or ``-J`` JSON) as gpulane rows.

The importer contract every ``gpulane parse`` format keeps: :data:`WHAT` (one line of
help), :data:`OPTIONS` (this format's own options), :func:`stream_rows` (rows as they are
read; an error row naming file:line at a cut or failure) and :func:`render` (the rows
printed as the tool prints them). :func:`main` is the command until the common front
takes it over.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from rich.console import Console

from gpulane.collectives.nccl_tests.logs import iter_rows_of_file
from gpulane.collectives.nccl_tests.render import render as _render
from gpulane.collectives.spec import collective
from gpulane.errors import InputError
from gpulane.record import ROWS_JSONL, ROWS_PARQUET, ParquetRows, Row, RowWriter

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


def check_out_dir(out: str) -> Path:
    """The --out directory, made; InputError when it holds rows already or cannot be
    written (checked before any file is read)."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {out}: not a directory")
    for name in (ROWS_JSONL, ROWS_PARQUET):
        if (path / name).exists():
            raise InputError(f"--out {out}: already holds {name}; give a new or empty directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        raise InputError(f"--out {out}: cannot write there: {err.strerror or err}") from None
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gpulane parse nccl-tests",
        description="nccl-tests logs (text, or -J JSON) as gpulane result rows.",
        epilog=EXIT_HELP,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="captured nccl-tests output")
    parser.add_argument("--json", action="store_true", help="print rows as JSON Lines")
    parser.add_argument("--out", metavar="DIR", help="write rows.jsonl and rows.parquet into DIR")
    parser.add_argument("--op", help=OPTIONS["op"])
    parser.add_argument("--build", help="build label of the rows (default: rank 0's host)")
    parser.add_argument("--run-id", help="run id of the rows (default: from the file name)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as ex:
        return int(ex.code) if isinstance(ex.code, int) else 2
    out = check_out_dir(args.out) if args.out else None
    streams = [
        (name, stream_rows(name, run_id=args.run_id, build=args.build, op=args.op))
        for name in args.files
    ]
    # Not a terminal (a pipe, a file): wide enough for both placements' columns.
    console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
    writer = RowWriter(out, sync=False) if out is not None else None
    parquet = ParquetRows(out) if out is not None else None
    total = errors = 0
    failed: list[str] = []
    try:
        for name, rows in streams:
            counts = [0, 0, 0]  # rows, error rows, measured rows

            def counted(rows: Iterator[Row] = rows, counts: list[int] = counts) -> Iterator[Row]:
                for row in rows:
                    counts[0] += 1
                    counts[1] += row.status != "ok"
                    counts[2] += row.time_us is not None
                    if writer is not None and parquet is not None:
                        writer.write(row)
                        parquet.add(row)
                    yield row

            if args.json:
                for row in counted():
                    sys.stdout.write(json.dumps(row.to_dict(), default=str) + "\n")
            else:
                render(counted(), console)
            total, errors = total + counts[0], errors + counts[1]
            if not counts[2]:
                failed.append(name)
    except BaseException:
        if parquet is not None:
            parquet.discard()
        raise
    finally:
        if writer is not None:
            writer.close()
    if out is not None and parquet is not None:
        parquet.close()
        sys.stderr.write(f"# {total} rows written to {out / ROWS_JSONL} and {ROWS_PARQUET}\n")
    if errors:
        sys.stderr.write(f"# {errors} of {total} rows are errors (status error)\n")
    for name in failed:
        sys.stderr.write(f"# {name}: nothing measured, every run in it failed\n")
    sys.stdout.flush()
    return 1 if failed else 0
