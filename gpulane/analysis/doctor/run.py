"""Run every check of the table over the evidence: ranked findings, and what was not run."""

from __future__ import annotations

from gpulane.analysis.doctor.checks import CHECKS
from gpulane.analysis.doctor.model import SEVERITIES, NotRun, Report
from gpulane.topology.evidence import Evidence


def run_doctor(ev: Evidence, only: list[str] | None = None) -> Report:
    report = Report(host=ev.host, live=ev.live, sources=dict(ev.sources), absent=dict(ev.absent))
    order = list(CHECKS)
    for name in order:
        if only and name not in only:
            continue
        check = CHECKS[name]
        have = [n for n in check.needs if n in ev.sources]
        if not have:
            report.not_run[name] = "; ".join(
                f"{n}: {ev.absent.get(n, 'not gathered')}" for n in check.needs
            )
            continue
        try:
            found = check.run(ev)
        except NotRun as why:
            report.not_run[name] = str(why)
            continue
        report.ran[name] = f"{len(found)} finding(s)" if found else "ok"
        report.findings.extend(found)
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    report.findings.sort(
        key=lambda f: (rank.get(f.severity, 9), order.index(f.check) if f.check in order else 99)
    )
    return report
