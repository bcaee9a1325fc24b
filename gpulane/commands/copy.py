"""`gpulane copy`: host<->device and GPU<->GPU copy bandwidth beside each path's line rate."""

from __future__ import annotations

from gpulane.commands.hydra_app import run_hydra
from gpulane.session.copy import run_copy


def main(argv: list[str]) -> int:
    return run_hydra("copy", run_copy, argv, "gpulane copy")
