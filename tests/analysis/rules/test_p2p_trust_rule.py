"""The shipped rule sets' p2p_trust rule (issue 46): run where PCIe GPU pairs exist, skipped
as "not applicable" on one GPU or NVLink-only machines, never a pass or a fail there."""

from __future__ import annotations

from typing import Any

import pytest

from gpulane.analysis.rules import evaluate
from gpulane.analysis.rules.model import FAIL, PASS, SKIP
from gpulane.analysis.store import frame_from_rows
from tests.analysis.rules import synthetic
from tests.analysis.rules.rule_sets import rule_set


def _p2p(rows: list[Any], topology: Any = None, evidence: Any = None, name: str = "default") -> Any:
    ev = {"p2p_trust": evidence} if evidence is not None else None
    verdict = evaluate(frame_from_rows(rows), rule_set(name), topology, evidence=ev)
    lines = [c for c in verdict.checks if c.rule == "p2p_trust"]
    assert lines, "the shipped rule set has no p2p_trust rule"
    return verdict, lines


def _pairs(n: int, outcome: str = "ok") -> dict[str, Any]:
    pairs = [
        {"a": f"GPU{i}", "b": f"GPU{j}", "outcome": outcome, "detail": "P2P 20 GB/s",
         "causes": [] if outcome == "ok" else [{"name": "acs", "evidence": "ACSCtl SrcValid+"}]}
        for i in range(n) for j in range(i + 1, n)
    ]  # fmt: skip
    return {"pairs": pairs}


@pytest.mark.parametrize("name", ["default", "pcie"])
def test_shipped_sets_with_pcie_rules_carry_p2p_trust(name: str) -> None:
    assert rule_set(name)["checks"]["p2p_trust"]["check"] == "p2p_trust"
    assert "p2p_trust" not in rule_set("nvlink")["checks"]


def test_one_gpu_is_not_applicable_even_with_pair_results() -> None:
    rows = synthetic.machine(1)
    verdict, lines = _p2p(rows, synthetic.topology(1, "PIX"), evidence=_pairs(2, "hang"))
    assert [c.status for c in lines] == [SKIP]
    assert "not applicable" in lines[0].message
    assert all(m.rule != "p2p_trust" for m in verdict.missing)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_nvlink_only_is_not_applicable(n: int) -> None:
    rows = synthetic.machine(n)
    _, lines = _p2p(rows, synthetic.topology(n, "NV18"), evidence=_pairs(n, "hang"))
    assert [c.status for c in lines] == [SKIP] and "NVLink" in lines[0].message
    # without a topology the collectives' own NV18 path says the same
    _, lines = _p2p(rows, None)
    assert [c.status for c in lines] == [SKIP] and "not applicable" in lines[0].message


@pytest.mark.parametrize("n", [2, 4, 8])
def test_pcie_pairs_pass_fail_or_say_not_measured(n: int) -> None:
    rows = [r for r in synthetic.machine(n) if r.kind != "collective"]
    rows += synthetic.collectives(n, {"all_reduce": 20.0, "all_gather": 15.0}, path="PIX")
    topo = synthetic.topology(n, "PIX")
    _, lines = _p2p(rows, topo, evidence=_pairs(n))
    assert [c.status for c in lines] == [PASS] * (n * (n - 1) // 2)
    _, lines = _p2p(rows, topo, evidence=_pairs(n, "hang"))
    assert {c.status for c in lines} == {FAIL} and "acs" in lines[0].message
    # stored rows only (`accept run=DIR`): the pairs were never run, neither pass nor fail
    verdict, lines = _p2p(rows, topo)
    assert [c.status for c in lines] == [SKIP] and "not measured" in lines[0].message
    assert all(m.rule != "p2p_trust" for m in verdict.missing)  # required: false
