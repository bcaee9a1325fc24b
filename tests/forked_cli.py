"""``python -m gpulane ARGS`` for the tests, as a process forked from a server that has
already imported the libraries every command imports (Hydra, pandas, pyarrow, rich: about
1 CPU-s of each new interpreter's start, and some 300 CLI processes in a test run).

The command is still a process of its own: its argv, its whole environment, its working
directory, stdin from /dev/null, its stdout and stderr captured, its exit status, its
exit handlers, and its own children (ranks, Slurm jobs). What it does not do again is
import those libraries; where the environment would change how an interpreter starts
(``PYTHON*`` variables other than PYTHONUNBUFFERED), it runs as a new interpreter.

The server is multiprocessing's forkserver of this process (one per pytest worker), the
one :mod:`gpulane.launch.forked` starts local ranks from when a test launches them
in-process: it preloads what both need, and the commands' own local ranks are forked from
it too (:func:`_share_server`).
"""

from __future__ import annotations

import atexit
import locale
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from multiprocessing import forkserver, resource_tracker
from pathlib import Path

from gpulane.launch import forked

# What every CLI process imports (the rank job's preload is kept: the same server forks
# the ranks of in-process launches).
PRELOAD = [*forked.PRELOAD, "hydra", "omegaconf", "pandas", "pyarrow", "rich.console"]
# Read by the interpreter as it starts, not by gpulane: a command whose environment sets
# them differently from this process's runs as a new interpreter.
STARTUP_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONWARNINGS", "PYTHONHASHSEED",
                "PYTHONDONTWRITEBYTECODE", "PYTHONSAFEPATH", "PYTHONNOUSERSITE",
                "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONOPTIMIZE", "PYTHONDEVMODE",
                "PYTHONSTARTUP", "PYTHONPYCACHEPREFIX", "PYTHONINSPECT")  # fmt: skip


def forkable(env: dict[str, str]) -> bool:
    """Whether a command with ``env`` can be forked rather than started afresh."""
    if os.environ.get("GPULANE_TEST_EXEC_CLI") or not hasattr(os, "fork"):
        return False
    return all(env.get(k) == os.environ.get(k) for k in STARTUP_VARS) and not any(
        k.startswith("PYTHON") and k not in STARTUP_VARS and k != "PYTHONUNBUFFERED"
        for k in set(env) ^ set(os.environ)
    )


def run(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """``python -m gpulane *args`` run from ``cwd`` with ``env`` as its whole environment,
    its output captured: what ``subprocess.run(..., capture_output=True, text=True,
    timeout=timeout)`` returns (and raises on timeout)."""
    argv = [sys.executable, "-m", "gpulane", *args]
    context = multiprocessing.get_context("forkserver")
    # Preloading takes effect when the server starts, with the first fork of this worker.
    context.set_forkserver_preload(PRELOAD)
    server = forkserver._forkserver
    server.ensure_running()
    shared = (server._forkserver_address, server._forkserver_pid)  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="gpulane-cli-") as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        process = context.Process(
            target=_command, args=(args, str(cwd), env, str(out), str(err), shared),
            daemon=False,
        )  # fmt: skip
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(argv, timeout, _text(out), _text(err))
        return subprocess.CompletedProcess(argv, process.exitcode, _text(out), _text(err))


def _text(path: Path) -> str:
    """As ``text=True`` decodes a pipe: the locale's encoding, universal newlines."""
    data = path.read_bytes() if path.exists() else b""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _command(
    args: list[str], cwd: str, env: dict[str, str], out: str, err: str, shared: tuple[str, int]
) -> None:
    """In the forked process: become ``python -m gpulane *args``, and never return."""
    code = 1
    try:
        _share_server(*shared)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):  # fmt: skip
            opened = os.open(path, flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        encoding = locale.getpreferredencoding(False)
        sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding=encoding, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace", closefd=False)  # noqa: SIM115
        for stream in (sys.stdout, sys.stderr):
            # PYTHONUNBUFFERED, as the tests set it: every line reaches the file at once
            stream.reconfigure(line_buffering=True, write_through=True)
        code = _become_gpulane(args)
    except BaseException:
        traceback.print_exc()  # into the command's stderr once it is there
    finally:
        # What the interpreter's exit does that the command may rely on: its exit
        # handlers (gpulane ends its rank server there), its files' buffers. (Not a last
        # garbage collection: it would touch, and so copy, every page of the server's
        # heap.)
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _share_server(address: str, pid: int) -> None:
    """The ranks this command forks (launcher.start=fork) come from this worker's server,
    which imported torch and the rank job already, rather than from a server of the
    command's own that would import them again (~1.5 CPU-s and ~1.8 s a run). The command
    reaches it as its own children reach a server: its address, and the fd that keeps it
    alive, which this process got from it (multiprocessing.forkserver._serve_one). It is
    this worker's to end, not the command's (gpulane.launch.forked ends the servers it
    finds its ranks under)."""
    server = forkserver._forkserver
    server._forkserver_address = address  # type: ignore[attr-defined]
    # Running already: of what ensure_running does, only its first step is left, starting
    # the resource tracker (its own would wait on a server that is not this one's child).
    server.ensure_running = resource_tracker.ensure_running  # type: ignore[method-assign]
    forked._SERVERS.add(pid)


def _become_gpulane(args: list[str]) -> int:
    """Run ``python -m gpulane *args`` as ``__main__`` in this process: its exit status.
    (The tests' own copy of what ``benchmarks/forked_run.py`` does for any module: the
    tests do not import ``benchmarks``.)"""
    import warnings

    # runpy's warning that a preloaded module is run as __main__ again (it is meant to be)
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")
    sys.argv = ["gpulane", *args]
    sys.path.insert(0, os.getcwd())  # as `python -m` puts the working directory first
    try:
        runpy.run_module("gpulane", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0
