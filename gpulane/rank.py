"""Who this process is in its world: rank discovery from the environment a launcher
leaves behind, and the :class:`RankContext` every per-rank job is given.

The same job code runs unchanged whether gpulane's local launcher, torchrun, srun or
mpirun started it: each sets a different family of variables, read here into one
:class:`RankInfo`. It sits on the ground floor because every rank needs it and no job may
know which launcher started it (DESIGN.md, "Layout").
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpulane.rundir import alive_path, write_heartbeat, write_note


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str | None
    master_port: int | None
    launcher: str  # gpulane, torchrun, slurm, mpirun, single


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            try:
                return int(str(value).split("(")[0].split(",")[0])
            except ValueError:
                continue
    return None


def expand_hostlist(nodelist: str) -> list[str]:
    """``gpu[01-02],cpu1`` -> ``[gpu01, gpu02, cpu1]``: scontrol's expansion, else
    submitit's parser (for a node list read on a machine without Slurm's tools)."""
    if not nodelist or nodelist in ("None", "None assigned"):
        return []
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.split()
        if out:
            return out
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        from submitit.slurm.slurm import _parse_node_list

        return list(_parse_node_list(nodelist))
    except Exception:
        return [nodelist]


def first_slurm_host(nodelist: str) -> str:
    """First host of a Slurm node list such as ``gpu[003-004,010],login1``."""
    hosts = expand_hostlist(nodelist)
    return hosts[0] if hosts else nodelist


def slurm_port(job_id: int | None) -> int:
    # Every task of a job derives the same port without talking to the others.
    return 20000 + (job_id or 0) % 20000


def discover(env: Mapping[str, str] | None = None) -> RankInfo | None:
    """The rank this process is, or None when no launcher started it as part of a world."""
    env = os.environ if env is None else env
    if env.get("RANK") is not None and env.get("WORLD_SIZE") is not None:
        launcher = env.get("GPULANE_LAUNCHER") or (
            "torchrun" if env.get("TORCHELASTIC_RUN_ID") else "env"
        )
        return RankInfo(
            rank=int(env["RANK"]),
            world_size=int(env["WORLD_SIZE"]),
            local_rank=_int(env, "LOCAL_RANK") or 0,
            local_world_size=_int(env, "LOCAL_WORLD_SIZE") or int(env["WORLD_SIZE"]),
            master_addr=env.get("MASTER_ADDR"),
            master_port=_int(env, "MASTER_PORT"),
            launcher=launcher,
        )
    if env.get("OMPI_COMM_WORLD_RANK") is not None:
        return RankInfo(
            rank=int(env["OMPI_COMM_WORLD_RANK"]),
            world_size=int(env["OMPI_COMM_WORLD_SIZE"]),
            local_rank=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK") or 0,
            local_world_size=_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE") or 1,
            master_addr=env.get("MASTER_ADDR"),
            master_port=_int(env, "MASTER_PORT"),
            launcher="mpirun",
        )
    if env.get("PMI_RANK") is not None and env.get("PMI_SIZE") is not None:
        return RankInfo(
            rank=int(env["PMI_RANK"]),
            world_size=int(env["PMI_SIZE"]),
            local_rank=_int(env, "MPI_LOCALRANKID", "PMI_LOCAL_RANK") or 0,
            local_world_size=_int(env, "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE") or 1,
            master_addr=env.get("MASTER_ADDR"),
            master_port=_int(env, "MASTER_PORT"),
            launcher="mpirun",
        )
    # Inside an srun step (not merely inside an allocation, where sbatch's script runs once).
    if env.get("SLURM_PROCID") is not None and env.get("SLURM_STEP_ID") is not None:
        ntasks = _int(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS") or 1
        job_id = _int(env, "SLURM_JOB_ID")
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        return RankInfo(
            rank=int(env["SLURM_PROCID"]),
            world_size=ntasks,
            local_rank=_int(env, "SLURM_LOCALID") or 0,
            local_world_size=_int(env, "SLURM_NTASKS_PER_NODE") or ntasks,
            master_addr=env.get("MASTER_ADDR")
            or (first_slurm_host(nodelist) if nodelist else None),
            master_port=_int(env, "MASTER_PORT") or slurm_port(job_id),
            launcher="slurm",
        )
    return None


# Ports below the kernel's ephemeral range: a port the kernel hands out for bind(0) is
# from that range, and between our probe and rank 0's listen any outgoing connection on
# the host may take it as its source port (EADDRINUSE at rendezvous on a busy host).
_RENDEZVOUS_PORTS = (20000, 32767)


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on this host, for a local rendezvous: one below the
    ephemeral range where there is one free (see _RENDEZVOUS_PORTS), else any."""
    low, high = _RENDEZVOUS_PORTS[0], min(_RENDEZVOUS_PORTS[1], _ephemeral_low() - 1)
    for _ in range(50 if high > low else 0):
        port = random.randint(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def hostname() -> str:
    return socket.gethostname().split(".")[0]


def shared_run_id(env: Mapping[str, str] | None = None) -> str:
    """A run id every rank of one launch derives alike, from the launcher's job identity."""
    env = os.environ if env is None else env
    if env.get("GPULANE_RUN_ID"):
        return env["GPULANE_RUN_ID"]
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', '0')}"
    if env.get("TORCHELASTIC_RUN_ID") and env["TORCHELASTIC_RUN_ID"] != "none":
        return f"torchrun-{env['TORCHELASTIC_RUN_ID']}"
    for key in ("PMIX_NAMESPACE", "OMPI_MCA_orte_hnp_uri", "PMI_KVSNAME"):
        if env.get(key):
            tag = "".join(ch if ch.isalnum() else "-" for ch in env[key])[-40:]
            return f"mpi-{tag}"
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return f"rdzv-{env['MASTER_ADDR']}-{env['MASTER_PORT']}"
    raise RuntimeError("set GPULANE_RUN_ID so that every rank writes to the same run directory")


@dataclass
class RankContext:
    info: RankInfo
    run_dir: Path
    host: str

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    @property
    def local_rank(self) -> int:
        return self.info.local_rank

    @property
    def is_leader(self) -> bool:
        return self.info.rank == 0

    def heartbeat(self, index: int, label: str, allow_s: float = 0.0) -> None:
        """Record that this rank reached point ``index`` (read by the launcher's watchdog).

        ``allow_s`` is how much longer than the run's timeout this point may take (a
        large message over a slow path), so that the watchdog's limit scales with it.
        """
        write_heartbeat(self.run_dir, self.rank, index, label, self.host, allow_s)

    def note(self, text: str) -> None:
        """A line for the user (rank 0's only: every rank would say the same)."""
        if self.is_leader:
            write_note(self.run_dir, text)


ALIVE_EVERY_S = 1.0


def make_context(info: RankInfo, run_dir: str | os.PathLike[str]) -> RankContext:
    ctx = RankContext(info=info, run_dir=Path(run_dir), host=hostname())
    start_alive_beat(ctx.run_dir, info.rank)
    return ctx


def start_alive_beat(run_dir: Path, rank: int) -> None:
    """Touch ``alive-RANK`` every second from a daemon thread.

    Point heartbeats cannot tell a frozen rank from its peers waiting for it in the same
    collective; this beat can: it stops only when the whole process stops (or is stopped).
    """
    path = alive_path(run_dir, rank)
    path.parent.mkdir(parents=True, exist_ok=True)

    def beat() -> None:
        while True:
            with contextlib.suppress(OSError):
                path.touch()
            time.sleep(ALIVE_EVERY_S)

    threading.Thread(target=beat, name="gpulane-alive", daemon=True).start()
