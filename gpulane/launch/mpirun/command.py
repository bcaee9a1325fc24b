"""Open MPI's (and MPICH's) mpirun: finding it, which MPI it is, whether the ranks' mpi4py
can run under it, and the command line that starts N ranks of anything, each rank's
output in its own log (``<run>/logs/rank-N.log``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpulane.errors import InputError, MissingComponent
from gpulane.mpi_info import INSTALL_HINT, MPI_HINT, mpi_flavor

# Variables that say "you are rank N" to gpulane: a launcher's own must not leak into the ranks.
RANK_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GPULANE_LAUNCHER",
    "TORCHELASTIC_RUN_ID",
)
# Always exported to the ranks (where set), so that remote hosts see the same Python.
PASS_VARS = (
    "PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PYTHONUNBUFFERED",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GPULANE_RUN_ID",
    "CUDA_VISIBLE_DEVICES",
)
PASS_PREFIXES = ("NCCL_", "UCX_", "OMPI_MCA_", "GPULANE_")
# Writes each rank's output to <logs>/rank-N.log whatever the MPI calls its rank variable.
RANK_LOG_SH = (
    'r="${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-${SLURM_PROCID:-x}}}}"; '
    'exec "$@" >"$0/rank-$r.log" 2>&1'
)


def missing_mpirun(command: str) -> MissingComponent:
    return MissingComponent(
        f"launcher=mpirun: {command!r} not found; install Open MPI (Debian: apt-get install "
        "openmpi-bin libopenmpi-dev) or load your cluster's MPI module (module load openmpi), "
        "or point launcher.command at your mpirun"
    )


def find_mpirun(command: str) -> str:
    exe = shutil.which(command)
    if exe is None:
        raise missing_mpirun(command)
    return exe


def mpirun_flavor(exe: str) -> str:
    """Which MPI an mpirun belongs to, from ``mpirun --version``."""
    try:
        out = subprocess.run(
            [exe, "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise MissingComponent(f"launcher=mpirun: cannot run {exe} --version: {err}") from err
    return mpi_flavor(out.stdout + out.stderr)


@dataclass(frozen=True)
class Mpi4pyInfo:
    library: str | None  # MPI_Get_library_version's first line; None when mpi4py cannot load
    error: str | None


MPI4PY_PROBE = (
    "import mpi4py\n"
    "mpi4py.rc.initialize = False\n"
    "from mpi4py import MPI\n"
    "print(MPI.Get_library_version().strip().splitlines()[0])\n"
)


def probe_mpi4py(python: str, env: Mapping[str, str]) -> Mpi4pyInfo:
    """The MPI library mpi4py loads in the ranks' Python (without initialising MPI)."""
    try:
        out = subprocess.run(
            [python, "-c", MPI4PY_PROBE],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(env),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as err:
        return Mpi4pyInfo(None, str(err))
    if out.returncode != 0:
        lines = [ln.strip() for ln in out.stderr.strip().splitlines() if ln.strip()]
        errs = [ln for ln in lines if re.match(r"^\w*(Error|Exception)\b", ln)]
        return Mpi4pyInfo(None, (errs or lines or ["unknown error"])[-1])
    return Mpi4pyInfo(out.stdout.strip(), None)


def check_mpi4py(info: Mpi4pyInfo, flavor: str, exe: str) -> None:
    """One clear error when the ranks' mpi4py cannot work under this mpirun."""
    if info.library is None:
        err = info.error or ""
        if "No module named" in err and "mpi4py" in err:
            raise MissingComponent(
                f"backend=mpi: mpi4py is not installed: pip install mpi4py (it needs an MPI library: {MPI_HINT})"
            )
        raise MissingComponent(
            f"backend=mpi: mpi4py cannot load an MPI library ({err}); {INSTALL_HINT}, or rebuild "
            "mpi4py against your MPI (env MPICC=$(which mpicc) pip install --no-binary mpi4py "
            "--force-reinstall mpi4py)"
        )
    lib = mpi_flavor(info.library)
    compatible = {lib, flavor} <= {"MPICH", "Intel MPI", "MVAPICH"} or lib == flavor
    known = {"Open MPI", "MPICH", "Intel MPI", "MVAPICH"}
    if lib in known and flavor in known and not compatible:
        raise InputError(
            f"backend=mpi: mpi4py uses {info.library} but {exe} is {flavor}'s: mpi4py is built "
            f"against another MPI than the mpirun that would start it; set launcher.command to "
            f"{lib}'s mpirun, or rebuild mpi4py against {flavor} (env MPICC=$(which mpicc) pip "
            "install --no-binary mpi4py --force-reinstall mpi4py)"
        )


def physical_cores() -> int:
    """Cores as Open MPI counts slots (physical cores, not hardware threads)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return os.cpu_count() or 1
    cores = set()
    phys = core = None
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if core is not None:
                cores.add((phys, core))
            phys = core = None
            continue
        key, _, value = line.partition(":")
        if key.strip() == "physical id":
            phys = value.strip()
        elif key.strip() == "core id":
            core = value.strip()
    logical = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    return min(len(cores) or os.cpu_count() or 1, logical or 1 << 30)


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def export_names(env: Mapping[str, str], extra: Sequence[str]) -> list[str]:
    names = [k for k in PASS_VARS if k in env]
    names += sorted(k for k in env if k.startswith(PASS_PREFIXES) and k not in names)
    names += [k for k in extra if k in env and k not in names]
    return names


def build_command(
    exe: str,
    flavor: str,
    nprocs: int,
    worker: Sequence[str],
    log_dir: Path,
    exports: Sequence[str],
    hostfile: str | None = None,
    extra_args: Sequence[str] = (),
    root: bool = False,
    oversubscribe: bool = False,
) -> list[str]:
    """The mpirun command line for ``nprocs`` ranks of ``worker``, each logging to log_dir."""
    cmd = [exe]
    if flavor == "Open MPI":
        cmd += ["-np", str(nprocs)]
        if root:
            cmd.append("--allow-run-as-root")
        if oversubscribe:
            cmd.append("--oversubscribe")
        if hostfile:
            cmd += ["--hostfile", hostfile]
        for name in exports:
            cmd += ["-x", name]
    else:  # MPICH's Hydra and its relatives (Intel MPI, MVAPICH): oversubscribe by default
        cmd += ["-n", str(nprocs)]
        if hostfile:
            cmd += ["-f", hostfile]
        if exports:
            cmd += ["-genvlist", ",".join(exports)]
    cmd += list(extra_args)
    cmd += ["sh", "-c", RANK_LOG_SH, str(log_dir), *worker]
    return cmd


def rank_env(base: Mapping[str, str], env: Mapping[str, str], run_id: str) -> dict[str, str]:
    out = {k: v for k, v in base.items() if k not in RANK_VARS}
    out.update(env)
    out["PYTHONUNBUFFERED"] = "1"
    out["GPULANE_RUN_ID"] = run_id
    return out


def all_local(hostfile: str | None, extra_args: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether every rank runs on this host (no hostfile, no host list, no allocation)."""
    if hostfile or env.get("SLURM_JOB_ID") or env.get("PBS_JOBID") or env.get("LSB_JOBID"):
        return False
    host_flags = {
        "-H",
        "--host",
        "-host",
        "--hostfile",
        "-hostfile",
        "-f",
        "--machinefile",
        "-machinefile",
        "-hosts",
    }
    return not any(a in host_flags for a in extra_args)
