"""Slurm launcher settings (``launcher.*``), checked once, and what submitit and
hydra-submitit-launcher are given for them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.config.common import CommonConfig
from gpulane.config.load import as_dict
from gpulane.errors import InputError, MissingComponent

PATTERNS = ("allocation", "per-node", "pairs", "ring", "halving")


@dataclass(frozen=True)
class SlurmSettings:
    nodes: int = 1
    gpus_per_node: int | None = None
    tasks_per_node: int = 1
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_min: int = 60
    constraint: str | None = None
    exclusive: bool = False
    cpus_per_task: int | None = None
    mem_gb: int | None = None
    sbatch_args: dict[str, Any] = field(default_factory=dict)
    srun_args: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    folder: str = "slurm"
    wait: bool = True
    poll_s: float = 2.0
    startup_s: float = 600.0
    # allocation, per-node, pairs, ring, halving, or steps joined by "+" (campaigns/run.py)
    pattern: str = "allocation"
    pack: bool = False  # under -m: every combination in one job (slurm_patterns)

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node


def _opt_int(section: Any, key: str, minimum: int) -> int | None:
    value = section.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"launcher.{key}: expected a whole number >= {minimum}, got {value!r}")
    return value


def _opt_str(section: Any, key: str) -> str | None:
    value = section.get(key)
    return None if value in (None, "") else str(value)


def _str_list(section: Any, key: str) -> list[str]:
    value = section.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def tasks_per_node(tasks: int | None, gpus: int | None) -> int:
    """Ranks per node: as given, else one per GPU, else one."""
    if tasks is not None:
        return int(tasks)
    return int(gpus) if gpus else 1


def container_srun_args(container: Any) -> list[str]:
    """pyxis/enroot's srun options from ``launcher.container``."""
    if container is None or not container.get("image"):
        return []
    args = [f"--container-image={container['image']}"]
    mounts = _str_list(container, "mounts")
    if mounts:
        args.append("--container-mounts=" + ",".join(mounts))
    if container.get("workdir"):
        args.append(f"--container-workdir={container['workdir']}")
    return args + _str_list(container, "args")


def campaign_pattern(value: Any) -> str:
    """``launcher.pattern`` checked: one of PATTERNS, or several joined by ``+`` (or given
    as a list), as ``per-node+allocation``."""
    if value is None or value == "":
        return "allocation"
    parts = [str(v) for v in value] if isinstance(value, (list, tuple)) else str(value).split("+")
    steps = [p.strip().replace("_", "-") for p in parts if p.strip()]
    bad = [p for p in steps if p not in PATTERNS]
    if bad or not steps:
        raise InputError(
            f"launcher.pattern: expected one of {', '.join(PATTERNS)} (or several joined by +), "
            f"got {value!r}"
        )
    return "+".join(steps)


def settings(cfg: CommonConfig, needs_mpi: bool | None = None) -> SlurmSettings:
    """Checked launcher settings from ``cfg.launcher``; ``needs_mpi``: the ranks start MPI
    (None: when the backend is mpi)."""
    sec = as_dict(cfg.launcher)  # type: ignore[attr-defined]
    nodes = _opt_int(sec, "nodes", 1) or 1
    gpus = _opt_int(sec, "gpus_per_node", 0) or None
    tasks = tasks_per_node(_opt_int(sec, "tasks_per_node", 1), gpus)
    time_min = _opt_int(sec, "time", 1) or 60
    sbatch = sec.get("sbatch_args") or {}
    if not hasattr(sbatch, "items"):
        raise InputError(
            f"launcher.sbatch_args: expected a mapping such as {{reservation: x}}, got {sbatch!r}"
        )
    srun = _str_list(sec, "srun_args") + container_srun_args(sec.get("container"))
    if needs_mpi is None:
        backend = getattr(cfg, "backend", None)
        needs_mpi = backend is not None and str(backend.name) == "mpi"
    if needs_mpi:
        srun = _mpi_srun_args(srun)
    pattern = campaign_pattern(sec.get("pattern"))
    poll = sec.get("poll_s", 2.0)
    if not isinstance(poll, (int, float)) or isinstance(poll, bool) or poll <= 0:
        raise InputError(f"launcher.poll_s: expected seconds > 0, got {poll!r}")
    return SlurmSettings(
        nodes=nodes,
        gpus_per_node=gpus,
        tasks_per_node=tasks,
        partition=_opt_str(sec, "partition"),
        account=_opt_str(sec, "account"),
        qos=_opt_str(sec, "qos"),
        time_min=time_min,
        constraint=_opt_str(sec, "constraint"),
        exclusive=bool(sec.get("exclusive") or False),
        cpus_per_task=_opt_int(sec, "cpus_per_task", 1),
        mem_gb=_opt_int(sec, "mem_gb", 1),
        sbatch_args={str(k): v for k, v in sbatch.items()},
        srun_args=srun,
        setup=_str_list(sec, "setup"),
        folder=str(sec.get("folder") or "slurm"),
        wait=bool(sec.get("wait", True)),
        poll_s=float(poll),
        startup_s=float(sec.get("startup_s") or 600),
        pattern=pattern,
        pack=bool(sec.get("pack") or False),
    )


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
    s = settings(cfg)
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
