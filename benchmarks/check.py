"""Recompute every figure of every ``benchmarks/*/README.md`` from the committed data.

    python -m benchmarks.check                      # every README; exit 1 on any mismatch
    python -m benchmarks.check benchmarks/inference/README.md   # some READMEs
    python -m benchmarks.check --verbose            # every figure, not only the failures
    python -m benchmarks.check --try benchmarks/inference 'h200x2/roofline/*/rows.jsonl' \\
        --where 'op == "decode"' --value 'one.time_us / 1e3'     # while writing an entry

Where each figure comes from is the README's ```figures blocks (``benchmarks/figures.py``
says how to write one). Every README directly under ``benchmarks/`` needs at least one
block, empty where the README states no figure it can back. A figure fails when its file is
missing or not committed (git does not track it, e.g. an ignored path), its expression
cannot be computed, the number differs from what the README prints beyond the last printed
digit (or the entry's tolerance), or the printed text is not in the README at all; a
regenerated output fails when it differs from the committed one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import archive, forked_run
from benchmarks.figures import (
    ROOT,
    Figure,
    FigureError,
    Record,
    blocks,
    compute,
)
from benchmarks.figures import check_readme as check_one

BENCHMARKS = ROOT / "benchmarks"


def readmes() -> list[Path]:
    return sorted(BENCHMARKS.glob("*/README.md")) + sorted(
        p for p in BENCHMARKS.glob("*/*/**/README.md")
    )


def _rel(path: Path) -> Path:
    try:
        return path.relative_to(ROOT)
    except ValueError:
        return path


def untracked(paths: list[Path]) -> set[Path]:
    """The paths git does not track (empty when this is not a git work tree)."""
    if not paths:
        return set()
    held = {p: archive.archive_of(p) for p in paths}  # a packed member: its zip is tracked
    try:
        proc = subprocess.run(
            ["git", "ls-files", "-z", "--", *(str(p.relative_to(ROOT)) for p in set(held.values()))],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError, ValueError):
        return set()
    tracked = {ROOT / p for p in proc.stdout.split("\0") if p}
    known = {t.resolve() for t in tracked}
    return {p for p in paths if held[p].resolve() not in known}


def check(paths: list[Path], verbose: bool) -> int:
    bad = 0
    total = 0
    for readme in paths:
        rel = _rel(readme)
        text = readme.read_text(encoding="utf-8")
        if readme.parent.parent == BENCHMARKS and not blocks(text):
            print(f"{rel}: FAIL: no ```figures block (add one, empty if no figure is backed)")
            bad += 1
            continue
        try:
            figs = check_one(readme)
        except FigureError as err:
            print(f"{rel}: FAIL: {err}")
            bad += 1
            continue
        files = sorted({f for fig in figs for f in fig.files})
        loose = untracked(files)
        for fig in figs:
            for f in fig.files:
                if f in loose:
                    fig.problems.append(f"{_rel(f)} is not committed (ignored?)")
        failed = [f for f in figs if not f.ok]
        total += len(figs)
        bad += len(failed)
        print(f"{rel}: {len(figs) - len(failed)} of {len(figs)} figures ok")
        for fig in figs if verbose else failed:
            print("  " + describe(fig))
    print(f"{total} figures, {bad} failed")
    return 1 if bad else 0


def describe(fig: Figure) -> str:
    spec = fig.spec
    if "run" in spec:
        head = f"{fig.id}: regenerated {spec.get('output')}"
    else:
        got = ", ".join(f"{v:.6g}" for v in fig.values) or "?"
        head = f"{fig.id}: shown {spec.get('shown')!s}, computed {got}"
    return head + (" ok" if fig.ok else "  FAIL: " + "; ".join(fig.problems))


def try_entry(args: argparse.Namespace) -> int:
    """Evaluate one entry without a README: print the records or the value."""
    base = Path(args.try_[0]).resolve()
    spec = {"id": "try", "file": args.try_[1], "value": args.value or "len(rows)"}
    for key in ("where", "read", "pattern"):
        if getattr(args, key):
            spec[key] = getattr(args, key)
    fig = Figure(base / "README.md", spec)
    try:
        if not args.value:
            from benchmarks.figures import read_records, resolve_files

            for path in resolve_files(base, spec):
                recs: list[Record] = read_records(path, spec)
                print(f"{_rel(path)}: {len(recs)} records")
                for rec in recs[: args.show]:
                    print("  " + ", ".join(f"{k}={v!r}" for k, v in list(rec.items())[:14]))
            return 0
        compute(fig, {})
    except FigureError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(fig.value)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("readmes", nargs="*", type=Path, help="default: every benchmarks README")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--try", dest="try_", nargs=2, metavar=("DIR", "FILE"))
    ap.add_argument("--where")
    ap.add_argument("--value")
    ap.add_argument("--read")
    ap.add_argument("--pattern")
    ap.add_argument("--show", type=int, default=3, help="records shown by --try")
    args = ap.parse_args(argv)
    if args.try_:
        return try_entry(args)
    started = time.monotonic()
    forked_run.preload()  # once, for the regenerating commands' forks
    paths = [p.resolve() for p in args.readmes] or readmes()
    status = check(paths, args.verbose)
    print(f"benchmarks.check: {time.monotonic() - started:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
