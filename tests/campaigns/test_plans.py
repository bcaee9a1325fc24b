"""Cluster acceptance plans: per node, node pairs (and rounds), halving search."""

from __future__ import annotations

import itertools

import pytest

from gpulane.campaigns.plans import (
    halving_search,
    node_pairs,
    pair_rounds,
    per_node,
    plan,
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
