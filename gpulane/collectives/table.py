"""nccl-tests-style table of a sweep, printed line by line as rows arrive, with a progress bar."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gpulane.collectives.overhead import overhead_line

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


def format_half(row: dict[str, Any] | None) -> str:
    if row is None:
        return f"  {'n/a':>7}  {'n/a':>6}  {'n/a':>6}  {'n/a':>6}"
    wrong = row.get("wrong")
    wrong_s = "N/A" if wrong is None else str(wrong)
    return (
        f"  {format_time(row['time_us'])}  {row['algbw_gbps']:6.2f}  {row['busbw_gbps']:6.2f}"
        f"  {wrong_s:>6}"
    )


def format_line(out_of_place: dict[str, Any] | None, in_place: dict[str, Any] | None) -> str:
    first = out_of_place or in_place
    assert first is not None
    root = first.get("root")
    return (
        f"{first['size_bytes']:12d}  {first['count']:12d}  {first['dtype']:>8}  "
        f"{first['redop']:>6}  {(-1 if root is None else root):6d}"
        f"{format_half(out_of_place)}{format_half(in_place)}"
    )


def print_run_header(description: str, build: str, run_id: str, env: dict[str, str]) -> None:
    """The first lines of a sweep's output: what runs where, and the variables it was given."""
    print(f"# gpulane sweep: {description}, build {build}, run {run_id}", flush=True)
    if env:
        print("# env: " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)


class SweepTable:
    """Groups rows of one (collective, dtype, size) into one table line."""

    def __init__(
        self,
        total_lines: int,
        placements: int,
        console: Console | None = None,
        progress: bool = True,
    ) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.placements = placements
        self.pending: dict[tuple[str, str, int], dict[bool, dict[str, Any]]] = {}
        self.current_op: str | None = None
        self.lines = 0
        self.rows: list[dict[str, Any]] = []
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
            disable=not progress,
        )
        self.task = self.progress.add_task("sweep", total=total_lines)

    def __enter__(self) -> SweepTable:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()
        self.progress.stop()

    def print(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, crop=False, overflow="ignore")

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if row.get("status") != "ok" and row.get("time_us") is None:
            self.print(f"# error: {row.get('error')}")
            return
        if row["op"] != self.current_op:
            self.flush()
            self.current_op = row["op"]
            self.print(f"#\n# {row['op']} ({row['backend']}, {row['world_size']} ranks)\n{HEADER}")
        requested = (row.get("extra") or {}).get("requested_bytes", row["size_bytes"])
        key = (row["op"], row["dtype"], int(requested))
        self.pending.setdefault(key, {})[bool(row["in_place"])] = row
        if len(self.pending[key]) >= self.expected_halves(row):
            self.emit(key)

    def expected_halves(self, row: dict[str, Any]) -> int:
        expected = (row.get("extra") or {}).get("placements")
        return int(expected) if expected else self.placements

    def emit(self, key: tuple[str, str, int]) -> None:
        halves = self.pending.pop(key)
        self.print(format_line(halves.get(False), halves.get(True)))
        self.lines += 1
        self.progress.update(self.task, completed=self.lines, description=key[0])

    def flush(self) -> None:
        for key in list(self.pending):
            self.emit(key)


class RowTail:
    """Reads rows appended to a JSON Lines file since the last call (only complete lines)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = ""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, encoding="utf-8") as fh:
                fh.seek(self.offset)
                data = fh.read()
                self.offset = fh.tell()
        except FileNotFoundError:
            return []
        data = self.partial + data
        lines = data.split("\n")
        self.partial = lines.pop()
        out = []
        for line in lines:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return out


class SweepView:
    """The session's view of a sweep: one nccl-tests table line per (collective, dtype,
    size) once its placements are in, a header per collective, the average bus bandwidth
    and a footnote for every `n/a` at the end."""

    def __init__(self, total_lines: int, placements: int, run_dir: Path | None = None) -> None:
        self.run_dir = run_dir  # where the ranks leave torch_overhead.json, if they do
        self.total: int | None = total_lines
        self.placements = placements
        self.pending: dict[tuple[str, str, int], dict[bool, dict[str, Any]]] = {}
        self.current_op: str | None = None
        self.lines = 0
        self.missing: dict[str, str] = {}  # op -> why a placement is not measured

    def add(self, row: dict[str, Any]) -> list[str]:
        if row.get("kind") not in (None, "collective"):
            return []
        if row.get("status") != "ok" and row.get("time_us") is None:
            return [f"# error: {row.get('error')}"]
        if row.get("time_us") is None or row.get("size_bytes") is None:
            return []  # not a measured point: nothing for a table line
        out: list[str] = []
        if row["op"] != self.current_op:
            out += self.flush()
            self.current_op = row["op"]
            out.append(f"#\n# {row['op']} ({row['backend']}, {row['world_size']} ranks)\n{HEADER}")
        extra = row.get("extra") or {}
        requested = extra.get("requested_bytes", row["size_bytes"])
        key = (row["op"], row["dtype"], int(requested))
        self.pending.setdefault(key, {})[bool(row["in_place"])] = row
        for placement, why in (extra.get("not_measured") or {}).items():
            self.missing.setdefault(f"{row['op']} {placement}", why)
        expected = int(extra.get("placements") or self.placements)
        if len(self.pending[key]) >= expected:
            out.append(self._emit(key))
        return out

    def _emit(self, key: tuple[str, str, int]) -> str:
        halves = self.pending.pop(key)
        self.lines += 1
        return format_line(halves.get(False), halves.get(True))

    def flush(self) -> list[str]:
        return [self._emit(key) for key in list(self.pending)]

    def done(self) -> int:
        return self.lines

    def current(self) -> str:
        return self.current_op or "sweep"

    def summary(self, rows: list[dict[str, Any]]) -> list[str]:
        measured = [r for r in rows if r.get("time_us") is not None]
        out = []
        for what, why in sorted(self.missing.items()):
            out.append(f"# n/a: {what}: {why}")
        if measured:
            avg = statistics.fmean(r["busbw_gbps"] for r in measured)
            out.append(f"# Avg bus bandwidth    : {avg:.4f} GB/s over {len(measured)} rows")
        overhead = overhead_line(self.run_dir)
        if overhead:
            out.append(overhead)
        return out

    def problems(self, rows: list[dict[str, Any]]) -> list[str]:
        wrong = [r for r in rows if r.get("time_us") is not None and (r.get("wrong") or 0) > 0]
        if not wrong:
            return []
        where = ", ".join(
            f"{r['op']} {r['size_bytes']} B {'in-place' if r['in_place'] else 'out-of-place'}"
            f" ({r['wrong']})"
            for r in wrong[:5]
        )
        return [f"wrong results at {where}"]
