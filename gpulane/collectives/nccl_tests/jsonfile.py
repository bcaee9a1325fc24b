"""nccl-tests' ``-J`` JSON output (version 3), read as a stream of events.

The file is one JSON document: its ``config`` comes before ``results`` and the summary
after them. :func:`iter_json_runs` reads it through ijson one result at a time, so memory
holds the header and the results not yet handed over, not the file. A file cut off (a
killed run) or damaged is read as far as it goes: every complete result is kept, and the
run gets a cut-off error. A number is taken only once what follows it shows that it
ended: the last number before a cut may be the head of a longer one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import ijson

from gpulane.collectives.nccl_tests.model import (
    Columns,
    ErrorEvent,
    Measurement,
    RankInfo,
    TableLine,
    TestRun,
    resolve_op,
)
from gpulane.collectives.nccl_tests.table import finite, to_int
from gpulane.errors import ParseError

_HALF = ["time", "algbw", "busbw", "wrong"]
_KNOWN = ("config", "results", "nccl_version")


class _Bytes:
    """A binary file object over (line number, line) pairs, for ijson; ``number`` is the
    last line handed to the parser."""

    def __init__(self, lines: Iterable[tuple[int, str]]) -> None:
        self._lines = iter(lines)
        self.number = 0
        self.damage: ParseError | None = None  # why the input could not be read further

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson asks for nothing first, to learn that this is binary
            return b""
        parts: list[str] = []
        got = 0
        try:
            for number, line in self._lines:
                self.number = number
                parts.append(line)
                got += len(line) + 1
                if got >= size > 0:
                    break
        except ParseError as err:
            if self.number == 0:
                raise
            self.damage = err  # the parser sees the end of the input here
        return ("\n".join(parts) + "\n").encode() if parts else b""


def _jint(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str):
        return to_int(value.strip())
    return None


def _jfloat(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return finite(float(value))
    if isinstance(value, str):
        try:
            return finite(float(value))
        except ValueError:
            return None
    return None


def _jbool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value.strip().lower())
    if isinstance(value, int):
        return bool(value)
    return None


def _json_line(res: Any, n: int) -> TableLine | None:
    if not isinstance(res, dict):
        return None
    size = _jint(res.get("size"))
    if size is None:
        return None
    tl = TableLine(
        line=n,
        size_bytes=size,
        count=_jint(res.get("count")),
        dtype=str(res["type"]) if isinstance(res.get("type"), str) else None,
        redop=str(res["redop"]).strip() if isinstance(res.get("redop"), str) else None,
        root=_jint(res.get("root")),
    )
    for key, in_place in (("out_of_place", False), ("in_place", True)):
        body = res.get(key)
        if not isinstance(body, dict):
            continue
        cputime = "cpu_time" in body and "time" not in body
        nwrong = body.get("nwrong")
        wrong = _jint(nwrong) if nwrong is not None else None
        m = Measurement(
            in_place=in_place,
            time_us=_jfloat(body.get("cpu_time" if cputime else "time")),
            algbw_gbps=_jfloat(body.get("alg_bw")),
            busbw_gbps=_jfloat(body.get("bus_bw")),
            wrong=wrong,
            cputime=cputime,
        )
        per = res.get(f"{key}_per_iter")
        if isinstance(per, dict):
            m.i_min_us = _jfloat(per.get("min_us"))
            m.i_max_us = _jfloat(per.get("max_us"))
            m.i_p99_us = _jfloat(per.get("p99_us"))
            m.p50_us = _jfloat(per.get("p50_us"))
            m.i_cv_pct = _jfloat(per.get("cv_pct"))
        tl.results.append(m)
    return tl


def _apply_head(run: TestRun, data: dict[str, Any]) -> None:
    """What the JSON says before its results: the command, environment and config."""
    h = run.header
    args = data.get("args")
    if isinstance(args, list) and args:
        h.test = Path(str(args[0])).name or None
        h.command = " ".join(str(a) for a in args)
    env: dict[str, str] = {}
    env_list = data.get("env")
    for item in env_list if isinstance(env_list, list) else []:
        if isinstance(item, str) and "=" in item:
            k, v = item.split("=", 1)
            env[k] = v
    h.env = env
    h.nccl_library = _jint(data.get("nccl_version"))
    h.start_time = data.get("start_time") if isinstance(data.get("start_time"), str) else None
    cfg = data.get("config")
    if not isinstance(cfg, dict):
        return
    h.nthreads = _jint(cfg.get("nthreads"))
    h.ngpus = _jint(cfg.get("ngpus"))
    h.min_bytes = _jint(cfg.get("minimum_bytes"))
    h.max_bytes = _jint(cfg.get("maximum_bytes"))
    h.step_factor = _jint(cfg.get("step_factor"))
    h.step_bytes = _jint(cfg.get("step_bytes"))
    h.warmup_iters = _jint(cfg.get("warmup_iters"))
    h.iters = _jint(cfg.get("iterations"))
    h.agg_iters = _jint(cfg.get("aggregated_iterations"))
    h.validation = _jint(cfg.get("validation"))
    h.graph_launches = _jint(cfg.get("graph"))
    h.per_iter = bool(_jbool(cfg.get("per_iter_timing")))
    h.parallel_init = bool(_jbool(cfg.get("parallel_init")))
    h.blocking = "enabled" if _jbool(cfg.get("blocking_collectives")) else None
    devices = cfg.get("devices")
    if isinstance(devices, list):
        h.processes = len(devices) or None
        for d in devices:
            rank = _jint(d.get("rank")) if isinstance(d, dict) else None
            if not isinstance(d, dict) or rank is None:
                continue
            h.ranks.append(
                RankInfo(
                    rank=rank,
                    group=_jint(d.get("group")),
                    pid=_jint(d.get("pid")),
                    host=str(d.get("hostname") or ""),
                    device=_jint(d.get("device")) or 0,
                    bus_id=str(d.get("device_hex") or ""),
                    gpu=str(d.get("device_info") or ""),
                )
            )


def _apply_tail(run: TestRun, data: dict[str, Any], complete: bool, line: int) -> None:
    """What the JSON says after its results: the summary, errors, end time; a cut."""
    h = run.header
    h.end_time = data.get("end_time") if isinstance(data.get("end_time"), str) else None
    oob = data.get("out_of_bounds")
    if isinstance(oob, dict):
        run.out_of_bounds = _jint(oob.get("count"))
        run.out_of_bounds_ok = _jbool(oob.get("okay"))
    avg = data.get("average_bus_bandwidth")
    if isinstance(avg, dict):
        run.avg_busbw_gbps = _jfloat(avg.get("bandwidth"))
        check = avg.get("okay")
        run.avg_busbw_check = (
            None if check in (None, "unchecked") else ("OK" if _jbool(check) else "FAILED")
        )
    errors = data.get("errors")
    if isinstance(errors, list):
        msgs = [str(e) for e in errors if isinstance(e, str) and e.strip()]
        if msgs:
            run.last_error = "; ".join(msgs)
    run.concluded = complete and h.end_time is not None
    if not complete or not run.finished:
        last = run.last_line
        where = f"after {last.size_bytes} B" if last else "before the first result"
        msg = f"the JSON output ends {where}, before the out-of-bounds summary"
        if run.last_error:
            msg += f" (nccl-tests' last error: {run.last_error})"
        run.errors.append(ErrorEvent("cut_off", msg, line=line))


def _events(stream: _Bytes) -> Iterator[tuple[str, str, Any]]:
    """ijson's events, each given once the next one shows it complete; (.., "error", ..)
    at a cut or damage, after dropping a number that may have been cut."""
    held: tuple[str, str, Any] | None = None
    try:
        for event in ijson.parse(stream, use_float=True):
            if held is not None:
                yield held
            held = event
    except ijson.JSONError:
        if held is not None and held[1] != "number":
            yield held
        yield ("", "error", None)
        return
    if held is not None:
        yield held


def iter_json_runs(
    lines: Iterable[tuple[int, str]],
    source: str,
    op: str | None = None,
    hand_over: int | None = None,
) -> Iterator[TestRun]:
    """The one test of an nccl-tests JSON file, handed over when it ends (and, with
    ``hand_over=N``, each time N results were read: ``done`` False); ParseError when the
    file is not nccl-tests JSON."""
    stream = _Bytes(lines)
    run = TestRun(index=0, source=source, format="json", first_line=1)
    data: dict[str, Any] = {}  # the top-level values other than results
    head_applied = complete = in_results = False
    key: str | None = None  # the top-level key being read; None before the object opens
    builder: ijson.ObjectBuilder | None = None  # the value being read
    depth = results = 0
    for _prefix, event, value in _events(stream):
        if event == "error":
            break
        if builder is None:
            if key is None:
                if event != "start_map":
                    raise ParseError(
                        "not nccl-tests JSON: the top level is not an object", source, 1
                    )
                key = ""
                continue
            if not in_results:
                if event == "map_key":
                    key = str(value)
                    continue
                if event == "end_map":
                    complete = True
                    continue
                if key == "results" and event == "start_array":
                    if not head_applied:
                        _apply_head(run, data)
                        head_applied = True
                    run.columns = Columns(
                        ["size", "count", "type", "redop", "root"], [_HALF, _HALF]
                    )
                    in_results = True
                    continue
            elif event == "end_array":
                in_results = False
                continue
            builder = ijson.ObjectBuilder()
            depth = 0
        builder.event(event, value)
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
        if depth > 0:
            continue
        if in_results:
            results += 1
            tl = _json_line(builder.value, results)
            if tl is not None:
                run.add_line(tl)
                if hand_over and len(run.lines) >= hand_over:
                    resolve_op(run, source, op)
                    yield run
        else:
            data[str(key)] = builder.value
        builder = None
    if key is None:
        raise ParseError("not nccl-tests JSON: no object", source, 1)
    if run.columns is None and not any(k in data for k in _KNOWN):
        raise ParseError(f"not nccl-tests JSON: none of {', '.join(map(repr, _KNOWN))}", source, 1)
    if not head_applied:
        _apply_head(run, data)
    if stream.damage is not None:
        run.errors.append(ErrorEvent("damaged", stream.damage.reason, line=stream.damage.line))
    _apply_tail(run, data, complete, stream.number)
    resolve_op(run, source, op)
    run.done = True
    yield run


def parse_json(text: str, source: str = "<text>", op: str | None = None) -> TestRun:
    """One test from nccl-tests' ``-J`` JSON (cut-off files read as far as they go)."""
    (run,) = iter_json_runs(enumerate(text.splitlines(), start=1), source, op)
    return run
