"""Entry point of one rank: ``python -m gpulane.launch.worker --job MOD:FUNC --run-dir DIR``.

The job function is called as ``func(cfg, ctx)`` with the run's saved configuration and
this rank's :class:`RankContext`. Any launcher that sets rank variables can start it.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import inspect
import os
import sys
import typing
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpulane.config.load import load_saved
from gpulane.errors import GpulaneError
from gpulane.launch.registry import discover as discover_launchers
from gpulane.rank import RankContext, discover, make_context
from gpulane.rundir import write_rank_error

# A rank forked from the server of launch/forked.py runs the command's `-m` module again
# as __mp_main__ after the server imported it (main_preload: so that a rank re-runs its
# few lines, its imports cached). runpy warns of that on every rank of `python -m
# gpulane.cli`; the second run is the intended one.
warnings.filterwarnings(
    "ignore",
    message=r"'[\w.]+' found in sys.modules after import of package",
    category=RuntimeWarning,
    module="runpy",
)


def command(job: str, run_dir: str | Path) -> list[str]:
    """The command line that starts one rank of ``job`` (any launcher runs this)."""
    return [sys.executable, "-m", "gpulane.launch.worker", "--job", job, "--run-dir", str(run_dir)]


def load_job(target: str) -> Callable[[Any, RankContext], None]:
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def config_type(fn: Callable[..., Any]) -> type | None:
    """The typed configuration a job takes (the annotation of its first parameter); None
    for a job that takes the saved configuration as it is (``Any``)."""
    hints = typing.get_type_hints(fn)
    first = next(iter(inspect.signature(fn).parameters))
    kind = hints.get(first)
    return kind if isinstance(kind, type) and kind is not typing.Any else None


def run_job(job: str, ctx: RankContext) -> None:
    """This rank's part of the run: the saved configuration, the job, and a user-facing
    error left where the launcher's watchdog finds it (and raised again)."""
    ctx.heartbeat(-1, "started")
    discover_launchers()  # a launcher module's own configuration class, to read the saved one
    fn = load_job(job)
    try:
        fn(load_saved(ctx.run_dir, config_type(fn)), ctx)
    except GpulaneError as err:
        write_rank_error(ctx.run_dir, ctx.rank, err.exit_code, str(err))
        raise


def run(job: str, run_dir: str) -> int:
    info = discover()
    if info is None:
        sys.stderr.write("gpulane worker: no RANK/WORLD_SIZE (or srun/mpirun) in the environment\n")
        return 2
    try:
        run_job(job, make_context(info, run_dir))
    except GpulaneError as err:
        sys.stderr.write(f"gpulane: error: rank {info.rank}: {err}\n")
        return err.exit_code
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="gpulane-worker")
    parser.add_argument("--job", required=True)
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args()
    leave(run(args.job, args.run_dir))


def leave(code: int) -> None:
    """End the rank with ``code`` after its exit handlers and flushed output, without the
    interpreter's teardown: freeing torch's modules one by one costs a rank about 0.45
    CPU-s and does nothing the rank needs. MPI is finalized here: mpi4py does it in that
    teardown, and mpirun takes a rank that exits without it for a crashed one."""
    atexit._run_exitfuncs()
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def leave_at_exit(code: int = 0) -> None:
    """Leave as :func:`leave` (``code``) when this process ends, after what its main still
    does (submitit writes a task's result, or its failure, after the task returns or
    raises). With 0, an uncaught exception (``sys.last_value``) keeps the interpreter's
    own exit and status; 1 is asked for by a task that raised (the interpreter's status
    for it), so a failed task skips torch's teardown too."""
    atexit.unregister(_leave_normally)  # once, however often a packed job's tasks ask
    atexit.register(_leave_normally, code)


def _leave_normally(code: int = 0) -> None:
    atexit.unregister(_leave_normally)  # the handlers still to run, without this one
    if code == 0 and getattr(sys, "last_value", None) is not None:
        return
    leave(code)


if __name__ == "__main__":
    main()
