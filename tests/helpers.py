"""Running gpulane as a user does: a real process of its own, real ranks (the command's
process forked from a server that imported its libraries already: tests/forked_cli.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests import forked_cli

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_path(relative: str) -> Path:
    """Path of a captured fixture, e.g. fixture_path('h200x2/topo-m.txt')."""
    path = FIXTURES / relative
    assert path.exists(), f"missing fixture {path}"
    return path


def gpulane(
    *args: str, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    # Rank variables of an outer launcher would turn the CLI into a rank itself.
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        full_env.pop(key, None)
    if forked_cli.forkable(full_env):
        return forked_cli.run(list(args), cwd, full_env, timeout)
    return subprocess.run(
        [sys.executable, "-m", "gpulane", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_dirs(results: Path) -> list[Path]:
    return sorted(p for p in results.iterdir() if p.is_dir() and p.name != "multirun")


def rows_of(run_dir: Path) -> list[dict[str, Any]]:
    """A run directory's rows as dicts, joined with the run's facts (facts.jsonl)."""
    from gpulane.record import read_rows

    return [row.to_dict() for row in read_rows(run_dir / "rows.jsonl")]


# A sweep slow enough (11 sizes x 100 iterations) that a fault can be injected mid-run.
SLOW_SWEEP = [
    "sweep",
    "ranks=2",
    "device=cpu",
    "collectives=all_reduce",
    "sizes.min=1K",
    "sizes.max=1M",
    "sizes.factor=2",
    "warmup=1",
    "iters=100",
    "progress=false",
]


def run_slurm(cfg: Any, run: Any, env: dict[str, str], job: str) -> int:
    """What `gpulane sweep launcher=slurm` does, with a test's own job on the ranks: a
    campaign for launcher.pattern, a queued combination while packing, else one job."""
    from gpulane.commands.sweep import campaign
    from gpulane.session import packing
    from gpulane.session.prepare import prepare
    from gpulane.session.sweep import run_prepared

    sweep = prepare(cfg, job=job, packing=packing.packing())
    return run_prepared(sweep, run, env, campaign=campaign)


def run_mpirun(cfg: Any, run: Any, env: dict[str, str], job: str) -> int:
    """A test's own job on `cfg.world_size` ranks under mpirun, shown as a sweep."""
    from gpulane.session.sweep import launch_job

    return launch_job(cfg, run, env, job, int(cfg.world_size), str(cfg.device or "cpu"))


def local_job_config(results_dir: Path, timeout_s: float = 60) -> Any:
    """A typed sweep configuration for a test's own job on 2 local CPU ranks."""
    from gpulane.config.commands import SweepConfig
    from gpulane.config.load import typed

    return typed(
        {
            "backend": {"name": "torch"},
            "launcher": {"name": "local"},
            "ranks": 2,
            "device": "cpu",
            "timeout_s": timeout_s,
            "progress": False,
            "results_dir": str(results_dir),
            "build": "test",
        },
        SweepConfig,
    )
