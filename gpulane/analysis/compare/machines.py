"""What machine a row was measured on; rows of one label from several machines.

A build label is free text: an H200's nccl-tests log parsed with ``--build nvlink`` and a
CPU gloo sweep run with ``preset=nvlink`` share the label ``nvlink``. Averaging their
figures gives a number no machine measured. A machine here is the GPU model, the host
and the backend of a row, per kind of row (a build's copies and its collectives come
from different tools on the same machine). ``compare`` refuses a side whose rows of one
kind come from several machines (:func:`mixed_machines`, one line naming what differs
and the runs of each); a report draws them as separate series,
``nvlink [NVIDIA H200, h200-a]`` beside ``nvlink [cpu, vm]`` (:func:`series_labels`;
backends are panels of their own there). Two backends on one machine (nccl-tests float
beside torch bfloat16) are refused only where they measured the same figure. World sizes
need neither: they are part of every collective figure's key (:data:`store.FIGURE_KEYS`),
and a report's panels are per world size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from gpulane.analysis.store import FIGURE_KEYS, key_frame
from gpulane.record import Row, frame_rows

# What tells machines apart, in the order a split label names them.
PARTS = ("gpu", "host", "backend")
UNKNOWN = {"gpu": "gpu not named", "host": "host not named", "backend": "backend not named"}
CPU = "cpu"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    text = str(value).strip()
    return text or None


def row_machine(row: Row) -> dict[str, str]:
    """The row's GPU model (``versions.gpu``; ``cpu`` for gloo ranks or MPI through host
    memory), host and backend; a part the row does not carry reads "... not named"."""
    versions = row.versions
    versions = versions if isinstance(versions, dict) else {}
    backend = _text(row.backend)
    gpu = _text(versions.get("gpu"))
    if gpu is None and (backend == "torch-gloo" or versions.get("mpi_buffers") == "host"):
        gpu = CPU
    found = {"gpu": gpu, "host": _text(row.host), "backend": backend}
    return {part: found[part] or UNKNOWN[part] for part in PARTS}


def machine_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One column per part of :data:`PARTS`, per row of ``frame``."""
    if frame.empty:
        return pd.DataFrame(columns=list(PARTS), index=frame.index)
    cols = [c for c in ("versions", "backend", "host") if c in frame.columns]
    machines = [row_machine(r) for r in frame_rows(frame[cols])]
    return pd.DataFrame(machines, index=frame.index, columns=list(PARTS))


def _varying(machines: pd.DataFrame) -> list[str]:
    """The parts with two or more values the rows name: a row that does not name its host
    (an imported log without a device list) is not taken for another machine."""
    return [p for p in PARTS if machines.loc[machines[p] != UNKNOWN[p], p].nunique() > 1]


def _split_labels(label: str, machines: pd.DataFrame, parts: tuple[str, ...] = PARTS) -> pd.Series:
    """Per row: ``label`` when every row has one machine, else ``label [parts that differ]``."""
    varying = [p for p in _varying(machines) if p in parts]
    if not varying:
        return pd.Series(label, index=machines.index, dtype=object)
    words = machines[varying].astype(str).agg(", ".join, axis=1)
    return f"{label} [" + words + "]"


def _listing(values: Sequence[str], limit: int = 4) -> str:
    vals = list(dict.fromkeys(values))
    return ", ".join(vals[:limit]) + (f" (+{len(vals) - limit})" if len(vals) > limit else "")


def _shared_figure(part: pd.DataFrame, kind: str, groups: pd.Series) -> str | None:
    """A figure (its label) that rows of two of ``groups`` both hold, or None."""
    if kind not in FIGURE_KEYS:
        return None
    keys = list(key_frame(part, kind).astype(str).agg("\x1f".join, axis=1))
    figures = list(part["figure"]) if "figure" in part.columns else keys
    seen: dict[str, object] = {}
    for key, group, figure in zip(keys, list(groups), figures, strict=True):
        if key in seen and seen[key] != group:
            return str(figure)
        seen.setdefault(key, group)
    return None


def mixed_machines(label: str, frame: pd.DataFrame) -> str | None:
    """None when no figure of ``frame`` would pool two machines; else, in words, the first
    kind whose rows come from several: which parts differ, with the values and the runs of
    each. Rows of two GPU models or hosts are always two machines; rows of one machine by
    two backends (nccl-tests float beside torch bfloat16) only where both measured the
    same figure (their mean would be neither tool's)."""
    if frame.empty:
        return None
    rows = frame[frame["status"] == "ok"] if "status" in frame.columns else frame
    for kind, part in rows.groupby("kind", sort=True):
        machines = machine_frame(part)
        varying = _varying(machines)
        if not varying:
            continue
        labels = _split_labels(label, machines)
        shared = ""
        if varying == ["backend"]:
            figure = _shared_figure(part, str(kind), labels)
            if figure is None:
                continue
            shared = f", both measured {figure}"
        differ = "; ".join(f"{p}: {_listing(list(machines[p]))}" for p in varying)
        runs = []
        for name in dict.fromkeys(labels):
            ids = _listing([str(r) for r in part.loc[labels == name, "run_id"]], 3)
            runs.append(f"{name.removeprefix(label).strip()} in run {ids}")
        what = "machines" if varying != ["backend"] else "tools"
        return (
            f"{label} holds {kind} rows of {labels.nunique()} {what} ({differ}{shared}), "
            f"whose figures cannot be pooled: {'; '.join(runs)}"
        )
    return None


def series_labels(frame: pd.DataFrame, column: str = "build") -> pd.Series:
    """Per row, the series a report draws it in: the value of ``column`` (the build), with
    what differs appended where rows of one value and one kind come from different
    machines (a report draws each kind on its own, so the split is per kind)."""
    out = pd.Series(index=frame.index, dtype=object)
    if frame.empty:
        return out
    machines = machine_frame(frame)
    values = frame[column].astype(object).where(frame[column].notna(), "-")
    kinds = frame["kind"].astype(str) if "kind" in frame.columns else pd.Series("", frame.index)
    for key, index in frame.groupby([values, kinds], sort=False).groups.items():
        value = key[0] if isinstance(key, tuple) else key
        # backends are a report's panels already: the series split by GPU model and host
        out.loc[index] = _split_labels(str(value), machines.loc[index], ("gpu", "host"))
    return out
