"""What every launcher is: start ranks, poll them, cancel them, say how it went.

A launcher starts ``nprocs`` processes of either a gpulane per-rank job (``job``,
``module:function``, run by :mod:`gpulane.launch.worker`, which writes heartbeats) or a
program (``program``, e.g. an nccl-tests binary, whose output goes to the rank logs). It
watches them, and when they end or stall it says what happened in a
:class:`LaunchResult`. It prints nothing (what it wants the user to see comes back from
:meth:`Launcher.notes`) and knows nothing of collectives, copies or models: the session
above it turns rows and results into tables and exit statuses.

A launcher whose ranks run on other hosts (Slurm's, or a plugin's from outside gpulane)
also prepares its own :class:`LaunchPlan` from its configuration, and does what the
session, the campaigns and ``gpulane collect`` ask of it through the hooks below
(``prepare``, ``from_plan``, ``for_nodes``, ``campaign_nodes``, ``lost_nodes``, ``attach``,
``pending``, ``would_start``, ``pack``, ``array_settings``): nothing above it names a
scheduler.
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


@dataclass(frozen=True)
class LaunchPlan:
    """Where a remote launcher's ranks go, worked out once from its configuration
    (:meth:`Launcher.prepare`). The session reads the world from it and hands it back to
    the launcher (:meth:`Launcher.from_plan`, :meth:`Launcher.for_nodes`); what else the
    launcher needs it keeps in ``settings``, which nothing above the launcher reads."""

    launcher: str  # the option's name (launcher=NAME)
    nodes: int
    ranks_per_node: int
    gpus_per_node: int | None = None  # GPUs each node gives its ranks; None: none asked
    wait: bool = True  # false: started and left running (``gpulane collect`` finishes)
    poll_s: float = POLL_S
    settings: Any = None  # the launcher's own checked settings

    @property
    def world(self) -> int:
        return self.nodes * self.ranks_per_node


class Launcher(ABC):
    """Start / poll / cancel; one launch per instance."""

    name: str = "?"

    # -- a launcher whose ranks are on other hosts (its config's remote_world) ------------
    @classmethod
    def prepare(cls, cfg: Any, config: LauncherConfig, needs_mpi: bool | None) -> LaunchPlan:
        """The launch plan of ``cfg`` (``config``: ``cfg.launcher`` typed), checked: one
        InputError for what cannot work, before anything is made or submitted.
        ``needs_mpi``: the ranks start MPI (None: when the backend does)."""
        raise InputError(f"launcher={config.name} does not put ranks on other hosts")

    @classmethod
    def from_plan(cls, plan: LaunchPlan, device: str) -> Launcher:
        """The launcher of a run prepared as ``plan`` (its ranks may start MPI)."""
        raise InputError(f"launcher={plan.launcher} cannot start a prepared remote run")

    @classmethod
    def array_settings(cls, plan: LaunchPlan) -> dict[str, Any]:
        """Keys for Hydra's launcher of a multirun (``-m``) as a job array of this
        launcher (Slurm: hydra-submitit-launcher's); none for others."""
        return {}

    @classmethod
    def campaign_nodes(cls, plan: LaunchPlan) -> list[str]:
        """The nodes a campaign covers when ``campaign.nodelist`` names none."""
        raise InputError(f"campaign.nodelist: launcher={plan.launcher} needs the nodes named")

    @classmethod
    def lost_nodes(cls, plan: LaunchPlan, nodes: list[str]) -> dict[str, str]:
        """Those of ``nodes`` that are down or not answering: node -> why, in words."""
        return {}

    @classmethod
    def attach(cls, run_dir: Path, cfg: Any, timeout_s: float) -> Launcher:
        """The launcher of a run started earlier and left running (``gpulane collect``),
        ``cfg`` its saved configuration; one InputError when there is none to follow."""
        raise InputError(
            f"{run_dir}: a run of launcher={cls.name} is not left running; nothing to collect"
        )

    def pending(self) -> str | None:
        """After :meth:`attach`: the launch's state in a few words while it has not ended
        (``gpulane collect --no-wait``), None once it has."""
        return None

    @property
    def job_id(self) -> str | None:
        """The scheduler's name for this launch (a Slurm job id), None where there is none."""
        return None

    @property
    def job_state(self) -> str | None:
        """The scheduler's last word on this launch (COMPLETED, NODE_FAIL, ...), if any."""
        return None

    def would_start(self, spec: LaunchSpec) -> str:
        """What :meth:`start` would start or submit for ``spec``, in one line, starting
        nothing (a dry run)."""
        return " ".join(self.command_line(spec) or ["(a gpulane job)", str(spec.job)])

    def pack(self, specs: list[LaunchSpec], labels: list[str]) -> PackedLaunch:
        """Start ``specs`` (``labels``: their words) one after the other in ONE launch (a
        packed multirun)."""
        raise InputError(f"campaign.pack=true: launcher={self.name} cannot pack runs")

    # -- every launcher --------------------------------------------------------------------

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


class PackedLaunch(ABC):
    """Several runs one after the other in one launch (:meth:`Launcher.pack`)."""

    launchers: list[Launcher]  # one per run: what its session is concluded with
    started: str = ""  # one line for the user: what was started

    @abstractmethod
    def follow(self) -> None:
        """Wait until the launch has ended (Ctrl-C and SIGTERM go up to the caller)."""

    @abstractmethod
    def cancel(self) -> None:
        """End the launch now."""

    @abstractmethod
    def unfinished(self) -> list[int]:
        """The runs (by index) that did not finish."""

    @abstractmethod
    def results(self) -> list[LaunchResult]:
        """After :meth:`follow`: each run's result, in order."""


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
