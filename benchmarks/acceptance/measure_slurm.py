"""What a campaign pays Slurm per round, measured on the local Slurm (scripts/slurm-up.sh 8):

- job start latency: from `sbatch` until the job's script runs, for jobs of 1, 2, 4 and 8
  nodes (repeated);
- burst: N one-node jobs submitted one after the other (as a campaign round submits them),
  the submission rate and the time until the last one runs;
- end latency: from the end of the job's script until sacct says COMPLETED (what the
  campaign's poll waits for before the next round);
- gpulane's own submission: a campaign round's elements started one after the other
  through gpulane.campaigns.elements.start_element (configuration saved, submitit job
  submitted), the seconds per element (each element a 2-node sweep of 8 bytes on CPUs,
  waited for at the end).

    SLURM_CONF=/etc/slurm-nodes/slurm.conf python3 benchmarks/acceptance/measure_slurm.py \
        --out benchmarks/acceptance/measured-slurm.json

Writes the figures (seconds) with the machine and date; simulate.py reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def sbatch(nodes: int, marks: Path, name: str, partition: str | None) -> str:
    script = f"date +%s.%N > {marks}/{name}.start; sleep 0.2; date +%s.%N > {marks}/{name}.end"
    cmd = ["sbatch", "--parsable", "-N", str(nodes), "-n", str(nodes), "-o", "/dev/null"]
    cmd += ["--no-requeue", "-t", "5", "-J", f"measure-{name}"]
    if partition:
        cmd += ["-p", partition]
    out = subprocess.run([*cmd, "--wrap", script], capture_output=True, text=True, check=True)
    return out.stdout.strip().split(";")[0]


def wait_file(path: Path, limit: float = 120.0) -> float:
    deadline = time.time() + limit
    while time.time() < deadline:
        if path.exists() and path.read_text().strip():
            return float(path.read_text())
        time.sleep(0.01)
    raise TimeoutError(f"{path} did not appear in {limit} s")


def state(job: str) -> str:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"], capture_output=True, text=True
    )
    return out.stdout.strip().split("\n")[0] if out.stdout.strip() else ""


def wait_completed(job: str, limit: float = 120.0) -> float:
    deadline = time.time() + limit
    while time.time() < deadline:
        if state(job).startswith("COMPLETED"):
            return time.time()
        time.sleep(0.05)
    raise TimeoutError(f"job {job} not COMPLETED in {limit} s")


def gpulane_submit(count: int, nodes: list[str], results: Path) -> dict[str, float]:
    """Seconds per element for gpulane's own submission of a round of pair jobs."""
    from gpulane.campaigns.elements import (
        JOB,
        ElementPlan,
        new_element,
        start_element,
        wait_elements,
    )
    from gpulane.config.commands import SweepConfig
    from gpulane.config.load import typed
    from gpulane.launch.slurm.settings import settings
    from gpulane.rundir import make_run_dir, run_env

    cfg = typed(
        {
            "results_dir": str(results),
            "device": "cpu",
            "progress": False,
            "sizes": {"min": 8, "max": 8},
            "iters": 1,
            "warmup": 0,
            "backend": {"name": "torch"},
            "launcher": {"name": "slurm", "poll_s": 0.5, "time": 5},
        },
        SweepConfig,
    )
    s = settings(cfg)
    group = make_run_dir(cfg)
    plan = ElementPlan(cfg, run_env(cfg), 1, "cpu", s, JOB)
    pairs = [[nodes[(2 * i) % len(nodes)], nodes[(2 * i + 1) % len(nodes)]] for i in range(count)]
    elements, per = [], []
    for i, pair in enumerate(pairs):
        t0 = time.time()
        elements.append(start_element(plan, new_element(group, f"e{i:03d}-{'+'.join(pair)}", pair)))
        per.append(time.time() - t0)
    wait_elements(elements, 0.5)
    return summary(per)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--burst", type=int, default=32)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--partition", default=None)
    ap.add_argument("--gpulane-submits", type=int, default=16)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    marks = Path(tempfile.mkdtemp(prefix="gpulane-measure-"))
    start: dict[int, list[float]] = {}
    end: list[float] = []
    for n in args.nodes:
        for r in range(args.repeats):
            name = f"n{n}-{r}"
            t0 = time.time()
            job = sbatch(n, marks, name, args.partition)
            start.setdefault(n, []).append(wait_file(marks / f"{name}.start") - t0)
            finished = wait_file(marks / f"{name}.end")
            end.append(wait_completed(job) - finished)
    t0 = time.time()
    jobs = [sbatch(1, marks, f"burst-{i}", args.partition) for i in range(args.burst)]
    submitted = time.time() - t0
    last = max(wait_file(marks / f"burst-{i}.start") for i in range(args.burst)) - t0
    for job in jobs:
        wait_completed(job)
    nodes = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True
    ).stdout.split()
    per_element = gpulane_submit(args.gpulane_submits, nodes, marks / "runs")
    load = os.getloadavg()
    result: dict[str, Any] = {
        "machine": f"{platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "slurm_conf": os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"),
        "load_average_after": [round(x, 2) for x in load],
        "start_latency_s": {str(n): summary(v) for n, v in start.items()},
        "end_latency_s": summary(end),
        "gpulane_submit_s_per_element": per_element,
        "burst": {
            "jobs": args.burst,
            "submit_s": submitted,
            "submit_rate_per_s": args.burst / submitted,
            "last_started_s": last,
        },
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
