"""Rows of parsed nccl-tests runs: one per size and placement, then one error row per
failure, each naming the file and line where it was read.

Rows are made as runs come: a run handed over before it ended (``done`` False) gets the
rows of its lines so far, and its lines are let go; its error rows come when it ends.
Every row carries the run's facts (header, summary) as read up to then, in
``extra.nccl_tests``.

Old nccl-tests (before 2.13) printed ``error`` (the largest relative error) instead of a
count of wrong elements; a row is then out of bounds when that error exceeds the bound
nccl-tests used (1e-2 half/bfloat16, 1e-5 float, 1e-12 double, 0 otherwise, times
nranks-1), and ``wrong`` is 1 ("at least one") with the error kept in ``extra.max_error``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gpulane import __version__
from gpulane.collectives.nccl_tests.model import (
    BACKEND,
    ErrorEvent,
    Measurement,
    TableLine,
    TestRun,
    nccl_version_string,
    shaping_env,
)
from gpulane.collectives.spec import COLLECTIVES
from gpulane.record import Row, utc_now
from gpulane.topology.nccl_logs import summary as nccl_summary

# Old nccl-tests' bound on the relative error per type (times nranks - 1).
_OLD_DELTA_MAX = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}


def _old_bound(dtype: str | None, nranks: int | None) -> float:
    return _OLD_DELTA_MAX.get(dtype or "", 0.0) * max((nranks or 2) - 1, 1)


def _versions(run: TestRun) -> dict[str, str]:
    v = {"gpulane": __version__}
    h = run.header
    if h.nccl_version:
        v["nccl"] = h.nccl_version
    if h.version:
        v["nccl_tests"] = h.version
    headers = nccl_version_string(h.nccl_headers)
    if headers:
        v["nccl_tests_built_with_nccl"] = headers
    if h.ranks and h.ranks[0].gpu:
        v["gpu"] = h.ranks[0].gpu
    return v


def nccl_found(run: TestRun, source: str | None = None) -> dict[str, Any] | None:
    """What NCCL's INFO lines in the test's log say (``extra.nccl``, as gpulane's own runs
    record it): the transport between which GPUs, channels, version; None without any."""
    reader = run.nccl_reader
    if reader is None or not reader.nccl_lines:
        return None
    info = reader.info()
    return None if info.empty() else nccl_summary(info, source or run.source)


def _run_facts(run: TestRun) -> dict[str, Any]:
    facts = run.header.facts()
    facts["format"] = run.format
    facts["test_index"] = run.index
    facts["op_source"] = run.op_source
    if run.out_of_bounds is not None:
        facts["out_of_bounds"] = run.out_of_bounds
        facts["out_of_bounds_ok"] = run.out_of_bounds_ok
    if run.avg_busbw_gbps is not None:
        facts["avg_busbw_gbps"] = run.avg_busbw_gbps
    if run.avg_busbw_check:
        facts["avg_busbw_check"] = run.avg_busbw_check
    if run.last_error:
        facts["last_error"] = run.last_error
    if run.warnings:
        facts["nccl_warnings"] = run.warnings[-5:]
    return facts


def describe_event(run: TestRun, event: ErrorEvent, source: str | None = None) -> str:
    """An error row's message: the file and line, which test, where, what, and the next
    thing to look at."""
    at = f"{source or run.source}:{event.line}: " if event.line else ""
    test = run.header.test or (f"{run.op}_perf" if run.op else "nccl-tests")
    where = ""
    if event.size_bytes is not None:
        place = (
            "" if event.in_place is None else (" in-place" if event.in_place else " out-of-place")
        )
        where = f" at {event.size_bytes} B{place}"
    if event.kind == "cut_off":
        text = (
            f"{test}{where}: {event.message}; the run was cut off (killed, timed out or "
            "the log is incomplete)"
        )
    elif event.kind == "out_of_bounds":
        text = f"{test}: {event.message}"
    elif event.kind == "damaged" and event.size_bytes is not None:
        text = f"{test} printed a damaged table{where}: {event.message}"
    elif event.kind == "damaged":
        text = f"{test}: the log cannot be read past this line ({event.message}); rows before it are kept"
    else:
        label = {
            "nccl": "failed",
            "cuda": "failed",
            "test": "failed",
            "timeout": "timed out",
            "abort": "aborted",
            "usage": "refused to run",
        }.get(event.kind, "failed")
        text = f"{test} {label}{where}: {event.message}"
    if event.count > 1:
        text += f" (reported {event.count} times)"
    if event.details:
        text += " [" + "; ".join(event.details[:3]) + "]"
    if run.warnings and event.kind in ("nccl", "cuda", "test", "abort", "timeout"):
        text += f"; last NCCL WARN: {run.warnings[-1]}"
    if event.kind in ("nccl",) and not run.warnings:
        text += "; rerun with NCCL_DEBUG=WARN (or INFO) to see NCCL's reason"
    return at + text


def iter_rows(
    runs: Iterable[TestRun],
    *,
    run_id: str | None = None,
    build: str | None = None,
    source: str | None = None,
    env: dict[str, str] | None = None,
    versions: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
    world_size: int | None = None,
    nodes: int | None = None,
    path: str | None = None,
    placements: Sequence[bool] | None = None,
) -> Iterator[Row]:
    """Rows of parsed tests as they come: one per size and placement, then one error row
    per failure. A run handed over before its end has its ``lines`` let go (all but the
    last) once their rows are out."""
    current: TestRun | None = None
    flagged = 0  # rows of the current run with wrong results
    started_at = utc_now()
    for run in runs:
        if run is not current:
            current, flagged, started_at = run, 0, utc_now()
        common = _common(
            run,
            run_id=run_id,
            build=build,
            source=source,
            env=env,
            versions=versions,
            world_size=world_size,
            nodes=nodes,
            path=path,
        )
        common["started_at"] = started_at
        facts = _run_facts(run)
        found = nccl_found(run, source)
        if found:
            common["transport"] = found.get("transport") or None
            extra = {**(extra or {}), "nccl": found}
        spec = COLLECTIVES.get(common["op"])
        # A run handed over before its end keeps its last line back, so that its last
        # rows come with the summary read after them.
        lines = run.lines if run.done else run.lines[:-1]
        for tl in lines:
            redop = tl.redop
            if redop is None and spec is not None and not spec.reduces:
                redop = "none"
            root = tl.root
            if root is None and spec is not None and not spec.rooted:
                root = -1
            for m in tl.results:
                if placements is not None and m.in_place not in placements:
                    continue
                row = _measured_row(common, tl, m, redop, root, facts, extra)
                flagged += 1 if row.wrong else 0
                yield row
        if not run.done:
            del run.lines[:-1]
            continue
        events = list(run.errors)
        if run.out_of_bounds and flagged == 0:
            events.append(
                ErrorEvent(
                    "out_of_bounds",
                    f"nccl-tests reports {run.out_of_bounds} out-of-bounds values "
                    "(wrong results) that no table row shows",
                )
            )
        for event in events:
            size = event.size_bytes
            tl_of = None if size is None else run.first_of_size.get(size)
            ev_extra: dict[str, Any] = {
                "event": event.kind,
                "line": event.line,
                "nccl_tests": facts,
            }
            if extra:
                ev_extra.update(extra)
            yield Row(
                **common,
                dtype=tl_of.dtype if tl_of else None,
                redop=tl_of.redop if tl_of else None,
                root=tl_of.root if tl_of else None,
                in_place=event.in_place,
                size_bytes=event.size_bytes,
                count=tl_of.count if tl_of else None,
                extra=ev_extra,
                status="error",
                error=describe_event(run, event, source),
            )


def rows_from_runs(runs: Iterable[TestRun], **kwargs: Any) -> list[Row]:
    """Rows of parsed tests (see iter_rows), as a list."""
    return list(iter_rows(runs, **kwargs))


def _common(
    run: TestRun,
    *,
    run_id: str | None,
    build: str | None,
    source: str | None,
    env: dict[str, str] | None,
    versions: dict[str, str] | None,
    world_size: int | None,
    nodes: int | None,
    path: str | None,
) -> dict[str, Any]:
    """The fields every row of a run shares."""
    h = run.header
    host = h.ranks[0].host if h.ranks and h.ranks[0].rank == 0 else None
    rid = run_id or f"nccl-tests-{Path(run.source).stem or 'log'}"
    if run.index and run_id is None:
        rid += f"-{run.index}"
    common: dict[str, Any] = {
        "run_id": rid,
        "kind": "collective",
        "backend": BACKEND,
        "op": run.op or "unknown",
        "host": host,
        "nodes": h.nodes() if nodes is None else nodes,
        "world_size": h.world_size() or world_size or run.nccl_world_size(),
        "graph": None if h.graph_launches is None else h.graph_launches > 0,
        "iters": h.iters,
        "path": path,
        "source": source or run.source,
        "env": {**shaping_env(h.env), **(env or {})},
        "versions": {**_versions(run), **(versions or {})},
    }
    label = build or host or Path(run.source).stem or None
    if label:
        common["build"] = label
    return common


def _measured_row(
    common: dict[str, Any],
    tl: TableLine,
    m: Measurement,
    redop: str | None,
    root: int | None,
    facts: dict[str, Any],
    extra: dict[str, Any] | None,
) -> Row:
    wrong = m.wrong
    status, error = "ok", None
    row_extra: dict[str, Any] = {"line": tl.line}
    if m.max_error is not None:
        row_extra["max_error"] = m.max_error
        bound = _old_bound(tl.dtype, common["world_size"])
        wrong = 1 if m.max_error > bound else 0
        if wrong:
            error = (
                f"out of bounds: largest relative error {m.max_error:g} above "
                f"nccl-tests' bound {bound:g}"
            )
    elif wrong:
        error = f"{wrong} wrong elements (nccl-tests #wrong)"
    if wrong:
        status = "error"
    if m.cputime:
        row_extra["cputime"] = True
    for key, value in (
        ("i_min_us", m.i_min_us),
        ("i_max_us", m.i_max_us),
        ("i_cv_pct", m.i_cv_pct),
    ):
        if value is not None:
            row_extra[key] = value
    if tl.timestamp:
        row_extra["timestamp"] = tl.timestamp
    if not tl.complete:
        row_extra["line_complete"] = False
    row_extra["nccl_tests"] = facts
    if extra:
        row_extra.update(extra)
    own = {
        "dtype": tl.dtype,
        "redop": redop,
        "root": root,
        "in_place": m.in_place,
        "size_bytes": tl.size_bytes,
        "count": tl.count,
        "time_us": m.time_us,
        "time_us_p50": m.p50_us,
        "time_us_p99": m.i_p99_us,
        "algbw_gbps": m.algbw_gbps,
        "busbw_gbps": m.busbw_gbps,
        "wrong": wrong,
        "extra": row_extra,
        "status": status,
        "error": error,
    }
    return _row(common, own)


# Every Row field with its plain default (None where it has none or a factory), in field
# order; and the fields a row must be given (no default, or a factory's: a clock, a host).
_ROW_TEMPLATE = {
    f.name: None if f.default is dataclasses.MISSING else f.default for f in dataclasses.fields(Row)
}
_ROW_GIVEN = frozenset(f.name for f in dataclasses.fields(Row) if f.default is dataclasses.MISSING)

# The common dict last checked (held, so that its id is not another's), whether its keys
# are all fields, and the fields it leaves to be given.
_CHECKED: list[Any] = [None, False, frozenset()]


def _row(common: dict[str, Any], own: dict[str, Any]) -> Row:
    """``Row(**common, **own)``, built as the dataclass builds it (its fields in order, the
    defaults of those not given) without the call of its forty-odd arguments: a table row
    is made for every size and placement of a long log. Any other set of keys (one that
    leaves a factory's field out, or is not a field) goes through ``Row``."""
    if _CHECKED[0] is not common:  # a run's rows share their common dict: checked once
        _CHECKED[:] = [common, common.keys() <= _ROW_TEMPLATE.keys(), _ROW_GIVEN - common.keys()]
    if _CHECKED[1] and own.keys() <= _ROW_TEMPLATE.keys() and _CHECKED[2] <= own.keys():
        data = _ROW_TEMPLATE.copy()
        data.update(common)
        data.update(own)
        row = object.__new__(Row)
        row.__dict__ = data
        return row
    return Row(**common, **own)
