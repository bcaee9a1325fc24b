"""A cluster acceptance campaign in one command (``campaign.pattern``):

- ``per-node``: one run per node, pinned to it, each the intra-node sweep with
  ``tasks_per_node`` ranks (one per GPU); all start at once and run side by side.
- ``pairs``: every pair of nodes, a sweep across the two (all-reduce between them finds
  a bad NIC, cable or switch port), in rounds of pairs that share no node
  (:func:`~gpulane.campaigns.plans.pair_rounds`): a round's runs go side by side.
- ``ring``: every node against its neighbours on the ring of nodes
  (:func:`~gpulane.campaigns.plans.ring_rounds`): 2 or 3 rounds of pairs whatever the node
  count, where ``pairs`` takes n-1.
- ``allocation``: one run over all the nodes.
- ``halving``: :class:`~gpulane.campaigns.halving.Halving`, where measuring a subset is a
  real run on those nodes and the figure is all_reduce bus bandwidth at the largest size;
  it starts from a run over the whole allocation (the ``allocation`` step's, when the
  campaign ran one just before) and measures the halves of one level side by side.

Steps combine with ``+`` (``campaign.pattern=per-node+allocation``): they run in order,
each in ``<group>/<step>``, and a node an earlier step named (an outlier alone, or a node
all of whose pairs are slow) or lost is left out of the later steps, which is said.

The campaign runs on any launcher that places ranks on named nodes (Slurm, or a plugin's),
each element a launch of its own. The nodes are ``campaign.nodelist`` (a hostlist,
``node[01-04]``) or, without it, the launcher's (Slurm: every node of the partition). The command's run directory is the group: each element
writes its own run directory beneath it (``<group>/<node>``, ``<group>/<a>+<b>``,
``<group>/step01-8nodes``). At the end a table shows one line per node (or pair) with its
figures at the largest size and names the outliers (:mod:`gpulane.campaigns.summary`);
pairs and ring write the node x node matrix (``fabric.json``, ``fabric.svg``). A node
Slurm loses mid-run (NODE_FAIL) is named, its job's rows are kept, and the campaign goes
on without it. The command exits 1 when it names an outlier, a slow or lost node, or when
an element failed. ``campaign.dry_run=true`` prints what the launcher would submit for
each job (for the default pattern, the one launch) and starts nothing.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from gpulane.campaigns import plans
from gpulane.campaigns.elements import Element, ElementPlan
from gpulane.campaigns.rounds import Campaign, started
from gpulane.campaigns.settings import PatternSettings, pattern_settings
from gpulane.campaigns.summary import (
    FIGURE_OP,
    SUMMARY_FILE,
    largest_size_figures,
    summarize,
    write_summary,
)
from gpulane.config.campaign import campaign_of
from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError, RunFailed
from gpulane.launch.base import LaunchSpec
from gpulane.rundir import RunDir, make_run_dir
from gpulane.session.output import Say, stdout
from gpulane.session.prepare import SweepRun, launcher_for
from gpulane.session.signals import Terminated

NEEDS_TWO = ("pairs", "ring", "halving")


def pair_label(nodes: list[str]) -> str:
    return "+".join(nodes)


def run_campaign(sweep: SweepRun, group: RunDir | None = None, say: Say = stdout) -> int:
    """``campaign.pattern=per-node|pairs|ring|allocation|halving`` (or several joined by
    ``+``) of the prepared sweep (its launcher's plan, device and plan); each element runs
    the sweep's job on its ranks. ``campaign.dry_run``: what would be submitted."""
    cfg, lp = sweep.cfg, sweep.launcher
    camp = campaign_of(cfg)
    if lp is None:
        raise InputError(
            f"campaign.pattern={camp.pattern}: launcher={cfg.launcher.name} does not put "
            "ranks on other hosts"
        )
    group = group or make_run_dir(cfg)
    if camp.dry_run and camp.pattern == "allocation":
        return dry_run_one(sweep, group, say)
    ps = pattern_settings(cfg, lp)
    plan = ElementPlan(cfg, sweep.env, lp.ranks_per_node, sweep.device, lp, sweep.job, sweep.plan)
    return run_pattern(cfg, group, plan, camp.pattern, ps, lp.poll_s, say)


def dry_run_one(sweep: SweepRun, group: RunDir, say: Say = stdout) -> int:
    """The default pattern's dry run: the one launch a plain run would start, printed."""
    spec = LaunchSpec(
        group.path, sweep.world, {}, float(sweep.cfg.timeout_s), job=sweep.job,
        run_id=group.run_id,
    )  # fmt: skip
    line = launcher_for(sweep).would_start(spec)
    say(f"# dry run: one launch of {sweep.world} rank(s); nothing submitted")
    say(f"{group.run_id}: {line}")
    entry = {"round": 1, "label": group.run_id, "nodes": None, "command": line}
    (group.path / "plan.json").write_text(json.dumps([entry], indent=1) + "\n")
    return 0


def planned_jobs(pattern: str, nodes: list[str]) -> list[list[list[str]]]:
    """The jobs of one step as rounds of node subsets (halving: only its first job)."""
    if pattern == "per-node":
        return [plans.per_node(nodes)]
    if pattern in NEEDS_TWO and len(nodes) < 2:
        raise InputError(
            f"campaign.pattern={pattern} needs at least 2 nodes; got {len(nodes)} ({', '.join(nodes)})"
        )
    if pattern == "pairs":
        return plans.pair_rounds(nodes)
    if pattern == "ring":
        return plans.ring_rounds(nodes)
    return [plans.whole(nodes)]


def job_label(pattern: str, nodes: list[str], index: int = 1) -> str:
    if pattern == "per-node":
        return nodes[0]
    if pattern in ("pairs", "ring"):
        return pair_label(nodes)
    if pattern == "allocation":
        return f"all-{len(nodes)}nodes"
    return f"step{index:02d}-{len(nodes)}nodes"


def dry_run(
    cfg: SweepConfig,
    group: RunDir,
    pattern: str,
    ps: PatternSettings,
    plan: ElementPlan,
    say: Say = stdout,
) -> int:
    """Every job of the pattern as its launcher would start it (its own words: sbatch's
    options on Slurm), in rounds; nothing is started. ``plan.json`` keeps the same."""
    steps = pattern.split("+")
    out: list[dict[str, Any]] = []
    say(f"# dry run: campaign.pattern={pattern} over {len(ps.nodes)} node(s); nothing submitted")
    for step in steps:
        rounds = planned_jobs(step, ps.nodes)
        for i, subsets in enumerate(rounds, 1):
            if len(rounds) > 1:
                say(f"# {step} round {i} of {len(rounds)}: {len(subsets)} job(s) side by side")
            for nodes in subsets:
                label = job_label(step, nodes)
                spec = LaunchSpec(
                    group.path, len(nodes) * plan.ranks_per_node, {}, float(cfg.timeout_s),
                    job=plan.job, run_id=f"{group.run_id}.{label}", hosts=list(nodes),
                )  # fmt: skip
                line = plan.launcher(nodes).would_start(spec)
                say(f"{label}: {line}")
                entry = {"round": i, "label": label, "nodes": nodes, "command": line}
                out.append(entry if len(steps) == 1 else {"step": step, **entry})
        if step == "halving":
            say("# then halves of a slow set, side by side, as the figures decide")
    (group.path / "plan.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


def steps_of(pattern: str) -> list[str]:
    return [p for p in pattern.split("+") if p]


def run_pattern(
    cfg: SweepConfig,
    run: RunDir,
    plan: ElementPlan,
    pattern: str,
    ps: PatternSettings,
    poll_s: float,
    say: Say = stdout,
) -> int:
    """The steps of the campaign, one after the other, their summaries, the verdict."""
    steps = steps_of(pattern)
    judged = [p for p in steps if p in NEEDS_TWO]
    if judged and plan.sweep is not None and FIGURE_OP not in plan.sweep.collectives:
        raise InputError(
            f"campaign.pattern={judged[0]} judges nodes by all_reduce: include all_reduce "
            "in collectives"
        )
    for step in steps:
        planned_jobs(step, ps.nodes)  # too few nodes: an input error, now
    if ps.dry_run:
        return dry_run(cfg, run, pattern, ps, plan, say)
    say(
        f"# gpulane sweep: campaign.pattern={pattern} over {len(ps.nodes)} node(s) "
        f"({', '.join(ps.nodes)}), {plan.ranks_per_node} rank(s) per node, group {run.path}",
    )
    camp = Campaign(plan, poll_s, say=say)
    camp.check_nodes(ps.nodes, "before the campaign")
    named: dict[str, str] = {}  # node -> the step that named it
    status = 0
    results: list[dict[str, Any]] = []
    whole: tuple[list[str], float] | None = None  # the last allocation run and its figure
    try:
        for step in steps:
            group = run if len(steps) == 1 else _sub_group(run, step)
            nodes = [n for n in camp.active(ps.nodes) if n not in named]
            left_out = [n for n in ps.nodes if n not in nodes]
            if len(steps) > 1:
                say(
                    f"# step {step} over {len(nodes)} node(s)"
                    + (f" (left out: {', '.join(left_out)})" if left_out else ""),
                )
            sps = dataclasses.replace(ps, nodes=nodes)
            if step == "halving":
                first = whole[1] if whole is not None and whole[0] == nodes else None
                st, data = run_halving(group, camp, sps, first)
                names = list(data["slow"])
            else:
                st, data, elements = run_rounds(group, camp, step, sps)
                names = _named_nodes(step, data)
                if step == "allocation" and elements:
                    figure = _figure(elements[0])
                    whole = (nodes, figure) if figure is not None else None
            data["nodes"] = nodes
            data["left_out"] = {n: named.get(n) or camp.lost.get(n, "") for n in left_out}
            write_summary(group.path, data, say)
            for n in names:
                named.setdefault(n, step)
            status = max(status, st)
            results.append({"step": step, "status": st, "summary": str(group.path / SUMMARY_FILE)})
    except (KeyboardInterrupt, Terminated) as ex:
        return 130 if isinstance(ex, KeyboardInterrupt) else 143
    if len(steps) > 1:
        _campaign_summary(run, pattern, ps, camp, named, results, status)
    return status


def _sub_group(run: RunDir, step: str) -> RunDir:
    path = run.path / step
    path.mkdir(parents=True, exist_ok=False)
    return RunDir(f"{run.run_id}.{step}", path, run.build)


def _named_nodes(step: str, data: dict[str, Any]) -> list[str]:
    """The nodes a step blames: per-node outliers and failures; pairs' suspects."""
    if step == "per-node":
        return [e["label"] for e in data["elements"] if e["outlier"] or e["failure"]]
    return list(data.get("suspect_nodes") or {})


def _figure(e: Element) -> float | None:
    figures = largest_size_figures([r for r in e.run.rows() if r.op == FIGURE_OP])
    return max(figures.values()) if figures else None


def run_rounds(
    group: RunDir, camp: Campaign, pattern: str, ps: PatternSettings
) -> tuple[int, dict[str, Any], list[Element]]:
    """per-node, pairs, ring or allocation: its rounds, then its summary."""
    rounds = planned_jobs(pattern, ps.nodes) if ps.nodes else []
    elements: list[Element] = []
    skipped_before = len(camp.skipped)
    for i, subsets in enumerate(rounds, 1):
        if len(rounds) > 1:
            camp.say(f"# round {i} of {len(rounds)}: " + ", ".join(map(pair_label, subsets)))
        jobs = [(job_label(pattern, nodes), nodes) for nodes in subsets]
        elements += camp.run_round(group, jobs)
    lost = {n: why for n, why in camp.lost.items() if n in ps.nodes}
    status, data = summarize(
        group.path, pattern, elements, ps, lost, camp.skipped[skipped_before:], camp.say
    )
    return status, data, elements


def run_halving(
    group: RunDir, camp: Campaign, ps: PatternSettings, first: float | None = None
) -> tuple[int, dict[str, Any]]:
    """The halving search, each batch of subsets a round of real jobs side by side."""
    steps: list[tuple[Element | None, list[str], float]] = []
    if len(ps.nodes) < 2:
        raise InputError(f"campaign.pattern=halving needs at least 2 nodes; got {len(ps.nodes)}")
    search = plans.Halving(
        ps.nodes, good=ps.halving_good, tolerance=1 - ps.outlier_fraction, first=first
    )
    if first is not None:
        camp.say(f"# halving starts from the allocation run: {first:.4g} GB/s")
    while batch := search.batch():
        jobs = [(job_label("halving", s, len(steps) + k + 1), s) for k, s in enumerate(batch)]
        ran = {e.label: e for e in camp.run_round(group, jobs)}
        figures = []
        for label, subset in jobs:
            e = ran.get(label)
            figure = _figure(e) if e is not None else None
            if e is None:
                words = "not run (a node of it is lost)"
            elif figure is None:
                words = f"no figure ({e.failure or 'no rows'})"
            else:
                words = f"{figure:.4g} GB/s"
            where = started(e) if e is not None else "skipped"
            camp.say(f"# halving {label} ({','.join(subset)}): {where}: {words}")
            steps.append((e, subset, figure or 0.0))
            figures.append(figure or 0.0)
        search.feed(figures)
    result = search.result()
    lost = {n: why for n, why in camp.lost.items() if n in ps.nodes}
    status = RunFailed.exit_code if result.slow or lost else 0
    ref = f"{result.reference:.4g} GB/s" if result.reference is not None else "none"
    if result.slow:
        camp.say(
            f"# slow node(s): {', '.join(result.slow)} (more than {ps.outlier_fraction:.0%} "
            f"below the reference {ref}; {result.measurements} jobs in {result.rounds} rounds)"
        )
        for node in result.slow:
            camp.say(f"# slow node: {node}: {_evidence(node, steps, result.reference)}")
    else:
        camp.say(
            f"# no slow node ({result.note or 'every half reaches the reference'}; "
            f"reference {ref}; {result.measurements} jobs in {result.rounds} rounds)"
        )
    for node, why in sorted(lost.items()):
        camp.say(f"# lost node: {node}: {why}")
    return status, {
        "pattern": "halving",
        "outlier_fraction": ps.outlier_fraction,
        "passed": status == 0,
        "slow": result.slow,
        "evidence": {n: _evidence(n, steps, result.reference) for n in result.slow},
        "reference_gbps": result.reference,
        "rounds": result.rounds,
        "note": result.note,
        "lost_nodes": lost,
        "steps": [
            {
                "label": e.label if e is not None else None,
                "nodes": subset,
                "job_id": e.job_id if e is not None else None,
                "state": e.state if e is not None else "SKIPPED",
                "failure": e.failure if e is not None else None,
                "run_dir": str(e.run.path) if e is not None else None,
                "figure_gbps": fig,
            }
            for e, subset, fig in steps
        ],
    }


def _evidence(
    node: str, steps: list[tuple[Element | None, list[str], float]], ref: float | None
) -> str:
    """The measurements that name ``node``: the smallest sets with it and their figures."""
    mine = sorted(((len(s), s, f) for _, s, f in steps if node in s), key=lambda t: t[0])
    shown = [f"{{{','.join(s)}}} {f:.4g} GB/s" for _, s, f in mine[:2]]
    against = f" against the reference {ref:.4g} GB/s" if ref is not None else ""
    return "; ".join(shown) + against


def _campaign_summary(
    run: RunDir,
    pattern: str,
    ps: PatternSettings,
    camp: Campaign,
    named: dict[str, str],
    results: list[dict[str, Any]],
    status: int,
) -> None:
    for node, step in sorted(named.items()):
        camp.say(f"# campaign: node {node} named by {step}")
    for node, why in sorted(camp.lost.items()):
        camp.say(f"# campaign: node {node} lost: {why}")
    camp.say(f"# campaign {pattern}: {'PASS' if status == 0 else 'FAIL'}")
    write_summary(
        run.path,
        {
            "pattern": pattern,
            "nodes": ps.nodes,
            "passed": status == 0,
            "named_nodes": named,
            "lost_nodes": camp.lost,
            "steps": results,
        },
        camp.say,
    )
