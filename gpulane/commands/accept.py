"""`gpulane accept`: Hydra command; `--baseline RUN` style options map to overrides.

``--allow-skip RULE`` may be repeated (``allow_skip=[A,B]``); ``rules=FILE`` (a path or a
``.yaml`` name) is the user's own rule set (``rules_file=FILE``); ``--rules`` without a
value prints the rule set in full; ``--help`` ends with the default rules in a line each.
"""

from __future__ import annotations

import re
from typing import Any

from gpulane.errors import InputError

# --option -> config key
OPTIONS = {
    "--baseline": "baseline",
    "--save-baseline": "save_baseline",
    "--rows": "run",
    "--run": "run",
    "--topology": "topology",
    "--rules": "rules",
    "--out": "out",
    "--junit": "junit",
    "--html": "html",
    "--format": "format",
    "--build": "build",
    "--preset": "preset",
    "--results-dir": "results_dir",
    "--doctor": "doctor",
}
_PLAIN = re.compile(r"^[A-Za-z0-9_./:@+-]+$")


def _quote(value: str) -> str:
    """A value as a Hydra override reads it back verbatim."""
    if _PLAIN.match(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _value(argv: list[str], i: int, name: str) -> tuple[str, int]:
    if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
        raise InputError(f"{name} needs a value")
    return argv[i + 1], i + 1


def to_overrides(argv: list[str]) -> list[str]:
    """``--baseline X`` / ``--baseline=X`` -> ``baseline=X``; ``--allow-skip X`` (repeated)
    -> ``allow_skip=[X,...]``; ``rules=FILE`` -> ``rules_file=FILE``; the rest unchanged."""
    from gpulane.campaigns.accept.rules_input import is_rules_file

    out: list[str] = []
    skips: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name == "--allow-skip":
            if not eq:
                value, i = _value(argv, i, name)
            skips += [v for v in value.split(",") if v]
        elif name in OPTIONS:
            if not eq:
                value, i = _value(argv, i, name)
            key = OPTIONS[name]
            if key == "rules" and is_rules_file(value):
                key = "rules_file"
            out.append(f"{key}={_quote(value)}")
        elif name == "rules" and eq and is_rules_file(value):
            out.append(f"rules_file={_quote(value)}")
        else:
            out.append(arg)
        i += 1
    if skips:
        out.append("allow_skip=[" + ",".join(_quote(s) for s in skips) + "]")
    return out


def _print_rules(argv: list[str]) -> int:
    """``gpulane accept --rules [rules=NAME|FILE]``: the rule set in full, as YAML."""
    from gpulane.campaigns.accept.rules_input import (
        load_rules_file,
        rules_yaml,
        shipped_rule_set,
    )

    chosen = "default"
    for arg in argv:
        key, eq, value = arg.partition("=")
        if key == "rules" and eq:
            chosen = value
        elif arg != "--rules":
            raise InputError(
                f"--rules: prints a rule set; only rules=NAME|FILE may go with it, not {arg!r}"
            )
    spec = (
        load_rules_file(chosen)
        if "/" in chosen or chosen.endswith((".yaml", ".yml"))
        else shipped_rule_set(chosen)
    )
    print(f"# gpulane accept rule set {chosen!r} (docs/accept.md)")
    print(rules_yaml(spec), end="")
    return 0


def _accept(cfg: Any) -> int:
    # imported when a run starts: `accept --help` needs none of the suite (pandas, torch)
    from gpulane.campaigns.accept import accept

    return int(accept(cfg) or 0)


def main(argv: list[str]) -> int:
    from gpulane.commands.hydra_app import run_hydra

    if "--rules" in argv:
        at = argv.index("--rules")
        if at + 1 >= len(argv) or argv[at + 1].startswith("--") or "=" in argv[at + 1]:
            return _print_rules(argv)
    status = run_hydra("accept", _accept, to_overrides(argv), "gpulane accept")
    if "--help" in argv or "-h" in argv:
        from gpulane.campaigns.accept.rules_input import rules_listing, shipped_rule_set

        print("\nRules of the default set (gpulane accept --rules prints them in full):")
        print(rules_listing(shipped_rule_set("default")))
    return status
