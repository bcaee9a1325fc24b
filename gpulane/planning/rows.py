"""The planner reads result rows as :class:`~gpulane.record.Row`: the fields by name, checked
by mypy, rather than dict keys that a typo turns into None. Callers may still hand it the
dicts of a rows file or a frame (benchmark scripts, older tests); they become rows here,
once, at the planner's door (:func:`as_rows`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from gpulane.record import Row, row_of


def as_row(row: Row | Mapping[str, Any]) -> Row:
    """``row`` as a Row (a dict through :func:`gpulane.record.row_of`: unknown keys, such
    as a frame's ``run_dir``, into ``extra``)."""
    if isinstance(row, Row):
        return row
    return row_of(dict(row))


def as_rows(rows: Iterable[Row | Mapping[str, Any]]) -> list[Row]:
    return [as_row(r) for r in rows]


def extra(row: Row) -> dict[str, Any]:
    """The row's ``extra`` as a dict (a frame may hold NaN or a JSON string there)."""
    value = row.extra
    if isinstance(value, str) and value.startswith("{"):
        import json

        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def num(value: Any) -> float | None:
    """A number of a row's field, None for a missing one (None, NaN, pandas NA, text)."""
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def ok(row: Row) -> bool:
    """The row measured what it says (status ok, or none recorded)."""
    return (row.status or "ok") == "ok"


def row_device(row: Row) -> str:
    """What a token row ran on: the GPU its versions name, else "cpu" (gloo ranks ran on
    the CPUs whatever GPU the host has)."""
    versions = row.versions if isinstance(row.versions, dict) else {}
    gpu = versions.get("gpu") if row.backend != "torch-gloo" else None
    return str(gpu or "cpu")
