"""nccl-tests output, text or ``-J`` JSON, as gpulane result rows.

Pure functions from text to dataclasses: :func:`parse_log` reads one captured log (any
number of tests concatenated, NCCL INFO/WARN lines and MPI messages interleaved, runs
that failed or were cut off) into :class:`TestRun` objects; :func:`rows_from_log` turns
them into :class:`gpulane.record.Row` (one per size and placement, plus one error row per
failure); :func:`main` is ``gpulane parse nccl-tests FILE... [--json] [--out DIR]``.

Formats read, from nccl-tests' own printing code (``src/util.cu``, ``src/common.cu``):

* the header: ``# nccl-tests version``, ``# Collective test starting``, ``# nThread ...``
  (old versions without ``agg iters``/``graph``), the device list (``#  Rank  0 Group  0
  Pid ... [0000:00:06] NVIDIA H200``, old ``#   Rank  0 Pid ... [0x36] Tesla V100``,
  4-digit ranks, lists elided with ``...``);
* the table: ``size count type [redop] [root]`` then, per placement (out-of-place first),
  ``time|cputime algbw busbw #wrong|error`` and, with ``-I 1``, ``i_min i_max i_p99 i_cv%``,
  and with ``-S 1`` a trailing timestamp; values ``N/A``, ``inf``, ``nan``;
* the footer: ``# Out of bounds values : N OK|FAILED``, ``# Avg bus bandwidth : X``;
* failures: ``host: Test NCCL failure file:line '...'``, ``Test CUDA failure``,
  `` .. host pid N: Test failure file:line``, ``Test timeout``, aborts reported by the
  process, mpirun or srun, and logs that simply end.

Old nccl-tests (before 2.13) printed ``error`` (the largest relative error) instead of a
count of wrong elements; a row is then out of bounds when that error exceeds the bound
nccl-tests used (1e-2 half/bfloat16, 1e-5 float, 1e-12 double, 0 otherwise, times
nranks-1), and ``wrong`` is 1 ("at least one") with the error kept in ``extra.max_error``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane import __version__
from gpulane.collectives.spec import COLLECTIVES, DTYPES, collective
from gpulane.errors import InputError, ParseError
from gpulane.record import Row, RowWriter, write_parquet

BACKEND = "nccl-tests"

# Environment variables that shape a result, kept from a log's JSON env or command line.
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL", "CUDA_VISIBLE_DEVICES", "GLOO_", "OMPI_MCA", "UCX_", "FI_")
# Most ranks listed in each row's extra (the run's facts); larger runs get a summary.
MAX_RANKS_IN_ROWS = 64

# Old nccl-tests' bound on the relative error per type (times nranks - 1).
_OLD_DELTA_MAX = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}

# nccl-tests' exit statuses (testResult_t).
EXIT_STATUS = {
    1: "internal error",
    2: "CUDA error",
    3: "NCCL error",
    4: "timeout",
    5: "not implemented",
    6: "invalid usage",
    7: "wrong results or bandwidth below the -a check",
}


# --------------------------------------------------------------------------- dataclasses


@dataclass
class RankInfo:
    rank: int
    group: int | None
    pid: int | None
    host: str
    device: int
    bus_id: str
    gpu: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "group": self.group,
            "pid": self.pid,
            "host": self.host,
            "device": self.device,
            "bus_id": self.bus_id,
            "gpu": self.gpu,
        }


@dataclass
class Header:
    """What nccl-tests prints before its table (or writes in the JSON ``config``)."""

    test: str | None = None  # program name, e.g. all_reduce_perf
    version: str | None = None  # nccl-tests version
    nccl_headers: int | None = None
    nccl_library: int | None = None
    nthreads: int | None = None
    ngpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    step_factor: int | None = None
    step_bytes: int | None = None
    warmup_iters: int | None = None
    iters: int | None = None
    agg_iters: int | None = None
    validation: int | None = None
    graph_launches: int | None = None
    unalign: int | None = None
    per_iter: bool = False
    blocking: str | None = None
    parallel_init: bool = False
    ranks: list[RankInfo] = field(default_factory=list)
    devices_elided: bool = False  # "..." in the device list
    processes: int | None = None  # JSON: entries in config.devices (one per process)
    reduced_max_bytes: int | None = None
    json_output: str | None = None
    command: str | None = None  # a "Running: ..." or command-line echo before the test
    env: dict[str, str] = field(default_factory=dict)
    start_time: str | None = None  # JSON, local time of the machine that ran it
    end_time: str | None = None

    @property
    def nccl_version(self) -> str | None:
        return nccl_version_string(self.nccl_library)

    def world_size(self) -> int | None:
        """Ranks of the run, when the log says; None for fragments and elided lists."""
        if self.processes is not None and self.nthreads and self.ngpus:
            return self.processes * self.nthreads * self.ngpus
        if self.ranks and not self.devices_elided:
            numbers = sorted(r.rank for r in self.ranks)
            per_process = (self.nthreads or 1) * (self.ngpus or 1)
            if numbers == list(range(len(numbers))) and len(numbers) % per_process == 0:
                return len(numbers)
        return None

    def nodes(self) -> int | None:
        if self.world_size() is None or not self.ranks or self.processes is not None:
            return None
        return len({r.host for r in self.ranks})

    def facts(self) -> dict[str, Any]:
        """The header as a JSON-friendly dict (ranks listed up to MAX_RANKS_IN_ROWS)."""
        out: dict[str, Any] = {
            k: v
            for k, v in (
                ("test", self.test),
                ("version", self.version),
                ("nccl_headers", self.nccl_headers),
                ("nccl_library", self.nccl_library),
                ("nthreads", self.nthreads),
                ("ngpus", self.ngpus),
                ("min_bytes", self.min_bytes),
                ("max_bytes", self.max_bytes),
                ("step_factor", self.step_factor),
                ("step_bytes", self.step_bytes),
                ("warmup_iters", self.warmup_iters),
                ("iters", self.iters),
                ("agg_iters", self.agg_iters),
                ("validation", self.validation),
                ("graph_launches", self.graph_launches),
                ("unalign", self.unalign),
                ("blocking", self.blocking),
                ("reduced_max_bytes", self.reduced_max_bytes),
                ("command", self.command),
                ("start_time", self.start_time),
            )
            if v is not None
        }
        if self.per_iter:
            out["per_iter"] = True
        if self.parallel_init:
            out["parallel_init"] = True
        if len(self.ranks) <= MAX_RANKS_IN_ROWS:
            out["ranks"] = [r.to_dict() for r in self.ranks]
        out["ranks_listed"] = len(self.ranks)
        out["hosts"] = sorted({r.host for r in self.ranks})[:MAX_RANKS_IN_ROWS]
        out["gpus"] = sorted({r.gpu for r in self.ranks})
        if self.devices_elided:
            out["devices_elided"] = True
        return out


@dataclass
class Measurement:
    """One placement of one table line."""

    in_place: bool
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None  # wrong elements (new format), None for N/A or old format
    max_error: float | None = None  # old format: the largest relative error
    cputime: bool = False
    i_min_us: float | None = None
    i_max_us: float | None = None
    i_p99_us: float | None = None
    i_cv_pct: float | None = None
    p50_us: float | None = None  # JSON per-iteration report only
    text: dict[str, str] = field(default_factory=dict)  # the printed tokens, by column


@dataclass
class TableLine:
    line: int  # 1-based line in the source (JSON: result index + 1)
    size_bytes: int
    count: int | None
    dtype: str | None
    redop: str | None  # None where the table has no redop column
    root: int | None  # None where the table has no root column
    results: list[Measurement] = field(default_factory=list)
    complete: bool = True
    timestamp: str | None = None


@dataclass
class ErrorEvent:
    kind: str  # nccl, cuda, test, timeout, abort, usage, cut_off, out_of_bounds, json, damaged
    message: str
    line: int | None = None
    size_bytes: int | None = None
    in_place: bool | None = None
    details: list[str] = field(default_factory=list)
    count: int = 1  # how many processes reported the same thing


@dataclass
class Columns:
    pre: list[str]  # size, count, type, [redop], [root]
    groups: list[list[str]]  # per placement: time, algbw, busbw, [wrong|error], [i_*]
    timestamp: bool = False
    cputime: bool = False

    def flat(self) -> list[tuple[str, int]]:
        """(column, placement index or -1) in print order."""
        out = [(c, -1) for c in self.pre]
        for g, cols in enumerate(self.groups):
            out += [(c, g) for c in cols]
        if self.timestamp:
            out += [("date", -1), ("clock", -1)]
        return out


@dataclass
class TestRun:
    """One nccl-tests test (one binary's run) found in a log."""

    index: int
    source: str
    format: str  # text or json
    first_line: int
    header: Header = field(default_factory=Header)
    columns: Columns | None = None
    lines: list[TableLine] = field(default_factory=list)
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    avg_busbw_gbps: float | None = None
    avg_busbw_check: str | None = None  # OK / FAILED when nccl-tests was given -a checks
    concluded: bool = False
    last_error: str | None = None  # "# error: ..." (ncclGetLastError at exit)
    memory: str | None = None  # "# GPU memory usage : ..."
    errors: list[ErrorEvent] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # NCCL WARN lines
    op_hint: str | None = None  # from a command line before the test
    op: str | None = None
    op_source: str = "unknown"
    stage: int = 0

    @property
    def finished(self) -> bool:
        """The log reached nccl-tests' summary (the out-of-bounds line)."""
        return self.out_of_bounds is not None

    @property
    def world_size(self) -> int | None:
        return self.header.world_size()

    def measured(self) -> int:
        return sum(len(ln.results) for ln in self.lines)


# ----------------------------------------------------------------------------- helpers


def nccl_version_string(code: int | None) -> str | None:
    """NCCL_VERSION_CODE as x.y.z: 22803 -> 2.28.3, old codes 2708 -> 2.7.8."""
    if code is None or code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    return f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"


def format_float(value: float, width: int) -> str:
    """A number as nccl-tests prints time and bandwidth: as many decimals (2, 1, 0) as
    fit ``width``, else exponent notation."""
    for spec in (".2f", ".1f", ".0f"):
        text = f"{value:>{width}{spec}}"
        if len(text) <= width:
            return text
    return f"{value:>{width}.{1 if width >= 7 else 0}e}"


def shaping_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)}


def canonical_op(name: str | None) -> str | None:
    """all_reduce_perf / allreduce / ./build/all_reduce_perf -> all_reduce; others as named."""
    if not name:
        return None
    base = name.strip().rsplit("/", 1)[-1]
    try:
        return collective(base).name
    except InputError:
        base = base.removesuffix("_perf").removesuffix("_mpi")
        return base.lower() or None


_FILE_OP_RE = re.compile(
    r"(?<![a-z])(all_?reduce|all_?gather|reduce_?scatter|all_?to_?allv?|alltoallv?|broadcast|"
    r"bcast|send_?recv|hypercube|reduce|gather|scatter)(?![a-z])"
)


def op_from_filename(source: str) -> str | None:
    name = Path(source).name.lower().replace("-", "_")
    m = _FILE_OP_RE.search(name)
    return canonical_op(m.group(1)) if m else None


# Integers of at most 30 digits (Python refuses to convert very long digit strings).
_UINT_RE = re.compile(r"^\d{1,30}$", re.ASCII)
_INT_RE = re.compile(r"^[-+]?\d{1,30}$", re.ASCII)
_FLOAT_RE = re.compile(
    r"^[-+]?(?:\d{1,40}\.?\d{0,40}|\.\d{1,40})(?:[eE][-+]?\d{1,4})?$|^[-+]?(?:inf|nan)$",
    re.I | re.ASCII,
)
_WORD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DATE_RE = re.compile(r"^\d{4}-\d\d-\d\d$")
_CLOCK_RE = re.compile(r"^\d\d:\d\d:\d\d$")


def _to_int(text: str | None) -> int | None:
    if text is None or not _INT_RE.match(text.strip()):
        return None
    return int(text)


def _finite(value: float | None) -> float | None:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return value


_MISSING = object()


def _accept(col: str, tok: str) -> Any:
    """The value of a token in a column, or _MISSING when it cannot be that column."""
    if col in ("size", "count"):
        return int(tok) if _UINT_RE.match(tok) else _MISSING
    if col == "root":
        return int(tok) if _INT_RE.match(tok) else _MISSING
    if col in ("type", "redop"):
        return tok if _WORD_RE.match(tok) and tok.lower() not in ("inf", "nan") else _MISSING
    if col in ("wrong", "error"):
        if tok == "N/A":
            return None
        if col == "wrong":  # a count: a decimal there is another column's value
            return float(tok) if _UINT_RE.match(tok) else _MISSING
        return float(tok) if _FLOAT_RE.match(tok) else _MISSING
    if col == "date":
        return tok if _DATE_RE.match(tok) else _MISSING
    if col == "clock":
        return tok if _CLOCK_RE.match(tok) else _MISSING
    # time, algbw, busbw, i_min, i_max, i_p99, i_cv
    if _FLOAT_RE.match(tok):
        return float(tok)
    return _MISSING


# -------------------------------------------------------------------------- text parsing

_LABEL_RE = re.compile(
    r"#wrong|cputime|timestamp|i_min|i_max|i_p99|i_cv%?|size|count|type|redop|root|"
    r"time|algbw|busbw|error"
)
_VERSION_RE = re.compile(
    r"^#\s*nccl-tests version\s+(\S+)(?:\s+nccl-headers=(\d+))?(?:\s+nccl-library=(\d+))?"
)
_STARTING_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED_RE = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_NTHREAD_RE = re.compile(r"^#\s*nThread\s+\d+")
_JSON_OUT_RE = re.compile(r"^#\s*Writing JSON output to\s+(\S+)")
_RANK_RE = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[([^\]]*)\]\s*(.*?)\s*$"
)
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(-?\d+)\s*(\w+)?")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_REDUCING_RE = re.compile(r"^#\s*Reducing maxBytes to\s+(\d+)")
_ERROR_LINE_RE = re.compile(r"^#\s*error:\s*(.*?)\s*$")
_MEMORY_RE = re.compile(r"^#\s*GPU memory usage\s*:\s*(.*?)\s*$")
_PERF_CMD_RE = re.compile(r"(?:^|[\s/=])([A-Za-z0-9_]+_perf(?:_mpi)?)(?=\s|$)")
_ENV_ASSIGN_RE = re.compile(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=(\S*)")

_NCCL_FAIL_RE = re.compile(
    r"(?:(\S+):\s+)?Test NCCL failure\s+(\S+:\d+)\s*(?:'(.*?)'?\s*$)?", re.DOTALL
)
_CUDA_FAIL_RE = re.compile(r"(?:(\S+):\s+)?Test CUDA failure\s+(\S+:\d+)\s*(?:'(.*?)'?\s*$)?")
_TEST_FAIL_RE = re.compile(r"\.\.\s+(\S+)\s+pid\s+(\d+):\s+Test failure\s+(\S+:\d+)")
_TIMEOUT_RE = re.compile(r"(?:(\S+):\s+)?Test timeout\s+\((\d+)s\)\s*(\S+:\d+)?")
_USAGE_RES = (
    re.compile(r"Invalid number of GPUs:.*"),
    re.compile(r"invalid sizes? (?:for|specified for) .*"),
    re.compile(r"Incompatible NCCL versions.*"),
    re.compile(r"Device implementation \d+ is not supported.*"),
    re.compile(r"Option -[A-Z] \(.*\) requires NCCL.*"),
)
_ABORT_RES = (
    re.compile(r"mpirun noticed that process rank \d+ .*"),
    re.compile(r"MPI_ABORT was invoked on rank \d+.*"),
    re.compile(r"\*\*\* Process received signal \*\*\*"),
    re.compile(r"Signal: [A-Za-z ]+ \(\d+\)"),
    re.compile(r"terminate called after throwing.*"),
    re.compile(r"srun: error: .*"),
    re.compile(r"slurmstepd: error: .*"),
    re.compile(r"Primary job\s+terminated normally, but \d+ process(?:es)? returned.*"),
    re.compile(r"mpirun detected that one or more processes exited with non-zero status.*"),
    re.compile(r"^(?:Segmentation fault|Aborted|Killed|Bus error)\b.*"),
    re.compile(r".*\(core dumped\).*"),
)
_WARN_RE = re.compile(r"NCCL WARN\s*(.*?)\s*$")
_NOISE_RE = re.compile(r"NCCL (?:INFO|TRACE)\b")

# Header stages: a header line of stage s starts a new test when the current one is at s.
_ST_JSON, _ST_VERSION, _ST_STARTING, _ST_NTHREAD, _ST_DEVICES = 0, 1, 2, 3, 4
_ST_TABLE, _ST_FOOTER, _ST_CONCLUDED = 5, 6, 7


def parse_columns(line: str) -> Columns | None:
    """The column layout from the ``#  size  count  type ...`` header line."""
    labels = _LABEL_RE.findall(line.lstrip("#"))
    pre: list[str] = []
    groups: list[list[str]] = []
    stamp = cputime = False
    for lab in labels:
        name = {"#wrong": "wrong", "i_cv%": "i_cv", "cputime": "time"}.get(lab, lab)
        if lab == "cputime":
            cputime = True
        if name == "time":
            groups.append(["time"])
        elif name == "timestamp":
            stamp = True
        elif not groups:
            pre.append(name)
        else:
            groups[-1].append(name)
    if pre[:3] != ["size", "count", "type"] or not groups or len(groups) > 2:
        return None
    if any(p not in ("redop", "root") for p in pre[3:]) or len(set(pre)) != len(pre):
        return None
    for g in groups:
        if g[:3] != ["time", "algbw", "busbw"] or len(set(g)) != len(g):
            return None
    return Columns(pre, groups, stamp, cputime)


def _parse_nthread(line: str, h: Header) -> None:
    def num(pattern: str) -> int | None:
        m = re.search(pattern, line)
        return _to_int(m.group(1)) if m else None

    h.nthreads = num(r"nThread\s+(\d+)")
    h.ngpus = num(r"nGpus\s+(\d+)")
    h.min_bytes = num(r"minBytes\s+(\d+)")
    h.max_bytes = num(r"maxBytes\s+(\d+)")
    m = re.search(r"step:\s*(\d+)\((factor|bytes)\)", line)
    if m:
        if m.group(2) == "factor":
            h.step_factor = _to_int(m.group(1))
        else:
            h.step_bytes = _to_int(m.group(1))
    h.warmup_iters = num(r"warmup iters:\s*(\d+)")
    h.iters = num(r"(?<!warmup )(?<!agg )iters:\s*(\d+)")
    h.agg_iters = num(r"agg iters:\s*(\d+)")
    h.validation = num(r"validation:\s*(\d+)")
    h.graph_launches = num(r"graph:\s*(\d+)")
    h.unalign = num(r"unalign:\s*(\d+)")


class _TextParser:
    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.lines = text.splitlines()
        self.runs: list[TestRun] = []
        self.cur: TestRun | None = None
        self.hint_cmd: str | None = None
        self.pending: TableLine | None = None  # incomplete table line awaiting more tokens
        self.pending_values: list[tuple[str, int, Any, str]] = []
        self.early_errors: list[ErrorEvent] = []

    # -- runs
    def _new_run(self, lineno: int) -> TestRun:
        self._close_pending()
        run = TestRun(index=len(self.runs), source=self.source, format="text", first_line=lineno)
        if self.hint_cmd:
            self._apply_command(run, self.hint_cmd)
            self.hint_cmd = None
        run.errors.extend(self.early_errors)
        self.early_errors = []
        self.runs.append(run)
        self.cur = run
        return run

    def _run_for(self, stage: int, lineno: int) -> TestRun:
        cur = self.cur
        if cur is None or cur.stage >= stage:
            cur = self._new_run(lineno)
        cur.stage = stage
        return cur

    @staticmethod
    def _apply_command(run: TestRun, cmd: str) -> None:
        run.header.command = cmd.strip()
        m = _PERF_CMD_RE.search(cmd)
        if m:
            run.op_hint = m.group(1)
        head = cmd.split(m.group(1))[0] if m else cmd
        run.header.env.update(dict(_ENV_ASSIGN_RE.findall(head)))

    # -- main loop
    def parse(self) -> list[TestRun]:
        for i, raw in enumerate(self.lines, start=1):
            line = raw.replace("\x00", "").rstrip("\r\n")
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                self._hash_line(stripped, i)
            elif self._table_line(line, i):
                pass
            else:
                self._other_line(stripped, i)
        self._close_pending()
        if not self.runs and self.early_errors:
            nccl_specific = [e for e in self.early_errors if e.kind in ("nccl", "cuda", "test")]
            if nccl_specific:
                run = self._new_run(self.early_errors[0].line or 1)
                run.errors = list(self.early_errors)
                self.early_errors = []
        for run in self.runs:
            self._finish(run)
        return self.runs

    def _hash_line(self, s: str, i: int) -> None:
        m = _JSON_OUT_RE.match(s)
        if m:
            self._run_for(_ST_JSON, i).header.json_output = m.group(1)
            return
        m = _VERSION_RE.match(s)
        if m:
            run = self._run_for(_ST_VERSION, i)
            run.header.version = m.group(1)
            run.header.nccl_headers = _to_int(m.group(2))
            run.header.nccl_library = _to_int(m.group(3))
            return
        m = _STARTING_RE.match(s)
        if m:
            self._run_for(_ST_STARTING, i).header.test = m.group(1)
            return
        if _NTHREAD_RE.match(s):
            _parse_nthread(s, self._run_for(_ST_NTHREAD, i).header)
            return
        m = _RANK_RE.match(s)
        if m:
            cur = self.cur
            run = self._run_for(_ST_DEVICES, i) if cur is None or cur.stage > _ST_DEVICES else cur
            run.stage = _ST_DEVICES
            run.header.ranks.append(
                RankInfo(
                    rank=int(m.group(1)),
                    group=_to_int(m.group(2)),
                    pid=_to_int(m.group(3)),
                    host=m.group(4),
                    device=int(m.group(5)),
                    bus_id=m.group(6).strip(),
                    gpu=m.group(7),
                )
            )
            return
        if "size" in s and "count" in s and "time" in s and "(B)" not in s:
            cols = parse_columns(s)
            if cols is not None:
                self._close_pending()
                run = self._run_for(_ST_TABLE, i)
                run.columns = cols
                return
        cur = self.cur
        if cur is None:
            return
        m = _OOB_RE.match(s)
        if m:
            self._close_pending()
            cur.stage = max(cur.stage, _ST_FOOTER)
            cur.out_of_bounds = _to_int(m.group(1))
            cur.out_of_bounds_ok = (m.group(2) or "").upper() == "OK" or cur.out_of_bounds == 0
            return
        m = _AVG_RE.match(s)
        if m:
            self._close_pending()
            cur.stage = max(cur.stage, _ST_FOOTER)
            try:
                cur.avg_busbw_gbps = float(m.group(1))
            except ValueError:
                cur.avg_busbw_gbps = None
            cur.avg_busbw_check = m.group(2)
            return
        m = _CONCLUDED_RE.match(s)
        if m:
            self._close_pending()
            cur.stage = _ST_CONCLUDED
            cur.concluded = True
            cur.header.test = cur.header.test or m.group(1)
            return
        m = _REDUCING_RE.match(s)
        if m:
            cur.header.reduced_max_bytes = _to_int(m.group(1))
            return
        m = _ERROR_LINE_RE.match(s)
        if m:
            cur.last_error = m.group(1) or None
            return
        m = _MEMORY_RE.match(s)
        if m:
            cur.memory = m.group(1)
            return
        if s.startswith("# Per-Iteration Report"):
            cur.header.per_iter = True
        elif s.startswith("# Blocking Enabled"):
            cur.header.blocking = s.lstrip("# ").strip()
        elif s.startswith("# Parallel Init Enabled"):
            cur.header.parallel_init = True
        elif s.strip("# ") == "..." and cur.stage <= _ST_DEVICES:
            cur.header.devices_elided = True

    def _other_line(self, s: str, i: int) -> None:
        if s == "...":
            if self.cur is not None and self.cur.stage <= _ST_DEVICES:
                self.cur.header.devices_elided = True
            return
        if self._failure(s, i, None):
            return
        if _NOISE_RE.search(s):
            return
        if _PERF_CMD_RE.search(s) and not s.lstrip().startswith("#"):
            cur = self.cur
            if cur is not None and cur.stage < _ST_TABLE and not cur.op_hint:
                self._apply_command(cur, s)
            else:
                self.hint_cmd = s

    # -- failures
    def _event_target(self) -> TestRun | None:
        return self.cur

    def _failure(self, text: str, i: int, at: TableLine | None, placement: int = 0) -> bool:
        """Record a failure message found in ``text``; True when it was one."""
        warn = _WARN_RE.search(text)
        if warn:
            if self.cur is not None and len(self.cur.warnings) < 50:
                self.cur.warnings.append(warn.group(1))
            return True
        event: ErrorEvent | None = None
        m = _NCCL_FAIL_RE.search(text)
        if m:
            host = f" on {m.group(1)}" if m.group(1) else ""
            msg = f"'{m.group(3)}'" if m.group(3) else ""
            event = ErrorEvent("nccl", f"Test NCCL failure {m.group(2)}{host}: {msg}".rstrip(": "))
        m = None if event else _CUDA_FAIL_RE.search(text)
        if m:
            host = f" on {m.group(1)}" if m.group(1) else ""
            msg = f"'{m.group(3)}'" if m.group(3) else ""
            event = ErrorEvent("cuda", f"Test CUDA failure {m.group(2)}{host}: {msg}".rstrip(": "))
        m = None if event else _TIMEOUT_RE.search(text)
        if m:
            where = f" at {m.group(3)}" if m.group(3) else ""
            event = ErrorEvent("timeout", f"Test timeout ({m.group(2)} s){where}")
        m = None if event else _TEST_FAIL_RE.search(text)
        if m:
            trace = f"Test failure {m.group(3)} (pid {m.group(2)} on {m.group(1)})"
            run = self.cur
            if run is not None and run.errors and run.errors[-1].kind in ("nccl", "cuda", "test"):
                last = run.errors[-1]
                if len(last.details) < 8:
                    last.details.append(trace)
                return True
            event = ErrorEvent("test", trace)
        if event is None:
            for rx in _USAGE_RES:
                m = rx.search(text)
                if m:
                    event = ErrorEvent("usage", m.group(0).strip())
                    break
        if event is None:
            for rx in _ABORT_RES:
                m = rx.search(text)
                if m:
                    event = ErrorEvent("abort", m.group(0).strip())
                    break
        if event is None:
            return False
        event.line = i
        if at is None and self.pending is not None:
            at = self.pending
            placement = len(at.results)
        if at is not None:
            event.size_bytes = at.size_bytes
            event.in_place = placement >= 1
        self._add_event(event)
        return True

    def _add_event(self, event: ErrorEvent) -> None:
        run = self.cur
        if run is None:
            self.early_errors.append(event)
            return
        for old in run.errors:
            if old.kind == event.kind and old.message == event.message:
                old.count += 1
                return
        if event.kind == "abort":
            # One abort event per run; later lines of the same story are details.
            for old in run.errors:
                if old.kind == "abort":
                    if len(old.details) < 8 and event.message not in old.details:
                        old.details.append(event.message)
                    return
        if len(run.errors) < 100:
            run.errors.append(event)

    # -- table lines
    def _table_line(self, line: str, i: int) -> bool:
        run = self.cur
        if run is None or run.columns is None or run.stage != _ST_TABLE:
            return False
        if not re.match(r"^\s*[-+]?\d", line):
            return self.pending is not None and self._failure(line.strip(), i, None)
        cols = run.columns.flat()
        toks = [(m.group(0), m.start(), m.end()) for m in re.finditer(r"\S+", line)]
        # A continuation of a line cut by interleaved output?
        if self.pending is not None:
            start = len(self.pending_values)
            taken, rest = _take(cols[start:], toks, line)
            if taken and not rest.strip():
                self.pending_values += taken
                if len(self.pending_values) == len(cols):
                    self._emit(self.pending, self.pending_values, i, complete=True)
                    self.pending = None
                    self.pending_values = []
                return True
        taken, rest = _take(cols, toks, line)
        if len(taken) < 3:  # not even size, count, type: some other message
            return False
        self._close_pending()
        tl = _table_start(taken)
        tl.line = i
        if len(taken) == len(cols):
            tail = rest.strip()
            extra = tail.split()
            if extra and all(_FIELD_RE.match(t) for t in extra):
                # More fields than the header names: a column name is missing or damaged,
                # and the values after it would land in the wrong columns. Report the
                # line instead of reading it.
                self._add_event(
                    ErrorEvent(
                        "damaged",
                        f"the line for {tl.size_bytes} B holds {len(cols) + len(extra)} "
                        f"fields, its table header names {len(cols)} columns",
                        line=i,
                        size_bytes=tl.size_bytes,
                    )
                )
                return True
            self._emit(tl, taken, i, complete=True)
            if tail:
                self._failure(tail, i, None)
            return True
        # Incomplete: a failure (or other output) interrupted the line, or the log ends.
        self._emit(tl, taken, i, complete=False)
        tail = rest.strip()
        if tail and self._failure(tail, i, tl, len(tl.results)):
            return True
        self.pending = tl
        self.pending_values = taken
        return True

    def _emit(
        self, tl: TableLine, values: list[tuple[str, int, Any, str]], i: int, complete: bool
    ) -> None:
        """Fill tl.results from the parsed values; add tl to the run once."""
        run = self.cur
        assert run is not None and run.columns is not None
        tl.results = _measurements(values, run.columns)
        tl.complete = complete
        stamp = [v for c, _, v, _ in values if c in ("date", "clock")]
        if len(stamp) == 2:
            tl.timestamp = f"{stamp[0]} {stamp[1]}"
        if not run.lines or run.lines[-1] is not tl:
            run.lines.append(tl)

    def _close_pending(self) -> None:
        if self.pending is None:
            return
        tl = self.pending
        self.pending = None
        self.pending_values = []
        run = self.cur
        if run is None:
            return
        if not any(
            e.size_bytes == tl.size_bytes and e.line and e.line >= tl.line for e in run.errors
        ):
            where = "in-place" if len(tl.results) >= 1 else "out-of-place"
            self._add_event(
                ErrorEvent(
                    "cut_off",
                    f"the line for {tl.size_bytes} B stops before its {where} result",
                    line=tl.line,
                    size_bytes=tl.size_bytes,
                    in_place=len(tl.results) >= 1,
                )
            )

    # -- end of a run
    def _finish(self, run: TestRun) -> None:
        _resolve_op(run, self.source)
        if run.finished:
            return
        if any(e.kind != "cut_off" for e in run.errors):
            return
        if any(e.kind == "cut_off" for e in run.errors):
            return
        last = run.lines[-1] if run.lines else None
        if run.columns is None:
            what = "before its result table"
        elif last is None:
            what = "right after its table header, before the first size"
        else:
            what = f"after {last.size_bytes} B, before the '# Out of bounds values' summary"
        run.errors.append(
            ErrorEvent(
                "cut_off",
                f"the output ends {what}",
                line=len(self.lines),
                size_bytes=None,
            )
        )


_FIELD_RE = re.compile(r"^(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|N/A)$")


def _table_start(taken: list[tuple[str, int, Any, str]]) -> TableLine:
    vals = {c: v for c, g, v, _ in taken if g == -1}
    return TableLine(
        line=0,
        size_bytes=int(vals["size"]),
        count=vals.get("count"),
        dtype=vals.get("type"),
        redop=vals.get("redop"),
        root=vals.get("root"),
    )


# (not a decimal's own fraction: "12.86" in an integer column is no "12" with ".86" glued)
_GLUED_RE = re.compile(
    r"^([-+]?\d{1,30}(?:\.\d{1,30})?(?:[eE][-+]?\d{1,3})?)(?!\.\d)(\D.*)$", re.ASCII
)
_NUMERIC_COLS = (
    "root",
    "time",
    "algbw",
    "busbw",
    "wrong",
    "error",
    "i_min",
    "i_max",
    "i_p99",
    "i_cv",
)


def _take(
    cols: list[tuple[str, int]], toks: list[tuple[str, int, int]], line: str
) -> tuple[list[tuple[str, int, Any, str]], str]:
    """The values of the leading tokens that fit the columns, and the text after them.

    A number with other output glued to it (nccl-tests prints a failure right after the
    last field it wrote: ``-1vm: Test NCCL failure``) counts as the number."""
    out: list[tuple[str, int, Any, str]] = []
    tail_from = 0
    for (col, g), (tok, start, end) in zip(cols, toks, strict=False):
        value = _accept(col, tok)
        if value is _MISSING:
            m = _GLUED_RE.match(tok) if col in _NUMERIC_COLS else None
            if m is not None:
                value = _accept(col, m.group(1))
                if value is not _MISSING:
                    out.append((col, g, value, m.group(1)))
                    return out, line[start + len(m.group(1)) :]
            return out, line[start:]
        out.append((col, g, value, tok))
        tail_from = end
    return out, line[tail_from:] if out else line


def _measurements(values: list[tuple[str, int, Any, str]], cols: Columns) -> list[Measurement]:
    out: list[Measurement] = []
    for g, names in enumerate(cols.groups):
        got = {c: (v, tok) for c, gg, v, tok in values if gg == g}
        if len(got) < len(names):
            break
        wrong: int | None = None
        max_error: float | None = None
        if "wrong" in got:
            w = got["wrong"][0]
            wrong = None if w is None or not math.isfinite(w) else int(w)
        if "error" in got:
            e = got["error"][0]
            max_error = None if e is None else float(e)

        def val(name: str, got: dict[str, tuple[Any, str]] = got) -> float | None:
            return float(got[name][0]) if name in got and got[name][0] is not None else None

        out.append(
            Measurement(
                in_place=g == 1,
                time_us=_finite(val("time")),
                algbw_gbps=_finite(val("algbw")),
                busbw_gbps=_finite(val("busbw")),
                wrong=wrong,
                max_error=max_error,
                cputime=cols.cputime,
                i_min_us=_finite(val("i_min")),
                i_max_us=_finite(val("i_max")),
                i_p99_us=_finite(val("i_p99")),
                i_cv_pct=_finite(val("i_cv")),
                text={c: tok for c, (_, tok) in got.items()},
            )
        )
    return out


def _infer_op_from_table(run: TestRun) -> str | None:
    cols = run.columns
    if cols is None:
        return None
    for ln in run.lines:
        if not ln.count or ln.dtype not in DTYPES:
            continue
        ratio = ln.size_bytes / (ln.count * DTYPES[ln.dtype].itemsize)
        reduces = ln.redop is not None and ln.redop != "none"
        rooted = ln.root is not None and ln.root >= 0
        if "redop" not in cols.pre and "root" not in cols.pre:
            return None
        if reduces and rooted:
            return "reduce"
        if reduces:
            return "all_reduce" if ratio == 1 else "reduce_scatter"
        if rooted:
            return "broadcast" if ratio == 1 and "redop" in cols.pre else None
        return None
    return None


def _resolve_op(run: TestRun, source: str, explicit: str | None = None) -> None:
    for name, how in (
        (run.header.test, "header"),
        (run.op_hint, "command"),
        (explicit, "option"),
        (op_from_filename(source), "filename"),
        (_infer_op_from_table(run), "table"),
    ):
        op = canonical_op(name)
        if op:
            run.op, run.op_source = op, how
            return
    run.op, run.op_source = None, "unknown"


def parse_text(text: str, source: str = "<text>") -> list[TestRun]:
    """The tests in an nccl-tests text log; ParseError when there are none."""
    runs = _TextParser(text, source).parse()
    if not runs:
        raise ParseError(
            "not nccl-tests output: no '# nThread ...' header, no result table "
            "('#  size  count  type ... time  algbw  busbw') and no nccl-tests failure message",
            source,
        )
    return runs


# -------------------------------------------------------------------------- JSON parsing

_WS = re.compile(r"\s*")


def _skip(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


def _tolerant_object(text: str, source: str) -> tuple[dict[str, Any], bool]:
    """The top-level JSON object; when the file was cut off, what could be read of it
    (every complete key, and every complete element of a cut-off list), and False."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    else:
        if not isinstance(data, dict):
            raise ParseError("not nccl-tests JSON: the top level is not an object", source, 1)
        return data, True
    dec = json.JSONDecoder()
    pos = _skip(text, 0)
    if not text.startswith("{", pos):
        raise ParseError("not nccl-tests JSON: no object", source, 1)
    pos += 1
    out: dict[str, Any] = {}
    try:
        while True:
            pos = _skip(text, pos)
            if text.startswith("}", pos):
                return out, False  # complete but json.loads failed: trailing garbage
            key, pos = dec.raw_decode(text, pos)
            pos = _skip(text, pos)
            if not text.startswith(":", pos):
                break
            pos = _skip(text, pos + 1)
            if text.startswith("[", pos):
                items, pos, done = _tolerant_list(text, pos + 1, dec)
                out[str(key)] = items
                if not done:
                    break
            else:
                value, pos = dec.raw_decode(text, pos)
                out[str(key)] = value
            pos = _skip(text, pos)
            if text.startswith(",", pos):
                pos += 1
                continue
            break
    except (json.JSONDecodeError, RecursionError, ValueError, TypeError):
        pass
    return out, False


def _tolerant_list(text: str, pos: int, dec: json.JSONDecoder) -> tuple[list[Any], int, bool]:
    items: list[Any] = []
    while True:
        pos = _skip(text, pos)
        if text.startswith("]", pos):
            return items, pos + 1, True
        try:
            value, pos = dec.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError, ValueError):
            return items, pos, False
        items.append(value)
        pos = _skip(text, pos)
        if text.startswith(",", pos):
            pos += 1
        elif not text.startswith("]", pos):
            return items, pos, False


def _jint(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str):
        return _to_int(value.strip())
    return None


def _jfloat(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return _finite(float(value))
    if isinstance(value, str):
        try:
            return _finite(float(value))
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


def parse_json(text: str, source: str = "<text>") -> TestRun:
    """One test from nccl-tests' ``-J`` JSON (version 3; cut-off files read as far as they go)."""
    data, complete = _tolerant_object(text, source)
    if "results" not in data and "config" not in data and "nccl_version" not in data:
        raise ParseError(
            "not nccl-tests JSON: none of 'config', 'results', 'nccl_version'", source, 1
        )
    run = TestRun(index=0, source=source, format="json", first_line=1)
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
    h.end_time = data.get("end_time") if isinstance(data.get("end_time"), str) else None
    cfg = data.get("config")
    if isinstance(cfg, dict):
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
        blocking = _jbool(cfg.get("blocking_collectives"))
        h.blocking = "enabled" if blocking else None
        devices = cfg.get("devices")
        if isinstance(devices, list):
            h.processes = len(devices) or None
            for d in devices:
                if not isinstance(d, dict):
                    continue
                rank = _jint(d.get("rank"))
                if rank is None:
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
    results = data.get("results")
    if isinstance(results, list):
        half = ["time", "algbw", "busbw", "wrong"]
        run.columns = Columns(["size", "count", "type", "redop", "root"], [half, list(half)])
        for n, res in enumerate(results, start=1):
            tl = _json_line(res, n)
            if tl is not None:
                run.lines.append(tl)
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
    _resolve_op(run, source)
    if not complete or not run.finished:
        last = run.lines[-1] if run.lines else None
        where = f"after {last.size_bytes} B" if last else "before the first result"
        msg = f"the JSON output ends {where}, before the out-of-bounds summary"
        if run.last_error:
            msg += f" (nccl-tests' last error: {run.last_error})"
        run.errors.append(ErrorEvent("cut_off", msg, line=None))
    return run


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


# ------------------------------------------------------------------------------ logs


def looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] == "{"


def parse_log(text: str, source: str = "<text>", op: str | None = None) -> list[TestRun]:
    """Every test in a log (text or JSON). ``op`` names the collective where the log does not
    (no '# Collective test starting' line, no command line, no JSON args)."""
    if not isinstance(text, str):
        raise ParseError("not text", source)
    runs = [parse_json(text, source)] if looks_like_json(text) else parse_text(text, source)
    if op:
        for run in runs:
            if run.op_source not in ("header", "command"):
                _resolve_op(run, source, explicit=op)
    return runs


def read_log(path: str | Path) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as err:
        raise InputError(f"{p}: cannot read: {err.strerror or err}") from err
    return data.decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------- rows


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


def describe_event(run: TestRun, event: ErrorEvent) -> str:
    """An error row's message: which test, where, what, and the next thing to look at."""
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
    else:
        label = {
            "nccl": "failed",
            "cuda": "failed",
            "test": "failed",
            "timeout": "timed out",
            "abort": "aborted",
            "usage": "refused to run",
            "damaged": "printed a damaged table",
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
    return text


def rows_from_runs(
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
) -> list[Row]:
    """Rows of parsed tests: one per size and placement, then one error row per failure."""
    out: list[Row] = []
    for run in runs:
        out.extend(
            _rows_of_run(
                run,
                run_id=run_id,
                build=build,
                source=source,
                env=env,
                versions=versions,
                extra=extra,
                world_size=world_size,
                nodes=nodes,
                path=path,
                placements=placements,
            )
        )
    return out


def _rows_of_run(
    run: TestRun,
    *,
    run_id: str | None,
    build: str | None,
    source: str | None,
    env: dict[str, str] | None,
    versions: dict[str, str] | None,
    extra: dict[str, Any] | None,
    world_size: int | None,
    nodes: int | None,
    path: str | None,
    placements: Sequence[bool] | None,
) -> list[Row]:
    h = run.header
    op = run.op or "unknown"
    spec = COLLECTIVES.get(op)
    world = h.world_size() or world_size
    host = h.ranks[0].host if h.ranks and h.ranks[0].rank == 0 else None
    rid = run_id or f"nccl-tests-{Path(run.source).stem or 'log'}"
    if run.index and run_id is None:
        rid += f"-{run.index}"
    common: dict[str, Any] = {
        "run_id": rid,
        "kind": "collective",
        "backend": BACKEND,
        "op": op,
        "host": host,
        "nodes": h.nodes() if nodes is None else nodes,
        "world_size": world,
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
    facts = _run_facts(run)
    rows: list[Row] = []
    flagged = 0
    for tl in run.lines:
        redop = tl.redop
        if redop is None and spec is not None and not spec.reduces:
            redop = "none"
        root = tl.root
        if root is None and spec is not None and not spec.rooted:
            root = -1
        for m in tl.results:
            if placements is not None and m.in_place not in placements:
                continue
            wrong = m.wrong
            status, error = "ok", None
            row_extra: dict[str, Any] = {"line": tl.line}
            if m.max_error is not None:
                row_extra["max_error"] = m.max_error
                bound = _old_bound(tl.dtype, world)
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
                flagged += 1
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
            rows.append(
                Row(
                    **common,
                    dtype=tl.dtype,
                    redop=redop,
                    root=root,
                    in_place=m.in_place,
                    size_bytes=tl.size_bytes,
                    count=tl.count,
                    time_us=m.time_us,
                    time_us_p50=m.p50_us,
                    time_us_p99=m.i_p99_us,
                    algbw_gbps=m.algbw_gbps,
                    busbw_gbps=m.busbw_gbps,
                    wrong=wrong,
                    extra=row_extra,
                    status=status,
                    error=error,
                )
            )
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
        tl_of = next((t for t in run.lines if t.size_bytes == event.size_bytes), None)
        ev_extra: dict[str, Any] = {"event": event.kind, "line": event.line, "nccl_tests": facts}
        if extra:
            ev_extra.update(extra)
        rows.append(
            Row(
                **common,
                dtype=tl_of.dtype if tl_of else None,
                redop=tl_of.redop if tl_of else None,
                root=tl_of.root if tl_of else None,
                in_place=event.in_place,
                size_bytes=event.size_bytes,
                count=tl_of.count if tl_of else None,
                extra=ev_extra,
                status="error",
                error=describe_event(run, event),
            )
        )
    return rows


def rows_from_log(
    text: str,
    source: str = "<text>",
    *,
    op: str | None = None,
    run_id: str | None = None,
    build: str | None = None,
    **kwargs: Any,
) -> list[Row]:
    """Rows of an nccl-tests log (text or JSON); ParseError when it is not one."""
    return rows_from_runs(
        parse_log(text, source, op), run_id=run_id, build=build, source=source, **kwargs
    )


def rows_from_file(path: str | Path, **kwargs: Any) -> list[Row]:
    return rows_from_log(read_log(path), str(path), **kwargs)


# ------------------------------------------------------------------------------- CLI


def _fmt(value: float | None, width: int) -> str:
    return "n/a".rjust(width) if value is None else format_float(value, width)


def render_run(run: TestRun, rows: list[Row], console: Any) -> None:
    """The header facts and an nccl-tests-like table of one test, with rich."""
    from rich.table import Table

    h = run.header
    facts = [f"test: {h.test or '?'} ({run.op or 'unknown op'}, from {run.op_source})"]
    if h.version or h.nccl_version:
        facts.append(f"nccl-tests {h.version or '?'}, NCCL {h.nccl_version or '?'}")
    facts.append(
        f"nThread {h.nthreads if h.nthreads is not None else '?'} nGpus "
        f"{h.ngpus if h.ngpus is not None else '?'}, ranks "
        f"{run.world_size if run.world_size is not None else 'unknown'}"
        + (f", warmup {h.warmup_iters} iters {h.iters}" if h.iters is not None else "")
        + (f", graph {h.graph_launches}" if h.graph_launches else "")
    )
    if h.command:
        facts.append(f"command: {h.command}")
    console.print(f"[bold]{run.source}[/bold] (test {run.index + 1}, {run.format})")
    for f in facts:
        console.print(f"  {f}", markup=False, highlight=False)
    shown = h.ranks[:16]
    for r in shown:
        console.print(
            f"  rank {r.rank:>4}  {r.host}  device {r.device}  [{r.bus_id}]  {r.gpu}",
            markup=False,
            highlight=False,
        )
    if len(h.ranks) > len(shown):
        console.print(f"  ... {len(h.ranks) - len(shown)} more ranks", markup=False)
    if h.devices_elided:
        console.print("  (device list elided in the log)", markup=False)
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for name in ("size (B)", "count", "type", "redop", "root"):
        table.add_column(name, justify="right")
    for place in ("out-of-place", "in-place"):
        for name in ("time (us)", "algbw", "busbw", "#wrong"):
            table.add_column(f"{name}\n{place}" if name == "time (us)" else name, justify="right")
    by_line: dict[tuple[int | None, int | None], dict[bool, Row]] = {}
    for row in rows:
        if row.time_us is None and row.status == "error":
            continue
        key = ((row.extra or {}).get("line"), row.size_bytes)
        by_line.setdefault(key, {})[bool(row.in_place)] = row
    for halves in by_line.values():
        first = halves.get(False) or halves.get(True)
        assert first is not None
        cells = [
            str(first.size_bytes),
            "" if first.count is None else str(first.count),
            first.dtype or "",
            first.redop or "",
            "" if first.root is None else str(first.root),
        ]
        for in_place in (False, True):
            half = halves.get(in_place)
            if half is None:
                cells += ["", "", "", ""]
                continue
            wrong = "N/A" if half.wrong is None else str(half.wrong)
            style = "[red]" if half.status != "ok" else ""
            cells += [
                _fmt(half.time_us, 7).strip(),
                _fmt(half.algbw_gbps, 6).strip(),
                _fmt(half.busbw_gbps, 6).strip(),
                f"{style}{wrong}",
            ]
        table.add_row(*cells)
    console.print(table)
    if run.out_of_bounds is not None:
        console.print(
            f"  Out of bounds values : {run.out_of_bounds} "
            f"{'OK' if run.out_of_bounds_ok else 'FAILED'}",
            markup=False,
        )
    if run.avg_busbw_gbps is not None:
        console.print(f"  Avg bus bandwidth    : {run.avg_busbw_gbps:g} GB/s", markup=False)
    for row in rows:
        if row.time_us is None and row.status == "error":
            console.print(f"  [red]error:[/red] {row.error}", highlight=False)
    console.print("")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gpulane parse nccl-tests",
        description="nccl-tests logs (text, or -J JSON) as gpulane result rows.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="captured nccl-tests output")
    parser.add_argument("--json", action="store_true", help="print rows as JSON Lines")
    parser.add_argument("--out", metavar="DIR", help="write rows.jsonl and rows.parquet into DIR")
    parser.add_argument("--op", help="collective, where the log does not name it")
    parser.add_argument("--build", help="build label of the rows (default: rank 0's host)")
    parser.add_argument("--run-id", help="run id of the rows (default: from the file name)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as ex:
        return int(ex.code) if isinstance(ex.code, int) else 2
    if args.op:
        try:
            collective(args.op)
        except InputError as err:
            raise InputError(f"--op: {err}") from err
    console = None
    if not args.json:
        from rich.console import Console

        # Not a terminal (a pipe, a file): wide enough for both placements' columns.
        console = Console(
            highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160
        )
    writer = RowWriter(args.out) if args.out else None
    total = errors = 0
    try:
        for name in args.files:
            text = read_log(name)
            runs = parse_log(text, name, args.op)
            for run in runs:
                rows = rows_from_runs([run], run_id=args.run_id, build=args.build, source=str(name))
                total += len(rows)
                errors += sum(1 for r in rows if r.status != "ok")
                if writer is not None:
                    for row in rows:
                        writer.write(row)
                if args.json:
                    for row in rows:
                        sys.stdout.write(json.dumps(row.to_dict(), default=str) + "\n")
                else:
                    render_run(run, rows, console)
    finally:
        if writer is not None:
            writer.close()
    if args.out:
        write_parquet(args.out)
        sys.stderr.write(
            f"# {total} rows written to {Path(args.out) / 'rows.jsonl'} and rows.parquet\n"
        )
    if errors:
        sys.stderr.write(f"# {errors} of {total} rows are errors (status error)\n")
    sys.stdout.flush()
    return 0
