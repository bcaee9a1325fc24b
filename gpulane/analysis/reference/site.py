"""A site's own reference: ranges made from its accepted runs (`gpulane reference add`).

Each figure (machine, conditions, op, size) becomes one entry whose range spans the runs'
values (the median of a run's rows per figure), widened on each side by the runs' own
scatter: half the spread of a run's repeated rows, or of the runs against each other,
whichever is wider, and at least 1 % (two runs of the same binary a minute apart differ
by about that much at 1 GiB and above on the H200 machines).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from gpulane.analysis.reference.judge import facts_of
from gpulane.analysis.reference.table import METRIC_OF_KIND, Entry, read_table
from gpulane.errors import InputError
from gpulane.record import frame_rows, row_value

MIN_SIZE = 1 << 20  # smaller figures are latency, too noisy for a range of their own
MIN_WIDEN = 0.01
ACCEPT_JSON = "accept.json"


def entries_from_frame(
    frame: pd.DataFrame, source: str, cite: str, origin: str = "site", conditions: str = ""
) -> list[Entry]:
    """One entry per figure of ``frame`` (collectives and copies of 1 MiB and more)."""
    ok = frame[(frame["status"] == "ok") & frame["kind"].isin(["collective", "copy"])]
    ok = ok[pd.to_numeric(ok["size_bytes"], errors="coerce").fillna(0) >= MIN_SIZE]
    groups: dict[tuple[Any, ...], dict[str, list[float]]] = {}
    facts_by_key = {}
    for row in frame_rows(ok):
        metric = METRIC_OF_KIND[str(row.kind)]
        value = _number(row_value(row, metric))
        if value is None:
            continue
        f = facts_of(row)
        if f.gpu is None or (f.path is None and f.kind != "copy"):
            continue  # a figure that cannot name its machine cannot be a reference
        # copies: every GPU of the machine in one range (no src/dst in the key)
        key: tuple[Any, ...] = (f.gpu, f.path, f.world_size, f.nodes, f.kind, f.op, f.size)
        key += (f.nvls, f.env, f.memory, f.nccl, f.graph, f.link, f.host_memory, f.p2p)
        key += (f.bidirectional,)
        facts_by_key[key] = (f, metric)
        groups.setdefault(key, {}).setdefault(str(row.run_id), []).append(value)
    out = []
    for key, runs in groups.items():
        f, metric = facts_by_key[key]
        medians = [float(pd.Series(v).median()) for v in runs.values()]
        mid = float(pd.Series(medians).median())
        within = max((max(v) - min(v)) / 2 for v in runs.values())
        between = (max(medians) - min(medians)) / 2
        widen = max(within, between, MIN_WIDEN * mid)
        nccl = ".".join(f.nccl.split(".")[:2]) if f.nccl else None
        copy = f.kind == "copy"
        out.append(
            Entry(
                gpu=(str(f.gpu),),
                path="*" if copy else str(f.path),
                world_size=0 if copy else int(f.world_size or 0),
                op=f.op,
                low=_sig(min(medians) - widen),
                high=_sig(max(medians) + widen),
                source=source,
                cite=cite,
                origin=origin,
                kind=f.kind,
                metric=metric,
                nodes=f.nodes,
                size_min=int(f.size or 0),
                size_max=int(f.size or 0),
                nccl=nccl,
                nvls=f.nvls,
                env=f.env if not copy else (),
                memory=f.memory if copy else None,
                graph=f.graph,
                link=f.link if copy else None,
                host_memory=f.host_memory if copy else None,
                p2p=f.p2p,
                bidirectional=True if copy and f.bidirectional else None,
                runs=len(runs),
                run_ids=tuple(sorted(runs)),
                conditions=conditions,
            )
        )
    return sorted(out, key=lambda e: (e.gpu, e.path, e.world_size, e.op, e.env, e.size_min))


def _number(v: Any) -> float | None:
    try:
        out = float(v)
    except (TypeError, ValueError):
        return None
    return None if out != out else out  # NaN: no figure


def _sig(x: float) -> float:
    """Four significant digits: 2.183, 27.84, 345.1."""
    return float(f"{x:.4g}")


def accepted(run: Path) -> Path:
    """The passing accept.json that vouches for ``run`` (in it or up to two folders up)."""
    start = run if run.is_dir() else run.parent
    for folder in (start, start.parent, start.parent.parent):
        f = folder / ACCEPT_JSON
        if f.is_file():
            try:
                checks = json.loads(f.read_text(encoding="utf-8")).get("checks", [])
            except (OSError, ValueError, AttributeError) as err:
                raise InputError(f"{run}: {f} is not an accept.json ({err})") from err
            failed = [c.get("rule") for c in checks if c.get("status") == "fail"]
            if failed:
                raise InputError(
                    f"{run}: not accepted: {f} has failed rules ({', '.join(map(str, failed))}); "
                    "only runs that passed `gpulane accept` become a reference"
                )
            if not checks:
                raise InputError(f"{run}: {f} holds no checks, so the run was never accepted")
            return f
    raise InputError(
        f"{run}: no accept.json here or above it; check the run first with "
        f"`gpulane accept run={run}`"
    )


def write_site(path: Path, entries: list[Entry]) -> int:
    """Add ``entries`` to the site table at ``path`` (an entry for the same figure and
    conditions is replaced); written atomically. Returns how many entries it holds."""
    old = read_table(path) if path.is_file() else []
    new_keys = {_same(e) for e in entries}
    kept = [e for e in old if _same(e) not in new_keys]
    table = [e.to_yaml() for e in [*kept, *entries]]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(
            "# gpulane site reference (gpulane reference add); see docs/reference.md\n"
            + yaml.safe_dump(table, sort_keys=False, allow_unicode=True),
            encoding="utf-8",
        )
        os.replace(tmp, path)
    except OSError as err:
        raise InputError(f"--site {path}: cannot write: {err.strerror or err}") from err
    return len(table)


def _same(e: Entry) -> tuple[Any, ...]:
    return (
        e.gpu,
        e.path,
        e.world_size,
        e.nodes,
        e.kind,
        e.op,
        e.metric,
        e.size_min,
        e.size_max,
        e.nccl,
        e.nvls,
        e.env,
        e.memory,
        e.graph,
        e.link,
        e.host_memory,
        e.p2p,
        e.bidirectional,
    )
