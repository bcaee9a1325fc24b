"""Localization inside nodes by simulation through the real planner
(gpulane.campaigns.localize.plan.Search): how many subsets each pattern measures, in how
many rounds, what it names, and about how long it takes, for one node of 8 GPUs and for
64 nodes x 8 GPUs.

    python benchmarks/accept/simulate_localize.py > benchmarks/accept/simulated-localize.md

A subset's figure is 100 (healthy) or 58 (it holds the slow GPU, or both ends of the slow
link: issue 30's -42 %). Time model (assumptions, named in the output): one launch of the
localization job (FIXED_S: the fixed start of a test measured for benchmarks/acceptance)
plus, per subset measured one after the other, SUBSET_S (a new NCCL subgroup's set-up
and 25 operations of 1 GiB at NVLink speed). 64 x 8: the node-level step (per-node, one
round side by side) names the node, then that node is localized as one node of 8;
flat node x GPU halving over all 512 GPUs through the same planner is shown beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gpulane.campaigns.localize.plan import Localized, node_gpu_units, simulate

FIXED_S = 9.8
SUBSET_S = 0.4
PER_NODE_S = 60.0  # the node-level check: the healthy accept's sweep on one node (assumed)
PATTERNS = ("pairs", "halving", "ring")


def fabric(slow_gpu: str | None, slow_pair: tuple[str, str] | None) -> Callable[[list[str]], float]:
    def figure(subset: list[str]) -> float:
        if slow_gpu in subset or (slow_pair and set(slow_pair) <= set(subset)):
            return 58.0
        return 100.0

    return figure


def named(r: Localized) -> str:
    return (
        ", ".join([*r.gpus, *(f"{a}-{b}" for a, b in r.pairs), *("+".join(s) for s in r.sets)])
        or "-"
    )


def line(scope: str, pattern: str, fault: str, r: Localized, extra_s: float = 0.0) -> str:
    seconds = extra_s + FIXED_S + SUBSET_S * len(r.steps)
    return f"| {scope} | {pattern} | {fault} | {named(r)} | {len(r.steps)} | {r.rounds} | {seconds:.1f} s |"


def main() -> None:
    print("| scope | pattern | fault | named | subsets measured | rounds | time to name it |")
    print("|---|---|---|---|---|---|---|")
    gpus = [f"GPU{i}" for i in range(8)]
    for pattern in PATTERNS:
        for fault, fig in (
            ("GPU5 busy", fabric("GPU5", None)),
            ("link GPU2-GPU3", fabric(None, ("GPU2", "GPU3"))),
        ):
            print(line("1 node x 8 GPUs", pattern, fault, simulate(pattern, gpus, fig)))
    nodes = [f"n{i:02d}" for i in range(64)]
    for pattern in PATTERNS:
        r = simulate(pattern, [f"n37:{g}" for g in gpus], fabric("n37:GPU5", None))
        print(line("64 nodes x 8: per-node, then n37", pattern, "n37:GPU5 busy", r, PER_NODE_S))
    units = node_gpu_units(nodes, 8)
    flat = simulate("halving", units, fabric("n37:GPU5", None))
    # flat halving's subsets of one level share no GPU: they run side by side, a round each
    seconds = FIXED_S * flat.rounds + SUBSET_S * flat.rounds
    print(
        f"| 64 nodes x 8: flat over 512 GPUs | halving | n37:GPU5 busy | {named(flat)} | "
        f"{len(flat.steps)} | {flat.rounds} | {seconds:.1f} s |"
    )
    print(
        f"| 64 nodes x 8: flat over 512 GPUs | pairs | - | (not run) | "
        f"{math.comb(512, 2) + 1} | - | - |"
    )
    print()
    print(
        f"Time model: {FIXED_S} s to launch the localization job, {SUBSET_S} s per subset "
        f"measured one after the other, {PER_NODE_S:.0f} s for the node-level step of 64 nodes "
        "side by side; flat halving: one launch per round (its subsets side by side)."
    )


if __name__ == "__main__":
    main()
