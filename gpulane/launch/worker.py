"""Entry point of one rank: ``python -m gpulane.launch.worker --job MOD:FUNC --run-dir DIR``.

The job function is called as ``func(cfg, ctx)`` with the run's saved configuration and
this rank's :class:`RankContext`. Any launcher that sets rank variables can start it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gpulane.errors import GpulaneError
from gpulane.launch.context import RankContext, make_context, write_rank_error
from gpulane.launch.env import discover
from gpulane.record import CONFIG_FILE


def command(job: str, run_dir: str | Path) -> list[str]:
    """The command line that starts one rank of ``job`` (any launcher runs this)."""
    return [sys.executable, "-m", "gpulane.launch.worker", "--job", job, "--run-dir", str(run_dir)]


def load_job(target: str) -> Callable[[Any, RankContext], None]:
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


def run(job: str, run_dir: str) -> int:
    info = discover()
    if info is None:
        sys.stderr.write("gpulane worker: no RANK/WORLD_SIZE (or srun/mpirun) in the environment\n")
        return 2
    cfg = OmegaConf.load(Path(run_dir) / CONFIG_FILE)
    ctx = make_context(info, run_dir)
    ctx.heartbeat(-1, "started")
    try:
        load_job(job)(cfg, ctx)
    except GpulaneError as err:
        sys.stderr.write(f"gpulane: error: rank {info.rank}: {err}\n")
        write_rank_error(Path(run_dir), info.rank, err.exit_code, str(err))
        return err.exit_code
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="gpulane-worker")
    parser.add_argument("--job", required=True)
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args()
    sys.exit(run(args.job, args.run_dir))


if __name__ == "__main__":
    main()
