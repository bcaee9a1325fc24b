"""`gpulane advise`: which TP x PP split of the GPUs, predicted from this build's rows."""

from __future__ import annotations

from typing import Any

from gpulane.commands.hydra_app import comma_lists, run_hydra
from gpulane.commands.own_files import model_overrides

LIST_KEYS = frozenset({"batch", "concurrency", "input_len", "output_len", "run"})


def _run(cfg: Any) -> int:
    from gpulane.planning.run import run  # pandas and the planner: not for --help

    return run(cfg)


def main(argv: list[str]) -> int:
    argv = model_overrides(argv)
    return run_hydra("advise", _run, comma_lists(argv, LIST_KEYS), "gpulane advise")
