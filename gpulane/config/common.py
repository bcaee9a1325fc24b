"""What every command's configuration holds: the build label, where runs go, the ranks'
environment, the watchdog's patience, the progress line; and the facts a run adds when it
saves its configuration for the ranks (run id, world size, nodes, path label)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulane.config.types import Size, Step


@dataclass
class PresetConfig:
    """NCCL transport presets (conf/preset): a name and the variables it sets."""

    name: str = "none"
    """The preset's name"""
    env: dict[str, str] = field(default_factory=dict)
    """The NCCL_* variables the preset sets for the ranks"""


@dataclass
class CommonConfig:
    build: str | None = None
    """Build label of the rows (free text: x16-gen4, riser-x4); null: the preset's name, else the host name"""
    results_dir: str = "runs"
    """Where run directories go: RESULTS_DIR/RUN_ID/rows.jsonl, rows.parquet, config.yaml"""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for the ranks, a new key each: +env.NCCL_ALGO=Ring (over the preset's)"""
    timeout_s: float = 300.0
    """Seconds without progress (or after a rank died) before the run is ended with an error"""
    progress: bool = True
    """Progress: a live bar on a terminal, a plain line every 10 s in a log; false: none"""
    # Facts of the run, written by the front when it saves the configuration for the ranks.
    run_id: str | None = None
    """The run directory's name under results_dir (default: the time, build and a hash)"""
    world_size: int | None = None
    """Internal: ranks of the run"""
    nodes: int | None = None
    """Internal: nodes of the run"""
    path: str | None = None
    """Internal: the path label between the ranks"""
    hosts: list[str] | None = None
    """Internal: the hosts of the run"""


@dataclass
class SizesConfig:
    """A sweep of message sizes as nccl-tests' -b -e -f -i take them (K/M/G binary)."""

    min: Size = 8
    """Smallest message in bytes, K/M/G binary suffixes (nccl-tests -b)"""
    max: Size = "auto"
    """Largest message (nccl-tests -e); auto: 1G on GPUs, 32M on CPUs"""
    factor: float | None = 2.0
    """Multiply the size by this at each step (nccl-tests -f) ..."""
    step: Step = None
    """... or add this many bytes at each step instead (nccl-tests -i)"""
