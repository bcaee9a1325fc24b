"""A collective sweep as a session: the world and the plan checked before any rank starts,
then the ranks started by the configured launcher, or (under torchrun, srun or mpirun
started by the user) this process as one of them."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from gpulane.collectives.backends.mpi import check_ranks
from gpulane.collectives.plan import SweepPlan, build_plan, rounding_notes
from gpulane.collectives.table import SweepView
from gpulane.config.capabilities import backend_of, launcher_of
from gpulane.config.commands import SweepConfig
from gpulane.config.load import load_saved
from gpulane.config.validate import check_preset
from gpulane.errors import InputError
from gpulane.launch.base import Launcher, LaunchSpec
from gpulane.launch.factory import make_launcher
from gpulane.rank import RankInfo, discover, make_context, shared_run_id
from gpulane.record import Row
from gpulane.rundir import (
    CONFIG_FILE,
    PLAN_FILE,
    NoteTail,
    RunDir,
    discarded_on_bad_input,
    make_run_dir,
    nccl_capture_env,
    rank_env,
    run_env,
    save_config,
)
from gpulane.session.backend_choice import choose_backend
from gpulane.session.estimate import SweepForecast, sweep_estimate_s
from gpulane.session.output import stdout
from gpulane.session.prepare import JOB, SweepRun, launcher_for, prepare, uses_nccl
from gpulane.session.run import RunSession, SessionSpec, usable_cores
from gpulane.session.sweep_checks import check_inputs, check_placements
from gpulane.session.world import local_gpus


def session_for(
    cfg: SweepConfig,
    run: RunDir,
    env: dict[str, str],
    ranks: int,
    device: str,
    lines: list[str] | None = None,
    plan: SweepPlan | None = None,
) -> RunSession:
    """The session of a sweep of ``plan`` (None: the one saved in ``run``, else worked out
    from ``cfg``); ``lines`` go first in its header (the backend chosen)."""
    plan = plan or saved_plan(cfg, run, device)
    view = SweepView(plan.lines, len(plan.placements), run.path)
    spec = SessionSpec(
        command="sweep",
        kind="collective",
        backend=str(cfg.backend.name),
        description=f"{cfg.backend.name} on {ranks} {device} ranks",
        world_size=ranks,
        header=[*(lines or []), *(f"# note: {n}" for n in rounding_notes(plan, ranks))],
        estimate_s=sweep_estimate_s(plan, ranks, device, usable_cores()),
    )
    session = RunSession(run, spec, view, env, progress=bool(cfg.progress))
    # the live ETA from the points measured, by size and collective
    session.display.log.forecast = SweepForecast.for_plan(
        plan, ranks, device, usable_cores(), run.path
    )
    return session


def saved_plan(cfg: SweepConfig, run: RunDir, device: str) -> SweepPlan:
    """The plan the ranks of ``run`` were given; a run directory from before plans were
    saved gets its plan worked out from its configuration."""
    if (run.path / PLAN_FILE).is_file():
        return SweepPlan.from_dict(run.read_plan())
    return build_plan(cfg, device == "cuda")


# How a campaign runs (campaigns/, a floor above): given by the command, called here.
CampaignRunner = Callable[[SweepRun, "RunDir | None"], int]


def run_sweep(cfg: SweepConfig, campaign: CampaignRunner | None = None) -> int:
    """``gpulane sweep``: a run resumed, this process as one rank of a world an outer
    launcher started, or the sweep prepared once and run as it says."""
    if cfg.resume:
        return resume(cfg)
    info = discover()
    if info is not None and info.launcher != "gpulane":
        return in_process(cfg, info)
    from gpulane.session.packing import packing

    return run_prepared(prepare(cfg, packing=packing()), campaign=campaign)


def run_prepared(
    sweep: SweepRun,
    run: RunDir | None = None,
    env: dict[str, str] | None = None,
    campaign: CampaignRunner | None = None,
) -> int:
    """A prepared sweep, as its route says; ``run``: the run directory (or the campaign's
    group) made already, ``env``: the ranks' environment (default: the configuration's),
    ``campaign``: what runs a campaign (launcher.pattern)."""
    if sweep.route == "nccl_tests":
        from gpulane.session.nccl_tests import run_nccl_tests

        return run_nccl_tests(sweep, run, env)
    if sweep.launcher is not None:
        for line in sweep.notes:  # before any session header: campaigns have none
            stdout(line)
    if sweep.route == "campaign":
        if campaign is None:
            raise InputError("launcher.pattern: this command runs no campaigns")
        return campaign(sweep, run)
    if sweep.route == "packed":
        from gpulane.session.packing import queue_packed

        return queue_packed(sweep, run)
    env = sweep.env if env is None else env
    launcher = launcher_for(sweep)  # a launcher that cannot start: before any directory
    run = run or make_run_dir(sweep.cfg)
    with discarded_on_bad_input(run):
        saved = save_config(
            sweep.cfg, run, world_size=sweep.world, device=sweep.device, nodes=sweep.nodes
        )
        lines = None if sweep.launcher is not None else sweep.notes
        return launch_job(
            saved, run, env, sweep.job, sweep.world, sweep.device, launcher, lines, sweep.plan
        )


def launch_job(
    cfg: SweepConfig,
    run: RunDir,
    env: dict[str, str],
    job: str,
    world: int,
    device: str,
    launcher: Launcher | None = None,
    lines: list[str] | None = None,
    plan: SweepPlan | None = None,
) -> int:
    """``world`` ranks of ``job`` by the configured launcher, shown as a sweep; ``cfg`` is
    the configuration saved in ``run``, ``plan`` what the ranks measure (saved in ``run``
    for them; None: worked out here, once)."""
    launcher = launcher or make_launcher(cfg, device, needs_mpi=True)
    plan = plan or build_plan(cfg, device == "cuda")
    run.save_plan(plan.to_dict())
    session = session_for(cfg, run, env, world, device, lines, plan)
    ranks_env = rank_env(run.path, env, uses_nccl(cfg, device))
    spec = LaunchSpec(run.path, world, ranks_env, float(cfg.timeout_s), job=job, run_id=run.run_id)
    return session.run_launch(launcher, spec)


def resume(cfg: SweepConfig) -> int:
    """Measure only what a run directory is missing, with that run's own configuration."""
    path = Path(str(cfg.resume))
    if not (path / CONFIG_FILE).is_file():
        raise InputError(f"resume: {path} is not a gpulane run directory (no {CONFIG_FILE})")
    saved = load_saved(path, SweepConfig)
    if not launcher_of(saved).resumes or backend_of(saved).runs_program:
        raise InputError("resume: only runs of the local launcher can be resumed here")
    run = RunDir(str(saved.run_id), path, str(saved.build))
    # The ranks read resume=true from the saved configuration.
    saved = save_config(dataclasses.replace(saved, resume=True), run)
    ranks, device = int(saved.world_size or 2), str(saved.device)
    plan = build_plan(saved, device == "cuda")
    run.save_plan(plan.to_dict())
    session = session_for(saved, run, run_env(saved), ranks, device, plan=plan)
    session.spec.header.insert(0, f"# resuming {run.run_id}: {len(run.rows())} rows on disk")
    env = rank_env(run.path, run_env(saved), uses_nccl(saved, device))
    spec = LaunchSpec(run.path, ranks, env, float(saved.timeout_s), job=JOB, run_id=run.run_id)
    return session.run_launch(make_launcher(saved, device), spec)


def in_process(cfg: SweepConfig, info: RankInfo) -> int:
    """Started by torchrun, srun or mpirun: this process is one rank; rank 0 prints."""
    from gpulane.collectives.sweep import run_rank

    env = run_env(cfg)
    os.environ.update(env)
    device = "cuda" if str(cfg.device) != "cpu" and local_gpus() > 0 else "cpu"
    check_preset(cfg, device)
    cfg, line = choose_backend(cfg, device)
    if info.launcher == "mpirun":
        # a wrong -np, from mpirun's own variables: refused before torch and MPI start
        # (whatever the backend: ranks=N is not what mpirun started)
        check_ranks(cfg.ranks, info.world_size, info.rank)
    plan = build_plan(cfg, device == "cuda")
    check_placements(cfg, plan, device)
    check_inputs(cfg, plan, device)
    run = make_run_dir(cfg, run_id=shared_run_id())
    saved = save_config(cfg, run, world_size=info.world_size, device=str(cfg.device), nodes=None)
    ctx = make_context(info, run.path)
    if uses_nccl(cfg, device):  # before the backend starts NCCL in this process
        os.environ.update(nccl_capture_env(run.path, env))
    if not ctx.is_leader:
        run_rank(saved, ctx, plan=plan)
        return 0
    session = session_for(saved, run, env, info.world_size, device, plan=plan)
    session.display.print(
        f"# gpulane sweep: rank 0 of {info.world_size} ({info.launcher}), run {run.run_id}"
    )
    if line:
        session.display.print(line)

    notes = NoteTail(run.path)

    def show(row: Row) -> None:
        for note in notes.read():  # the rank's own notes (# transport: ...) above its rows
            session.display.print(note)
        for text in session.view.add(row):
            session.display.print(text)

    run_rank(saved, ctx, on_row=show, plan=plan)
    for text in session.view.flush():
        session.display.print(text)
    return session.conclude(None)
