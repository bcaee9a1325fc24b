"""Why a Slurm job failed: the task that brought it down (the cause, not the peers that
lost it), its node, and the tail of its stderr."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.rank import expand_hostlist
from gpulane.rundir import read_heartbeats

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


def stderr_tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
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


def task_outcome(job: Any, task: int) -> tuple[str | None, str]:
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


def last_error_line(tail: str) -> str:
    """The task's own last error line; srun's and slurmstepd's summaries only when the
    task said nothing itself."""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    own = [ln for ln in lines if not ln.startswith(("srun:", "slurmstepd"))]
    for candidates in (own, lines):
        for ln in reversed(candidates):
            if "Error" in ln or "error" in ln or "Exception" in ln:
                return ln
    return (own or lines)[-1] if lines else ""


def diagnose(
    job: Any, tasks: int, tasks_per_node: int, run_dir: Path, nodelist: str
) -> TaskFailure:
    """The task that brought the job down (the cause, not the peers that lost it)."""
    beats = read_heartbeats(run_dir)
    hosts = expand_hostlist(nodelist)

    def node_of(task: int) -> str | None:
        if task in beats:
            return beats[task].host
        idx = task // max(tasks_per_node, 1)
        return hosts[idx] if idx < len(hosts) else None

    failed: list[tuple[int, str]] = []
    silent: list[tuple[int, str]] = []  # no result: killed, or never started
    for t in range(tasks):
        outcome, err = task_outcome(job, t)
        if outcome == "error":
            failed.append((t, err))
        elif outcome is None:
            silent.append((t, err))
    if failed:

        def symptom(item: tuple[int, str]) -> bool:
            return any(s in stderr_tail(item[1]).lower() for s in PEER_SYMPTOMS)

        causes = [it for it in failed if not symptom(it)]
        if causes or not silent:
            t, err = min(causes or failed, key=lambda it: it[0])
            tail = stderr_tail(err)
            return TaskFailure(t, node_of(t), last_error_line(tail) or "raised an exception", tail)
        # Every task that raised only lost a peer: the cause is a task that said nothing.
        killed = {
            int(m.group(1))
            for _, err in failed + silent
            for m in re.finditer(r"task (\d+): Killed", err)
        }
        victims = [it for it in silent if it[0] in killed]
        if victims:
            t, err = victims[0]
            return TaskFailure(t, node_of(t), "was killed (srun: Killed)", stderr_tail(err))
    if silent:
        # Prefer a task that stopped short of the others (behind at a point, or not started).
        def progress(item: tuple[int, str]) -> tuple[int, int]:
            b = beats.get(item[0])
            return (b.index if b is not None else -2, item[0])

        t, err = min(silent, key=progress)
        tail = stderr_tail(err)
        b = beats.get(t)
        where = (
            "before it started"
            if b is None
            else ("after its last point" if b.label == "done" else f"at {b.label}")
        )
        return TaskFailure(t, node_of(t), f"ended without a result {where}", tail)
    return TaskFailure(0, node_of(0), "the job ended but every task returned", "")


# sinfo states of a node that is gone or leaving (a trailing * means it is not answering)
LOST_STATES = ("down", "fail", "drain", "drained", "draining", "no_respond", "unknown")


def node_states(nodes: list[str]) -> dict[str, tuple[str, str]]:
    """node -> (sinfo state, reason) for ``nodes`` (one sinfo call); empty when sinfo
    cannot say."""
    if not nodes:
        return {}
    cmd = ["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N|%T|%E"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    states: dict[str, tuple[str, str]] = {}
    for line in out.stdout.splitlines():
        name, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if name:
            states[name] = (state.strip().lower(), reason.strip())
    return states


def is_lost(state: str) -> bool:
    return state.endswith("*") or state.rstrip("*~#!%$@^-").startswith(LOST_STATES)


def lost_nodes(nodes: list[str]) -> dict[str, str]:
    """The nodes among ``nodes`` that Slurm has lost (down, failing, drained, or not
    answering), each with sinfo's state and reason in words: who to blame for a NODE_FAIL."""
    out = {}
    for node, (state, reason) in node_states(nodes).items():
        if is_lost(state):
            why = reason if reason and reason.lower() != "none" else "no reason given"
            out[node] = f"{state} ({why})"
    return out


def state_words(state: str) -> str:
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
