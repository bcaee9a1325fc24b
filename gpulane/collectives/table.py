"""nccl-tests-style table of a sweep: the view the run session shows its rows through."""

from __future__ import annotations

import statistics
from pathlib import Path

from gpulane.collectives.overhead import overhead_line
from gpulane.record import Row

HEADER = (
    "#                                                              out-of-place"
    "                       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
    "     time   algbw   busbw  #wrong \n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)         "
    "    (us)  (GB/s)  (GB/s)         "
)


def format_time(us: float) -> str:
    if us >= 10000:
        return f"{us:7.0f}"
    if us >= 100:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def format_half(row: Row | None) -> str:
    if row is None:
        return f"  {'n/a':>7}  {'n/a':>6}  {'n/a':>6}  {'n/a':>6}"
    wrong = row.wrong
    wrong_s = "N/A" if wrong is None else str(wrong)
    # a table line's rows are measured points (SweepView.add keeps no other)
    time_us = row.time_us or 0.0
    return f"  {format_time(time_us)}  {row.algbw_gbps:6.2f}  {row.busbw_gbps:6.2f}  {wrong_s:>6}"


def format_line(out_of_place: Row | None, in_place: Row | None) -> str:
    first = out_of_place or in_place
    assert first is not None
    root = first.root
    return (
        f"{first.size_bytes:12d}  {first.count:12d}  {first.dtype:>8}  "
        f"{first.redop:>6}  {(-1 if root is None else root):6d}"
        f"{format_half(out_of_place)}{format_half(in_place)}"
    )


class SweepView:
    """The session's view of a sweep: one nccl-tests table line per (collective, dtype,
    size) once its placements are in, a header per collective, the average bus bandwidth
    and a footnote for every `n/a` at the end."""

    def __init__(self, total_lines: int, placements: int, run_dir: Path | None = None) -> None:
        self.run_dir = run_dir  # where the ranks leave torch_overhead.json, if they do
        self.total: int | None = total_lines
        self.placements = placements
        self.pending: dict[tuple[str, str | None, int], dict[bool, Row]] = {}
        self.current_op: str | None = None
        self.lines = 0
        self.missing: dict[str, str] = {}  # op -> why a placement is not measured

    def add(self, row: Row) -> list[str]:
        if row.kind not in (None, "collective"):
            return []
        if row.status != "ok" and row.time_us is None:
            return [f"# error: {row.error}"]
        if row.time_us is None or row.size_bytes is None:
            return []  # not a measured point: nothing for a table line
        out: list[str] = []
        if row.op != self.current_op:
            out += self.flush()
            self.current_op = row.op
            out.append(f"#\n# {row.op} ({row.backend}, {row.world_size} ranks)\n{HEADER}")
        extra = row.extra or {}
        requested = extra.get("requested_bytes", row.size_bytes)
        key = (row.op, row.dtype, int(requested))
        self.pending.setdefault(key, {})[bool(row.in_place)] = row
        for placement, why in (extra.get("not_measured") or {}).items():
            self.missing.setdefault(f"{row.op} {placement}", why)
        expected = int(extra.get("placements") or self.placements)
        if len(self.pending[key]) >= expected:
            out.append(self._emit(key))
        return out

    def _emit(self, key: tuple[str, str | None, int]) -> str:
        halves = self.pending.pop(key)
        self.lines += 1
        return format_line(halves.get(False), halves.get(True))

    def flush(self) -> list[str]:
        return [self._emit(key) for key in list(self.pending)]

    def done(self) -> int:
        return self.lines

    def current(self) -> str:
        return self.current_op or "sweep"

    def summary(self, rows: list[Row]) -> list[str]:
        measured = [r.busbw_gbps for r in rows if isinstance(r.busbw_gbps, (int, float))]
        out = []
        for what, why in sorted(self.missing.items()):
            out.append(f"# n/a: {what}: {why}")
        if measured:  # rows with a bandwidth (a row of a timed job may carry none)
            avg = statistics.fmean(measured)
            out.append(f"# Avg bus bandwidth    : {avg:.4f} GB/s over {len(measured)} rows")
        overhead = overhead_line(self.run_dir)
        if overhead:
            out.append(overhead)
        return out

    def problems(self, rows: list[Row]) -> list[str]:
        wrong = [r for r in rows if r.time_us is not None and (r.wrong or 0) > 0]
        if not wrong:
            return []
        where = ", ".join(
            f"{r.op} {r.size_bytes} B {'in-place' if r.in_place else 'out-of-place'} ({r.wrong})"
            for r in wrong[:5]
        )
        return [f"wrong results at {where}"]
