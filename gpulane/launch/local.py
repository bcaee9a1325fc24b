"""Local launcher: N rank processes on this machine, a free-port rendezvous, and a watchdog.

The watchdog ends the whole run when a rank dies (naming it, its exit status or signal,
and the last line it wrote) or when no rank makes progress for ``timeout_s`` (naming the
ranks that did not arrive at the point the others are waiting in). A program (nccl-tests)
runs as one process that drives every GPU itself (``-g``), its output in the rank-0 log.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from typing import IO, Any

from gpulane.config.launcher import LauncherConfig, LocalLauncherConfig
from gpulane.errors import InputError
from gpulane.launch.base import (
    PEER_SYMPTOMS,
    Launcher,
    LaunchResult,
    LaunchSpec,
    describe_exit,
    log_path,
    tail,
)
from gpulane.launch.forked import ForkedRank, start_rank
from gpulane.launch.registry import register_launcher
from gpulane.launch.watchdog import OutputWatch, find_stall, stopped_ranks
from gpulane.launch.worker import command as worker_command
from gpulane.rank import free_port
from gpulane.rundir import HEARTBEAT_DIR, LOG_DIR, read_heartbeats, read_rank_errors

# After the first rank fails, the others get this long to exit by themselves (they often
# fail within the same poll, and their words help name the cause) before they are ended.
SETTLE_S = 3.0


LOCAL_HOSTS = ("localhost", "127.0.0.1")


@register_launcher("local", LocalLauncherConfig)
class LocalLauncher(Launcher):
    name = "local"

    @classmethod
    def from_config(
        cls, cfg: Any, config: LauncherConfig, device: str, needs_mpi: bool
    ) -> Launcher:
        return cls(
            bind=str(getattr(config, "bind", None) or "none"),
            start=str(getattr(config, "start", None) or "fork"),
        )

    @classmethod
    def for_nodes(
        cls, cfg: Any, config: LauncherConfig, device: str, nodes: list[str], prepared: Any
    ) -> Launcher:
        if all(n in LOCAL_HOSTS for n in nodes):
            return cls()
        return super().for_nodes(cfg, config, device, nodes, prepared)

    @property
    def on_this_host(self) -> bool:
        return True

    def __init__(self, bind: str = "none", start: str = "fork") -> None:
        self.bind = bind
        self.start_method = start
        self.cores: dict[int, int] = {}  # rank -> the core it is bound to (bind=core)
        self.procs: dict[int, subprocess.Popen[bytes] | ForkedRank] = {}
        self.logs: list[IO[bytes]] = []
        self.spec: LaunchSpec | None = None
        self.started = 0.0
        self.first_failure: tuple[int, int] | None = None
        self.failure_seen_at = 0.0
        self.output: OutputWatch | None = None
        self.result: LaunchResult | None = None

    def check(self, spec: LaunchSpec) -> None:
        if spec.hosts and any(h not in LOCAL_HOSTS for h in spec.hosts):
            raise InputError(
                f"launcher=local runs on this host only, not on {', '.join(spec.hosts)}; "
                "use launcher=slurm or launcher=mpirun for other hosts"
            )

    def describe(self, spec: LaunchSpec) -> str:
        bound = ", each bound to a core of its own" if self.bind == "core" else ""
        return f"{spec.nprocs} local processes{bound}"

    def program_layout(self, world: int) -> tuple[int, int]:
        return 1, world

    def start(self, spec: LaunchSpec) -> None:
        self.spec = spec
        (spec.run_dir / LOG_DIR).mkdir(parents=True, exist_ok=True)
        # A resumed run starts with fresh heartbeats: old ones would look like a stall.
        shutil.rmtree(spec.run_dir / HEARTBEAT_DIR, ignore_errors=True)
        port = free_port()
        base_env = {**os.environ, **spec.env}
        argv = spec.program or worker_command(str(spec.job), spec.run_dir)
        for rank in range(spec.nprocs):
            rank_env = {
                **base_env,
                "RANK": str(rank),
                "WORLD_SIZE": str(spec.nprocs),
                "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(spec.nprocs),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "GPULANE_LAUNCHER": "gpulane",
                "PYTHONUNBUFFERED": "1",
            }
            if spec.program is None and self.start_method == "fork":
                self.procs[rank] = self._fork(spec, rank, rank_env)
                continue
            fh = open(log_path(spec.run_dir, rank), "wb")  # noqa: SIM115 - closed in _end
            self.logs.append(fh)
            self.procs[rank] = subprocess.Popen(
                argv,
                env=rank_env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=spec.program is not None,
            )
        if self.bind == "core" and not self.cores:  # forked ranks bound themselves
            self._bind_to_cores()
        if spec.program is not None:
            self.output = OutputWatch(log_path(spec.run_dir, 0), spec.timeout_s)
        self.started = time.monotonic()

    def _fork(self, spec: LaunchSpec, rank: int, env: dict[str, str]) -> ForkedRank:
        """One rank forked from the server that imported torch (launch/forked.py), bound
        to its core by itself, before it starts a thread."""
        log = log_path(spec.run_dir, rank)
        log.write_bytes(b"")
        core = None
        if self.bind == "core":
            core = self.cores[rank] = self._core_of(rank)
        return start_rank(str(spec.job), spec.run_dir, env, log, core)

    @staticmethod
    def _core_of(rank: int) -> int:
        """The r-th CPU this process may use (round robin past the last)."""
        cpus = sorted(os.sched_getaffinity(0))
        return cpus[rank % len(cpus)]

    def _bind_to_cores(self) -> None:
        """Rank r on the r-th CPU this process may use (round robin past the last), set
        before the rank has started a thread: the threads it starts inherit it."""
        for rank, proc in self.procs.items():
            core = self._core_of(rank)
            try:
                os.sched_setaffinity(proc.pid, {core})
            except ProcessLookupError:  # already gone: its exit is reported as usual
                continue
            self.cores[rank] = core

    def poll(self) -> LaunchResult | None:
        if self.result is not None:
            return self.result
        spec = self.spec
        assert spec is not None, "poll before start"
        codes = {r: p.poll() for r, p in self.procs.items()}
        if all(c == 0 for c in codes.values()):
            return self._end(LaunchResult(codes))
        failed = {r: c for r, c in codes.items() if c not in (None, 0)}
        if failed:
            if self.first_failure is None:
                self.failure_seen_at = time.monotonic()
            # The cause, not the ranks that fail because it is gone: a rank killed by a
            # signal before one that raised, one that raised on its own before one whose
            # last words are a lost peer.
            r = min(failed, key=lambda k: (failed[k] >= 0, self._peer_symptom(k), k))
            self.first_failure = (r, failed[r])
        if self.first_failure is not None:
            alive = [r for r, c in codes.items() if c is None]
            # A rank that is stopped (not dead) makes its peers fail on their own timeout:
            # it is the cause, and waiting for it to exit is waiting for nothing.
            stopped = stopped_ranks(spec.run_dir, alive, spec.timeout_s, spec.nprocs)
            if stopped:
                return self._end(self._stopped_result(stopped, self.first_failure))
            if not alive or time.monotonic() - self.failure_seen_at > SETTLE_S:
                self._kill_all()
                return self._end(self._failure_result(self.first_failure))
            return None
        if self.output is not None:
            stalled = self.output.stalled()
        else:
            stalled = find_stall(
                spec.run_dir, spec.nprocs, self.started, spec.timeout_s, spec.startup_s
            )
        if stalled is not None:
            self._kill_all()
            message, ranks, label = stalled
            codes = {r: p.poll() for r, p in self.procs.items()}
            return self._end(LaunchResult(codes, message, ranks, label, timed_out=True))
        return None

    def cancel(self) -> None:
        self._kill_all()
        self._close_logs()

    def _end(self, result: LaunchResult) -> LaunchResult:
        self._kill_all()
        self._close_logs()
        self.result = result
        return result

    def _close_logs(self) -> None:
        for fh in self.logs:
            fh.close()
        self.logs = []

    def _peer_symptom(self, rank: int) -> bool:
        assert self.spec is not None
        last = tail(log_path(self.spec.run_dir, rank), 3).lower()
        return any(s in last for s in PEER_SYMPTOMS)

    def _failure_result(self, first: tuple[int, int]) -> LaunchResult:
        assert self.spec is not None
        run_dir = self.spec.run_dir
        rank, code = first
        beats = read_heartbeats(run_dir)
        where = beats[rank].label if rank in beats else None
        message = f"rank {rank} (pid {self.procs[rank].pid}) {describe_exit(code)}"
        if where and where != "started":
            message += f" during {where}"
        last = tail(log_path(run_dir, rank), 3)
        if last:
            message += f"; its last output: {last.splitlines()[-1].strip()}"
        message += f" (log: {log_path(run_dir, rank)})"
        codes = {r: p.poll() for r, p in self.procs.items()}
        errors = read_rank_errors(run_dir)
        user_error = errors.get(rank) or (next(iter(errors.values())) if errors else None)
        return LaunchResult(codes, message, [rank], where, user_error)

    def _stopped_result(self, stopped: list[int], first: tuple[int, int]) -> LaunchResult:
        """The stopped ranks named as the cause of a peer's failure."""
        assert self.spec is not None
        beats = read_heartbeats(self.spec.run_dir)
        who = ", ".join(
            f"rank {r} on {beats[r].host if r in beats else '?'} (pid {self.procs[r].pid})"
            for r in stopped
        )
        waiting = self._failure_result(first)
        where = beats[first[0]].label if first[0] in beats else None
        message = (
            f"{who} stopped responding{f' in {where}' if where else ''} (its alive beat "
            f"stopped); {waiting.failure}"
        )
        self._kill_all()
        codes = {r: p.poll() for r, p in self.procs.items()}
        return LaunchResult(codes, message, stopped, where)

    def _kill_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                if self.spec is not None and self.spec.program is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(p.pid, signal.SIGKILL)
                p.kill()
        for p in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
