"""A collective sweep as a session: the world and the plan checked before any rank starts,
then the ranks started by the configured launcher, or (under torchrun, srun or mpirun
started by the user) this process as one of them."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from gpulane.collectives.plan import build_plan, rounding_notes
from gpulane.collectives.table import SweepView
from gpulane.config.capabilities import backend_of, launcher_of
from gpulane.config.commands import SweepConfig
from gpulane.config.load import load_saved
from gpulane.config.validate import check_preset
from gpulane.errors import InputError, MissingComponent
from gpulane.launch.base import Launcher, LaunchSpec
from gpulane.launch.factory import make_launcher
from gpulane.rank import RankInfo, discover, make_context, shared_run_id
from gpulane.rundir import (
    CONFIG_FILE,
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
from gpulane.session.estimate import sweep_estimate_s
from gpulane.session.run import RunSession, SessionSpec, usable_cores
from gpulane.session.sweep_checks import check_front, check_inputs, check_placements
from gpulane.session.world import local_gpus

JOB = "gpulane.collectives.sweep:run_rank"
# localize=pairs|halving|ring: subsets of the GPUs instead of a sweep (campaigns/localize)
LOCALIZE_JOB = "gpulane.campaigns.localize.rank:run_rank"


def job_of(cfg: SweepConfig) -> str:
    return LOCALIZE_JOB if cfg.localize not in (None, "", "none", False) else JOB


def resolve_world(cfg: SweepConfig) -> tuple[int, str]:
    """(ranks, device) from ranks=auto|N and device=auto|cuda|cpu and the GPUs present."""
    device = str(cfg.device).lower()
    backend = str(cfg.backend.name)
    if backend_of(cfg).needs_gpus and device == "cpu":
        raise InputError(f"backend={backend} needs GPUs; use backend=torch or backend=mpi on CPUs")
    gpus = local_gpus() if device != "cpu" else 0
    ranks = cfg.ranks
    if device == "auto":
        wanted = gpus if str(ranks) == "auto" else int(ranks)
        device = "cuda" if gpus >= 1 and gpus >= wanted else "cpu"
        if device == "cpu" and backend_of(cfg).needs_gpus:
            raise MissingComponent(f"backend={backend} needs GPUs and torch sees none")
    n = (gpus if device == "cuda" else 2) if str(ranks) == "auto" else int(ranks)
    if device == "cuda":
        if gpus == 0:
            raise MissingComponent("device=cuda but no GPU is visible; use device=cpu")
        if n > gpus:
            raise InputError(
                f"ranks={n} but this host has {gpus} GPU(s); use ranks<={gpus} or device=cpu"
            )
    return n, device


def session_for(
    cfg: SweepConfig,
    run: RunDir,
    env: dict[str, str],
    ranks: int,
    device: str,
    lines: list[str] | None = None,
) -> RunSession:
    """The session of a sweep; ``lines`` go first in its header (the backend chosen)."""
    plan = build_plan(cfg, device == "cuda")
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
    return RunSession(run, spec, view, env, progress=bool(cfg.progress))


def run_sweep(cfg: SweepConfig) -> int:
    """``gpulane sweep``: one run directory, one launch, one table."""
    if cfg.resume:
        return resume(cfg)
    info = discover()
    if info is not None and info.launcher != "gpulane":
        return in_process(cfg, info)
    if backend_of(cfg).runs_program:
        from gpulane.session.nccl_tests import run_nccl_tests

        return run_nccl_tests(cfg)
    check_preset(cfg, str(cfg.device).lower())  # backend=mpi: before the GPUs are known
    env = run_env(cfg)
    if launcher_of(cfg).remote_world:
        # The GPUs are on the compute nodes, not here: the ranks resolve the world.
        run = make_run_dir(cfg)
        with discarded_on_bad_input(run):
            return run_slurm(cfg, run, env, job_of(cfg))
    ranks, device = resolve_world(cfg)
    check_preset(cfg, device)
    cfg, line = choose_backend(cfg, device)
    plan = build_plan(cfg, device == "cuda")
    if plan.timing.graph and device != "cuda":
        raise InputError("graph: CUDA graphs need GPUs; set graph=false on CPUs")
    check_front(cfg, plan, ranks, device)
    launcher = make_launcher(cfg, device, needs_mpi=True)
    run = make_run_dir(cfg)
    with discarded_on_bad_input(run):
        saved = save_config(cfg, run, world_size=ranks, device=device, nodes=1)
        return launch_job(
            saved, run, env, job_of(cfg), ranks, device, launcher, [line] if line else None
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
) -> int:
    """``world`` ranks of ``job`` by the configured launcher, shown as a sweep; ``cfg`` is
    the configuration saved in ``run``."""
    launcher = launcher or make_launcher(cfg, device, needs_mpi=True)
    session = session_for(cfg, run, env, world, device, lines)
    ranks_env = rank_env(run.path, env, uses_nccl(cfg, device))
    spec = LaunchSpec(run.path, world, ranks_env, float(cfg.timeout_s), job=job, run_id=run.run_id)
    return session.run_launch(launcher, spec)


def uses_nccl(cfg: SweepConfig, device: str) -> bool:
    """Whether the ranks run NCCL: then they are asked for its init lines (the transport)."""
    return device != "cpu" and backend_of(cfg).uses_nccl


def run_slurm(cfg: SweepConfig, run: RunDir, env: dict[str, str], job: str) -> int:
    """One Slurm job of nodes x tasks_per_node ranks of ``job`` into ``run``."""
    from gpulane.launch.slurm.settings import settings

    s = settings(cfg)
    device = slurm_device(cfg, s.gpus_per_node)
    cfg, line = choose_backend(cfg, device)
    plan = build_plan(cfg, on_device=True)  # bad input stops here, before anything is queued
    check_placements(cfg, plan, device)
    check_inputs(cfg, plan, device)
    saved = save_config(cfg, run, world_size=s.world_size, nodes=s.nodes, device=device)
    return launch_job(saved, run, env, job, s.world_size, device, lines=[line] if line else None)


def slurm_device(cfg: SweepConfig, gpus_per_node: int | None) -> str:
    """Where Slurm's ranks run: as asked, else on GPUs when the job asks for some."""
    device = str(cfg.device or "auto")
    if device == "auto":
        device = "cuda" if gpus_per_node else "cpu"
    return device


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
    session = session_for(saved, run, run_env(saved), ranks, device)
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
    plan = build_plan(cfg, device == "cuda")
    check_placements(cfg, plan, device)
    check_inputs(cfg, plan, device)
    run = make_run_dir(cfg, run_id=shared_run_id())
    saved = save_config(cfg, run, world_size=info.world_size, device=str(cfg.device), nodes=None)
    ctx = make_context(info, run.path)
    if uses_nccl(cfg, device):  # before the backend starts NCCL in this process
        os.environ.update(nccl_capture_env(run.path, env))
    if not ctx.is_leader:
        run_rank(saved, ctx)
        return 0
    session = session_for(saved, run, env, info.world_size, device)
    session.display.print(
        f"# gpulane sweep: rank 0 of {info.world_size} ({info.launcher}), run {run.run_id}"
    )
    if line:
        session.display.print(line)

    notes = NoteTail(run.path)

    def show(row: Any) -> None:
        for note in notes.read():  # the rank's own notes (# transport: ...) above its rows
            session.display.print(note)
        for text in session.view.add(row.to_dict()):
            session.display.print(text)

    run_rank(saved, ctx, on_row=show)
    for text in session.view.flush():
        session.display.print(text)
    return session.conclude(None)
