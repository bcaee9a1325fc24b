"""``doctor``: the findings of ``gpulane doctor`` as a rule (``accept`` passes them as
``evidence={"doctor": [finding, ...]}``). A finding at or above ``fail_on`` fails, each on
a line of its own with its evidence; the others are counted on the passing line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulane.analysis.rules.model import FAIL, PASS, Check, Context
from gpulane.errors import InputError

SEVERITIES = ("error", "warning", "info")


def check_doctor(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    fail_on = str(rule.get("fail_on") or "error")
    if fail_on not in SEVERITIES:
        raise InputError(f"rules.checks.{rule_id}.fail_on: expected one of {', '.join(SEVERITIES)}")
    limit = SEVERITIES.index(fail_on)
    findings = [f for f in ctx.evidence.get("doctor") or [] if isinstance(f, Mapping)]
    out = []
    below = 0
    for f in findings:
        severity = str(f.get("severity"))
        rank = SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)
        if rank > limit:
            below += 1
            continue
        evidence = str(f.get("evidence") or "").splitlines()
        detail = f"{severity}: {f.get('title')}" + (f" ({evidence[0][:160]})" if evidence else "")
        out.append(
            Check(rule_id, FAIL, "doctor", str(f.get("subject") or f.get("check") or "-"), detail)
        )
    if not out:
        more = f"; {below} finding(s) below {fail_on}" if below else ""
        out.append(
            Check(rule_id, PASS, "doctor", "-", f"no doctor finding of severity {fail_on}{more}")
        )
    return out
