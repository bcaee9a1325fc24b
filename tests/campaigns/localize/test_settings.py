"""The sweep keys of localization and of its planted slowdown, checked before any rank."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpulane.campaigns.localize.rank import patterns_of, per_op_seconds, planted_delay
from gpulane.config.validate import check_localize
from gpulane.errors import InputError


def cfg(**kw: object) -> SimpleNamespace:
    base = dict(localize=None, localize_tolerance=0.8, slow_pair=None, slow_ms=20.0, slow_rank=None)
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize("value", [None, "none", "pairs", "halving", "ring", ["pairs", "ring"]])
def test_good_patterns(value: object) -> None:
    check_localize(cfg(localize=value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"localize": "bisect"}, "localize: expected pairs, halving, ring"),
        ({"localize": ["pairs", "zig"]}, "localize: expected"),
        ({"localize_tolerance": 0}, "localize_tolerance: expected a fraction"),
        ({"localize_tolerance": 1.5}, "localize_tolerance: expected a fraction"),
        ({"slow_pair": [1, 1]}, "slow_pair: expected two ranks"),
        ({"slow_pair": [1]}, "slow_pair: expected two ranks"),
        ({"slow_pair": "x"}, "slow_pair: expected two ranks"),
        ({"slow_ms": -1}, "slow_ms: expected milliseconds"),
    ],
)
def test_bad_values_name_the_key(kw: dict, words: str) -> None:
    with pytest.raises(InputError, match=words):
        check_localize(cfg(**kw))  # type: ignore[arg-type]


def test_planted_delay_only_where_planted() -> None:
    slow = cfg(slow_rank=2, slow_ms=50)
    assert planted_delay(slow, 2, [1, 2]) == 0.05  # type: ignore[arg-type]
    assert planted_delay(slow, 1, [1, 2]) == 0.0  # type: ignore[arg-type]
    link = cfg(slow_pair=[0, 3], slow_ms=10)
    assert planted_delay(link, 0, [0, 3]) == 0.01  # type: ignore[arg-type]
    assert planted_delay(link, 0, [0, 1]) == 0.0  # type: ignore[arg-type]
    assert planted_delay(link, 3, [0, 3]) == 0.0  # type: ignore[arg-type]


def test_per_op_time_and_patterns() -> None:
    per_rank = [[1.0, 5.0, 2.0], [1.5, 1.0, 3.0]]  # slowest per op: 1.5, 5.0, 3.0
    assert per_op_seconds(per_rank, on_device=True) == 3.0
    assert per_op_seconds(per_rank, on_device=False) == 1.5
    assert patterns_of("[pairs,halving]") == ["pairs", "halving"]
    assert patterns_of(["ring"]) == ["ring"]


def test_unit_names_one_host_and_several() -> None:
    from gpulane.campaigns.localize.rank import unit_names

    assert unit_names([("vm", 0), ("vm", 1)]) == ["GPU0", "GPU1"]
    assert unit_names([("a", 0), ("a", 1), ("b", 0), ("b", 1)]) == [
        "a:GPU0",
        "a:GPU1",
        "b:GPU0",
        "b:GPU1",
    ]
