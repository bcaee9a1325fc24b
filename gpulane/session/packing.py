"""Packed multiruns: ``campaign.pack=true`` under ``-m`` runs every combination one after
the other in ONE launch (one Slurm allocation) instead of one job-array element each.

The multirun callback swaps hydra-submitit-launcher for Hydra's basic launcher, so every
combination comes to :func:`queue_packed` in this process (its run directory and
configuration are made, nothing started yet); when the sweep is over
:func:`finish_packing` hands them all to the launcher (:meth:`Launcher.pack`), follows the
launch, and concludes each combination as its own session would.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulane.collectives.plan import SweepPlan
from gpulane.collectives.table import SweepView
from gpulane.config.commands import SweepConfig
from gpulane.errors import GpulaneError, InputError, print_error
from gpulane.launch.base import LaunchPlan, LaunchSpec
from gpulane.rundir import RunDir, make_run_dir, rank_env, save_config
from gpulane.session.prepare import SweepRun, launcher_for, uses_nccl
from gpulane.session.run import RunSession, SessionSpec
from gpulane.session.signals import Terminated, sigterm_as_exception, stop_words

JOB = "gpulane.collectives.sweep:run_rank"


@dataclass
class Packed:
    cfg: SweepConfig
    run: RunDir
    env: dict[str, str]
    settings: LaunchPlan
    sweep: SweepRun
    label: str
    device: str
    plan: SweepPlan
    job: str = JOB


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
        skip = ("launcher", "campaign", "results_dir")
        return " ".join(o for o in task if not o.startswith(skip)) or "-"
    except Exception:  # outside a Hydra job: no overrides to show
        return "-"


def queue_packed(sweep: SweepRun, run: RunDir | None = None) -> int:
    """One combination of a packed multirun, prepared (its checks passed): its run
    directory, configuration and plan now, its job later (:func:`finish_packing`)."""
    assert _PACK is not None
    cfg, s = sweep.cfg, sweep.launcher
    assert s is not None
    run = run or make_run_dir(cfg)
    saved = save_config(cfg, run, world_size=s.world, nodes=s.nodes, device=sweep.device)
    run.save_plan(sweep.plan.to_dict())
    label = _overrides_label()
    _PACK.append(
        Packed(saved, run, sweep.env, s, sweep, label, sweep.device, sweep.plan, sweep.job)
    )
    print(f"# packed #{len(_PACK)}: {label} -> {run.path}", flush=True)
    return 0


def finish_packing() -> int:
    """Submit the queued combinations as one job, wait, and conclude each one."""
    global _PACK
    items, _PACK = _PACK or [], None
    if not items:
        return 0
    try:
        return _run_packed(items)
    except GpulaneError as err:
        print_error(err)
        return err.exit_code


def _session(it: Packed) -> RunSession:
    plan = it.plan
    spec = SessionSpec(
        command="sweep",
        kind="collective",
        backend=str(it.cfg.backend.name),
        description=f"{it.cfg.backend.name} (packed)",
        world_size=it.settings.world,
    )
    return RunSession(it.run, spec, SweepView(plan.lines, len(plan.placements)), it.env, False)


def _run_packed(items: list[Packed]) -> int:
    s = items[0].settings
    for it in items[1:]:
        if it.settings != s:
            raise InputError(
                "campaign.pack=true runs every combination in one allocation: launcher.* "
                f"must be the same in all of them ({items[0].label!r} and {it.label!r} differ)"
            )
    specs = [
        LaunchSpec(
            it.run.path,
            s.world,
            rank_env(it.run.path, it.env, uses_nccl(it.cfg, it.device)),
            float(it.cfg.timeout_s),
            job=it.job,
            run_id=str(it.cfg.run_id),
        )
        for it in items
    ]
    packed = launcher_for(items[0].sweep).pack(specs, [it.label for it in items])
    print(packed.started, flush=True)
    if not s.wait:
        for it in items:
            print(f"run directory: {it.run.path.resolve()}  ({it.label})")
        return 0
    with sigterm_as_exception():
        try:
            packed.follow()
        except (KeyboardInterrupt, Terminated) as ex:
            packed.cancel()
            code, _ = stop_words(ex)
            for i in packed.unfinished():
                session = _session(items[i])
                session.launcher = packed.launchers[i]
                session.interrupt(ex)
            return code
    status = 0
    for i, (it, result) in enumerate(zip(items, packed.results(), strict=True)):
        session = _session(it)
        session.launcher = packed.launchers[i]
        session.result = result
        print(f"# packed #{i + 1} of {len(items)}: {it.label}: {it.run.path}")
        status = max(status, session.finish())
    return status
