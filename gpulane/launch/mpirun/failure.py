"""What an mpirun that ended early says: which rank failed first, how, and its last words,
from mpirun's own summary, the errors the ranks wrote (rundir.write_rank_error), their
heartbeats, and the last line of a rank's log where it wrote no error."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

from gpulane.launch.base import describe_exit, log_path, tail
from gpulane.rundir import LOG_DIR, read_heartbeats, read_rank_errors

MPIRUN_LOG = "mpirun.log"


def mpirun_failure(mpirun_log: str) -> tuple[int | None, int | None, str | None]:
    """(rank, exit status or -signal, mpirun's own summary) from what mpirun printed."""
    m = re.search(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(\d+)", mpirun_log)
    if m:
        return int(m.group(1)), int(m.group(2)), None
    m = re.search(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)", mpirun_log)
    if m:
        return int(m.group(1)), -int(m.group(2)), None
    m = re.search(r"MPI_ABORT was invoked on rank (\d+) .*?errorcode (\d+)", mpirun_log, re.S)
    if m:
        return int(m.group(1)), int(m.group(2)), None
    lines = [
        ln.strip()
        for ln in mpirun_log.splitlines()
        if ln.strip() and not set(ln.strip()) <= set("-=*") and "Warning" not in ln
    ]
    return None, None, " ".join(lines[:6]) if lines else None


def _last_words(run_dir: Path, rank: int, errors: dict[int, tuple[int, str]]) -> str | None:
    """A rank's own account of its error (the structured file it wrote, see
    rundir.write_rank_error), as the rank printed it; failing that, the last useful line
    of its log (a crash that is no gpulane error: a traceback's last line)."""
    if rank in errors:
        return f"gpulane: error: rank {rank}: {errors[rank][1]}"
    last = tail(log_path(run_dir, rank), 3)
    return last.splitlines()[-1].strip() if last else None


def describe_failure(run_dir: Path, nprocs: int, code: int) -> tuple[str, list[int], str | None]:
    """Words for an mpirun that ended with status ``code``: which rank, where, why."""
    log_dir = run_dir / LOG_DIR
    try:
        mlog = (log_dir / MPIRUN_LOG).read_text(errors="replace")
    except OSError:
        mlog = ""
    rank, rcode, summary = mpirun_failure(mlog)
    errors = read_rank_errors(run_dir)
    with_errors = sorted(r for r in errors if 0 <= r < nprocs)
    if rank is None and with_errors:
        rank = with_errors[0]
    beats = read_heartbeats(run_dir)
    if rank is None:
        if not beats and summary:
            return (
                f"mpirun failed (status {code}) before any rank started: {summary} (log: {log_dir / MPIRUN_LOG})",
                [],
                None,
            )
        message = f"mpirun exited with status {code}"
        if summary:
            message += f": {summary}"
        return message + f" (log: {log_dir / MPIRUN_LOG})", [], None
    if rank not in with_errors and with_errors and (rcode is None or rcode >= 0):
        # The rank that said why beats the one mpirun saw exit first; a rank killed by a
        # signal stays the cause (the others may only say that their peer left).
        rank = with_errors[0]
        rcode = None
    where = beats[rank].label if rank in beats else None
    message = f"rank {rank}"
    if rank in beats:
        message += f" (pid {beats[rank].pid} on {beats[rank].host})"
    message += f" {describe_exit(rcode if rcode is not None else code)}"
    if where and where not in ("started", "done"):
        message += f" during {where}"
    last = _last_words(run_dir, rank, errors)
    if last:
        message += f"; its last output: {last}"
    message += f" (log: {log_path(run_dir, rank)})"
    return message, [rank], where


def stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM to mpirun (it ends its ranks), then SIGKILL to the session it leads."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
