"""What accept writes and prints: JUnit XML for CI, the verdict as a table, Markdown or JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pandas as pd

from gpulane.analysis.rules import FAIL, PASS, SKIP, Verdict


def junit_xml(verdict: Verdict, name: str = "gpulane accept") -> str:
    counts = verdict.counts()
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(verdict.checks)),
        failures=str(counts[FAIL]),
        skipped=str(counts[SKIP]),
        errors="0",
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
    suites = ET.Element(
        "testsuites", name=name, tests=suite.get("tests", "0"), failures=suite.get("failures", "0")
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
                "by": f"{c.margin * 100:+.1f}%" if c.margin is not None else "",
                "detail": c.message,
            }
        )
    return pd.DataFrame(rows, columns=["status", "rule", "on", "basis", "by", "detail"])


def print_verdict(verdict: Verdict, fmt: str) -> None:
    table = verdict_table(verdict)
    counts = verdict.counts()
    summary = (
        f"accept: {'PASS' if verdict.passed else 'FAIL'}: {counts[PASS]} passed, {counts[FAIL]} failed, "
        f"{counts[SKIP]} skipped"
        + (f"; failed rules: {', '.join(verdict.failed_rules())}" if not verdict.passed else "")
    )
    if fmt == "json":
        print(json.dumps(verdict.to_dict(), indent=1, default=str))
        return
    if fmt == "markdown":
        from gpulane.analysis.compare import markdown_table

        print(markdown_table(table))
        print(f"**{summary}**")
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
    print(summary)
