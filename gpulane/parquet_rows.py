"""rows.parquet: the tabular copy of a run's rows, built a batch of rows at a time as rows
are imported or at the end of a run (from rows.jsonl), and read back as a DataFrame with
the run's facts joined again (see DESIGN.md, "Result record")."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from gpulane.record import (
    _ENCODE,
    _ENCODE_SORTED,
    _EXTRA,
    _FIELD_VALUES,
    _JSON_COLUMNS,
    FIELDS,
    ROWS_JSONL,
    ROWS_PARQUET,
    Row,
    _row_dicts,
)
from gpulane.runfacts import FACTS_JSONL, FACTS_KEY, SharedText, join_frame

# Rows held before they go to the Parquet file as a batch.
PARQUET_BATCH = 10_000


class ParquetRows:
    """Builds rows.parquet a batch of rows at a time, so memory does not grow with the
    rows. Every Row field is a column, then other keys as they appear; dict columns are
    JSON text with sorted keys (they vary in keys from row to row; text keeps them
    queryable and stable). Batches go straight to the file while they have the types of
    the first; from a batch that needs others (a column all null so far, numbers now) on,
    each batch is a part file, and :meth:`close` joins the parts under the types that
    hold all of them. A dict shared from row to row (a run's env, its facts in ``extra``)
    is encoded once (see :class:`SharedText`): do not change one between rows."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.out = Path(run_dir) / ROWS_PARQUET
        self._tmp = self.out.with_suffix(".parquet.tmp")
        self._parts = tempfile.TemporaryDirectory(prefix=".parquet-", dir=run_dir)
        self._writer: Any = None  # straight to the file, while the types hold
        self._schemas: list[Any] = []  # of the part files, once there are parts
        self._names: list[str] = list(FIELDS)
        self._batch: list[list[Any]] = []
        self._lines: list[tuple[list[Any], dict[str, Any]]] = []  # see add_line
        self._encoders = {FIELDS.index(name): SharedText(_ENCODE_SORTED) for name in _JSON_COLUMNS}
        self._last: dict[int, tuple[Any, str]] = {}  # column -> (dict, its text)

    def add_line(self, base: list[Any], line: dict[str, Any]) -> None:
        """A row as its line beside its run's facts (:meth:`RunFacts.line`) and the first row
        of those facts (``base``, in FIELDS order): its ``extra`` keeps only the row's own
        keys, and the column ``@facts`` names the facts (joined again by read_parquet).
        The columns are made a batch at a time from the lines (most fields are the
        base's)."""
        lines = self._lines
        if not lines:  # a batch's first line (not a look through the names every line)
            if self._batch:
                raise ValueError("ParquetRows: rows and lines of rows are not mixed")
            if FACTS_KEY not in self._names:
                self._names.append(FACTS_KEY)
        lines.append((base, line))
        if len(lines) >= PARQUET_BATCH:
            self._flush()

    def _line_columns(self, pa: Any) -> list[Any]:
        """The columns of the lines gathered (see add_line), as arrow arrays. A field no
        line of the batch holds, under one base, is the base's value repeated."""
        lines, self._lines = self._lines, []
        present: set[str] = set()
        # The lines as runs of one base: [base, how many lines]. A field no line holds is
        # its bases' values repeated, made without a look at each line.
        segments: list[list[Any]] = []
        for base, line in lines:
            present.update(line)
            if segments and segments[-1][0] is base:
                segments[-1][1] += 1
            else:
                segments.append([base, 1])
        one_base = len(segments) == 1
        texts: dict[int, str] = {}  # id of a dict (held by a base) -> its JSON text

        def text(v: Any) -> str:
            if type(v) is not dict:
                return _ENCODE_SORTED(v)
            found = texts.get(id(v))
            if found is None:
                found = texts[id(v)] = _ENCODE_SORTED(v)
            return found

        # Per line, its dict and its base: the columns below are read from them by map
        # (a batch holds 10,000 lines, and a column is read from every one of them).
        dicts = [line for _, line in lines]
        bases = [base for base, _ in lines]
        columns = []
        for i, name in enumerate(FIELDS):
            if i == _EXTRA:
                column = _own_extra_texts(dicts)
            elif one_base and name not in present:
                value = lines[0][0][i]
                columns.append(
                    _repeated(pa, text(value) if name in _JSON_COLUMNS else value, len(lines))
                )
                continue
            elif name not in present:
                column = []
                for base, n in segments:
                    value = base[i]
                    column += [text(value) if name in _JSON_COLUMNS else value] * n
            else:
                # the line's value, else its base's
                defaults = repeat(lines[0][0][i]) if one_base else map(itemgetter(i), bases)
                column = list(map(dict.get, dicts, repeat(name), defaults))
                if name in _JSON_COLUMNS:
                    column = [text(v) for v in column]
            columns.append(_array(pa, column))
        columns.append(_array(pa, list(map(itemgetter(FACTS_KEY), dicts))))
        return columns

    def add(self, row: Row | dict[str, Any]) -> None:
        if self._lines:
            raise ValueError("ParquetRows: rows and lines of rows are not mixed")
        if isinstance(row, Row):
            values = list(_FIELD_VALUES(row))
        else:
            for key in row.keys() - set(self._names):
                self._names.append(key)
            values = [row.get(name) for name in self._names]
        self._add_values(values)

    def _add_values(self, values: list[Any]) -> None:
        for k, encode in self._encoders.items():
            value = values[k]
            last = self._last.get(k)
            if last is not None and last[0] is value:
                values[k] = last[1]
            elif type(value) is dict:
                values[k] = encode(value)
                self._last[k] = (value, values[k])
            else:
                values[k] = _ENCODE_SORTED(value)
        self._batch.append(values)
        if len(self._batch) >= PARQUET_BATCH:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._lines:
            columns = self._line_columns(pa)
        elif self._batch:
            width = len(self._names)
            for values in self._batch:  # rows from before a new key appeared
                values.extend([None] * (width - len(values)))
            columns = [_array(pa, column) for column in zip(*self._batch, strict=True)]
            self._batch = []
        else:
            return
        table = pa.table(columns, names=self._names)
        if not self._schemas:
            if self._writer is None:
                self._writer = pq.ParquetWriter(
                    self._tmp, table.schema, write_statistics=self._statistics()
                )
            table = _conformed(pa, table, self._writer.schema)
            if table.schema.equals(self._writer.schema):
                self._writer.write_table(table)
                return
            # Other types than the first batch's: what was written becomes part 0.
            self._schemas.append(self._writer.schema)
            self._writer.close()
            self._writer = None
            os.replace(self._tmp, self._part(0))
        pq.write_table(table, self._part(len(self._schemas)))
        self._schemas.append(table.schema)

    def _statistics(self) -> list[str]:
        """Columns with min/max per row group: not the JSON text ones, whose min and max
        would be whole rows' text kept in the file's footer (in memory until the end)."""
        return [name for name in self._names if name not in _JSON_COLUMNS]

    def _join_parts(self, pa: Any, pq: Any) -> None:
        """The part files as one file under the types that hold all of them, a row group
        at a time: part 0 may hold nearly every row (a log whose last rows bring a type,
        such as an error row's text, the first batch did not have), and read whole it
        would hold them all in memory."""
        schema = _unified(pa, self._schemas)
        statistics = self._statistics()
        with pq.ParquetWriter(self._tmp, schema, write_statistics=statistics) as writer:
            for k in range(len(self._schemas)):
                part = pq.ParquetFile(self._part(k))
                for group in range(part.num_row_groups):
                    table = part.read_row_group(group)
                    columns = [
                        table[f.name].cast(f.type)
                        if f.name in table.column_names
                        else pa.nulls(len(table), f.type)
                        for f in schema
                    ]
                    writer.write_table(pa.table(columns, schema=schema))
                part.close()
                self._part(k).unlink()  # its rows are in the file now: free the disk

    def _part(self, k: int) -> Path:
        return Path(self._parts.name) / f"{k}.parquet"

    def discard(self) -> None:
        """Drop what was gathered; no rows.parquet."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._tmp.unlink(missing_ok=True)
        self._parts.cleanup()

    def close(self) -> Path | None:
        """Write rows.parquet (atomically); None when there were no rows."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            self._flush()
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            elif not self._schemas:
                return None
            else:
                self._join_parts(pa, pq)
            os.replace(self._tmp, self.out)
            return self.out
        finally:
            self._parts.cleanup()


def _own_extra_texts(lines: list[dict[str, Any]]) -> list[str]:
    """Each line's own ``extra`` as ``_ENCODE_SORTED`` writes it. Most lines of an
    imported log hold only the number of the log's line they came from (``{"line": 13}``):
    that text is made without the encoder (an int prints as its repr there too)."""
    out = []
    for line in lines:
        own = line.get("extra")
        if not own:
            out.append("{}")
        elif len(own) == 1 and type(own.get("line")) is int:
            out.append(f'{{"line": {own["line"]!r}}}')
        else:
            out.append(_ENCODE_SORTED(own))
    return out


def _array(pa: Any, column: Iterable[Any]) -> Any:
    """A column as arrow reads it; a column of mixed kinds (a key that holds numbers in
    some rows and words in others) as text, which keeps every value."""
    values = list(column)
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(
            [None if v is None else v if isinstance(v, str) else _ENCODE(v) for v in values],
            type=pa.string(),
        )


def _repeated(pa: Any, value: Any, n: int) -> Any:
    """``value`` ``n`` times, as :func:`_array` makes a column of it."""
    if value is None:
        return pa.nulls(n)
    try:
        return pa.repeat(value, n)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return _array(pa, [value] * n)


def _conformed(pa: Any, table: Any, schema: Any) -> Any:
    """``table`` under ``schema`` where that keeps every value: a column all null in
    this batch, or whole numbers where the file holds floats, takes the file's type, so
    that such a batch still goes straight to the file. Otherwise ``table`` as it is."""
    if table.schema.equals(schema) or table.schema.names != schema.names:
        return table
    columns = []
    for column, have, want in zip(table.columns, table.schema, schema, strict=True):
        if have.type == want.type:
            columns.append(column)
        elif pa.types.is_null(have.type):
            columns.append(pa.nulls(len(table), want.type))
        elif pa.types.is_integer(have.type) and pa.types.is_floating(want.type):
            try:  # a safe cast: refused where a float would not hold the number
                columns.append(column.cast(want.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                return table
        else:
            return table
    return pa.table(columns, schema=schema)


def _unified(pa: Any, schemas: list[Any]) -> Any:
    """One schema for the part files: arrow's own promotion (null -> int -> float), and
    text for a column whose parts disagree otherwise (int in one, text in another)."""
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        fields: dict[str, Any] = {}
        for schema in schemas:
            for f in schema:
                have = fields.get(f.name)
                if have is None or pa.types.is_null(have):
                    fields[f.name] = f.type
                elif not pa.types.is_null(f.type) and have != f.type:
                    both_numeric = all(
                        pa.types.is_integer(t) or pa.types.is_floating(t) for t in (have, f.type)
                    )
                    fields[f.name] = pa.float64() if both_numeric else pa.string()
        return pa.schema(list(fields.items()))


def write_parquet(run_dir: str | os.PathLike[str]) -> Path | None:
    """Write rows.parquet beside rows.jsonl (atomically, a batch of rows at a time); None
    when there are no rows."""
    src = Path(run_dir) / ROWS_JSONL
    if not src.exists():
        return None
    sink = ParquetRows(run_dir)
    for row in _row_dicts(src):
        sink.add(row)
    return sink.close()


def read_parquet(path: str | os.PathLike[str]) -> Any:
    """A DataFrame from rows.parquet with the dict columns decoded again."""
    import pandas as pd

    frame = pd.read_parquet(path)
    for name in _JSON_COLUMNS:
        if name in frame.columns:
            frame[name] = frame[name].map(lambda v: json.loads(v) if isinstance(v, str) else v)
    if FACTS_KEY in frame.columns:  # the run's shared facts, joined into extra again
        frame = join_frame(frame, Path(path).parent / FACTS_JSONL)
    return frame
