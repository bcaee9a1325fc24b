"""What a collective is, in nccl-tests' terms.

Each collective is a few lines of formulas, as in nccl-tests' ``<coll>GetCollByteCount``,
``<coll>GetBw`` and ``<coll>InitData``: how a requested byte size becomes element counts
and in-place offsets, which number nccl-tests prints as ``size``, the bus-bandwidth
factor, and what every rank's receive buffer holds afterwards. A new collective is one
more entry in :data:`COLLECTIVES` and one line in each backend's call table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpulane.collectives.values import Array, ArrayOps, reduced, value
from gpulane.errors import InputError, did_you_mean


@dataclass(frozen=True)
class DType:
    name: str  # as nccl-tests prints it
    itemsize: int
    is_float: bool
    torch_name: str
    numpy_name: str | None  # None where numpy has no such type (bfloat16)


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("int8", 1, False, "int8", "int8"),
        DType("uint8", 1, False, "uint8", "uint8"),
        DType("int32", 4, False, "int32", "int32"),
        DType("uint32", 4, False, "uint32", "uint32"),
        DType("int64", 8, False, "int64", "int64"),
        DType("uint64", 8, False, "uint64", "uint64"),
        DType("half", 2, True, "float16", "float16"),
        DType("float", 4, True, "float32", "float32"),
        DType("double", 8, True, "float64", "float64"),
        DType("bfloat16", 2, True, "bfloat16", None),
    )
}

DTYPE_ALIASES = {
    "float32": "float",
    "fp32": "float",
    "f32": "float",
    "float16": "half",
    "fp16": "half",
    "f16": "half",
    "bf16": "bfloat16",
    "float64": "double",
    "fp64": "double",
    "f64": "double",
    "char": "int8",
    "int": "int32",
    "uint": "uint32",
}

REDOPS = ("sum", "prod", "max", "min", "avg")


def dtype(name: str) -> DType:
    key = str(name).strip().lower()
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise InputError(
            f"dtype: unknown type {name!r}{did_you_mean(key, DTYPES)}; "
            f"choose one of {', '.join(DTYPES)}"
        )
    return DTYPES[key]


def redop(name: str) -> str:
    key = str(name).strip().lower()
    if key not in REDOPS:
        raise InputError(f"redop: unknown reduction {name!r}; choose one of {', '.join(REDOPS)}")
    return key


@dataclass(frozen=True)
class Counts:
    """Element counts of one point, as nccl-tests' GetCollByteCount returns them."""

    send: int
    recv: int
    param: int  # the count passed to NCCL, printed in the `count` column
    send_inplace_offset: int  # times rank: where the send data sits inside recvbuff in-place
    recv_inplace_offset: int


def _aligned_share(count: int, itemsize: int, nranks: int) -> int:
    # nccl-tests keeps each rank's share a multiple of 16 bytes.
    return (count // nranks) & ~(16 // itemsize - 1)


def _whole(count: int, itemsize: int, nranks: int) -> Counts:
    return Counts(count, count, count, 0, 0)


def _gather_like(count: int, itemsize: int, nranks: int) -> Counts:
    base = _aligned_share(count, itemsize, nranks)
    return Counts(base, base * nranks, base, base, 0)


def _scatter_like(count: int, itemsize: int, nranks: int) -> Counts:
    base = _aligned_share(count, itemsize, nranks)
    return Counts(base * nranks, base, base, 0, base)


def _alltoall(count: int, itemsize: int, nranks: int) -> Counts:
    base = _aligned_share(count, itemsize, nranks)
    return Counts(base * nranks, base * nranks, base, 0, 0)


# Element ``idx`` of ``rank``'s receive buffer after the collective ran on ``point``.
Expected = Callable[[ArrayOps, "Point", int, Array], Array]


@dataclass(frozen=True)
class CollectiveSpec:
    name: str
    counts: Callable[[int, int, int], Counts]
    bus_factor: Callable[[int], float]
    expected: Expected
    reduces: bool  # takes a redop
    rooted: bool  # takes a root
    binary: str  # nccl-tests binary
    input_at_root_only: bool = False  # only the root's send buffer is read
    result_at_root_only: bool = False  # only the root's receive buffer is defined

    def plan(self, size_bytes: int, dt: DType, nranks: int) -> Counts:
        return self.counts(size_bytes // dt.itemsize, dt.itemsize, nranks)

    def printed_size(self, c: Counts, dt: DType) -> int:
        """The `size` column nccl-tests prints: max(send, recv) bytes."""
        return max(c.send, c.recv) * dt.itemsize

    def bandwidth(self, size_bytes: int, seconds: float, nranks: int) -> tuple[float, float]:
        """(algbw, busbw) in GB/s; algbw = printed size / time."""
        if seconds <= 0:
            return 0.0, 0.0
        alg = size_bytes / 1e9 / seconds
        return alg, alg * self.bus_factor(nranks)


def _allreduce_factor(n: int) -> float:
    return 2 * (n - 1) / n


def _gather_factor(n: int) -> float:
    return (n - 1) / n


def _one(n: int) -> float:
    return 1.0


# What each collective leaves where: nccl-tests' <coll>InitData (src/<coll>.cu) written with
# gpulane's inputs (values.value); p.count is one rank's share (Counts.param).
def _expect_reduced(ops: ArrayOps, p: Point, rank: int, idx: Array) -> Array:
    return reduced(ops, idx, p.nranks, p.redop)


def _expect_reduce_scatter(ops: ArrayOps, p: Point, rank: int, idx: Array) -> Array:
    return reduced(ops, idx + rank * p.count, p.nranks, p.redop)


def _expect_root_copy(ops: ArrayOps, p: Point, rank: int, idx: Array) -> Array:
    return value(idx, p.root, p.nranks, p.redop)


def _expect_gathered(ops: ArrayOps, p: Point, rank: int, idx: Array) -> Array:
    # block k of the result is rank k's input
    return value(idx % p.count, idx // p.count, p.nranks, p.redop)


def _expect_alltoall(ops: ArrayOps, p: Point, rank: int, idx: Array) -> Array:
    # block k of the result is block ``rank`` of rank k's input
    c = p.count
    return value(idx % c + rank * c, idx // c, p.nranks, p.redop)


def _expect_scattered(ops: ArrayOps, p: Point, rank: int, idx: Array) -> Array:
    # block ``rank`` of the root's input
    return value(idx + rank * p.count, p.root, p.nranks, p.redop)


def _expect_from_previous(ops: ArrayOps, p: Point, rank: int, idx: Array) -> Array:
    # a ring: each rank sends to rank + 1 and receives from rank - 1
    return value(idx, (rank - 1) % p.nranks, p.nranks, p.redop)


COLLECTIVES: dict[str, CollectiveSpec] = {
    s.name: s
    for s in (
        CollectiveSpec(
            "all_reduce",
            _whole,
            _allreduce_factor,
            _expect_reduced,
            reduces=True,
            rooted=False,
            binary="all_reduce_perf",
        ),
        CollectiveSpec(
            "all_gather",
            _gather_like,
            _gather_factor,
            _expect_gathered,
            reduces=False,
            rooted=False,
            binary="all_gather_perf",
        ),
        CollectiveSpec(
            "reduce_scatter",
            _scatter_like,
            _gather_factor,
            _expect_reduce_scatter,
            reduces=True,
            rooted=False,
            binary="reduce_scatter_perf",
        ),
        CollectiveSpec(
            "alltoall",
            _alltoall,
            _gather_factor,
            _expect_alltoall,
            reduces=False,
            rooted=False,
            binary="alltoall_perf",
        ),
        CollectiveSpec(
            "broadcast",
            _whole,
            _one,
            _expect_root_copy,
            reduces=False,
            rooted=True,
            binary="broadcast_perf",
            input_at_root_only=True,
        ),
        CollectiveSpec(
            "reduce",
            _whole,
            _one,
            _expect_reduced,
            reduces=True,
            rooted=True,
            binary="reduce_perf",
            result_at_root_only=True,
        ),
        CollectiveSpec(
            "sendrecv",
            _whole,
            _one,
            _expect_from_previous,
            reduces=False,
            rooted=False,
            binary="sendrecv_perf",
        ),
        CollectiveSpec(
            "gather",
            _gather_like,
            _gather_factor,
            _expect_gathered,
            reduces=False,
            rooted=True,
            binary="gather_perf",
            result_at_root_only=True,
        ),
        CollectiveSpec(
            "scatter",
            _scatter_like,
            _gather_factor,
            _expect_scattered,
            reduces=False,
            rooted=True,
            binary="scatter_perf",
            input_at_root_only=True,
        ),
    )
}

COLLECTIVE_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "all_to_all": "alltoall",
    "alltoall_single": "alltoall",
    "send_recv": "sendrecv",
    "bcast": "broadcast",
}


def collective(name: str) -> CollectiveSpec:
    key = str(name).strip().lower().replace("-", "_")
    key = key.removesuffix("_perf")
    key = COLLECTIVE_ALIASES.get(key, key)
    if key not in COLLECTIVES:
        raise InputError(
            f"collective: unknown collective {name!r}{did_you_mean(key, COLLECTIVES)}; "
            f"choose from {', '.join(COLLECTIVES)}"
        )
    return COLLECTIVES[key]


@dataclass(frozen=True)
class Point:
    """One (collective, size, dtype, redop, root) point of a sweep, planned for n ranks."""

    op: str
    dtype: str
    redop: str  # "none" for collectives that do not reduce, as nccl-tests prints
    root: int  # -1 where the collective has no root, as nccl-tests prints
    nranks: int
    requested_bytes: int
    counts: Counts
    size_bytes: int

    @property
    def spec(self) -> CollectiveSpec:
        return COLLECTIVES[self.op]

    @property
    def dt(self) -> DType:
        return DTYPES[self.dtype]

    @property
    def count(self) -> int:
        return self.counts.param

    def buffer_elements(self, rank: int) -> int:
        """Elements of the one buffer that holds send and recv data when run in place."""
        c = self.counts
        return max(
            c.send + c.send_inplace_offset * rank,
            c.recv + c.recv_inplace_offset * rank,
            c.send,
            c.recv,
        )


def plan_point(
    op: str, size_bytes: int, dtype_name: str, redop_name: str, root: int, nranks: int
) -> Point:
    spec = collective(op)
    dt = dtype(dtype_name)
    counts = spec.plan(size_bytes, dt, nranks)
    if spec.rooted and not 0 <= root < nranks:
        raise InputError(f"root: {root} is not a rank of a {nranks}-rank run (0..{nranks - 1})")
    return Point(
        op=spec.name,
        dtype=dt.name,
        redop=redop(redop_name) if spec.reduces else "none",
        root=root if spec.rooted else -1,
        nranks=nranks,
        requested_bytes=size_bytes,
        counts=counts,
        size_bytes=spec.printed_size(counts, dt),
    )
