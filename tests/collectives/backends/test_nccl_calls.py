"""The NCCL backend's argument mapping and buffer layout, checked without a GPU."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from gpulane.collectives.backends.base import Backend
from gpulane.collectives.backends.nccl_calls import NCCL_DTYPE, NCCL_REDOP, RECV, SEND, nccl_calls
from gpulane.collectives.spec import DTYPES, Point, plan_point


def test_codes_are_ncclh_enums() -> None:
    # nccl.h: ncclInt8=0 ... ncclBfloat16=9; ncclSum=0, ncclProd, ncclMax, ncclMin, ncclAvg
    assert NCCL_DTYPE == {
        "int8": 0,
        "uint8": 1,
        "int32": 2,
        "uint32": 3,
        "int64": 4,
        "uint64": 5,
        "half": 6,
        "float": 7,
        "double": 8,
        "bfloat16": 9,
    }
    assert NCCL_REDOP == {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
    assert set(NCCL_DTYPE) == set(DTYPES)


@pytest.mark.parametrize(
    ("op", "rank", "fn", "args"),
    [
        # 1 MiB of bfloat16 at 4 ranks: 524288 elements in all
        ("all_reduce", 0, "all_reduce", (SEND, RECV, 524288, 9, 2)),
        ("reduce", 1, "reduce", (SEND, RECV, 524288, 9, 2, 3)),
        ("broadcast", 2, "broadcast", (SEND, RECV, 524288, 9, 3)),
        # gather-like: per-rank count
        ("all_gather", 0, "all_gather", (SEND, RECV, 131072, 9)),
        ("reduce_scatter", 0, "reduce_scatter", (SEND, RECV, 131072, 9, 2)),
        ("alltoall", 0, "allto_all", (SEND, RECV, 131072, 9)),
    ],
)
def test_call_arguments(op: str, rank: int, fn: str, args: tuple) -> None:
    point = plan_point(op, 1 << 20, "bfloat16", "max", 3, 4)
    (call,) = nccl_calls(point, rank)
    assert call.fn == fn
    assert call.args == args


def test_sendrecv_is_a_ring_in_one_group() -> None:
    point = plan_point("sendrecv", 4096, "float", "sum", 0, 4)
    send, recv = nccl_calls(point, 0)
    assert (send.fn, send.args) == ("send", (SEND, 1024, 7, 1))
    assert (recv.fn, recv.args) == ("recv", (RECV, 1024, 7, 3))


class NumpyLayout(Backend):
    """Only the buffer layout of the Backend base class, on numpy arrays."""

    name = "layout"

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world_size = rank, world

    def empty(self, n: int, dtype: str) -> np.ndarray:
        return np.zeros(n, dtype=DTYPES[dtype].numpy_name)

    def launch(self, point: Point, bufs) -> None:
        raise AssertionError

    def time_loop(self, fn: Callable[[], None], iters: int) -> list[float]:
        raise AssertionError


def _offset(view: np.ndarray, base: np.ndarray) -> int:
    return (
        view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    ) // view.itemsize


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_in_place_offsets_as_nccl_tests(rank: int) -> None:
    layout = NumpyLayout(rank, 4)
    ag = layout.allocate(plan_point("all_gather", 4096, "float", "sum", 0, 4), in_place=True)
    (base,) = ag.storage
    assert _offset(ag.send, base) == 256 * rank and len(ag.send) == 256
    assert _offset(ag.recv, base) == 0 and len(ag.recv) == 1024
    rs = layout.allocate(plan_point("reduce_scatter", 4096, "float", "sum", 0, 4), in_place=True)
    (base,) = rs.storage
    assert _offset(rs.send, base) == 0 and len(rs.send) == 1024
    assert _offset(rs.recv, base) == 256 * rank and len(rs.recv) == 256
    ar = layout.allocate(plan_point("all_reduce", 4096, "float", "sum", 0, 4), in_place=True)
    assert ar.send.__array_interface__["data"][0] == ar.recv.__array_interface__["data"][0]
    out = layout.allocate(plan_point("all_gather", 4096, "float", "sum", 0, 4), in_place=False)
    assert not np.shares_memory(out.send, out.recv)


def test_missing_nccl4py_says_what_to_install() -> None:
    """CI has no nccl4py: the backend's import gives the one-line remedy."""
    from gpulane.collectives.backends.nccl_bootstrap import import_nccl4py
    from gpulane.errors import MissingComponent

    try:
        import nccl.core  # noqa: F401
    except ImportError:
        with pytest.raises(MissingComponent, match=r"pip install 'nccl4py\[cu13\]'"):
            import_nccl4py()
    else:
        _core, bindings = import_nccl4py()
        assert hasattr(bindings, "all_reduce")
