"""The watchdog every launcher uses: heartbeats say how far each rank got; a run with no
progress for longer than its allowance is stalled, and the ranks that did not arrive (or
whose alive beat stopped) are named. A program without heartbeats (nccl-tests) is judged by
its output instead: silence for ``timeout_s`` is a stall."""

from __future__ import annotations

import time
from pathlib import Path

from gpulane.rank import ALIVE_EVERY_S
from gpulane.rundir import Heartbeat, read_heartbeats, silent_ranks

Stall = tuple[str, list[int], str | None]  # (message, ranks to blame, point label)

# A rank's alive beat silent this many beats: its process is stopped (SIGSTOP, a frozen
# host), not slow; a busy rank still beats from its own thread.
FROZEN_BEATS = 5
# The longest a stopped rank waits to be named, however long timeout_s is.
FROZEN_MAX_S = 60.0


def frozen_after_s(timeout_s: float) -> float:
    """How long a rank's alive beat and the run's progress must both have stopped before
    the rank is named as stopped: half of timeout_s (so that it is named well within
    timeout_s, before the others' own timeouts fire), at least FROZEN_BEATS beats, at most
    FROZEN_MAX_S and never more than timeout_s."""
    return min(timeout_s, max(FROZEN_BEATS * ALIVE_EVERY_S, min(timeout_s / 2, FROZEN_MAX_S)))


def stopped_ranks(
    run_dir: Path, running: list[int], timeout_s: float, nprocs: int | None = None
) -> list[int]:
    """Ranks among ``running`` whose alive beat stopped, while another rank of the
    ``nprocs`` (default: of ``running``) beat more recently: when every beat stopped, the
    host stood still (a suspended machine), and no rank is to blame."""
    if not running:
        return []
    after = frozen_after_s(timeout_s)
    everyone = list(range(nprocs)) if nprocs is not None else running
    if len(silent_ranks(run_dir, everyone, after)) >= len(everyone):
        return []
    return silent_ranks(run_dir, running, after)


def find_stall(
    run_dir: Path, nprocs: int, started: float, timeout_s: float, startup_s: float
) -> Stall | None:
    """Whether the ranks of ``run_dir`` stopped making progress (``started``: monotonic time
    the ranks were started or began running)."""
    beats = read_heartbeats(run_dir)
    now = time.time()
    elapsed = time.monotonic() - started
    if len(beats) < nprocs:
        if elapsed > startup_s:
            missing = sorted(set(range(nprocs)) - set(beats))
            return (
                f"ranks {missing} did not start within {startup_s:.0f} s (see {run_dir / 'logs'})",
                missing,
                None,
            )
        return None
    latest = max(b.at for b in beats.values())
    allow = max(b.allow_s for b in beats.values())
    front = max(b.index for b in beats.values())
    label = next(b.label for b in beats.values() if b.index == front)
    limit = (timeout_s + allow) if front >= 0 else startup_s
    if front >= 0 and now - latest > frozen_after_s(timeout_s):
        # A stopped rank is named as soon as it is certain, not after the whole timeout.
        frozen = stopped_ranks(run_dir, sorted(beats), timeout_s)
        if frozen:
            return _stopped(beats, frozen, label, now - latest)
    if now - latest <= limit:
        return None
    behind = sorted(r for r, b in beats.items() if b.index < front)
    if behind:
        who = ", ".join(
            f"rank {r} on {beats[r].host} (pid {beats[r].pid}, last at {beats[r].label})"
            for r in behind
        )
        message = f"no progress for {limit:.0f} s at {label}: {who} did not arrive"
    else:
        frozen = silent_ranks(run_dir, sorted(beats), FROZEN_BEATS * ALIVE_EVERY_S)
        if frozen:
            return _stopped(beats, frozen, label, now - latest)
        message = f"no progress for {limit:.0f} s: all {nprocs} ranks are waiting in {label}"
    return message + "; ended all ranks", behind or sorted(beats), label


def _stopped(beats: dict[int, Heartbeat], frozen: list[int], label: str, idle_s: float) -> Stall:
    who = ", ".join(f"rank {r} on {beats[r].host} (pid {beats[r].pid})" for r in frozen)
    message = (
        f"no progress for {idle_s:.0f} s in {label}: {who} stopped responding (its alive beat "
        "stopped; the other ranks wait for it); ended all ranks"
    )
    return message, frozen, label


class OutputWatch:
    """Silence of a program's output file: the stall test for programs without heartbeats."""

    def __init__(self, path: Path, timeout_s: float) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self.size = -1
        self.last = time.monotonic()

    def stalled(self) -> Stall | None:
        try:
            size = self.path.stat().st_size
        except OSError:
            size = -1
        if size != self.size:
            self.size, self.last = size, time.monotonic()
            return None
        if self.timeout_s > 0 and time.monotonic() - self.last > self.timeout_s:
            return (
                f"no output for {self.timeout_s:.0f} s (timeout_s); ended it (log: {self.path})",
                [0],
                None,
            )
        return None
