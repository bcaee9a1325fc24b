"""What a local run's ranks cost to start, forked (``launcher.start=fork``) against new
processes (``launcher.start=exec``): the same 2-rank gloo sweep of one 1 KiB all_reduce,
the two ways alternated round after round, each charged the machine's CPU seconds
(/proc/stat, every process: the command, its fork server, its ranks) while it ran.

    python benchmarks/ci/rank_start.py --rounds 8 > benchmarks/ci/rank-start.txt

One line per run (``start=fork cpu_s=4.51 wall_s=3.2 rc=0``), then the medians and their
ratio. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

SWEEP = [
    "sweep", "ranks=2", "device=cpu", "collectives=all_reduce", "sizes.min=1K",
    "sizes.max=1K", "warmup=1", "iters=1", "progress=false",
]  # fmt: skip


def machine_cpu_s() -> float:
    """User, nice, system, irq and softirq seconds of every CPU (not idle, iowait, steal)."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = fh.readline().split()
    ticks = sum(int(fields[i]) for i in (1, 2, 3, 6, 7))
    return ticks / 100.0  # USER_HZ


def one(start: str, results: str) -> tuple[float, float, int]:
    cpu, wall = machine_cpu_s(), time.monotonic()
    rc = subprocess.run(
        [sys.executable, "-m", "gpulane", *SWEEP, f"launcher.start={start}", f"results_dir={results}"],
        capture_output=True,
    ).returncode  # fmt: skip
    took = time.monotonic() - wall
    time.sleep(0.5)  # a killed fork server's last ticks land in /proc/stat
    return machine_cpu_s() - cpu, took, rc


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    cpu: dict[str, list[float]] = {"fork": [], "exec": []}
    with tempfile.TemporaryDirectory() as results:
        one("fork", results)  # warm the page cache: the first run of all reads torch from disk
        for r in range(args.rounds):
            order = ("fork", "exec") if r % 2 == 0 else ("exec", "fork")
            for start in order:
                c, w, rc = one(start, results)
                print(f"start={start} cpu_s={c:.2f} wall_s={w:.2f} rc={rc}", flush=True)
                if rc != 0:
                    return rc
                cpu[start].append(c)
    fork, exe = statistics.median(cpu["fork"]), statistics.median(cpu["exec"])
    print(f"median fork={fork:.2f} exec={exe:.2f} ratio={fork / exe:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
