"""Each backend's op->call table against the spec list: every collective is either called
or declared in the backend's ``cannot`` table, in both placements, with a reason."""

from __future__ import annotations

from typing import Any

import pytest

from gpulane.collectives.backends.base import Backend, Buffers, cannot_run
from gpulane.collectives.backends.mpi import MpiBackend
from gpulane.collectives.backends.nccl import NcclBackend
from gpulane.collectives.backends.torch_dist import TorchBackend
from gpulane.collectives.spec import COLLECTIVES, Point, plan_point

BACKENDS: list[type[Backend]] = [TorchBackend, NcclBackend, MpiBackend]


def table_problems(cls: type[Backend]) -> list[str]:
    """What is wrong with a backend's tables, in words (empty when nothing)."""
    problems = [f"calls {op}, which no spec describes" for op in cls.calls if op not in COLLECTIVES]
    for (op, in_place), why in cls.cannot.items():
        if op not in COLLECTIVES:
            problems.append(f"declares {op}, which no spec describes")
        if not isinstance(in_place, bool) or not why.strip():
            problems.append(f"cannot[{op!r}, {in_place!r}] must be a placement with a reason")
    for op in COLLECTIVES:
        declared = {ip for ip in (True, False) if (op, ip) in cls.cannot}
        if op not in cls.calls and declared != {True, False}:
            problems.append(f"has no call for {op} and does not say why")
        if op in cls.calls and declared == {True, False}:
            problems.append(f"calls {op} but declares it cannot run it at all")
    return problems


@pytest.mark.parametrize("cls", BACKENDS, ids=lambda c: c.__name__)
def test_every_collective_is_called_or_declared(cls: type[Backend]) -> None:
    assert table_problems(cls) == []


def test_what_each_backend_runs() -> None:
    runs = {
        cls.__name__: {
            (op, ip)
            for op in COLLECTIVES
            for ip in (True, False)
            if op in cls.calls and (op, ip) not in cls.cannot
        }
        for cls in BACKENDS
    }
    both = {(op, ip) for op in COLLECTIVES for ip in (True, False)}
    # MPI runs all nine, in both placements but out-of-place broadcast.
    assert runs["MpiBackend"] == both - {("broadcast", False)}
    # NCCL: no gather/scatter; alltoall and sendrecv only out of place.
    assert runs["NcclBackend"] == both - {
        ("gather", True),
        ("gather", False),
        ("scatter", True),
        ("scatter", False),
        ("alltoall", True),
        ("sendrecv", True),
    }
    # torch's API fixes one placement for most collectives.
    assert runs["TorchBackend"] == {
        ("all_reduce", True),
        ("broadcast", True),
        ("reduce", True),
        ("all_gather", True),
        ("all_gather", False),
        ("reduce_scatter", True),
        ("reduce_scatter", False),
        ("alltoall", False),
        ("sendrecv", False),
    }


FORGETFUL_CALLS = {op: print for op in COLLECTIVES if op not in ("gather", "scatter")}


class Planted(Backend):
    """A backend that forgets gather without saying so, and half-declares scatter."""

    name = "planted"
    calls = FORGETFUL_CALLS
    cannot = cannot_run(("scatter",), True, "no in-place scatter")

    def empty(self, n: int, dtype: str) -> Any:
        raise NotImplementedError

    def launch(self, point: Point, bufs: Buffers) -> None:
        raise NotImplementedError

    def time_loop(self, fn: Any, iters: int) -> list[float]:
        raise NotImplementedError


def test_a_missing_call_is_found_and_refused() -> None:
    assert table_problems(Planted) == [
        "has no call for gather and does not say why",
        "has no call for scatter and does not say why",
    ]
    backend = Planted.__new__(Planted)
    point = plan_point("scatter", 1024, "float", "none", 0, 2)
    assert backend.supports(point, True) == "no in-place scatter"
    assert backend.supports(point, False) == "planted has no call for scatter"
    assert backend.supports(plan_point("all_reduce", 1024, "float", "sum", 0, 2), True) is None


def test_declared_reasons_reach_supports() -> None:
    torch_backend = TorchBackend.__new__(TorchBackend)
    point = plan_point("all_reduce", 1024, "float", "sum", 0, 2)
    assert torch_backend.supports(point, False) == "torch.distributed's all_reduce is in-place only"
    gather = plan_point("gather", 1024, "float", "none", 0, 2)
    assert torch_backend.supports(gather, True) == (
        "torch.distributed has no gather on tensors of one buffer"
    )
    nccl_backend = NcclBackend.__new__(NcclBackend)
    alltoall = plan_point("alltoall", 1024, "float", "none", 0, 2)
    assert (
        nccl_backend.supports(alltoall, True) == "alltoall in place has no defined result in NCCL"
    )
    assert nccl_backend.supports(alltoall, False) is None
