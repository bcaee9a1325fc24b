"""What a rank knows about itself and its run, and how it shows it is alive."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gpulane.launch.env import RankInfo, hostname

HEARTBEAT_DIR = ".heartbeat"
LOG_DIR = "logs"


@dataclass
class RankContext:
    info: RankInfo
    run_dir: Path
    host: str

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    @property
    def local_rank(self) -> int:
        return self.info.local_rank

    @property
    def is_leader(self) -> bool:
        return self.info.rank == 0

    def heartbeat(self, index: int, label: str, allow_s: float = 0.0) -> None:
        """Record that this rank reached point ``index`` (read by the launcher's watchdog).

        ``allow_s`` is how much longer than the run's timeout this point may take (a
        large message over a slow path), so that the watchdog's limit scales with it.
        """
        write_heartbeat(self.run_dir, self.rank, index, label, self.host, allow_s)


ALIVE_EVERY_S = 1.0


def make_context(info: RankInfo, run_dir: str | os.PathLike[str]) -> RankContext:
    ctx = RankContext(info=info, run_dir=Path(run_dir), host=hostname())
    start_alive_beat(ctx.run_dir, info.rank)
    return ctx


def start_alive_beat(run_dir: Path, rank: int) -> None:
    """Touch ``alive-RANK`` every second from a daemon thread.

    Point heartbeats cannot tell a frozen rank from its peers waiting for it in the same
    collective; this beat can: it stops only when the whole process stops (or is stopped).
    """
    path = run_dir / HEARTBEAT_DIR / f"alive-{rank}"
    path.parent.mkdir(parents=True, exist_ok=True)

    def beat() -> None:
        while True:
            with contextlib.suppress(OSError):
                path.touch()
            time.sleep(ALIVE_EVERY_S)

    threading.Thread(target=beat, name="gpulane-alive", daemon=True).start()


def silent_ranks(run_dir: Path, ranks: list[int], older_than_s: float) -> list[int]:
    """Ranks whose alive beat is older than ``older_than_s`` (or that have none)."""
    now = time.time()
    out = []
    for r in ranks:
        try:
            age = now - (run_dir / HEARTBEAT_DIR / f"alive-{r}").stat().st_mtime
        except OSError:
            continue  # launched by something that does not beat: no verdict
        if age > older_than_s:
            out.append(r)
    return out


@dataclass(frozen=True)
class Heartbeat:
    rank: int
    index: int
    label: str
    host: str
    pid: int
    at: float
    allow_s: float = 0.0


def write_heartbeat(
    run_dir: Path, rank: int, index: int, label: str, host: str, allow_s: float = 0.0
) -> None:
    d = run_dir / HEARTBEAT_DIR
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".rank-{rank}.tmp"
    tmp.write_text(f"{index}\t{time.time():.3f}\t{os.getpid()}\t{host}\t{allow_s:.1f}\t{label}\n")
    os.replace(tmp, d / f"rank-{rank}")


def write_rank_error(run_dir: Path, rank: int, exit_code: int, message: str) -> None:
    """A rank's own account of a user-facing error, so the launcher can show it as is."""
    d = run_dir / HEARTBEAT_DIR
    d.mkdir(parents=True, exist_ok=True)
    (d / f"error-{rank}").write_text(json.dumps({"exit_code": exit_code, "message": message}))


def read_rank_errors(run_dir: Path) -> dict[int, tuple[int, str]]:
    out: dict[int, tuple[int, str]] = {}
    for f in (run_dir / HEARTBEAT_DIR).glob("error-*"):
        try:
            data = json.loads(f.read_text())
            out[int(f.name.split("-", 1)[1])] = (int(data["exit_code"]), str(data["message"]))
        except (OSError, ValueError, KeyError):
            continue
    return out


def read_heartbeats(run_dir: Path) -> dict[int, Heartbeat]:
    out: dict[int, Heartbeat] = {}
    d = run_dir / HEARTBEAT_DIR
    if not d.is_dir():
        return out
    for f in d.glob("rank-*"):
        try:
            index, at, pid, host, allow, label = f.read_text().rstrip("\n").split("\t", 5)
            rank = int(f.name.split("-", 1)[1])
            out[rank] = Heartbeat(rank, int(index), label, host, int(pid), float(at), float(allow))
        except (OSError, ValueError):
            continue
    return out
