"""Collective times inside a step: from a build's measured curves (``gpulane sweep`` or
nccl-tests rows: time over size, interpolated log-log with
:class:`gpulane.analysis.join.Curve`, linear in size above the largest measured size), or,
for a path nothing measured, projected from the path's expected bandwidth
(:mod:`gpulane.topology.bandwidth`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpulane.analysis.join import JOIN_OPS, Curve, build_curves, known
from gpulane.errors import InputError
from gpulane.planning.rows import as_rows
from gpulane.record import Row
from gpulane.topology.paths import label_kind

# Which measured rows to trust first for a collective inside a step: CUDA-graph replays
# (how decode runs), then nccl-tests' back-to-back device timing, then the others.
BACKEND_ORDER = ("nccl-tests", "nccl", "torch-nccl", "mpi")
# The collectives a step's time is read from: join's two, and a pipeline's sends
CURVE_OPS = (*JOIN_OPS, "sendrecv")


@dataclass(frozen=True)
class CommTime:
    time_us: float
    source: str  # "measured ...", "projected ..."
    extrapolated: bool = False


def curve_time(curve: Curve, size: int) -> tuple[float, bool]:
    """Time at ``size`` on a measured curve: log-log inside (Curve.at), the smallest
    size's time below (latency-bound), linear in size above the largest (bandwidth-bound).
    The flag says the size was outside the measured range."""
    if size > curve.sizes[-1]:
        return curve.times_us[-1] * size / curve.sizes[-1], True
    t, _bw, outside = curve.at(size)
    return t, outside


def busbw_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


@dataclass
class _Group:
    label: str
    curve: Curve
    paths: frozenset[str]
    transports: frozenset[str] = frozenset()  # what NCCL said it used (rows' transport)
    # (where NCCL's switches in the rows' env force the bytes, which switches)
    env_hints: frozenset[tuple[str, str]] = frozenset()
    graph: bool = False  # timed as CUDA-graph replays


def row_transport(row: Row) -> str | None:
    """The transport NCCL used for a row: its ``transport`` field, else ``extra.nccl``'s
    (a text, or a mapping with a ``transport`` key); None where nothing says."""
    value = known(row.transport)
    if not value:
        extra = row.extra if isinstance(row.extra, Mapping) else {}
        nccl = extra.get("nccl")
        value = nccl.get("transport") if isinstance(nccl, Mapping) else nccl
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    return str(value) if value else None


# NCCL's own switches in a row's env, and where they send the bytes (gpulane's presets)
_ENV_TRANSPORTS = (
    (("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"), "NCCL sockets"),
    (("NCCL_P2P_DISABLE",), "host memory (NCCL SHM)"),
)


def env_transport(row: Row) -> tuple[str, str] | None:
    """(where NCCL's switches in the row's env force the bytes, which switches), e.g.
    NCCL_P2P_DISABLE=1: through host memory; None when they force nothing."""
    env = row.env if isinstance(row.env, Mapping) else {}
    on = {k for k, v in env.items() if str(v).strip() not in ("", "0")}
    for keys, where in _ENV_TRANSPORTS:
        if set(keys) <= on:
            return where, f"{', '.join(f'{k}=1' for k in keys)} in the rows' env"
    return None


def _preference(key: tuple[str, bool]) -> tuple[int, int, str]:
    """Order of (backend, graph) groups: graph replays first, then :data:`BACKEND_ORDER`."""
    backend, graph = key
    order = BACKEND_ORDER.index(backend) if backend in BACKEND_ORDER else 99
    return (0 if graph else 1, order, backend)


class MeasuredComm:
    """Collective curves of one build, per (op, ranks), from result rows.

    Rows are grouped by (backend, graph) and each group's curve is built by
    :func:`gpulane.analysis.join.build_curves` (median per size, bf16 preferred). A size is
    timed on the first group, in order of preference (graph replays, then
    :data:`BACKEND_ORDER`), whose measured range covers it; else on the group that reaches
    the largest size (linear in size beyond it).
    Send times come from ``sendrecv`` rows, else from a 2-rank all_gather of twice the
    message (each rank sends half of the gathered buffer), else from nothing.
    """

    def __init__(self, rows: Iterable[Row | Mapping[str, Any]], build: str | None = None) -> None:
        # benchmark scripts and older tests hand in a frame's dicts: rows at the door
        coll = [r for r in as_rows(rows) if known(r.kind) == "collective"]
        builds = sorted({str(known(r.build)) for r in coll})
        if build is None and len(builds) > 1:
            raise InputError(
                f"advise: the collective rows hold several builds ({', '.join(builds)}); "
                "choose one with build=LABEL"
            )
        self.build = build if build is not None else (builds[0] if builds else None)
        coll = [r for r in coll if str(known(r.build)) == str(self.build)]
        self.groups: dict[tuple[str, int], list[_Group]] = {}
        by_group: dict[tuple[str, bool], list[Row]] = {}
        for r in coll:
            by_group.setdefault((str(known(r.backend)), bool(known(r.graph))), []).append(r)
        for key in sorted(by_group, key=_preference):
            self._add_group(key, by_group[key])

    def _add_group(self, key: tuple[str, bool], group_rows: list[Row]) -> None:
        """The curves of one (backend, graph) group, per (op, ranks), with the paths,
        transports and NCCL switches of the rows behind each."""
        for (_b, op, n), curve in build_curves(group_rows, CURVE_OPS).items():
            mine = [r for r in group_rows if known(r.op) == op and known(r.world_size) == n]
            paths = frozenset(str(p) for r in mine if (p := known(r.path)))
            label = f"{key[0]}{' graph' if key[1] else ''} {curve.dtype or ''}".strip()
            transports = frozenset(t for r in mine if (t := row_transport(r)))
            hints = frozenset(h for r in mine if (h := env_transport(r)))
            self.groups.setdefault((op, n), []).append(
                _Group(label, curve, paths, transports, hints, key[1])
            )

    def peak_busbw(self, op: str, n: int) -> float | None:
        """The largest bus bandwidth measured for ``op`` over ``n`` ranks (GB/s)."""
        best = None
        for g in self.groups.get((op, n), []):
            for size, t in zip(g.curve.sizes, g.curve.times_us, strict=True):
                bw = size / (t * 1e3) * busbw_factor(op, n)
                best = bw if best is None or bw > best else best
        return best

    def transport(self, op: str, n: int) -> tuple[str, str] | None:
        """(what NCCL used for ``op`` over ``n`` ranks, where that is known from): the
        rows' transport field, else their NCCL switches; None when neither says."""
        groups = self.groups.get((op, n), [])
        said = sorted(frozenset().union(*(g.transports for g in groups)))
        if said:
            return " / ".join(said), "transport NCCL reported"
        hints: set[tuple[str, str]] = set().union(*(g.env_hints for g in groups))
        if hints:
            return (
                " / ".join(sorted({w for w, _ in hints})),
                "; ".join(sorted({why for _, why in hints})),
            )
        return None

    def has(self, op: str, n: int) -> bool:
        return bool(self.groups.get((op, n)))

    def paths(self, op: str, n: int) -> frozenset[str]:
        return frozenset().union(*(g.paths for g in self.groups.get((op, n), [])))

    def time(self, op: str, n: int, size: int, eager: bool = False) -> CommTime | None:
        """``op`` over ``n`` ranks at ``size`` bytes; ``eager``: issued by the host one
        call at a time (a pipeline's sends), so eager rows come before graph replays."""
        groups = self.groups.get((op, n))
        if groups and eager:
            groups = sorted(groups, key=lambda g: g.graph)  # stable: order kept otherwise
        if op == "send" and n == 2:
            # gpulane tokens sends between stages with isend/irecv outside its graphs
            if self.has("sendrecv", 2):
                return self.time("sendrecv", 2, size, eager=True)
            got = self.time("all_gather", 2, 2 * size, eager=True)
            if got is None:
                return None
            return CommTime(
                got.time_us, got.source + " (as 2-rank all_gather of 2x)", got.extrapolated
            )
        if not groups and op == "all_gather" and self.has("all_reduce", n):
            # a ring all_gather of S bytes moves the bus bytes of an all_reduce of S / 2
            # ((n-1)/n x S against 2(n-1)/n x S / 2): the build's own curve, not a projection
            got = self.time("all_reduce", n, max(1, size // 2), eager)
            if got is None:
                return None
            return CommTime(
                got.time_us, got.source + " (as all_reduce of half the bytes)", got.extrapolated
            )
        if not groups:
            return None
        chosen = next((g for g in groups if g.curve.sizes[0] <= size <= g.curve.sizes[-1]), None)
        if chosen is None:  # outside every range: the one that reaches closest
            below = size < min(g.curve.sizes[0] for g in groups)
            chosen = groups[0] if below else max(groups, key=lambda g: g.curve.sizes[-1])
        t, outside = curve_time(chosen.curve, size)
        return CommTime(t, f"measured {chosen.label}", outside)


@dataclass(frozen=True)
class Projection:
    """Collective time from a path's expected bandwidth: latency + bytes / bandwidth."""

    efficiency: Mapping[str, float]  # path kind (nvlink, pcie) -> fraction of line rate
    latency_us: Mapping[str, float]  # path kind -> per-call latency
    # P2P off: each collective staged through host memory (NCCL SHM) at the host link's
    # rate, paying a staged copy's latency on top of the call's
    host_staged_extra_us: float = 0.0
    p2p: bool = True

    def time(self, op: str, n: int, size: int, label: str | None, gbps: float | None) -> CommTime:
        if gbps is None or label is None:
            raise InputError(
                f"advise: no measured {op} over {n} ranks and no expected bandwidth for the "
                "path to project it from; give run=/build= with that collective, or "
                "topology= (a gpulane topo --json file) to project from"
            )
        kind = "nvlink" if label_kind(label) == "nvlink" else "pcie"
        eff = float(self.efficiency.get(kind, 1.0))
        lat = float(self.latency_us.get(kind, 10.0))
        staged = ""
        if not self.p2p:
            lat += self.host_staged_extra_us
            staged = f", staged through host memory (P2P off, +{self.host_staged_extra_us:g} us)"
        t = lat + size * busbw_factor(op, n) / (eff * gbps * 1e3)
        return CommTime(t, f"projected {label} {gbps:.1f} GB/s x {eff:.2f}{staged}")


@dataclass
class Comms:
    """Where a collective's time comes from: measured curves of the build where they
    cover the op, ranks and path, else the projection from the placement's paths."""

    measured: MeasuredComm | None
    projection: Projection
    projected_only: bool = False  # what-if: never use the measured curves

    def time(self, op: str, n: int, size: int, label: str | None, gbps: float | None) -> CommTime:
        m = self.measured
        if m is not None and not self.projected_only:
            if op == "send":
                paths = m.paths("sendrecv" if m.has("sendrecv", 2) else "all_gather", 2)
            else:
                paths = m.paths(op, n)
            if label is None or not paths or label in paths:
                got = m.time(op, n, size)
                if got is not None:
                    return got
        return self.projection.time(op, n, size, label, gbps)

    def transport(self, op: str, n: int, label: str | None) -> tuple[str, str] | None:
        """What NCCL used for ``op`` over ``n`` ranks on this build, where the measured
        rows say (their transport field or NCCL switches), for the path ``label``."""
        m = self.measured
        if m is None or self.projected_only:
            return None
        paths = m.paths(op, n)
        if label is not None and paths and label not in paths:
            return None
        return m.transport(op, n)

    def link(self, n: int, label: str | None, gbps: float | None) -> tuple[float | None, str]:
        """The bandwidth the rule of thumb compares with: the build's peak measured
        all-reduce bus bandwidth over ``n`` ranks where measured, else the path's."""
        m = self.measured
        if m is not None and not self.projected_only:
            paths = m.paths("all_reduce", n)
            if label is None or not paths or label in paths:
                peak = m.peak_busbw("all_reduce", n)
                if peak is not None:
                    return peak, "peak measured all-reduce busbw"
        return gbps, f"expected {label} bandwidth" if label else "unknown"
