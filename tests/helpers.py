"""Running gpulane as a user does: a real subprocess, real ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def gpulane(
    *args: str, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    # Rank variables of an outer launcher would turn the CLI into a rank itself.
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        full_env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "gpulane.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_dirs(results: Path) -> list[Path]:
    return sorted(p for p in results.iterdir() if p.is_dir() and p.name != "multirun")


def rows_of(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "rows.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


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
