"""`gpulane trace FILE...` end to end (gpulane.commands.trace and the CLI)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gpulane import cli
from gpulane.commands.trace import main
from gpulane.parquet_rows import read_parquet
from gpulane.record import read_rows
from tests.conftest import fixture_path

BAD = str(fixture_path("traces/h200/bad.json.gz"))
GOOD = str(fixture_path("traces/h200/good.json.gz"))


def test_two_traces_json_rows_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            BAD,
            GOOD,
            "--json",
            "--out",
            str(tmp_path / "rows"),
            "--plot",
            str(tmp_path / "plots"),
            "--line-rate-gbps",
            "63",
            "--build",
            "h200-demo",
        ]
    )
    assert rc == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [t["summary"]["label"] for t in doc["traces"]] == ["bad.json.gz", "good.json.gz"]
    bad, good = (t["summary"] for t in doc["traces"])
    assert bad["pcie_gbps"] < 20 < 40 < good["pcie_gbps"]
    assert bad["blocking_us"] > 0 == good["blocking_us"]
    changes = {c["metric"]: c for c in doc["comparisons"][0]["changes"]}
    assert changes["pcie_gbps"]["better"] and changes["blocking_us"]["better"]
    assert "side by side" in captured.err  # tables go to stderr with --json

    rows = list(read_rows(tmp_path / "rows" / "rows.jsonl"))
    assert len(rows) == 2
    assert all(r.kind == "copy" and r.source == "trace" for r in rows)
    assert {r.memory for r in rows} == {"pageable", "pinned"}
    assert all(r.build == "h200-demo" and r.expected_gbps == 63.0 for r in rows)
    frame = read_parquet(tmp_path / "rows" / "rows.parquet")
    assert len(frame) == 2

    plots = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert plots == ["bandwidth-histogram.png", "timeline-bad.png", "timeline-good.png"]


def test_truncated_and_bad_files_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = gzip.decompress(Path(GOOD).read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) * 3 // 4])
    junk = tmp_path / "junk.json"
    junk.write_text("this is not a trace")
    rc = cli.main(["trace", str(cut), str(junk), "--line-rate-gbps", "0"])
    captured = capsys.readouterr()
    assert rc == 2  # one file could not be read at all
    assert f"gpulane: error: {junk}:1: not a Chrome trace" in captured.err
    assert "TRUNCATED" in captured.out and "cut off at line" in captured.out
    assert "complete events" in captured.out


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["trace", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "Traceback" not in err
    assert cli.main(["trace", BAD, "--hbm-threshold-gbps", "-1"]) == 2
    assert "--hbm-threshold-gbps" in capsys.readouterr().err


def test_cpu_trace_threshold_flag(capsys: pytest.CaptureFixture[str]) -> None:
    cpu = str(fixture_path("traces/cpu/copies.json.gz"))
    assert main([cpu, "--json", "--hbm-threshold-gbps", "0.5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    s = doc["traces"][0]["summary"]
    assert s["inferred"] and "0.5 GB/s" in s["rule"]
    assert set(s["by_link"]) == {"pcie", "on-device"}
    assert doc["traces"][0]["hbm_threshold_gbps"] == 0.5
