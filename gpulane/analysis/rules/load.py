"""The rule set: validated before anything is measured (bad input is one line, exit 2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpulane.analysis.rules.checks import CHECKS, rule_keys
from gpulane.analysis.rules.measurement import MODES
from gpulane.analysis.rules.required import FACTS
from gpulane.analysis.rules.subjects import PER
from gpulane.errors import InputError
from gpulane.units import parse_size


def load_rules(spec: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], float | None]:
    """Validated rules (enabled ones, by id) and the rule set's outlier fraction."""
    checks = spec.get("checks") or {}
    if not isinstance(checks, Mapping):
        raise InputError("rules.checks: expected a mapping of rule id -> rule")
    default_outlier = spec.get("outlier_fraction")
    out: dict[str, dict[str, Any]] = {}
    for rule_id, raw in checks.items():
        if raw is None:
            continue
        if not isinstance(raw, Mapping):
            raise InputError(f"rules.checks.{rule_id}: expected a mapping")
        rule = dict(raw)
        _check_rule(str(rule_id), rule)
        if rule.get("enabled", True) is not False:
            out[str(rule_id)] = rule
    if default_outlier is not None and not (0 < float(default_outlier) < 1):
        raise InputError("rules.outlier_fraction: expected a fraction between 0 and 1")
    return out, (float(default_outlier) if default_outlier is not None else None)


def _check_rule(rule_id: str, rule: Mapping[str, Any]) -> None:
    where = f"rules.checks.{rule_id}"
    known = rule_keys()
    unknown = set(rule) - known
    if unknown:
        raise InputError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(known))}"
        )
    if rule.get("enabled", True) is False:
        return
    check = rule.get("check")
    if check not in CHECKS:
        raise InputError(f"{where}.check: {check!r} is not one of {', '.join(CHECKS)}")
    spec = CHECKS[check]
    for key in spec.required:
        if not rule.get(key):
            raise InputError(f"{where}: a {check} rule needs {key}")
    for key in spec.numbers:
        value = rule.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InputError(f"{where}.{key}: expected a number, got {value!r}")
    select = rule.get("select") or {}
    if not isinstance(select, Mapping):
        raise InputError(f"{where}.select: expected a mapping of column: value")
    for key in ("size", "size_min", "size_max"):
        if key in select and select[key] is not None and str(select[key]) != "max":
            parse_size(select[key], f"{where}.select.{key}")
    if "mode" in select and select["mode"] is not None:
        bad = [m for m in str(select["mode"]).split(",") if m not in (*MODES, "*")]
        if bad:
            raise InputError(f"{where}.select.mode: {bad[0]!r}; expected {', '.join(MODES)}")
    _check_required(where, rule.get("required", False))
    if rule.get("per", "auto") not in PER:
        raise InputError(f"{where}.per: expected auto, gpu, pair, node or all")


def _check_required(where: str, want: Any) -> None:
    """``required``: true, false or a list of machine facts (rules.required.FACTS)."""
    if isinstance(want, bool) or want is None:
        return
    items = [want] if isinstance(want, str) else want
    if not isinstance(items, Sequence):
        raise InputError(f"{where}.required: expected true, false or a list of {', '.join(FACTS)}")
    for item in items:
        if str(item) not in FACTS:
            raise InputError(
                f"{where}.required: {item!r} is not a machine fact; expected {', '.join(FACTS)}"
            )


def merge_rule_sets(sets: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Later rule sets override earlier ones rule by rule (tests, programmatic use)."""
    out: dict[str, Any] = {"checks": {}}
    for s in sets:
        for k, v in s.items():
            if k == "checks":
                out["checks"].update(v or {})
            else:
                out[k] = v
    return out
