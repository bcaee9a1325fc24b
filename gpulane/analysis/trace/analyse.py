"""`gpulane trace` as one call: read every file, summarize, and write what was asked
(tables, comparison, plots, rows, JSON). The command module only parses arguments into
a :class:`TraceRequest`.

A file that cannot be read is one error line and the others are still analysed, so a
batch with one broken profile still gives its answers; the exit status (2) says one failed.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from gpulane.analysis.trace import jsondoc, plots, report
from gpulane.analysis.trace.diff import compare
from gpulane.analysis.trace.events import DEFAULT_HBM_THRESHOLD_GBPS, Trace
from gpulane.analysis.trace.linerate import line_rate_for
from gpulane.analysis.trace.read import read_trace
from gpulane.analysis.trace.rows import trace_rows
from gpulane.analysis.trace.summary import Summary, summarize
from gpulane.errors import GpulaneError, InputError, print_error
from gpulane.parquet_rows import write_parquet
from gpulane.record import RowWriter, new_run_id


@dataclass
class TraceRequest:
    """What `gpulane trace` was asked: the files and the options of its command line."""

    files: list[str]
    json: bool = False  # the analysis as JSON on stdout, tables on stderr
    out: str | None = None  # directory for rows.jsonl and rows.parquet
    hbm_threshold_gbps: float = DEFAULT_HBM_THRESHOLD_GBPS
    line_rate_gbps: float | None = None  # None: probe this machine; 0: none
    plot: str | None = None  # directory for the PNGs
    max_copies: int = 20  # copies listed per trace; 0: all
    build: str | None = None


def analyse(request: TraceRequest) -> int:
    """Run `gpulane trace` for ``request``; the exit status (2 when a file could not be read)."""
    if not math.isfinite(request.hbm_threshold_gbps) or request.hbm_threshold_gbps <= 0:
        raise InputError(
            f"--hbm-threshold-gbps: expected a positive number, got {request.hbm_threshold_gbps}"
        )

    stream = sys.stderr if request.json else sys.stdout
    width = None if stream.isatty() else 132  # full tables when piped to a file
    console = Console(file=stream, highlight=False, width=width)
    traces: list[Trace] = []
    summaries: list[Summary] = []
    failed: list[str] = []
    for f in request.files:
        try:
            t = read_trace(f, request.hbm_threshold_gbps)
        except GpulaneError as err:
            print_error(err)
            failed.append(f)
            continue
        rate, source = line_rate_for(request.line_rate_gbps, t)
        traces.append(t)
        summaries.append(summarize(t, rate, source))

    changes = [compare(summaries[0], s) for s in summaries[1:]]
    for t, s in zip(traces, summaries, strict=True):
        report.render_trace(console, t, s, max_copies=request.max_copies)
        console.print()
    if changes:
        report.render_comparison(console, summaries, changes)

    if request.plot and traces:
        plot_dir = Path(request.plot)
        written = [plots.plot_histogram(summaries, plot_dir / "bandwidth-histogram.png")]
        for t in traces:
            stem = t.label.split(".")[0] or "trace"
            written.append(plots.plot_timeline(t, plot_dir / f"timeline-{stem}.png"))
        console.print("plots: " + ", ".join(str(p) for p in written))

    if request.out and traces:
        out = Path(request.out)
        run_id = new_run_id(request.build)
        n = 0
        with RowWriter(out) as w:
            for t, s in zip(traces, summaries, strict=True):
                for row in trace_rows(t, run_id, request.build, s.line_rate_gbps):
                    w.write(row)
                    n += 1
        write_parquet(out)
        console.print(f"{n} rows (kind copy, source trace) -> {out}")

    if request.json:
        doc: dict[str, Any] = {
            "traces": [jsondoc.trace_json(t, s) for t, s in zip(traces, summaries, strict=True)],
            "comparisons": [
                {"before": summaries[0].label, "after": s.label, "changes": jsondoc.change_json(c)}
                for s, c in zip(summaries[1:], changes, strict=True)
            ],
            "failed": failed,
        }
        json.dump(doc, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    return 2 if failed else 0
