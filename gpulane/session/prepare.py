"""A sweep prepared once, before anything starts: :func:`prepare` reads and checks the
configuration, works out the world, the device, the backend (``backend=auto``), the plan
and the launcher's own settings, and decides how the sweep runs (:data:`ROUTES`). The
result, a :class:`SweepRun`, is passed down as it is: nothing below works any of it out
again, and the ranks receive the plan (``RunDir.save_plan``) rather than rebuilding it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from gpulane.collectives.plan import SweepPlan, build_plan
from gpulane.config.campaign import campaign_of, deprecation_note
from gpulane.config.capabilities import backend_of
from gpulane.config.commands import SweepConfig
from gpulane.config.validate import check_preset
from gpulane.errors import InputError, MissingComponent
from gpulane.launch.base import Launcher, LaunchPlan
from gpulane.launch.registry import entry, launcher_config, make_launcher
from gpulane.rundir import run_env
from gpulane.session.backend_choice import choose_backend
from gpulane.session.sweep_checks import check_front, check_inputs, check_placements
from gpulane.session.world import local_gpus

JOB = "gpulane.collectives.sweep:run_rank"
# localize=pairs|halving|ring: subsets of the GPUs instead of a sweep (campaigns/localize)
LOCALIZE_JOB = "gpulane.campaigns.localize.rank:run_rank"

# How a prepared sweep runs: its ranks started once by the launcher (plain), the user's
# nccl-tests binaries (nccl_tests), a cluster campaign of many jobs (campaign.pattern, or
# campaign.dry_run: what would be submitted), or one combination of a packed multirun,
# queued for one launch (campaign.pack=true).
Route = Literal["plain", "nccl_tests", "campaign", "packed"]
ROUTES: tuple[Route, ...] = ("plain", "nccl_tests", "campaign", "packed")


@dataclass(frozen=True)
class SweepRun:
    """Everything a sweep needs before it starts, worked out once by :func:`prepare`."""

    cfg: SweepConfig  # backend=auto and torch_overhead=auto resolved
    route: Route
    plan: SweepPlan
    device: str  # cuda or cpu: where the ranks' buffers go
    world: int  # ranks
    job: str  # what every rank runs (MODULE:FUNCTION)
    launcher: LaunchPlan | None = None  # a remote launcher's plan, made once; None: none
    notes: list[str] = field(default_factory=list)  # said before the run (the backend chosen)
    env: dict[str, str] = field(default_factory=dict)  # for the ranks: preset, then env.*

    @property
    def nodes(self) -> int:
        return self.launcher.nodes if self.launcher is not None else 1


def job_of(cfg: SweepConfig) -> str:
    return LOCALIZE_JOB if cfg.localize not in (None, "", "none", False) else JOB


# -- what the launcher and the backend can do: each asked in one place ----------------
# (to become the capability properties of the typed launcher and backend configurations)


def _remote_world(cfg: SweepConfig) -> bool:
    """The ranks run on other nodes (Slurm's, or a plugin's): the GPUs are not counted
    here, and the launcher's plan says the world."""
    return launcher_config(cfg).remote_world


def _runs_own_program(cfg: SweepConfig) -> bool:
    """The backend is the user's own binaries (nccl-tests), not gpulane's ranks."""
    return backend_of(cfg).runs_program


def uses_nccl(cfg: SweepConfig, device: str) -> bool:
    """Whether the ranks run NCCL: then they are asked for its init lines (the transport)."""
    return device != "cpu" and backend_of(cfg).uses_nccl


def _needs_mpi(cfg: SweepConfig) -> bool:
    """The backend's ranks start MPI themselves (mpi4py): once per process."""
    return backend_of(cfg).needs_mpi


def _needs_gpus(cfg: SweepConfig) -> bool:
    return backend_of(cfg).needs_gpus


def _launch_plan(cfg: SweepConfig, needs_mpi: bool | None = None) -> LaunchPlan:
    """The remote launcher's own plan of the run, from its own configuration."""
    config = launcher_config(cfg)
    return entry(config.name).launcher.prepare(cfg, config, needs_mpi)


# -- the world -------------------------------------------------------------------------


def resolve_world(cfg: SweepConfig) -> tuple[int, str]:
    """(ranks, device) from ranks=auto|N and device=auto|cuda|cpu and the GPUs present."""
    device = str(cfg.device).lower()
    backend = str(cfg.backend.name)
    if _needs_gpus(cfg) and device == "cpu":
        raise InputError(f"backend={backend} needs GPUs; use backend=torch or backend=mpi on CPUs")
    gpus = local_gpus() if device != "cpu" else 0
    ranks = cfg.ranks
    if device == "auto":
        wanted = gpus if str(ranks) == "auto" else int(ranks)
        device = "cuda" if gpus >= 1 and gpus >= wanted else "cpu"
        if device == "cpu" and _needs_gpus(cfg):
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


def remote_device(cfg: SweepConfig, gpus_per_node: int | None) -> str:
    """Where a remote launcher's ranks run: as asked, else on GPUs when it gives some."""
    device = str(cfg.device or "auto")
    if device == "auto":
        device = "cuda" if gpus_per_node else "cpu"
    return device


# -- prepare -----------------------------------------------------------------------------


def prepare(cfg: SweepConfig, job: str | None = None, packing: bool = False) -> SweepRun:
    """The sweep ``cfg`` asks for, checked and worked out once; bad input stops here,
    before any directory is made or anything is queued. ``job``: what the ranks run
    (default: the sweep, or localize=); ``packing``: a packed multirun is being queued."""
    job = job or job_of(cfg)
    if _runs_own_program(cfg):
        sweep = _nccl_tests(cfg, job)
    elif _remote_world(cfg):
        sweep = _remote(cfg, job, packing)
    else:
        sweep = _here(cfg, job)
    return dataclasses.replace(sweep, env=run_env(sweep.cfg))


def _here(cfg: SweepConfig, job: str) -> SweepRun:
    """Ranks on this host (launcher=local) or where mpirun puts them."""
    _no_campaign(cfg, f"launcher={cfg.launcher.name} starts its ranks from here")
    check_preset(cfg, str(cfg.device).lower())  # backend=mpi: before the GPUs are known
    ranks, device = resolve_world(cfg)
    check_preset(cfg, device)
    cfg, line = choose_backend(cfg, device)
    plan = build_plan(cfg, device == "cuda")
    if plan.timing.graph and device != "cuda":
        raise InputError("graph: CUDA graphs need GPUs; set graph=false on CPUs")
    check_front(cfg, plan, ranks, device)
    return SweepRun(cfg, "plain", plan, device, ranks, job, None, [line] if line else [])


def _remote(cfg: SweepConfig, job: str, packing: bool) -> SweepRun:
    """Ranks on other hosts: one launch, a campaign of launches (campaign.pattern), a dry
    run (campaign.dry_run: printed, nothing submitted) or a packed combination."""
    lp = _launch_plan(cfg)
    camp = campaign_of(cfg)
    device = remote_device(cfg, lp.gpus_per_node)
    cfg, line = choose_backend(cfg, device)
    notes = [n for n in (line, deprecation_note(cfg)) if n]
    route: Route = "plain"
    if camp.pattern != "allocation" or camp.dry_run:
        route = "campaign"
    elif camp.pack and packing:
        route = "packed"
        if _needs_mpi(cfg):
            raise InputError(
                "campaign.pack=true: backend=mpi cannot be packed (MPI starts once per process)"
            )
    else:
        check_preset(cfg, str(cfg.device).lower())
    _check_world(cfg, lp, camp.pattern)
    plan = build_plan(cfg, device == "cuda")
    if route == "plain" or (camp.dry_run and camp.pattern == "allocation"):
        check_placements(cfg, plan, device)
        check_inputs(cfg, plan, device)
    return SweepRun(cfg, route, plan, device, lp.world, job, lp, notes)


# The ranks of one element of a campaign step, by its nodes: per-node has 1, pairs and
# ring 2; the others (allocation, halving) as many as the step's subset.
ELEMENT_NODES = {"per-node": 1, "pairs": 2, "ring": 2}


def _check_world(cfg: SweepConfig, lp: LaunchPlan, pattern: str) -> None:
    """ranks=N against the world the launcher will start: refused now, before anything
    is submitted, rather than by the ranks once they arrive ("2 ranks arrived, the run is
    configured for 4"). A campaign's runs are sized by their nodes."""
    if str(cfg.ranks) == "auto":
        return
    ranks = int(cfg.ranks)
    if pattern == "allocation":
        if ranks != lp.world:
            raise InputError(
                f"ranks={ranks} but launcher={lp.launcher} starts {lp.world} rank(s) "
                f"({lp.nodes} node(s) x {lp.ranks_per_node}); set ranks=auto or ask the "
                "launcher for that many"
            )
        return
    sizes = {ELEMENT_NODES.get(step, 0) * lp.ranks_per_node for step in pattern.split("+")}
    if sizes != {ranks}:
        raise InputError(
            f"ranks={ranks}: the runs of campaign.pattern={pattern} get {lp.ranks_per_node} "
            "rank(s) on each of their nodes, not a fixed count; set ranks=auto"
        )


def _no_campaign(cfg: SweepConfig, why: str) -> None:
    """A campaign key this route cannot honour: one error, rather than a run that ignores
    it (a dry run that starts ranks, a pattern that runs one sweep)."""
    camp = campaign_of(cfg)
    for key, wanted in (
        ("pattern", camp.pattern != "allocation"), ("dry_run", camp.dry_run),
        ("pack", camp.pack),
    ):  # fmt: skip
        if wanted:
            value = getattr(camp, key)
            value = str(value).lower() if isinstance(value, bool) else value
            raise InputError(
                f"campaign.{key}={value}: {why}; campaigns, dry runs and "
                "packing are for a launcher whose ranks are on other hosts (launcher=slurm)"
            )


def _nccl_tests(cfg: SweepConfig, job: str) -> SweepRun:
    """The user's nccl-tests: one rank per GPU, the world from the launcher or the GPUs."""
    _no_campaign(cfg, "backend=nccl_tests runs the binaries as one launch")
    plan = build_plan(cfg, True)
    s = None
    if _remote_world(cfg):
        s = _launch_plan(cfg, needs_mpi=True)  # nccl-tests built with MPI=1
        world = s.world
    elif str(cfg.ranks) == "auto":
        world = int(cfg.world_size or local_gpus() or 2)
    else:
        world = int(cfg.ranks)
    return SweepRun(cfg, "nccl_tests", plan, "cuda", world, job, s)


def launcher_for(run: SweepRun) -> Launcher:
    """The launcher of a prepared sweep: a remote one from the plan it made once (for
    ranks that may start MPI, as every sweep's ranks might), others from the
    configuration."""
    if run.launcher is not None:
        return entry(run.launcher.launcher).launcher.from_plan(run.launcher, run.device)
    return make_launcher(run.cfg, run.device, needs_mpi=True)
