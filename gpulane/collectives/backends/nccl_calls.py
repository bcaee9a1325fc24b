"""How a planned point becomes NCCL calls: the function, counts and codes it takes.

Pure arithmetic, kept apart from the bindings so that it is checked without a GPU.
Codes are NCCL's own enums (nccl.h: ncclDataType_t, ncclRedOp_t), which nccl4py uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpulane.collectives.backends.base import RECV, SEND
from gpulane.collectives.spec import Point

NCCL_DTYPE = {
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
NCCL_REDOP = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


@dataclass(frozen=True)
class NcclCall:
    """One call of nccl4py's low-level bindings (nccl.bindings.nccl.<fn>).

    ``args`` holds everything but the communicator and the stream, which come last in
    every binding; SEND and RECV stand for the buffers' device addresses.
    """

    fn: str
    args: tuple[object, ...]


def _count(p: Point) -> int:
    return p.counts.param


def _dt(p: Point) -> int:
    return NCCL_DTYPE[p.dtype]


def _redop(p: Point) -> int:
    return NCCL_REDOP[p.redop]


def _sendrecv(p: Point, rank: int) -> list[NcclCall]:
    n = p.nranks
    return [
        NcclCall("send", (SEND, _count(p), _dt(p), (rank + 1) % n)),
        NcclCall("recv", (RECV, _count(p), _dt(p), (rank - 1) % n)),
    ]


# collective -> the calls of one operation on ``rank``; several calls run inside one group.
NCCL_CALLS: dict[str, Callable[[Point, int], list[NcclCall]]] = {
    "all_reduce": lambda p, r: [NcclCall("all_reduce", (SEND, RECV, _count(p), _dt(p), _redop(p)))],
    "reduce": lambda p, r: [NcclCall("reduce", (SEND, RECV, _count(p), _dt(p), _redop(p), p.root))],
    "broadcast": lambda p, r: [NcclCall("broadcast", (SEND, RECV, _count(p), _dt(p), p.root))],
    # count is what each rank sends; the receive buffer holds nranks of them
    "all_gather": lambda p, r: [NcclCall("all_gather", (SEND, RECV, _count(p), _dt(p)))],
    # count is what each rank receives
    "reduce_scatter": lambda p, r: [
        NcclCall("reduce_scatter", (SEND, RECV, _count(p), _dt(p), _redop(p)))
    ],
    # count is what goes to each peer
    "alltoall": lambda p, r: [NcclCall("allto_all", (SEND, RECV, _count(p), _dt(p)))],
    "sendrecv": _sendrecv,
}


def nccl_calls(point: Point, rank: int) -> list[NcclCall]:
    """The calls of one operation; several calls run inside one group."""
    make = NCCL_CALLS.get(point.op)
    if make is None:
        raise ValueError(f"no NCCL call for {point.op}")
    return make(point, rank)
