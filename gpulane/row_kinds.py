"""One constructor per kind of row (``Row.collective``, ``Row.copy``, ``Row.tokens``): the
kind is in the name, a collective's point and measurement fill their fields, and a field
only another kind has (a copy's ``src``, a tokens row's ``model``) is refused rather than
written."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

R = TypeVar("R")


class CollectivePoint(Protocol):
    """What a collective's row says about its point (collectives.spec.Point has it)."""

    @property
    def op(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def redop(self) -> str: ...
    @property
    def root(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def count(self) -> int: ...


class Measured(Protocol):
    """What a collective's row says was measured (collectives.harness.Summary has it)."""

    @property
    def time_us(self) -> float | None: ...
    @property
    def time_us_p50(self) -> float | None: ...
    @property
    def time_us_p99(self) -> float | None: ...
    @property
    def algbw_gbps(self) -> float | None: ...
    @property
    def busbw_gbps(self) -> float | None: ...
    @property
    def wrong(self) -> int | None: ...


MEASURED = ("time_us", "time_us_p50", "time_us_p99", "algbw_gbps", "busbw_gbps", "wrong")

# The fields only one kind has; the others (times, sizes, bandwidths, dtype) are shared.
OWN_FIELDS: dict[str, frozenset[str]] = {
    "collective": frozenset({"redop", "root", "in_place"}),
    "copy": frozenset(
        {"bidirectional", "memory", "src", "dst", "peer_access", "expected_gbps", "efficiency"}
    ),
    "tokens": frozenset(
        [
            "model",
            "tp",
            "pp",
            "batch",
            "input_len",
            "output_len",
            "layers",
            "tokens_per_s",
            "ttft_ms",
            "itl_ms_p50",
            "itl_ms_p99",
            "comm_share",
        ]
    ),
}
_ANY_OWN = frozenset().union(*OWN_FIELDS.values())


def collective(
    cls: type[R],
    run_id: str,
    backend: str,
    point: CollectivePoint | None = None,
    in_place: bool | None = None,
    measured: Measured | None = None,
    **fields: Any,
) -> R:
    """A collective's row: what the point is (op, dtype, redop, root, size, count as
    nccl-tests prints them) and what was measured (times, bandwidths, wrong elements),
    with the run's facts in ``fields`` (an error row: no point, its ``op`` there)."""
    taken: dict[str, Any] = {}
    if point is not None:
        taken.update(
            op=point.op,
            dtype=point.dtype,
            redop=point.redop,
            root=point.root,
            size_bytes=point.size_bytes,
            count=point.count,
        )
    if in_place is not None:
        taken["in_place"] = in_place
    if measured is not None:
        taken.update({name: getattr(measured, name) for name in MEASURED})
    return of_kind(cls, "collective", run_id, backend, {**taken, **fields})


def copy(cls: type[R], run_id: str, backend: str, op: str, **fields: Any) -> R:
    """A copy's row (h2d, d2h, p2p, ...)."""
    return of_kind(cls, "copy", run_id, backend, {"op": op, **fields})


def tokens(cls: type[R], run_id: str, backend: str, op: str, **fields: Any) -> R:
    """A token-rate row (prefill, decode, throughput)."""
    return of_kind(cls, "tokens", run_id, backend, {"op": op, **fields})


def of_kind(cls: type[R], kind: str, run_id: str, backend: str, fields: dict[str, Any]) -> R:
    """``cls(kind=kind, ...)``; TypeError for a field only another kind has."""
    foreign = sorted(f for f in fields if f in _ANY_OWN and f not in OWN_FIELDS[kind])
    if "kind" in fields or foreign:
        raise TypeError(f"Row.{kind}: {', '.join(foreign) or 'kind'} is not a {kind} field")
    return cls(run_id=run_id, kind=kind, backend=backend, **fields)  # type: ignore[call-arg]
