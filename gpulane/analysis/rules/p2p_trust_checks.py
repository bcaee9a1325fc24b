"""``p2p_trust``: each GPU pair's small collective under a short timeout, against the same
pair staged through host memory (``accept`` passes the results as
``evidence={"p2p_trust": {"pairs": [...]}}``, made by ``campaigns.accept.p2p_trust``).
A pair that hung, failed or ran slower than host staging fails, naming its likely causes;
on one GPU, or where every GPU pair is NVLink, the check is not applicable (accept's
``{"not_applicable": why}``, or what the rows and topology say): skipped, never a pass."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpulane.analysis.rules.model import FAIL, PASS, SKIP, Check, Context
from gpulane.analysis.rules.required import machine_facts
from gpulane.topology.paths import nvlink_count

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


NOT_MEASURED = (
    "not measured: no p2p_trust results given (`gpulane accept` on the machine runs each "
    "GPU pair, or `gpulane doctor --p2p-trust`)"
)


def not_applicable(ctx: Context) -> str | None:
    """Why no GPU pair here can need the check, when the rows or the topology tell it:
    one GPU, or every GPU pair joined by NVLink. None when it may apply (or is unknown)."""
    facts = machine_facts(ctx.frame, ctx.topology)
    if facts.get("gpu") is False:
        return "not applicable: no GPU on this machine"
    if facts.get("multi_gpu") is False:
        return "not applicable: fewer than two GPUs, no pair to check"
    if facts.get("pcie_pairs") is False and facts.get("nvlink"):
        return "not applicable: every GPU pair is NVLink, no PCIe peer-to-peer to trust"
    if ctx.topology is None and len(ctx.frame) and "path" in ctx.frame.columns:
        # no topology: the collectives' own path labels, when every one names NVLink
        coll = ctx.frame[ctx.frame["kind"] == "collective"]["path"].dropna().astype(str)
        if len(coll) and all(nvlink_count(p) for p in coll):
            return "not applicable: every collective ran over NVLink (rows' path), no PCIe pair"
    return None


def check_p2p_trust(rule_id: str, rule: Mapping[str, Any], ctx: Context) -> list[Check]:
    why = not_applicable(ctx)
    if why:
        return [Check(rule_id, SKIP, BASIS, "-", why)]
    got = ctx.evidence.get("p2p_trust")
    if got is None:
        return [Check(rule_id, SKIP, BASIS, "-", NOT_MEASURED)]
    if not isinstance(got, Mapping):
        return [Check(rule_id, SKIP, BASIS, "-", "p2p_trust evidence is not a mapping")]
    if got.get("not_applicable"):
        return [Check(rule_id, SKIP, BASIS, "-", str(got["not_applicable"]))]
    pairs = [p for p in got.get("pairs") or [] if isinstance(p, Mapping)]
    if not pairs:
        return [Check(rule_id, SKIP, BASIS, "-", "no GPU pair was checked")]
    return [_line(rule_id, p) for p in pairs]
