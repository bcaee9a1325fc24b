"""History: every run under a results directory, per figure over time, and regressions.

Rows are read with DuckDB: one query over all the ``rows.parquet`` files (and the JSON
Lines of runs that never wrote Parquet, read like the result store reads them), grouped
to one record per run and figure: the median of the figure's rows, how many there were,
their spread, and the median p50 and p99 times. That keeps hundreds of runs (thousands
of files) to seconds.

A regression is a change beyond the runs' own noise, not a fixed percentage. For a
figure's series of runs in time order, the first run ``k`` is flagged when it, and the
median of it and every run after it, fall below the lowest earlier run by more than the
noise band, computed from the earlier runs only (never from the run being judged): the
wider of (a) the range of the earlier runs' figures (max - min) and (b) the median over
the earlier runs of a run's own noise, times the earlier runs' median, where a run's
noise is the relative spread of its repeated rows or, for timed rows, ``1 - p50/p99``
(how far the slow tail sits from the middle).
A series whose runs carry no noise measure at all (one row per run, no percentiles, one
earlier run) is not judged, and says so. What changed at run ``k`` (versions, NCCL
switches, host) against the run before it is named.
"""

from __future__ import annotations

import bisect
import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gpulane.analysis.compare.machines import PARTS, machine_frame
from gpulane.analysis.store import ENDPOINT_KEYS, FIGURE_KEYS, find_run_dirs
from gpulane.errors import InputError, MissingComponent
from gpulane.record import ROWS_JSONL, ROWS_PARQUET, read_rows, rows_frame
from gpulane.rundir import RunDir
from gpulane.units import format_size

# What identifies one figure across runs: the build, and the measurement key every reader
# shares: store.FIGURE_KEYS (as compare and the rules key figures) and compare's machine
# parts (compare.machines.PARTS: GPU model, host, backend).
KEYS = tuple(
    dict.fromkeys(
        ("build", "kind", "nodes", "path", *ENDPOINT_KEYS, *PARTS, *sum(FIGURE_KEYS.values(), ()))
    )
)
# Keys read from the rows as they are (the machine parts are derived, below).
ROW_KEYS = tuple(k for k in KEYS if k not in PARTS)
METRIC = {"collective": "busbw_gbps", "copy": "algbw_gbps", "tokens": "tokens_per_s"}
UNIT = {"busbw_gbps": "GB/s", "algbw_gbps": "GB/s", "tokens_per_s": "tok/s"}
# The Row fields history reads from rows.jsonl, with their types.
JSON_COLUMNS = {
    **{k: "VARCHAR" for k in ("run_id", "started_at", "status", "host", "build", "kind", "op")},
    **{k: "VARCHAR" for k in ("dtype", "redop", "path", "memory", "src", "dst", "model")},
    "backend": "VARCHAR",
    **{k: "BOOLEAN" for k in ("in_place", "graph", "bidirectional", "peer_access")},
    **{k: "BIGINT" for k in ("world_size", "nodes", "size_bytes", "tp", "pp", "batch")},
    **{k: "BIGINT" for k in ("input_len", "output_len")},
    **{k: "DOUBLE" for k in ("busbw_gbps", "algbw_gbps", "tokens_per_s")},
    **{k: "DOUBLE" for k in ("time_us_p50", "time_us_p99")},
    "versions": "JSON",
    "env": "JSON",
}
SPARK = "▁▂▃▄▅▆▇█"


def _files(root: Path) -> tuple[list[str], list[Path]]:
    """Parquet files to scan, and run directories to read from JSON Lines instead."""
    parquet: list[str] = []
    jsonl: list[Path] = []
    for d in find_run_dirs(root):
        run = RunDir.at(d)
        p, j = run.parquet_path, run.rows_path
        if p.exists() and (not j.exists() or p.stat().st_mtime >= j.stat().st_mtime):
            parquet.append(str(p))
        elif j.exists():
            jsonl.append(d)
    return parquet, jsonl


def load_runs(root: str | os.PathLike[str]) -> pd.DataFrame:
    """One record per run and figure (see the module's docstring)."""
    try:
        import duckdb
    except ImportError as err:
        raise MissingComponent(
            "gpulane history needs DuckDB: pip install 'gpulane[monitor]' (or duckdb)"
        ) from err
    path = Path(root)
    if not path.is_dir():
        raise InputError(f"{path}: no such results directory")
    parquet, jsonl = _files(path)
    if not parquet and not jsonl:
        raise InputError(f"{path}: no {ROWS_JSONL} or {ROWS_PARQUET} under this directory")
    con = duckdb.connect()
    parts = []
    if parquet:
        con.read_parquet(parquet, union_by_name=True).create_view("pq")
        parts.append("select * from pq")
    if jsonl:
        files = [str(RunDir.at(d).rows_path) for d in jsonl]
        try:  # DuckDB's own reader, typed as the Row fields are
            con.read_json(files, format="newline_delimited", columns=JSON_COLUMNS).create_view("js")
            con.execute("select count(*) from js").fetchall()
        except duckdb.Error:  # a line cut short: gpulane's reader, which says where
            frame = rows_frame([r for d in jsonl for r in read_rows(RunDir.at(d).rows_path)])
            for name in ("env", "versions", "extra"):
                frame[name] = frame[name].map(lambda v: json.dumps(v, default=str))
            con.register("js_frame", frame)
            con.execute("create or replace view js as select * from js_frame")
        parts.append("select * from js")
    con.execute("create view rows as " + " union all by name ".join(parts))
    have = {r[0] for r in con.execute("describe rows").fetchall()}
    keys = [k for k in ROW_KEYS if k in have]
    cols = ", ".join(f'"{k}"' for k in keys)
    machine = {c: (f'"{c}"' if c in have else "null") for c in ("host", "backend")}
    metric = (
        "case kind when 'collective' then busbw_gbps when 'copy' then coalesce(algbw_gbps, "
        "busbw_gbps) else tokens_per_s end"
    )
    p50 = "time_us_p50" if "time_us_p50" in have else "null"
    p99 = "time_us_p99" if "time_us_p99" in have else "null"
    query = f"""
        with r as (select *, {metric} as value from rows
                   where coalesce(status, 'ok') = 'ok' and kind in ('collective','copy','tokens'))
        select run_id, {cols}, {machine["host"]} as _host, {machine["backend"]} as _backend,
               json_extract_string(versions, '$.gpu') as _gpu,
               json_extract_string(versions, '$.mpi_buffers') as _buffers,
               min(started_at) as started_at,
               median(value) as value, count(value) as n, min(value) as lo, max(value) as hi,
               median(1 - {p50} / nullif({p99}, 0)) as tail,
               any_value(versions) as versions, any_value(env) as env
        from r where value is not null
        group by all
    """
    return _with_machines(con.execute(query).df())


def _with_machines(out: pd.DataFrame) -> pd.DataFrame:
    """The machine parts (gpu, host, backend) of each record, as compare tells them."""
    named = pd.DataFrame(
        {
            "host": out["_host"],
            "backend": out["_backend"],
            "versions": [
                {k: v for k, v in (("gpu", g), ("mpi_buffers", b)) if _present(v)}
                for g, b in zip(out["_gpu"], out["_buffers"], strict=True)
            ],
        },
        index=out.index,
    )
    machines = machine_frame(named)
    out = out.drop(columns=["_host", "_backend", "_gpu", "_buffers"])
    out["host_name"] = named["host"]
    return pd.concat([out, machines], axis=1)


@dataclass
class Series:
    key: dict[str, Any]
    metric: str
    runs: pd.DataFrame  # one record per run, oldest first
    regression: int | None = None  # index into runs of the first regressed run
    band: float | None = None  # the noise band (absolute) the regression was judged with
    changes: list[str] = field(default_factory=list)
    note: str = ""
    machine: str = ""  # the machine parts that tell this series from others of its build

    def label(self) -> str:
        k = self.key
        parts = [str(k.get("build")), str(k.get("op"))]
        for name in ("dtype", "memory", "model"):
            if _present(k.get(name)):
                parts.append(str(k[name]))
        if _present(k.get("size_bytes")):
            parts.append(format_size(int(k["size_bytes"])))
        if k.get("in_place") is True:
            parts.append("in-place")
        if k.get("graph") is True:
            parts.append("graph")
        if _present(k.get("src")):
            parts.append(f"{k['src']}->{k.get('dst')}")
        if _present(k.get("peer_access")):
            parts.append("P2P on" if bool(k["peer_access"]) else "P2P off")
        if _present(k.get("bidirectional")) and bool(k["bidirectional"]):
            parts.append("both directions (sum)")
        if _present(k.get("path")):
            parts.append(str(k["path"]))
        if _present(k.get("world_size")):
            parts.append(f"{int(k['world_size'])} ranks")
        # a token figure's shape: without it two series of one model read alike
        for name, short in (("tp", "tp"), ("pp", "pp"), ("batch", "batch"),
                            ("input_len", "in"), ("output_len", "out")):  # fmt: skip
            if _present(k.get(name)):
                parts.append(f"{short}={_key_int(k[name])}")
        if self.machine:
            parts.append(f"[{self.machine}]")
        return " ".join(parts)


def _key_int(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _present(v: Any) -> bool:
    if v is None:
        return False
    try:
        return not bool(pd.isna(v))
    except (TypeError, ValueError):
        return True


def noise_of(frame: pd.DataFrame) -> pd.Series:
    """Each run's own relative noise: the spread of its repeats, or its p50-p99 tail."""
    value = frame["value"].astype(float)
    spread = ((frame["hi"] - frame["lo"]) / value.where(value != 0)).where(frame["n"] >= 2)
    tail = pd.to_numeric(frame["tail"], errors="coerce")
    return pd.concat([spread.fillna(0.0), tail.fillna(0.0)], axis=1).max(axis=1).clip(lower=0)


def _median(ordered: list[float]) -> float:
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def detect(values: list[float], noise: list[float]) -> tuple[int | None, float | None]:
    """(index of the first regressed run, the band it was judged with), higher is better.

    Runs in time order; the earlier runs' median, minimum and maximum and the median
    noise are kept as they grow (sorted lists), so a series of n runs costs about n log n
    plus the rare candidate's median of the runs after it."""
    base_sorted: list[float] = []
    noise_sorted: list[float] = []
    for k in range(1, len(values)):
        # Only the runs before k: the run being judged never widens its own band.
        bisect.insort(base_sorted, values[k - 1])
        bisect.insort(noise_sorted, noise[k - 1])
        within = _median(noise_sorted) * _median(base_sorted)
        band = max(within, base_sorted[-1] - base_sorted[0])
        if band <= 0:
            continue  # no noise measure: nothing can be told apart from noise
        low = base_sorted[0] - band
        if values[k] < low and statistics.median(values[k:]) < low:
            return k, band
    return None, None


def _dict(text: Any) -> dict[str, str]:
    if isinstance(text, dict):
        return {str(k): str(v) for k, v in text.items()}
    if isinstance(text, str) and text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    return {}


def changes_between(before: pd.Series, after: pd.Series) -> list[str]:
    """``nccl 2.28.9 → 2.29.1``, ``env NCCL_P2P_DISABLE unset → 1``, ``host a → b``."""
    out = []
    for what, name in (("versions", ""), ("env", "env ")):
        a, b = _dict(before[what]), _dict(after[what])
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                out.append(f"{name}{k} {a.get(k, 'unset')} → {b.get(k, 'unset')}")
    if _present(before["host_name"]) and before["host_name"] != after["host_name"]:
        out.append(f"host {before['host_name']} → {after['host_name']}")
    return out


def series(frame: pd.DataFrame) -> list[Series]:
    keys = [k for k in KEYS if k in frame.columns]
    out: list[Series] = []
    if frame.empty:
        return out
    frame = frame.assign(noise=noise_of(frame)).sort_values("started_at", kind="stable")
    varying = _machine_parts(frame)
    for _, runs in frame.groupby(keys, sort=True, dropna=False):
        runs = runs.reset_index(drop=True)
        first = runs.iloc[0]
        s = Series({k: first[k] for k in keys}, METRIC[str(first["kind"])], runs)
        parts = varying.get((str(first["build"]), str(first["kind"])), [])
        s.machine = ", ".join(str(first[p]) for p in parts)
        values = runs["value"].astype(float).tolist()
        noise = runs["noise"].tolist()
        k, band = detect(values, noise)
        if k is not None:
            s.regression, s.band = k, band
            s.changes = changes_between(runs.iloc[k - 1], runs.iloc[k]) or ["nothing recorded"]
        elif len(values) > 1 and max(noise) == 0 and len(values) < 3:
            s.note = "no noise measure (one row per run, no p50/p99): not judged"
        out.append(s)
    return out


def _machine_parts(frame: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
    """Per (build, kind): the machine parts whose values differ within it (a label the
    series then carry, as a report's ``nvlink [NVIDIA H200, h200-a]``)."""
    out: dict[tuple[str, str], list[str]] = {}
    if not all(p in frame.columns for p in PARTS):
        return out
    for (build, kind), part in frame.groupby(["build", "kind"], dropna=False):
        out[(str(build), str(kind))] = [p for p in PARTS if part[p].nunique() > 1]
    return out


def spark(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    if hi - lo <= 0:
        return SPARK[4] * len(values)
    return "".join(SPARK[min(7, int((v - lo) / (hi - lo) * 7.999))] for v in values)


def _short(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def _date(text: Any) -> str:
    return str(text)[:16].replace("T", " ")


def version_marks(s: Series) -> str:
    """Where the series' versions changed: ``nccl 2.29.1 from 11-20``."""
    marks = []
    for i in range(1, len(s.runs)):
        for c in changes_between(s.runs.iloc[i - 1], s.runs.iloc[i]):
            marks.append(f"{c} at {_date(s.runs.iloc[i]['started_at'])[5:10]}")
    return "; ".join(marks[:4]) + (f"; +{len(marks) - 4}" if len(marks) > 4 else "")


def trend_line(s: Series) -> str:
    values = [float(v) for v in s.runs["value"]]
    v = _dict(s.runs.iloc[-1]["versions"])
    stamp = ", ".join(f"{k} {v[k]}" for k in ("driver", "nccl", "cuda", "gpulane") if k in v)
    text = (
        f"{s.label()}: {_short(values[0])} → {_short(values[-1])} {UNIT.get(s.metric, '')} "
        f"over {len(values)} runs {spark(values[-40:])} [{stamp}]"
    )
    marks = version_marks(s)
    if marks:
        text += f" (changed: {marks})"
    if s.note:
        text += f" ({s.note})"
    return text


def regression_text(s: Series) -> str:
    assert s.regression is not None and s.band is not None
    runs = s.runs
    k = s.regression
    before = statistics.median(float(v) for v in runs["value"][:k])
    after = statistics.median(float(v) for v in runs["value"][k:])
    run = runs.iloc[k]
    pct = (after - before) / before * 100
    return (
        f"REGRESSION {s.label()}: {_short(before)} → {_short(after)} {UNIT.get(s.metric, '')} "
        f"({pct:+.1f} %, noise band ±{s.band / before * 100:.1f} % from the earlier runs' "
        f"range and repeats), first in run {run['run_id']} ({_date(run['started_at'])}); "
        f"changed there: {', '.join(s.changes)}"
    )


def _size(v: Any) -> int:
    return int(v) if _present(v) else 0


def regression_lines(regressed: list[Series]) -> list[str]:
    """One line per regression: sizes of one figure family that regressed at the same run
    with the same changes are one line, shown by its largest size."""
    families: dict[tuple[str, ...], list[Series]] = {}
    for s in regressed:
        assert s.regression is not None
        run = str(s.runs.iloc[s.regression]["run_id"])
        fam = tuple(str(v) for k, v in s.key.items() if k not in ("size_bytes", "in_place"))
        families.setdefault((*fam, run, *s.changes), []).append(s)
    out = []
    for group in families.values():
        group.sort(key=lambda s: _size(s.key.get("size_bytes")))
        text = regression_text(group[-1])
        if len(group) > 1:
            sizes = sorted({_size(s.key.get("size_bytes")) for s in group})
            text += (
                f" [{len(group)} figures of this op regressed at that run, "
                f"{format_size(sizes[0])}–{format_size(sizes[-1])}]"
            )
        out.append(text)
    return out


def key_series(all_series: list[Series]) -> list[Series]:
    """The largest size of each (build, op, path, world size, ...) series family."""
    best: dict[tuple[str, ...], Series] = {}
    for s in all_series:
        family = tuple(str(v) for k, v in s.key.items() if k not in ("size_bytes", "in_place"))
        size = _size(s.key.get("size_bytes"))
        cur = best.get(family)
        if cur is None or size > _size(cur.key.get("size_bytes")):
            best[family] = s
    return list(best.values())
