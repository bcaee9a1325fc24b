"""What every Slurm task runs (pickled by submitit): become one rank of the run, meet the
others at a rendezvous in the run directory, and run the per-rank job (or a program)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpulane.errors import RunFailed
from gpulane.launch.worker import leave_at_exit, run_job
from gpulane.rank import discover, make_context
from gpulane.record import utc_now
from gpulane.rundir import LOG_DIR

RENDEZVOUS_DIR = ".rendezvous"
TOPOLOGY_DIR = "topology"
# Written by every rank of a packed job into a combination's run directory when it has
# finished it (``.packed-done.<rank>``): the combination is done when all ranks' are there.
PACKED_DONE = ".packed-done"


def _job_env() -> Any:
    import submitit

    return submitit.JobEnvironment()


def rendezvous(
    run_dir: Path, key: str, rank: int, timeout_s: float, host: str | None = None
) -> tuple[str, int]:
    """(address, port) of rank 0: rank 0 picks a free port on its host and leaves both in
    the run directory (shared by the nodes); the others wait for the file."""
    d = run_dir / RENDEZVOUS_DIR
    path = d / key
    if rank == 0:
        d.mkdir(parents=True, exist_ok=True)
        addr = host or socket.gethostname()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("", 0))
            port = int(s.getsockname()[1])
        tmp = d / f".{key}.tmp"
        tmp.write_text(f"{addr} {port}\n")
        os.replace(tmp, path)
        return addr, port
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(OSError, ValueError):
            addr, port_s = path.read_text().split()
            return addr, int(port_s)
        if time.monotonic() > deadline:
            raise RunFailed(
                f"rank {rank}: rank 0 did not publish its address in {path} within "
                f"{timeout_s:.0f} s (is the run directory on a filesystem all nodes share?)"
            )
        time.sleep(0.2)


def _capture_topology(run_dir: Path, host: str) -> subprocess.Popen[bytes] | None:
    """``gpulane topo --json`` of this node into topology/<host>.json (in the background)."""
    if importlib.util.find_spec("gpulane.commands.topo") is None:
        return None
    d = run_dir / TOPOLOGY_DIR
    d.mkdir(parents=True, exist_ok=True)
    try:
        with open(d / f"{host}.json", "wb") as out, open(d / f"{host}.err", "wb") as err:
            return subprocess.Popen(
                [sys.executable, "-m", "gpulane", "topo", "--json"],
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
    except OSError:
        return None


def packed_task(items: list[tuple[str, str, dict[str, str]]], startup_s: float = 600.0) -> int:
    """What every task of a packed job runs: the combinations ``(job, run_dir, env)`` one
    after the other in this allocation, each into its own run directory with its own
    rendezvous and environment (restored between them). Every rank marks each one it
    finished (:data:`PACKED_DONE`); the first that raises ends the job."""
    base = dict(os.environ)
    rank = 0
    for job, run_dir, env in items:
        try:
            rank = slurm_task(job, run_dir, env, startup_s)
        finally:
            os.environ.clear()
            os.environ.update(base)
        (Path(run_dir) / f"{PACKED_DONE}.{rank}").write_text(utc_now() + "\n")
    return rank


def packed_done(run_dir: Path, tasks: int) -> bool:
    """Every one of the ``tasks`` ranks of a packed job finished this combination."""
    return all((run_dir / f"{PACKED_DONE}.{r}").exists() for r in range(tasks))


def slurm_task(job: str, run_dir: str, env: dict[str, str], startup_s: float = 600.0) -> int:
    """What every Slurm task runs (pickled by submitit): become a rank and run ``job``."""
    # submitit makes tasks ignore SIGTERM (for its requeue); a benchmark task must end
    # when its job is cancelled, or it keeps appending rows after the error row.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.environ.update(env)
    jenv = _job_env()
    rank, world = int(jenv.global_rank), int(jenv.num_tasks)
    nodes = int(jenv.num_nodes)
    local_world = int(os.environ.get("SLURM_NTASKS_PER_NODE", "").split("(")[0] or 0) or max(
        1, world // max(nodes, 1)
    )
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    path = Path(run_dir)
    topo = _capture_topology(path, node) if int(jenv.local_rank) == 0 else None
    addr, port = rendezvous(path, f"{jenv.job_id}.{restart}", rank, startup_s, host=node)
    os.environ.update(
        {
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(jenv.local_rank),
            "LOCAL_WORLD_SIZE": str(local_world),
            "MASTER_ADDR": addr,
            "MASTER_PORT": str(port),
            "GPULANE_LAUNCHER": "slurm",
        }
    )
    info = discover()
    assert info is not None
    ctx = make_context(info, path)
    ctx.host = node
    try:
        run_job(job, ctx)
    except Exception:
        # submitit keeps the error as the task's result and re-raises it; the status
        # stays 1, without the interpreter's teardown of torch (~2 s of a failed job)
        leave_at_exit(1)
        raise
    finally:
        if topo is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                topo.wait(timeout=60)
            if topo.poll() is None:
                topo.kill()
    # Once submitit has written the result, the task leaves without the interpreter's
    # teardown of torch (~0.5 CPU-s a task).
    leave_at_exit()
    return rank


def program_task(argv: list[str], run_dir: str, env: dict[str, str]) -> int:
    """What every Slurm task runs for a program (an nccl-tests binary under srun's PMIx):
    the program itself, its output into the run directory's rank log."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.environ.update(env)
    jenv = _job_env()
    rank = int(jenv.global_rank)
    logs = Path(run_dir) / LOG_DIR
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"rank-{rank}.log", "wb") as out:
        code = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if code != 0:
        raise RunFailed(f"{Path(argv[0]).name} exited with status {code} on task {rank}")
    return rank
