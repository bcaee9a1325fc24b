"""The sizes of a sweep, as nccl-tests' -b/-e/-f/-i options make them."""

from __future__ import annotations

from gpulane.errors import InputError
from gpulane.units import parse_size


def size_steps(
    min_bytes: str | int,
    max_bytes: str | int,
    factor: float | None = 2,
    step: str | int | None = None,
) -> list[int]:
    """Sizes from min to max (inclusive), multiplying by ``factor`` or adding ``step``.

    Exactly one of factor/step drives the sweep; ``step`` wins when both are given,
    as nccl-tests' -i overrides -f.
    """
    lo = parse_size(min_bytes, "sizes.min")
    hi = parse_size(max_bytes, "sizes.max")
    if hi < lo:
        raise InputError(f"sizes: max ({max_bytes}) is below min ({min_bytes}); swap them")
    if step is not None:
        inc = parse_size(step, "sizes.step")
        if inc <= 0:
            raise InputError("sizes.step: must be a positive number of bytes")
        return list(range(lo, hi + 1, inc))
    if factor is None or float(factor) <= 1:
        if lo == hi:
            return [lo]
        raise InputError(f"sizes.factor: must be greater than 1 (got {factor}), or set sizes.step")
    if lo == 0:
        raise InputError(
            "sizes.min: 0 cannot grow by a factor; start at 1 or more, or set sizes.step"
        )
    out: list[int] = []
    size = lo
    while size <= hi:
        out.append(size)
        size = int(size * float(factor))
    return out
