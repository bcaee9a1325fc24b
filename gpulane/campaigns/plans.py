"""Acceptance plans for a cluster, as pure functions over node names.

- :func:`per_node`: every node alone (its intra-node figures), one job each.
- :func:`node_pairs` / :func:`pair_rounds`: every pair of nodes (an all-reduce between the
  two finds a bad NIC, cable or switch port); rounds of disjoint pairs can run side by side.
- :func:`whole`: the whole allocation at once.
- :func:`halving_search`: given a measure over a subset of nodes (a figure where higher is
  better, such as all-reduce bus bandwidth), split a slow set in halves until it names the
  nodes that drag it down.

Nothing here talks to Slurm: the caller turns each subset into a job (``--nodelist``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from gpulane.errors import InputError

Measure = Callable[[list[str]], float]


def _unique(nodes: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for n in nodes:
        n = str(n).strip()
        if not n:
            continue
        if n in seen:
            raise InputError(f"node {n!r} is listed twice")
        seen.add(n)
        out.append(n)
    return out


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
    rounds: list[list[list[str]]] = []
    ring = ns[1:]
    for _ in range(n - 1):
        order = [ns[0], *ring]
        pairs = []
        for i in range(n // 2):
            a, b = order[i], order[n - 1 - i]
            if a is not None and b is not None:
                pairs.append([a, b] if ns.index(a) < ns.index(b) else [b, a])
        rounds.append(pairs)
        ring = ring[-1:] + ring[:-1]
    return rounds


def plan(kind: str, nodes: Sequence[str]) -> list[list[str]]:
    """Subsets for a named plan: per_node, pairs, whole."""
    kinds: dict[str, Callable[[Sequence[str]], list[list[str]]]] = {
        "per_node": per_node,
        "pairs": node_pairs,
        "whole": whole,
    }
    if kind not in kinds:
        raise InputError(f"plan: expected one of {sorted(kinds)}, got {kind!r}")
    return kinds[kind](nodes)


@dataclass
class HalvingResult:
    slow: list[str]  # the nodes found to drag the figure down (empty: none)
    reference: float | None  # the figure a good subset reaches
    steps: list[tuple[list[str], float]] = field(default_factory=list)  # every measurement
    note: str = ""

    @property
    def measurements(self) -> int:
        return len(self.steps)


def halving_search(
    nodes: Sequence[str],
    measure: Measure,
    good: float | None = None,
    tolerance: float = 0.9,
    min_size: int = 2,
) -> HalvingResult:
    """Find the nodes that drag ``measure`` down by splitting slow sets in halves.

    ``measure(subset)`` returns a figure where higher is better (bus bandwidth). A subset
    is slow when its figure is below ``tolerance`` times the reference: ``good`` when
    given (the figure a healthy set reaches), else the best figure seen among the halves.
    ``min_size`` is the smallest subset the measure makes sense on (2 for an all-reduce
    between nodes). Halving stops when a slow set cannot be split into halves of at least
    ``min_size``; then each of its nodes is measured beside healthy nodes (from a half
    found good) to name it, when there are enough healthy nodes for that.
    """
    ns = _unique(nodes)
    if not 0 < tolerance <= 1:
        raise InputError(f"tolerance: expected a fraction in (0, 1], got {tolerance}")
    if min_size < 1:
        raise InputError(f"min_size: expected >= 1, got {min_size}")
    if len(ns) < min_size:
        raise InputError(f"halving search needs at least {min_size} nodes, got {len(ns)}")
    steps: list[tuple[list[str], float]] = []
    healthy: list[str] = []
    ref: list[float | None] = [good]

    def run(subset: list[str]) -> float:
        figure = float(measure(list(subset)))
        steps.append((list(subset), figure))
        return figure

    def is_slow(figure: float) -> bool:
        return ref[0] is not None and figure < tolerance * ref[0]

    def note_good(subset: list[str], figure: float) -> None:
        if ref[0] is None or (good is None and figure > ref[0]):
            ref[0] = figure
        healthy.extend(x for x in subset if x not in healthy)

    def search(subset: list[str], top: float | None = None) -> list[str]:
        if len(subset) < 2 * min_size:
            return resolve(subset)
        half = len(subset) // 2
        a, b = subset[:half], subset[half:]
        fa, fb = run(a), run(b)
        if good is None:
            best = max(fa, fb)
            ref[0] = best if ref[0] is None else max(ref[0], best)
        slow = []
        for part, figure in ((a, fa), (b, fb)):
            if is_slow(figure):
                slow.append(part)
            else:
                note_good(part, figure)
        if not slow:
            if top is not None and not is_slow(top):
                return []  # the whole set is as good as its halves: nothing drags it down
            # Each half is fine alone: what is slow is the way between them.
            return resolve(subset, between=True)
        out: list[str] = []
        for part in slow:
            out += search(part)
        return out

    def resolve(subset: list[str], between: bool = False) -> list[str]:
        partners = [h for h in healthy if h not in subset][: max(min_size - 1, 0)]
        if len(partners) < min_size - 1 or (min_size > 1 and not partners):
            return list(subset)
        named = []
        for x in subset:
            figure = run([*partners, x])
            if is_slow(figure):
                named.append(x)
        if not named and between:
            return list(subset)
        return named or list(subset)

    top = run(ns)
    if good is not None and not is_slow(top):
        return HalvingResult([], good, steps, "the whole set reaches the reference")
    if len(ns) < 2 * min_size:
        if good is None:
            return HalvingResult([], None, steps, "too few nodes to split; give good= to judge")
        return HalvingResult(list(ns), good, steps, "too few nodes to split")
    slow = search(ns, top)
    note = "" if slow else "no half is slower than the others"
    return HalvingResult(sorted(slow, key=ns.index), ref[0], steps, note)
