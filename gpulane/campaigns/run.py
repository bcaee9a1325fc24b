"""A cluster acceptance campaign in one command (``launcher.pattern``):

- ``per-node``: one run per node, pinned to it, each the intra-node sweep with
  ``tasks_per_node`` ranks (one per GPU); all start at once and run side by side.
- ``pairs``: every pair of nodes, a sweep across the two (all-reduce between them finds
  a bad NIC, cable or switch port), in rounds of pairs that share no node
  (:func:`~gpulane.campaigns.plans.pair_rounds`): a round's runs go side by side.
- ``halving``: :func:`~gpulane.campaigns.plans.halving_search`, where measuring a subset
  is a real run on those nodes and the figure is all_reduce bus bandwidth at the largest
  size.

The nodes are ``launcher.nodelist`` (a hostlist, ``node[01-04]``) or, on Slurm without
it, every node of the partition. The command's run directory is the group: each element
writes its own run directory beneath it (``<group>/<node>``, ``<group>/<a>+<b>``,
``<group>/step01-8nodes``). At the end a table shows one line per node (or pair) with its
figures at the largest size and names the outliers (:mod:`gpulane.campaigns.summary`).
The command exits 1 when it names one, when an element failed, or when the halving search
names slow nodes. ``launcher.dry_run=true`` prints the jobs and starts nothing.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from gpulane.campaigns import plans
from gpulane.campaigns.elements import (
    JOB,
    Element,
    ElementPlan,
    new_element,
    start_element,
    wait_elements,
)
from gpulane.campaigns.settings import PatternSettings, pattern_settings
from gpulane.campaigns.summary import largest_size_figures, summarize, write_summary
from gpulane.collectives.plan import build_plan
from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError, RunFailed
from gpulane.rundir import RunDir, make_run_dir, run_env
from gpulane.session.signals import Terminated

FIGURE_OP = "all_reduce"  # the halving search's figure: its busbw at the largest size


def pair_label(nodes: list[str]) -> str:
    return "+".join(nodes)


def run_campaign(cfg: SweepConfig, s: Any, group: RunDir | None = None, job: str = JOB) -> int:
    """``launcher.pattern=per-node|pairs|halving`` with the Slurm settings ``s``; each
    element runs ``job`` on its ranks."""
    ps = pattern_settings(cfg, s.pattern, s.partition)
    device = str(cfg.device or "auto")
    if device == "auto":
        device = "cuda" if s.gpus_per_node else "cpu"
    plan = ElementPlan(cfg, run_env(cfg), s.tasks_per_node, device, s, job)
    return run_pattern(cfg, group or make_run_dir(cfg), plan, s.pattern, ps, s.poll_s)


def planned_jobs(pattern: str, nodes: list[str]) -> list[list[list[str]]]:
    """The jobs of a pattern as rounds of node subsets (halving: only its first job)."""
    if pattern == "per-node":
        return [plans.per_node(nodes)]
    if pattern == "pairs":
        if len(nodes) < 2:
            raise InputError(
                f"launcher.pattern=pairs needs at least 2 nodes; got {len(nodes)} ({', '.join(nodes)})"
            )
        return plans.pair_rounds(nodes)
    if len(nodes) < 2:
        raise InputError(
            f"launcher.pattern=halving needs at least 2 nodes; got {len(nodes)} ({', '.join(nodes)})"
        )
    return [plans.whole(nodes)]


def dry_run(cfg: SweepConfig, group: RunDir, pattern: str, ps: PatternSettings, s: Any) -> int:
    from gpulane.launch.slurm.settings import executor_parameters, sbatch_options

    rounds = planned_jobs(pattern, ps.nodes)
    plan: list[dict[str, Any]] = []
    print(f"# dry run: launcher.pattern={pattern} over {len(ps.nodes)} node(s); nothing submitted")
    for i, subsets in enumerate(rounds, 1):
        if pattern == "pairs":
            print(f"# round {i} of {len(rounds)}: {len(subsets)} job(s) side by side")
        for nodes in subsets:
            es = dataclasses.replace(s, nodes=len(nodes), pattern="allocation", pack=False)
            params = executor_parameters(es, f"gpulane-{cfg.run_id}")
            params["slurm_nodelist"] = ",".join(nodes)
            opts = sbatch_options(group.path / s.folder, params)
            label = nodes[0] if pattern == "per-node" else pair_label(nodes)
            if pattern == "halving":
                label = f"step01-{len(nodes)}nodes"
            print(f"{label}: sbatch {' '.join(opts)}")
            plan.append({"round": i, "label": label, "nodes": nodes, "sbatch": opts})
    if pattern == "halving":
        print("# then halves of a slow set, each a job like this one, as the figures decide")
    (group.path / "plan.json").write_text(json.dumps(plan, indent=1) + "\n")
    return 0


def run_pattern(
    cfg: SweepConfig,
    run: RunDir,
    plan: ElementPlan,
    pattern: str,
    ps: PatternSettings,
    poll_s: float,
) -> int:
    """The elements of the pattern, round by round, their wait, the summary."""
    if pattern in ("pairs", "halving") and FIGURE_OP not in build_plan(cfg, True).collectives:
        raise InputError(
            f"launcher.pattern={pattern} judges nodes by all_reduce: include all_reduce "
            "in collectives"
        )
    rounds = planned_jobs(pattern, ps.nodes)  # too few nodes: an input error, now
    if ps.dry_run:
        return dry_run(cfg, run, pattern, ps, plan.slurm)
    print(
        f"# gpulane sweep: launcher.pattern={pattern} over {len(ps.nodes)} node(s) "
        f"({', '.join(ps.nodes)}), {plan.ranks_per_node} rank(s) per node, group {run.path}",
        flush=True,
    )
    if pattern == "halving":
        return run_halving(run, plan, ps, poll_s)
    elements: list[Element] = []
    try:
        for i, subsets in enumerate(rounds, 1):
            if pattern == "pairs":
                print(f"# round {i} of {len(rounds)}: " + ", ".join(map(pair_label, subsets)))
            batch = []
            for nodes in subsets:
                label = nodes[0] if pattern == "per-node" else pair_label(nodes)
                e = start_element(plan, new_element(run, label, nodes))
                print(f"# {label}: {_started(e)} -> {e.run.path}", flush=True)
                batch.append(e)
            elements += batch
            wait_elements(batch, poll_s)
    except (KeyboardInterrupt, Terminated) as ex:
        return 130 if isinstance(ex, KeyboardInterrupt) else 143
    status, data = summarize(run.path, pattern, elements, ps)
    data["nodes"] = ps.nodes
    write_summary(run.path, data)
    return status


def run_halving(group: RunDir, plan: ElementPlan, ps: PatternSettings, poll_s: float) -> int:
    """The halving search with a real job per measured subset."""
    steps: list[Element] = []

    def measure(subset: list[str]) -> float:
        e = new_element(group, f"step{len(steps) + 1:02d}-{len(subset)}nodes", subset)
        steps.append(e)
        start_element(plan, e)
        wait_elements([e], poll_s)
        figures = largest_size_figures([r for r in e.run.rows() if r.get("op") == FIGURE_OP])
        figure = max(figures.values()) if figures else 0.0
        words = f"{figure:.4g} GB/s" if figures else f"no figure ({e.failure or 'no rows'})"
        print(f"# halving {e.label} ({','.join(subset)}): {_started(e)}: {words}", flush=True)
        return figure

    try:
        result = plans.halving_search(
            ps.nodes, measure, good=ps.halving_good, tolerance=1 - ps.outlier_fraction
        )
    except (KeyboardInterrupt, Terminated) as ex:
        return 130 if isinstance(ex, KeyboardInterrupt) else 143
    status = RunFailed.exit_code if result.slow else 0
    ref = f"{result.reference:.4g} GB/s" if result.reference is not None else "none"
    if result.slow:
        print(
            f"# slow node(s): {', '.join(result.slow)} (more than {ps.outlier_fraction:.0%} "
            f"below the reference, {ref}; {result.measurements} jobs)"
        )
    else:
        print(
            f"# no slow node ({result.note or 'every measured set reaches the reference'}; "
            f"reference {ref}; {result.measurements} jobs)"
        )
    write_summary(
        group.path,
        {
            "pattern": "halving",
            "nodes": ps.nodes,
            "outlier_fraction": ps.outlier_fraction,
            "passed": status == 0,
            "slow": result.slow,
            "reference_gbps": result.reference,
            "note": result.note,
            "steps": [
                {
                    "label": e.label,
                    "nodes": e.nodes,
                    "job_id": e.job_id,
                    "state": e.state,
                    "failure": e.failure,
                    "run_dir": str(e.run.path),
                    "figure_gbps": fig,
                }
                for e, (_, fig) in zip(steps, result.steps, strict=False)
            ],
        },
    )
    return status


def _started(e: Element) -> str:
    return f"slurm job {e.job_id}" if e.job_id != "-" else "started"
