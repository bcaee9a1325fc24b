"""`gpulane join RUN_DIR_OR_RESULTS...`: token rates beside the collectives that cost them."""

from __future__ import annotations

import json
import sys

from gpulane.analysis.join import Joined, join_rows
from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError
from gpulane.units import format_size


def main(argv: list[str]) -> int:
    parser = ArgumentParser(
        prog="gpulane join",
        description=(
            "Token rows (gpulane tokens) beside the collective rows (gpulane sweep, "
            "nccl-tests) of the same build, at the all-reduce sizes the model sends."
        ),
    )
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="run dirs, results dirs, rows files"
    )
    parser.add_argument("--build", action="append", default=[], help="only these builds")
    parser.add_argument("--json", action="store_true", help="print joined rows as JSON Lines")
    try:
        args = parser.parse_args(argv)
    except SystemExit as ex:
        return int(ex.code) if isinstance(ex.code, int) else 2
    from gpulane.analysis.store import load_frame
    from gpulane.record import frame_rows

    frame = load_frame(args.paths)
    rows = frame_rows(frame)
    joined = join_rows(rows, args.build)
    if not any(r.kind == "tokens" for r in rows):
        raise InputError("join: no tokens rows under these paths; run `gpulane tokens` first")
    if args.json:
        for j in joined:
            sys.stdout.write(json.dumps(j.to_dict(), default=str) + "\n")
        return 0
    if not any(r.kind == "collective" for r in rows):
        sys.stderr.write(
            "# no collective rows: run `gpulane sweep` on the same build (same build=LABEL)\n"
        )
    from rich.console import Console

    Console(highlight=False, width=None if sys.stdout.isatty() else 200).print(table(joined))
    # why cells are '-': each distinct reason once, under the table
    for note in dict.fromkeys(j.note for j in joined if j.note and j.collective_us is None):
        sys.stdout.write(f"# -: {note}\n")
    # shares over 100 %: each row's reason, once
    for j in joined:
        if j.over_step:
            sys.stdout.write(f"# !: {j.model} {j.op} tp={j.tp} batch {j.batch}: {j.over_step}\n")
    return 0


def _f(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def table(joined: list[Joined]) -> object:
    from rich.table import Table

    t = Table(title="tokens beside collectives (per step, per rank)")
    cols = (
        "build",
        "model",
        "op",
        "tp",
        "pp",
        "batch",
        "in",
        "tokens/s",
        "step ms",
        "collective",
        "size",
        "calls",
        "us each",
        "busbw GB/s",
        "comm ms",
        "est share",
        "measured share",
    )
    for c in cols:
        t.add_column(c, justify="left" if c in ("build", "model", "op", "collective") else "right")
    for j in joined:
        t.add_row(
            j.build,
            str(j.model),
            j.op,
            str(j.tp),
            str(j.pp),
            str(j.batch),
            str(j.input_len),
            _f(j.tokens_per_s, ".1f"),
            _f(j.step_ms, ".3f"),
            j.collective,
            format_size(j.size_bytes),
            str(j.calls_per_step),
            _f(j.collective_us, ".1f") + ("*" if j.extrapolated else ""),
            _f(j.busbw_gbps, ".2f"),
            _f(j.comm_ms_per_step, ".3f"),
            _pct(j.comm_share_est) + ("!" if j.over_step else ""),
            _pct(None if j.comm_share is None else float(j.comm_share)),
        )
    return t
