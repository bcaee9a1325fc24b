"""`gpulane trace FILE...`: copy bandwidth, blocking and overlap from profiler traces.

    gpulane trace before.json.gz after.json.gz --plot plots/ --out rows/
    gpulane trace run.sqlite --line-rate-gbps 63 --json

Reads torch.profiler Chrome traces (plain or .gz, cut-off files too) and Nsight Systems
SQLite exports. With two or more files, each is compared with the first side by side.
"""

from __future__ import annotations

import argparse

from gpulane.analysis.trace import DEFAULT_HBM_THRESHOLD_GBPS, TraceRequest, analyse
from gpulane.commands.args import ArgumentParser
from gpulane.errors import InputError

# Binary files gpulane trace reads (the others must be text: a Chrome trace's JSON).
GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"


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


def check_readable(path: str) -> None:
    """One line, never the file's bytes, for a file that is no trace at all (a binary that
    is neither gzip nor SQLite); the reader explains text that is not a trace."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8192)
    except OSError:
        return  # the reader names a missing or unreadable file
    if head.startswith((GZIP_MAGIC, SQLITE_MAGIC)):
        return
    if path.endswith(".nsys-rep") or head.startswith(b"\x00\x00\x00\x00NSYS"):
        raise InputError(
            f"{path}: an Nsight Systems report; export it first: "
            f"nsys export --type sqlite {path}, then gpulane trace FILE.sqlite"
        )
    try:
        head.decode("utf-8")
        binary = b"\x00" in head
    except UnicodeDecodeError as err:
        binary = err.start < len(head) - 4  # a character cut at the end of the block is text
    if binary:
        raise InputError(
            f"{path}: a binary file, not a trace; gpulane trace reads torch.profiler Chrome "
            "traces (.json, .json.gz) and Nsight Systems SQLite exports (.sqlite)"
        )


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    for path in args.files:
        check_readable(path)
    return analyse(
        TraceRequest(
            files=args.files,
            json=args.json,
            out=args.out,
            hbm_threshold_gbps=args.hbm_threshold_gbps,
            line_rate_gbps=args.line_rate_gbps,
            plot=args.plot,
            max_copies=args.max_copies,
            build=args.build,
        )
    )
