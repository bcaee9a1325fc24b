"""The checks of every collective against an independent simulation of the collective.

Each collective is simulated here on numpy arrays from what nccl-tests' src/<coll>.cu does
(who receives which block of whose buffer, and the reduction), not from gpulane's spec:
the ranks' send buffers are filled by ``pattern.fill_inputs``, the simulation moves the
data, and ``pattern.count_wrong`` must find nothing wrong; one corrupted element must be
found exactly once.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpulane.collectives import pattern
from gpulane.collectives.backends.mpi_buffers import ArrayModuleOps
from gpulane.collectives.spec import COLLECTIVES, Point, plan_point
from gpulane.collectives.values import reduced, value

OPS = ArrayModuleOps(np)
NUMPY = {"float": np.float32, "int32": np.int32, "half": np.float16, "double": np.float64}


def _reduce(bufs: list[np.ndarray], redop: str) -> np.ndarray:
    stack = np.stack([b.astype(np.float64) for b in bufs])
    if redop == "sum":
        return stack.sum(axis=0)
    if redop == "prod":
        return stack.prod(axis=0)
    if redop == "max":
        return stack.max(axis=0)
    if redop == "min":
        return stack.min(axis=0)
    assert redop == "avg"
    return stack.sum(axis=0) / len(bufs)


def simulate(p: Point, send: list[np.ndarray]) -> list[np.ndarray | None]:
    """Each rank's receive buffer after the collective (None where it is undefined)."""
    n, c, root = p.nranks, p.count, p.root
    block = [[s[j * c : (j + 1) * c] for j in range(n)] for s in send]  # block j of rank r
    op = p.op
    if op == "all_reduce":
        return [_reduce(send, p.redop) for _ in range(n)]
    if op == "reduce":
        return [_reduce(send, p.redop) if r == root else None for r in range(n)]
    if op == "broadcast":
        return [send[root].copy() for _ in range(n)]
    if op == "all_gather":
        return [np.concatenate(send) for _ in range(n)]
    if op == "gather":
        return [np.concatenate(send) if r == root else None for r in range(n)]
    if op == "reduce_scatter":
        return [_reduce(send, p.redop)[r * c : (r + 1) * c] for r in range(n)]
    if op == "scatter":
        return [block[root][r].copy() for r in range(n)]
    if op == "alltoall":  # block j of rank r's result: block r of rank j's input
        return [np.concatenate([block[j][r] for j in range(n)]) for r in range(n)]
    if op == "sendrecv":  # rank r sends to r + 1, receives from r - 1
        return [send[(r - 1) % n].copy() for r in range(n)]
    raise AssertionError(op)


def run_point(p: Point, dtype: type) -> tuple[list[np.ndarray], list[np.ndarray]]:
    sends, recvs = [], []
    for r in range(p.nranks):
        send = np.full(p.counts.send, -7, dtype=dtype)
        recv = np.full(p.counts.recv, -7, dtype=dtype)
        pattern.fill_inputs(OPS, p, r, send, recv)
        assert not recv.any(), "fill_inputs zeroes the receive buffer"
        sends.append(send)
        recvs.append(recv)
    for r, got in enumerate(simulate(p, sends)):
        if got is not None:
            recvs[r][:] = got.astype(dtype)
    return sends, recvs


CASES = [
    (op, n, redop, dt)
    for op, n in itertools.product(COLLECTIVES, (2, 3, 4))
    for redop, dt in (
        [
            ("sum", "float"),
            ("prod", "int32"),
            ("max", "int32"),
            ("min", "float"),
            ("avg", "float"),
            ("avg", "half"),
        ]
        if COLLECTIVES[op].reduces
        else [("none", "int32"), ("none", "float")]
    )
]


@pytest.mark.parametrize(("op", "n", "redop", "dt"), CASES)
def test_simulated_collective_checks_clean_and_counts_one_corruption(
    op: str, n: int, redop: str, dt: str
) -> None:
    root = n - 1  # not rank 0, so that root and rank are not confused
    p = plan_point(op, 48 * n * 4, dt, redop, root, n)
    assert p.count > 1
    sends, recvs = run_point(p, NUMPY[dt])
    for r in range(n):
        assert pattern.count_wrong(OPS, p, r, recvs[r]) == 0, (op, n, r)
    for r in range(n):
        bad = recvs[r].copy()
        bad[-1] = bad[-1] + 5
        want = 1 if pattern.checked(p, r) else 0
        assert pattern.count_wrong(OPS, p, r, bad) == want, (op, n, r)
    # the inputs are not all alike: a rank's send buffer says which rank it is
    senders = [s for r, s in enumerate(sends) if not p.spec.input_at_root_only or r == root]
    if len(senders) > 1 and redop != "prod":
        assert any(not np.array_equal(senders[0], s) for s in senders[1:])


@pytest.mark.parametrize("op", ["broadcast", "scatter"])
def test_only_the_root_writes_its_input(op: str) -> None:
    p = plan_point(op, 4096, "int32", "none", 1, 3)
    for r in range(3):
        send = np.full(p.counts.send, -7, dtype=np.int32)
        recv = np.full(p.counts.recv, -7, dtype=np.int32)
        pattern.fill_inputs(OPS, p, r, send, recv)
        assert (send == -7).all() == (r != 1)


@pytest.mark.parametrize(("op", "root_only"), [("reduce", True), ("gather", True),
                                               ("all_reduce", False), ("sendrecv", False)])  # fmt: skip
def test_checked_ranks(op: str, root_only: bool) -> None:
    p = plan_point(op, 4096, "float", "sum", 2, 4)
    assert [pattern.checked(p, r) for r in range(4)] == [not root_only] * 2 + [True] + [
        not root_only
    ]


def test_checks_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    # A buffer longer than a check step is checked step by step, every element counted.
    monkeypatch.setattr(pattern, "CHUNK", 7)
    p = plan_point("all_gather", 4 * 96 * 3, "int32", "none", 0, 3)
    _, recvs = run_point(p, np.int32)
    assert pattern.count_wrong(OPS, p, 0, recvs[0]) == 0
    recvs[0][::5] += 1
    assert pattern.count_wrong(OPS, p, 0, recvs[0]) == len(recvs[0][::5])


@pytest.mark.parametrize(
    ("dt", "redop", "tol"),
    [
        ("float", "avg", 2e-6),
        ("half", "avg", 2e-2),
        ("bfloat16", "avg", 4e-2),
        ("double", "avg", 2e-6),
        ("float", "sum", 0.0),
        ("int32", "avg", 0.0),
    ],
)
def test_tolerance(dt: str, redop: str, tol: float) -> None:
    assert pattern.tolerance(plan_point("all_reduce", 1024, dt, redop, 0, 2)) == tol


def test_avg_within_tolerance_is_not_wrong() -> None:
    p = plan_point("all_reduce", 3 * 64 * 4, "float", "avg", 0, 3)
    _, recvs = run_point(p, np.float32)
    recvs[0][0] *= 1 + 1e-7  # below the float tolerance
    assert pattern.count_wrong(OPS, p, 0, recvs[0]) == 0
    recvs[0][1] *= 1 + 1e-4
    assert pattern.count_wrong(OPS, p, 0, recvs[0]) == 1


# -- values: small integers, exact in every dtype ------------------------------------
@pytest.mark.parametrize("redop", ["sum", "avg", "prod", "min", "max", "none"])
@pytest.mark.parametrize("n", [2, 3, 8, 63])
def test_values_small_and_distinct_per_rank(redop: str, n: int) -> None:
    idx = np.arange(0, 500)
    vals = np.stack([value(idx, r, n, redop) for r in range(n)]).astype(np.int64)
    assert vals.min() >= 0
    bound = {"sum": 2, "avg": 2, "prod": 2, "min": 6, "max": 6, "none": 60}[redop]
    assert vals.max() == bound
    if redop == "prod":  # exactly one rank holds 2 at each element
        assert ((vals == 2).sum(axis=0) == 1).all() and set(np.unique(vals)) == {1, 2}
    else:
        assert not np.array_equal(vals[0], vals[1])
    total = reduced(OPS, idx, n, redop)
    if redop in ("sum", "avg"):
        want = vals.sum(axis=0) / (n if redop == "avg" else 1)
    elif redop == "prod":
        want = vals.prod(axis=0)
    elif redop == "min":
        want = vals.min(axis=0)
    else:  # max, and the default of an unknown redop
        want = vals.max(axis=0)
    assert np.allclose(total, want)


def test_values_exact_formulas() -> None:
    # written out from the module's promise: idx + 2 rank mod 3, one 2 per element for
    # prod, idx + 3 rank mod 7 for min/max, idx + 17 rank mod 61 otherwise
    assert list(value(np.arange(4), 1, 4, "sum")) == [2, 0, 1, 2]
    assert list(value(np.arange(4), 2, 4, "prod")) == [1, 1, 2, 1]
    assert list(value(np.arange(3), 1, 2, "max")) == [3, 4, 5]
    assert list(value(np.arange(3), 2, 3, "none")) == [34, 35, 36]
