"""A campaign's settings (``launcher.pattern``, ``launcher.nodelist``, the outlier
fraction, halving's reference, dry run) and the nodes it covers."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any

from gpulane.config.capabilities import launcher_of
from gpulane.config.commands import SweepConfig
from gpulane.config.launcher import SlurmLauncherConfig
from gpulane.errors import InputError
from gpulane.rank import expand_hostlist


@dataclass(frozen=True)
class PatternSettings:
    nodes: list[str]
    outlier_fraction: float
    halving_good: float | None
    dry_run: bool


def _hostlist(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    return ",".join(str(v).strip() for v in value)


def partition_nodes(partition: str | None) -> list[str]:
    """The nodes of ``partition``, or of the default partition (the one sinfo marks
    with ``*``, where a job without ``--partition`` goes) when None."""
    cmd = ["sinfo", "-h", "-N", "-o", "%N %P"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        raise InputError(f"launcher.nodelist not given and sinfo failed ({err})") from err
    if out.returncode != 0:
        raise InputError(
            f"launcher.nodelist not given and `{' '.join(cmd)}` failed: "
            + (out.stderr.strip() or f"exit {out.returncode}")
        )
    nodes: list[str] = []
    for line in out.stdout.splitlines():
        name, _, part = line.strip().partition(" ")
        if not name or (partition is None and not part.endswith("*")):
            continue
        if name not in nodes:  # a node in several partitions is listed once each
            nodes.append(name)
    return nodes


def pattern_settings(cfg: SweepConfig, pattern: str, partition: str | None) -> PatternSettings:
    sec = launcher_of(cfg)
    assert isinstance(sec, SlurmLauncherConfig)  # campaigns are a Slurm launcher's patterns
    sec.validate()  # outlier_fraction, halving_good (also checked by the front)
    fraction, good = sec.outlier_fraction, sec.halving_good
    text = _hostlist(sec.nodelist)
    nodes = expand_hostlist(text) if text else partition_nodes(partition)
    if not nodes:
        where = f"launcher.nodelist={text}" if text else f"partition {partition or '(default)'}"
        raise InputError(f"launcher.pattern={pattern}: no nodes in {where}")
    return PatternSettings(
        nodes=list(nodes),
        outlier_fraction=float(fraction),
        halving_good=float(good) if good is not None else None,
        dry_run=bool(sec.dry_run),
    )
