"""`gpulane copy`: host<->device and GPU<->GPU copy bandwidth beside each path's line rate."""

from __future__ import annotations

from typing import Any

from gpulane.commands.hydra_app import run_hydra


def _run(cfg: Any) -> int:
    from gpulane.session.copy import run_copy  # torch: not for --help

    return run_copy(cfg)


def main(argv: list[str]) -> int:
    return run_hydra("copy", _run, argv, "gpulane copy")
