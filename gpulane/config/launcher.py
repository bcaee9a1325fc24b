"""The launchers' settings (conf/launcher): local processes, mpirun, Slurm (submitit).

Each option is a subclass of :class:`LauncherConfig`; what a sweep, a copy, a token run or
a campaign needs to know about a launcher is a property of its class (``remote_world``,
``places_on_nodes``, ...), never its name. Its values are checked by its own
``validate()``, called once by ``config.validate.check`` before any rank starts.
``LAUNCHERS`` holds every option's class by name: the three below, and any a launcher
module adds with ``gpulane.launch.registry.register_launcher``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from gpulane.config.campaign import PATTERNS as PATTERNS  # re-exported: the old place
from gpulane.config.campaign import CampaignConfig, CampaignKeys
from gpulane.config.campaign import campaign_pattern as _campaign_pattern
from gpulane.config.choices import Bind, Start, check_choices
from gpulane.config.types import SbatchArgs
from gpulane.errors import InputError


@dataclass
class LauncherConfig:
    """What every launcher option has: its name (the option chosen in conf/launcher)."""

    name: str = "???"
    """Internal: the option's name"""

    @property
    def remote_world(self) -> bool:
        """The ranks (and their GPUs) are on other hosts: the world is resolved there, not
        from this host's GPUs."""
        return False

    @property
    def places_on_nodes(self) -> bool:
        """It can put ranks on named nodes (a campaign's elements)."""
        return False

    @property
    def on_this_host(self) -> bool:
        """Every rank runs on this host (its cores and memory are the ranks')."""
        return False

    @property
    def starts_mpi(self) -> bool:
        """Its ranks are started by MPI (or a scheduler's PMI), so MPI sees one world."""
        return False

    @property
    def runs_host_jobs(self) -> bool:
        """It runs copy and token runs: ranks on this host, where their GPUs were counted."""
        return False

    @property
    def resumes(self) -> bool:
        """``resume=RUN`` can restart a run of this launcher from here."""
        return False

    def validate(self) -> None:
        """One InputError for a value that cannot work."""
        check_choices(self, "launcher.")


@dataclass
class LocalLauncherConfig(LauncherConfig):
    """Ranks as processes on this machine."""

    name: str = "local"
    """Internal: the option's name"""
    # none: the kernel places the ranks; core: rank r on one core of its own (the r-th of
    # the CPUs this process may use), as mpirun binds nccl-tests' ranks by default
    bind: Bind = "none"
    """none: the kernel places the ranks; core: each rank on a core of its own"""
    # fork: a rank is forked from a server that imported torch once for this run (about
    # 2.5 CPU-s less per rank); exec: each rank a new Python process (gpulane.launch.worker)
    start: Start = "fork"
    """fork: ranks forked from one process that imported torch; exec: a new process per rank"""

    @property
    def on_this_host(self) -> bool:
        return True

    @property
    def runs_host_jobs(self) -> bool:
        return True

    @property
    def resumes(self) -> bool:
        return True


@dataclass
class MpirunLauncherConfig(LauncherConfig):
    """Ranks started by mpirun (Open MPI; MPICH's and Intel MPI's mpiexec too)."""

    name: str = "mpirun"
    """Internal: the option's name"""
    command: str = "mpirun"
    """The mpirun (or mpiexec) to run: a name on PATH or a path"""
    extra_args: list[str] = field(default_factory=list)
    """More mpirun arguments, e.g. [--bind-to,none]; the rank count comes from ranks="""
    hostfile: str | None = None
    """Hosts and slots of a multi-node run (--hostfile); null: this host or the allocation's"""

    @property
    def places_on_nodes(self) -> bool:
        return True

    @property
    def on_this_host(self) -> bool:
        return not self.hostfile

    @property
    def starts_mpi(self) -> bool:
        return True


@dataclass
class ContainerConfig:
    """pyxis/enroot (srun --container-*); no image: no container."""

    image: str | None = None
    """Container image for srun --container-image; null: no container"""
    mounts: list[str] = field(default_factory=list)
    """srun --container-mounts entries, SRC:DST"""
    workdir: str | None = None
    """srun --container-workdir"""
    args: list[str] = field(default_factory=list)
    """Further srun arguments for the container runtime"""

    def srun_args(self) -> list[str]:
        """pyxis/enroot's srun options (none without an image)."""
        if not self.image:
            return []
        args = [f"--container-image={self.image}"]
        if self.mounts:
            args.append("--container-mounts=" + ",".join(str(m) for m in self.mounts))
        if self.workdir:
            args.append(f"--container-workdir={self.workdir}")
        return args + [str(a) for a in self.args]


def campaign_pattern(value: object) -> str:
    """``launcher.pattern`` (the old spelling of ``campaign.pattern``) checked."""
    return _campaign_pattern(value, "launcher.pattern")


def optional_whole(value: object, key: str, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"launcher.{key}: expected a whole number >= {minimum}, got {value!r}")
    return value


@dataclass
class _SlurmSettings(LauncherConfig):
    """The Slurm launcher's own keys (SlurmLauncherConfig adds the campaign keys' old
    spellings after them)."""

    name: str = "slurm"
    """Internal: the option's name"""
    nodes: int = 1
    """Nodes of the job"""
    gpus_per_node: int | None = None
    """GPUs (ranks) per node; null on CPU nodes: tasks_per_node ranks per node"""
    tasks_per_node: int | None = None
    """Ranks per node; null: gpus_per_node, or 1 without GPUs (set it on CPU nodes)"""
    partition: str | None = None
    """sbatch --partition"""
    account: str | None = None
    """sbatch --account"""
    qos: str | None = None
    """sbatch --qos"""
    time: int = 60
    """Job time limit in minutes (--time)"""
    constraint: str | None = None
    """sbatch --constraint (node features)"""
    exclusive: bool = False
    """sbatch --exclusive: the nodes to this job alone"""
    cpus_per_task: int | None = None
    """sbatch --cpus-per-task"""
    mem_gb: int | None = None
    """Memory per node in GB (--mem)"""
    sbatch_args: SbatchArgs = field(default_factory=dict)
    """Extra #SBATCH lines, e.g. +launcher.sbatch_args.reservation=acceptance"""
    srun_args: list[str] = field(default_factory=list)
    """Extra srun arguments, e.g. [--cpu-bind=none]"""
    setup: list[str] = field(default_factory=list)
    """Shell lines before srun, e.g. ["module load cuda/12.4"]"""
    container: ContainerConfig = field(default_factory=ContainerConfig)
    """pyxis/enroot container of the tasks (launcher.container.image=...)"""
    folder: str = "slurm"
    """submitit's scripts and per-task logs, inside the run directory"""
    wait: bool = True
    """false: submit, print the job id and run directory, return (gpulane collect finishes)"""
    poll_s: float = 2.0
    """Seconds between job-state queries (sacct)"""
    startup_s: float = 600.0
    """Seconds the tasks wait for each other at the rendezvous"""


@dataclass
class SlurmLauncherConfig(CampaignKeys, _SlurmSettings):
    """Ranks as Slurm tasks (submitit): one rank per GPU, or tasks_per_node on CPUs.

    The campaign keys' old place: it inherits :class:`CampaignKeys` (declared once, in
    config/campaign.py), whose values campaign.* reads when it leaves its own at their
    defaults."""

    @property
    def remote_world(self) -> bool:
        return True

    @property
    def places_on_nodes(self) -> bool:
        return True

    @property
    def starts_mpi(self) -> bool:
        return True  # srun --mpi=pmix

    def validate(self) -> None:
        super().validate()
        optional_whole(self.nodes, "nodes", 1)
        optional_whole(self.gpus_per_node, "gpus_per_node", 0)
        optional_whole(self.tasks_per_node, "tasks_per_node", 1)
        optional_whole(self.time, "time", 1)
        optional_whole(self.cpus_per_task, "cpus_per_task", 1)
        optional_whole(self.mem_gb, "mem_gb", 1)
        if not hasattr(self.sbatch_args or {}, "items"):
            raise InputError(
                "launcher.sbatch_args: expected a mapping such as {reservation: x}, "
                f"got {self.sbatch_args!r}"
            )
        poll = self.poll_s
        if not isinstance(poll, (int, float)) or isinstance(poll, bool) or poll <= 0:
            raise InputError(f"launcher.poll_s: expected seconds > 0, got {poll!r}")
        # the campaign keys' old spellings, checked as campaign.* is, named as given
        CampaignConfig.of(self).validate("launcher.")


LAUNCHERS: dict[str, type[LauncherConfig]] = {
    "local": LocalLauncherConfig,
    "mpirun": MpirunLauncherConfig,
    "slurm": SlurmLauncherConfig,
}


# launcher=NAME -> its YAML, for a launcher module outside gpulane (conf/launcher has the
# others); stored in Hydra's ConfigStore by config.store.register.
LAUNCHER_YAMLS: dict[str, Path] = {}


def add_launcher_config(name: str, schema: type[LauncherConfig], yaml: Path | None = None) -> None:
    """Make ``launcher=NAME`` known to the configuration (its keys, help, loading); Hydra's
    ConfigStore gets it from ``config.store.register`` (at once when that ran already).
    Hydra is not imported here: a rank only reads its saved configuration."""
    known = LAUNCHERS.get(name)
    if known is not None and known is not schema:
        raise ValueError(f"launcher {name!r} is registered twice ({known} and {schema})")
    LAUNCHERS[name] = schema
    if yaml is not None:
        LAUNCHER_YAMLS[name] = yaml
    store = sys.modules.get("gpulane.config.store")
    if store is not None and store.registered():
        store.store_launcher(name)
