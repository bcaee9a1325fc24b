"""`gpulane advise`: which TP x PP split of the GPUs, predicted from this build's rows."""

from __future__ import annotations

from gpulane.commands.hydra_app import comma_lists, run_hydra
from gpulane.planning.run import run

LIST_KEYS = frozenset({"batch", "input_len", "output_len", "run"})


def main(argv: list[str]) -> int:
    return run_hydra("advise", run, comma_lists(argv, LIST_KEYS), "gpulane advise")
