"""Running `gpulane parse` as a user does, on real captured files and on copies cut short."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpulane.cli import main as cli_main
from tests.conftest import fixture_path


def run_parse(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`gpulane parse ARGS...` through the real command line: (exit status, stdout, stderr)."""
    status = cli_main(["parse", *args])
    out, err = capsys.readouterr()
    return status, out, err


def json_rows(out: str) -> list[dict[str, Any]]:
    """Rows printed by --json, read as strict JSON (no Infinity, no NaN)."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in a row: not strict JSON")

    return [json.loads(line, parse_constant=refuse) for line in out.splitlines() if line]


def cut_copy(tmp_path: Path, relative: str, after: str, keep: int, name: str = "") -> Path:
    """The fixture cut ``keep`` characters into the first ``after`` (a real file cut off
    inside a line, as an interrupted capture or copy leaves it)."""
    text = fixture_path(relative).read_text()
    at = text.index(after) + keep
    path = tmp_path / (name or Path(relative).name)
    path.write_text(text[:at])
    return path
