"""The launcher a configuration names (``launcher=local|mpirun|slurm``)."""

from __future__ import annotations

from typing import Any

from gpulane.config.common import CommonConfig
from gpulane.errors import InputError
from gpulane.launch.base import Launcher

LAUNCHERS = ("local", "mpirun", "slurm")


def make_launcher(cfg: CommonConfig, device: str = "cpu", needs_mpi: bool = False) -> Launcher:
    """``cfg.launcher`` as a launcher; ``needs_mpi``: the ranks start MPI themselves (the
    mpi4py backend, nccl-tests built with MPI=1)."""
    section: Any = getattr(cfg, "launcher", None)
    name = str(section.name) if section is not None else "local"
    if name == "local":
        from gpulane.launch.local import LocalLauncher

        return LocalLauncher(bind=str(getattr(section, "bind", None) or "none"))
    if name == "mpirun":
        from gpulane.launch.mpirun.launcher import MpirunLauncher, MpirunSettings

        backend = getattr(cfg, "backend", None)
        return MpirunLauncher(
            MpirunSettings(
                command=str(section.command or "mpirun"),
                hostfile=str(section.hostfile) if section.hostfile else None,
                extra_args=[str(a) for a in section.extra_args or []],
                needs_mpi4py=needs_mpi and backend is not None and str(backend.name) == "mpi",
            )
        )
    if name == "slurm":
        from gpulane.launch.slurm.launcher import SlurmLauncher
        from gpulane.launch.slurm.settings import settings

        return SlurmLauncher(settings(cfg, needs_mpi=needs_mpi), device)
    raise InputError(f"launcher: unknown launcher {name!r}; use one of {', '.join(LAUNCHERS)}")
