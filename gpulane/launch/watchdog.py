"""The watchdog every launcher uses: heartbeats say how far each rank got; a run with no
progress for longer than its allowance is stalled, and the ranks that did not arrive (or
whose alive beat stopped) are named. A program without heartbeats (nccl-tests) is judged by
its output instead: silence for ``timeout_s`` is a stall."""

from __future__ import annotations

import time
from pathlib import Path

from gpulane.rank import ALIVE_EVERY_S
from gpulane.rundir import read_heartbeats, silent_ranks

Stall = tuple[str, list[int], str | None]  # (message, ranks to blame, point label)


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
