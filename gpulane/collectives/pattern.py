"""Known inputs and exact expected outputs, so that every point is checked as nccl-tests does.

What each rank holds is :mod:`gpulane.collectives.values`; what each collective leaves
in the receive buffer is its spec's ``expected`` (:mod:`gpulane.collectives.spec`).
"""

from __future__ import annotations

from gpulane.collectives.spec import Point
from gpulane.collectives.values import Array, ArrayOps, value

CHUNK = 1 << 24  # elements per check step: bounds the extra memory of a check


def checked(point: Point, rank: int) -> bool:
    """Whether this rank's receive buffer has a defined result."""
    return not point.spec.result_at_root_only or rank == point.root


def expected(ops: ArrayOps, point: Point, rank: int, idx: Array) -> Array:
    """Expected element ``idx`` of ``rank``'s receive buffer."""
    return point.spec.expected(ops, point, rank, idx)


def tolerance(point: Point) -> float:
    if point.redop != "avg" or not point.dt.is_float:
        return 0.0
    return {"half": 1e-2, "bfloat16": 2e-2}.get(point.dtype, 1e-6) * 2


def fill_inputs(ops: ArrayOps, point: Point, rank: int, send: Array, recv: Array) -> None:
    """Zero the receive buffer, then write this rank's input into its send buffer."""
    ops.zero(recv)
    n = point.counts.send
    if point.spec.input_at_root_only and rank != point.root:
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
