"""Size rules of a copy sweep.

Sizes are bytes, binary suffixes (4K = 4096), as `gpulane sweep` reads them. Every size is
a whole number of 4-byte words, because the data check writes and compares int32 words
(each word holds its own index, so a missing, shifted or stale block is found). The default
sweep is 4 KiB to 1 GiB, doubling.

A timed sample repeats the copy until it has moved at least ``min_sample_bytes`` (so that a
4 KiB copy of about 2 µs is not measured alone against the event timer's ~0.5 µs
resolution), at most ``max_reps`` times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpulane.errors import InputError
from gpulane.units import parse_size, size_steps

WORD = 4
DEFAULT_MIN = 4 << 10
DEFAULT_MAX = 1 << 30
LATENCY_SIZE = 16  # one int4, as p2pBandwidthLatencyTest's latency matrix
MAX_REPS = 256


def copy_sizes(
    min_bytes: str | int = DEFAULT_MIN,
    max_bytes: str | int = DEFAULT_MAX,
    factor: float | None = 2,
    step: str | int | None = None,
) -> list[int]:
    """The sweep from min to max (inclusive), each a positive multiple of 4 bytes."""
    sizes = size_steps(min_bytes, max_bytes, factor, step)
    check_sizes(sizes, "sizes")
    return sizes


def check_sizes(sizes: Sequence[int], what: str) -> None:
    for size in sizes:
        check_size(size, what)


def check_size(size: int, what: str) -> int:
    if size <= 0:
        raise InputError(f"{what}: a copy needs at least {WORD} bytes (got {size})")
    if size % WORD:
        near = sorted({size - size % WORD or WORD, size + WORD - size % WORD})
        raise InputError(
            f"{what}: {size} bytes is not a multiple of {WORD}; the data check compares "
            f"{WORD}-byte words (use {' or '.join(str(n) for n in near)})"
        )
    return size


def reps_for(size: int, min_sample_bytes: int, max_reps: int = MAX_REPS) -> int:
    """Copies per timed sample: enough to move ``min_sample_bytes``, at least 1."""
    if size <= 0:
        raise InputError(f"size must be positive (got {size})")
    return max(1, min(max_reps, math.ceil(min_sample_bytes / size)))


def parse_gpus(spec: Any, count: int) -> list[int]:
    """GPU indices from ``all``, an int, ``"0,2"`` or a list; checked against ``count``.

    Indices are CUDA device indices as this process sees them (after CUDA_VISIBLE_DEVICES).
    """
    if count <= 0:
        raise InputError("gpus: no GPU is visible")
    if spec is None or (isinstance(spec, str) and spec.strip().lower() in ("all", "")):
        return list(range(count))
    items: list[Any]
    if isinstance(spec, bool):
        raise InputError(f"gpus: expected all, an index or a list of indices, got {spec!r}")
    if isinstance(spec, int):
        items = [spec]
    elif isinstance(spec, str):
        items = [p for p in spec.replace(" ", "").split(",") if p]
    else:
        try:
            items = list(spec)
        except TypeError:
            raise InputError(f"gpus: expected all or a list of indices, got {spec!r}") from None
    out: list[int] = []
    for item in items:
        try:
            idx = int(str(item).strip().removeprefix("GPU").removeprefix("gpu"))
        except ValueError:
            raise InputError(f"gpus: {item!r} is not a GPU index") from None
        if not 0 <= idx < count:
            raise InputError(f"gpus: GPU {idx} does not exist; this process sees {count} GPU(s)")
        if idx not in out:
            out.append(idx)
    if not out:
        raise InputError("gpus: the list is empty")
    return out


def parse_size_value(value: Any, what: str) -> int:
    return check_size(parse_size(value, what), what)
