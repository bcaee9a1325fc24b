"""`gpulane report RUN...`: any run (or group of runs) as a self-contained HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpulane.analysis.report import render_report
from gpulane.analysis.report.accept_json import read_accept
from gpulane.analysis.store import Filters, load_frame
from gpulane.campaigns.accept import ACCEPT_JSON, REPORT_HTML
from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="gpulane report",
        description="Render run directories (rows.jsonl / rows.parquet) as one self-contained "
        "HTML report: plots, tables, the topology and, when the run was accepted, the checks.",
    )
    p.add_argument(
        "runs", nargs="+", metavar="RUN", help="run directory, group of runs or rows file"
    )
    p.add_argument("-o", "--output", help=f"HTML file (default: RUN/{REPORT_HTML})")
    p.add_argument(
        "--topology",
        default="auto",
        help="topology JSON from `gpulane topo --json`; auto: topology.json in the run; none",
    )
    p.add_argument("--accept", help=f"accept.json to show (default: RUN/{ACCEPT_JSON} if present)")
    p.add_argument("--plot", metavar="DIR", help="also write the plots here as PNG")
    p.add_argument("--title")
    p.add_argument("--kind", action="append", default=[])
    p.add_argument("--op", action="append", default=[])
    p.add_argument("--build", action="append", default=[])
    p.add_argument("--where", help="pandas query on the rows")
    p.add_argument("--history", metavar="RESULTS_DIR", help="add the runs there over time")
    return p


def check_writable(out: Path) -> None:
    """Open ``out`` for writing before anything is rendered (rendering takes seconds): a
    read-only place is one line at once. The probe leaves no empty file behind."""
    existed = out.exists()
    try:
        with open(out, "a", encoding="utf-8"):
            pass
    except OSError as err:
        raise InputError(
            f"cannot write {out}: {err.strerror or err}; choose another with -o"
        ) from None
    if not existed:
        out.unlink()


def main(argv: list[str]) -> int:
    from gpulane.campaigns.accept import resolve_topology

    args = parser().parse_args(argv)
    paths = [Path(r) for r in args.runs]
    if args.output:
        check_writable(Path(args.output))
    frame = Filters(kind=args.kind, op=args.op, build=args.build, where=args.where).apply(
        load_frame(paths)
    )
    topology, topology_src = resolve_topology(args.topology, paths)
    first = paths[0] if paths[0].is_dir() else paths[0].parent
    accept_file = Path(args.accept) if args.accept else first / ACCEPT_JSON
    accepted = read_accept(accept_file) if (args.accept or accept_file.exists()) else None
    baseline = None
    if accepted is not None and accepted.baseline and Path(accepted.baseline).exists():
        baseline = load_frame([accepted.baseline])
    out = Path(args.output) if args.output else first / REPORT_HTML
    check_writable(out)
    title = args.title or "gpulane report: " + ", ".join(p.name for p in paths)
    text = render_report(
        frame,
        topology,
        accepted.verdict if accepted else None,
        title=title,
        sources=[str(p) for p in paths],
        topology_source=topology_src,
        baseline=baseline,
        findings=accepted.findings if accepted else None,
        baseline_source=accepted.baseline if accepted else None,
        history=args.history,
    )
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as err:
        raise InputError(
            f"cannot write {out}: {err.strerror or err}; choose another with -o"
        ) from err
    print(f"# report: {out}")
    if args.plot:
        from gpulane.analysis import plots

        for path in plots.write_pngs(plots.all_plots(frame), args.plot):
            print(f"# plot: {path}")
    return 0
