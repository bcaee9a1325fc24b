"""Rows of nccl-tests runs printed as nccl-tests prints them: the header (versions,
settings, devices), the table with both placements on one line, the summary, and the
errors, one run (consecutive rows of one run id) after another.

Rows are read once, as they come: a table line is printed when its next line starts, so a
long log prints while it is read and memory holds one line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console

from gpulane.collectives.nccl_tests.model import nccl_version_string
from gpulane.record import Row

# Lines written to the console at once (one call per block keeps a long log fast).
_BLOCK = 512
_SHOWN_RANKS = 16
_SHOWN_ERRORS = 100

_COLUMN_HEADER = (
    "#                                                              out-of-place"
    "                       in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
    "     time   algbw   busbw  #wrong ",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
    "     (us)  (GB/s)  (GB/s)         ",
)


def format_float(value: float, width: int) -> str:
    """A number as nccl-tests prints time and bandwidth: as many decimals (2, 1, 0) as
    fit ``width``, else exponent notation."""
    # Padding never shortens a text: the unpadded one decides, and is padded once (a long
    # log prints three such numbers per placement and line).
    text = f"{value:.2f}"
    if len(text) > width:
        text = f"{value:.1f}"
        if len(text) > width:
            text = f"{value:.0f}"
            if len(text) > width:
                return f"{value:>{width}.{1 if width >= 7 else 0}e}"
    return text.rjust(width)


_NA7, _NA6 = "n/a".rjust(7), "n/a".rjust(6)  # an absent time, bandwidth


def header_lines(row: Row) -> list[str]:
    """The header of a run, from its first row's facts (``extra.nccl_tests``)."""
    facts: dict[str, Any] = (row.extra or {}).get("nccl_tests") or {}
    index = facts.get("test_index")
    lines = [
        f"# {row.source}: test {'?' if index is None else index + 1} "
        f"({facts.get('format', '?')}), {row.op} (from {facts.get('op_source', '?')})"
    ]
    versions = [
        f"{label}{facts[key]}"
        for label, key in (
            ("nccl-tests version ", "version"),
            ("nccl-headers=", "nccl_headers"),
            ("nccl-library=", "nccl_library"),
        )
        if facts.get(key) is not None
    ]
    nccl = nccl_version_string(facts.get("nccl_library"))
    if versions:
        lines.append("# " + " ".join(versions) + (f" (NCCL {nccl})" if nccl else ""))
    if facts.get("test"):
        lines.append(f"# Collective test starting: {facts['test']}")
    if facts.get("command"):
        lines.append(f"# command: {facts['command']}")
    settings = [
        (label, facts.get(key))
        for label, key in (
            ("nThread", "nthreads"),
            ("nGpus", "ngpus"),
            ("minBytes", "min_bytes"),
            ("maxBytes", "max_bytes"),
            ("step:", "step_factor"),
            ("step:", "step_bytes"),
            ("warmup iters:", "warmup_iters"),
            ("iters:", "iters"),
            ("agg iters:", "agg_iters"),
            ("validation:", "validation"),
            ("graph:", "graph_launches"),
        )
    ]
    shown = [f"{label} {value}" for label, value in settings if value is not None]
    if shown:
        lines.append("# " + " ".join(shown) + f" (ranks {row.world_size or 'unknown'})")
    ranks = facts.get("ranks") or []
    if ranks:
        lines += ["#", "# Using devices"]
    for r in ranks[:_SHOWN_RANKS]:
        group = "" if r.get("group") is None else f" Group {r['group']:>2}"
        pid = "" if r.get("pid") is None else f" Pid {r['pid']:>6}"
        lines.append(
            f"#  Rank {r['rank']:>2}{group}{pid} on {r['host']:>10} device {r['device']:>2} "
            f"[{r['bus_id']}] {r['gpu']}"
        )
    listed = facts.get("ranks_listed", len(ranks))
    if listed > min(len(ranks), _SHOWN_RANKS):
        lines.append(f"#  ... {listed - min(len(ranks), _SHOWN_RANKS)} more ranks")
    if facts.get("devices_elided"):
        lines.append("#  ... (device list elided in the log)")
    lines += ["#", *_COLUMN_HEADER]
    return lines


def table_line(halves: dict[bool, Row]) -> str:
    """One size's line: its out-of-place and in-place results side by side."""
    first = halves.get(False) or halves[True]
    size, count, root = first.size_bytes, first.count, first.root
    parts = [
        f"{'' if size is None else size:>12}  {'' if count is None else count:>12}"
        f"  {first.dtype or '':>8}  {first.redop or '':>6}  {'' if root is None else root:>6}"
    ]
    # no helper call per number (an absent one is "n/a"): a long log prints six a line
    for half in (halves.get(False), halves.get(True)):
        if half is None:
            parts.append(" " * 34)
            continue
        t, a, b, wrong = half.time_us, half.algbw_gbps, half.busbw_gbps, half.wrong
        parts.append(
            f"  {_NA7 if t is None else format_float(t, 7)}"
            f"  {_NA6 if a is None else format_float(a, 6)}"
            f"  {_NA6 if b is None else format_float(b, 6)}"
            f"  {'N/A' if wrong is None else str(wrong):>6}"
        )
    return "".join(parts)


def summary_lines(row: Row) -> list[str]:
    """The summary of a run, from its last row's facts."""
    facts: dict[str, Any] = (row.extra or {}).get("nccl_tests") or {}
    lines = []
    if facts.get("out_of_bounds") is not None:
        ok = "OK" if facts.get("out_of_bounds_ok") else "FAILED"
        lines.append(f"# Out of bounds values : {facts['out_of_bounds']} {ok}")
    if facts.get("avg_busbw_gbps") is not None:
        check = f" {facts['avg_busbw_check']}" if facts.get("avg_busbw_check") else ""
        lines.append(f"# Avg bus bandwidth    : {facts['avg_busbw_gbps']:g}{check}")
    return lines


class _Out:
    """Lines to the console in blocks."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.lines: list[str] = []

    def add(self, *lines: str) -> None:
        self.lines += lines
        if len(self.lines) >= _BLOCK:
            self.flush()

    def flush(self) -> None:
        if self.lines:
            text = "\n".join(self.lines)
            if self.console.is_terminal:
                self.console.out(text, highlight=False)
            else:  # a pipe or a file: the text as it is (rich would wrap and scan it)
                self.console.file.write(text + "\n")
            self.lines = []

    def error(self, text: str) -> None:
        self.flush()
        self.console.out(f"# error: {text}", style="red", highlight=False)


def render(rows: Iterable[Row], console: Console) -> None:
    """Print rows as nccl-tests prints its table, a run (consecutive rows of one run id and
    source) at a time; reads ``rows`` once, lazily."""
    out = _Out(console)
    run: tuple[str, str | None] | None = None
    last: Row | None = None  # the run's last row, whose facts are the latest
    halves: dict[bool, Row] = {}  # the table line being gathered
    key: tuple[Any, int | None] | None = None
    errors: list[str] = []
    dropped = 0

    def end_run() -> None:
        nonlocal dropped
        if halves:
            out.add(table_line(halves))
        if last is not None:
            out.add(*summary_lines(last))
        for text in errors:
            out.error(text)
        if dropped:
            out.error(f"... and {dropped} more error rows")
        out.add("")
        halves.clear()
        errors.clear()
        dropped = 0

    for row in rows:
        this = (row.run_id, row.source)
        if this != run:
            if run is not None:
                end_run()
            run, key = this, None
            out.add(*header_lines(row))
        last = row
        if row.time_us is None and row.status == "error":
            if len(errors) < _SHOWN_ERRORS:
                errors.append(row.error or "error")
            else:
                dropped += 1
            continue
        line_key = ((row.extra or {}).get("line"), row.size_bytes)
        if line_key != key or bool(row.in_place) in halves:
            if halves:
                out.add(table_line(halves))
                halves.clear()
            key = line_key
        halves[bool(row.in_place)] = row
    if run is not None:
        end_run()
    out.flush()
