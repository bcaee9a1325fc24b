"""How long cluster acceptance takes, as a function of node count, per pattern: the real
planner (gpulane.campaigns.plans) lays out the rounds of jobs, and measured times are
replayed through them.

    python3 benchmarks/acceptance/simulate.py                  # the table in README.md
    python3 benchmarks/acceptance/simulate.py --nodes 8 64 1024 --json out.json
    python3 benchmarks/acceptance/simulate.py --calibrate RUNS/GROUP   # replay a real campaign

A round's wall time is: submitting its jobs (gpulane's measured seconds per job), the job start
latency measured on the local Slurm for its node count, the longest test of the round,
and the end latency (until sacct says COMPLETED and the campaign moves on). A campaign is
the sum of its rounds. A test's time is a fixed start cost (process, CUDA and NCCL start,
from a measured gpulane sweep on the 2 x H200 machine) plus, per rank, the
communicator's set-up at scale (an assumption, below), plus every operation of its sizes
at the time a measured curve gives: nccl-tests all_reduce on the 2 x H200 machine,
over NVLink within a node and, between nodes, over NCCL's socket transport (3.3-4 GB/s
busbw: slower than any data-centre NIC, so the times between nodes are upper bounds).
For n ranks the curve's bandwidth term is scaled by the ring's 2(n-1)/n and its latency
by log2(n) (NCCL's trees for small messages).

--calibrate replays the elements of a real campaign (their measured job times, from sacct)
through the same round model and compares the predicted wall time with the measured one.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.campaigns import plans
from gpulane.collectives.nccl_tests.logs import parse_log
from gpulane.textio import read_text

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks.* beside gpulane
    sys.path.insert(0, str(REPO))

from benchmarks.archive import real  # noqa: E402  (a folder packed as <folder>.zip)

# the logs kept out on disk and those packed in h200x2.zip, side by side
CURVES = real(REPO / "benchmarks" / "collectives" / "h200x2")
GPUS_PER_NODE = 8

# Assumptions (not measured here; each is named in README.md's table of inputs).
ASSUME = {
    # NCCL communicator set-up grows with the ranks (bootstrap all-gather, rings/trees):
    # 5 ms per rank is ~41 s at 8192 ranks, the order reported for large jobs.
    "init_s_per_rank": 0.005,
    # the campaign's poll between state queries (launcher.poll_s)
    "poll_s": 2.0,
    "warmup": 5,
    "iters": 20,
}


@dataclass(frozen=True)
class Curve:
    """A measured all_reduce curve: size -> time per operation for 2 ranks."""

    name: str
    sizes: list[int]
    times_us: list[float]

    def time_us(self, size: int) -> float:
        """Log-log interpolation, clamped to the measured range's bandwidth at the ends."""
        i = bisect.bisect_left(self.sizes, size)
        if i < len(self.sizes) and self.sizes[i] == size:
            return self.times_us[i]
        if i == 0:
            return self.times_us[0]
        if i == len(self.sizes):
            return self.times_us[-1] * size / self.sizes[-1]
        s0, s1, t0, t1 = self.sizes[i - 1], self.sizes[i], self.times_us[i - 1], self.times_us[i]
        f = (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0))
        return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))

    def op_s(self, size: int, ranks: int) -> float:
        """One all_reduce of ``size`` bytes over ``ranks`` ranks: the 2-rank curve's
        latency times log2(ranks), its bandwidth term times 2(n-1)/n (the ring)."""
        latency = self.times_us[0]
        bandwidth_part = max(self.time_us(size) - latency, 0.0)
        n = max(ranks, 2)
        return (latency * math.log2(n) + bandwidth_part * (2 * (n - 1) / n)) * 1e-6


def load_curve(path: Path, name: str) -> Curve:
    (run,) = [r for r in parse_log(read_text(path), str(path)) if r.lines]
    points = []
    for line in run.lines:
        times = [m.time_us for m in line.results if m.time_us is not None]
        if times:
            points.append((line.size_bytes, min(times)))
    points.sort()
    return Curve(name, [p[0] for p in points], [p[1] for p in points])


def fixed_start_s(steps_log: Path, step: str, curve: Curve, sizes: list[int]) -> float:
    """A measured gpulane sweep's wall time less the time of its operations: what a test
    costs before it measures anything (process, torch, CUDA and NCCL start, teardown)."""
    m = re.search(rf"=== {re.escape(step)}: exit 0 in (\d+) s", steps_log.read_text())
    if not m:
        raise SystemExit(f"{steps_log}: no '{step}: exit 0 in N s' line")
    ops = ASSUME["warmup"] + ASSUME["iters"] + 1
    measuring = sum(ops * curve.op_s(s, 2) for s in sizes)
    return float(m.group(1)) - measuring


def sweep_sizes(lo: int, hi: int, factor: int = 2) -> list[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


@dataclass(frozen=True)
class Test:
    """What one job of a pattern runs."""

    curve: Curve
    sizes: list[int]


@dataclass
class Inputs:
    start_s: Callable[[int], float]  # job start latency for n nodes
    end_s: float
    submit_rate: float  # jobs per second
    fixed_s: float
    intra: Test
    inter: Test
    whole: Test

    def test_s(self, test: Test, ranks: int, groups: int = 1) -> float:
        ops = ASSUME["warmup"] + ASSUME["iters"] + 1
        measure = sum(ops * test.curve.op_s(s, ranks) for s in test.sizes)
        return self.fixed_s + ASSUME["init_s_per_rank"] * ranks * groups + measure

    def round_s(self, jobs: Sequence[Sequence[str]], test: Test, groups: int = 1) -> float:
        if not jobs:
            return 0.0
        nodes = max(len(j) for j in jobs)
        ranks = nodes * GPUS_PER_NODE // groups
        submit = len(jobs) / self.submit_rate
        return (
            submit
            + self.start_s(nodes)
            + self.test_s(test, ranks, groups)
            + self.end_s
            + ASSUME["poll_s"] / 2
        )


def measured_inputs(slurm_json: Path) -> Inputs:
    m = json.loads(slurm_json.read_text())
    points = sorted((int(k), v["median"]) for k, v in m["start_latency_s"].items())
    # A line through the measured (nodes, latency) points, for node counts past them.
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    slope = (ys[-1] - ys[0]) / (xs[-1] - xs[0]) if len(xs) > 1 and xs[-1] != xs[0] else 0.0
    slope = max(slope, 0.0)

    def start_s(n: int) -> float:
        for x, y in points:
            if x == n:
                return float(y)
        return float(ys[0] + slope * (n - xs[0]))

    nvlink = load_curve(CURVES / "nt-all_reduce-float.txt", "nvlink (2 x H200, nccl-tests)")
    socket = load_curve(CURVES / "nt-all_reduce-socket.txt", "NCCL socket (2 x H200)")
    sweep = sweep_sizes(8, 1 << 30)
    fixed = fixed_start_s(CURVES / "steps.log", "default", nvlink, sweep)
    return Inputs(
        start_s=start_s,
        end_s=float(m["end_latency_s"]["median"]),
        # a round's elements are submitted one after the other by gpulane (submitit):
        # the slower of sbatch's own rate and gpulane's measured seconds per element
        submit_rate=min(
            float(m["burst"]["submit_rate_per_s"]),
            1.0 / float(m["gpulane_submit_s_per_element"]["median"]),
        ),
        fixed_s=fixed,
        intra=Test(nvlink, sweep),  # every node alone: the full sweep, 8 B .. 1 GiB
        inter=Test(socket, sweep_sizes(1 << 20, 1 << 30, 4)),  # pairs: 1 MiB .. 1 GiB
        whole=Test(socket, [64 << 20, 1 << 30]),  # allocation, rails, halving steps
    )


def pattern_rounds(
    pattern: str, nodes: list[str], slow: Sequence[str] = ()
) -> list[list[list[str]]]:
    """The rounds of jobs of a pattern, from the real planner."""
    if pattern == "per-node":
        return [plans.per_node(nodes)]
    if pattern == "pairs":
        return plans.pair_rounds(nodes)
    if pattern == "ring":
        return plans.ring_rounds(nodes)
    if pattern in ("allocation", "rails"):
        return [plans.whole(nodes)]
    if pattern == "halving":
        # Figures replayed: a subset with a slow node reaches a tenth of a good one.
        search = plans.Halving(nodes, good=1.0, tolerance=0.9)
        rounds = []
        while batch := search.batch():
            rounds.append(batch)
            search.feed([0.1 if set(slow) & set(s) else 1.0 for s in batch])
        found = search.result().slow
        assert sorted(found) == sorted(slow), (found, slow)
        return rounds
    raise ValueError(pattern)


def pattern_time(inputs: Inputs, pattern: str, n: int, slow: int = 0) -> dict[str, Any]:
    nodes = [f"node{i:04d}" for i in range(n)]
    # slow nodes spread over the cluster (the worst case for halving: far apart)
    bad = [nodes[(i * n) // max(slow, 1) + n // (2 * max(slow, 1))] for i in range(slow)]
    rounds = pattern_rounds(pattern, nodes, bad)
    test = {
        "per-node": inputs.intra,
        "pairs": inputs.inter,
        "ring": inputs.inter,
    }.get(pattern, inputs.whole)
    groups = GPUS_PER_NODE if pattern == "rails" else 1
    seconds = sum(inputs.round_s(r, test, groups) for r in rounds)
    return {
        "pattern": pattern,
        "nodes": n,
        "slow": slow,
        "rounds": len(rounds),
        "jobs": sum(len(r) for r in rounds),
        "seconds": seconds,
    }


ACCEPTANCE = ("per-node", "rails", "ring", "allocation")


def table(inputs: Inputs, counts: list[int]) -> list[dict[str, Any]]:
    rows = []
    for n in counts:
        for pattern in ("per-node", "rails", "ring", "allocation", "pairs"):
            rows.append(pattern_time(inputs, pattern, n))
        for slow in (1, 4):
            if n >= 2 * slow + 2:
                rows.append(pattern_time(inputs, "halving", n, slow))
        total = sum(r["seconds"] for r in rows if r["nodes"] == n and r["pattern"] in ACCEPTANCE)
        rows.append(
            {
                "pattern": "acceptance: " + " + ".join(ACCEPTANCE),
                "nodes": n,
                "slow": 0,
                "rounds": sum(
                    r["rounds"] for r in rows if r["nodes"] == n and r["pattern"] in ACCEPTANCE
                ),
                "jobs": sum(
                    r["jobs"] for r in rows if r["nodes"] == n and r["pattern"] in ACCEPTANCE
                ),
                "seconds": total,
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    out = [
        "| nodes | pattern | slow nodes | rounds | jobs | wall time |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        minutes = r["seconds"] / 60
        wall = f"{minutes:.1f} min" if minutes < 120 else f"{minutes / 60:.1f} h"
        out.append(
            f"| {r['nodes']} | {r['pattern']} | {r['slow'] or '-'} | {r['rounds']} | "
            f"{r['jobs']} | {wall} |"
        )
    return "\n".join(out)


# ------------------------------------------------------------ a real campaign, replayed


def sacct_times(job_ids: list[str]) -> dict[str, tuple[float, float, float]]:
    """job -> (submit, start, end) as epoch seconds, from sacct."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", ",".join(job_ids), "-o", "JobID,Submit,Start,End"],
        capture_output=True,
        text=True,
        check=True,
    )
    import datetime as dt

    def epoch(text: str) -> float:
        return dt.datetime.fromisoformat(text).timestamp()

    times = {}
    for line in out.stdout.splitlines():
        job, sub, start, end = line.split("|")
        times[job] = (epoch(sub), epoch(start), epoch(end))
    return times


def calibrate(group: Path, slurm_json: Path) -> dict[str, Any]:
    """Replay a real campaign (its summary.json files and the jobs' sacct times) through
    the round model: rounds from the planner, each job's own measured running time, the
    measured submission, start and end latencies. Steps of a combined campaign (and the
    halving search, whose rounds are its steps' batches) are replayed one after the other."""
    m = json.loads(slurm_json.read_text())
    per_submit = m["gpulane_submit_s_per_element"]["median"]
    summaries = [json.loads(p.read_text()) for p in sorted(group.rglob("summary.json"))]
    steps = [d for d in summaries if "+" not in d["pattern"]]
    jobs = [str(e["job_id"]) for d in steps for e in d.get("elements") or d.get("steps") or []]
    times = sacct_times([j for j in jobs if j not in ("-", "None")])
    predicted = 0.0
    for d in steps:
        if d["pattern"] == "halving":
            by_nodes = {tuple(e["nodes"]): e for e in d["steps"]}
            rounds = _halving_rounds(d)
        else:
            by_nodes = {tuple(e["nodes"]): e for e in d["elements"]}
            rounds = pattern_rounds(d["pattern"], d["nodes"])
        for subsets in rounds:
            ran = [by_nodes[tuple(s)] for s in subsets if tuple(s) in by_nodes]
            running = [times[str(e["job_id"])][2] - times[str(e["job_id"])][1] for e in ran]
            if not running:
                continue
            start = m["start_latency_s"].get(str(len(subsets[0])), {"median": 2.5})["median"]
            predicted += len(ran) * per_submit + start + max(running)
            predicted += m["end_latency_s"]["median"]
    first = min(t[0] for t in times.values())
    last = max(t[2] for t in times.values())
    return {
        "group": str(group),
        "steps": [d["pattern"] for d in steps],
        "jobs": len(times),
        "measured_first_submit_to_last_end_s": last - first,
        "predicted_s": predicted,
    }


def _halving_rounds(d: dict[str, Any]) -> list[list[list[str]]]:
    """The halving search's rounds, replayed through the planner with its own figures."""
    figures = {tuple(e["nodes"]): e["figure_gbps"] for e in d["steps"]}
    search = plans.Halving(
        d["nodes"], good=None, tolerance=1 - float(d["outlier_fraction"]), first=None
    )
    rounds = []
    while batch := search.batch():
        rounds.append(batch)
        search.feed([figures.get(tuple(s), 0.0) for s in batch])
    return rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slurm", type=Path, default=HERE / "measured-slurm.json")
    ap.add_argument("--nodes", type=int, nargs="+", default=[8, 64, 256, 1024])
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--calibrate", type=Path, default=None, help="a real campaign's group")
    args = ap.parse_args()
    if args.calibrate is not None:
        print(json.dumps(calibrate(args.calibrate, args.slurm), indent=1))
        return
    inputs = measured_inputs(args.slurm)
    rows = table(inputs, args.nodes)
    print(
        f"# inputs: fixed start {inputs.fixed_s:.1f} s per test; job start "
        f"{inputs.start_s(1):.2f} s (1 node) .. {inputs.start_s(1024):.2f} s (1024 nodes); "
        f"end {inputs.end_s:.2f} s; sbatch {inputs.submit_rate:.1f} jobs/s"
    )
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
