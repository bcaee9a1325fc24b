"""Reading an ``accept.json`` (what `gpulane accept` wrote) back for a report: the
verdict, the baseline it was checked against, and the doctor's findings (see
:mod:`gpulane.analysis.report.checks` for their form; ``"doctor": {"ran": false}`` beside
an empty list means the doctor did not run)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulane.analysis.rules import Check, Verdict
from gpulane.analysis.rules.model import Missing
from gpulane.errors import InputError


@dataclass
class AcceptFile:
    verdict: Verdict
    baseline: str | None  # where the baseline rows were (may be gone)
    findings: list[Mapping[str, Any]] | None  # None: the doctor did not run


def read_accept(path: Path, what: str = "--accept") -> AcceptFile:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"{what}: {path}: cannot read: {err.strerror or err}") from err
    except ValueError as err:  # not JSON, or not text at all
        raise InputError(f"{what}: {path}: not JSON, so not an accept.json") from err
    checks = data.get("checks") if isinstance(data, dict) else None
    if not isinstance(checks, list):
        raise InputError(f"{what}: {path}: not an accept.json (no list of checks)")
    fields = set(Check.__dataclass_fields__)
    try:
        verdict = Verdict([Check(**{k: v for k, v in c.items() if k in fields}) for c in checks])
    except (AttributeError, TypeError) as err:
        raise InputError(f"{what}: {path}: a check is not as accept writes it ({err})") from err
    # required checks that did not run (INCOMPLETE), and those allowed to skip
    mfields = set(Missing.__dataclass_fields__)
    for key, allowed in (("missing", False), ("allowed_skips", True)):
        for m in data.get(key) or []:
            if isinstance(m, Mapping) and m.get("rule"):
                entry = {k: v for k, v in m.items() if k in mfields}
                entry.setdefault("why", "")
                entry.setdefault("supply", "")
                verdict.missing.append(Missing(**{**entry, "allowed": allowed}))
    findings = data.get("findings")
    doctor = data.get("doctor")
    if isinstance(doctor, dict) and doctor.get("ran") is False:
        findings = None  # accept keeps an empty list when its doctor did not run
    return AcceptFile(
        verdict,
        str(data["baseline"]) if data.get("baseline") else None,
        [f for f in findings if isinstance(f, Mapping)] if isinstance(findings, list) else None,
    )
