"""The doctor's report for people (ranked findings, then what was not checked and why)."""

from __future__ import annotations

import textwrap

from gpulane.analysis.doctor.model import Report

WIDTH = 100


def render_text(report: Report) -> list[str]:
    # offline the evidence's host already reads "(captured files)"
    where = f"{report.host} (this machine)" if report.live else report.host
    c = report.counts()
    counts = f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} note(s)"
    if report.nothing_checked():
        counts = "nothing could be checked"
    if report.no_gpu:
        # Said first: every line below is about this machine's host settings only.
        lines = [f"# gpulane doctor: {where}: {report.no_gpu}; GPU checks not run; {counts}"]
    else:
        lines = [f"# gpulane doctor: {where}: {counts}"]
    for n, f in enumerate(report.findings, start=1):
        lines.append("")
        lines.append(f"{n}. [{f.severity.upper()}] {f.title}  ({f.check})")
        for label, text in (("evidence", f.evidence), ("why", f.why), ("fix", f.fix)):
            wrapped = textwrap.wrap(text, WIDTH - 14) or [""]
            lines.append(f"   {label + ':':<10} {wrapped[0]}")
            lines.extend(f"   {'':<10} {w}" for w in wrapped[1:])
    if not report.findings and not report.nothing_checked():
        lines.append("# no findings")
    ok = [name for name, result in report.ran.items() if result == "ok"]
    if ok:
        lines.append("")
        lines.append("# checked, nothing found: " + ", ".join(ok))
    if report.not_run:
        lines.append("# not checked:")
        lines.extend(f"#   {name}: {why}" for name, why in report.not_run.items())
    absent = unexplained_absent(report)
    if absent:
        lines.append("# sources absent:")
        lines.extend(f"#   {name}: {why}" for name, why in sorted(absent.items()))
    return lines


def unexplained_absent(report: Report) -> dict[str, str]:
    """The sources absent that no "not checked" line already names: a source is said in
    one place, under the check it kept from running where there is one."""
    reasons = list(report.not_run.values())
    return {
        n: why
        for n, why in report.absent.items()
        if n not in report.not_run and not any(why in r for r in reasons)
    }
