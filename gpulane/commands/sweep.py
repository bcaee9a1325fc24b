"""`gpulane sweep`: collectives over message sizes with nccl-tests' numbers, on any backend
and launcher; with launcher.pattern=per-node|pairs|halving, a cluster campaign."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulane.commands.hydra_app import comma_lists, run_hydra
from gpulane.config.commands import SweepConfig

if TYPE_CHECKING:
    from gpulane.rundir import RunDir
    from gpulane.session.prepare import SweepRun

# Keys that take several values in one run: `collectives=all_reduce,all_gather` means the
# list (outside -m, where Hydra reads a comma list as a sweep).
LIST_KEYS = frozenset({"collectives", "dtype"})


def sweep(cfg: SweepConfig) -> int:
    from gpulane.session.sweep import run_sweep

    return run_sweep(cfg, campaign=campaign)


def campaign(sweep: SweepRun, group: RunDir | None) -> int:
    """What runs a campaign when the session's plan is one (campaigns/ is a floor above
    the session, so the command hands it down)."""
    from gpulane.campaigns.run import run_campaign

    return run_campaign(sweep, group=group)


def main(argv: list[str]) -> int:
    return run_hydra("sweep", sweep, comma_lists(argv, LIST_KEYS), "gpulane sweep")
