"""A campaign's settings (``campaign.pattern``, ``campaign.nodelist``, the outlier
fraction, halving's reference, dry run: :class:`gpulane.config.campaign.CampaignConfig`)
and the nodes it covers: those named, else the launcher's own (Slurm: the partition's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpulane.config.campaign import campaign_of
from gpulane.config.commands import SweepConfig
from gpulane.errors import InputError
from gpulane.launch.base import LaunchPlan
from gpulane.launch.registry import entry
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


def pattern_settings(cfg: SweepConfig, launch: LaunchPlan | None) -> PatternSettings:
    """The campaign of ``cfg`` checked, its nodes expanded (``launch``: the launcher's
    plan, which names the nodes when ``campaign.nodelist`` does not)."""
    camp = campaign_of(cfg)
    text = _hostlist(camp.nodelist)
    if text:
        nodes = expand_hostlist(text)
    elif launch is not None:
        nodes = entry(launch.launcher).launcher.campaign_nodes(launch)
    else:
        raise InputError(f"campaign.pattern={camp.pattern}: name the nodes (campaign.nodelist)")
    if not nodes:
        where = f"campaign.nodelist={text}" if text else f"launcher={launch and launch.launcher}"
        raise InputError(f"campaign.pattern={camp.pattern}: no nodes in {where}")
    good = camp.halving_good
    return PatternSettings(
        nodes=list(nodes),
        outlier_fraction=float(camp.outlier_fraction),
        halving_good=float(good) if good is not None else None,
        dry_run=bool(camp.dry_run),
    )
