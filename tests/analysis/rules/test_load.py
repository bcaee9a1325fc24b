"""The rule set: shipped sets compose and load; bad rules are one-line input errors."""

from __future__ import annotations

from typing import Any

import pytest

from gpulane.analysis.rules import CHECKS, load_rules
from gpulane.errors import InputError
from tests.analysis.rules.rule_sets import rule_set


def test_rule_sets_ship_and_compose() -> None:
    default = rule_set()
    assert {
        "all_reduce_busbw_nvlink",
        "pinned_h2d",
        "pcie_max_link",
        "p2p_ok",
        "no_wrong_results",
    } <= set(default["checks"])
    assert "all_reduce_busbw_nvlink" not in rule_set("pcie")["checks"]
    assert "pinned_h2d" not in rule_set("nvlink")["checks"]
    for name in ("default", "nvlink", "pcie"):
        load_rules(rule_set(name))


@pytest.mark.parametrize(
    ("checks", "match"),
    [
        ({"x": {"check": "fastest"}}, "not one of"),
        ({"x": {"check": "min"}}, "needs metric"),
        ({"x": {"check": "min", "metric": "busbw_gbps", "minimum": 3}}, "unknown key"),
        ({"x": {"check": "min", "metric": "busbw_gbps", "min": "lots"}}, "expected a number"),
        ({"x": {"check": "min", "metric": "busbw_gbps", "select": {"size": "huge"}}}, "size"),
    ],
)
def test_bad_rules_are_input_errors(checks: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        load_rules({"checks": checks})


def test_every_number_key_is_checked() -> None:
    """A max rule's baseline fraction is a number too (it used to reach float() unchecked)."""
    bad = {"check": "max", "metric": "time_us", "max_fraction_of_baseline": "lots"}
    with pytest.raises(InputError, match="max_fraction_of_baseline: expected a number"):
        load_rules({"checks": {"x": bad}})
    with pytest.raises(InputError, match=r"max: expected a number, got True"):
        load_rules({"checks": {"x": {"check": "max", "metric": "time_us", "max": True}}})


@pytest.mark.parametrize(
    ("fraction", "ok"), [(0.0, False), (1e-9, True), (0.5, True), (0.999999, True), (1.0, False)]
)
def test_outlier_fraction_bounds(fraction: float, ok: bool) -> None:
    """Strictly between 0 and 1: 0 would flag every subject below the median, 1 none."""
    spec = {"outlier_fraction": fraction, "checks": {}}
    if ok:
        assert load_rules(spec) == ({}, fraction)
    else:
        with pytest.raises(InputError, match="between 0 and 1"):
            load_rules(spec)


def test_disabled_rules_are_left_out_but_their_keys_checked() -> None:
    rules, _ = load_rules({"checks": {"off": {"check": "fastest", "enabled": False}, "gone": None}})
    assert rules == {}
    with pytest.raises(InputError, match="unknown key"):
        load_rules({"checks": {"off": {"enabled": False, "speed": 3}}})


def test_the_checks_table() -> None:
    """Each row says what it needs and when a subject passes; the shipped rule sets only
    name checks of the table."""
    assert set(CHECKS) == {
        *("min", "max", "no_wrong", "status_ok", "pcie_link", "p2p_status"),
        *("nccl_transport", "doctor", "no_foreign", "p2p_trust"),
    }
    for name, spec in CHECKS.items():
        assert callable(spec.run) and spec.needs and spec.threshold.startswith("pass when"), name
        assert set(spec.required) <= set(spec.keys) and set(spec.numbers) <= set(spec.keys)
    assert CHECKS["pcie_link"].needs == ("topology",) and CHECKS["min"].required == ("metric",)
    for name in ("default", "nvlink", "pcie"):
        assert {r["check"] for r in rule_set(name)["checks"].values() if r} <= set(CHECKS)
