"""The campaign keys have one owner (config/campaign.py's CampaignKeys): campaign.* is that
class, and the Slurm launcher's old spellings (launcher.pattern=...) are the same declared
fields, inherited, so that a default or a meaning changed in one place is the same in both."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

from gpulane.config import campaign, launcher
from gpulane.config.campaign import KEYS, CampaignConfig, CampaignKeys, campaign_of
from gpulane.config.commands import SweepConfig
from gpulane.config.docs import field_docs
from gpulane.config.launcher import SlurmLauncherConfig

ROOT = Path(__file__).resolve().parents[2]


def declared(module: object) -> dict[str, list[str]]:
    """Class -> the fields its own body declares (annotated assignments)."""
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())
    return {
        node.name: [
            s.target.id
            for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        ]
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


def test_the_keys_are_declared_once() -> None:
    assert KEYS == ("pattern", "nodelist", "outlier_fraction", "halving_good", "dry_run", "pack")
    mine = declared(campaign)
    assert mine["CampaignKeys"] == list(KEYS) and mine["CampaignConfig"] == []
    for cls, names in declared(launcher).items():
        assert not set(names) & set(KEYS), f"{cls} declares campaign keys again"
    slurm = {f.name: f for f in dataclasses.fields(SlurmLauncherConfig)}
    for f in dataclasses.fields(CampaignKeys):
        assert (slurm[f.name].type, slurm[f.name].default) == (f.type, f.default)
        assert field_docs(SlurmLauncherConfig)[f.name] == field_docs(CampaignConfig)[f.name]
    # the launcher's own keys first, the old spellings after them (help and saved order)
    assert list(slurm)[-len(KEYS) :] == list(KEYS) and next(iter(slurm)) == "name"


def test_old_spellings_are_read_and_checked_as_the_new() -> None:
    old = SweepConfig(launcher=SlurmLauncherConfig(pattern="per_node", outlier_fraction=0.3))
    new = SweepConfig(campaign=CampaignConfig(pattern="per_node", outlier_fraction=0.3))
    assert campaign_of(old) == campaign_of(new)
    assert campaign_of(old).pattern == "per-node"


def test_a_bad_old_spelling_is_one_line_naming_it() -> None:
    """Through the CLI: refused before anything runs, under the name the user gave."""
    cmd = [sys.executable, "-m", "gpulane", "sweep", "launcher=slurm", "launcher.pattern=star",
           "device=cpu"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert lines[0].startswith("gpulane: error: launcher.pattern: expected one of allocation")
