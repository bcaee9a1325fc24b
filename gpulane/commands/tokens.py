"""`gpulane tokens`: TP/PP prefill and decode token rates of a model's real shapes."""

from __future__ import annotations

from typing import Any

from gpulane.commands.hydra_app import comma_lists, run_hydra
from gpulane.commands.own_files import model_overrides

LIST_KEYS = frozenset({"batch", "input_len", "output_len"})


def _run(cfg: Any) -> int:
    from gpulane.session.tokens import run_tokens  # torch: not for --help

    return run_tokens(cfg)


def main(argv: list[str]) -> int:
    argv = model_overrides(argv)
    return run_hydra("tokens", _run, comma_lists(argv, LIST_KEYS), "gpulane tokens")
