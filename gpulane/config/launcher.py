"""The launchers' settings (conf/launcher): local processes, mpirun, Slurm (submitit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LocalLauncherConfig:
    name: str = "local"
    # none: the kernel places the ranks; core: rank r on one core of its own (the r-th of
    # the CPUs this process may use), as mpirun binds nccl-tests' ranks by default
    bind: str = "none"


@dataclass
class MpirunLauncherConfig:
    name: str = "mpirun"
    command: str = "mpirun"
    extra_args: list[str] = field(default_factory=list)
    hostfile: str | None = None


@dataclass
class ContainerConfig:
    """pyxis/enroot (srun --container-*); no image: no container."""

    image: str | None = None
    mounts: list[str] = field(default_factory=list)
    workdir: str | None = None
    args: list[str] = field(default_factory=list)


@dataclass
class SlurmLauncherConfig:
    name: str = "slurm"
    nodes: int = 1
    gpus_per_node: int | None = None
    tasks_per_node: int | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: int = 60
    constraint: str | None = None
    exclusive: bool = False
    cpus_per_task: int | None = None
    mem_gb: int | None = None
    sbatch_args: dict[str, Any] = field(default_factory=dict)
    srun_args: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    container: ContainerConfig = field(default_factory=ContainerConfig)
    folder: str = "slurm"
    wait: bool = True
    poll_s: float = 2.0
    startup_s: float = 600.0
    pattern: str = "allocation"
    nodelist: Any = None  # a hostlist string or a list of hosts
    outlier_fraction: float = 0.1
    halving_good: float | None = None
    dry_run: bool = False
    pack: bool = False


LAUNCHERS = {
    "local": LocalLauncherConfig,
    "mpirun": MpirunLauncherConfig,
    "slurm": SlurmLauncherConfig,
}
