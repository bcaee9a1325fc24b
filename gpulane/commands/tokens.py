"""`gpulane tokens`: TP/PP prefill and decode token rates of a model's real shapes."""

from __future__ import annotations

from gpulane.commands.hydra_app import comma_lists, run_hydra
from gpulane.session.tokens import run_tokens

LIST_KEYS = frozenset({"batch", "input_len", "output_len"})


def main(argv: list[str]) -> int:
    return run_hydra("tokens", run_tokens, comma_lists(argv, LIST_KEYS), "gpulane tokens")
