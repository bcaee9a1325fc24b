"""Local launcher: N rank processes on this machine, a free-port rendezvous, and a watchdog.

The watchdog ends the whole run when a rank dies (naming it, its exit status or signal,
and the last line it wrote) or when no rank makes progress for ``timeout_s`` (naming the
ranks that did not arrive at the point the others are waiting in).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpulane.launch.context import (
    ALIVE_EVERY_S,
    HEARTBEAT_DIR,
    LOG_DIR,
    read_heartbeats,
    read_rank_errors,
    silent_ranks,
)
from gpulane.launch.env import free_port
from gpulane.launch.worker import command as worker_command

POLL_S = 0.1


@dataclass
class LaunchResult:
    returncodes: dict[int, int | None]
    failure: str | None = None  # what went wrong, in words; None when every rank exited 0
    failed_ranks: list[int] = field(default_factory=list)
    stalled_at: str | None = None  # label of the point where the run stopped, if known
    # A user-facing error a rank raised (bad input found by the ranks): (exit status, message)
    user_error: tuple[int, str] | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def log_path(run_dir: Path, rank: int) -> Path:
    return run_dir / LOG_DIR / f"rank-{rank}.log"


def tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    # Warnings from libraries are noise next to the error a user needs.
    useful = [ln for ln in text if ln.strip() and "Warning" not in ln]
    return "\n".join(useful[-lines:])


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def launch_local(
    job: str,
    run_dir: Path,
    nprocs: int,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
    on_poll: Callable[[], None] | None = None,
    startup_s: float = 120.0,
) -> LaunchResult:
    """Start ``nprocs`` ranks of ``job`` and wait for them under the watchdog."""
    (run_dir / LOG_DIR).mkdir(parents=True, exist_ok=True)
    # A resumed run starts with fresh heartbeats: old ones would look like a stall.
    shutil.rmtree(run_dir / HEARTBEAT_DIR, ignore_errors=True)
    port = free_port()
    procs: dict[int, subprocess.Popen[bytes]] = {}
    logs = []
    base_env = {**os.environ, **(env or {})}
    for rank in range(nprocs):
        rank_env = {
            **base_env,
            "RANK": str(rank),
            "WORLD_SIZE": str(nprocs),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(nprocs),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "GPULANE_LAUNCHER": "gpulane",
            "PYTHONUNBUFFERED": "1",
        }
        fh = open(log_path(run_dir, rank), "wb")  # noqa: SIM115 - closed below
        logs.append(fh)
        procs[rank] = subprocess.Popen(
            worker_command(job, run_dir),
            env=rank_env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        return _watch(procs, run_dir, timeout_s, startup_s, on_poll)
    finally:
        _kill_all(procs)
        for fh in logs:
            fh.close()


def _watch(
    procs: dict[int, subprocess.Popen[bytes]],
    run_dir: Path,
    timeout_s: float,
    startup_s: float,
    on_poll: Callable[[], None] | None,
) -> LaunchResult:
    started = time.monotonic()
    first_failure: tuple[int, int] | None = None
    failure_seen_at = 0.0
    while True:
        if on_poll is not None:
            on_poll()
        codes = {r: p.poll() for r, p in procs.items()}
        if all(c == 0 for c in codes.values()):
            return LaunchResult(codes)
        failed = {r: c for r, c in codes.items() if c not in (None, 0)}
        if failed and first_failure is None:
            failure_seen_at = time.monotonic()
        if failed:
            # The cause, not the ranks that fail because it is gone: a rank killed by a
            # signal before one that raised, one that raised on its own before one whose
            # last words are a lost peer (they often exit within the same poll).
            r = min(
                failed,
                key=lambda k: (failed[k] >= 0, _peer_symptom(run_dir, k), k),  # type: ignore[operator]
            )
            first_failure = (r, failed[r])  # type: ignore[assignment]
        if first_failure is not None:
            alive = [r for r, c in codes.items() if c is None]
            # Give the others a moment to exit by themselves, then end them.
            if not alive or time.monotonic() - failure_seen_at > 3.0:
                _kill_all(procs)
                return _failure_result(procs, run_dir, first_failure)
        else:
            stalled = find_stall(run_dir, len(procs), started, timeout_s, startup_s)
            if stalled is not None:
                _kill_all(procs)
                message, ranks, label = stalled
                codes = {r: p.poll() for r, p in procs.items()}
                return LaunchResult(codes, message, ranks, label)
        time.sleep(POLL_S)


# What a rank says when a peer went away: a symptom, not the cause.
PEER_SYMPTOMS = ("closed by peer", "reset by peer", "broken pipe", "connection refused")


def _peer_symptom(run_dir: Path, rank: int) -> bool:
    last = tail(log_path(run_dir, rank), 3).lower()
    return any(s in last for s in PEER_SYMPTOMS)


def _failure_result(
    procs: dict[int, subprocess.Popen[bytes]], run_dir: Path, first: tuple[int, int]
) -> LaunchResult:
    rank, code = first
    beats = read_heartbeats(run_dir)
    where = beats[rank].label if rank in beats else None
    message = f"rank {rank} (pid {procs[rank].pid}) {describe_exit(code)}"
    if where and where != "started":
        message += f" during {where}"
    last = tail(log_path(run_dir, rank), 3)
    if last:
        message += f"; its last output: {last.splitlines()[-1].strip()}"
    message += f" (log: {log_path(run_dir, rank)})"
    codes = {r: p.poll() for r, p in procs.items()}
    errors = read_rank_errors(run_dir)
    user_error = errors.get(rank) or (next(iter(errors.values())) if errors else None)
    return LaunchResult(codes, message, [rank], where, user_error)


def find_stall(
    run_dir: Path, nprocs: int, started: float, timeout_s: float, startup_s: float
) -> tuple[str, list[int], str | None] | None:
    beats = read_heartbeats(run_dir)
    now = time.time()
    elapsed = time.monotonic() - started
    if len(beats) < nprocs:
        if elapsed > startup_s:
            missing = sorted(set(range(nprocs)) - set(beats))
            return (
                f"ranks {missing} did not start within {startup_s:.0f} s (see {run_dir / LOG_DIR})",
                missing,
                None,
            )
        return None
    latest = max(b.at for b in beats.values())
    allow = max(b.allow_s for b in beats.values())
    limit = (timeout_s + allow) if max(b.index for b in beats.values()) >= 0 else startup_s
    if now - latest <= limit:
        return None
    front = max(b.index for b in beats.values())
    label = next(b.label for b in beats.values() if b.index == front)
    behind = sorted(r for r, b in beats.items() if b.index < front)
    if behind:
        who = ", ".join(
            f"rank {r} on {beats[r].host} (pid {beats[r].pid}, last at {beats[r].label})"
            for r in behind
        )
        message = f"no progress for {limit:.0f} s at {label}: {who} did not arrive"
    else:
        frozen = silent_ranks(run_dir, sorted(beats), 5 * ALIVE_EVERY_S)
        if frozen:
            who = ", ".join(f"rank {r} on {beats[r].host} (pid {beats[r].pid})" for r in frozen)
            message = (
                f"no progress for {limit:.0f} s in {label}: {who} stopped responding "
                "(the other ranks wait for it)"
            )
            return message + "; ended all ranks", frozen, label
        message = f"no progress for {limit:.0f} s: all {nprocs} ranks are waiting in {label}"
    return message + "; ended all ranks", behind or sorted(beats), label


def _kill_all(procs: dict[int, subprocess.Popen[bytes]]) -> None:
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    for p in procs.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)
