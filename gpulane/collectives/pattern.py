"""Known inputs and exact expected outputs, so that every point is checked as nccl-tests does.

Formulas use only arithmetic operators on integer index arrays, so the same code runs
on numpy arrays (MPI backend) and torch tensors (torch and NCCL backends). Values stay
small integers, exact in every dtype (int8 and bfloat16 included) for up to 63 ranks.
"""

from __future__ import annotations

from typing import Any, Protocol

from gpulane.collectives.spec import Point

Array = Any


class ArrayOps(Protocol):
    """The few array operations the checks need, implemented by each backend."""

    def arange(self, lo: int, hi: int) -> Array: ...
    def minimum(self, a: Array, b: Array) -> Array: ...
    def maximum(self, a: Array, b: Array) -> Array: ...
    def write(self, buf: Array, lo: int, values: Array) -> None: ...
    def zero(self, buf: Array) -> None: ...
    def count_mismatch(self, buf: Array, lo: int, expected: Array, tol: float) -> int: ...


CHUNK = 1 << 24  # elements per check step: bounds the extra memory of a check


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


def checked(point: Point, rank: int) -> bool:
    """Whether this rank's receive buffer has a defined result."""
    return point.op not in ("reduce", "gather") or rank == point.root


def expected(ops: ArrayOps, point: Point, rank: int, idx: Array) -> Array:
    """Expected element ``idx`` of ``rank``'s receive buffer."""
    n, c, redop = point.nranks, point.count, point.redop
    op = point.op
    if op in ("all_reduce", "reduce"):
        return reduced(ops, idx, n, redop)
    if op == "reduce_scatter":
        return reduced(ops, idx + rank * c, n, redop)
    if op == "broadcast":
        return value(idx, point.root, n, redop)
    if op in ("all_gather", "gather"):
        return value(idx % c, idx // c, n, redop)
    if op == "alltoall":
        return value(idx % c + rank * c, idx // c, n, redop)
    if op == "scatter":
        return value(idx + rank * c, point.root, n, redop)
    if op == "sendrecv":
        return value(idx, (rank - 1) % n, n, redop)
    raise ValueError(f"no expected values for {op}")


def tolerance(point: Point) -> float:
    if point.redop != "avg" or not point.dt.is_float:
        return 0.0
    return {"half": 1e-2, "bfloat16": 2e-2}.get(point.dtype, 1e-6) * 2


def fill_inputs(ops: ArrayOps, point: Point, rank: int, send: Array, recv: Array) -> None:
    """Zero the receive buffer, then write this rank's input into its send buffer."""
    ops.zero(recv)
    n = point.counts.send
    if point.op in ("broadcast", "scatter") and rank != point.root:
        return
    for lo in range(0, n, CHUNK):
        idx = ops.arange(lo, min(n, lo + CHUNK))
        ops.write(send, lo, value(idx, rank, point.nranks, point.redop))


def count_wrong(ops: ArrayOps, point: Point, rank: int, recv: Array) -> int:
    if not checked(point, rank):
        return 0
    n = point.counts.recv
    tol = tolerance(point)
    wrong = 0
    for lo in range(0, n, CHUNK):
        idx = ops.arange(lo, min(n, lo + CHUNK))
        wrong += ops.count_mismatch(recv, lo, expected(ops, point, rank, idx), tol)
    return wrong
