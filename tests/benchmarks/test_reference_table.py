"""The shipped 2x H200 reference table is what the committed rows give."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_table_is_regenerated_from_the_committed_rows() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/reference/build_table.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "up to date" in done.stdout
