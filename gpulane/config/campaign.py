"""A sweep's campaign settings (``campaign.*``): which cluster campaign runs (the pattern),
over which nodes, what names a node, whether it only prints its jobs (a dry run), and
whether a multirun is packed into one launch.

They belong to the campaigns, not to a launcher: any launcher that places ranks on named
nodes runs them. The same keys under ``launcher.*`` (``launcher.pattern=pairs``, from the
time they were the Slurm launcher's) still work: :func:`campaign_of` reads those that
``campaign.*`` leaves at their default, and :func:`old_spellings` names them for a note.
The keys are declared once, in :class:`CampaignKeys`: ``campaign.*`` is that class, and
the Slurm launcher's configuration inherits it for the old spellings (Hydra accepts only
declared keys).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gpulane.config.types import NodeList
from gpulane.errors import InputError

PATTERNS = ("allocation", "per-node", "pairs", "ring", "halving")


def campaign_pattern(value: object, key: str = "campaign.pattern") -> str:
    """``campaign.pattern`` checked: one of PATTERNS, or several joined by ``+`` (or given
    as a list), as ``per-node+allocation``."""
    if value is None or value == "":
        return "allocation"
    parts = [str(v) for v in value] if isinstance(value, (list, tuple)) else str(value).split("+")
    steps = [p.strip().replace("_", "-") for p in parts if p.strip()]
    bad = [p for p in steps if p not in PATTERNS]
    if bad or not steps:
        raise InputError(
            f"{key}: expected one of {', '.join(PATTERNS)} (or several joined by +), got {value!r}"
        )
    return "+".join(steps)


@dataclass
class CampaignKeys:
    """The campaign keys and their meaning, declared once (campaign.*; launcher.* is the
    old place of the same keys)."""

    pattern: str = "allocation"
    """allocation, per-node, pairs, ring or halving (steps joined by +): a cluster campaign"""
    nodelist: NodeList = None  # a hostlist string or a list of hosts
    """The nodes of a pattern, a hostlist node[01-16]; null: the launcher's (Slurm: sinfo's)"""
    outlier_fraction: float = 0.1
    """A node (pair) this far below the median of its peers is named; exit 1"""
    halving_good: float | None = None
    """GB/s a healthy set reaches (pattern=halving); null: the best half is the reference"""
    dry_run: bool = False
    """Print what would be submitted (every job of the pattern), submit nothing"""
    pack: bool = False
    """Under -m: run every combination in one launch instead of one array element each"""


KEYS = tuple(f.name for f in dataclasses.fields(CampaignKeys))


@dataclass
class CampaignConfig(CampaignKeys):
    """A cluster campaign of many runs, each on a subset of the nodes."""

    def validate(self, prefix: str = "campaign.") -> None:
        """One InputError for a value that cannot work."""
        campaign_pattern(self.pattern, f"{prefix}pattern")
        fraction = self.outlier_fraction
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not 0 < fraction < 1
        ):
            raise InputError(
                f"{prefix}outlier_fraction: expected a fraction in (0, 1), got {fraction!r}"
            )
        good = self.halving_good
        if good is not None and (isinstance(good, bool) or not isinstance(good, (int, float))):
            raise InputError(f"{prefix}halving_good: expected GB/s, got {good!r}")

    @classmethod
    def of(cls, keys: CampaignKeys) -> CampaignConfig:
        """The campaign keys of ``keys`` (a launcher's old spellings among them)."""
        return cls(**{k: getattr(keys, k) for k in KEYS})


DEFAULTS = CampaignConfig()


def _section(cfg: Any, name: str) -> Any:
    try:
        return getattr(cfg, name, None)
    except Exception:  # a DictConfig without the key in struct mode
        return None


def old_spellings(cfg: Any) -> list[str]:
    """The campaign keys given under ``launcher.*`` (their old place), not at default."""
    launcher = _section(cfg, "launcher")
    out = []
    for key in KEYS:
        value = _section(launcher, key) if launcher is not None else None
        if value is not None and value != getattr(DEFAULTS, key):
            out.append(key)
    return out


def campaign_of(cfg: Any) -> CampaignConfig:
    """``cfg.campaign`` checked, each key left at its default taken from ``launcher.*``
    when given there (the old spelling)."""
    own = _section(cfg, "campaign")
    values = {k: _section(own, k) if own is not None else getattr(DEFAULTS, k) for k in KEYS}
    for k in KEYS:
        if values[k] is None and getattr(DEFAULTS, k) is not None:
            values[k] = getattr(DEFAULTS, k)
    launcher = _section(cfg, "launcher")
    for key in old_spellings(cfg):
        if values[key] == getattr(DEFAULTS, key):
            values[key] = _section(launcher, key)
    if values["nodelist"] is not None and not isinstance(values["nodelist"], str):
        values["nodelist"] = [str(v) for v in values["nodelist"]]
    out = CampaignConfig(**values)
    out.validate()  # the old spellings were checked by the launcher's own validate()
    return dataclasses.replace(out, pattern=campaign_pattern(out.pattern))


def deprecation_note(cfg: Any) -> str | None:
    """One line naming the keys given in their old place, None when there are none."""
    old = old_spellings(cfg)
    if not old:
        return None
    old_keys = ", ".join(f"launcher.{k}" for k in old)
    new_keys = ", ".join(f"campaign.{k}" for k in old)
    verb = "is" if len(old) == 1 else "are"
    return f"# note: {old_keys} {verb} now {new_keys} (the old spelling still works)"
