"""`gpulane compare RUN_OR_BUILD...`: builds or runs side by side, with ratios and paths;
``--html`` the build comparison page, ``--plot`` its plots as PNG."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from gpulane.analysis.compare import (
    DEFAULT_METRICS,
    Comparison,
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
  gpulane compare nvlink pcie-host socket --html builds.html
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
    p.add_argument(
        "--html",
        metavar="PAGE",
        help="write the build comparison page (verdict, topology, plots, advisor) here",
    )
    p.add_argument("--plot", metavar="DIR", help="write the page's plots here as PNG")
    p.add_argument(
        "--model",
        help="model the advisor splits on the page (default: the model the token rows "
        "name, else advise's default); 'none' leaves the advisor out",
    )
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


def text_of(cmp: Comparison, fmt: str) -> str:
    if fmt == "markdown":
        return to_markdown(cmp)
    if fmt == "csv":
        return to_csv(cmp)
    return json.dumps(
        {
            "sides": cmp.labels,
            "figures": json.loads(cmp.table.to_json(orient="records")),
            "summary": json.loads(cmp.summary.to_json(orient="records")),
            "not_compared": cmp.notes,
        },
        indent=1,
    )


def write_text(path: str, what: str, fill: object) -> None:
    """Write to ``path`` with ``fill(fh)``; an unwritable path is bad input, one line."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fill(fh)  # type: ignore[operator]
    except OSError as err:
        raise InputError(f"{what}: cannot write {path}: {err.strerror or err}") from err


def advisor_model(frame: pd.DataFrame, wanted: str | None) -> str | None:
    """The model option the page's advisor uses: --model, else the one model the token
    rows name when the configuration knows it, else advise's default (None)."""
    from gpulane.commands.hydra_app import config_options

    known = config_options("model")
    if wanted:
        if wanted not in known:
            raise InputError(f"--model {wanted}: no such model; choose one of {', '.join(known)}")
        return wanted
    tokens = frame[frame["kind"] == "tokens"] if len(frame) else frame
    named = {str(m) for m in tokens["model"].dropna()} if len(tokens) else set()
    return named.pop() if len(named) == 1 and next(iter(named)) in known else None


def html_page(cmp: Comparison, sides: list[tuple[str, pd.DataFrame]], model: str | None) -> str:
    from gpulane.analysis.report.topology import build_topologies
    from gpulane.commands.hydra_app import compose_typed
    from gpulane.planning.builds import compare_page

    cfg = None
    if model != "none":
        name = advisor_model(cmp.frame, model)
        cfg = compose_typed("advise", [f"model={name}"] if name else [])
    return compare_page(cmp, build_topologies(sides), cfg)


def print_reference(frame: pd.DataFrame, results_dir: str) -> None:
    """Where each side's figures fall against the reference table (docs/reference.md)."""
    from gpulane.analysis.reference import reference_lines

    for line in reference_lines(frame, results_dir, label="side"):
        print(line)


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.model not in (None, "none"):
        advisor_model(pd.DataFrame(), args.model)  # a model that does not exist: before anything
    filters = Filters(
        kind=args.kind, op=args.op, where=args.where, size_min=args.size_min, size_max=args.size_max
    )
    sides = []
    for label, frame in resolve_targets(args.targets, args.results_dir):
        kept = filters.apply(frame)
        why = filters.why_empty(frame, f"of {label}") if kept.empty and len(frame) else None
        if why:
            raise InputError(why)
        sides.append((label, kept))
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    cmp = compare(sides, metrics=metrics, shared_only=not args.all)
    if cmp.table.empty:
        why = "; ".join(cmp.notes) or "no rows of the metrics asked for"
        raise InputError(
            f"no figure is shared by {', '.join(cmp.labels)}: {why}; --all lists them side by side"
        )
    if args.format == "table":
        if args.output:
            write_text(args.output, "-o", lambda fh: print_terminal(cmp, file=fh))
        else:
            print_terminal(cmp)
            print_reference(cmp.frame, args.results_dir)
    else:
        text = text_of(cmp, args.format)
        text = text if text.endswith("\n") else text + "\n"
        if args.output:
            write_text(args.output, "-o", lambda fh: fh.write(text))
        else:
            sys.stdout.write(text)
    if args.html:
        page = html_page(cmp, sides, args.model)
        write_text(args.html, "--html", lambda fh: fh.write(page))
        print(f"# page: {args.html}")
    if args.plot:
        from gpulane.analysis import plots

        colour_of = plots.colours(cmp.labels)
        for path in plots.write_pngs(
            plots.all_plots(cmp.frame, "side", colour_of), Path(args.plot)
        ):
            print(f"# plot: {path}")
    return 0
