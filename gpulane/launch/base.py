"""What every launcher is: start ranks, poll them, cancel them, say how it went.

A launcher starts ``nprocs`` processes of either a gpulane per-rank job (``job``,
``module:function``, run by :mod:`gpulane.launch.worker`, which writes heartbeats) or a
program (``program``, e.g. an nccl-tests binary, whose output goes to the rank logs). It
watches them, and when they end or stall it says what happened in a
:class:`LaunchResult`. It prints nothing (what it wants the user to see comes back from
:meth:`Launcher.notes`) and knows nothing of collectives, copies or models: the session
above it turns rows and results into tables and exit statuses.
"""

from __future__ import annotations

import signal
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.config.launcher import LauncherConfig
from gpulane.errors import InputError
from gpulane.rundir import LOG_DIR

POLL_S = 0.1


@dataclass
class LaunchSpec:
    """What to start, how many, where its files go, and how long silence may last."""

    run_dir: Path
    nprocs: int
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's environment
    timeout_s: float = 300.0  # no progress this long (beyond a point's own allowance): stall
    job: str | None = None  # "module:function" run on every rank by the worker
    program: list[str] | None = None  # or a program every rank runs (output -> rank logs)
    startup_s: float = 120.0  # how long ranks may take to show their first heartbeat
    run_id: str = ""
    hosts: list[str] | None = None  # run on these hosts (campaigns); None: the launcher's own

    def __post_init__(self) -> None:
        if (self.job is None) == (self.program is None):
            raise ValueError("a LaunchSpec runs either a job or a program")


@dataclass
class LaunchResult:
    returncodes: dict[int, int | None]
    failure: str | None = None  # what went wrong, in words; None when every rank exited 0
    failed_ranks: list[int] = field(default_factory=list)
    stalled_at: str | None = None  # label of the point where the run stopped, if known
    # A user-facing error a rank raised (bad input found by the ranks): (exit status, message)
    user_error: tuple[int, str] | None = None
    # Facts for the error row (the launcher's job id, the node, a stderr tail, ...)
    details: dict[str, Any] = field(default_factory=dict)
    host: str | None = None  # the host of the rank that failed, where known
    row_error: str | None = None  # a longer account for the error row (a stderr tail)
    reported: bool = False  # its error row is already written (a run collected again)
    timed_out: bool = False  # ended by the watchdog for silence (a program's or the ranks')

    @property
    def ok(self) -> bool:
        return self.failure is None


class Launcher(ABC):
    """Start / poll / cancel; one launch per instance."""

    name: str = "?"

    @classmethod
    def from_config(
        cls, cfg: Any, config: LauncherConfig, device: str, needs_mpi: bool
    ) -> Launcher:
        """The launcher ``launcher=NAME`` asks for: ``config`` is ``cfg.launcher`` typed;
        ``needs_mpi``: the ranks start MPI themselves."""
        return cls()

    @classmethod
    def for_nodes(
        cls, cfg: Any, config: LauncherConfig, device: str, nodes: list[str], prepared: Any
    ) -> Launcher:
        """The launcher of one campaign element, its ranks on ``nodes``."""
        raise InputError(
            f"launcher={config.name} cannot put ranks on named nodes; campaigns run on "
            "launcher=slurm or launcher=mpirun"
        )

    @property
    def on_this_host(self) -> bool:
        """Every rank runs on this host, sharing its cores."""
        return False

    def lone_rank_warning(self) -> str | None:
        """What to say when a collective run gets one rank from this launcher (how to ask
        for more), None when one rank is what the user asked for."""
        return None

    def check(self, spec: LaunchSpec) -> None:  # noqa: B027 - optional hook
        """Raise :class:`gpulane.errors.InputError`/``MissingComponent`` for what cannot
        work, before anything starts (the command, a host file, the MPI library)."""

    def describe(self, spec: LaunchSpec) -> str:
        """A few words for the run header: where and how the ranks run."""
        return f"{spec.nprocs} processes ({self.name})"

    def program_layout(self, world: int) -> tuple[int, int]:
        """(processes, GPUs per process) for a program that can drive several GPUs from one
        process (nccl-tests' -g): launchers that start one process per rank give (world, 1)."""
        return world, 1

    def command_line(self, spec: LaunchSpec) -> list[str]:
        """What runs (after :meth:`start`: the launcher's own command around it)."""
        return list(spec.program or [])

    @abstractmethod
    def start(self, spec: LaunchSpec) -> None: ...

    @abstractmethod
    def poll(self) -> LaunchResult | None:
        """None while the ranks run; the result once they ended (or were ended)."""

    @abstractmethod
    def cancel(self) -> None:
        """End every rank now (Ctrl-C, SIGTERM); safe to call more than once."""

    def state(self) -> str:
        """One word or a few for the progress line: starting, queued, running on ..."""
        return "running"

    def notes(self) -> list[str]:
        """Lines for the user since the last call (a job's state changes, ...)."""
        return []

    def interrupted(self, what: str) -> LaunchResult:
        """The result of a launch the user stopped (after :meth:`cancel`)."""
        return LaunchResult({}, what)

    def on_reported(self) -> None:  # noqa: B027 - optional hook
        """The session wrote this launch's error row (a launcher that is picked up again
        later, such as a detached Slurm job, remembers it)."""

    def logs_note(self) -> str | None:
        """Where the launcher's own logs are, when they are not in the run directory."""
        return None

    @property
    def detached(self) -> bool:
        """Started and left running (``launcher.wait=false``): the session returns at once."""
        return False

    @property
    def poll_s(self) -> float:
        return POLL_S


def log_path(run_dir: Path, rank: int) -> Path:
    """Where a rank's own output goes, under every launcher."""
    return run_dir / LOG_DIR / f"rank-{rank}.log"


def tail(path: Path, lines: int = 5) -> str:
    """The last useful lines of a log (warnings from libraries are noise beside an error)."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    useful = [ln for ln in text if ln.strip() and "Warning" not in ln]
    return "\n".join(useful[-lines:])


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


# What a rank says when a peer went away: a symptom, not the cause.
PEER_SYMPTOMS = ("closed by peer", "reset by peer", "broken pipe", "connection refused")


def run_to_end(launcher: Launcher, spec: LaunchSpec) -> LaunchResult:
    """Check, start and wait, showing nothing: for callers that only need the outcome."""
    launcher.check(spec)
    launcher.start(spec)
    try:
        while True:
            result = launcher.poll()
            if result is not None:
                return result
            time.sleep(launcher.poll_s)
    finally:
        launcher.cancel()
