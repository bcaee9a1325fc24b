"""Slurm launcher: one job through submitit, one rank per GPU (or per task on CPUs).

The front (``gpulane sweep launcher=slurm ...``) saves the run's configuration in the run
directory (which must be on a filesystem the nodes share), submits one job, and waits
with a progress display: queued, running, points done (the rows rank 0 appends to
``rows.jsonl``). At the end it writes the Parquet copy and prints the table. When the job
fails, is cancelled, times out or loses a node, the run ends with an error row naming the
job, the task and the node, with the tail of that task's stderr; rows already written are
kept. ``launcher.wait=false`` submits and returns; :func:`collect` picks the run up later.

Each Slurm task runs :func:`slurm_task`: it becomes one rank (rank = SLURM_PROCID), meets
the others at a rendezvous on the first host (rank 0 picks a free port and leaves it in
the run directory), applies the run's environment (NCCL settings and the like), lets the
first task of every node capture that node's topology, and calls the same per-rank job
the local launcher runs (``gpulane.launch.worker.load_job(job)(cfg, ctx)``).

Under Hydra multirun (``-m``) ``conf/launcher/slurm.yaml`` selects hydra-submitit-launcher
(one job-array element per parameter combination); :class:`HydraCallback` registers the
resolvers its settings use.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gpulane.errors import GpulaneError, InputError, MissingComponent, RunFailed
from gpulane.launch.context import read_heartbeats, read_rank_errors, write_rank_error
from gpulane.launch.env import expand_hostlist
from gpulane.record import Row, utc_now

JOB_FILE = "slurm.json"
RENDEZVOUS_DIR = ".rendezvous"
TOPOLOGY_DIR = "topology"
# sacct states after which the job will not run again (PREEMPTED may be requeued).
FINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "REVOKED",
}
QUEUED_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED"}
# Errors a rank raises because a peer went away: a symptom, not the cause.
PEER_SYMPTOMS = (
    "closed by peer",
    "reset by peer",
    "broken pipe",
    "connection refused",
    "socket timeout",
    "timed out",
    "nccl communicator was aborted",
    "sigterm",
)
STDERR_TAIL_LINES = 30
PATTERNS = ("allocation", "per-node", "pairs", "halving")
# Written by every rank of a packed job into a combination's run directory when it has
# finished it (``.packed-done.<rank>``): the combination is done when all ranks' are there.
PACKED_DONE = ".packed-done"


# --------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------


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
    pattern: str = "allocation"  # allocation, per-node, pairs, halving (slurm_patterns)
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
    args = [f"--container-image={container.image}"]
    mounts = _str_list(container, "mounts")
    if mounts:
        args.append("--container-mounts=" + ",".join(mounts))
    if container.get("workdir"):
        args.append(f"--container-workdir={container.workdir}")
    return args + _str_list(container, "args")


def settings(cfg: Any) -> SlurmSettings:
    """Checked launcher settings from ``cfg.launcher`` (and the backend, for MPI)."""
    sec = cfg.launcher
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
    backend = str(cfg.backend.name) if cfg.get("backend") is not None else ""
    if backend == "mpi" and not any(a.startswith("--mpi") for a in srun):
        # Debian's (and most) Open MPI builds start under srun only through PMIx.
        srun.append("--mpi=pmix")
    pattern = str(sec.get("pattern") or "allocation").replace("_", "-")
    if pattern not in PATTERNS:
        raise InputError(
            f"launcher.pattern: expected one of {', '.join(PATTERNS)}, got {pattern!r}"
        )
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


# --------------------------------------------------------------------------------------
# Hydra multirun (hydra-submitit-launcher)
# --------------------------------------------------------------------------------------


def hydra_launcher_settings(cfg: Any) -> dict[str, Any]:
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


try:
    from hydra.experimental.callback import Callback as _HydraCallbackBase
except ImportError:  # pragma: no cover - hydra is a dependency
    _HydraCallbackBase = object  # type: ignore[assignment,misc]


BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


class HydraCallback(_HydraCallbackBase):  # type: ignore[misc,valid-type]
    """Named in conf/launcher/slurm.yaml: under ``-m`` it copies ``launcher.*`` into
    ``hydra.launcher`` before hydra-submitit-launcher submits the job array."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from omegaconf import flag_override

        if not str(config.hydra.launcher.get("_target_", "")).endswith("SlurmLauncher"):
            return
        try:
            s = settings(config)
            if s.pattern != "allocation":
                raise InputError(
                    f"launcher.pattern={s.pattern} submits its own jobs; run it without -m"
                )
        except InputError as err:
            sys.stderr.write(f"gpulane: error: {err}\n")
            raise SystemExit(err.exit_code) from None
        if s.pack:
            # Packing: Hydra's basic launcher calls the task in this process once per
            # combination; the task queues it, and on_multirun_end submits one job.
            from gpulane.launch.slurm_patterns import start_packing

            start_packing()
            with flag_override(config, ["struct", "readonly"], [False, False]):
                config.hydra.launcher = OmegaConf.create({"_target_": BASIC_LAUNCHER})
            return
        values = hydra_launcher_settings(config)
        with flag_override(config, ["struct", "readonly"], [False, False]):
            for key, value in values.items():
                config.hydra.launcher[key] = value

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from gpulane.launch.slurm_patterns import finish_packing

        status = finish_packing()
        if status:
            raise SystemExit(status)


# --------------------------------------------------------------------------------------
# Inside the job: one Slurm task = one rank
# --------------------------------------------------------------------------------------


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
    if importlib.util.find_spec("gpulane.topology.command") is None:
        return None
    d = run_dir / TOPOLOGY_DIR
    d.mkdir(parents=True, exist_ok=True)
    try:
        with open(d / f"{host}.json", "wb") as out, open(d / f"{host}.err", "wb") as err:
            return subprocess.Popen(
                [sys.executable, "-m", "gpulane.cli", "topo", "--json"],
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
    except OSError:
        return None


def _local_path(cfg: Any, nodes: int, local_world: int) -> str | None:
    if nodes > 1:
        return "NET"
    if cfg.get("path"):
        return str(cfg.path)
    if str(cfg.get("device")) != "cuda":
        return None
    try:
        from gpulane.topology.live import worst_path_for_gpus  # type: ignore[import-not-found]

        return worst_path_for_gpus(list(range(local_world)))  # type: ignore[no-any-return]
    except Exception:
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
    from gpulane.launch.context import make_context
    from gpulane.launch.env import discover
    from gpulane.launch.worker import CONFIG_FILE, load_job

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
    cfg = OmegaConf.load(path / CONFIG_FILE)
    ctx = make_context(info, path)
    ctx.host = node
    ctx.heartbeat(-1, "started")
    if rank == 0:
        with contextlib.suppress(Exception):
            cfg.path = _local_path(cfg, nodes, local_world)
            cfg.hosts = list(jenv.hostnames)
    try:
        load_job(job)(cfg, ctx)
    except GpulaneError as err:
        # Bad input found by the ranks: the front shows it as it is, with its status.
        write_rank_error(path, rank, err.exit_code, str(err))
        raise
    finally:
        if topo is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                topo.wait(timeout=60)
            if topo.poll() is None:
                topo.kill()
    return rank


# --------------------------------------------------------------------------------------
# The front: submit, wait, collect
# --------------------------------------------------------------------------------------


def base_state(state: str | None) -> str:
    """``CANCELLED by 0`` -> ``CANCELLED``; empty -> ``UNKNOWN``."""
    return (state or "UNKNOWN").split()[0].rstrip("+").upper() or "UNKNOWN"


def _squeue_state(job_id: str) -> str | None:
    """The state squeue shows, or None when the job has left the queue (or no squeue)."""
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.split()
    return lines[0].upper() if out.returncode == 0 and lines else None


expand_nodelist = expand_hostlist


@dataclass
class JobRecord:
    """What the run directory keeps about its Slurm job (``slurm.json``)."""

    job_id: str
    folder: str
    tasks: int
    nodes: int
    tasks_per_node: int
    submitted_at: str = field(default_factory=utc_now)
    state: str = "PENDING"
    error_written: bool = False

    def save(self, run_dir: Path) -> None:
        tmp = run_dir / (JOB_FILE + ".tmp")
        tmp.write_text(json.dumps(self.__dict__, indent=1) + "\n")
        os.replace(tmp, run_dir / JOB_FILE)

    @classmethod
    def load(cls, run_dir: Path) -> JobRecord:
        data = json.loads((run_dir / JOB_FILE).read_text())
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    keep = [
        ln
        for ln in text.splitlines()
        if ln.strip() and not ln.startswith("submitit INFO") and "Warning" not in ln
    ]
    return "\n".join(keep[-lines:])


@dataclass
class TaskFailure:
    task: int
    node: str | None
    reason: str  # one line
    stderr_tail: str


def _task_outcome(job: Any, task: int) -> tuple[str | None, str]:
    """(outcome, stderr text) of one task: outcome is success, error, or None (no result)."""
    sub = job.task(task)
    outcome: str | None = None
    try:
        if sub.paths.result_pickle.exists():
            from submitit.core.utils import pickle_load

            outcome = str(pickle_load(sub.paths.result_pickle)[0])
    except Exception:
        outcome = None
    try:
        err = sub.paths.stderr.read_text(errors="replace")
    except OSError:
        err = ""
    return outcome, err


def _last_error_line(tail: str) -> str:
    """The task's own last error line; srun's and slurmstepd's summaries only when the
    task said nothing itself."""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    own = [ln for ln in lines if not ln.startswith(("srun:", "slurmstepd"))]
    for candidates in (own, lines):
        for ln in reversed(candidates):
            if "Error" in ln or "error" in ln or "Exception" in ln:
                return ln
    return (own or lines)[-1] if lines else ""


def wait_until_gone(job_id: str, limit_s: float = 60.0) -> None:
    """Block until Slurm has no step of the job left (bounded): rows written after this
    are not the job's, so the error row and the Parquet copy are the last word."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            out = subprocess.run(
                ["squeue", "-h", "-j", str(job_id), "-o", "%i"],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.SubprocessError):
            return
        if out.returncode != 0 or not out.stdout.strip():
            return
        time.sleep(0.5)


def diagnose(job: Any, record: JobRecord, run_dir: Path, nodelist: str) -> TaskFailure:
    """The task that brought the job down (the cause, not the peers that lost it)."""
    beats = read_heartbeats(run_dir)
    hosts = expand_nodelist(nodelist)

    def node_of(task: int) -> str | None:
        if task in beats:
            return beats[task].host
        idx = task // max(record.tasks_per_node, 1)
        return hosts[idx] if idx < len(hosts) else None

    failed: list[tuple[int, str]] = []
    silent: list[tuple[int, str]] = []  # no result: killed, or never started
    for t in range(record.tasks):
        outcome, err = _task_outcome(job, t)
        if outcome == "error":
            failed.append((t, err))
        elif outcome is None:
            silent.append((t, err))
    if failed:

        def symptom(item: tuple[int, str]) -> bool:
            return any(s in _tail(item[1]).lower() for s in PEER_SYMPTOMS)

        causes = [it for it in failed if not symptom(it)]
        if causes or not silent:
            t, err = min(causes or failed, key=lambda it: it[0])
            tail = _tail(err)
            return TaskFailure(t, node_of(t), _last_error_line(tail) or "raised an exception", tail)
        # Every task that raised only lost a peer: the cause is a task that said nothing.
        killed = {
            int(m.group(1))
            for _, err in failed + silent
            for m in re.finditer(r"task (\d+): Killed", err)
        }
        victims = [it for it in silent if it[0] in killed]
        if victims:
            t, err = victims[0]
            return TaskFailure(t, node_of(t), "was killed (srun: Killed)", _tail(err))
    if silent:
        # Prefer a task that stopped short of the others (behind at a point, or not started).
        def progress(item: tuple[int, str]) -> tuple[int, int]:
            b = beats.get(item[0])
            return (b.index if b is not None else -2, item[0])

        t, err = min(silent, key=progress)
        tail = _tail(err)
        b = beats.get(t)
        where = (
            "before it started"
            if b is None
            else ("after its last point" if b.label == "done" else f"at {b.label}")
        )
        return TaskFailure(t, node_of(t), f"ended without a result {where}", tail)
    return TaskFailure(0, node_of(0), "the job ended but every task returned", "")


def _state_words(state: str) -> str:
    return {
        "FAILED": "failed",
        "CANCELLED": "was cancelled",
        "TIMEOUT": "ran out of time (launcher.time)",
        "NODE_FAIL": "lost a node (NODE_FAIL)",
        "OUT_OF_MEMORY": "ran out of memory",
        "BOOT_FAIL": "could not boot its nodes",
        "DEADLINE": "passed its deadline",
        "PREEMPTED": "was preempted",
        "REVOKED": "was revoked",
    }.get(state, f"ended in state {state}")


def failure_row(
    cfg: Any, run_id: str, build: str, record: JobRecord, state: str, f: TaskFailure
) -> Row:
    message = (
        f"slurm job {record.job_id} {_state_words(state)}: task {f.task}"
        f"{f' on {f.node}' if f.node else ''} {f.reason}"
    )
    if f.stderr_tail:
        short = "\n".join(f.stderr_tail.splitlines()[-8:])
        message += (
            f"\n--- stderr of task {f.task} (last lines; all in extra.stderr_tail) ---\n{short}"
        )
    return Row(
        run_id=run_id,
        kind="collective",
        backend=str(cfg.backend.name) if cfg.get("backend") is not None else "unknown",
        op="run",
        build=build,
        host=f.node,
        nodes=record.nodes,
        world_size=record.tasks,
        status="error",
        error=message,
        extra={
            "slurm_job": record.job_id,
            "slurm_state": state,
            "task": f.task,
            "node": f.node,
            "stderr_tail": f.stderr_tail,
            "launcher": "slurm",
        },
    )


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


def submit_job(
    cfg: Any,
    run_path: Path,
    s: SlurmSettings,
    fn: Callable[..., Any],
    *args: Any,
    nodelist: str | None = None,
) -> Any:
    params = executor_parameters(s, f"gpulane-{cfg.run_id}")
    if nodelist:
        params["slurm_nodelist"] = nodelist
    executor = make_executor(run_path / s.folder / "%j", params)
    try:
        return executor.submit(fn, *args)
    except Exception as err:  # sbatch's own words
        first = str(err).strip().splitlines()
        raise RunFailed(
            "sbatch refused the job: " + (" ".join(first[-3:]) if first else type(err).__name__)
        ) from err


def _attach(record: JobRecord) -> Any:
    import submitit

    return submitit.SlurmJob(
        folder=record.folder, job_id=record.job_id, tasks=tuple(range(record.tasks))
    )


class Waiter:
    """Polls the job's state, shows its progress, and notices a stalled run."""

    def __init__(
        self,
        job: Any,
        record: JobRecord,
        run_dir: Path,
        poll_s: float,
        timeout_s: float,
        startup_s: float,
        on_poll: Callable[[], None],
        say: Callable[[str], None],
    ) -> None:
        self.job = job
        self.record = record
        self.run_dir = run_dir  # where the heartbeats are (a packed job moves it along)
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.startup_s = startup_s
        self.on_poll = on_poll
        self.say = say
        self.state = "UNKNOWN"
        self.nodelist = ""
        self.running_since: float | None = None
        self.stall: str | None = None
        self._unknown_since = time.monotonic()
        self._shown = ""
        # "force": one sacct per poll; "cache" where the caller refreshes the states of
        # many jobs at once (submitit's watcher asks sacct about all of them in one call).
        self.state_mode = "force"

    def poll_state(self) -> str:
        raw = self.job.watcher.get_state(self.job.job_id, mode=self.state_mode)
        info = self.job.watcher.get_info(self.job.job_id, mode="cache")
        self.nodelist = info.get("NodeList", self.nodelist) or self.nodelist
        state = base_state(raw)
        if state == "UNKNOWN":
            # No accounting (or sacct not caught up yet): ask squeue; a job that has left
            # the queue for a while is judged by the results its tasks left.
            queued = _squeue_state(self.job.job_id)
            if queued is not None:
                state = base_state(queued)
                self._unknown_since = time.monotonic()
            elif time.monotonic() - self._unknown_since > max(30.0, 5 * self.poll_s):
                outcomes = [_task_outcome(self.job, t)[0] for t in range(self.record.tasks)]
                state = "COMPLETED" if all(o == "success" for o in outcomes) else "FAILED"
        return state

    def step(self) -> str | None:
        """One poll: the final state (or ``STALLED``), or None while the job goes on."""
        self.on_poll()
        state = self.poll_state()
        if state != self._shown and state != "UNKNOWN":
            where = f" on {self.nodelist}" if self.nodelist and state == "RUNNING" else ""
            word = "queued" if state in QUEUED_STATES else state.lower()
            self.say(f"# slurm job {self.record.job_id}: {word}{where}")
            self._shown = state
        if state in FINAL_STATES:
            self.state = state
            self.on_poll()
            return state
        if state == "RUNNING":
            if self.running_since is None:
                self.running_since = time.monotonic()
            from gpulane.launch.local import find_stall

            stalled = find_stall(
                self.run_dir,
                self.record.tasks,
                self.running_since,
                self.timeout_s,
                self.startup_s,
            )
            if stalled is not None:
                self.stall = stalled[0]
                self.job.cancel(check=False)
                self.state = "CANCELLED"
                self.on_poll()
                return "STALLED"
        return None

    def wait(self) -> str:
        while True:
            state = self.step()
            if state is not None:
                return state
            time.sleep(self.poll_s)


@dataclass
class Submitted:
    """One submitted run: its saved configuration, settings, submitit job and record."""

    cfg: Any
    run_path: Path
    settings: SlurmSettings
    job: Any
    record: JobRecord
    device: str


def prepare(cfg: DictConfig, run: Any, s: SlurmSettings) -> tuple[DictConfig, str]:
    """The run's configuration as the tasks will read it, and the device."""
    from gpulane.runs import save_config

    device = str(cfg.get("device") or "auto")
    if device == "auto":
        device = "cuda" if s.gpus_per_node else "cpu"
    if device == "cuda" and s.gpus_per_node and s.tasks_per_node > s.gpus_per_node:
        raise InputError(
            f"launcher.tasks_per_node={s.tasks_per_node} is more than gpus_per_node="
            f"{s.gpus_per_node}: one rank per GPU at most"
        )
    saved = save_config(
        cfg,
        run,
        world_size=s.world_size,
        nodes=s.nodes,
        device=device,
        path=None,
        hosts=None,
    )
    return saved, device


def submit_run(
    cfg: DictConfig,
    run: Any,
    env: dict[str, str],
    job: str,
    s: SlurmSettings,
    nodelist: str | None = None,
) -> Submitted:
    """Save the run's configuration and submit one job of ``s.nodes`` x
    ``s.tasks_per_node`` ranks of ``job`` (on ``nodelist`` when given)."""
    saved, device = prepare(cfg, run, s)
    run_path = Path(run.path).resolve()
    sjob = submit_job(
        saved,
        run_path,
        s,
        slurm_task,
        job,
        str(run_path),
        dict(env),
        s.startup_s,
        nodelist=nodelist,
    )
    record = JobRecord(
        job_id=str(sjob.job_id),
        folder=str(run_path / s.folder / "%j"),
        tasks=s.world_size,
        nodes=s.nodes,
        tasks_per_node=s.tasks_per_node,
    )
    record.save(run_path)
    return Submitted(saved, run_path, s, sjob, record, device)


def run_slurm(cfg: DictConfig, run: Any, env: dict[str, str], job: str) -> int:
    """``launcher=slurm``: submit one job of ``nodes`` x ``tasks_per_node`` ranks of ``job``;
    ``launcher.pattern`` (per-node, pairs, halving) and ``launcher.pack`` (under -m) go
    to :mod:`gpulane.launch.slurm_patterns`."""
    s = settings(cfg)
    if s.pattern != "allocation" or s.pack:
        from gpulane.launch import slurm_patterns

        if s.pattern != "allocation":
            return slurm_patterns.run_pattern(cfg, run, env, job, s)
        if slurm_patterns.packing():
            return slurm_patterns.queue_packed(cfg, run, env, job, s)
        # pack=true without -m: one combination, an ordinary job.
    sub = submit_run(cfg, run, env, job, s)
    saved, run_path, record = sub.cfg, sub.run_path, sub.record
    where = f", partition {s.partition}" if s.partition else ""
    print(
        f"# gpulane sweep: {saved.backend.name} on {s.nodes} node(s) x {s.tasks_per_node} "
        f"{sub.device} ranks{where}, build {run.build}, run {run.run_id}",
        flush=True,
    )
    if env:
        print("# env: " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    if not s.wait:
        print(f"submitted slurm job {record.job_id}")
        print(f"run directory: {run_path}")
        print(f"collect with: gpulane results {run_path}")
        return 0
    return _wait_and_collect(saved, run_path, sub.job, record, s, float(cfg.timeout_s))


def _plan_lines(cfg: Any) -> tuple[int, int]:
    try:
        from gpulane.collectives.plan import build_plan

        plan = build_plan(cfg, str(cfg.get("device")) == "cuda")
        return plan.lines, len(plan.placements)
    except Exception:
        return 0, 2


def print_table(cfg: Any, run_path: Path) -> None:
    """The nccl-tests-style table of the rows in ``run_path`` (after the fact)."""
    from gpulane.collectives.table import SweepTable

    lines, placements = _plan_lines(cfg)
    with SweepTable(lines, placements, progress=False) as table:
        rows = run_path / "rows.jsonl"
        if rows.exists():
            for ln in rows.read_text().splitlines():
                if ln.strip():
                    table.add(json.loads(ln))


def _wait_and_collect(
    cfg: Any, run_path: Path, sjob: Any, record: JobRecord, s: SlurmSettings, timeout_s: float
) -> int:
    from gpulane.collectives.table import RowTail, SweepTable
    from gpulane.runs import Terminated, sigterm_as_exception

    lines, placements = _plan_lines(cfg)
    tail = RowTail(run_path / "rows.jsonl")
    table = SweepTable(
        lines, placements, progress=bool(cfg.get("progress")) and sys.stdout.isatty()
    )

    def poll() -> None:
        for row in tail.read():
            table.add(row)

    waiter = Waiter(sjob, record, run_path, s.poll_s, timeout_s, s.startup_s, poll, table.print)
    with table, sigterm_as_exception():
        try:
            state = waiter.wait()
        except (KeyboardInterrupt, Terminated) as ex:
            sjob.cancel(check=False)
            code = 143 if isinstance(ex, Terminated) else 130
            poll()
            what = "interrupted" if code == 130 else "terminated (SIGTERM)"
            cancelled(cfg, run_path, record, what)
            table.print(f"# {what}: slurm job {record.job_id} cancelled; rows kept in {run_path}")
            return code
    return _conclude(cfg, run_path, sjob, record, state, waiter.nodelist, waiter.stall)


def cancelled(cfg: Any, run_path: Path, record: JobRecord, what: str) -> None:
    """The error row (and Parquet copy) of a run whose job the front cancelled."""
    wait_until_gone(record.job_id)
    write_error_row(
        cfg,
        run_path,
        record,
        "CANCELLED",
        TaskFailure(0, None, f"by the front ({what}); rows so far are kept", ""),
    )
    finish_files(run_path)


def write_error_row(
    cfg: Any, run_path: Path, record: JobRecord, state: str, f: TaskFailure
) -> None:
    from gpulane.record import RowWriter

    row = failure_row(cfg, str(cfg.run_id), str(cfg.build), record, state, f)
    with RowWriter(run_path) as w:
        w.write(row)
    record.state = state
    record.error_written = True
    record.save(run_path)


def finish_files(run_path: Path) -> None:
    from gpulane.record import write_parquet

    write_parquet(run_path)


def finalize(
    cfg: Any,
    run_path: Path,
    sjob: Any,
    record: JobRecord,
    state: str,
    nodelist: str,
    stall: str | None,
) -> str | None:
    """After the job: the error row when it failed (naming the task and node), the
    record's final state and the Parquet copy; returns the failure in words, or None."""
    failure: str | None = None
    if stall is not None or state != "COMPLETED":
        wait_until_gone(record.job_id)
    if stall is not None:
        beats = read_heartbeats(run_path)
        behind = sorted(beats) if beats else [0]
        f = TaskFailure(behind[0], beats[behind[0]].host if behind[0] in beats else None, "", "")
        f.reason = f"stalled: {stall}"
        write_error_row(cfg, run_path, record, "CANCELLED", f)
        failure = f"slurm job {record.job_id}: {stall}"
        state = "CANCELLED"
    elif state != "COMPLETED":
        f = diagnose(sjob, record, run_path, nodelist)
        if not record.error_written:
            write_error_row(cfg, run_path, record, state, f)
        failure = (
            f"slurm job {record.job_id} {_state_words(state)}: task {f.task}"
            f"{f' on {f.node}' if f.node else ''} {f.reason}"
        )
    record.state = state
    record.save(run_path)
    finish_files(run_path)
    return failure


def read_run_rows(run_path: Path) -> list[dict[str, Any]]:
    path = run_path / "rows.jsonl"
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _conclude(
    cfg: Any,
    run_path: Path,
    sjob: Any,
    record: JobRecord,
    state: str,
    nodelist: str,
    stall: str | None,
) -> int:
    failure = finalize(cfg, run_path, sjob, record, state, nodelist, stall)
    return report_run(run_path, record, failure)


def report_run(run_path: Path, record: JobRecord, failure: str | None) -> int:
    """The closing lines of a run (average bus bandwidth, where the rows and logs are),
    its failure on stderr; exit status 1 when it failed or has wrong results."""
    status = 0
    measured = [r for r in read_run_rows(run_path) if r.get("time_us") is not None]
    wrong = [r for r in measured if (r.get("wrong") or 0) > 0]
    if measured:
        avg = statistics.fmean(r["busbw_gbps"] for r in measured)
        print(f"# Avg bus bandwidth    : {avg:.4f} GB/s over {len(measured)} rows")
    print(
        f"# rows: {run_path / 'rows.jsonl'} (and rows.parquet); "
        f"slurm logs: {record.folder.replace('%j', record.job_id)}"
    )
    user_errors = read_rank_errors(run_path)
    if user_errors:
        # Every rank raised the same bad-input error; show it once, with its own status.
        code, message = user_errors[min(user_errors)]
        sys.stderr.write(f"gpulane: error: {message}\n")
        return code
    if failure:
        sys.stderr.write(f"gpulane: error: {failure}\n")
        status = RunFailed.exit_code
    if wrong:
        sys.stderr.write(f"gpulane: error: wrong results in {len(wrong)} rows\n")
        status = RunFailed.exit_code
    return status


def collect(run_dir: str | os.PathLike[str], wait: bool = True, poll_s: float = 2.0) -> int:
    """Pick up a run submitted with ``launcher.wait=false``: wait for (or check) its job,
    write the error row if it failed, the Parquet copy, and print the table."""
    from gpulane.launch.worker import CONFIG_FILE

    path = Path(run_dir).resolve()
    if not (path / JOB_FILE).exists():
        raise InputError(f"{path}: no {JOB_FILE}; not a run submitted to Slurm by gpulane")
    record = JobRecord.load(path)
    cfg: Any = OmegaConf.load(path / CONFIG_FILE)
    sjob = _attach(record)
    if record.state in FINAL_STATES:
        state, nodelist = record.state, ""
    else:
        waiter = Waiter(
            sjob,
            record,
            path,
            poll_s,
            float(cfg.get("timeout_s") or 300),
            float(cfg.launcher.get("startup_s") or 600),
            lambda: None,
            print,
        )
        if not wait:
            state = waiter.poll_state()
            if state not in FINAL_STATES:
                print(f"slurm job {record.job_id}: {state.lower()}; rows so far in {path}")
                return 0
        else:
            state = waiter.wait()
        nodelist = waiter.nodelist
    print_table(cfg, path)
    if state == "STALLED":
        return _conclude(cfg, path, sjob, record, "CANCELLED", nodelist, "no progress")
    return _conclude(cfg, path, sjob, record, state, nodelist, None)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpulane.launch.slurm collect RUN_DIR [--no-wait]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="gpulane-slurm")
    parser.add_argument("action", choices=["collect"])
    parser.add_argument("run_dir")
    parser.add_argument("--no-wait", action="store_true")
    args = parser.parse_args(argv)
    return collect(args.run_dir, wait=not args.no_wait)


if __name__ == "__main__":
    sys.exit(main())
