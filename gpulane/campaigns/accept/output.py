"""What accept writes and prints: JUnit XML for CI, the verdict as a table, Markdown or JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pandas as pd

from gpulane.analysis.rules import FAIL, PASS, SKIP, Verdict
from gpulane.session.output import Say, stdout


def junit_xml(verdict: Verdict, name: str = "gpulane accept") -> str:
    """One testcase per check line: a failure, a skipped (never a pass), or a pass; and
    one per required check that did not run: an error (INCOMPLETE), or skipped when it
    was allowed to skip (--allow-skip), saying so."""
    counts = verdict.counts()
    unmet, allowed = verdict.unmet, verdict.allowed
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(verdict.checks) + len(unmet) + len(allowed)),
        failures=str(counts[FAIL]),
        skipped=str(counts[SKIP] + len(allowed)),
        errors=str(len(unmet)),
    )
    for c in verdict.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"gpulane.accept.{c.rule}",
            name=f"{c.basis} {c.subject}".strip(),
        )
        if c.status == FAIL:
            failure = ET.SubElement(case, "failure", message=c.message, type=c.basis)
            failure.text = f"{c.description}\n{c.message}"
        elif c.status == SKIP:
            ET.SubElement(case, "skipped", message=c.message)
        else:
            out = ET.SubElement(case, "system-out")
            out.text = c.message
    for m in [*unmet, *allowed]:
        case = ET.SubElement(
            suite, "testcase", classname=f"gpulane.accept.{m.rule}", name="required"
        )
        if m.allowed:
            ET.SubElement(
                case, "skipped", message=f"required, did not run, allowed by --allow-skip: {m.why}"
            )
        else:
            error = ET.SubElement(
                case, "error", message=f"required check did not run: {m.why}", type="incomplete"
            )
            error.text = f"{m.description}\n{m.why}\nsupply it with: {m.supply}"
    suites = ET.Element(
        "testsuites",
        name=name,
        tests=suite.get("tests", "0"),
        failures=suite.get("failures", "0"),
        errors=suite.get("errors", "0"),
        skipped=suite.get("skipped", "0"),
    )
    suites.append(suite)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


def verdict_table(verdict: Verdict, all_lines: bool = True) -> pd.DataFrame:
    order = {FAIL: 0, PASS: 1, SKIP: 2}
    checks = sorted(verdict.checks, key=lambda c: order.get(c.status, 3))
    rows = []
    for c in checks:
        if not all_lines and c.status == SKIP:
            continue
        rows.append(
            {
                "status": c.status.upper(),
                "rule": c.rule,
                "on": c.subject,
                "basis": c.basis,
                "by": c.offset_text(),
                "detail": c.message,
            }
        )
    return pd.DataFrame(rows, columns=["status", "rule", "on", "basis", "by", "detail"])


def print_verdict(verdict: Verdict, fmt: str, say: Say = stdout) -> None:
    table = verdict_table(verdict)
    counts = verdict.counts()
    summary = (
        f"accept: {verdict.status}: {counts[PASS]} passed, {counts[FAIL]} failed, "
        f"{counts[SKIP]} skipped"
        + (f"; failed rules: {', '.join(verdict.failed_rules())}" if verdict.failed else "")
        + _causes_text(verdict)
        + (
            f"; required but not run: {', '.join(m.rule for m in verdict.unmet)}"
            if verdict.unmet
            else ""
        )
        + (
            f"; allowed to skip: {', '.join(m.rule for m in verdict.allowed)}"
            if verdict.allowed
            else ""
        )
    )
    if fmt == "json":
        say(json.dumps(verdict.to_dict(), indent=1, default=str))
        return
    if fmt == "markdown":
        from gpulane.analysis.compare import markdown_table

        say(markdown_table(table))
        say(f"**{summary}**")
        for line in missing_lines(verdict):
            say(line)
        return
    if fmt == "table":
        from rich.console import Console
        from rich.table import Table

        console = Console(soft_wrap=False)
        if not console.is_terminal:
            console = Console(soft_wrap=False, width=200)
        t = Table(title="gpulane accept", show_lines=False)
        styles = {"FAIL": "bold red", "PASS": "green", "SKIP": "dim"}
        for col in table.columns:
            t.add_column(col, overflow="fold", justify="right" if col == "by" else "left")
        for row in table.itertuples(index=False):
            t.add_row(*[str(v) for v in row], style=styles.get(row[0], ""))
        console.print(t)
    say(summary)
    for line in missing_lines(verdict):
        say(line)
    if verdict.status == "INCOMPLETE" and not verdict.unmet:
        say("# no check passed: nothing was checked (a run must show something to PASS)")


def _causes_text(verdict: Verdict) -> str:
    """The likely causes the failed lines name (foreign work, throttling, a slow link)."""
    from gpulane.analysis.rules.causes import verdict_causes

    causes = verdict_causes(verdict.checks)
    if not causes:
        return ""
    more = f" (+{len(causes) - 1} more)" if len(causes) > 1 else ""
    return f"; likely cause: {causes[0]}{more}"


def missing_lines(verdict: Verdict) -> list[str]:
    """What each required check that did not run lacked, and what supplies it."""
    out = [f"# missing: {m.rule}: {m.why}; supply it with: {m.supply}" for m in verdict.unmet]
    out += [f"# allowed to skip (--allow-skip): {m.rule}: {m.why}" for m in verdict.allowed]
    return out
