"""One schema for what gpulane exports: accept verdicts, check margins and key figures.

JSON, JUnit and OpenMetrics are all written from a :class:`Document` (see
:mod:`gpulane.analysis.export.render`), so the three never disagree. A document is read
from a run directory or a results directory: the rows (through the result store) and
every ``accept.json`` found there (what `gpulane accept` wrote; read, never recomputed).

Key figures, one per (build, machine, kind, op, path, GPU or pair), from the latest run
of each build on each machine (GPU model, host, backend, as compare tells machines
apart: :func:`compare.machines.machine_frame`); a run that was interrupted or
terminated is never the latest. Copies carry ``p2p`` (on/off), ``direction`` (``one``,
or ``both (sum)`` for a bidirectional figure, the sum of both directions) and
``at_once`` (GPUs copying at once) labels:
- collectives: busbw at the largest size measured per op and path;
- copies: GB/s per GPU (h2d, d2h) or pair (p2p) at the largest size;
- token rates: tokens/s per model, op, tp, pp and batch.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gpulane.analysis.compare.machines import PARTS, machine_frame
from gpulane.analysis.store import find_run_dirs, load_frame
from gpulane.errors import InputError
from gpulane.record import Row, frame_rows

ACCEPT_JSON = "accept.json"
VERSION_KEYS = ("nccl", "cuda", "driver", "torch", "gpulane")
# The words of an error row a stopped run leaves (session.signals.stop_words).
STOPPED = ("interrupted", "terminated (SIGTERM)")


@dataclass(frozen=True)
class CheckResult:
    """One accept check as accept.json holds it, with where it came from."""

    rule: str
    status: str  # pass, fail, skip (or whatever accept wrote: kept as is)
    subject: str
    basis: str
    message: str
    build: str
    group: str  # the folder holding accept.json
    value: float | None = None
    threshold: float | None = None
    unit: str = ""
    margin: float | None = None


@dataclass(frozen=True)
class Figure:
    """One key figure with its labels (host, gpu, pair, build, op, size, versions...)."""

    metric: str  # collective_busbw, copy_bandwidth, tokens_rate
    value: float  # base units: bytes/s for bandwidth, tokens/s for rates
    labels: dict[str, str]
    run_id: str
    started_at: str


@dataclass
class Document:
    source: str
    checks: list[CheckResult] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    accepts: dict[str, str] = field(default_factory=dict)  # group -> PASS/FAIL/...

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "gpulane-export/1",
            "source": self.source,
            "accepts": self.accepts,
            "checks": [asdict(c) for c in self.checks],
            "figures": [asdict(f) for f in self.figures],
        }


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _accept_status(checks: list[dict[str, Any]], data: dict[str, Any]) -> str:
    """The verdict accept wrote when it wrote one; else PASS/FAIL from the checks."""
    for key in ("status", "verdict", "result"):
        if isinstance(data.get(key), str):
            return str(data[key]).upper()
    if isinstance(data.get("passed"), bool):
        return "PASS" if data["passed"] else "FAIL"
    return "FAIL" if any(c.get("status") == "fail" for c in checks) else "PASS"


def read_accepts(root: Path) -> tuple[list[CheckResult], dict[str, str]]:
    files = [root] if root.is_file() else sorted(root.rglob(ACCEPT_JSON))
    checks: list[CheckResult] = []
    accepts: dict[str, str] = {}
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise InputError(f"{f}: not a readable accept.json ({err})") from err
        raw = data.get("checks") if isinstance(data, dict) else None
        if not isinstance(raw, list):
            raise InputError(f"{f}: not an accept.json (no list of checks)")
        group = str(f.parent)
        build = str(data.get("build") or f.parent.name)
        accepts[group] = _accept_status(raw, data)
        for c in raw:
            if not isinstance(c, dict):
                continue
            checks.append(
                CheckResult(
                    rule=str(c.get("rule")),
                    status=str(c.get("status")),
                    subject=str(c.get("subject") or "-"),
                    basis=str(c.get("basis") or ""),
                    message=str(c.get("message") or ""),
                    build=build,
                    group=group,
                    value=_num(c.get("value")),
                    threshold=_num(c.get("threshold")),
                    unit=str(c.get("unit") or ""),
                    margin=_num(c.get("margin")),
                )
            )
    return checks, accepts


def _labels(row: Row, **more: Any) -> dict[str, str]:
    versions = row.versions if isinstance(row.versions, dict) else {}
    assert isinstance(versions, dict)
    out = {
        "build": row.build,
        "host": row.host,
        "backend": row.backend,
        "gpu_model": versions.get("gpu"),
        **{k: versions.get(k) for k in VERSION_KEYS},
        **more,
    }
    return {k: "" if _missing(v) else str(v) for k, v in out.items()}


def _missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _size(v: Any) -> str:
    return "" if _missing(v) else str(int(v))


def stopped_runs(frame: pd.DataFrame) -> set[str]:
    """Run ids of runs that were interrupted or terminated (their error row says so)."""
    if "error" not in frame.columns:
        return set()
    bad = frame[(frame["status"] != "ok") & frame["error"].notna()]
    words = bad["error"].astype(str).str.lower()
    hit = words.map(lambda w: any(w.startswith(s) or f"; {s}" in w for s in STOPPED))
    return set(bad.loc[hit.astype(bool), "run_id"].astype(str))


def key_figures(frame: pd.DataFrame) -> list[Figure]:
    ok = frame[(frame["status"] == "ok") & ~frame["run_id"].astype(str).isin(stopped_runs(frame))]
    if ok.empty:
        return []
    # the latest run per build and machine: labels carry no run id, so a series stays one
    # series, and two machines under one label are two series, never one
    runs = ok.groupby("run_id")["started_at"].min().rename("run_start")
    ok = ok.join(runs, on="run_id")
    ok = pd.concat([ok, machine_frame(ok).add_prefix("m:")], axis=1)
    by = ["build", *(f"m:{p}" for p in PARTS)]
    latest = ok.groupby(by, dropna=False)["run_start"].transform("max")
    ok = ok[ok["run_start"] == latest].drop(columns=[f"m:{p}" for p in PARTS])
    out: list[Figure] = []
    for row in frame_rows(ok):
        out.extend(_figures_of(row))
    # keep the largest size per series (collectives and copies), the best of repeats
    best: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, Figure]] = {}
    for f in out:
        key_labels = tuple(sorted((k, v) for k, v in f.labels.items() if k != "size"))
        size = float(f.labels.get("size") or 0)
        k = (f.metric, key_labels)
        if (
            k not in best
            or size > best[k][0]
            or (size == best[k][0] and f.value > best[k][1].value)
        ):
            best[k] = (size, f)
    return [f for _, f in best.values()]


def _figures_of(row: Row) -> list[Figure]:
    kind, run, at = row.kind, str(row.run_id), str(row.started_at)
    if kind == "collective":
        v = _num(row.busbw_gbps)
        if v is None:
            return []
        labels = _labels(
            row,
            op=row.op,
            path=row.path,
            world_size=_size(row.world_size),
            size=_size(row.size_bytes),
        )
        return [Figure("collective_busbw", v * 1e9, labels, run, at)]
    if kind == "copy":
        v = _num(row.algbw_gbps)
        if v is None:
            return []
        src, dst = str(row.src), str(row.dst)
        gpu = dst if src == "host" else src if dst == "host" else ""
        pair = f"{src}->{dst}" if not gpu else ""
        labels = _labels(
            row,
            op=row.op,
            gpu=gpu,
            pair=pair,
            memory=row.memory,
            p2p="" if _missing(row.peer_access) else ("on" if row.peer_access else "off"),
            direction="both (sum)"
            if not _missing(row.bidirectional) and bool(row.bidirectional)
            else "one",
            at_once=_size(row.world_size),
            size=_size(row.size_bytes),
        )
        return [Figure("copy_bandwidth", v * 1e9, labels, run, at)]
    if kind == "tokens":
        v = _num(row.tokens_per_s)
        if v is None:
            return []
        labels = _labels(
            row,
            op=row.op,
            model=row.model,
            tp=_size(row.tp),
            pp=_size(row.pp),
            batch=_size(row.batch),
        )
        return [Figure("tokens_rate", v, labels, run, at)]
    return []


def collect(target: str | Path) -> Document:
    """The document for a run directory, a results directory or an accept.json."""
    root = Path(target)
    if not root.exists():
        raise InputError(f"{root}: no such run or results directory")
    checks, accepts = read_accepts(root)
    has_rows = root.is_dir() and bool(find_run_dirs(root))
    frame = load_frame([root]) if has_rows else None
    figures = key_figures(frame) if frame is not None else []
    if not checks and not figures:
        raise InputError(f"{root}: neither rows nor an accept.json to export")
    return Document(str(root), checks, figures, accepts)
