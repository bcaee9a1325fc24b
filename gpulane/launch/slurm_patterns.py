"""Cluster acceptance on Slurm in one command, and packed multiruns.

``launcher.pattern`` (``gpulane sweep launcher=slurm launcher.pattern=...``):

- ``allocation`` (default): one job over ``launcher.nodes`` nodes (:func:`run_slurm`).
- ``per-node``: one job per node, pinned to it (``--nodelist``), each the intra-node
  sweep with ``tasks_per_node`` ranks (one per GPU); all are submitted at once and run
  side by side. (Slurm gives every element of a job array the same options, so a
  per-element ``--nodelist`` cannot be an array: these are separate jobs.)
- ``pairs``: every pair of nodes, a sweep across the two (all-reduce between them finds
  a bad NIC, cable or switch port), in rounds of pairs that share no node
  (:func:`~gpulane.launch.cluster_plans.pair_rounds`): a round's jobs run side by side,
  the next round is submitted when it has ended.
- ``halving``: :func:`~gpulane.launch.cluster_plans.halving_search`, where measuring a
  subset is a real job on those nodes and the figure is all_reduce bus bandwidth at the
  largest size.

The nodes are ``launcher.nodelist`` (a Slurm hostlist, ``node[01-04]``) or, without it,
every node of the partition (``sinfo -h -N -o %N``). The command's run directory is the
group: each job writes its own run directory beneath it (``<group>/<node>``,
``<group>/<a>+<b>``, ``<group>/step01-8nodes``). At the end a table shows one line per
node (or pair) with its figures at the largest size and names the outliers with the
acceptance rules' outlier check (:func:`gpulane.analysis.rules.evaluate`): a node more
than ``launcher.outlier_fraction`` below the median of its peers. The command exits 1
when it names one, when a job failed, or when the halving search names slow nodes.
``launcher.dry_run=true`` prints the jobs (their ``#SBATCH`` options) and submits nothing.

``launcher.pack=true`` under ``-m``: :class:`gpulane.launch.slurm.HydraCallback` swaps
hydra-submitit-launcher for Hydra's basic launcher, so every combination comes to
:func:`queue_packed` in this process (its run directory and configuration are made, no
job yet); when the sweep is over (``on_multirun_end``) :func:`finish_packing` submits ONE
job whose tasks run the combinations one after the other (:func:`~gpulane.launch.slurm.
packed_task`), then shows each combination's table.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from gpulane.errors import GpulaneError, InputError, RunFailed
from gpulane.launch import cluster_plans
from gpulane.launch.slurm import (
    JobRecord,
    SlurmSettings,
    Submitted,
    TaskFailure,
    Waiter,
    cancelled,
    executor_parameters,
    expand_nodelist,
    finalize,
    finish_files,
    packed_done,
    packed_task,
    prepare,
    print_table,
    read_run_rows,
    report_run,
    sbatch_options,
    submit_job,
    submit_run,
    write_error_row,
)
from gpulane.record import utc_now
from gpulane.runs import RunDir, Terminated, sigterm_as_exception

SUMMARY_FILE = "summary.json"
FIGURE_OP = "all_reduce"  # the halving search's figure: its busbw at the largest size


# --------------------------------------------------------------------------------------
# Settings of the patterns
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PatternSettings:
    nodes: list[str]
    outlier_fraction: float
    halving_good: float | None
    dry_run: bool


def _hostlist(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    return ",".join(str(v).strip() for v in value)


def partition_nodes(partition: str | None) -> list[str]:
    """The nodes of ``partition``, or of the default partition (the one sinfo marks
    with ``*``, where a job without ``--partition`` goes) when None."""
    cmd = ["sinfo", "-h", "-N", "-o", "%N %P"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        raise InputError(f"launcher.nodelist not given and sinfo failed ({err})") from err
    if out.returncode != 0:
        raise InputError(
            f"launcher.nodelist not given and `{' '.join(cmd)}` failed: "
            + (out.stderr.strip() or f"exit {out.returncode}")
        )
    nodes: list[str] = []
    for line in out.stdout.splitlines():
        name, _, part = line.strip().partition(" ")
        if not name or (partition is None and not part.endswith("*")):
            continue
        if name not in nodes:  # a node in several partitions is listed once each
            nodes.append(name)
    return nodes


def pattern_settings(cfg: Any, s: SlurmSettings) -> PatternSettings:
    sec = cfg.launcher
    fraction = sec.get("outlier_fraction", 0.1)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise InputError(
            f"launcher.outlier_fraction: expected a fraction in (0, 1), got {fraction!r}"
        )
    good = sec.get("halving_good")
    if good is not None and (isinstance(good, bool) or not isinstance(good, (int, float))):
        raise InputError(f"launcher.halving_good: expected GB/s, got {good!r}")
    text = _hostlist(sec.get("nodelist"))
    nodes = expand_nodelist(text) if text else partition_nodes(s.partition)
    if not nodes:
        where = f"launcher.nodelist={text}" if text else f"partition {s.partition or '(default)'}"
        raise InputError(f"launcher.pattern={s.pattern}: no nodes in {where}")
    return PatternSettings(
        nodes=list(nodes),
        outlier_fraction=float(fraction),
        halving_good=float(good) if good is not None else None,
        dry_run=bool(sec.get("dry_run") or False),
    )


# --------------------------------------------------------------------------------------
# Elements: one job on a subset of nodes, in its own run directory under the group
# --------------------------------------------------------------------------------------


@dataclass
class Element:
    label: str
    nodes: list[str]
    run: RunDir
    sub: Submitted | None = None
    waiter: Waiter | None = None
    state: str = "PENDING"
    failure: str | None = None

    @property
    def job_id(self) -> str:
        return self.sub.record.job_id if self.sub is not None else "-"


def element_settings(s: SlurmSettings, nodes: list[str]) -> SlurmSettings:
    return dataclasses.replace(s, nodes=len(nodes), pattern="allocation", pack=False)


def pair_label(nodes: list[str]) -> str:
    return "+".join(nodes)


def new_element(group: RunDir, label: str, nodes: list[str]) -> Element:
    path = group.path / label
    path.mkdir(parents=True, exist_ok=False)
    return Element(label, list(nodes), RunDir(f"{group.run_id}.{label}", path, group.build))


def submit_element(
    cfg: DictConfig, e: Element, env: dict[str, str], job: str, s: SlurmSettings
) -> Element:
    es = element_settings(s, e.nodes)
    e.sub = submit_run(cfg, e.run, env, job, es, nodelist=",".join(e.nodes))
    say = lambda text, label=e.label: print(f"# {label}: {text[2:]}", flush=True)  # noqa: E731
    e.waiter = Waiter(
        e.sub.job,
        e.sub.record,
        e.sub.run_path,
        s.poll_s,
        float(cfg.timeout_s),
        s.startup_s,
        lambda: None,
        say,
    )
    return e


def wait_elements(elements: list[Element], poll_s: float) -> None:
    """Poll every element's job until all have ended; then their error rows and Parquet
    copies. Ctrl-C (or SIGTERM) cancels the jobs still going and re-raises."""
    going = [e for e in elements if e.waiter is not None]
    for e in going:
        assert e.waiter is not None
        e.waiter.state_mode = "cache"  # one sacct per round for all of them, below
    with sigterm_as_exception():
        try:
            while going:
                assert going[0].waiter is not None
                going[0].waiter.job.watcher.update()
                for e in list(going):
                    assert e.waiter is not None
                    state = e.waiter.step()
                    if state is not None:
                        e.state = state
                        going.remove(e)
                if going:
                    time.sleep(poll_s)
        except (KeyboardInterrupt, Terminated) as ex:
            what = "interrupted" if isinstance(ex, KeyboardInterrupt) else "terminated (SIGTERM)"
            for e in going:
                assert e.sub is not None
                e.sub.job.cancel(check=False)
                cancelled(e.sub.cfg, e.sub.run_path, e.sub.record, what)
            raise
    for e in elements:
        if e.sub is None or e.waiter is None:
            continue
        stall = e.waiter.stall
        e.failure = finalize(
            e.sub.cfg,
            e.sub.run_path,
            e.sub.job,
            e.sub.record,
            "CANCELLED" if e.state == "STALLED" else e.state,
            e.waiter.nodelist,
            stall,
        )
        e.state = e.sub.record.state


# --------------------------------------------------------------------------------------
# Figures and outliers
# --------------------------------------------------------------------------------------


def largest_size_figures(rows: list[dict[str, Any]]) -> dict[str, float]:
    """figure label -> busbw (GB/s, median over repeats) for the ok rows at the largest
    size of each collective."""
    from gpulane.analysis.store import figure_label

    ok = [r for r in rows if r.get("status") == "ok" and r.get("busbw_gbps") is not None]
    top: dict[str, int] = {}
    for r in ok:
        top[r["op"]] = max(top.get(r["op"], 0), int(r["size_bytes"]))
    values: dict[str, list[float]] = {}
    for r in ok:
        if int(r["size_bytes"]) == top[r["op"]]:
            values.setdefault(figure_label(r), []).append(float(r["busbw_gbps"]))
    return {k: float(statistics.median(v)) for k, v in values.items()}


def outlier_checks(elements: list[Element], fraction: float) -> list[Any]:
    """The acceptance rules' outlier check over the elements' busbw at the largest size,
    one subject per element (its label stands in for the host)."""
    from gpulane.analysis.rules import evaluate
    from gpulane.analysis.store import load_frame

    dirs = [e.run.path for e in elements if read_run_rows(e.run.path)]
    if len(dirs) < 2:
        return []
    frame = load_frame(dirs)
    # The largest size of each collective, as the summary table shows.
    frame = frame[frame["kind"] == "collective"]
    top = frame.groupby("op")["size_bytes"].transform("max")
    frame = frame[frame["size_bytes"] == top].copy()
    label_of = {str(e.run.path): e.label for e in elements}
    frame["host"] = frame["run_dir"].map(lambda d: label_of.get(str(d), str(d)))
    spec = {
        "outlier_fraction": fraction,
        "checks": {
            "busbw_among_peers": {
                "check": "min",
                "description": "busbw at the largest size within the outlier fraction of "
                "the peers' median",
                "select": {"kind": "collective"},
                "metric": "busbw_gbps",
                "per": "node",
            }
        },
    }
    return [c for c in evaluate(frame, spec).checks if c.basis == "outlier"]


def summarize(
    group: Path, pattern: str, elements: list[Element], ps: PatternSettings
) -> tuple[int, dict[str, Any]]:
    """Print one line per element with its figures; name the outliers and the failures.
    Returns the exit status and what summary.json keeps."""
    figures = {e.label: largest_size_figures(read_run_rows(e.run.path)) for e in elements}
    columns = sorted({f for fs in figures.values() for f in fs})
    checks = outlier_checks(elements, ps.outlier_fraction)
    named = {c.subject: c for c in checks if c.status == "fail"}
    what = "node" if pattern == "per-node" else "pair"
    header = [what, "job", "state", *[f"{c} (GB/s)" for c in columns], "verdict"]
    lines = []
    for e in elements:
        verdict = "ok"
        if e.failure:
            verdict = "FAILED"
        elif e.label in named:
            c = named[e.label]
            verdict = (
                f"OUTLIER {c.margin * 100:+.1f}% vs peers" if c.margin is not None else "OUTLIER"
            )
        elif not figures[e.label]:
            verdict = "no rows"
        vals = [f"{figures[e.label][c]:.4g}" if c in figures[e.label] else "-" for c in columns]
        lines.append([e.label, e.job_id, e.state, *vals, verdict])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines, strict=False)]
    print(
        f"# {pattern} summary: busbw at the largest size; outlier: more than "
        f"{ps.outlier_fraction:.0%} below the median of its peers"
    )
    for line in [header, *lines]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=False)).rstrip())
    status = 0
    if len(elements) < 2:
        print(f"# one {what}: no peers to compare it with")
    for subject, c in sorted(named.items()):
        print(f"# outlier {what}: {subject}: {c.message}")
        status = RunFailed.exit_code
    for e in elements:
        if e.failure:
            sys.stderr.write(f"gpulane: error: {e.label}: {e.failure}\n")
            status = RunFailed.exit_code
    suspects: dict[str, int] = {}
    if pattern == "pairs":
        # A node all of whose pairs are slow or failed is the likely culprit (with 3
        # nodes or more; the one pair of 2 nodes names neither).
        bad = [e for e in elements if e.failure or e.label in named]
        nodes = sorted({n for e in elements for n in e.nodes})
        for n in nodes:
            mine = [e for e in elements if n in e.nodes]
            hits = sum(1 for e in bad if n in e.nodes)
            if len(nodes) >= 3 and hits and hits == len(mine):
                suspects[n] = hits
                print(f"# node {n}: all {hits} of its pairs are slow or failed")
    if status == 0 and len(elements) >= 2:
        print(f"# no outlier among {len(elements)} {what}s")
    data = {
        "pattern": pattern,
        "outlier_fraction": ps.outlier_fraction,
        "passed": status == 0,
        "elements": [
            {
                "label": e.label,
                "nodes": e.nodes,
                "job_id": e.job_id,
                "state": e.state,
                "failure": e.failure,
                "run_dir": str(e.run.path),
                "figures": figures[e.label],
                "outlier": named[e.label].message if e.label in named else None,
            }
            for e in elements
        ],
        "suspect_nodes": suspects,
    }
    return status, data


def write_summary(group: Path, data: dict[str, Any]) -> None:
    data = {"written_at": utc_now(), **data}
    (group / SUMMARY_FILE).write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(f"# summary: {group / SUMMARY_FILE}")


# --------------------------------------------------------------------------------------
# The patterns
# --------------------------------------------------------------------------------------


def planned_jobs(pattern: str, nodes: list[str]) -> list[list[list[str]]]:
    """The jobs of a pattern as rounds of node subsets (halving: only its first job)."""
    if pattern == "per-node":
        return [cluster_plans.per_node(nodes)]
    if pattern == "pairs":
        if len(nodes) < 2:
            raise InputError(
                f"launcher.pattern=pairs needs at least 2 nodes; got {len(nodes)} ({', '.join(nodes)})"
            )
        return cluster_plans.pair_rounds(nodes)
    if len(nodes) < 2:
        raise InputError(
            f"launcher.pattern=halving needs at least 2 nodes; got {len(nodes)} ({', '.join(nodes)})"
        )
    return [cluster_plans.whole(nodes)]


def dry_run(cfg: Any, group: RunDir, pattern: str, ps: PatternSettings, s: SlurmSettings) -> int:
    rounds = planned_jobs(pattern, ps.nodes)
    plan: list[dict[str, Any]] = []
    print(f"# dry run: launcher.pattern={pattern} over {len(ps.nodes)} node(s); nothing submitted")
    for i, subsets in enumerate(rounds, 1):
        if pattern == "pairs":
            print(f"# round {i} of {len(rounds)}: {len(subsets)} job(s) side by side")
        for nodes in subsets:
            es = element_settings(s, nodes)
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
    cfg: DictConfig, run: RunDir, env: dict[str, str], job: str, s: SlurmSettings
) -> int:
    """``launcher.pattern=per-node|pairs|halving``: the jobs, their wait, the summary."""
    ps = pattern_settings(cfg, s)
    pattern = s.pattern
    if pattern in ("pairs", "halving"):
        from gpulane.collectives.plan import build_plan

        if FIGURE_OP not in build_plan(cfg, on_device=True).collectives:
            raise InputError(
                f"launcher.pattern={pattern} judges nodes by all_reduce: include all_reduce "
                "in collectives"
            )
    rounds = planned_jobs(pattern, ps.nodes)  # too few nodes: an input error, now
    if ps.dry_run:
        return dry_run(cfg, run, pattern, ps, s)
    print(
        f"# gpulane sweep: launcher.pattern={pattern} over {len(ps.nodes)} node(s) "
        f"({', '.join(ps.nodes)}), {s.tasks_per_node} rank(s) per node, group {run.path}",
        flush=True,
    )
    if pattern == "halving":
        return run_halving(cfg, run, env, job, s, ps)
    elements: list[Element] = []
    try:
        for i, subsets in enumerate(rounds, 1):
            if pattern == "pairs":
                print(f"# round {i} of {len(rounds)}: " + ", ".join(map(pair_label, subsets)))
            batch = []
            for nodes in subsets:
                label = nodes[0] if pattern == "per-node" else pair_label(nodes)
                e = submit_element(cfg, new_element(run, label, nodes), env, job, s)
                print(f"# {label}: slurm job {e.job_id} -> {e.run.path}", flush=True)
                batch.append(e)
            elements += batch
            wait_elements(batch, s.poll_s)
    except (KeyboardInterrupt, Terminated) as ex:
        return 130 if isinstance(ex, KeyboardInterrupt) else 143
    status, data = summarize(run.path, pattern, elements, ps)
    data["nodes"] = ps.nodes
    write_summary(run.path, data)
    return status


def run_halving(
    cfg: DictConfig,
    group: RunDir,
    env: dict[str, str],
    job: str,
    s: SlurmSettings,
    ps: PatternSettings,
) -> int:
    """The halving search with a real job per measured subset."""
    steps: list[Element] = []

    def measure(subset: list[str]) -> float:
        e = new_element(group, f"step{len(steps) + 1:02d}-{len(subset)}nodes", subset)
        steps.append(e)
        submit_element(cfg, e, env, job, s)
        wait_elements([e], s.poll_s)
        figures = largest_size_figures(
            [r for r in read_run_rows(e.run.path) if r.get("op") == FIGURE_OP]
        )
        figure = max(figures.values()) if figures else 0.0
        words = f"{figure:.4g} GB/s" if figures else f"no figure ({e.failure or 'no rows'})"
        print(
            f"# halving {e.label} ({','.join(subset)}): slurm job {e.job_id}: {words}", flush=True
        )
        return figure

    try:
        result = cluster_plans.halving_search(
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


# --------------------------------------------------------------------------------------
# Packing: every combination of a multirun in one job
# --------------------------------------------------------------------------------------


@dataclass
class Packed:
    cfg: DictConfig
    run: RunDir
    env: dict[str, str]
    job: str
    settings: SlurmSettings
    label: str


_PACK: list[Packed] | None = None


def start_packing() -> None:
    global _PACK
    _PACK = []


def packing() -> bool:
    return _PACK is not None


def _overrides_label() -> str:
    try:
        from hydra.core.hydra_config import HydraConfig

        task = [str(o) for o in HydraConfig.get().overrides.task]
        return " ".join(o for o in task if not o.startswith(("launcher", "results_dir"))) or "-"
    except Exception:
        return "-"


def queue_packed(
    cfg: DictConfig, run: RunDir, env: dict[str, str], job: str, s: SlurmSettings
) -> int:
    """One combination of a packed multirun: its run directory and configuration now, its
    job later (:func:`finish_packing`)."""
    assert _PACK is not None
    if cfg.get("backend") is not None and str(cfg.backend.name) == "mpi":
        raise InputError(
            "launcher.pack=true: backend=mpi cannot be packed (MPI starts once per process)"
        )
    saved, _ = prepare(cfg, run, s)
    label = _overrides_label()
    _PACK.append(Packed(saved, run, env, job, s, label))
    print(f"# packed #{len(_PACK)}: {label} -> {run.path}", flush=True)
    return 0


def finish_packing() -> int:
    """Submit the queued combinations as one job, wait, and show each one's table."""
    global _PACK
    items, _PACK = _PACK or [], None
    if not items:
        return 0
    try:
        return _run_packed(items)
    except GpulaneError as err:
        sys.stderr.write(f"gpulane: error: {err}\n")
        return err.exit_code


def _run_packed(items: list[Packed]) -> int:
    s = items[0].settings
    for it in items[1:]:
        if it.settings != s:
            raise InputError(
                "launcher.pack=true runs every combination in one allocation: launcher.* "
                f"must be the same in all of them ({items[0].label!r} and {it.label!r} differ)"
            )
    first = items[0]
    work = [(it.job, str(Path(it.run.path).resolve()), dict(it.env)) for it in items]
    run0 = Path(first.run.path).resolve()
    sjob = submit_job(first.cfg, run0, s, packed_task, work, s.startup_s)
    records = []
    for it in items:
        rec = JobRecord(
            job_id=str(sjob.job_id),
            folder=str(run0 / s.folder / "%j"),
            tasks=s.world_size,
            nodes=s.nodes,
            tasks_per_node=s.tasks_per_node,
        )
        rec.save(Path(it.run.path).resolve())
        records.append(rec)
    print(
        f"# gpulane sweep: {len(items)} combinations packed into slurm job {sjob.job_id} "
        f"({s.nodes} node(s) x {s.tasks_per_node} ranks)",
        flush=True,
    )
    if not s.wait:
        for it in items:
            print(f"run directory: {Path(it.run.path).resolve()}  ({it.label})")
        return 0
    paths = [Path(it.run.path).resolve() for it in items]

    def active() -> int:
        done = (packed_done(p, s.world_size) for p in paths)
        return next((i for i, ok in enumerate(done) if not ok), len(paths))

    current = [0]
    waiter = Waiter(sjob, records[0], paths[0], s.poll_s, 0.0, s.startup_s, lambda: None, print)

    def on_poll() -> None:
        i = active()
        if i != current[0] and i < len(paths):
            current[0] = i
            waiter.run_dir = paths[i]
            waiter.running_since = None  # the next combination starts its own clock
            waiter.record = records[i]
            print(f"# packed #{i + 1} of {len(paths)}: {items[i].label}", flush=True)

    waiter.on_poll = on_poll
    print(f"# packed #1 of {len(paths)}: {first.label}", flush=True)
    waiter.timeout_s = float(first.cfg.timeout_s)
    with sigterm_as_exception():
        try:
            state = waiter.wait()
        except (KeyboardInterrupt, Terminated) as ex:
            sjob.cancel(check=False)
            what = "interrupted" if isinstance(ex, KeyboardInterrupt) else "terminated (SIGTERM)"
            for it, p, rec in zip(items, paths, records, strict=True):
                if not packed_done(p, s.world_size):
                    cancelled(it.cfg, p, rec, what)
            return 130 if isinstance(ex, KeyboardInterrupt) else 143
    stopped_at = active()
    status = 0
    cause = ""
    for i, (it, p, rec) in enumerate(zip(items, paths, records, strict=True)):
        if i < stopped_at:
            failure = finalize(it.cfg, p, sjob, rec, "COMPLETED", waiter.nodelist, None)
        elif i == stopped_at:
            final = "CANCELLED" if state == "STALLED" else state
            if final == "COMPLETED":  # every task returned, yet no mark: say so
                final = "FAILED"
            failure = finalize(it.cfg, p, sjob, rec, final, waiter.nodelist, waiter.stall)
            cause = f" ({failure})" if failure else ""
        else:
            why = f"not completed: the packed job ended at combination #{stopped_at + 1}{cause}"
            write_error_row(it.cfg, p, rec, state, TaskFailure(0, None, why, ""))
            failure = f"slurm job {rec.job_id}: {why}"
            finish_files(p)
        print(f"# packed #{i + 1} of {len(items)}: {it.label}: {p}")
        print_table(it.cfg, p)
        status = max(status, report_run(p, rec, failure))
    return status
