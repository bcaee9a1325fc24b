"""``p2p_trust``: each GPU pair's small collective under a short timeout, against the same
pair staged through host memory (``accept`` passes the results as
``evidence={"p2p_trust": {"pairs": [...]}}``, made by ``campaigns.accept.p2p_trust``).
A pair that hung, failed or ran slower than host staging fails, naming its likely causes;
on one GPU the check is not applicable (``{"not_applicable": why}``): skipped, never a pass."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulane.analysis.rules.model import FAIL, PASS, SKIP, Check, Context

BASIS = "p2p_trust"


def _line(rule_id: str, pair: Mapping[str, Any]) -> Check:
    subject = f"{pair.get('a')}-{pair.get('b')}"
    outcome = str(pair.get("outcome"))
    causes = [c for c in pair.get("causes") or [] if isinstance(c, Mapping)]
    if outcome == "ok":
        return Check(rule_id, PASS, BASIS, subject, str(pair.get("detail")))
    named = ", ".join(str(c.get("name")) for c in causes) or "unknown"
    first = str(causes[0].get("evidence"))[:160] if causes else ""
    message = f"{pair.get('detail')}; likely cause: {named}" + (f" ({first})" if first else "")
    return Check(rule_id, FAIL, BASIS, subject, message)


def check_p2p_trust(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    got = ctx.evidence.get("p2p_trust") or {}
    if not isinstance(got, Mapping):
        return [Check(rule_id, SKIP, BASIS, "-", "p2p_trust evidence is not a mapping")]
    if got.get("not_applicable"):
        return [Check(rule_id, SKIP, BASIS, "-", str(got["not_applicable"]))]
    pairs = [p for p in got.get("pairs") or [] if isinstance(p, Mapping)]
    if not pairs:
        return [Check(rule_id, SKIP, BASIS, "-", "no GPU pair was checked")]
    return [_line(rule_id, p) for p in pairs]
