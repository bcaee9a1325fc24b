"""Wall time of `gpulane COMMAND --help` as a user runs it (a fresh process each time),
beside Hydra's own help of the same command (`--hydra-help`, which composes the config as
the old `--help` did) and a bare `python -c pass` (the interpreter's start).

    python benchmarks/cli/time_help.py benchmarks/cli/help-timings.jsonl --repeat 7 \
        --before /work/main      # also the same help from a checkout before this change

One JSON line per process: {"what": ..., "repeat": i, "seconds": ...}; the machine's
facts go to machine.txt beside the output.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

CASES: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "sweep --help": [sys.executable, "-m", "gpulane", "sweep", "--help"],
    "copy --help": [sys.executable, "-m", "gpulane", "copy", "--help"],
    "tokens --help": [sys.executable, "-m", "gpulane", "tokens", "--help"],
    "advise --help": [sys.executable, "-m", "gpulane", "advise", "--help"],
    "sweep --hydra-help": [sys.executable, "-m", "gpulane", "sweep", "--hydra-help"],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--before", type=Path, help="a checkout of gpulane to time beside this one")
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parents[2])
    cases = {what: (cmd, here) for what, cmd in CASES.items()}
    if args.before:
        cmd = [sys.executable, "-m", "gpulane", "sweep", "--help"]
        cases["before: sweep --help"] = (cmd, str(args.before.resolve()))
    records: list[dict[str, Any]] = []
    for i in range(args.repeat):  # interleaved: a busy moment hits every case alike
        for what, (cmd, tree) in cases.items():
            env = {**os.environ, "PYTHONPATH": tree}
            start = time.perf_counter()
            proc = subprocess.run(
                cmd, capture_output=True, text=True, check=False, env=env, cwd=tree
            )
            seconds = time.perf_counter() - start
            if proc.returncode != 0:
                print(f"{what}: exit {proc.returncode}: {proc.stderr[-300:]}", file=sys.stderr)
                return 1
            records.append({"what": what, "repeat": i, "seconds": round(seconds, 4)})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in records))
    load = os.getloadavg()
    (args.out.parent / "machine.txt").write_text(
        f"date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n"
        f"host: {platform.node()}\ncpus: {os.cpu_count()}\n"
        f"python: {platform.python_version()}\nplatform: {platform.platform()}\n"
        f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    for what in cases:
        times = sorted(float(r["seconds"]) for r in records if r["what"] == what)
        print(f"{what:<20} median {times[len(times) // 2]:.3f} s  max {times[-1]:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
