"""Watching a submitted Slurm job: its state from sacct (squeue without accounting), the
job record kept in the run directory, and the stall test on the ranks' heartbeats."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.launch.slurm.diagnose import task_outcome
from gpulane.launch.watchdog import find_stall
from gpulane.record import utc_now

JOB_FILE = "slurm.json"
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
def base_state(state: str | None) -> str:
    """``CANCELLED by 0`` -> ``CANCELLED``; empty -> ``UNKNOWN``."""
    return (state or "UNKNOWN").split()[0].rstrip("+").upper() or "UNKNOWN"


def squeue_state(job_id: str) -> str | None:
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
            queued = squeue_state(self.job.job_id)
            if queued is not None:
                state = base_state(queued)
                self._unknown_since = time.monotonic()
            else:
                # every task's result there: judged now (without accounting, as on a
                # single-node Slurm with no slurmdbd, each job used to wait the 30 s)
                outcomes = [task_outcome(self.job, t)[0] for t in range(self.record.tasks)]
                waited = time.monotonic() - self._unknown_since > max(30.0, 5 * self.poll_s)
                if waited or all(o is not None for o in outcomes):
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
