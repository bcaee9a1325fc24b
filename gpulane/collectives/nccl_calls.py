"""How a planned point becomes NCCL calls: the function, counts and codes it takes.

Pure arithmetic, kept apart from the bindings so that it is checked without a GPU.
Codes are NCCL's own enums (nccl.h: ncclDataType_t, ncclRedOp_t), which nccl4py uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulane.collectives.backend import RECV, SEND
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


def nccl_calls(point: Point, rank: int) -> list[NcclCall]:
    """The calls of one operation; several calls run inside one group."""
    c = point.counts
    dt = NCCL_DTYPE[point.dtype]
    op = point.op
    if op == "all_reduce":
        return [NcclCall("all_reduce", (SEND, RECV, c.param, dt, NCCL_REDOP[point.redop]))]
    if op == "reduce":
        return [NcclCall("reduce", (SEND, RECV, c.param, dt, NCCL_REDOP[point.redop], point.root))]
    if op == "broadcast":
        return [NcclCall("broadcast", (SEND, RECV, c.param, dt, point.root))]
    if op == "all_gather":
        # count is what each rank sends; the receive buffer holds nranks of them
        return [NcclCall("all_gather", (SEND, RECV, c.param, dt))]
    if op == "reduce_scatter":
        # count is what each rank receives
        return [NcclCall("reduce_scatter", (SEND, RECV, c.param, dt, NCCL_REDOP[point.redop]))]
    if op == "alltoall":
        # count is what goes to each peer
        return [NcclCall("allto_all", (SEND, RECV, c.param, dt))]
    if op == "sendrecv":
        n = point.nranks
        return [
            NcclCall("send", (SEND, c.param, dt, (rank + 1) % n)),
            NcclCall("recv", (RECV, c.param, dt, (rank - 1) % n)),
        ]
    raise ValueError(f"no NCCL call for {op}")
