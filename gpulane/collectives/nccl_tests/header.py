"""The header lines of nccl-tests' text output, each read into :class:`Header` facts.

``# nccl-tests version``, ``# Collective test starting``, ``# nThread ...`` (old versions
without ``agg iters``/``graph``), the device list (``#  Rank  0 Group  0 Pid ...
[0000:00:06] NVIDIA H200``, old ``#   Rank  0 Pid ... [0x36] Tesla V100``, 4-digit ranks,
lists elided with ``...``), the summary (``# Out of bounds values : N OK|FAILED``,
``# Avg bus bandwidth : X``), and a command line echoed before a test.
"""

from __future__ import annotations

import re

from gpulane.collectives.nccl_tests.model import Header, RankInfo, TestRun
from gpulane.collectives.nccl_tests.table import to_int

VERSION_RE = re.compile(
    r"^#\s*nccl-tests version\s+(\S+)(?:\s+nccl-headers=(\d+))?(?:\s+nccl-library=(\d+))?"
)
STARTING_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
CONCLUDED_RE = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
NTHREAD_RE = re.compile(r"^#\s*nThread\s+\d+")
JSON_OUT_RE = re.compile(r"^#\s*Writing JSON output to\s+(\S+)")
RANK_RE = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[([^\]]*)\]\s*(.*?)\s*$"
)
OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(-?\d+)\s*(\w+)?")
AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
REDUCING_RE = re.compile(r"^#\s*Reducing maxBytes to\s+(\d+)")
ERROR_LINE_RE = re.compile(r"^#\s*error:\s*(.*?)\s*$")
MEMORY_RE = re.compile(r"^#\s*GPU memory usage\s*:\s*(.*?)\s*$")
PERF_CMD_RE = re.compile(r"(?:^|[\s/=])([A-Za-z0-9_]+_perf(?:_mpi)?)(?=\s|$)")
_ENV_ASSIGN_RE = re.compile(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=(\S*)")


def parse_nthread(line: str, h: Header) -> None:
    def num(pattern: str) -> int | None:
        m = re.search(pattern, line)
        return to_int(m.group(1)) if m else None

    h.nthreads = num(r"nThread\s+(\d+)")
    h.ngpus = num(r"nGpus\s+(\d+)")
    h.min_bytes = num(r"minBytes\s+(\d+)")
    h.max_bytes = num(r"maxBytes\s+(\d+)")
    m = re.search(r"step:\s*(\d+)\((factor|bytes)\)", line)
    if m:
        if m.group(2) == "factor":
            h.step_factor = to_int(m.group(1))
        else:
            h.step_bytes = to_int(m.group(1))
    h.warmup_iters = num(r"warmup iters:\s*(\d+)")
    h.iters = num(r"(?<!warmup )(?<!agg )iters:\s*(\d+)")
    h.agg_iters = num(r"agg iters:\s*(\d+)")
    h.validation = num(r"validation:\s*(\d+)")
    h.graph_launches = num(r"graph:\s*(\d+)")
    h.unalign = num(r"unalign:\s*(\d+)")


def rank_of(m: re.Match[str]) -> RankInfo:
    """A device line matched by RANK_RE."""
    return RankInfo(
        rank=int(m.group(1)),
        group=to_int(m.group(2)),
        pid=to_int(m.group(3)),
        host=m.group(4),
        device=int(m.group(5)),
        bus_id=m.group(6).strip(),
        gpu=m.group(7),
    )


def apply_command(run: TestRun, cmd: str) -> None:
    """A command line echoed before a test: the program (hence the op) and the environment
    assignments in front of it."""
    run.header.command = cmd.strip()
    m = PERF_CMD_RE.search(cmd)
    if m:
        run.op_hint = m.group(1)
    head = cmd.split(m.group(1))[0] if m else cmd
    run.header.env.update(dict(_ENV_ASSIGN_RE.findall(head)))


def apply_summary(line: str, run: TestRun) -> bool:
    """The out-of-bounds and average bus bandwidth lines; True when ``line`` was one."""
    m = OOB_RE.match(line)
    if m:
        run.out_of_bounds = to_int(m.group(1))
        run.out_of_bounds_ok = (m.group(2) or "").upper() == "OK" or run.out_of_bounds == 0
        return True
    m = AVG_RE.match(line)
    if m:
        try:
            run.avg_busbw_gbps = float(m.group(1))
        except ValueError:
            run.avg_busbw_gbps = None
        run.avg_busbw_check = m.group(2)
        run.avg_read = True
        return True
    return False
