"""Adding a check is one row of CHECKS and its function; the evaluator is not touched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gpulane.analysis.rules import CHECKS, FAIL, PASS, SKIP, Check, CheckSpec, Context, evaluate
from gpulane.analysis.store import frame_from_rows
from gpulane.errors import InputError
from gpulane.record import Row


def transport_matches(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    """A stand-in for issue 25's nccl_transport_matches_path over doctor findings."""
    wanted = set(rule["transports"])
    return [
        Check(rule_id, PASS if used in wanted else FAIL, "rows", pair, f"{pair}: {used}")
        for pair, used in sorted(ctx.evidence["doctor"].items())
    ]


@pytest.fixture
def new_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        CHECKS,
        "transport_matches",
        CheckSpec(
            run=transport_matches,
            needs=("rows", "doctor"),
            threshold="pass when the transport NCCL used is one of transports",
            keys=("transports",),
            required=("transports",),
        ),
    )


SPEC = {
    "checks": {
        "p2p_used": {
            "check": "transport_matches",
            "description": "NCCL used P2P on NVLink pairs",
            "transports": ["P2P/CUMEM", "P2P/IPC"],
        }
    }
}


def test_a_new_row_is_loaded_and_run(new_check: None) -> None:
    frame = frame_from_rows([Row(run_id="r", kind="collective", backend="b", op="all_reduce")])
    evidence = {"doctor": {"GPU0-GPU1": "P2P/CUMEM", "GPU0-GPU2": "SHM/direct/direct"}}
    v = evaluate(frame, SPEC, evidence=evidence)
    assert [(c.subject, c.status, c.description) for c in v.checks] == [
        ("GPU0-GPU1", PASS, "NCCL used P2P on NVLink pairs"),
        ("GPU0-GPU2", FAIL, "NCCL used P2P on NVLink pairs"),
    ]
    # Without the input it needs, the evaluator skips it and says which input is missing.
    (c,) = evaluate(frame, SPEC).checks
    assert (c.status, c.message) == (SKIP, "no doctor given")
    # Required, it makes the verdict INCOMPLETE (not FAIL), naming the input and its source.
    required = {"checks": {"p2p_used": {**SPEC["checks"]["p2p_used"], "required": True}}}
    v = evaluate(frame, required)
    assert v.checks[0].status == SKIP and v.status == "INCOMPLETE"
    assert [(m.rule, m.supply) for m in v.missing] == [
        ("p2p_used", "gpulane accept doctor=live on the machine")
    ]
    # Its keys are known to the loader (and required ones enforced) from the row alone.
    with pytest.raises(InputError, match="needs transports"):
        evaluate(frame, {"checks": {"x": {"check": "transport_matches"}}})


def test_topology_checks_without_a_topology() -> None:
    frame = frame_from_rows([])
    spec = {
        "checks": {
            "links": {"check": "pcie_link"},
            "p2p": {"check": "p2p_status", "required": True},
        }
    }
    v = evaluate(frame, spec, None)
    assert [(c.rule, c.status, c.basis) for c in v.checks] == [
        ("links", SKIP, "topology"),
        ("p2p", SKIP, "topology"),
    ]
    assert v.status == "INCOMPLETE" and [m.rule for m in v.missing] == ["p2p"]
    assert "gpulane topo --json" in v.missing[0].supply
    assert v.checks[0].message == "no topology (accept topology=FILE from `gpulane topo --json`)"
