"""How long accept's page takes: `gpulane accept run=GROUP` as a user runs it, this
checkout against an earlier commit side by side, in alternated rounds.

    PYTHONPATH=. python3 benchmarks/report/time_report.py --before 4d2f508 --rounds 5 \\
        --out benchmarks/report/timings.jsonl

GROUP is the real 1x H200 run of benchmarks/gpu/conformance/h200/ (its default job's
collective rows and its healthy copy rows), copied into a scratch directory. Each round
runs the earlier commit (a `git worktree` of it, on PYTHONPATH) and this checkout one
after the other, the order swapped every round, and reads the seconds accept prints
itself ("# accept: seconds: ... report X, total Y") beside the wall time of the process.
One JSON line per run: which (before/now), round, report_s, total_s, wall_s, load (the
1-minute load average when it started: the machine is a shared 2-core VM).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "benchmarks/gpu/conformance/h200"
SECONDS = re.compile(r"# accept: seconds: .*report ([\d.]+), total ([\d.]+)")


def _group(scratch: Path) -> Path:
    group = scratch / "group"
    for name in ("default-collective", "healthy-copy"):
        shutil.copytree(RUNS / name, group / name)
    return group


def _one(which: str, src: Path, group: Path, rnd: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gpulane", "accept", f"run={group}"],
        capture_output=True, text=True, env=env, cwd=src, timeout=600,
    )  # fmt: skip
    wall = time.perf_counter() - start
    found = SECONDS.search(done.stdout + done.stderr)
    if found is None:
        raise SystemExit(f"{which}: no seconds line (exit {done.returncode}):\n{done.stderr}")
    return {
        "which": which, "round": rnd, "exit": done.returncode,
        "report_s": float(found.group(1)), "total_s": float(found.group(2)),
        "wall_s": round(wall, 2), "load": round(load, 2),
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="the earlier commit to run beside this one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        old = scratch / "before"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(old), args.before],
                       cwd=ROOT, check=True)  # fmt: skip
        try:
            group = _group(scratch)
            rows = []
            for rnd in range(args.rounds):
                order = [("before", old), ("now", ROOT)]
                for which, src in order if rnd % 2 == 0 else order[::-1]:
                    rows.append(_one(which, src, group, rnd))
                    print(json.dumps(rows[-1]), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
