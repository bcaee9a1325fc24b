"""`gpulane reference add`: only accepted runs become a site's reference."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from gpulane.cli import main
from tests.conftest import fixture_path

RUN = "h200x2/doctor/runs/20261123-053138-nvlink-3e5b"


def _run(tmp_path: Path) -> Path:
    dst = tmp_path / "runs" / "r1"
    shutil.copytree(fixture_path(RUN), dst)
    return dst


def _accept(run: Path, status: str) -> None:
    checks = [
        {"rule": "busbw", "status": status, "basis": "absolute", "subject": "-", "message": ""}
    ]
    (run / "accept.json").write_text(json.dumps({"checks": checks}))


def test_add_refuses_a_run_never_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path)
    assert main(["reference", "add", str(run)]) == 2
    assert "no accept.json" in capsys.readouterr().err
    _accept(run, "fail")
    assert main(["reference", "add", str(run)]) == 2
    assert "failed rules (busbw)" in capsys.readouterr().err
    assert not (run.parent / "reference.yaml").exists()


def test_add_then_results_judges_against_the_site(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path)
    _accept(run, "pass")
    assert main(["reference", "add", str(run)]) == 0
    site = run.parent / "reference.yaml"
    assert "5 entries" in capsys.readouterr().out and site.is_file()
    assert main(["results", str(run.parent), "--size-min", "16M"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("# reference: nvlink"))
    # the site's range was made from r1 itself: that is said, never "normal" (issue 44)
    assert "reference is this run itself (the range of site runs r1" in line, line
    assert "normal" not in line
    # the same figures from another run of the machine are judged against r1's range
    other = run.parent / "r2"
    other.mkdir()
    rows = (run / "rows.jsonl").read_text().replace(RUN.rsplit("/", 1)[1], "r2-own-id")
    (other / "rows.jsonl").write_text(rows)
    assert main(["results", str(run.parent), "--run", "r2-own-id", "--size-min", "16M"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "# reference: nvlink" in ln)
    assert "normal for 2× H200 NV18 without NVLS" in line and "site runs r1" in line, line
    # adding the same run again replaces its entries rather than doubling them
    assert main(["reference", "add", str(run)]) == 0
    assert "(5 in all)" in capsys.readouterr().out
    assert main(["reference", "list", "--results-dir", str(run.parent), "--gpu", "H200"]) == 0
    assert capsys.readouterr().out.startswith("site ")


def test_compare_and_accept_show_the_verdict_on_committed_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = fixture_path("h200x2/doctor/runs")
    nvlink, pcie = sorted(str(p) for p in runs.iterdir() if "socket" not in p.name)
    assert main(["compare", nvlink, pcie, "--size-min", "16M"]) == 0
    out = capsys.readouterr().out
    # the shipped 2x H200 ranges were made from these very runs (issue 44 item 10)
    for side, bw in (("nvlink", "226"), ("pcie-host", "14.9")):
        line = next(
            ln for ln in out.splitlines()
            if ln.startswith(f"# reference: {side} all_reduce float 16 MiB in-place")
        )  # fmt: skip
        assert f"{bw} GB/s: reference is this run itself" in line and "normal" not in line
    main(["accept", "--run", nvlink, "--out", str(tmp_path / "acc")])
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("# reference: nvlink")]
    assert len(lines) == 5 and all("reference is this run itself" in ln for ln in lines)


PCIE_LOG = "public/nccl-tests/autodl_2x2080ti_all_reduce_pcie_noP2P.txt"


def test_add_a_parsed_real_pcie_log_then_judge_another_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a user's own accepted PCIe collective run: a real 2x RTX 2080 Ti nccl-tests log
    run = tmp_path / "runs" / "pcie"
    log = str(fixture_path(PCIE_LOG))
    assert main(["parse", "nccl-tests", log, "--out", str(run), "--run-id", "pcie-1"]) == 0
    _accept(run, "pass")
    capsys.readouterr()
    # the log names no path label: refused until --path gives it, never guessed
    assert main(["reference", "add", str(run)]) == 2
    assert "--path" in capsys.readouterr().err
    assert main(["reference", "add", str(run), "--path", "BOGUS"]) == 2
    assert "not a GPU path label" in capsys.readouterr().err
    assert main(["reference", "add", str(run), "--path", "PIX"]) == 0
    assert "entries from 1 run(s)" in capsys.readouterr().out
    listed = (run.parent / "reference.yaml").read_text()
    assert "GeForce RTX 2080 Ti" in listed and "path: PIX" in listed and "pcie-1" in listed
    # the same log again under another run id, its path now known: judged by the site entry
    again = tmp_path / "runs" / "pcie-again"
    assert main(["parse", "nccl-tests", log, "--out", str(again), "--run-id", "pcie-2"]) == 0
    for name in ("rows.jsonl", "facts.jsonl"):  # wherever the rows' shared fields are kept
        if (again / name).is_file():
            text = re.sub(r'"path":\s*null', '"path": "PIX"', (again / name).read_text())
            (again / name).write_text(text)
    (again / "rows.parquet").unlink(missing_ok=True)
    capsys.readouterr()
    assert main(["results", str(run.parent), "--run", "pcie-2", "--size-min", "1G"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("# reference:"))
    assert "normal for 2× GeForce RTX 2080 Ti PIX" in line and "site runs pcie" in line, line
    # the run it was made from is never judged against its own range: here the published
    # figure for the GPU on any path holds, an independent one
    assert main(["results", str(run.parent), "--run", "pcie-1", "--size-min", "1G"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("# reference:"))
    assert "site runs pcie" not in line and "Anthony-Hoo" in line, line
