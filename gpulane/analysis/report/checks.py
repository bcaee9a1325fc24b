"""The acceptance part of a report: the verdict, the current run plotted against its
baseline with the failing points marked, every check against its threshold, the rules
table, and the doctor's findings beside the rules.

Findings (``gpulane doctor``) are read from ``accept.json``'s ``"findings"`` key, a list of
objects with these keys (any may be missing; extra keys are ignored)::

    {"severity": "high" | "warning" | "info" | ...,   # sorts the list, colours the cell
     "check": "acs",                                   # which doctor check found it
     "title": "ACS enabled on the switch between GPU0 and GPU1",
     "evidence": "0000:40:01.0 ACSCtl: SrcValid+ ...", # the line or value it rests on
     "why": "P2P traffic is routed through the root complex",
     "fix": "setpci ... / disable ACS in the BIOS"}

No ``"findings"`` key: the doctor did not run for this report, and the section says so;
an empty list: the doctor ran and found nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from gpulane.analysis.plots.accept import baseline_plots, margin_plot
from gpulane.analysis.report.html import details, e, figure, num, section, table
from gpulane.analysis.rules import Verdict

SEVERITY_ORDER = {"critical": 0, "error": 1, "high": 1, "fail": 1, "warning": 2, "medium": 2}
FINDING_KEYS = ("severity", "check", "title", "evidence", "why", "fix")


def verdict_head(verdict: Verdict, rule_set: str | None) -> str:
    counts = verdict.counts()
    badge = verdict.status  # PASS, FAIL or INCOMPLETE (docs/accept.md)
    failed = verdict.failed_rules()
    missing = "".join(
        f"<br>required, did not run: <b>{e(m.rule)}</b>: {e(m.why)}; supply it with: "
        f"<code>{e(m.supply)}</code>"
        for m in verdict.unmet
    )
    allowed = "".join(
        f"<br>allowed to skip (--allow-skip): <b>{e(m.rule)}</b>: {e(m.why)}"
        for m in verdict.allowed
    )
    return (
        f'<p id="verdict"><span class="badge {badge.lower()}">{badge}</span> '
        f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped"
        + (f" &mdash; rule set <b>{e(rule_set)}</b>" if rule_set else "")
        + (f"<br>failed rules: <b>{e(', '.join(failed))}</b>" if failed else "")
        + missing
        + allowed
        + "</p>"
    )


def rules_table(verdict: Verdict) -> str:
    order = {"fail": 0, "pass": 1, "skip": 2}
    checks = sorted(verdict.checks, key=lambda c: order.get(c.status, 3))
    rows = []
    for c in checks:
        unit = f" {c.unit}" if c.unit else ""
        rows.append(
            {
                "status": f'<span class="st-{e(c.status)}">{e(c.status.upper())}</span>',
                "rule": c.rule,
                "on": c.subject,
                "basis": c.basis,
                "value": num(c.value) + (unit if c.value is not None else ""),
                "threshold": num(c.threshold) + (unit if c.threshold is not None else ""),
                "by": c.offset_text("-"),
                "detail": c.message,
                "rule text": c.description,
            }
        )
    columns = ["status", "rule", "on", "basis", "value", "threshold", "by", "detail", "rule text"]
    return table(
        pd.DataFrame(rows, columns=columns),
        "checks",
        left=["status", "rule", "on", "basis"],
        wrap=["detail", "rule text"],
        raw=["status"],
        row_class=[c.status for c in checks],
    )


def _severity(finding: Mapping[str, Any]) -> int:
    return SEVERITY_ORDER.get(str(finding.get("severity", "")).lower(), 3)


def findings_block(findings: Sequence[Mapping[str, Any]] | None) -> str:
    """The doctor's findings (see the module text); absent and empty said in words."""
    if findings is None:
        return (
            '<div id="findings"><h3>Findings (gpulane doctor)</h3><p>The doctor did not run '
            "for this report: accept.json has no findings.</p></div>"
        )
    if not findings:
        return '<div id="findings"><h3>Findings (gpulane doctor)</h3><p>The doctor found nothing.</p></div>'
    ordered = sorted((f for f in findings if isinstance(f, Mapping)), key=_severity)
    rows = []
    for f in ordered:
        sev = str(f.get("severity") or "-")
        rows.append(
            {"severity": f'<span class="sev-{e(sev.lower())}">{e(sev)}</span>'}
            | {k: str(f.get(k) or "-") for k in FINDING_KEYS[1:]}
        )
    frame = pd.DataFrame(rows, columns=list(FINDING_KEYS))
    return (
        f'<div id="findings"><h3>Findings (gpulane doctor): {len(rows)}</h3>'
        + table(
            frame,
            "findings-table",
            left=["severity", "check"],
            wrap=["title", "evidence", "why", "fix"],
            raw=["severity"],
        )
        + "</div>"
    )


def acceptance_section(
    verdict: Verdict,
    current: pd.DataFrame,
    baseline: pd.DataFrame | None = None,
    rule_set: str | None = None,
    findings: Sequence[Mapping[str, Any]] | None = None,
    baseline_source: str | None = None,
) -> str:
    parts = [verdict_head(verdict, rule_set)]
    plots = baseline_plots(current, baseline, verdict.checks) if len(current) else []
    if baseline is None:
        where = f" ({e(baseline_source)} not found)" if baseline_source else ""
        alone = "the plots show the current run alone" if plots else "see the plots below"
        parts.append(f"<p>No baseline rows{where}: {alone}.</p>")
    parts += [figure(p) for p in plots]
    margins = margin_plot(verdict.checks)
    if margins is not None:
        parts.append(figure(margins))
    parts.append("<h3>Rules</h3>" + rules_table(verdict))
    parts.append(findings_block(findings))
    if plots:
        parts.append(
            details(
                "what the marks mean",
                "<p>Red crosses are the values of failing checks, at the figure each check "
                "names; the baseline is drawn grey.</p>",
            )
        )
    return section("acceptance", "Acceptance", "".join(parts))
