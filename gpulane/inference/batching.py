"""Which (input_len, output_len, batch) configurations a token run measures, and how it
cuts a batch: the whole-number lists of its settings, the micro-batches, the rows of a
micro-batch, and the prefill chunks of whole sequences. Pure; shared by the per-rank job
and ``gpulane advise``, which must predict the same chunks the runner makes."""

from __future__ import annotations

import itertools
from typing import Any

from gpulane.config.commands import TokensConfig
from gpulane.errors import InputError


def as_list(value: Any, what: str) -> list[int]:
    """``[1, 8]``, ``8`` or ``"1,8"`` as a list of whole numbers >= 1."""
    if isinstance(value, str):
        parts: list[Any] = [p for p in value.replace(" ", "").split(",") if p]
    elif isinstance(value, (list, tuple)) or hasattr(value, "__iter__"):
        parts = list(value)
    else:
        parts = [value]
    out = []
    for p in parts:
        try:
            n = int(p)
        except (TypeError, ValueError):
            raise InputError(f"{what}: expected whole numbers, got {value!r}") from None
        if isinstance(p, bool) or n < 1 or str(p).strip() not in (str(n), f"{n}.0"):
            raise InputError(f"{what}: expected whole numbers >= 1, got {value!r}")
        out.append(n)
    if not out:
        raise InputError(f"{what}: expected at least one value")
    return out


def configs(cfg: TokensConfig) -> list[tuple[int, int, int]]:
    """(input_len, output_len, batch) in run order."""
    return list(
        itertools.product(
            as_list(cfg.input_len, "input_len"),
            as_list(cfg.output_len, "output_len"),
            as_list(cfg.batch, "batch"),
        )
    )


def micro_batch_count(cfg: TokensConfig, pp: int, batch: int) -> int:
    m = cfg.micro_batches
    n = pp if str(m) == "auto" else int(m)
    return max(1, min(n, batch))


def split_rows(batch: int, parts: int) -> list[slice]:
    """``batch`` rows in ``parts`` consecutive slices, the first ones one longer."""
    base, extra = divmod(batch, parts)
    out, start = [], 0
    for j in range(parts):
        n = base + (1 if j < extra else 0)
        out.append(slice(start, start + n))
        start += n
    return [r for r in out if r.stop > r.start]


def prefill_chunks(batch: int, input_len: int, chunk_tokens: int, min_chunks: int) -> list[slice]:
    """Chunks of whole sequences of at most ``chunk_tokens`` tokens (one sequence when a
    prompt is longer), at least ``min_chunks`` of them, at most one per sequence."""
    per = max(1, chunk_tokens // max(input_len, 1))
    parts = max(min_chunks, -(-batch // per))
    return split_rows(batch, min(parts, batch))
