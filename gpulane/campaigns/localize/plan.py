"""Which GPU subsets to measure, and what their figures name: a pure planner.

The units are GPU names (``GPU0``..) on one node, or ``node:GPU`` names across nodes: the
plans are the campaign planner's (:mod:`gpulane.campaigns.plans`) over those names.

- ``pairs``: every pair, n(n-1)/2 subsets.
- ``ring``: each GPU with the next on the ring of GPUs (n subsets; stride 1).
- ``halving``: :class:`~gpulane.campaigns.halving.Halving` from the whole set down
  (about log2 n rounds); below 4 GPUs there is nothing to halve and it measures pairs.

Every search measures the whole set first (the reference under the same conditions). With
two GPUs, pairs, ring and halving are all the one pair, which cannot tell a slow GPU from a
slow link: each GPU is also measured alone (algbw, one rank) and compared with the other.

What the figures name (:func:`judge_pairs`): a GPU whose solo figure is slow; else, GPUs
in the most slow pairs first, a GPU in more than half of the measured pairs that hold it,
at least two, slow, counting only pairs no GPU named before it explains (a slow GPU slows
every pair it is in, so a healthy GPU's pairs with two slow GPUs do not name it); else
each slow pair on its own (a slow link slows only its pair).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpulane.campaigns import plans
from gpulane.campaigns.halving import Halving, unique_nodes
from gpulane.errors import InputError

PATTERNS = ("pairs", "halving", "ring")
Subset = list[str]


@dataclass
class Localized:
    """What a search named, and every figure that shows it."""

    pattern: str
    units: list[str]
    gpus: list[str] = field(default_factory=list)  # named alone (a slow GPU)
    pairs: list[tuple[str, str]] = field(default_factory=list)  # named as a pair (a slow link)
    sets: list[list[str]] = field(default_factory=list)  # named as a group (halving "between")
    reference: float | None = None  # the figure a healthy subset of that size reaches
    steps: list[tuple[Subset, float]] = field(default_factory=list)
    rounds: int = 0
    note: str = ""

    @property
    def found(self) -> bool:
        return bool(self.gpus or self.pairs or self.sets)

    def figure(self, subset: Sequence[str]) -> float | None:
        want = sorted(subset)
        for s, f in self.steps:
            if sorted(s) == want:
                return f
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "units": self.units,
            "gpus": self.gpus,
            "pairs": [list(p) for p in self.pairs],
            "sets": self.sets,
            "reference_gbps": self.reference,
            "rounds": self.rounds,
            "measurements": len(self.steps),
            "note": self.note,
            "steps": [{"subset": s, "figure_gbps": f} for s, f in self.steps],
        }


def check_pattern(pattern: str) -> str:
    p = str(pattern).strip().lower()
    if p not in PATTERNS:
        raise InputError(
            f"localize pattern: expected one of {', '.join(PATTERNS)}, got {pattern!r}"
        )
    return p


def judge_pairs(
    units: Sequence[str], steps: Sequence[tuple[Sequence[str], float]], tolerance: float
) -> tuple[list[str], list[tuple[str, str]], float | None]:
    """(GPUs named, pairs named, pair reference) from solo and pair figures."""
    solos = {s[0]: f for s, f in steps if len(s) == 1}
    pairs = {(s[0], s[1]): f for s, f in steps if len(s) == 2}
    gpus: list[str] = []
    if len(solos) >= 2:
        best = max(solos.values())
        gpus = [u for u in units if u in solos and solos[u] < tolerance * best]
    ref = max(pairs.values()) if pairs else None
    slow = [p for p, f in pairs.items() if ref is not None and f < tolerance * ref]
    if len(units) >= 3:
        # Most slow pairs first, then what they leave unexplained: a healthy GPU's pairs
        # with two sick GPUs are slow too (seen on the 4x H200 with the GPU0-GPU1 link kept
        # full: GPU2 and GPU3 were slow with GPU0 and GPU1 only, fine with each other), so
        # a GPU counts only the slow pairs that no GPU named before it explains.
        left = [p for p in slow if p[0] not in gpus and p[1] not in gpus]
        while left:
            counts = {u: sum(u in p for p in left) for u in units if u not in gpus}
            most = max(counts.values(), default=0)
            top = [u for u, c in counts.items() if c == most]
            if most < 2 or not all(
                most > len([p for p in pairs if u in p and not (set(p) & set(gpus))]) / 2
                for u in top
            ):
                break
            gpus.extend(top)
            left = [p for p in left if p[0] not in gpus and p[1] not in gpus]
    gpus = [u for u in units if u in gpus]
    named = [p for p in slow if p[0] not in gpus and p[1] not in gpus]
    return gpus, named, ref


class Search:
    """Batches of subsets to measure (``batch``), their figures back (``feed``), then
    ``result``. Higher figures are better (bus bandwidth; algbw for one GPU alone)."""

    def __init__(
        self,
        pattern: str,
        units: Sequence[str],
        tolerance: float = 0.8,
        node_failed: bool = False,
    ) -> None:
        self.pattern = check_pattern(pattern)
        self.units = unique_nodes(units)
        if len(self.units) < 2:
            raise InputError(f"localization needs at least 2 GPUs, got {len(self.units)}")
        if not 0 < tolerance <= 1:
            raise InputError(f"localize tolerance: expected a fraction in (0, 1], got {tolerance}")
        self.tolerance = tolerance
        # Two GPUs: the pair is the whole node; it is named when the node-level check
        # failed and neither GPU is slow alone (nothing else is left to blame).
        self.node_failed = node_failed
        self.steps: list[tuple[Subset, float]] = []
        self.rounds = 0
        self.note = ""
        self._halving: Halving | None = None
        self._crossing: list[str] | None = None  # the set whose cross pairs follow halving
        self._queue: list[list[Subset]] = [[list(self.units)]]  # the whole set first
        n = len(self.units)
        if n == 2:
            self.note = "2 GPUs: each alone, then the pair"
            self._queue.append([[u] for u in self.units])
        elif self.pattern == "halving" and n < 4:
            self.note = f"{n} GPUs: nothing to halve, every pair measured"
        if self.pattern == "halving" and n >= 4:
            self._pairs: list[Subset] = []
        elif self.pattern == "ring":
            self._pairs = plans.ring_pairs(self.units)
        else:
            self._pairs = plans.node_pairs(self.units)
        if self._pairs:
            self._queue += plans.disjoint_rounds(self._pairs)

    def batch(self) -> list[Subset]:
        if self._halving is not None:
            b = self._halving.batch()
            if b or not self._cross_pairs():
                return b
        return [list(s) for s in self._queue[0]] if self._queue else []

    def _cross_pairs(self) -> bool:
        """When halving ends naming a set of 3 or more GPUs (each half fine alone: the slow
        part is between them), the pairs across its two halves are measured next, so that a
        slow link between the halves is named as a pair. True when such pairs are queued."""
        if self._halving is None or self._crossing is not None:
            return bool(self._queue)
        h = self._halving.result()
        self._crossing = list(h.slow) if len(h.slow) >= 3 else []
        if self._crossing:
            half = len(self._crossing) // 2
            left, right = self._crossing[:half], self._crossing[half:]
            self._queue = plans.disjoint_rounds([[a, b] for a in left for b in right])
        return bool(self._queue)

    def feed(self, figures: Sequence[float]) -> None:
        figs = [float(f) for f in figures]
        batch = self.batch()
        if len(figs) != len(batch):
            raise ValueError(f"expected {len(batch)} figures, got {len(figs)}")
        self.steps += [(list(s), f) for s, f in zip(batch, figs, strict=True)]
        if self._halving is not None and self._crossing is None:
            self._halving.feed(figs)  # it counts its rounds itself
            return
        self.rounds += 1
        self._queue.pop(0)
        if self._halving is not None:
            return  # the pairs across a set halving named
        if self.pattern == "halving" and len(self.units) >= 4 and not self._queue:
            # The whole set was measured: the halving search goes on from its figure.
            self._halving = Halving(self.units, tolerance=self.tolerance, first=figs[0])
            self.rounds -= 1  # Halving counts the whole set's round itself

    def result(self) -> Localized:
        out = Localized(self.pattern, list(self.units), steps=list(self.steps), note=self.note)
        out.rounds = self.rounds
        if self._halving is not None:
            h = self._halving.result()
            out.rounds += h.rounds
            out.reference = h.reference
            out.note = out.note or h.note
            if len(h.slow) == 1:
                out.gpus = list(h.slow)
            elif len(h.slow) == 2:
                out.pairs = [(h.slow[0], h.slow[1])]
            elif h.slow:
                cross = [
                    (st, f)
                    for st, f in self.steps
                    if len(st) == 2
                    and self._crossing
                    and st[0] in self._crossing
                    and st[1] in self._crossing
                ]
                gpus, pairs, _ = judge_pairs(self._crossing or [], cross, self.tolerance)
                out.gpus, out.pairs = gpus, pairs
                if not (gpus or pairs) and len(h.slow) < len(self.units):
                    out.sets = [list(h.slow)]
                elif not (gpus or pairs):
                    # Every half and every pair across them is fine: no GPU or pair accounts
                    # for it on its own (the whole set is not comparable with its halves).
                    out.note = "no GPU or pair is slow on its own; the halves are fine apart"
            return out
        out.gpus, out.pairs, out.reference = judge_pairs(self.units, self.steps, self.tolerance)
        if len(self.units) == 2 and self.node_failed and not out.gpus:
            out.pairs = [(self.units[0], self.units[1])]
            out.note = "2 GPUs, neither slow alone: the node's figure falls short on their link"
        if not out.found:
            out.note = out.note or "no subset is slower than the others"
        return out


def simulate(
    pattern: str,
    units: Sequence[str],
    figure_of: Any,
    tolerance: float = 0.8,
    node_failed: bool = False,
) -> Localized:
    """Drive a search with ``figure_of(subset) -> float`` (a simulation, or a test)."""
    search = Search(pattern, units, tolerance, node_failed)
    while batch := search.batch():
        search.feed([float(figure_of(list(s))) for s in batch])
    return search.result()


def node_gpu_units(nodes: Sequence[str], gpus_per_node: int) -> list[str]:
    """``node:GPUi`` names for node x GPU plans (a whole allocation's GPUs as units)."""
    if gpus_per_node < 1:
        raise InputError(f"gpus_per_node: expected >= 1, got {gpus_per_node}")
    return [f"{n}:GPU{i}" for n in unique_nodes(nodes) for i in range(gpus_per_node)]
