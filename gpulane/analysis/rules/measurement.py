"""What counts as one measurement: rows that may be combined (repeats), and rows that never.

A subject's figure is one kind of measurement. Two rows of the same GPU are repeats only
when they agree on everything that shaped the figure: the figure key of their kind
(``store.FIGURE_KEYS``: op, size, memory kind, world size, in place, tp/pp, ...) and what
the figure key leaves out but a rule must not mix:

- copies: the **mode**: ``solo`` (one GPU copying at a time), ``concurrent`` (this GPU's
  share while every GPU copied to or from the host at once) or ``aggregate`` (the sum of
  those shares, src/dst ``all``); peer access on or off; and the test that made the row
  (``extra.test``: a latency copy, an nvbandwidth test) where it says;
- collectives: the number of nodes, the backend, the path label (a placement on NVLink
  GPUs is not one on PCIe GPUs) and the hosts the ranks ran on (``extra.hosts``: two
  pairs of nodes are two measurements); the world size is in the figure key.

Copy rows mark the mode in ``extra``: ``test: all-gpus`` with ``concurrent: N`` on the
per-GPU rows that ran together, ``aggregate: true`` on their sum
(gpulane.transfers.job/points). Rows without those marks are solo copies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpulane.analysis.store import FIGURE_KEYS
from gpulane.record import Row, frame_rows, row_value

SOLO, CONCURRENT, AGGREGATE = "solo", "concurrent", "aggregate"
MODES = (SOLO, CONCURRENT, AGGREGATE)
# Row properties a rule may select on beside the row columns (select: {mode: solo}).
VIRTUAL_COLUMNS = ("mode", "concurrent")
_VIRTUAL_KEYS = (*VIRTUAL_COLUMNS, "test", "hosts")

# What a kind's figure key leaves out and a rule must not mix.
_MORE_KEYS: dict[str, tuple[str, ...]] = {
    "copy": ("mode", "concurrent", "peer_access", "test"),
    "collective": ("nodes", "backend", "path", "hosts"),
    "tokens": ("backend", "world_size"),
}


def _extra(rec: Row) -> Mapping[str, Any]:
    extra = rec.extra
    return extra if isinstance(extra, Mapping) else {}


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else int(number)


def copy_mode(rec: Row) -> str | None:
    """solo, concurrent or aggregate for a copy row; None for other kinds."""
    if rec.kind != "copy":
        return None
    extra = _extra(rec)
    if extra.get("aggregate") or "all" in (rec.src, rec.dst):
        return AGGREGATE
    if extra.get("test") == "all-gpus" or (_int(extra.get("concurrent")) or 1) > 1:
        return CONCURRENT
    return SOLO


def concurrency(rec: Row) -> int:
    """How many GPUs copied at the same time as this row measured (1 for a solo copy)."""
    mode = copy_mode(rec)
    if mode is None or mode == SOLO:
        return 1
    extra = _extra(rec)
    gpus = extra.get("gpus")
    return (
        _int(extra.get("concurrent"))
        or (len(gpus) if isinstance(gpus, list) and gpus else None)
        or _int(rec.world_size)
        or 1
    )


def virtual(rec: Row, name: str) -> Any:
    """A row property that is not a column (see VIRTUAL_COLUMNS)."""
    if name == "mode":
        return copy_mode(rec)
    if name == "concurrent":
        return concurrency(rec) if rec.kind == "copy" else None
    if name == "test":
        return _extra(rec).get("test")
    if name == "hosts":  # where the ranks ran (a campaign's pairs, rings, ...)
        hosts = _extra(rec).get("hosts")
        return ",".join(str(h) for h in hosts) if isinstance(hosts, list) else None
    raise KeyError(name)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    try:
        if pd.isna(value):
            return "-"
    except (TypeError, ValueError):
        pass
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def measurement_key(rec: Row) -> tuple[str, ...]:
    """The key under which rows are repeats of one measurement (see the module text)."""
    kind = str(rec.kind)
    out = [kind]
    for name in (*FIGURE_KEYS.get(kind, ()), *_MORE_KEYS.get(kind, ())):
        value = virtual(rec, name) if name in _VIRTUAL_KEYS else row_value(rec, name)
        out.append(f"{name}={_text(value)}")
    return tuple(out)


def measurement_keys(frame: pd.DataFrame) -> list[tuple[str, ...]]:
    return [measurement_key(r) for r in frame_rows(frame)]


def describe(rec: Row) -> str:
    """A few words for what was measured beyond the figure label: ``solo``,
    ``4 GPUs at once``, ``total of 4 GPUs at once``; empty for other kinds."""
    mode = copy_mode(rec)
    if mode == CONCURRENT:
        return f"one GPU's share, {concurrency(rec)} GPUs at once"
    if mode == AGGREGATE:
        return f"total of {concurrency(rec)} GPUs at once"
    if mode == SOLO:
        return "one GPU at a time"
    return ""


def shown_figure(rec: Row) -> str:
    """The row's figure label, with the measurement named when it is not a solo copy
    (``h2d pinned 1 GiB (one GPU's share, 4 GPUs at once)``): what a check line and a
    plot's mark call it, so that the two measurements are never taken for each other."""
    fig = str(row_value(rec, "figure"))
    mode = copy_mode(rec)
    return f"{fig} ({describe(rec)})" if mode in (CONCURRENT, AGGREGATE) else fig
