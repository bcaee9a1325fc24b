"""`python -m benchmarks.check` in a plain `pip install -e .` (moved here from
tests/commands/test_small_things.py: only tests of benchmarks/ import it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_figure_check_needs_no_test_extras(tmp_path: Path) -> None:
    """`python -m benchmarks.check` in `pip install -e .` (no pytest, no hypothesis): the
    modules its regenerated outputs import load without them."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'pytest', '_pytest', 'hypothesis'}:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    code = "import benchmarks.check, tests.report_pages, tests.analysis.fixture_rows; print('ok')"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-500:]
    proof = subprocess.run(
        [sys.executable, "-c", "import pytest"], capture_output=True, text=True, env=env
    )
    assert "No module named 'pytest'" in proof.stderr  # the blocker works
