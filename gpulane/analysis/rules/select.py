"""Which rows a rule looks at: ``select`` (column: value, list or wildcard; sizes) and
``paths`` (the path label of each row, see :mod:`gpulane.analysis.rules.linerate`).

Beside the row columns, ``select`` may name ``mode`` (a copy's solo, concurrent or
aggregate, see :mod:`gpulane.analysis.rules.measurement`), ``concurrent`` (how many GPUs
copied at once) and ``extra.KEY`` (a key of the row's ``extra``). A rule over copy rows
that does not name ``mode`` looks at solo copies only: the all-GPUs-at-once rows are a
different measurement with a check of their own."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from gpulane.analysis.rules.linerate import row_path
from gpulane.analysis.rules.measurement import SOLO, VIRTUAL_COLUMNS, copy_mode, virtual
from gpulane.errors import InputError
from gpulane.record import Row, frame_rows
from gpulane.topology.model import Topology
from gpulane.units import parse_size


def values(v: Any) -> list[str]:
    """A rule value as a list of patterns: a list as it is, text split at commas."""
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    return [p for p in str(v).split(",")]


def matches(value: Any, patterns: Sequence[str]) -> bool:
    """fnmatch against text; a missing value matches the pattern ``-`` only."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-" in patterns
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return any(fnmatch.fnmatchcase(text, p) for p in patterns)


def select_rows(
    frame: pd.DataFrame, select: Mapping[str, Any], solo_default: bool = False
) -> pd.DataFrame:
    """Rows matching ``select``: column -> value, list or wildcard; ``size``, ``size_min``,
    ``size_max`` as sizes, bounds included (``size: max`` keeps the largest size present).
    ``solo_default``: copy rows other than solo ones only when ``select`` names ``mode``."""
    rows = solo_unless_named(frame, select) if solo_default else frame
    size_max_wanted = False
    for key, want in select.items():
        if want is None:
            continue
        if key == "size":
            if str(want) == "max":
                size_max_wanted = True
                continue
            rows = rows[rows["size_bytes"] == parse_size(want)]
        elif key == "size_min":
            rows = rows[rows["size_bytes"] >= parse_size(want)]
        elif key == "size_max":
            rows = rows[rows["size_bytes"] <= parse_size(want)]
        elif key in rows.columns:
            pats = values(want)
            rows = rows.loc[rows[key].map(lambda v, p=pats: matches(v, p)).astype(bool)]
        elif key in VIRTUAL_COLUMNS or key.startswith("extra."):
            pats = values(want)
            keep = [matches(_property(r, key), pats) for r in frame_rows(rows)]
            rows = rows.loc[pd.Series(keep, index=rows.index, dtype=bool)]
        else:
            raise InputError(f"select: {key!r} is not a row column")
    if size_max_wanted and len(rows):
        rows = rows[rows["size_bytes"] == rows["size_bytes"].max()]
    return rows


def _property(rec: Row, key: str) -> Any:
    if key.startswith("extra."):
        extra = rec.extra
        return extra.get(key[len("extra.") :]) if isinstance(extra, Mapping) else None
    return virtual(rec, key)


def solo_unless_named(rows: pd.DataFrame, select: Mapping[str, Any]) -> pd.DataFrame:
    """Copy rows other than solo ones are dropped unless ``select`` names ``mode``."""
    if "mode" in select or rows.empty or not (rows["kind"] == "copy").any():
        return rows
    keep = [r.kind != "copy" or copy_mode(r) == SOLO for r in frame_rows(rows)]
    return rows.loc[pd.Series(keep, index=rows.index, dtype=bool)]


def applicable(
    rule: Mapping[str, Any], frame: pd.DataFrame, topology: Topology | None
) -> pd.DataFrame:
    """The rows a rule checks: its ``select``, then its ``paths`` patterns."""
    select = rule.get("select") or {}
    rows = select_rows(frame, select, solo_default=True)
    paths = rule.get("paths")
    if paths and len(rows):
        pats = values(paths)
        keep = [matches(row_path(r, topology), pats) for r in frame_rows(rows)]
        rows = rows.loc[pd.Series(keep, index=rows.index, dtype=bool)]
    return rows
