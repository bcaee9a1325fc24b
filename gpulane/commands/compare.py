"""`gpulane compare RUN_OR_BUILD...`: builds or runs side by side, with ratios and paths."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpulane.analysis import plots
from gpulane.analysis.compare import (
    DEFAULT_METRICS,
    compare,
    print_terminal,
    to_csv,
    to_markdown,
)
from gpulane.analysis.store import Filters, resolve_targets
from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError

EPILOG = """\
Each RUN_OR_BUILD is a run directory, a rows file, a directory of runs, a run id or a
build label (looked up under --results-dir). The first one is the reference for ratios.

examples:
  gpulane compare nvlink pcie-host socket
  gpulane compare runs/20261122-0102-vm-ab12 runs/20261123-0940-vm-77cd --format markdown
  gpulane compare x16-gen4 riser-x4 --op all_reduce --size-min 1M --plot plots/
"""


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="gpulane compare",
        description="Compare builds or runs: every collective, copy and token-rate figure "
        "they share, with ratios to the first and the path label of each.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("targets", nargs="+", metavar="RUN_OR_BUILD")
    p.add_argument("--results-dir", default="runs", help="where run ids and builds are looked up")
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table")
    p.add_argument("-o", "--output", help="write the table here instead of stdout")
    p.add_argument("--plot", metavar="DIR", help="write busbw.png, copy.png, tokens.png here")
    p.add_argument(
        "--metrics",
        default=",".join(DEFAULT_METRICS),
        help="comma list of busbw_gbps, time_us, algbw_gbps, tokens_per_s, ttft_ms",
    )
    p.add_argument("--kind", action="append", default=[], help="collective, copy, tokens")
    p.add_argument("--op", action="append", default=[], help="op names or wildcards")
    p.add_argument("--size-min")
    p.add_argument("--size-max")
    p.add_argument("--where", help="pandas query applied to every side's rows")
    p.add_argument("--all", action="store_true", help="also figures not every side has")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    filters = Filters(
        kind=args.kind, op=args.op, where=args.where, size_min=args.size_min, size_max=args.size_max
    )
    sides = [
        (label, filters.apply(frame))
        for label, frame in resolve_targets(args.targets, args.results_dir)
    ]
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    cmp = compare(sides, metrics=metrics, shared_only=not args.all)
    if cmp.table.empty:
        sys.stderr.write(
            "gpulane: warning: no figure is shared by " + ", ".join(cmp.labels) + " (try --all)\n"
        )
    if args.format == "table":
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                print_terminal(cmp, file=fh)
        else:
            print_terminal(cmp)
    else:
        if args.format == "markdown":
            text = to_markdown(cmp)
        elif args.format == "csv":
            text = to_csv(cmp)
        else:
            text = json.dumps(
                {
                    "sides": cmp.labels,
                    "figures": json.loads(cmp.table.to_json(orient="records")),
                    "summary": json.loads(cmp.summary.to_json(orient="records")),
                },
                indent=1,
            )
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if args.plot:
        out = Path(args.plot)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"--plot: cannot create {out}: {err.strerror}") from err
        for name, png in plots.all_plots(cmp.frame, series="side").items():
            (out / f"{name}.png").write_bytes(png)
            print(f"# plot: {out / (name + '.png')}")
    return 0
