"""Run every check of the table over the evidence: ranked findings, and what was not run."""

from __future__ import annotations

from gpulane.analysis.doctor.checks import CHECKS
from gpulane.analysis.doctor.model import SEVERITIES, NotRun, Report
from gpulane.topology.evidence import Evidence

# Checks of the host's own settings, which mean something without a GPU: the IOMMU mode
# and the NCCL_* variables set. Every other check is about GPUs and their paths.
HOST_CHECKS = ("iommu", "nccl_env")
# Sources a run directory or log brings (possibly from another machine): a check reading
# one of them judges that run, whatever this machine has.
RUN_SOURCES = ("rows", "nccl", "preflight")


def no_gpu(ev: Evidence) -> str | None:
    """Why this (live) machine has no NVIDIA GPU to judge, or None when it has one or the
    evidence comes from captured files."""
    if not ev.live or ev.driver_version or "smi" in ev.sources:
        return None
    if ev.topology is not None and ev.topology.gpus:
        return None
    if ev.nvml is not None and ev.nvml.get("gpus"):
        return None  # NVML counts GPUs (one of them may not answer: a finding, not "no GPU")
    reasons = [ev.absent[n] for n in ("driver", "smi") if ev.absent.get(n)]
    return "no NVIDIA driver or GPU found" + (f" ({'; '.join(reasons)})" if reasons else "")


def run_doctor(ev: Evidence, only: list[str] | None = None) -> Report:
    report = Report(host=ev.host, live=ev.live, sources=dict(ev.sources), absent=dict(ev.absent))
    report.no_gpu = no_gpu(ev)
    order = list(CHECKS)
    for name in order:
        if only and name not in only:
            continue
        check = CHECKS[name]
        from_run = any(n in ev.sources for n in check.needs if n in RUN_SOURCES)
        if report.no_gpu and name not in HOST_CHECKS and not from_run:
            # "nothing found" would be a claim about GPUs that are not there
            report.not_run[name] = "no NVIDIA GPU or driver on this machine"
            continue
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
