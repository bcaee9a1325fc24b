"""Where accept writes: inside the results directory, never beside an input file, and
never over an earlier accept's verdict (a second `accept run=GROUP` gets accept-2/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gpulane.campaigns.accept.run import fresh_out
from tests import helpers
from tests.helpers import fixture_path

RUN = fixture_path("h200x2/doctor/runs/20261123-053149-pcie-host-e607")
QUIET = ["--doctor", "false", "html=false", "format=none"]


def test_fresh_out_numbers_past_earlier_verdicts(tmp_path: Path) -> None:
    assert fresh_out(tmp_path) == tmp_path
    (tmp_path / "accept.json").write_text("{}")
    assert fresh_out(tmp_path) == tmp_path / "accept-2"
    (tmp_path / "accept-2").mkdir()
    (tmp_path / "accept-2" / "accept.json").write_text("{}")
    assert fresh_out(tmp_path) == tmp_path / "accept-3"


def test_a_second_accept_keeps_the_first(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "group"
    shutil.copytree(RUN, run)
    first = helpers.gpulane("accept", f"run={run}", *QUIET, cwd=tmp_path)
    assert (run / "accept.json").exists(), first.stdout + first.stderr
    before = (run / "accept.json").read_text()
    second = helpers.gpulane("accept", f"run={run}", "junit=false", *QUIET, cwd=tmp_path)
    assert second.returncode == first.returncode, second.stdout + second.stderr
    assert (run / "accept.json").read_text() == before
    again = json.loads((run / "accept-2" / "accept.json").read_text())
    assert again["verdict"] == json.loads(before)["verdict"]
    assert f"holds an earlier accept's verdict; this one: {run / 'accept-2'}" in second.stdout


def test_a_rows_file_gets_its_verdict_in_the_results_directory(tmp_path: Path) -> None:
    run = tmp_path / "input" / "pcie-run"
    shutil.copytree(RUN, run)
    rows = next(p for p in (run / "rows.jsonl", run / "rows.parquet") if p.exists())
    results = tmp_path / "results"
    helpers.gpulane("accept", f"run={rows}", f"results_dir={results}", *QUIET, cwd=tmp_path)
    assert not (run / "accept.json").exists()
    assert (results / "pcie-run-accept" / "accept.json").exists()
