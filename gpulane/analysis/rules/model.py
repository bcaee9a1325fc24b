"""What a check says (:class:`Check`), the verdict of a rule set, and what a check reads.

A check function takes ``(rule_id, rule, ctx)`` and returns :class:`Check` lines; the
:class:`Context` holds every input it may read, so a new check (or a new input such as
``gpulane doctor``'s findings, passed as ``evidence``) needs no change to the evaluator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from gpulane.topology.model import Topology

PASS, FAIL, SKIP = "pass", "fail", "skip"
# The verdict of a rule set over a run (see docs/accept.md).
VERDICT_PASS, VERDICT_FAIL, VERDICT_INCOMPLETE = "PASS", "FAIL", "INCOMPLETE"


@dataclass
class Check:
    rule: str
    status: str  # pass, fail, skip
    basis: str  # absolute, expected, baseline, outlier, rows, topology
    subject: str  # GPU0, GPU0->GPU1, a host, or "-"
    message: str
    description: str = ""
    figure: str | None = None
    value: float | None = None
    threshold: float | None = None
    unit: str = ""
    # how far the check is from failing, signed so that negative is worse whichever way
    # the rule points: (value - threshold) / threshold for a minimum, its negative for a
    # maximum. It orders checks (the worst first); tables show ``offset`` instead.
    margin: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def offset(self) -> float | None:
        """Where the value sits from the threshold beside it, as the "by" column shows
        it: (value - threshold) / threshold, positive when the value is above. A
        latency of 1.40 against a maximum of 0.48 reads +192 %, not ``margin``'s -192 %
        (the sign that says "worse", which read as "below" next to the two figures)."""
        if self.value is not None and self.threshold:
            return (self.value - self.threshold) / self.threshold
        return self.margin

    def offset_text(self, none: str = "") -> str:
        by = self.offset()
        return none if by is None else f"{by * 100:+.1f}%"


@dataclass
class Missing:
    """A required check that did not run: why, and the command that would supply it.
    ``allowed``: accepted knowingly (``accept --allow-skip RULE``)."""

    rule: str
    why: str
    supply: str
    description: str = ""
    allowed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Verdict:
    checks: list[Check] = field(default_factory=list)
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[Missing] = field(default_factory=list)
    # what kind of machine the rows are from (rules.required.machine_facts)
    facts: dict[str, bool | None] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """FAIL when a check failed; INCOMPLETE when a required check did not run (and was
        not allowed to skip) or when no check passed at all; else PASS."""
        if any(c.status == FAIL for c in self.checks):
            return VERDICT_FAIL
        if self.unmet or not any(c.status == PASS for c in self.checks):
            return VERDICT_INCOMPLETE
        return VERDICT_PASS

    @property
    def passed(self) -> bool:
        return self.status == VERDICT_PASS

    @property
    def unmet(self) -> list[Missing]:
        """Required checks that did not run and were not allowed to skip."""
        return [m for m in self.missing if not m.allowed]

    @property
    def allowed(self) -> list[Missing]:
        return [m for m in self.missing if m.allowed]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    def counts(self) -> dict[str, int]:
        out = {PASS: 0, FAIL: 0, SKIP: 0}
        for c in self.checks:
            out[c.status] = out.get(c.status, 0) + 1
        return out

    def failed_rules(self) -> list[str]:
        return sorted({c.rule for c in self.failed})

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([c.to_dict() for c in self.checks])

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.status,
            "passed": self.passed,
            "counts": self.counts(),
            "failed_rules": self.failed_rules(),
            "missing": [m.to_dict() for m in self.unmet],
            "allowed_skips": [m.to_dict() for m in self.allowed],
            "machine": self.facts,
            "checks": [c.to_dict() for c in self.checks],
        }


@dataclass
class Context:
    """Everything a check may read. ``evidence`` holds further inputs by name (for example
    ``doctor``: the findings of ``gpulane doctor``) for checks that need them."""

    frame: pd.DataFrame
    topology: Topology | None = None
    baseline: pd.DataFrame | None = None
    multi_host: bool = False
    multi_build: bool = False
    default_outlier: float | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)
    # every row, 1-rank collectives too (``frame`` leaves those out): what ran on a GPU
    all_rows: pd.DataFrame | None = None

    def has(self, need: str) -> bool:
        if need == "rows":
            return True  # always there, perhaps empty: each check says what none means
        if need == "topology":
            return self.topology is not None
        if need == "baseline":
            return self.baseline is not None
        return self.evidence.get(need) is not None


CheckFunction = Callable[[str, Mapping[str, Any], Context], list[Check]]


@dataclass(frozen=True)
class CheckSpec:
    """One row of the CHECKS table: a check type that rules name with ``check:``."""

    run: CheckFunction
    # Inputs the check cannot run without; when one is missing the rule is skipped (failed
    # when it is required) by the evaluator, saying which (see MISSING).
    needs: tuple[str, ...]
    # When a subject passes, in words (the comparison and what the threshold is made of).
    threshold: str
    keys: tuple[str, ...] = ()  # the rule keys of its own, beside COMMON_KEYS
    required: tuple[str, ...] = ()  # keys a rule of this check must set
    numbers: tuple[str, ...] = ()  # keys that hold a number when set


# Why a check that needs an input says nothing without it.
MISSING = {
    "topology": "no topology (accept topology=FILE from `gpulane topo --json`)",
    "baseline": "no baseline given (accept --baseline RUN)",
}


def missing_text(need: str) -> str:
    return MISSING.get(need, f"no {need} given")


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "?"
    text = f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"
    return f"{text} {unit}".strip()


def pct(margin: float) -> str:
    return f"{abs(margin) * 100:.1f}%"
