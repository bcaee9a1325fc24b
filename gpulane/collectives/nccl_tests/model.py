"""What an nccl-tests log holds, as dataclasses: the header, the table's lines and their
measurements, failures, and one :class:`TestRun` per test (one binary's run) in a log.

Also the facts every reader shares: NCCL version codes, the environment that shapes a
result, and which collective a test ran (from its header, command line, an option, the
file name, or the table's shape).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.collectives.spec import DTYPES, collective
from gpulane.errors import InputError
from gpulane.topology.nccl_info import NcclLineReader

BACKEND = "nccl-tests"

# Environment variables that shape a result, kept from a log's JSON env or command line.
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL", "CUDA_VISIBLE_DEVICES", "GLOO_", "OMPI_MCA", "UCX_", "FI_")
# Most ranks listed in each row's extra (the run's facts); larger runs get a summary.
MAX_RANKS_IN_ROWS = 64
# Most distinct sizes a run remembers after its lines were handed over (for error rows).
MAX_SIZES = 4096

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
    devices_cut: bool = False  # the log ends inside the device list
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
        if self.ranks and not self.devices_elided and not self.devices_cut:
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
    kind: str  # nccl, cuda, test, timeout, abort, usage, cut_off, out_of_bounds, damaged
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

    @functools.cached_property
    def flat_cached(self) -> list[tuple[str, int]]:
        """flat(), once: the layout does not change while a table is read."""
        return self.flat()

    @functools.cached_property
    def flat_blank_redop(self) -> list[tuple[str, int]] | None:
        """flat() without the redop column, or None when the header names none.

        nccl-tests 2.10 to 2.13 print an empty redop (``%6s`` of ``""``) for the
        collectives that reduce nothing (alltoall, broadcast, gather, scatter,
        hypercube): the header names the column, their lines leave it out."""
        if "redop" not in self.pre:
            return None
        return [c for c in self.flat_cached if c != ("redop", -1)]


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
    announced: bool = False  # '# Collective test starting' was read (text)
    avg_read: bool = False  # '# Avg bus bandwidth' was read (text)
    last_error: str | None = None  # "# error: ..." (ncclGetLastError at exit)
    memory: str | None = None  # "# GPU memory usage : ..."
    errors: list[ErrorEvent] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # NCCL WARN lines
    op_hint: str | None = None  # from a command line before the test
    op: str | None = None
    op_source: str = "unknown"
    stage: int = 0
    # Streaming: a reader may hand a run over before it ends (done False) when its table
    # grows long; the rows of `lines` are then made and the lines let go (all but the
    # last). What the reader and the error rows still need of them is kept here.
    done: bool = False
    last_line: TableLine | None = None
    first_of_size: dict[int, TableLine] = field(default_factory=dict)
    # NCCL's own INFO lines printed into the log (NCCL_DEBUG=INFO): its connections
    # ("via P2P/CUMEM"), channel counts, version; None when the log has none
    nccl_reader: NcclLineReader | None = field(default=None, repr=False, compare=False)

    def add_line(self, line: TableLine) -> None:
        self.lines.append(line)
        self.last_line = line
        if line.size_bytes not in self.first_of_size and len(self.first_of_size) < MAX_SIZES:
            self.first_of_size[line.size_bytes] = line

    @property
    def finished(self) -> bool:
        """The log reached nccl-tests' summary (the out-of-bounds line)."""
        return self.out_of_bounds is not None

    @property
    def world_size(self) -> int | None:
        return self.header.world_size() or self.nccl_world_size()

    def nccl_world_size(self) -> int | None:
        """The ranks NCCL's INFO lines give the test's communicator (``comm 0x.. rank 0
        nranks 2 cudaDev 0 ...``), for a log whose header lists no devices; None when
        they name none, or communicators of different sizes (which one is the test's?)."""
        reader = self.nccl_reader
        if reader is None or not reader.nccl_lines:
            return None
        sizes = {c.nranks for c in reader.info().communicators if c.nranks}
        return sizes.pop() if len(sizes) == 1 else None

    def measured(self) -> int:
        return sum(len(ln.results) for ln in self.lines)


def nccl_version_string(code: int | None) -> str | None:
    """NCCL_VERSION_CODE as x.y.z: 22803 -> 2.28.3, old codes 2708 -> 2.7.8."""
    if code is None or code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    return f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"


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


def infer_op_from_table(run: TestRun) -> str | None:
    cols = run.columns
    if cols is None:
        return None
    # Lines handed over already (streaming) are remembered by their first line per size.
    for ln in run.lines or list(run.first_of_size.values()):
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


def resolve_op(run: TestRun, source: str, explicit: str | None = None) -> None:
    for name, how in (
        (run.header.test, "header"),
        (run.op_hint, "command"),
        (explicit, "option"),
        (op_from_filename(source), "filename"),
        (infer_op_from_table(run), "table"),
    ):
        op = canonical_op(name)
        if op:
            run.op, run.op_source = op, how
            return
    run.op, run.op_source = None, "unknown"
