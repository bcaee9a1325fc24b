"""What every command's configuration holds: the build label, where runs go, the ranks'
environment, the watchdog's patience, the progress line; and the facts a run adds when it
saves its configuration for the ranks (run id, world size, nodes, path label)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PresetConfig:
    """NCCL transport presets (conf/preset): a name and the variables it sets."""

    name: str = "none"
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class CommonConfig:
    build: str | None = None
    results_dir: str = "runs"
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 300.0
    progress: bool = True
    # Facts of the run, written by the front when it saves the configuration for the ranks.
    run_id: str | None = None
    world_size: int | None = None
    nodes: int | None = None
    path: str | None = None
    hosts: Any = None


@dataclass
class SizesConfig:
    """A sweep of message sizes as nccl-tests' -b -e -f -i take them (K/M/G binary)."""

    min: Any = 8
    max: Any = "auto"
    factor: float | None = 2.0
    step: Any = None
