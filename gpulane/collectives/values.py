"""The known input of every rank, and what reducing it over the ranks gives.

Formulas use only arithmetic operators on integer index arrays, so the same code runs
on numpy arrays (MPI backend) and torch tensors (torch and NCCL backends). Values stay
small integers, exact in every dtype (int8 and bfloat16 included) for up to 63 ranks.
"""

from __future__ import annotations

from typing import Any, Protocol

Array = Any


class ArrayOps(Protocol):
    """The few array operations the checks need, implemented by each backend."""

    def arange(self, lo: int, hi: int) -> Array: ...
    def minimum(self, a: Array, b: Array) -> Array: ...
    def maximum(self, a: Array, b: Array) -> Array: ...
    def write(self, buf: Array, lo: int, values: Array) -> None: ...
    def zero(self, buf: Array) -> None: ...
    def count_mismatch(self, buf: Array, lo: int, expected: Array, tol: float) -> int: ...


def value(idx: Array, rank: Array | int, nranks: int, redop: str) -> Array:
    """Element ``idx`` of rank ``rank``'s input (rank may be an array too)."""
    if redop in ("sum", "avg"):
        return (idx + 2 * rank) % 3
    if redop == "prod":
        # Exactly one rank holds 2 for each element, so the product is 2 and never overflows.
        return 1 + ((idx % nranks) == rank)
    if redop in ("min", "max"):
        return (idx + 3 * rank) % 7
    return (idx + 17 * rank) % 61


def reduced(ops: ArrayOps, idx: Array, nranks: int, redop: str) -> Array:
    acc = value(idx, 0, nranks, redop)
    for k in range(1, nranks):
        v = value(idx, k, nranks, redop)
        if redop in ("sum", "avg"):
            acc = acc + v
        elif redop == "prod":
            acc = acc * v
        elif redop == "min":
            acc = ops.minimum(acc, v)
        else:
            acc = ops.maximum(acc, v)
    if redop == "avg":
        acc = acc / nranks
    return acc
