"""Local ranks forked from a server that has imported torch once (``launcher.start=fork``).

A rank started as a new Python process spends about 2.5 CPU-s importing torch and the
rank job before it does anything (`benchmarks/ci/README.md`); every rank of every local run
pays it again. Here the ranks are children of multiprocessing's forkserver, which imports
them once per gpulane process (``PRELOAD``) and forks each rank from that state. The server
never touches CUDA, so a forked rank starts CUDA and NCCL as freshly as a new process does.

A rank gets the same environment, log file, working directory and exit status as a new
process would (:class:`ForkedRank` answers like ``subprocess.Popen``); what cannot follow it
is what the libraries read while being imported, from the server's environment: OpenMP's
thread count (``OMP_NUM_THREADS``) and torch's import-time switches. ``start=exec`` keeps
the new process per rank.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
from multiprocessing.process import BaseProcess
from pathlib import Path

# What the server imports once: the rank job's entry point and torch (every rank job uses it).
PRELOAD = ["gpulane.launch.worker", "torch", "torch.distributed"]
CLI = "gpulane.cli"


def main_preload() -> list[str]:
    """The parent's main module, where multiprocessing re-runs it in each rank (as
    ``__mp_main__``): imported by the server instead, so that a rank re-runs only its few
    lines, not its imports (gpulane's command line imports Hydra and pandas: ~0.8 CPU-s).
    A module run with ``-m`` is named; a script (the ``gpulane`` console script) is re-run
    from its path, and its imports are the command line's; ``python -m gpulane`` and ``-c``
    code are not re-run at all."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:
        return [] if name == "__main__" or name.endswith(".__main__") else [name]
    script = getattr(main, "__file__", None)
    return [CLI] if script and CLI in sys.modules else []


class ForkedRank:
    """A forked rank, answering as ``subprocess.Popen`` does: ``pid``, ``poll()`` (None
    while it runs, its exit status after, ``-N`` for signal N), ``kill()``, ``wait()``."""

    def __init__(self, process: BaseProcess) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        assert self.process.pid is not None, "a started rank has a pid"
        return self.process.pid

    def poll(self) -> int | None:
        return self.process.exitcode

    def kill(self) -> None:
        if self.process.exitcode is None:
            self.process.kill()

    def wait(self, timeout: float | None = None) -> int:
        self.process.join(timeout)
        code = self.process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(f"rank pid {self.pid}", timeout or 0.0)
        return code


def start_rank(
    job: str, run_dir: Path, env: dict[str, str], log: Path, core: int | None = None
) -> ForkedRank:
    """Fork one rank of ``job`` with ``env`` as its whole environment, its output (stdout
    and stderr) appended to ``log``, on ``core`` alone when given."""
    context = multiprocessing.get_context("forkserver")
    # Preloading only takes effect when the server starts (the first rank of this process).
    context.set_forkserver_preload(PRELOAD + main_preload())
    _server_deaf_to_ctrl_c()
    process = context.Process(
        target=_rank_main,
        args=(job, str(run_dir), env, str(log), core),
        name=f"gpulane-rank-{env.get('RANK', '?')}",
        daemon=False,
    )
    process.start()
    rank = ForkedRank(process)
    server = _parent_of(rank.pid)
    if server is not None and server not in _SERVERS:
        _SERVERS.add(server)
        if len(_SERVERS) == 1:
            atexit.register(_end_servers)
    return rank


# The fork servers this process started. A server ends by itself when this process does,
# through the interpreter's teardown of the torch it imported (~0.6 CPU-s, a sixth of a
# 2-rank CPU run); it holds nothing that needs it (its ranks have ended), so it is killed.
_SERVERS: set[int] = set()


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # already ended and reaped
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses
    return int(stat.rsplit(")", 1)[1].split()[1])


def _end_servers() -> None:
    for server in _SERVERS:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(server, signal.SIGKILL)


def _server_deaf_to_ctrl_c() -> None:
    """Start the fork server (and multiprocessing's resource tracker) with SIGINT ignored,
    which a new interpreter keeps: a terminal's Ctrl-C reaches the whole process group, and
    a server still importing torch would print a 20-line KeyboardInterrupt traceback of its
    own. The server ignores SIGINT after its imports anyway; this process handles the
    Ctrl-C (its session ends the ranks). Only the spawn is covered (milliseconds), not
    the wait for the server's imports, so this process still sees a Ctrl-C then."""
    from multiprocessing import forkserver

    # the instance's method, as Process.start calls it (a caller may have replaced it on
    # the instance to share a server of its own: tests/forked_cli.py)
    server = forkserver._forkserver
    try:
        # Blocked first: a Ctrl-C during the spawn stays pending (Linux never discards a
        # blocked signal as ignored) and reaches the handler restored below; ignored alone,
        # it was lost and the run went on to its end (tests/commands/test_multirun_stop.py).
        # The server inherits the mask; the ranks unblock it (_rank_main).
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: no Ctrl-C is delivered here anyway
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        server.ensure_running()
        return
    try:
        server.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _rank_main(job: str, run_dir: str, env: dict[str, str], log: str, core: int | None) -> None:
    """In the forked rank: become what ``python -m gpulane.launch.worker`` would have been."""
    os.environ.clear()
    os.environ.update(env)
    # The server's SIGINT was ignored (_server_deaf_to_ctrl_c): a rank takes Ctrl-C as a
    # new process does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked in the server
    if core is not None:
        # Before any thread starts: the threads the rank starts inherit it.
        os.sched_setaffinity(0, {core})
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    for target, source in ((0, null), (1, out), (2, out)):
        os.dup2(source, target)
    os.close(out)
    os.close(null)
    # As PYTHONUNBUFFERED does for a new process: every line reaches the log at once
    # (the watchdog quotes a failed rank's last line).
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True, write_through=True)

    from gpulane.launch.worker import run

    sys.exit(run(job, run_dir))
