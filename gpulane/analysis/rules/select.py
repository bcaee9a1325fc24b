"""Which rows a rule looks at: ``select`` (column: value, list or wildcard; sizes) and
``paths`` (the path label of each row, see :mod:`gpulane.analysis.rules.linerate`)."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from gpulane.analysis.rules.linerate import row_path
from gpulane.analysis.store import records
from gpulane.errors import InputError
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


def select_rows(frame: pd.DataFrame, select: Mapping[str, Any]) -> pd.DataFrame:
    """Rows matching ``select``: column -> value, list or wildcard; ``size``, ``size_min``,
    ``size_max`` as sizes, bounds included (``size: max`` keeps the largest size present)."""
    rows = frame
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
        else:
            raise InputError(f"select: {key!r} is not a row column")
    if size_max_wanted and len(rows):
        rows = rows[rows["size_bytes"] == rows["size_bytes"].max()]
    return rows


def applicable(
    rule: Mapping[str, Any], frame: pd.DataFrame, topology: Topology | None
) -> pd.DataFrame:
    """The rows a rule checks: its ``select``, then its ``paths`` patterns."""
    rows = select_rows(frame, rule.get("select") or {})
    paths = rule.get("paths")
    if paths and len(rows):
        pats = values(paths)
        keep = [matches(row_path(r, topology), pats) for r in records(rows)]
        rows = rows.loc[pd.Series(keep, index=rows.index, dtype=bool)]
    return rows
