"""The rule set accept checks against: a shipped one (``rules=default|nvlink|pcie``, the
Hydra group) or the user's own file (``rules=/path/rules.yaml``), validated before
anything is measured; and the shipped rules in words for ``accept --help``/``--rules``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpulane.analysis.rules import load_rules, merge_rule_sets
from gpulane.errors import InputError

SHIPPED = ("default", "nvlink", "pcie", "base")


def is_rules_file(value: str) -> bool:
    """``rules=VALUE`` names a file (not a shipped rule set) when it looks like a path."""
    return value.endswith((".yaml", ".yml")) or "/" in value


def shipped_rule_set(name: str) -> dict[str, Any]:
    """A shipped rule set composed as Hydra composes it (its ``defaults`` first)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    if name not in SHIPPED:
        raise InputError(f"rules: {name!r} is not a shipped rule set ({', '.join(SHIPPED)})")
    GlobalHydra.instance().clear()
    with initialize_config_module("gpulane.conf", version_base="1.3"):
        cfg = compose("accept", overrides=[f"rules={name}"])
    spec = OmegaConf.to_container(cfg.rules, resolve=True)
    assert isinstance(spec, dict)
    return {str(k): v for k, v in spec.items()}


def load_rules_file(path_text: str) -> dict[str, Any]:
    """The user's rule set: YAML with ``checks`` (and ``outlier_fraction``); ``defaults:
    [NAME, ...]`` starts from shipped rule sets, which its own checks then override.
    Every fault is one line naming the file."""
    import yaml

    path = Path(path_text)
    if not path.is_file():
        raise InputError(f"rules: {path}: no such file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"rules: {path}: cannot read: {err}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"rules: {path}: not YAML{where}: {problem}") from err
    if not isinstance(data, Mapping):
        raise InputError(
            f"rules: {path}: expected a mapping with `checks:`, got {type(data).__name__}"
        )
    known = {"checks", "outlier_fraction", "defaults", "expect"}
    unknown = sorted(str(k) for k in data if str(k) not in known)
    if unknown:
        raise InputError(
            f"rules: {path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    if "checks" not in data or not isinstance(data["checks"], Mapping) or not data["checks"]:
        raise InputError(f"rules: {path}: expected `checks:`, a mapping of rule id -> rule")
    bases = data.get("defaults") or []
    if isinstance(bases, str):
        bases = [bases]
    sets = [shipped_rule_set(str(b)) for b in bases]
    own = {k: v for k, v in data.items() if k != "defaults"}
    spec = merge_rule_sets([*sets, own])
    try:
        load_rules(spec)
    except InputError as err:
        raise InputError(f"rules: {path}: {err}") from err
    return spec


def rules_listing(spec: Mapping[str, Any]) -> str:
    """One line per rule: its id, when it is required and what it checks."""
    from gpulane.analysis.rules.required import required_text

    lines = []
    for rule_id, rule in (spec.get("checks") or {}).items():
        if not isinstance(rule, Mapping):
            continue
        req = required_text(rule)
        lines.append(
            f"  {rule_id:<31} {rule.get('description') or rule.get('check')}"
            + (f" [required {req}]" if req != "no" else "")
        )
    return "\n".join(lines)


def rules_yaml(spec: Mapping[str, Any]) -> str:
    import yaml

    return str(yaml.safe_dump(dict(spec), sort_keys=False, width=100))
