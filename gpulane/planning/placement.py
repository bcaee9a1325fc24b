"""Where the split's ranks go: TP groups on the GPUs that share the best paths of the
topology, pipeline stages ordered so that neighbours are close; and the topologies a
prediction can be made on (read from ``gpulane topo --json``, synthetic, or a what-if
such as the same box on PCIe Gen3 x4 risers)."""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpulane.errors import InputError
from gpulane.topology.bandwidth import expected_pair_gbps
from gpulane.topology.model import Gpu, Pair, PcieLink, Topology
from gpulane.topology.paths import label_badness, label_kind, nvlink_count, worst_label
from gpulane.units import PCIE_LANE_GBPS


def synthetic_topology(n: int, model: str | None) -> Topology:
    """``n`` GPUs of ``model`` with nothing known about their links."""
    return Topology(gpus=[Gpu(name=f"GPU{i}", index=i, model=model) for i in range(n)])


_WHAT_IF = re.compile(r"^(?:(pcie):(?:gen)?(\d)x(\d{1,2})|(nvlink):(\d{1,2}))$", re.IGNORECASE)


def apply_what_if(topo: Topology, spec: str) -> tuple[Topology, str]:
    """The topology with every GPU moved: ``pcie:3x4`` (PCIe Gen3 x4 links, e.g. risers,
    and no NVLink between the GPUs: pairs through the host bridge, PHB), or ``nvlink:18``
    (every pair of GPUs bonded by 18 NVLinks). Returns (topology, description)."""
    m = _WHAT_IF.match(spec.strip())
    if not m:
        raise InputError(
            f"what_if: expected pcie:GENxWIDTH (e.g. pcie:3x4) or nvlink:LINKS (e.g. "
            f"nvlink:18), got {spec!r}"
        )
    out = copy.deepcopy(topo)
    names = [g.name for g in out.gpus]
    if m.group(1):
        gen, width = int(m.group(2)), int(m.group(3))
        if gen not in PCIE_LANE_GBPS:
            raise InputError(f"what_if: PCIe Gen{gen} is not one of {sorted(PCIE_LANE_GBPS)}")
        for g in out.gpus:
            g.pcie = PcieLink(gen=gen, gen_max=gen, width=width, width_max=width)
            g.upstream = []
            g.nvlink_gbps = {}
        keep = {
            (p.a, p.b): p
            for p in out.pairs
            if p.a in names and p.b in names and nvlink_count(p.label) is None
        }
        label_of = {k: p.label for k, p in keep.items()}
        desc = f"every GPU on PCIe Gen{gen} x{width}, no NVLink (projection)"
    else:
        links = int(m.group(5))
        label_of = {}
        desc = f"every GPU pair on {links} NVLinks (projection)"
    others = [p for p in out.pairs if not (p.a in names and p.b in names)]
    pairs = []
    for a, b in itertools.combinations(names, 2):
        if m.group(1):
            label = label_of.get((a, b)) or label_of.get((b, a)) or "PHB"
            pairs.append(Pair(a=a, b=b, label=label, kind=label_kind(label)))
        else:
            pairs.append(Pair(a=a, b=b, label=f"NV{links}", kind="nvlink", nvlinks=links))
    out.pairs = pairs + others
    return out, desc


@dataclass(frozen=True)
class Placement:
    groups: tuple[tuple[str, ...], ...]  # TP groups, in stage order
    tp_label: str | None  # worst path inside a TP group
    tp_gbps: float | None
    pp_label: str | None  # worst path between neighbouring stages
    pp_gbps: float | None

    def describe(self) -> str:
        return " | ".join("+".join(g) for g in self.groups)


def _partitions(items: Sequence[str], size: int) -> Iterable[list[tuple[str, ...]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for others in itertools.combinations(rest, size - 1):
        group = (first, *others)
        left = [x for x in rest if x not in others]
        for tail in _partitions(left, size):
            yield [group, *tail]


def _pair_label(topo: Topology, a: str, b: str) -> str | None:
    p = topo.pair(a, b)
    return p.label if p else None


def _worst(topo: Topology, pairs: Iterable[tuple[str, str]]) -> tuple[str | None, float | None]:
    labels, rates = [], []
    for a, b in pairs:
        label = _pair_label(topo, a, b)
        if label is None:
            return None, None
        labels.append(label)
        rates.append(expected_pair_gbps(topo, a, b))
    if not labels:
        return None, None
    known = [r for r in rates if r is not None]
    return worst_label(labels), (min(known) if len(known) == len(rates) else None)


def place(topo: Topology, gpus: int, tp: int, pp: int) -> Placement:
    """TP groups on the GPUs that share the best paths (the worst path inside any group as
    good as it can be), stages ordered so that neighbours are as close as they can be."""
    names = [g.name for g in sorted(topo.gpus, key=lambda g: g.index)][:gpus]
    if len(names) < gpus:
        raise InputError(f"advise: gpus={gpus} but the topology has {len(names)} GPUs")
    if not topo.pairs:
        groups = tuple(tuple(names[s * tp : (s + 1) * tp]) for s in range(pp))
        return Placement(groups, None, None, None, None)

    def inner(parts: Sequence[tuple[str, ...]]) -> list[tuple[str, str]]:
        return [pair for g in parts for pair in itertools.combinations(g, 2)]

    def cross(parts: Sequence[tuple[str, ...]]) -> list[tuple[str, str]]:
        return [(a, b) for x, y in itertools.pairwise(parts) for a, b in zip(x, y, strict=True)]

    def badness(label: str | None, gbps: float | None) -> tuple[tuple[int, int], float]:
        return (label_badness(label) if label else (99, 0), -(gbps or 0.0))

    best: tuple[Any, ...] | None = None
    chosen: list[tuple[str, ...]] = []
    for count, parts in enumerate(_partitions(names, tp)):
        if count >= 5000:
            break
        orders = itertools.permutations(parts) if pp <= 4 else [tuple(parts)]
        for order in orders:
            tl, tg = _worst(topo, inner(order))
            pl, pg = _worst(topo, cross(order))
            key = (badness(tl, tg), badness(pl, pg))
            if best is None or key < best:
                best, chosen = key, list(order)
    tl, tg = _worst(topo, inner(chosen))
    pl, pg = _worst(topo, cross(chosen))
    return Placement(tuple(chosen), tl, tg, pl, pg)
