"""The small things a new user met: results' figures and run ids printed whole, `report -o`
refused before rendering, `topo` never telling root to run as root, and the README's
figure check working without the test extras."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from gpulane.cli import main
from gpulane.commands.report import check_writable
from gpulane.commands.results import _cell
from gpulane.errors import InputError
from gpulane.topology.live import not_readable_why
from tests.helpers import fixture_path

ROOT = Path(__file__).resolve().parents[2]
RUN = fixture_path("h200x2/doctor/runs/20261123-053149-pcie-host-e607")


@pytest.mark.parametrize(
    ("value", "shown"),
    [(3.77051e-06, "0.000"), (16.532, "16.532"), (345.123456, "345.123"), (2.5e9, "2500000000")],
)
def test_results_cells_have_fixed_decimals(value: float, shown: str) -> None:
    assert _cell(value) == shown


def test_results_table_keeps_run_ids_whole_on_a_narrow_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "60")  # rich: a 60-column terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(["results", str(RUN), "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count(RUN.name) == 3  # every row's run id, uncut
    assert "…" not in out
    assert "e-0" not in out


def test_report_to_a_read_only_place_fails_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    started = time.monotonic()
    assert main(["report", str(run), "-o", str(tmp_path / "no" / "such" / "dir.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpulane: error: cannot write ") and "choose another with -o" in err
    assert time.monotonic() - started < 20  # before rendering (the imports are the time)
    assert not (run / "report.html").exists()


def test_writable_probe_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    check_writable(out)
    assert not out.exists()
    out.write_text("kept")
    check_writable(out)
    assert out.read_text() == "kept"
    if os.geteuid() != 0:  # root writes anywhere the file system allows
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(InputError, match="Permission denied"):
            check_writable(locked / "r.html")


def test_topo_says_run_as_root_only_to_others() -> None:
    why = not_readable_why()
    if os.geteuid() == 0:
        assert "run as root" not in why and "even from root" in why
    else:
        assert why == "run as root"
