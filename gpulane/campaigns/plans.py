"""Acceptance plans for a cluster, as pure functions over node names.

- :func:`per_node`: every node alone (its intra-node figures), one job each.
- :func:`node_pairs` / :func:`pair_rounds`: every pair of nodes (an all-reduce between the
  two finds a bad NIC, cable or switch port); rounds of disjoint pairs can run side by side:
  n-1 rounds.
- :func:`ring_rounds`: every node against its neighbours (the next node, and the node
  ``stride`` further for each stride), in 2 or 3 rounds of disjoint pairs per stride
  whatever the node count: what a large cluster can afford where all pairs cannot. Each
  pair job uses every GPU of both nodes, so it crosses every rail of both.
- :func:`rails`: the rail groups of an allocation (GPU r of every node).
- :func:`whole`: the whole allocation at once.
- :func:`disjoint_rounds`: any list of jobs packed into rounds that share no node.
- :func:`halving_search` (:mod:`gpulane.campaigns.halving`): split a slow set in halves,
  level by level, until it names the nodes that drag it down.

Nothing here talks to Slurm: the caller turns each subset into a job (``--nodelist``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations

from gpulane.campaigns.halving import (
    Halving,
    HalvingResult,
    Measure,
    halving_search,
    unique_nodes,
)
from gpulane.errors import InputError

__all__ = [
    "Halving",
    "HalvingResult",
    "Measure",
    "disjoint_rounds",
    "halving_search",
    "node_pairs",
    "pair_rounds",
    "per_node",
    "plan",
    "rails",
    "ring_pairs",
    "ring_rounds",
    "whole",
]

_unique = unique_nodes


def per_node(nodes: Sequence[str]) -> list[list[str]]:
    """One subset per node: each node's intra-node figures."""
    return [[n] for n in _unique(nodes)]


def whole(nodes: Sequence[str]) -> list[list[str]]:
    """One subset: the whole allocation."""
    ns = _unique(nodes)
    return [ns] if ns else []


def node_pairs(nodes: Sequence[str]) -> list[list[str]]:
    """Every unordered pair of distinct nodes, in list order: n(n-1)/2 subsets."""
    return [[a, b] for a, b in combinations(_unique(nodes), 2)]


def pair_rounds(nodes: Sequence[str]) -> list[list[list[str]]]:
    """Every pair exactly once, grouped in rounds of disjoint pairs (the circle method):
    the pairs of one round share no node and can run at the same time. n-1 rounds for an
    even n, n rounds for an odd n (one node rests each round)."""
    ns: list[str | None] = list(_unique(nodes))
    if len(ns) < 2:
        return []
    if len(ns) % 2:
        ns.append(None)  # the resting slot
    n = len(ns)
    place = {v: i for i, v in enumerate(ns)}  # ns.index(a) per pair was O(n^3) in all
    rounds: list[list[list[str]]] = []
    ring = ns[1:]
    for _ in range(n - 1):
        order = [ns[0], *ring]
        pairs = []
        for i in range(n // 2):
            a, b = order[i], order[n - 1 - i]
            if a is not None and b is not None:
                pairs.append([a, b] if place[a] < place[b] else [b, a])
        rounds.append(pairs)
        ring = ring[-1:] + ring[:-1]
    return rounds


def disjoint_rounds(jobs: Sequence[Sequence[str]]) -> list[list[list[str]]]:
    """``jobs`` (node subsets) in rounds whose jobs share no node, in their order: each
    job goes into the first round where none of its nodes is busy yet."""
    rounds: list[list[list[str]]] = []
    busy: list[set[str]] = []
    for job in jobs:
        nodes = list(job)
        for r, used in zip(rounds, busy, strict=True):
            if used.isdisjoint(nodes):
                r.append(nodes)
                used.update(nodes)
                break
        else:
            rounds.append([nodes])
            busy.append(set(nodes))
    return rounds


def ring_pairs(nodes: Sequence[str], strides: Sequence[int] = (1,)) -> list[list[str]]:
    """Each node with the node ``stride`` after it on the ring of ``nodes``, for each
    stride: n pairs per stride (one for 2 nodes; a stride that repeats a pair adds none)."""
    ns = _unique(nodes)
    n = len(ns)
    pairs: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for stride in strides:
        if stride < 1:
            raise InputError(f"ring stride: expected >= 1, got {stride}")
        for i in range(n):
            a, b = ns[i], ns[(i + stride) % n]
            key = frozenset((a, b))
            if a != b and key not in seen:
                seen.add(key)
                pairs.append([a, b] if i < (i + stride) % n else [b, a])
    return pairs


def ring_rounds(nodes: Sequence[str], strides: Sequence[int] = (1,)) -> list[list[list[str]]]:
    """The ring's pairs in rounds of disjoint pairs: for each stride, pairs (i, i+s) with
    i even in one round, odd in the next, and the pair that closes an odd ring in a third
    one; 2 or 3 rounds per stride for any n, against n-1 for all pairs."""
    rounds: list[list[list[str]]] = []
    for stride in strides:
        pairs = ring_pairs(nodes, [stride])
        # Rounds by starting index parity keep stride-1 rounds full (n/2 pairs each).
        even = [p for i, p in enumerate(pairs) if i % 2 == 0]
        odd = [p for i, p in enumerate(pairs) if i % 2 == 1]
        rounds += disjoint_rounds(even) + disjoint_rounds(odd)
    # The last pair of an odd ring shares a node with the first: a round of its own.
    return [r for r in _repack(rounds) if r]


def _repack(rounds: list[list[list[str]]]) -> list[list[list[str]]]:
    """Move jobs into earlier rounds where their nodes are free (fewer, fuller rounds)."""
    return disjoint_rounds([job for r in rounds for job in r])


def rails(nodes: Sequence[str], gpus_per_node: int) -> list[list[tuple[str, int]]]:
    """Rail r: GPU r of every node (on a rail-optimised fabric, the GPUs behind one leaf
    switch): ``gpus_per_node`` groups of len(nodes) ranks, which can run side by side in
    one allocation (the rails share no link)."""
    if gpus_per_node < 1:
        raise InputError(f"gpus_per_node: expected >= 1, got {gpus_per_node}")
    ns = _unique(nodes)
    return [[(n, r) for n in ns] for r in range(gpus_per_node)]


def plan(kind: str, nodes: Sequence[str]) -> list[list[str]]:
    """Subsets for a named plan: per_node, pairs, ring, whole."""
    kinds: dict[str, Callable[[Sequence[str]], list[list[str]]]] = {
        "per_node": per_node,
        "pairs": node_pairs,
        "ring": ring_pairs,
        "whole": whole,
    }
    if kind not in kinds:
        raise InputError(f"plan: expected one of {sorted(kinds)}, got {kind!r}")
    return kinds[kind](nodes)
