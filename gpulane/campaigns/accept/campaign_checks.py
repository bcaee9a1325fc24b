"""What a cluster campaign found, as acceptance checks: every summary.json a campaign wrote
under the group (one per step) becomes check lines of rule ``campaign``, each naming its
node or pair with the evidence (figures against the peers' median or the reference)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from gpulane.analysis.rules import FAIL, PASS, Check

RULE = "campaign"
DESCRIPTION = "every node and pair of the cluster campaign within the outlier fraction, none lost"


def _check(status: str, basis: str, subject: str, message: str) -> Check:
    return Check(RULE, status, basis, subject, message, description=DESCRIPTION)


def campaign_summaries(group: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The steps' summary.json files under ``group`` (a combined campaign's own top-level
    summary, which only repeats its steps, is left out)."""
    out = []
    for path in sorted(group.rglob("summary.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "pattern" in data and "+" not in str(data["pattern"]):
            out.append((path, data))
    return out


def campaign_checks(group: Path) -> list[Check]:
    checks: list[Check] = []
    for _, data in campaign_summaries(group):
        checks += _step_checks(data)
    return checks


def _step_checks(data: dict[str, Any]) -> list[Check]:
    pattern = str(data["pattern"])
    nodes = data.get("nodes") or []
    out: list[Check] = []
    for e in data.get("elements") or []:
        if e.get("outlier"):
            out.append(_check(FAIL, f"{pattern} outlier", e["label"], e["outlier"]))
        elif e.get("failure") and not _lost_in(e, data):
            out.append(_check(FAIL, f"{pattern} run", e["label"], e["failure"]))
    elements = {e["label"]: e for e in data.get("elements") or []}
    for node, bad in sorted((data.get("suspect_nodes") or {}).items()):
        others = [
            v
            for e in elements.values()
            if node not in e.get("nodes", []) and (v := _value(e)) is not None
        ]
        median = (
            f" (the pairs without it: median {statistics.median(others):.4g} GB/s)"
            if others
            else ""
        )
        evidence = [
            f"{label} {_figure(e)}"
            for label, e in elements.items()
            if node in e.get("nodes", []) and (e.get("outlier") or e.get("failure"))
        ]
        out.append(
            _check(
                FAIL,
                f"{pattern} node",
                node,
                f"all {bad} of its pairs are slow or failed: " + ", ".join(evidence) + median,
            )
        )
    for node in data.get("slow") or []:
        why = (data.get("evidence") or {}).get(node, "")
        out.append(_check(FAIL, "halving", node, f"slow: {why}".rstrip(": ")))
    for node, why in sorted((data.get("lost_nodes") or {}).items()):
        out.append(_check(FAIL, f"{pattern} lost", node, f"lost during the campaign: {why}"))
    if not any(c.status == FAIL for c in out):
        what = f"{len(data.get('elements') or data.get('steps') or [])} job(s)"
        out.append(
            _check(PASS, pattern, "-", f"{pattern} over {len(nodes)} node(s), {what}: none named")
        )
    return out


def _lost_in(e: dict[str, Any], data: dict[str, Any]) -> bool:
    """The element failed because one of its nodes was lost (said by the lost line)."""
    return str(e.get("state")) == "NODE_FAIL" and bool(
        set(e.get("nodes", [])) & set(data.get("lost_nodes") or {})
    )


def _value(e: dict[str, Any]) -> float | None:
    figures = e.get("figures") or {}
    values = [float(v) for k, v in figures.items() if str(k).startswith("all_reduce ")]
    return min(values) if values else None


def _figure(e: dict[str, Any]) -> str:
    value = _value(e)
    return f"{value:.4g} GB/s" if value is not None else str(e.get("state") or "no figure")
