"""The halving search for slow nodes, level by level, as a pure planner.

It starts from one run over the whole allocation. When that run is slow (below
``tolerance`` times the reference: ``good`` when given, else the best figure any subset
reaches), the set is split in halves and both are measured; every slow half is split
again, and all the halves of one level are measured side by side (they share no node),
so the search takes about log2(n) rounds of jobs, not 2 log2(n) jobs one after the other.
A slow set too small to split (fewer than 2 * ``min_size`` nodes) is resolved by
measuring each of its nodes beside healthy partners (nodes of a half found good), again
side by side. When both halves of a slow set are fine alone, what is slow is the way
between them (a switch uplink): the set is named as a whole.

Two guards keep a busy moment from naming a healthy node (jobs side by side share CPUs on a
small test cluster, a switch on a real one). A node is named by its resolve job only when
that job is slow against the reference *and* against the best job of the same batch, which
ran at the same time under the same load. A set that would be named as a whole (none of
its nodes slow beside a healthy partner, or no partner to try) rests on one measurement:
it is measured again, in one more round, and named only when it is slow again.

:class:`Halving` hands out batches (:meth:`Halving.batch`) and takes their figures
(:meth:`Halving.feed`), so a caller can run each batch as real jobs side by side, or a
simulation can replay figures; :func:`halving_search` drives it with a measure function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpulane.errors import InputError

Measure = Callable[[list[str]], float]


def unique_nodes(nodes: Sequence[str]) -> list[str]:
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


@dataclass
class HalvingResult:
    slow: list[str]  # the nodes found to drag the figure down (empty: none)
    reference: float | None  # the figure a good subset reaches
    steps: list[tuple[list[str], float]] = field(default_factory=list)  # every measurement
    note: str = ""
    rounds: int = 0  # batches of jobs run side by side

    @property
    def measurements(self) -> int:
        return len(self.steps)


@dataclass
class _Suspect:
    nodes: list[str]
    between: bool  # both halves were fine alone: the slow part is the way between them


class Halving:
    """The search as batches: ``while (b := h.batch()): h.feed([measure(s) for s in b])``."""

    def __init__(
        self,
        nodes: Sequence[str],
        good: float | None = None,
        tolerance: float = 0.9,
        min_size: int = 2,
        first: float | None = None,
    ) -> None:
        ns = unique_nodes(nodes)
        if not 0 < tolerance <= 1:
            raise InputError(f"tolerance: expected a fraction in (0, 1], got {tolerance}")
        if min_size < 1:
            raise InputError(f"min_size: expected >= 1, got {min_size}")
        if len(ns) < min_size:
            raise InputError(f"halving search needs at least {min_size} nodes, got {len(ns)}")
        self.nodes = ns
        self.good = good
        self.tolerance = tolerance
        self.min_size = min_size
        self.ref = good
        self.steps: list[tuple[list[str], float]] = []
        self.healthy: list[str] = []
        self.slow: list[str] = []
        self.note = ""
        self.rounds = 0
        self._suspects: list[_Suspect] = []
        self._unresolved: list[list[str]] = []  # sets with no partner, confirmed after
        self._done = False
        # what the batch handed out is for: ("top", None), ("split", [(set, figure)]),
        # ("resolve", [(suspect, node, subset)]), ("confirm", [set])
        self._stage: tuple[str, object] = ("top", None)
        self._batch: list[list[str]] = [list(ns)]
        if first is not None:  # the whole allocation was measured already
            self._batch = []
            self._record([list(ns)], [float(first)])
            self._after_top(float(first))

    # -- the protocol ------------------------------------------------------------------
    def batch(self) -> list[list[str]]:
        """The subsets to measure next, side by side (no node in two); [] when done."""
        return [] if self._done else [list(s) for s in self._batch]

    def feed(self, figures: Sequence[float]) -> None:
        """The figures of the last batch, in its order (higher is better)."""
        if self._done:
            raise RuntimeError("the halving search is over")
        figs = [float(f) for f in figures]
        if len(figs) != len(self._batch):
            raise ValueError(f"expected {len(self._batch)} figures, got {len(figs)}")
        batch = self._batch
        self._record(batch, figs)
        kind, data = self._stage
        if kind == "top":
            self._after_top(figs[0])
        elif kind == "split":
            self._after_split(data, figs)  # type: ignore[arg-type]
        elif kind == "resolve":
            self._after_resolve(data, figs)  # type: ignore[arg-type]
        else:
            self._after_confirm(data, figs)  # type: ignore[arg-type]

    def result(self) -> HalvingResult:
        slow = sorted(set(self.slow), key=self.nodes.index)
        note = self.note or ("" if slow else "no half is slower than the others")
        return HalvingResult(slow, self.ref, list(self.steps), note, self.rounds)

    # -- the search --------------------------------------------------------------------
    def _record(self, batch: list[list[str]], figs: list[float]) -> None:
        self.rounds += 1
        self.steps += [(list(s), f) for s, f in zip(batch, figs, strict=True)]

    def _is_slow(self, figure: float) -> bool:
        return self.ref is not None and figure < self.tolerance * self.ref

    def _after_top(self, top: float) -> None:
        ns = self.nodes
        if self.good is not None and not self._is_slow(top):
            self.note = "the whole set reaches the reference"
            return self._finish()
        if len(ns) < 2 * self.min_size:
            if self.good is None:
                self.note = "too few nodes to split; give good= to judge"
                return self._finish()
            self.note = "too few nodes to split"
            return self._confirm([list(ns)])
        self._split([(ns, top)])

    def _split(self, sets: list[tuple[list[str], float]]) -> None:
        """Measure the halves of every slow set big enough to split; the others wait as
        suspects for the resolve at the end (when the most healthy partners are known)."""
        big = []
        for nodes, figure in sets:
            if len(nodes) >= 2 * self.min_size:
                big.append((nodes, figure))
            else:
                self._suspects.append(_Suspect(nodes, False))
        if not big:
            return self._resolve()
        halves = []
        for nodes, _ in big:
            half = len(nodes) // 2
            halves += [nodes[:half], nodes[half:]]
        self._stage = ("split", big)
        self._batch = halves

    def _after_split(self, big: list[tuple[list[str], float]], figs: list[float]) -> None:
        if self.good is None:
            best = max(figs)
            self.ref = best if self.ref is None else max(self.ref, best)
        slow_sets: list[tuple[list[str], float]] = []
        for i, (whole, figure) in enumerate(big):
            parts = [(self._batch[2 * i], figs[2 * i]), (self._batch[2 * i + 1], figs[2 * i + 1])]
            slow_parts = [(p, f) for p, f in parts if self._is_slow(f)]
            for p, f in parts:
                if not self._is_slow(f):
                    self.healthy += [x for x in p if x not in self.healthy]
            if slow_parts:
                slow_sets += slow_parts
            elif self._is_slow(figure):
                # Each half is fine alone: what is slow is the way between them.
                self._suspects.append(_Suspect(list(whole), True))
        self._split(slow_sets)

    def _resolve(self) -> None:
        suspects, self._suspects = self._suspects, []
        need = max(self.min_size - 1, 0)
        jobs: list[tuple[_Suspect, str, list[str]]] = []
        whole: list[list[str]] = []  # no healthy partner to tell its nodes apart
        used = 0
        for s in suspects:
            outside = [h for h in self.healthy if h not in s.nodes]
            if len(outside) < need or (self.min_size > 1 and not outside):
                whole.append(s.nodes)
                continue
            for x in s.nodes:
                # Different healthy partners for each job where there are enough, so the
                # jobs of one batch share no node and run side by side.
                partners = [outside[(used + k) % len(outside)] for k in range(need)]
                used += need
                jobs.append((s, x, [*partners, x]))
        if not jobs:
            return self._confirm(whole)
        self._stage = ("resolve", jobs)
        self._batch = [j[2] for j in jobs]
        self._unresolved = whole

    def _after_resolve(
        self, jobs: list[tuple[_Suspect, str, list[str]]], figs: list[float]
    ) -> None:
        # The best job of this batch ran under the same load as the others: a node is
        # slow when its job is slow against the reference and against that job too.
        same_time = self.tolerance * max(figs)
        by_suspect: dict[int, tuple[_Suspect, list[str]]] = {}
        for (s, x, _), f in zip(jobs, figs, strict=True):
            named = by_suspect.setdefault(id(s), (s, []))[1]
            if self._is_slow(f) and f < same_time:
                named.append(x)
        whole, self._unresolved = self._unresolved, []
        for s, named in by_suspect.values():
            self.slow += named
            if not named:
                # None of its nodes is slow beside a healthy one: the set itself (the way
                # between its parts, or nodes slow only together) is what is slow, if a
                # second measurement of it says so.
                whole.append(s.nodes)
        self._confirm(whole)

    def _confirm(self, sets: list[list[str]]) -> None:
        """Measure once more the sets to be named as a whole (side by side: they share no
        node); each is named only when slow again."""
        if not sets:
            return self._finish()
        self._stage = ("confirm", sets)
        self._batch = [list(s) for s in sets]

    def _after_confirm(self, sets: list[list[str]], figs: list[float]) -> None:
        passed = []
        for nodes, f in zip(sets, figs, strict=True):
            if self._is_slow(f):
                self.slow += nodes
            else:
                passed.append(",".join(nodes))
        if passed:
            again = "; ".join("{" + p + "}" for p in passed)
            self.note = f"{self.note + '; ' if self.note else ''}slow once, not again: {again}"
        self._finish()

    def _finish(self) -> None:
        self._done = True
        self._batch = []


def halving_search(
    nodes: Sequence[str],
    measure: Measure,
    good: float | None = None,
    tolerance: float = 0.9,
    min_size: int = 2,
    first: float | None = None,
) -> HalvingResult:
    """Find the nodes that drag ``measure`` down (see :class:`Halving`); ``measure(subset)``
    returns a figure where higher is better (bus bandwidth). The subsets of one batch are
    measured one after the other here; a campaign runs them side by side."""
    search = Halving(nodes, good, tolerance, min_size, first)
    while batch := search.batch():
        search.feed([float(measure(list(s))) for s in batch])
    return search.result()
