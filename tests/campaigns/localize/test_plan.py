"""The localization planner on figures made up to hold one slow GPU or one slow link:
every pattern, 2, 3, 4 and 8 GPUs and 8 nodes x 8 GPUs."""

from __future__ import annotations

import json
import math

import pytest

from gpulane.campaigns.localize.plan import (
    Search,
    judge_pairs,
    node_gpu_units,
    simulate,
)
from gpulane.errors import InputError
from tests.helpers import FIXTURES

PATTERNS = ("pairs", "halving", "ring")


def fabric(slow_gpu: str | None = None, slow_pair: tuple[str, str] | None = None):
    """A figure per subset: 100 for healthy, 40 for a subset holding the slow GPU or both
    ends of the slow link (a busy GPU slows every operation it is in)."""

    def figure_of(subset: list[str]) -> float:
        if slow_gpu in subset:
            return 40.0
        if slow_pair and slow_pair[0] in subset and slow_pair[1] in subset:
            return 40.0
        return 100.0

    return figure_of


def gpus(n: int) -> list[str]:
    return [f"GPU{i}" for i in range(n)]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_one_slow_gpu_is_named_alone(pattern: str, n: int) -> None:
    slow = f"GPU{n - 1}"
    found = simulate(pattern, gpus(n), fabric(slow_gpu=slow))
    assert found.gpus == [slow] and not found.pairs and not found.sets, found


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_one_slow_link_is_named_as_its_pair(pattern: str, n: int) -> None:
    found = simulate(pattern, gpus(n), fabric(slow_pair=("GPU0", "GPU1")), node_failed=True)
    assert found.pairs == [("GPU0", "GPU1")] and not found.gpus, found


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_a_healthy_node_names_nothing(pattern: str, n: int) -> None:
    found = simulate(pattern, gpus(n), fabric())
    assert not found.found, found
    if n > 2:  # only a 2-GPU node blames its one pair when the node failed
        assert not simulate(pattern, gpus(n), fabric(), node_failed=True).found


@pytest.mark.parametrize("n", [4, 8, 16])
def test_halving_takes_about_log2_rounds_and_pairs_take_all(n: int) -> None:
    halving = simulate("halving", gpus(n), fabric(slow_gpu="GPU1"))
    pairs = simulate("pairs", gpus(n), fabric(slow_gpu="GPU1"))
    # whole set, log2(n)-1 levels of halves, one resolve round
    assert halving.rounds == 1 + int(math.log2(n)) - 1 + 1
    assert len(pairs.steps) == 1 + n * (n - 1) // 2
    assert len(halving.steps) < len(pairs.steps)


@pytest.mark.parametrize("n", [4, 8])
def test_halving_names_a_link_between_its_halves(n: int) -> None:
    # GPU0 and GPU(n-1) sit in different halves: each half is fine alone; the whole set is
    # measured once more (a set is named whole only when slow twice), then the pairs
    # across the halves are measured and name the link.
    link = ("GPU0", f"GPU{n - 1}")
    found = simulate("halving", gpus(n), fabric(slow_pair=link))
    assert found.pairs == [link] and not found.gpus, found
    assert len(found.steps) == 1 + 2 + 1 + (n // 2) ** 2
    assert found.steps[3][0] == gpus(n)


def test_ring_misses_a_link_that_is_not_on_its_ring() -> None:
    # GPU0-GPU2 is not a ring neighbour pair among 4: the ring cannot see it (said in
    # docs/localize.md); pairs can.
    assert not simulate("ring", gpus(4), fabric(slow_pair=("GPU0", "GPU2"))).found
    assert simulate("pairs", gpus(4), fabric(slow_pair=("GPU0", "GPU2"))).pairs == [
        ("GPU0", "GPU2")
    ]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_node_by_gpu_units_8x8(pattern: str) -> None:
    units = node_gpu_units([f"n{i:02d}" for i in range(8)], 8)
    assert len(units) == 64 and units[13] == "n01:GPU5"
    found = simulate(pattern, units, fabric(slow_gpu="n05:GPU3"))
    assert found.gpus == ["n05:GPU3"], found
    if pattern == "halving":
        assert found.rounds <= 1 + 6 + 1
    linked = simulate(pattern, units, fabric(slow_pair=("n02:GPU6", "n02:GPU7")))
    assert linked.pairs == [("n02:GPU6", "n02:GPU7")], linked


def test_two_slow_links_sharing_a_gpu_stay_two_links() -> None:
    steps = [(["GPU0", "GPU1"], 40.0), (["GPU0", "GPU2"], 40.0)]
    steps += [([a, b], 100.0) for a in gpus(8) for b in gpus(8) if a < b and a != "GPU0"]
    steps += [(["GPU0", f"GPU{i}"], 100.0) for i in range(3, 8)]
    named_gpus, pairs, ref = judge_pairs(gpus(8), steps, 0.8)
    assert named_gpus == [] and sorted(pairs) == [("GPU0", "GPU1"), ("GPU0", "GPU2")]
    assert ref == 100.0


def test_bad_input() -> None:
    with pytest.raises(InputError, match="localize pattern"):
        Search("bisect", gpus(4))
    with pytest.raises(InputError, match="at least 2 GPUs"):
        Search("pairs", ["GPU0"])
    with pytest.raises(InputError, match="tolerance"):
        Search("pairs", gpus(2), tolerance=1.5)
    with pytest.raises(InputError, match="listed twice"):
        Search("pairs", ["GPU0", "GPU0"])


def _recorded(name: str) -> tuple[list[str], list[tuple[list[str], float]]]:
    """The subsets and figures `gpulane accept` measured on the lent 4x H200 (2026-11-27,
    benchmarks/accept/h200x4): all_reduce 1 GiB busbw, pairs pattern."""
    doc = json.loads((FIXTURES / "h200x4" / name).read_text())
    (res,) = doc["results"]
    return res["units"], [(s["subset"], s["figure_gbps"]) for s in res["steps"]]


def test_recorded_busy_gpu_names_that_gpu_alone() -> None:
    units, steps = _recorded("localize-busy-gpu2.json")
    gpus, pairs, _ = judge_pairs(units, steps, 0.8)
    assert (gpus, pairs) == (["GPU2"], [])


def test_recorded_full_link_names_its_two_ends_not_the_gpus_beside_them() -> None:
    """The GPU0-GPU1 link kept full slowed every pair holding GPU0 or GPU1 (NV18 through
    the switches: each GPU's 18 links carry all its pairs); GPU2-GPU3 stayed at 324 GB/s.
    The first planner named GPU2 and GPU3 too (2 of their 3 pairs were slow)."""
    units, steps = _recorded("localize-link-01.json")
    gpus, pairs, _ = judge_pairs(units, steps, 0.8)
    assert (gpus, pairs) == (["GPU0", "GPU1"], [])


@pytest.mark.parametrize("n", [4, 5, 8])
def test_two_slow_gpus_are_named_and_no_healthy_one(n: int) -> None:
    units = [f"GPU{i}" for i in range(n)]
    sick = {"GPU1", "GPU3"}
    steps = [
        ([a, b], 140.0 if {a, b} & sick else 330.0)
        for i, a in enumerate(units)
        for b in units[i + 1 :]
    ]
    gpus, pairs, _ = judge_pairs(units, steps, 0.8)
    assert (gpus, pairs) == (["GPU1", "GPU3"], [])
