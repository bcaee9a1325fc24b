"""`gpulane history [RESULTS_DIR]`: each figure over time, with regressions flagged."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpulane.analysis.history import (
    key_series,
    load_runs,
    regression_lines,
    regression_text,
    series,
    trend_line,
)
from gpulane.analysis.store import Filters
from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError

EPILOG = """\
A regression is a drop beyond the noise band measured from the runs before it (the
earlier runs' range, and the median spread of their repeats and p50/p99 times; the run
being judged never widens its own band),
named with the first run where it appeared and what changed there. docs/reference.md.

examples:
  gpulane history runs/
  gpulane history runs/ --op all_reduce --build nvlink --plot history.png
  gpulane history /srv/gpulane/runs --all --format json     # every size, for a script

exit status: 0 no regression, 1 a regression was found (cron: alert on 1),
2 bad input (no such directory, no rows under it).
"""


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="gpulane history",
        description="Every run under a results directory: each figure's trend, regressions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results_dir", nargs="?", default="runs", metavar="RESULTS_DIR")
    p.add_argument("--op", action="append", default=[], help="op names or wildcards")
    p.add_argument("--build", action="append", default=[], help="build labels or wildcards")
    p.add_argument(
        "--all", action="store_true", help="a trend line for every size, not the largest"
    )
    p.add_argument("--plot", metavar="PNG", help="write the key figures over time here")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    loaded = load_runs(args.results_dir)
    filters = Filters(op=args.op, build=args.build)
    frame = filters.apply(loaded)
    if frame.empty:
        why = filters.why_empty(loaded, f"under {args.results_dir}")
        raise InputError(why or f"{args.results_dir}: no rows of --op/--build asked for")
    found = series(frame)
    regressed = [s for s in found if s.regression is not None]
    shown = found if args.all else key_series(found)
    if args.format == "json":
        out = [
            {
                "figure": s.label(),
                "runs": [
                    {"run_id": r.run_id, "started_at": str(r.started_at), "value": r.value}
                    for r in s.runs.itertuples()
                ],
                "regression": None if s.regression is None else regression_text(s),
            }
            for s in (
                found
                if args.all
                else sorted(
                    {id(s): s for s in [*shown, *regressed]}.values(), key=lambda s: s.label()
                )
            )
        ]
        print(json.dumps(out, indent=1, default=str))
    else:
        runs = frame["run_id"].nunique()
        print(
            f"# history: {runs} runs, {len(found)} figures, {str(frame['started_at'].min())[:10]}"
            f" → {str(frame['started_at'].max())[:10]} ({args.results_dir})"
        )
        for s in sorted(shown, key=lambda s: s.label()):
            print(trend_line(s))
        lines = regression_lines(regressed)
        for line in lines:
            print(line)
        print(
            f"# {len(lines)} regression(s), {len(regressed)} figures"
            if regressed
            else "# no regression beyond the runs' noise"
        )
    if args.plot:
        from gpulane.analysis.history_plot import plot_history

        plot = plot_history(
            [*regressed, *[s for s in shown if s.regression is None]], Path(args.plot)
        )
        print(f"# plot: {plot}")
    return 1 if regressed else 0
