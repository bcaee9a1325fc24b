"""`gpulane trace FILE...`: copy bandwidth, blocking and overlap from profiler traces.

    gpulane trace before.json.gz after.json.gz --plot plots/ --out rows/
    gpulane trace run.sqlite --line-rate-gbps 63 --json

Reads torch.profiler Chrome traces (plain or .gz, cut-off files too) and Nsight Systems
SQLite exports. With two or more files, each is compared with the first side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from gpulane.analysis.trace import (
    DEFAULT_HBM_THRESHOLD_GBPS,
    Summary,
    Trace,
    compare,
    main_device,
    probe_line_rate,
    read_trace,
    summarize,
    trace_rows,
)
from gpulane.commands.args import ArgumentParser
from gpulane.errors import GpulaneError, InputError
from gpulane.record import RowWriter, new_run_id, write_parquet


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="gpulane trace",
        description="Copy bandwidth, host blocking and copy/compute overlap from "
        "torch.profiler Chrome traces (.json, .json.gz) and Nsight Systems SQLite exports.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="trace files; two or more are compared")
    p.add_argument("--json", action="store_true", help="print the analysis as JSON on stdout")
    p.add_argument("--out", metavar="DIR", help="write result rows (rows.jsonl, rows.parquet) here")
    p.add_argument(
        "--hbm-threshold-gbps",
        type=float,
        default=DEFAULT_HBM_THRESHOLD_GBPS,
        help="for traces with only host-side copy ops: copies faster than this are counted "
        "as on-device (HBM), the others as PCIe (default %(default)g)",
    )
    p.add_argument(
        "--line-rate-gbps",
        type=float,
        default=None,
        help="PCIe line rate per direction to compare with (default: from this machine's "
        "topology when it can be probed; 0 for none)",
    )
    p.add_argument("--plot", metavar="DIR", help="write the histogram and timeline PNGs here")
    p.add_argument(
        "--max-copies", type=int, default=20, help="copies listed per trace (0: all; default 20)"
    )
    p.add_argument("--build", help="build label for the rows (default: the host name)")
    return p


def _line_rate(arg: float | None, trace: Trace) -> tuple[float | None, str | None]:
    if arg is not None:
        if not math.isfinite(arg) or arg < 0:
            raise InputError(f"--line-rate-gbps: expected a positive number, got {arg}")
        return (arg, "--line-rate-gbps") if arg > 0 else (None, None)
    if not trace.has_gpu:
        return None, None
    return probe_line_rate(main_device(trace))


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if not math.isfinite(args.hbm_threshold_gbps) or args.hbm_threshold_gbps <= 0:
        raise InputError(
            f"--hbm-threshold-gbps: expected a positive number, got {args.hbm_threshold_gbps}"
        )

    from rich.console import Console

    from gpulane.analysis import trace_report as report

    stream = sys.stderr if args.json else sys.stdout
    width = None if stream.isatty() else 132  # full tables when piped to a file
    console = Console(file=stream, highlight=False, width=width)
    traces: list[Trace] = []
    summaries: list[Summary] = []
    failed: list[str] = []
    for f in args.files:
        try:
            t = read_trace(f, args.hbm_threshold_gbps)
        except GpulaneError as err:
            sys.stderr.write(f"gpulane: error: {err}\n")
            failed.append(f)
            continue
        rate, source = _line_rate(args.line_rate_gbps, t)
        traces.append(t)
        summaries.append(summarize(t, rate, source))

    changes = [compare(summaries[0], s) for s in summaries[1:]]
    for t, s in zip(traces, summaries, strict=True):
        report.render_trace(console, t, s, max_copies=args.max_copies)
        console.print()
    if changes:
        report.render_comparison(console, summaries, changes)

    if args.plot and traces:
        plot_dir = Path(args.plot)
        written = [report.plot_histogram(summaries, plot_dir / "bandwidth-histogram.png")]
        for t in traces:
            stem = t.label.split(".")[0] or "trace"
            written.append(report.plot_timeline(t, plot_dir / f"timeline-{stem}.png"))
        console.print("plots: " + ", ".join(str(p) for p in written))

    if args.out and traces:
        out = Path(args.out)
        run_id = new_run_id(args.build)
        n = 0
        with RowWriter(out) as w:
            for t, s in zip(traces, summaries, strict=True):
                for row in trace_rows(t, run_id, args.build, s.line_rate_gbps):
                    w.write(row)
                    n += 1
        write_parquet(out)
        console.print(f"{n} rows (kind copy, source trace) -> {out}")

    if args.json:
        doc: dict[str, Any] = {
            "traces": [report.trace_json(t, s) for t, s in zip(traces, summaries, strict=True)],
            "comparisons": [
                {"before": summaries[0].label, "after": s.label, "changes": report.change_json(c)}
                for s, c in zip(summaries[1:], changes, strict=True)
            ],
            "failed": failed,
        }
        json.dump(doc, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    return 2 if failed else 0
