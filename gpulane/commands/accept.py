"""`gpulane accept`: Hydra command; `--baseline RUN` style options map to overrides."""

from __future__ import annotations

import re

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


def to_overrides(argv: list[str]) -> list[str]:
    """``--baseline X`` / ``--baseline=X`` -> ``baseline=X``; everything else unchanged."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in OPTIONS:
            if not eq:
                if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                    raise InputError(f"{name} needs a value")
                value = argv[i + 1]
                i += 1
            out.append(f"{OPTIONS[name]}={_quote(value)}")
        else:
            out.append(arg)
        i += 1
    return out


def main(argv: list[str]) -> int:
    from gpulane.campaigns.accept import accept
    from gpulane.commands.hydra_app import run_hydra

    return run_hydra("accept", accept, to_overrides(argv), "gpulane accept")
