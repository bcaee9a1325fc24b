"""The mutation gate's runner (benchmarks/tests/collected.py) on a tiny project of its own:
real mutmut mutates it, real pytest runs its tests once collected; the verdicts are those
of plain ``mutmut run`` (a new pytest.main per mutant)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CORE = """
def clamp(x: int, low: int) -> int:
    return max(x, low)


def pairs(a: list[int], b: list[int]) -> list[tuple[int, int]]:
    return list(zip(a, b, strict=True))


def countdown(n: int) -> int:
    steps = 0
    while n > 0:
        n -= 1
        steps += 1
    return steps
"""
TESTS = """
from tiny.core import clamp, countdown, pairs


def test_clamp():
    assert clamp(-3, 0) == 0
    assert clamp(5, 2) == 5


def test_pairs():
    # equal lengths only: zip's strictness is not tested (its mutants are equivalent here)
    assert pairs([1, 2], [3, 4]) == [(1, 3), (2, 4)]


def test_countdown():
    assert countdown(3) == 3
"""
CONFIG = """
[tool.mutmut]
source_paths = ["tiny"]
pytest_add_cli_args_test_selection = ["tests"]
pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]
use_git_change_detection = false
# a mutant that loops forever is stopped after (0 + 1) * 3 s of wall time
timeout_constant = 1.0
timeout_multiplier = 3.0
"""
# countdown's mutants include loops that never end; the plain run leaves them out
NOT_COUNTDOWN = ("tiny.core.x_clamp__mutmut_*", "tiny.core.x_pairs__mutmut_*")


def _project(base: Path) -> Path:
    for rel, text in {
        "tiny/__init__.py": "",
        "tiny/core.py": CORE,
        "tests/__init__.py": "",
        "tests/test_core.py": TESTS,
        "pyproject.toml": CONFIG,
    }.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    return base


def _mutmut(base: Path, module: str, names: tuple[str, ...] = ()) -> dict[str, int]:
    """Run mutmut in ``base`` through ``module``; the exit code of every mutant."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(base), str(ROOT)])}
    env.pop("MUTANT_UNDER_TEST", None)
    cmd = [sys.executable, "-m", module, "run", "--max-children", "2", *names]
    proc = subprocess.run(cmd, cwd=base, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    codes: dict[str, int] = {}
    for meta in (base / "mutants").rglob("*.py.meta"):
        for key, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            if code is not None:  # None: a mutant not run (not among names)
                codes[key] = code
    return codes


def _bodies(base: Path) -> dict[str, str]:
    """Each mutant's code (its def's indented body), from the file mutmut wrote."""
    found: dict[str, list[str]] = {}
    body: list[str] = []
    for line in (base / "mutants" / "tiny" / "core.py").read_text().splitlines():
        m = re.match(r"def (x_\w+__mutmut_\d+)\(", line)
        if m:
            body = found.setdefault(f"tiny.core.{m.group(1)}", [])
        elif line.startswith(" "):
            body.append(line)
        else:
            body = []
    return {k: "\n".join(v) for k, v in found.items()}


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, int], dict[str, str]]:
    base = _project(tmp_path_factory.mktemp("collected"))
    return _mutmut(base, "benchmarks.tests.collected"), _bodies(base)


def test_kills_what_the_tests_catch_and_lets_the_equivalent_survive(
    collected: tuple[dict[str, int], dict[str, str]],
) -> None:
    codes, bodies = collected
    assert set(codes) == set(bodies) and codes
    clamp = {k: c for k, c in codes.items() if ".x_clamp__" in k}
    pairs = {k: c for k, c in codes.items() if ".x_pairs__" in k}
    assert clamp and set(clamp.values()) == {1}  # every change to clamp fails test_clamp
    # zip(a, b) with strict dropped, None or False: the same pairs for equal lengths
    equivalent = {
        k for k in pairs if re.search(r"zip\(a, b, (strict=(None|False))?\s*\)", bodies[k])
    }
    assert equivalent and len(equivalent) < len(pairs)
    assert {k for k, c in pairs.items() if c == 0} == equivalent
    assert all(c == 1 for k, c in pairs.items() if k not in equivalent)


def test_a_mutant_that_never_ends_times_out(
    collected: tuple[dict[str, int], dict[str, str]],
) -> None:
    codes, bodies = collected
    forever = [k for k, b in bodies.items() if ".x_countdown__" in k and "n += 1" in b]
    assert forever
    # SIGXCPU from mutmut's wall-time watch, or SIGKILL at the CPU limit: both "timeout"
    assert all(codes[k] in (-24, -9) for k in forever)


def test_same_verdicts_as_plain_mutmut(
    tmp_path: Path, collected: tuple[dict[str, int], dict[str, str]]
) -> None:
    plain = _mutmut(_project(tmp_path), "mutmut", NOT_COUNTDOWN)
    codes, _ = collected
    assert plain == {k: codes[k] for k in plain}
    assert {k for k in codes if ".x_countdown__" not in k} == set(plain)
