"""The one output channel for lines that are not a run's own table: what a campaign, the
accept suite, the advice's measurements or a vLLM run say while they go. The layers above
the rank jobs never print; they are handed a :data:`Say` from here (or from the command)
and call it, so that every such line leaves the process in one place."""

from __future__ import annotations

from collections.abc import Callable

Say = Callable[[str], None]


def stdout(text: str) -> None:
    """One line on standard output, flushed at once: it is watched while jobs go."""
    print(text, flush=True)
