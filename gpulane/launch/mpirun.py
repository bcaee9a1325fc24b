"""mpirun launcher: ranks started by Open MPI's mpirun (or MPICH's / Intel MPI's mpiexec).

Each rank runs ``python -m gpulane.launch.worker``; its output goes to
``<run>/logs/rank-N.log`` as under the local launcher, mpirun's own to
``<run>/logs/mpirun.log``. The watchdog reads the ranks' heartbeats and ends the job when
no rank makes progress for ``timeout_s``; when mpirun ends early the error names the rank
that failed first and its last words.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.errors import InputError, MissingComponent, RunFailed
from gpulane.launch.context import LOG_DIR, read_heartbeats
from gpulane.launch.env import free_port
from gpulane.launch.local import POLL_S, LaunchResult, describe_exit, find_stall, log_path, tail
from gpulane.launch.worker import command as worker_command
from gpulane.mpi_info import INSTALL_HINT, MPI_HINT, mpi_flavor

MPIRUN_LOG = "mpirun.log"
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


def mpirun_failure(mpirun_log: str) -> tuple[int | None, int | None, str | None]:
    """(rank, exit status or -signal, mpirun's own summary) from what mpirun printed."""
    m = re.search(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(\d+)", mpirun_log)
    if m:
        return int(m.group(1)), int(m.group(2)), None
    m = re.search(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)", mpirun_log)
    if m:
        return int(m.group(1)), -int(m.group(2)), None
    m = re.search(r"MPI_ABORT was invoked on rank (\d+) .*?errorcode (\d+)", mpirun_log, re.S)
    if m:
        return int(m.group(1)), int(m.group(2)), None
    lines = [
        ln.strip()
        for ln in mpirun_log.splitlines()
        if ln.strip() and not set(ln.strip()) <= set("-=*") and "Warning" not in ln
    ]
    return None, None, " ".join(lines[:6]) if lines else None


def _error_line(path: Path) -> str | None:
    """The last `gpulane: error:` line (or, failing that, the last useful line) of a log."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    errors = [ln.strip() for ln in text.splitlines() if ln.startswith("gpulane: error:")]
    if errors:
        return errors[-1]
    last = tail(path, 3)
    return last.splitlines()[-1].strip() if last else None


def describe_failure(run_dir: Path, nprocs: int, code: int) -> tuple[str, list[int], str | None]:
    """Words for an mpirun that ended with status ``code``: which rank, where, why."""
    log_dir = run_dir / LOG_DIR
    try:
        mlog = (log_dir / MPIRUN_LOG).read_text(errors="replace")
    except OSError:
        mlog = ""
    rank, rcode, summary = mpirun_failure(mlog)
    with_errors = [
        r
        for r in range(nprocs)
        if (_error_line(log_path(run_dir, r)) or "").startswith("gpulane: error:")
    ]
    if rank is None and with_errors:
        rank = with_errors[0]
    beats = read_heartbeats(run_dir)
    if rank is None:
        if not beats and summary:
            return (
                f"mpirun failed (status {code}) before any rank started: {summary} (log: {log_dir / MPIRUN_LOG})",
                [],
                None,
            )
        message = f"mpirun exited with status {code}"
        if summary:
            message += f": {summary}"
        return message + f" (log: {log_dir / MPIRUN_LOG})", [], None
    if rank not in with_errors and with_errors and (rcode is None or rcode >= 0):
        # The rank that said why beats the one mpirun saw exit first; a rank killed by a
        # signal stays the cause (the others may only say that their peer left).
        rank = with_errors[0]
        rcode = None
    where = beats[rank].label if rank in beats else None
    message = f"rank {rank}"
    if rank in beats:
        message += f" (pid {beats[rank].pid} on {beats[rank].host})"
    message += f" {describe_exit(rcode if rcode is not None else code)}"
    if where and where not in ("started", "done"):
        message += f" during {where}"
    last = _error_line(log_path(run_dir, rank))
    if last:
        message += f"; its last output: {last}"
    message += f" (log: {log_path(run_dir, rank)})"
    return message, [rank], where


def watch_mpirun(
    proc: subprocess.Popen[bytes],
    run_dir: Path,
    nprocs: int,
    timeout_s: float,
    startup_s: float = 120.0,
    on_poll: Callable[[], None] | None = None,
) -> LaunchResult:
    """Wait for mpirun under the watchdog; end it when the ranks stop making progress."""
    started = time.monotonic()
    while True:
        if on_poll is not None:
            on_poll()
        code = proc.poll()
        if code is not None:
            codes: dict[int, int | None] = dict.fromkeys(range(nprocs), code)
            if code == 0:
                return LaunchResult(codes)
            message, ranks, where = describe_failure(run_dir, nprocs, code)
            return LaunchResult(codes, message, ranks, where)
        stalled = find_stall(run_dir, nprocs, started, timeout_s, startup_s)
        if stalled is not None:
            stop(proc)
            message, ranks, label = stalled
            return LaunchResult(dict.fromkeys(range(nprocs), proc.poll()), message, ranks, label)
        time.sleep(POLL_S)


def stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM to mpirun (it ends its ranks), then SIGKILL to the session it leads."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


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


def run_mpirun(cfg: Any, run: Any, env: dict[str, str], job: str) -> int:
    """Start ``cfg.world_size`` ranks of ``job`` with mpirun; show the table; keep the rows."""
    from gpulane.collectives.command import error_row, finish
    from gpulane.collectives.plan import build_plan
    from gpulane.collectives.table import RowTail, SweepTable, print_run_header
    from gpulane.runs import Terminated, sigterm_as_exception

    lcfg = cfg.launcher
    nprocs = int(cfg.world_size)
    command = str(lcfg.get("command") or "mpirun")
    exe = find_mpirun(command)
    flavor = mpirun_flavor(exe)
    hostfile = lcfg.get("hostfile")
    hostfile = str(hostfile) if hostfile else None
    if hostfile and not Path(hostfile).is_file():
        raise InputError(f"launcher.hostfile: {hostfile} is not a file")
    extra = [str(a) for a in (lcfg.get("extra_args") or [])]
    if any(a in ("-np", "-n", "--np", "-c") for a in extra):
        raise InputError(
            "launcher.extra_args: leave the rank count out; gpulane passes -np from ranks="
        )
    child_env = rank_env(os.environ, env, run.run_id)
    local = all_local(hostfile, extra, child_env)
    if local and "MASTER_ADDR" not in child_env:
        # For backends that rendezvous over TCP (torch): every rank is on this host.
        child_env["MASTER_ADDR"] = "127.0.0.1"
        child_env["MASTER_PORT"] = str(free_port())
    if str(cfg.backend.name) == "mpi":
        check_mpi4py(probe_mpi4py(sys.executable, child_env), flavor, exe)

    log_dir = run.path / LOG_DIR
    log_dir.mkdir(parents=True, exist_ok=True)
    worker = worker_command(job, run.path)
    cmd = build_command(
        exe,
        flavor,
        nprocs,
        worker,
        log_dir,
        export_names(child_env, list(env)),
        hostfile=hostfile,
        extra_args=extra,
        root=is_root(),
        oversubscribe=local and nprocs > physical_cores(),
    )
    (log_dir / "mpirun.cmd").write_text(shlex.join(cmd) + "\n")

    plan = build_plan(cfg, str(cfg.device) == "cuda")
    print_run_header(
        f"{cfg.backend.name} on {nprocs} {cfg.device} ranks under {flavor}'s {Path(exe).name}",
        run.build,
        run.run_id,
        env,
    )
    tail_rows = RowTail(run.rows_path)
    table = SweepTable(
        plan.lines, len(plan.placements), progress=bool(cfg.progress) and sys.stdout.isatty()
    )
    notes = _NoteTail(log_path(run.path, 0))

    def poll() -> None:
        for note in notes.read():
            table.print(note)
        for row in tail_rows.read():
            table.add(row)

    with open(log_dir / MPIRUN_LOG, "wb") as mlog, table, sigterm_as_exception():
        proc = subprocess.Popen(
            cmd,
            env=child_env,
            stdout=mlog,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            result = watch_mpirun(proc, run.path, nprocs, float(cfg.timeout_s), on_poll=poll)
        except (KeyboardInterrupt, Terminated) as ex:
            stop(proc)
            poll()
            code = 143 if isinstance(ex, Terminated) else 130
            what = "interrupted" if code == 130 else "terminated (SIGTERM)"
            error_row(cfg, run, what, None)
            run.finish()
            table.print(f"# {what}: rows so far kept in {run.path}")
            return code
        finally:
            stop(proc)
        poll()
    status = 0
    if not result.ok:
        error_row(cfg, run, result.failure or "mpirun failed", result.stalled_at)
        status = RunFailed.exit_code
    return finish(cfg, run, status, result.failure)


class _NoteTail:
    """Lines rank 0 prints for the user (``# mpi: ...``), read from its log once each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen = 0

    def read(self) -> list[str]:
        try:
            with open(self.path, "rb") as fh:
                lines = fh.read(1 << 16).decode(errors="replace").splitlines()
        except OSError:
            return []
        notes = [ln for ln in lines if ln.startswith("# mpi:")]
        new = notes[self.seen :]
        self.seen = len(notes)
        return new
