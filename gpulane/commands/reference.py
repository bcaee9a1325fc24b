"""`gpulane reference list|add`: the table of known-good figures, and a site's own."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

from gpulane.analysis.reference import ReferenceTable
from gpulane.analysis.reference.site import accepted, entries_from_frame, write_site
from gpulane.analysis.reference.table import SITE_FILE
from gpulane.analysis.store import load_frame
from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError
from gpulane.topology.paths import is_label

EPILOG = """\
examples:
  gpulane reference list --gpu H200
  gpulane reference add runs/20261127-0102-nvlink-ab12          # into runs/reference.yaml
  gpulane reference add runs/accept-* --site ~/.config/gpulane/reference.yaml

`add` takes runs that passed `gpulane accept` (an accept.json with no failed rule in the
run or up to two folders above it). Site tables are read before gpulane's own:
<results_dir>/reference.yaml, then $XDG_CONFIG_HOME/gpulane/reference.yaml.

exit status: 0 done, 2 bad input (a run not accepted, a table that cannot be read).
"""


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="gpulane reference",
        description="The reference table: known-good figures with their sources.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="action", required=True)
    ls = sub.add_parser("list", help="the entries that apply, with provenance")
    ls.add_argument("--results-dir", default="runs", help="where the site table is looked for")
    ls.add_argument("--gpu", help="only entries for this GPU model (substring)")
    ls.add_argument("--op", help="only this op")
    add = sub.add_parser("add", help="make accepted runs the site's reference")
    add.add_argument("runs", nargs="+", metavar="RUN", help="accepted run directories")
    add.add_argument(
        "--site",
        help=f"the site table to write (default: RESULTS_DIR/{SITE_FILE}, RESULTS_DIR being "
        "the folder above the first run)",
    )
    add.add_argument("--source", help="provenance text (default: 'site runs' and the run ids)")
    add.add_argument(
        "--path",
        metavar="LABEL",
        help="the path label (PIX, PXB, PHB, NODE, SYS, NV#) of collective rows that name "
        "none, as a parsed nccl-tests log: what `nvidia-smi topo -m` shows between the GPUs",
    )
    return p


def _list(args: argparse.Namespace) -> int:
    table = ReferenceTable.load(args.results_dir)
    for e in table.entries:
        if args.gpu and not any(args.gpu.casefold() in g.casefold() for g in e.gpu):
            continue
        if args.op and e.op != args.op:
            continue
        rng = f"≥ {e.low:g}" if e.high is None else f"{e.low:g}–{e.high:g}"
        runs = f", {e.runs} runs" if e.runs else ""
        print(
            f"{e.origin:<9} {e.machine()} {e.op} {e.band()}: {rng} {e.unit}{runs}  "
            f"[{e.source}: {e.cite}]"
        )
    return 0


def _add(args: argparse.Namespace) -> int:
    runs = [Path(r) for r in args.runs]
    for run in runs:
        if not run.exists():
            raise InputError(f"{run}: no such run directory")
        accepted(run)  # every run vouched for before anything is written
    frame = _with_path(load_frame(runs), args.path, runs)
    source = args.source or "site runs " + ", ".join(r.name for r in runs)
    entries = entries_from_frame(frame, source, ", ".join(str(r) for r in runs), "site")
    if not entries:
        raise InputError(
            f"{', '.join(map(str, runs))}: no figure that can be a reference (collective or "
            "copy rows of 1 MiB and more that name their GPU model and path)"
        )
    site = Path(os.path.expanduser(args.site)) if args.site else runs[0].parent / SITE_FILE
    total = write_site(site, entries)
    print(
        f"# reference: {len(entries)} entries from {len(runs)} run(s) into {site} ({total} in all)"
    )
    return 0


def _with_path(frame: pd.DataFrame, label: str | None, runs: list[Path]) -> pd.DataFrame:
    """Collective rows that name no path (a parsed log) take ``--path``; without it they
    cannot be a reference, and the error says how to give it."""
    unnamed = (frame["kind"] == "collective") & frame["path"].isna() & (frame["status"] == "ok")
    # CPU ranks (gloo) have no GPU path: --path would file CPU figures as a GPU reference
    if unnamed.any() and frame.loc[unnamed, "backend"].astype(str).str.endswith("gloo").all():
        raise InputError(
            f"{', '.join(map(str, runs))}: the collective rows were measured on CPU ranks "
            "(torch-gloo); the reference table holds GPU figures: add a run made on GPUs"
        )
    if label is None:
        if unnamed.any() and not (frame["kind"] == "collective")[~unnamed].any():
            raise InputError(
                f"{', '.join(map(str, runs))}: the collective rows name no path label (a parsed "
                "log?); give it with --path, e.g. --path PIX (`nvidia-smi topo -m` shows it)"
            )
        return frame
    if not is_label(label) or label in ("X", "NET"):
        raise InputError(
            f"--path {label}: not a GPU path label; choose NV# (e.g. NV18), PIX, PXB, PHB, "
            "NODE or SYS"
        )
    frame = frame.copy()
    frame.loc[unnamed, "path"] = label
    return frame


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return _list(args) if args.action == "list" else _add(args)
