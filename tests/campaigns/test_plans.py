"""Cluster acceptance plans: per node, node pairs (and rounds), ring, rails, halving search."""

from __future__ import annotations

import itertools
import math

import pytest

from gpulane.campaigns.plans import (
    Halving,
    disjoint_rounds,
    halving_search,
    node_pairs,
    pair_rounds,
    per_node,
    plan,
    rails,
    ring_pairs,
    ring_rounds,
    whole,
)
from gpulane.errors import InputError

NODES = [f"gpu{i:02d}" for i in range(1, 9)]


def test_per_node_and_whole() -> None:
    assert per_node(NODES[:3]) == [["gpu01"], ["gpu02"], ["gpu03"]]
    assert whole(NODES[:3]) == [["gpu01", "gpu02", "gpu03"]]
    assert whole([]) == []
    with pytest.raises(InputError, match="twice"):
        per_node(["a", "b", "a"])


def test_node_pairs_every_pair_once() -> None:
    pairs = node_pairs(NODES)
    assert len(pairs) == 8 * 7 // 2
    assert {tuple(p) for p in pairs} == set(itertools.combinations(NODES, 2))
    assert node_pairs(["a"]) == []
    assert plan("pairs", ["a", "b", "c"]) == [["a", "b"], ["a", "c"], ["b", "c"]]
    with pytest.raises(InputError, match="plan"):
        plan("triples", NODES)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9])
def test_pair_rounds_are_disjoint_and_complete(n: int) -> None:
    nodes = NODES[:n] if n <= 8 else [*NODES, "gpu09"]
    rounds = pair_rounds(nodes)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = []
    for r in rounds:
        used = [x for p in r for x in p]
        assert len(used) == len(set(used)), r  # no node twice in one round
        seen += [tuple(p) for p in r]
    assert sorted(seen) == sorted(itertools.combinations(nodes, 2))


def bandwidth(slow: set[str], good: float = 100.0, bad: float = 12.0):
    """An all-reduce between nodes is as fast as its slowest node."""
    calls: list[list[str]] = []

    def measure(subset: list[str]) -> float:
        calls.append(subset)
        return bad if slow & set(subset) else good

    return measure, calls


@pytest.mark.parametrize("culprit", NODES)
def test_halving_names_one_slow_node(culprit: str) -> None:
    measure, calls = bandwidth({culprit})
    result = halving_search(NODES, measure)
    assert result.slow == [culprit]
    assert result.reference == 100.0
    assert result.measurements == len(calls) <= 2 * 3 + 3  # about 2 log2(n), not n^2


def test_halving_no_slow_node() -> None:
    measure, _ = bandwidth(set())
    assert halving_search(NODES, measure).slow == []
    assert halving_search(NODES, measure, good=100.0).slow == []
    assert halving_search(NODES, measure, good=100.0).measurements == 1


def test_halving_two_slow_nodes_with_reference() -> None:
    measure, _ = bandwidth({"gpu02", "gpu07"})
    result = halving_search(NODES, measure, good=100.0)
    assert result.slow == ["gpu02", "gpu07"]


def test_halving_odd_count_and_tolerance() -> None:
    nodes = NODES[:7]

    def measure(subset: list[str]) -> float:
        return 80.0 if "gpu05" in subset else 100.0

    # 80 is within a 0.75 tolerance: nothing drags the set down that far.
    assert halving_search(nodes, measure, tolerance=0.75).slow == []
    assert halving_search(nodes, measure, tolerance=0.9).slow == ["gpu05"]


def test_halving_bad_link_between_halves() -> None:
    # Each half is fine; only sets spanning both halves are slow (a bad switch uplink).
    left, right = set(NODES[:4]), set(NODES[4:])

    def measure(subset: list[str]) -> float:
        s = set(subset)
        return 10.0 if s & left and s & right else 100.0

    result = halving_search(NODES, measure, good=100.0)
    assert set(result.slow) == set(NODES)  # cannot be narrowed to nodes: it is the link


def test_halving_single_node_measure() -> None:
    measure, _ = bandwidth({"gpu03"})
    result = halving_search(NODES[:5], measure, min_size=1)
    assert result.slow == ["gpu03"]


def test_halving_input_errors() -> None:
    measure, _ = bandwidth(set())
    with pytest.raises(InputError):
        halving_search(["a"], measure)
    with pytest.raises(InputError):
        halving_search(NODES, measure, tolerance=0)
    assert halving_search(["a", "b", "c"], measure).slow == []


# ------------------------------------------------ the patterns a large cluster can afford


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9, 16, 1024])
def test_ring_rounds_every_neighbour_in_two_or_three_rounds(n: int) -> None:
    nodes = [f"n{i:04d}" for i in range(n)]
    rounds = ring_rounds(nodes)
    assert len(rounds) <= 3 and len(rounds) == (1 if n == 2 else 2 if n % 2 == 0 else 3)
    pairs = []
    for r in rounds:
        used = [x for p in r for x in p]
        assert len(used) == len(set(used))  # side by side: no node twice in a round
        pairs += [frozenset(p) for p in r]
    want = {frozenset((nodes[i], nodes[(i + 1) % n])) for i in range(n)}
    assert set(pairs) == want and len(pairs) == len(want)  # each neighbour pair once


def test_ring_strides_and_input_errors() -> None:
    nodes = NODES  # 8
    pairs = ring_pairs(nodes, strides=(1, 4))
    assert len(pairs) == 8 + 4  # stride 4 on 8 nodes: each pair comes round twice
    assert ["gpu01", "gpu05"] in pairs and ["gpu01", "gpu08"] in pairs
    assert len(ring_rounds(nodes, strides=(1, 4))) == 3
    assert ring_pairs(["a"]) == [] and ring_rounds(["a"]) == []
    with pytest.raises(InputError, match="stride"):
        ring_pairs(nodes, strides=(0,))


def test_disjoint_rounds_pack_jobs_in_order() -> None:
    jobs = [["a", "b"], ["b", "c"], ["c", "d"], ["a", "d"], ["e"]]
    assert disjoint_rounds(jobs) == [
        [["a", "b"], ["c", "d"], ["e"]],
        [["b", "c"], ["a", "d"]],
    ]


def test_rails_are_gpu_r_of_every_node() -> None:
    groups = rails(NODES[:3], 8)
    assert len(groups) == 8 and groups[5] == [("gpu01", 5), ("gpu02", 5), ("gpu03", 5)]
    with pytest.raises(InputError):
        rails(NODES, 0)


@pytest.mark.parametrize("n", [8, 64, 1024])
def test_halving_batches_are_levels_side_by_side(n: int) -> None:
    nodes = [f"n{i:04d}" for i in range(n)]
    slow = {nodes[n // 3], nodes[-1]}
    search = Halving(nodes, good=100.0)
    rounds = 0
    while batch := search.batch():
        used = [x for s in batch for x in s]
        assert len(used) == len(set(used))  # one round of jobs that share no node
        search.feed([12.0 if slow & set(s) else 100.0 for s in batch])
        rounds += 1
    result = search.result()
    assert set(result.slow) == slow and result.rounds == rounds
    # the whole set, one round per level down to pairs, one to resolve the pairs
    assert rounds <= math.ceil(math.log2(n)) + 1


def test_halving_starts_from_a_whole_allocation_run() -> None:
    measure, calls = bandwidth(set())
    result = halving_search(NODES, measure, good=100.0, first=100.0)
    assert result.slow == [] and calls == []  # the allocation run said it all
    measure, calls = bandwidth({"gpu04"})
    result = halving_search(NODES, measure, good=100.0, first=12.0)
    assert result.slow == ["gpu04"] and NODES not in calls  # no second whole-set job
    search = Halving(NODES, good=100.0)
    with pytest.raises(ValueError, match="expected 1 figures"):
        search.feed([1.0, 2.0])


# ------------------------------------------- a busy moment does not name a healthy node


def test_halving_resolve_judges_a_node_against_its_own_batch() -> None:
    # gpu06 is slow. In the resolve round its healthy quarter-mate gpu05 is measured at a
    # busy moment, below the reference but as fast as the best job beside it: not named.
    def measure(subset: list[str]) -> float:
        if "gpu06" in subset:
            return 10.0
        if len(subset) == 2 and "gpu05" in subset:
            return 45.0  # a busy moment: under half the reference of 100
        return 100.0

    result = halving_search(NODES, measure, tolerance=0.5)
    assert result.slow == ["gpu06"]
    assert result.rounds == 4 and result.measurements == 7


def test_halving_set_slow_once_is_measured_again() -> None:
    # gpu06 is slow; the quarter {gpu07, gpu08} is slow once (a busy moment), so it is
    # resolved beside healthy partners (fine), then measured again as a set (fine).
    seen: list[list[str]] = []

    def measure(subset: list[str]) -> float:
        seen.append(subset)
        if "gpu06" in subset:
            return 10.0
        if subset == ["gpu07", "gpu08"] and seen.count(subset) == 1:
            return 30.0
        return 100.0

    result = halving_search(NODES, measure, tolerance=0.5)
    assert result.slow == ["gpu06"]
    assert seen.count(["gpu07", "gpu08"]) == 2 and result.rounds == 5
    assert "slow once, not again: {gpu07,gpu08}" in result.note


def test_halving_set_slow_twice_is_named() -> None:
    # Both halves fine alone, every set spanning them slow, at every measurement: the
    # link between is named as the whole set, after a second measurement of it.
    left = set(NODES[:4])
    calls: list[list[str]] = []

    def measure(subset: list[str]) -> float:
        calls.append(subset)
        s = set(subset)
        return 10.0 if s & left and s - left else 100.0

    result = halving_search(NODES, measure, good=100.0)
    assert set(result.slow) == set(NODES) and calls.count(NODES) == 2
    # too few nodes to split: named only when the second measurement agrees
    flaky = iter([10.0, 100.0])
    result = halving_search(NODES[:3], lambda s: next(flaky), good=100.0)
    assert result.slow == [] and "slow once, not again" in result.note
    result = halving_search(NODES[:3], lambda s: 10.0, good=100.0)
    assert result.slow == NODES[:3] and result.measurements == 2
