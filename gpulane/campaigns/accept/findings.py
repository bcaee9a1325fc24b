"""The doctor's checks as part of an acceptance: its findings go to the rules (the
``doctor`` check) and into accept.json under ``"findings"``.

``doctor=auto`` (the default) examines this machine when the suite measured on it, and
only the rows, NCCL's lines and pre-flight tables of ``run=DIR`` otherwise (they may come
from another machine); ``doctor=live`` always examines this machine; ``doctor=false``
turns it off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpulane.analysis.doctor import Report, run_doctor
from gpulane.errors import InputError
from gpulane.topology.evidence import DoctorFiles, add_run, gather_files, gather_live
from gpulane.topology.model import Topology

OFF = ("false", "off", "no", "none", "null", "0")
LIVE = ("true", "live", "on", "yes", "1")


def accept_doctor(
    value: Any,
    paths: list[Path],
    measured_here: bool,
    gpus: int,
    topology: Topology | None,
    topology_src: str | None,
) -> Report | None:
    """The doctor's report for this acceptance, or None when turned off."""
    mode = str(value if value is not None else "auto").strip().lower()
    if mode in OFF:
        return None
    if mode not in ("auto", *LIVE):
        raise InputError(f"doctor: expected auto, live or false, got {value!r}")
    if mode in LIVE or measured_here:
        evidence = gather_live(under_load=gpus > 0)
    else:
        evidence = gather_files(DoctorFiles())
        evidence.host = "(rows only)"
        if topology is not None:
            evidence.topology = topology
            evidence.got("topology", topology_src or "accept's topology")
    for path in paths:
        if path.exists():
            add_run(evidence, str(path))
    return run_doctor(evidence)


def findings_json(report: Report | None) -> dict[str, Any]:
    """What accept.json keeps: ``findings`` (a list of {severity, check, title, evidence,
    why, fix, subject}) and, beside it, what the doctor could not check and why."""
    if report is None:
        return {"findings": [], "doctor": {"ran": False}}
    return {
        "findings": [f.to_dict() for f in report.findings],
        "doctor": {
            "ran": True,
            "host": report.host,
            "live": report.live,
            "counts": report.counts(),
            "checks_not_run": report.not_run,
            "absent": report.absent,
        },
    }
