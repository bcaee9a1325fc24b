"""Run every rule of a rule set over the rows (and the topology, the baseline, evidence),
and say which required checks did not run (the verdict is then INCOMPLETE)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from gpulane.analysis.rules.causes import name_causes
from gpulane.analysis.rules.checks import CHECKS
from gpulane.analysis.rules.load import load_rules
from gpulane.analysis.rules.model import (
    FAIL,
    PASS,
    SKIP,
    Check,
    Context,
    Missing,
    Verdict,
    missing_text,
)
from gpulane.analysis.rules.ranks import judged_rows, one_rank_note
from gpulane.analysis.rules.required import machine_facts, required_here, supply_hint
from gpulane.errors import InputError
from gpulane.topology.model import Topology, as_topology


def check_allow_skip(names: Iterable[str], spec: Mapping[str, Any]) -> list[str]:
    """The rule ids of ``--allow-skip``, each one of the rule set's (else bad input)."""
    known = [str(k) for k in (spec.get("checks") or {})]
    out = []
    for name in names:
        if str(name) not in known:
            raise InputError(
                f"allow_skip: {name!r} is not a rule of this rule set; rules: {', '.join(known)}"
            )
        out.append(str(name))
    return out


def evaluate(
    frame: pd.DataFrame,
    spec: Mapping[str, Any],
    topology: Topology | Mapping[str, Any] | None = None,
    baseline: pd.DataFrame | None = None,
    evidence: Mapping[str, Any] | None = None,
    *,
    gpus: int | None = None,
    allow_skip: Iterable[str] = (),
) -> Verdict:
    """Check ``frame`` (normalised rows, see store.normalize) against the rule set.

    ``topology``: the model, or its JSON (read by ``Topology.from_json``); ``evidence``:
    further inputs by name for the checks that need them; ``gpus``: the GPUs accept saw on
    this machine (None: not measured here); ``allow_skip``: rule ids whose absence is
    accepted knowingly.
    """
    rules, default_outlier = load_rules(spec)
    allowed = set(check_allow_skip(allow_skip, spec))
    everything = frame
    judged, lone = judged_rows(frame)
    frame = frame if judged is None else judged
    baseline, _ = judged_rows(baseline)
    hosts = set(frame["host"].dropna()) if "host" in frame.columns else set()
    topo = as_topology(topology)
    ctx = Context(
        frame=frame,
        all_rows=everything,
        topology=topo,
        baseline=baseline,
        multi_host=len(hosts) > 1,
        multi_build=frame["build"].dropna().nunique() > 1,
        default_outlier=default_outlier,
        evidence=dict(evidence or {}),
    )
    facts = machine_facts(frame, topo, gpus)
    verdict = Verdict(rules=rules)
    if lone:  # said once, neither passed nor failed
        verdict.checks.append(Check("collectives", SKIP, "rows", "-", one_rank_note(lone)))
    for rule_id, rule in rules.items():
        check = CHECKS[rule["check"]]
        # A check reports what it saw; whether its absence matters is decided here.
        run_rule = {k: v for k, v in rule.items() if k != "required"}
        missing = [need for need in check.needs if not ctx.has(need)]
        if missing:
            basis = missing[0] if missing[0] == "topology" else "rows"
            lines = [Check(rule_id, SKIP, basis, "-", missing_text(missing[0]))]
        else:
            lines = check.run(rule_id, run_rule, ctx)
        for line in lines:
            line.description = str(rule.get("description") or rule_id)
        verdict.checks.extend(lines)
        ran = any(line.status in (PASS, FAIL) for line in lines)
        if not ran and required_here(rule, facts):
            skip = next((line for line in lines if line.status == SKIP), None)
            lacking = missing[0] if missing else (skip.basis if skip else None)
            verdict.missing.append(
                Missing(
                    rule_id,
                    skip.message if skip else "the check did not run",
                    supply_hint(rule, lacking),
                    description=str(rule.get("description") or rule_id),
                    allowed=rule_id in allowed,
                )
            )
    name_causes(verdict.checks, ctx.evidence.get("doctor"), hosts)
    verdict.facts = facts
    return verdict
