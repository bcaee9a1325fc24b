"""Importing other tools' printouts as gpulane result rows (`gpulane parse`).

One front for every format::

    gpulane parse FORMAT FILE... [--json] [--out DIR] [--build B] [--run-id R] [format options]

The importer contract. Each format names a module (``FORMATS``) that provides:

- ``WHAT: str``, one line of help;
- ``OPTIONS: dict[str, str]``, the format's own ``--name`` options and their help; their
  values reach ``stream_rows`` as keyword arguments (dashes as underscores), a string or
  None when not given;
- ``stream_rows(path, *, run_id, build, **options) -> Iterator[Row]``: the rows of one
  file as they are read. A file cut short gives an error row at the cut (status
  ``error``, the error naming the file, the line and what is missing), never a number
  that is not in the file; a file that is unreadable or not of the format raises
  :class:`~gpulane.errors.ParseError`. ``build`` None means the importer's own default;
  ``run_id`` is the run id every row of this parse gets.
- ``render(rows, console)``: prints the rows as the tool prints them (a rich Console),
  consuming the iterator as it goes.

The front: ``--out DIR`` makes DIR the run directory (``rows.jsonl`` appended as rows
stream, ``rows.parquet`` at the end), refused before any file is read when DIR already
holds rows.jsonl or cannot be written; ``--json`` prints JSON Lines (strict JSON: no
Infinity or NaN). Exit status 0 when at least one row measured something, 1 when the
files gave only error rows (one line says so), 2 for unreadable or wrong-kind files.

An entry of the form ``module:function`` is an importer that has its own command line
(``function(argv) -> int``) and is handed the arguments unchanged.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from gpulane.errors import InputError, RunFailed
from gpulane.parquet_rows import ParquetRows
from gpulane.record import FIELDS, ROWS_JSONL, Row, RowWriter, new_run_id, row_values, run_facts
from gpulane.rundir import RunDir
from gpulane.runfacts import RunFacts

# format -> importer module (the contract above), or "module:main" with its own argv
FORMATS: dict[str, str] = {
    "nccl-tests": "gpulane.collectives.nccl_tests.importer",
    "bandwidthtest": "gpulane.transfers.importers.bandwidthtest",
    "p2p": "gpulane.transfers.importers.p2p",
    "nvbandwidth": "gpulane.transfers.importers.nvbandwidth",
    "vllm": "gpulane.inference.vllm_import",
    "sglang": "gpulane.inference.engines.sglang_import",
}
# one-line help of entries with their own command line
_OWN_HELP: dict[str, str] = {}


def importer(name: str) -> ModuleType:
    return importlib.import_module(FORMATS[name])


def usage() -> str:
    lines = [
        "usage: gpulane parse FORMAT FILE... [--json] [--out DIR] [--build B] [--run-id R] "
        "[format options]",
        "",
        "formats:",
    ]
    for name, target in FORMATS.items():
        if ":" in target:
            lines.append(f"  {name:<14} {_OWN_HELP.get(name, '')}")
            continue
        module = importer(name)
        lines.append(f"  {name:<14} {module.WHAT}")
        for option, text in module.OPTIONS.items():
            lines.append(f"  {'':<14}   --{option} X: {text}")
    lines += [
        "",
        "--out DIR: DIR becomes the run directory (rows.jsonl, rows.parquet); it must not",
        "hold rows.jsonl yet. --json: rows as JSON Lines. Exit 0 when a row measured",
        "something in every file, 1 when a file gave only error rows (every run in it",
        "failed), 2 for unreadable files.",
    ]
    return "\n".join(lines)


# A row's line and its first row of facts; the line to rows.jsonl; both to rows.parquet.
_Sinks = tuple[
    Callable[[list[Any]], tuple[list[Any], dict[str, Any]]],
    Callable[[dict[str, Any]], None],
    Callable[[list[Any], dict[str, Any]], None],
]


class RunOut:
    """``--out DIR``: checked before anything is read; rows appended as they come."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise InputError(f"--out {path}: not a directory")
        if RunDir.at(self.path).rows_path.exists():
            raise InputError(
                f"--out {path}: already holds {ROWS_JSONL}; give a new directory (rows of "
                "different parses are not mixed)"
            )
        self.created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / ".gpulane-write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as err:
            raise InputError(f"--out {path}: cannot write there: {err.strerror or err}") from None
        self.writer: RowWriter | None = None
        self.parquet: ParquetRows | None = None
        self.facts: RunFacts | None = None
        self._sinks: _Sinks | None = None
        self.count = 0

    def write(self, row: Row) -> None:
        try:
            sinks = self._sinks or self._open()
            base, line = sinks[0](_values(row))  # once for both files
            sinks[1](line)
            sinks[2](base, line)
        except OSError as err:
            raise InputError(f"--out {self.path}: cannot write: {err.strerror or err}") from None
        self.count += 1

    def _open(self) -> _Sinks:
        # The run's shared facts go to facts.jsonl once, the rows hold their own.
        self.facts = run_facts(self.path)
        self.writer = RowWriter(self.path, sync=False, facts=self.facts)
        self.parquet = ParquetRows(self.path)  # built as rows pass: one batch in memory
        # bound once: called for every row of a long log
        self._sinks = (self.facts.line, self.writer.write_line, self.parquet.add_line)
        return self._sinks

    def finish(self) -> None:
        """rows.parquet beside rows.jsonl; a directory this parse made and left empty goes."""
        if self.writer is not None:
            try:
                self.writer.close()
            except OSError as err:
                raise InputError(
                    f"--out {self.path}: cannot write: {err.strerror or err}"
                ) from None
        if self.count and self.parquet is not None:
            try:
                self.parquet.close()
            except OSError as err:
                raise InputError(
                    f"--out {self.path}: cannot write rows.parquet: {err.strerror or err}"
                ) from None
        elif self.created:
            with contextlib.suppress(OSError):
                self.path.rmdir()


def _values(row: Row) -> list[Any]:
    """``row_values(row)``; for a row whose attributes are its fields in order (as an
    importer builds them) straight from them, without a look-up per field."""
    attrs = getattr(row, "__dict__", None)
    # the keys in order, compared in C (a field's name is the very string: one pointer each)
    if attrs is not None and tuple(attrs) == FIELDS:
        return list(attrs.values())
    return row_values(row)


def strict_json(row: Row) -> str:
    """A row as one line of strict JSON (importers keep Infinity and NaN out of rows)."""
    return json.dumps(row.to_dict(), default=str, allow_nan=False)


class _Tally:
    def __init__(self) -> None:
        self.rows = self.ok = 0
        self.empty: list[str] = []  # files that measured nothing (every run in them failed)


def _through(
    files: list[str], module: ModuleType, out: RunOut | None, tally: _Tally, **kwargs: Any
) -> Iterator[Row]:
    """Every file's rows in turn, each written to --out as it passes (not copied: a row's
    nested facts are the run's, shared from row to row)."""
    for path in files:
        ok_before = tally.ok
        for row in module.stream_rows(path, **kwargs):
            tally.rows += 1
            tally.ok += row.status == "ok"
            if out is not None:
                out.write(row)
            yield row
        if tally.ok == ok_before:
            tally.empty.append(path)


def _console() -> Any:
    from rich.console import Console

    # Not a terminal (a pipe, a file): wide enough for an 8-GPU matrix.
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)


def _stdout_gone() -> None:
    """The reader of stdout went away (``| head``): stop printing, quietly."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _show(rows: Iterable[Row], module: ModuleType, as_json: bool) -> None:
    if as_json:
        for row in rows:
            sys.stdout.write(strict_json(row) + "\n")
        sys.stdout.flush()
    else:
        module.render(rows, _console())


@dataclass
class ImportRequest:
    """What `gpulane parse` asked for, its arguments read."""

    format: str
    files: list[str]
    as_json: bool = False
    out: str | None = None
    build: str | None = None
    run_id: str | None = None
    options: dict[str, str | None] = field(default_factory=dict)


def import_files(req: ImportRequest) -> int:
    """Every file's rows printed as the tool prints them (or as JSON Lines), written into
    ``req.out`` as they stream; 0 when something was measured, 1 when nothing was."""
    module = importer(req.format)
    name = req.format
    out = RunOut(req.out) if req.out else None
    run_id = req.run_id or new_run_id(req.build or name)
    tally = _Tally()
    rows = _through(req.files, module, out, tally, run_id=run_id, build=req.build, **req.options)
    try:
        try:
            _show(rows, module, req.as_json)
        except BrokenPipeError:
            _stdout_gone()
            for _ in rows:  # --out still gets every row
                pass
    finally:
        if out is not None:
            out.finish()
    if out is not None and tally.rows:
        sys.stderr.write(f"# {tally.rows} rows: {RunDir.at(out.path).rows_path} and rows.parquet\n")
    if tally.rows == 0:
        raise RunFailed(f"parse {name}: the files gave no rows")
    if tally.rows > tally.ok:
        sys.stderr.write(
            f"# {tally.rows - tally.ok} of {tally.rows} rows are errors (status error)\n"
        )
    if tally.empty:
        # A log of a failed run is a result too, but not a measurement: say which file.
        raise RunFailed(
            f"parse {name}: nothing measured in {', '.join(tally.empty)} (every run in it "
            "failed); the other files' rows are kept"
        )
    return 0
