"""Exit 0 when every requirement named is installed at a version it allows, else 1.

    python3 scripts/deps-ok.py torch==2.13.0 ".[test,mpi]"

``.[extras]`` stands for this checkout's dependencies (pyproject.toml) and those of the
extras named; setuptools (the editable install is made without build isolation) is
checked too. scripts/test.sh runs pip's full resolution only when this says no.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def wanted(args: list[str]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    out = [Requirement(r) for r in project["build-system"]["requires"]]
    for arg in args:
        m = re.fullmatch(r"\.(?:\[([\w,-]*)\])?", arg)
        if not m:
            out.append(Requirement(arg))
            continue
        out += [Requirement(r) for r in project["project"]["dependencies"]]
        extras = project["project"].get("optional-dependencies", {})
        for extra in filter(None, (m.group(1) or "").split(",")):
            out += [Requirement(r) for r in extras[extra]]
    return out


def missing(reqs: list[Requirement]) -> list[str]:
    out = []
    for req in reqs:
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            version = md.version(req.name)
        except md.PackageNotFoundError:
            out.append(f"{req} (not installed)")
            continue
        if not req.specifier.contains(version, prereleases=True):
            out.append(f"{req} (installed {version})")
    return out


if __name__ == "__main__":
    gaps = missing(wanted(sys.argv[1:]))
    for gap in gaps:
        print(f"deps-ok: missing {gap}", file=sys.stderr)
    sys.exit(1 if gaps else 0)
