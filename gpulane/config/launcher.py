"""The launchers' settings (conf/launcher): local processes, mpirun, Slurm (submitit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LocalLauncherConfig:
    """Ranks as processes on this machine."""

    name: str = "local"
    """Internal: the option's name"""
    # none: the kernel places the ranks; core: rank r on one core of its own (the r-th of
    # the CPUs this process may use), as mpirun binds nccl-tests' ranks by default
    bind: str = "none"
    """none: the kernel places the ranks; core: each rank on a core of its own"""


@dataclass
class MpirunLauncherConfig:
    """Ranks started by mpirun (Open MPI; MPICH's and Intel MPI's mpiexec too)."""

    name: str = "mpirun"
    """Internal: the option's name"""
    command: str = "mpirun"
    """The mpirun (or mpiexec) to run: a name on PATH or a path"""
    extra_args: list[str] = field(default_factory=list)
    """More mpirun arguments, e.g. [--bind-to,none]; the rank count comes from ranks="""
    hostfile: str | None = None
    """Hosts and slots of a multi-node run (--hostfile); null: this host or the allocation's"""


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


@dataclass
class SlurmLauncherConfig:
    """Ranks as Slurm tasks (submitit): one rank per GPU, or tasks_per_node on CPUs."""

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
    sbatch_args: dict[str, Any] = field(default_factory=dict)
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
    pattern: str = "allocation"
    """allocation, per-node, pairs, ring or halving (steps joined by +): a cluster campaign"""
    nodelist: Any = None  # a hostlist string or a list of hosts
    """The nodes of a pattern, a Slurm hostlist node[01-16]; null: sinfo's for the partition"""
    outlier_fraction: float = 0.1
    """A node (pair) this far below the median of its peers is named; exit 1"""
    halving_good: float | None = None
    """GB/s a healthy set reaches (pattern=halving); null: the best half is the reference"""
    dry_run: bool = False
    """Print the pattern's jobs (#SBATCH options), submit nothing"""
    pack: bool = False
    """Under -m: run every combination in one job instead of one array element each"""


LAUNCHERS = {
    "local": LocalLauncherConfig,
    "mpirun": MpirunLauncherConfig,
    "slurm": SlurmLauncherConfig,
}
