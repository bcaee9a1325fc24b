"""Run every rule of a rule set over the rows (and the topology, the baseline, evidence)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpulane.analysis.rules.checks import CHECKS
from gpulane.analysis.rules.load import load_rules
from gpulane.analysis.rules.model import FAIL, SKIP, Check, Context, Verdict, missing_text
from gpulane.topology.model import Topology, as_topology


def evaluate(
    frame: pd.DataFrame,
    spec: Mapping[str, Any],
    topology: Topology | Mapping[str, Any] | None = None,
    baseline: pd.DataFrame | None = None,
    evidence: Mapping[str, Any] | None = None,
) -> Verdict:
    """Check ``frame`` (normalised rows, see store.normalize) against the rule set.

    ``topology``: the model, or its JSON (read by ``Topology.from_json``); ``evidence``:
    further inputs by name for the checks that need them.
    """
    rules, default_outlier = load_rules(spec)
    hosts = set(frame["host"].dropna()) if "host" in frame.columns else set()
    ctx = Context(
        frame=frame,
        topology=as_topology(topology),
        baseline=baseline,
        multi_host=len(hosts) > 1,
        multi_build=frame["build"].dropna().nunique() > 1,
        default_outlier=default_outlier,
        evidence=dict(evidence or {}),
    )
    verdict = Verdict(rules=rules)
    for rule_id, rule in rules.items():
        check = CHECKS[rule["check"]]
        missing = [need for need in check.needs if not ctx.has(need)]
        if missing:
            basis = missing[0] if missing[0] == "topology" else "rows"
            status = FAIL if rule.get("required") else SKIP
            lines = [Check(rule_id, status, basis, "-", missing_text(missing[0]))]
        else:
            lines = check.run(rule_id, rule, ctx)
        for line in lines:
            line.description = str(rule.get("description") or rule_id)
        verdict.checks.extend(lines)
    return verdict
