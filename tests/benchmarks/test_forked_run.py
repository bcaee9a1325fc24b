"""A regenerating command run in a fork of the checker answers as a new interpreter would:
the same stdout, stderr and exit status, for a script and for ``-m``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import forked_run

SCRIPT = """
import os, sys
from helper_beside import WORD
print(WORD, sys.argv[1:], os.getcwd() == {cwd!r}, __name__)
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize("code", ["0", "3"])
def test_a_script_answers_as_a_new_process(tmp_path: Path, code: str) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "helper_beside.py").write_text("WORD = 'beside'\n")
    (scripts / "job.py").write_text(SCRIPT.format(cwd=str(tmp_path)))
    argv = [sys.executable, "scripts/job.py", code, "x"]
    forked = forked_run.run(argv, tmp_path)
    fresh = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode, fresh.stdout, fresh.stderr,
    )  # fmt: skip
    assert forked.returncode == int(code)
    assert forked.stdout == f"beside ['{code}', 'x'] True __main__\n"


def test_a_module_and_a_crash(tmp_path: Path) -> None:
    (tmp_path / "crashing.py").write_text("print('before')\nraise ValueError('boom')\n")
    argv = [sys.executable, "-m", "crashing"]
    forked = forked_run.run(argv, tmp_path)
    fresh = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert forked.returncode == fresh.returncode == 1
    assert forked.stdout == fresh.stdout == "before\n"
    assert "ValueError: boom" in forked.stderr and "ValueError: boom" in fresh.stderr


def test_other_commands_run_as_subprocesses(tmp_path: Path) -> None:
    out = forked_run.run([sys.executable, "-c", "print(6 * 7)"], tmp_path)
    assert (out.returncode, out.stdout) == (0, "42\n")
