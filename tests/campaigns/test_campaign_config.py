"""campaign.* is the campaigns' own configuration; the keys' old place (launcher.*, from
when they were the Slurm launcher's) still works, is named in a note, and loses to the
new one when both are given."""

from __future__ import annotations

import pytest

from gpulane.config.campaign import CampaignConfig, campaign_of, deprecation_note
from gpulane.config.commands import SweepConfig
from gpulane.config.launcher import LocalLauncherConfig, SlurmLauncherConfig
from gpulane.errors import InputError


def test_the_new_keys_are_read_and_checked() -> None:
    cfg = SweepConfig(
        launcher=LocalLauncherConfig(),
        campaign=CampaignConfig(pattern="per_node+pairs", nodelist=["a", "b"], dry_run=True),
    )
    camp = campaign_of(cfg)
    assert camp.pattern == "per-node+pairs" and camp.nodelist == ["a", "b"] and camp.dry_run
    assert deprecation_note(cfg) is None
    cfg.campaign.outlier_fraction = 1.5
    with pytest.raises(InputError, match=r"^campaign\.outlier_fraction: expected a fraction"):
        campaign_of(cfg)
    cfg.campaign = CampaignConfig(pattern="star")
    with pytest.raises(InputError, match=r"^campaign\.pattern: expected one of allocation"):
        campaign_of(cfg)


def test_the_old_spelling_still_works_with_a_note() -> None:
    cfg = SweepConfig(launcher=SlurmLauncherConfig(pattern="pairs", nodelist="c[1-2]"))
    camp = campaign_of(cfg)
    assert camp.pattern == "pairs" and camp.nodelist == "c[1-2]" and not camp.pack
    assert deprecation_note(cfg) == (
        "# note: launcher.pattern, launcher.nodelist are now campaign.pattern, "
        "campaign.nodelist (the old spelling still works)"
    )
    # given in both places: the new one wins
    cfg.campaign = CampaignConfig(pattern="ring")
    assert campaign_of(cfg).pattern == "ring" and campaign_of(cfg).nodelist == "c[1-2]"


def test_defaults_are_no_campaign() -> None:
    camp = campaign_of(SweepConfig(launcher=SlurmLauncherConfig()))
    assert camp == CampaignConfig()
    assert deprecation_note(SweepConfig(launcher=SlurmLauncherConfig())) is None
