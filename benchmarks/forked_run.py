"""A regenerating command (``python SCRIPT ...`` or ``python -m MODULE ...``) run in a fork
of this process instead of a new interpreter: the fork starts with what this process has
imported (:data:`PRELOAD`: pandas, gpulane's command line), which each new interpreter
imported again (~1 CPU-s of the ~1.6 each of the README checks' 32 regenerations took).
The command sees what it would as a new process: its argv, the working directory, its own
stdout and stderr (captured), its exit status. Anything else (``python -c``, a program)
runs as a subprocess.
"""

from __future__ import annotations

import importlib
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from benchmarks import archive

PRELOAD = (
    "pandas",
    "pyarrow",
    "gpulane.cli",
    "gpulane.analysis.store",
    "gpulane.planning.predict",
    "gpulane.planning.placement",
)


def preload() -> None:
    """Import what the regenerating commands import, once, before the first fork."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # the command imports (and fails on) it itself
            continue


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` run from ``cwd``, its output captured, as ``subprocess.run`` returns it."""
    python = argv[:1] == [sys.executable] and len(argv) >= 2
    runnable = python and (argv[1].endswith(".py") or (argv[1] == "-m" and len(argv) >= 3))
    if not runnable or not hasattr(os, "fork"):
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: become the command, and never return
            code = 1
            inherited = archive.unpacked_now()
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                # streams on the new 1 and 2, as a new interpreter has (a caller's may be
                # its own objects: pytest's capture)
                encoding = getattr(sys.__stdout__, "encoding", None) or "utf-8"
                sys.stdout = _stream(1, encoding, "strict")
                sys.stderr = _stream(2, encoding, "backslashreplace")
                code = become(argv[1:], cwd)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                archive.cleanup(keep=inherited)  # what the command unpacked (no atexit here)
                os._exit(code)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode("utf-8", errors="replace"))
    return subprocess.CompletedProcess(argv, status, texts[0], texts[1])


def _stream(fd: int, encoding: str, errors: str) -> TextIO:
    return open(fd, "w", encoding=encoding, errors=errors, closefd=False)


def become(args: list[str], cwd: Path) -> int:
    """Run ``SCRIPT ARGS`` or ``-m MODULE ARGS`` as ``__main__``: its exit status."""
    import traceback
    import warnings

    # runpy's warning that a preloaded module is run as __main__ again (it is meant to be)
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")
    os.chdir(cwd)
    try:
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            sys.path.insert(0, str(cwd))  # as `python -m` puts the working directory first
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            script = Path(args[0])
            sys.argv = [str(script), *args[1:]]
            sys.path.insert(0, str((cwd / script).parent))  # the script's folder, as python does
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0
