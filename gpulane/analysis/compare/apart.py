"""Why figures of two sides did not meet, in words: the figure key (world size, dtype,
model, ...) whose values the sides do not share. Used when a comparison comes out empty
(the command's error names the key) and for the notes of a partial one; and to tell
apart figures that carry the same label in an outer join (``--all``)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from gpulane.analysis.store import FIGURE_KEYS, key_frame

KIND_WORDS = {"collective": "collective", "copy": "copy", "tokens": "token"}


def _ok_rows(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    return frame[(frame["kind"] == kind) & (frame["status"] == "ok")]


def _values(frame: pd.DataFrame, kind: str, key: str) -> set[str]:
    rows = _ok_rows(frame, kind)
    return set(key_frame(rows, kind)[key]) if len(rows) else set()


def _listing(values: set[str], limit: int = 4) -> str:
    vals = sorted(values, key=lambda v: (len(v), v))
    return ", ".join(vals[:limit]) + (f" (+{len(vals) - limit})" if len(vals) > limit else "")


def why_apart(sides: Sequence[tuple[str, pd.DataFrame]], kind: str) -> str | None:
    """Why ``kind``'s figures of the sides (which share none) did not meet: which sides
    have no such rows, or which key's values they do not share. None when no side has
    rows of ``kind``."""
    have = [(label, frame) for label, frame in sides if len(_ok_rows(frame, kind))]
    if not have:
        return None
    word = KIND_WORDS.get(kind, kind)
    if len(have) < len(sides):
        missing = [label for label, frame in sides if not len(_ok_rows(frame, kind))]
        return f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no {word} rows"
    keys = [k for k in FIGURE_KEYS[kind] if k != "size_bytes"] + ["size_bytes"]
    for key in keys:
        values = [(label, _values(frame, kind, key)) for label, frame in have]
        shared = set.intersection(*(v for _, v in values))
        if not shared:
            per_side = "; ".join(f"{label}: {_listing(v)}" for label, v in values)
            return f"{word} figures differ in {key} ({per_side})"
    names = ", ".join(FIGURE_KEYS[kind])
    return f"no {word} figure matches in every key ({names}) on all sides"


def apart_notes(
    sides: Sequence[tuple[str, pd.DataFrame]], kinds: Sequence[str], shared_kinds: set[str]
) -> list[str]:
    """A note per kind (of ``kinds``) that some side measured but the comparison holds no
    figure of."""
    notes = []
    for kind in kinds:
        if kind in shared_kinds:
            continue
        why = why_apart(sides, kind)
        if why:
            notes.append(why)
    return notes


def distinguish(table: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Figures of one metric that carry the same label but differ in a key (an outer join
    of sides measured over different world sizes, say): the differing keys appended to
    the label, ``all_reduce float 8 B (world_size 2)``."""
    keys = [f"k:{c}" for c in FIGURE_KEYS[kind] if f"k:{c}" in table.columns]
    dup = table["figure"].duplicated(keep=False)
    if not dup.any():
        return table
    table = table.copy()
    for _figure, group in table[dup].groupby("figure", sort=False):
        varying = [k for k in keys if group[k].nunique() > 1]
        for i, row in group.iterrows():
            extra = ", ".join(f"{k[2:]} {row[k]}" for k in varying)
            table.at[i, "figure"] = f"{row['figure']} ({extra})"
    return table
