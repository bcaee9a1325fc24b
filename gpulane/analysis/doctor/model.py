"""A finding of `gpulane doctor`, the table row of a check, and the report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from gpulane.topology.evidence import Evidence

SEVERITIES = ("error", "warning", "info")  # ranked: errors first


@dataclass
class Finding:
    """One thing found: how bad, which check, what, the exact line or value it rests on,
    why it costs bandwidth, and what a cluster engineer does about it."""

    severity: str  # error, warning, info
    check: str  # the CHECKS row that found it
    title: str
    evidence: str
    why: str
    fix: str
    subject: str | None = None  # GPU0, GPU0-GPU1, 0000:02:08.0, a variable

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class NotRun(Exception):
    """A check that cannot say anything from the evidence there is (the reason in words)."""


CheckFunction = Callable[[Evidence], list[Finding]]


@dataclass(frozen=True)
class DoctorCheck:
    """One row of the CHECKS table."""

    run: CheckFunction
    family: str  # pcie, iommu, p2p, placement, gpu, nccl, bandwidth (its module)
    needs: tuple[str, ...]  # evidence sources; the check runs when any of them is there
    about: str  # what it checks, in words (docs/doctor.md)


@dataclass
class Report:
    host: str
    live: bool
    findings: list[Finding] = field(default_factory=list)
    ran: dict[str, str] = field(default_factory=dict)  # check -> "ok" or "N findings"
    not_run: dict[str, str] = field(default_factory=dict)  # check -> why not
    sources: dict[str, str] = field(default_factory=dict)
    absent: dict[str, str] = field(default_factory=dict)
    # why the machine has no GPU to judge (live, no driver, no nvidia-smi, no GPU); None: it has
    no_gpu: str | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def nothing_checked(self) -> bool:
        """No check could run: the report judges nothing, which is never a pass."""
        return not self.ran

    def exit_status(self) -> int:
        """0: no finding of severity error; 1: at least one; 2: nothing could be checked
        (bad input, such as wrong files, is raised before)."""
        if self.nothing_checked():
            return 2
        return 1 if self.errors else 0

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "live": self.live,
            "no_gpu": self.no_gpu,
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.findings],
            "checks_run": self.ran,
            "checks_not_run": self.not_run,
            "sources": self.sources,
            "absent": self.absent,
        }
