"""How a planned point becomes one mpi4py call, collective by collective.

MPI's placements, mapped onto nccl-tests' buffer layouts (:meth:`Backend.allocate`):

- all_reduce, all_gather, alltoall: ``MPI_IN_PLACE`` in the receive buffer, exactly
  nccl-tests' layout (all_gather takes each rank's input from its slot).
- reduce_scatter: ``MPI_IN_PLACE`` takes the input from the whole buffer and leaves the
  result at its start (not at the rank's slot as NCCL does); the backend's allocate()
  says so.
- reduce, gather, scatter: ``MPI_IN_PLACE`` at the root; the other ranks send from
  (or receive into) nccl-tests' in-place region.
- broadcast: MPI_Bcast is in place by nature; out-of-place is not measured (n/a).
- sendrecv: out-of-place is MPI_Sendrecv, in-place MPI_Sendrecv_replace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpulane.collectives.spec import Point

REDOPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN"}
HALF_TYPES = {"half": "FLOAT16_T", "bfloat16": "BFLOAT16_T"}

# nccl-tests dtype -> MPI datatype that moves it (16-bit floats move as 16-bit words)
WIRE_TYPES = {
    "int8": "INT8_T",
    "uint8": "UINT8_T",
    "int32": "INT32_T",
    "uint32": "UINT32_T",
    "int64": "INT64_T",
    "uint64": "UINT64_T",
    "half": "UINT16_T",
    "float": "FLOAT",
    "double": "DOUBLE",
    "bfloat16": "UINT16_T",
}


def reduces_half(point: Point) -> bool:
    """A reduction of 16-bit floats: needs the MPI library's own half/bfloat16 type."""
    return point.spec.reduces and point.dtype in HALF_TYPES


def wire_type(mpi: Any, point: Point) -> tuple[Any, bool]:
    """(MPI datatype, whether buffers move as 16-bit words)."""
    if reduces_half(point):
        return getattr(mpi, HALF_TYPES[point.dtype]), False
    return getattr(mpi, WIRE_TYPES[point.dtype]), point.dtype in HALF_TYPES


@dataclass
class MpiArgs:
    """What one call needs, resolved before the timed loop."""

    comm: Any
    here: Any  # MPI.IN_PLACE
    send: list[Any]  # [buffer, datatype]
    recv: list[Any]
    in_place: bool
    root: int
    is_root: bool
    redop: Any  # an MPI.Op; None for collectives that do not reduce
    rank: int
    nranks: int


def _reduce_scatter(a: MpiArgs) -> None:
    if a.in_place:  # input and result both in the whole (send) region
        a.comm.Reduce_scatter_block(a.here, a.send, op=a.redop)
    else:
        a.comm.Reduce_scatter_block(a.send, a.recv, op=a.redop)


def _reduce(a: MpiArgs) -> None:
    if a.in_place:
        a.comm.Reduce(
            a.here if a.is_root else a.recv, a.recv if a.is_root else None, op=a.redop, root=a.root
        )
    else:
        a.comm.Reduce(a.send, a.recv if a.is_root else None, op=a.redop, root=a.root)


def _gather(a: MpiArgs) -> None:
    if a.in_place and a.is_root:
        a.comm.Gather(a.here, a.recv, root=a.root)
    else:
        a.comm.Gather(a.send, a.recv if a.is_root else None, root=a.root)


def _scatter(a: MpiArgs) -> None:
    if a.in_place and a.is_root:
        a.comm.Scatter(a.send, a.here, root=a.root)
    else:
        a.comm.Scatter(a.send if a.is_root else None, a.recv, root=a.root)


def _sendrecv(a: MpiArgs) -> None:
    dest, source = (a.rank + 1) % a.nranks, (a.rank - 1) % a.nranks
    if a.in_place:
        a.comm.Sendrecv_replace(a.recv, dest=dest, sendtag=7, source=source, recvtag=7)
    else:
        a.comm.Sendrecv(a.send, dest=dest, sendtag=7, recvbuf=a.recv, source=source, recvtag=7)


# collective -> its mpi4py call
MPI_CALLS: dict[str, Callable[[MpiArgs], None]] = {
    "all_reduce": lambda a: a.comm.Allreduce(a.here if a.in_place else a.send, a.recv, op=a.redop),
    "all_gather": lambda a: a.comm.Allgather(a.here if a.in_place else a.send, a.recv),
    "reduce_scatter": _reduce_scatter,
    "alltoall": lambda a: a.comm.Alltoall(a.here if a.in_place else a.send, a.recv),
    "broadcast": lambda a: a.comm.Bcast(a.recv, root=a.root),
    "reduce": _reduce,
    "gather": _gather,
    "scatter": _scatter,
    "sendrecv": _sendrecv,
}
