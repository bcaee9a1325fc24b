"""Slurm launcher settings (``launcher.*``), checked once, and what submitit and
hydra-submitit-launcher are given for them."""

from __future__ import annotations

import dataclasses
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.config.capabilities import backend_of
from gpulane.config.common import CommonConfig
from gpulane.config.launcher import (
    PATTERNS,
    ContainerConfig,
    SlurmLauncherConfig,
    campaign_pattern,
)
from gpulane.config.load import as_dict
from gpulane.errors import InputError, MissingComponent

__all__ = ["PATTERNS", "SlurmSettings", "campaign_pattern", "settings"]


@dataclass
class SlurmSettings(SlurmLauncherConfig):
    """``launcher.*`` of launcher=slurm, checked and worked out: the keys are
    :class:`SlurmLauncherConfig`'s (defined once there); here ``tasks_per_node`` is the
    ranks per node it comes to, and ``srun_args`` hold the container's and MPI's too."""

    tasks_per_node: int = 1
    """Internal: ranks per node, worked out"""

    @property
    def time_min(self) -> int:
        return self.time

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node


def tasks_per_node(tasks: int | None, gpus: int | None) -> int:
    """Ranks per node: as given, else one per GPU, else one."""
    if tasks is not None:
        return int(tasks)
    return int(gpus) if gpus else 1


def container_srun_args(container: Any) -> list[str]:
    """pyxis/enroot's srun options from ``launcher.container``."""
    if container is None:
        return []
    if isinstance(container, ContainerConfig):
        return container.srun_args()
    return ContainerConfig(**dict(container)).srun_args()


def slurm_config(node: Any) -> SlurmLauncherConfig:
    """``launcher.*`` as :class:`SlurmLauncherConfig`, values as given (its ``validate``
    says what is wrong with them, in its words)."""
    if isinstance(node, SlurmLauncherConfig):
        return node
    data = dict(as_dict(node))
    known = {f.name for f in dataclasses.fields(SlurmLauncherConfig)}
    values = {k: v for k, v in data.items() if k in known and k != "name"}
    if isinstance(values.get("container"), dict):
        values["container"] = ContainerConfig(**values["container"])
    return SlurmLauncherConfig(**values)


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def settings(cfg: CommonConfig, needs_mpi: bool | None = None) -> SlurmSettings:
    """Checked launcher settings from ``cfg.launcher``; ``needs_mpi``: the ranks start MPI
    (None: when the backend does)."""
    config = slurm_config(cfg.launcher)  # type: ignore[attr-defined]
    config.validate()
    gpus = config.gpus_per_node or None
    srun = [str(a) for a in config.srun_args or []] + container_srun_args(config.container)
    if needs_mpi is None:
        backend = getattr(cfg, "backend", None)
        needs_mpi = backend not in (None, "???") and backend_of(cfg).needs_mpi
    if needs_mpi:
        srun = _mpi_srun_args(srun)
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(SlurmLauncherConfig)}
    values.update(
        nodes=config.nodes or 1,
        gpus_per_node=gpus,
        tasks_per_node=tasks_per_node(config.tasks_per_node, gpus),
        partition=_text(config.partition),
        account=_text(config.account),
        qos=_text(config.qos),
        time=config.time or 60,
        constraint=_text(config.constraint),
        exclusive=bool(config.exclusive or False),
        sbatch_args={str(k): v for k, v in (config.sbatch_args or {}).items()},
        srun_args=srun,
        setup=[str(x) for x in config.setup or []],
        folder=str(config.folder or "slurm"),
        wait=bool(config.wait),
        poll_s=float(config.poll_s),
        startup_s=float(config.startup_s or 600),
        pattern=campaign_pattern(config.pattern),
        pack=bool(config.pack or False),
    )
    return SlurmSettings(**values)


def element_settings(s: SlurmSettings, nodes: int) -> SlurmSettings:
    """The Slurm settings of one campaign element's job: ``nodes`` nodes, one job (no
    pattern, no packing), and not requeued: a job that loses a node ends NODE_FAIL, which
    names the node, instead of going back to the queue to wait for it."""
    args = dict(s.sbatch_args)
    if not any(str(k).replace("_", "-") in ("requeue", "no-requeue") for k in args):
        args["no_requeue"] = True
    return dataclasses.replace(s, nodes=nodes, pattern="allocation", pack=False, sbatch_args=args)


def _mpi_srun_args(srun: list[str]) -> list[str]:
    if any(a.startswith("--mpi") for a in srun):
        return srun
    # Debian's (and most) Open MPI builds start under srun only through PMIx.
    return [*srun, "--mpi=pmix"]


def for_mpi(s: SlurmSettings) -> SlurmSettings:
    """``s`` for ranks that start MPI themselves (``settings(cfg, needs_mpi=True)``),
    without reading the configuration again."""
    return dataclasses.replace(s, srun_args=_mpi_srun_args(list(s.srun_args)))


def executor_parameters(s: SlurmSettings, name: str) -> dict[str, Any]:
    """submitit ``update_parameters`` keywords for these settings."""
    params: dict[str, Any] = {
        "name": name,
        "nodes": s.nodes,
        "tasks_per_node": s.tasks_per_node,
        "timeout_min": s.time_min,
        "slurm_srun_args": list(s.srun_args),
        "slurm_setup": list(s.setup),
        "slurm_additional_parameters": dict(s.sbatch_args),
        "slurm_signal_delay_s": 30,
    }
    if s.gpus_per_node:
        params["gpus_per_node"] = s.gpus_per_node
    if s.cpus_per_task:
        params["cpus_per_task"] = s.cpus_per_task
    if s.mem_gb:
        params["mem_gb"] = s.mem_gb
    for key in ("partition", "account", "qos", "constraint"):
        value = getattr(s, key)
        if value:
            params[f"slurm_{key}"] = value
    if s.exclusive:
        params["slurm_exclusive"] = True
    return params


def hydra_launcher_settings(cfg: CommonConfig) -> dict[str, Any]:
    """hydra-submitit-launcher's (submitit_slurm) keys for ``cfg.launcher``."""
    return hydra_launcher_keys(settings(cfg))


def hydra_launcher_keys(s: SlurmSettings) -> dict[str, Any]:
    """hydra-submitit-launcher's (submitit_slurm) keys for checked settings."""
    setup = list(s.setup)
    # hydra-submitit-launcher 1.2 has no srun_args; what matters most (the MPI plugin)
    # goes through the environment srun reads.
    mpi = next((a.split("=", 1)[1] for a in s.srun_args if a.startswith("--mpi=")), None)
    if mpi:
        setup.append(f"export SLURM_MPI_TYPE={mpi}")
    extra = dict(s.sbatch_args)
    if s.exclusive:
        extra.setdefault("exclusive", True)
    return {
        "nodes": s.nodes,
        "tasks_per_node": s.tasks_per_node,
        "gpus_per_node": s.gpus_per_node,
        "cpus_per_task": s.cpus_per_task,
        "mem_gb": s.mem_gb,
        "timeout_min": s.time_min,
        "partition": s.partition,
        "account": s.account,
        "qos": s.qos,
        "constraint": s.constraint,
        "additional_parameters": extra,
        "setup": setup or None,
    }


def make_executor(folder: Path, params: dict[str, Any]) -> Any:
    """A submitit Slurm executor with ``params`` (see :func:`executor_parameters`)."""
    try:
        import submitit
    except ImportError as err:
        raise MissingComponent("submitit is not installed; pip install submitit") from err
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(**params)
    return executor


def sbatch_options(folder: Path, params: dict[str, Any]) -> list[str]:
    """The ``#SBATCH`` options submitit would write for ``params`` (nothing is submitted):
    what ``launcher.dry_run=true`` prints."""
    executor = make_executor(folder, params)
    text = executor._executor._make_submission_file_text("srun ...", "dry-run")
    return [
        ln[len("#SBATCH ") :].strip()
        for ln in str(text).splitlines()
        if ln.startswith("#SBATCH ") and not ln.startswith(("#SBATCH --output", "#SBATCH --error"))
    ]


def partition_nodes(partition: str | None) -> list[str]:
    """The nodes of ``partition``, or of the default partition (the one sinfo marks
    with ``*``, where a job without ``--partition`` goes) when None: a campaign's nodes
    when ``campaign.nodelist`` names none."""
    cmd = ["sinfo", "-h", "-N", "-o", "%N %P"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        raise InputError(f"campaign.nodelist not given and sinfo failed ({err})") from err
    if out.returncode != 0:
        raise InputError(
            f"campaign.nodelist not given and `{' '.join(cmd)}` failed: "
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
