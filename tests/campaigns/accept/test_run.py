"""`gpulane accept`: existing rows (how CI runs it), baselines, JUnit, and a real CPU suite."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpulane.commands.accept import to_overrides
from gpulane.errors import InputError
from tests import helpers
from tests.analysis.fixture_rows import copy_rows, h200_topology, nccl_rows, write_run
from tests.analysis.rules.synthetic import host_copies
from tests.helpers import rows_of

# nccl-tests logs carry no NCCL INFO account: a required check accepted as missing here
ALLOW = ["--allow-skip", "nccl_transport_matches_path"]


def gpulane(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return helpers.gpulane(*args, cwd=cwd, timeout=timeout)


@pytest.fixture
def nvlink_run(tmp_path: Path) -> Path:
    run = tmp_path / "nvlink-group"
    write_run(
        run,
        nccl_rows("h200x2/nccl-tests-all_reduce.txt", build="nvlink", run_id="sweep-1")
        + nccl_rows("h200x2/nccl-tests-all_gather.txt", build="nvlink", run_id="sweep-1"),
    )
    at_once = [
        r
        for r in host_copies(2, build="nvlink", run_id="copy-1")
        if (r.extra or {}).get("test") == "all-gpus"
    ]
    peers = {("GPU0", "GPU1"): 395.7, ("GPU1", "GPU0"): 395.5}
    write_run(run, copy_rows(build="nvlink", run_id="copy-1", p2p_gbps=peers) + at_once)
    (run / "topology.json").write_text(json.dumps(h200_topology()))
    return run


@pytest.fixture
def socket_run(tmp_path: Path) -> Path:
    """NCCL without P2P on the same NVLink box: the path label is still NV18."""
    run = tmp_path / "socket-group"
    write_run(
        run,
        nccl_rows(
            "h200x2/nccl-tests-all_reduce-p2p-disabled.txt", build="socket", run_id="sweep-2"
        ),
    )
    (run / "topology.json").write_text(json.dumps(h200_topology()))
    return run


def test_option_mapping() -> None:
    assert to_overrides(
        ["--baseline", "golden", "--rows=runs/x", "rules=pcie", "--topology", "my topo.json"]
    ) == [
        "baseline=golden",
        "run=runs/x",
        "rules=pcie",
        "topology='my topo.json'",
    ]
    with pytest.raises(InputError, match="--baseline needs a value"):
        to_overrides(["--baseline"])


def test_accept_existing_rows_passes(nvlink_run: Path, tmp_path: Path) -> None:
    proc = gpulane("accept", f"run={nvlink_run}", *ALLOW, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "accept: PASS" in proc.stdout and "all_reduce_busbw_nvlink" in proc.stdout
    result = json.loads((nvlink_run / "accept.json").read_text())
    assert result["passed"] is True and result["topology"].endswith("topology.json")
    suite = ET.parse(nvlink_run / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    # every check line, and the allowed skip as a skipped case of its own (never a pass)
    assert int(suite.get("tests", "0")) == len(result["checks"]) + 1
    assert [a["rule"] for a in result["allowed_skips"]] == ["nccl_transport_matches_path"]
    allowed = [
        c for c in suite.iter("testcase")
        if c.get("classname") == "gpulane.accept.nccl_transport_matches_path"
        and c.get("name") == "required"
    ]  # fmt: skip
    skipped = allowed[0].find("skipped")
    assert skipped is not None and "--allow-skip" in skipped.get("message", "")
    assert int(suite.get("skipped", "0")) == result["counts"]["skip"] + 1
    names = {c.get("classname") for c in suite.iter("testcase")}
    assert "gpulane.accept.pinned_h2d" in names
    html = (nvlink_run / "report.html").read_text()
    assert 'id="checks"' in html and "PASS" in html and 'id="plot-collective-' in html
    # no baseline, nothing failing: the acceptance section draws no second copy of them
    assert 'id="plot-accept-collective-' not in html and "see the plots below" in html


def test_accept_fails_naming_the_rule(socket_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = gpulane(
        "accept", "--rows", str(socket_run), "--out", str(out), "format=markdown", cwd=tmp_path
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "failed rules: all_reduce_busbw_nvlink" in proc.stdout
    assert "| FAIL | all_reduce_busbw_nvlink | vm | expected | -90.5% |" in proc.stdout
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    failures = [
        (c.get("classname"), f.get("message"))
        for c in suite.iter("testcase")
        for f in c.iter("failure")
    ]
    assert failures == [
        (
            "gpulane.accept.all_reduce_busbw_nvlink",
            "all_reduce float 1 GiB: 27.24 GB/s is 90.5% below 286.9 GB/s (0.6 x 478.1 GB/s (NV18: 18 x 26.56 GB/s))",
        )
    ]


def test_baseline_is_stored_then_used(nvlink_run: Path, socket_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    first = gpulane(
        "accept", f"run={nvlink_run}", f"results_dir={runs}", "save_baseline=golden", *ALLOW,
        cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    stored = runs / "baselines" / "golden"
    assert f"# baseline stored: {stored}" in first.stdout
    assert (stored / "rows.jsonl").exists() and (stored / "rows.parquet").exists()
    assert (stored / "topology.json").exists()
    assert json.loads((stored / "baseline.json").read_text())["passed"] is True

    again = gpulane(
        "accept", f"run={nvlink_run}", f"results_dir={runs}", "--baseline", "golden", *ALLOW,
        cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0 and "collective_busbw_vs_baseline" in again.stdout
    assert "no baseline given" not in again.stdout

    # Socket rows against the NVLink baseline (and the NVLink rule turned off): the
    # baseline rule alone fails, and says by how much.
    proc = gpulane(
        "accept",
        f"run={socket_run}",
        f"results_dir={runs}",
        "--baseline=golden",
        "rules.checks.all_reduce_busbw_nvlink=null",
        "format=json",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(proc.stdout[: proc.stdout.rindex("}") + 1])
    assert data["failed_rules"] == ["collective_busbw_vs_baseline"]
    fail = next(c for c in data["checks"] if c["status"] == "fail")
    assert (
        fail["subject"] == "vm"
        and fail["margin"] < -0.9
        and "baseline 344.4 GB/s" in fail["message"]
    )


def test_rule_overrides_and_rule_sets(nvlink_run: Path, tmp_path: Path) -> None:
    proc = gpulane(
        "accept",
        f"run={nvlink_run}",
        "rules.checks.all_reduce_busbw_nvlink.min_fraction_of_expected=0.9",
        "html=false",
        "junit=false",
        cwd=tmp_path,
    )
    assert proc.returncode == 1 and "failed rules: all_reduce_busbw_nvlink" in proc.stdout
    proc = gpulane(
        "accept", f"run={nvlink_run}", "--rules", "pcie", "format=json", *ALLOW, cwd=tmp_path
    )
    assert proc.returncode == 0
    assert "all_reduce_busbw_nvlink" not in proc.stdout and "pinned_h2d" in proc.stdout


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    proc = gpulane("accept", f"run={tmp_path / 'missing'}", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("gpulane: error: run:") and "Traceback" not in proc.stderr
    proc = gpulane(
        "accept", f"run={tmp_path}", "rules.checks.pinned_h2d.check=fastest", cwd=tmp_path
    )
    assert proc.returncode == 2 and "not one of" in proc.stderr


def test_suite_measures_on_cpu(tmp_path: Path) -> None:
    """The real suite: `gpulane topo --json` beside `gpulane sweep` (gloo, 2 ranks) into a
    group, then the rules; each step's seconds and each phase's are kept."""
    runs = tmp_path / "runs"
    proc = gpulane(
        "accept",
        f"results_dir={runs}",
        "build=cpu-box",
        "device=cpu",
        "suite.collectives=[all_reduce]",
        "suite.sizes_max=4K",
        "suite.copy=false",
        "suite.topo=true",
        "suite.sweep_overrides=['iters=3','warmup=1']",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    groups = [d for d in runs.iterdir() if d.is_dir()]
    assert len(groups) == 1
    group = groups[0]
    result = json.loads((group / "accept.json").read_text())
    assert result["passed"] and [s["name"] for s in result["steps"]] == ["topo", "sweep"]
    # the probe started with the sweep (its line first), was waited for after it
    lines = [x for x in proc.stdout.splitlines() if x.startswith("# accept: ")]
    assert [x.split(":")[1].split()[0] for x in lines[:4]] == ["topo", "sweep", "sweep", "topo"]
    assert all(s["rc"] == 0 and s["seconds"] > 0 for s in result["steps"])
    assert (group / "topology.json").exists() and not (group / "topology.json.part").exists()
    assert {"setup", "suite", "doctor", "rules", "report", "total"} <= set(result["seconds"])
    assert "# accept: seconds: setup " in proc.stdout
    passed = {c["rule"] for c in result["checks"] if c["status"] == "pass"}
    assert {"suite", "no_wrong_results", "rows_ok"} <= passed
    sweeps = [d for d in group.iterdir() if (d / "rows.jsonl").exists()]
    assert len(sweeps) == 1
    rows = rows_of(sweeps[0])
    assert {r["build"] for r in rows} == {"cpu-box"} and {r["op"] for r in rows} == {"all_reduce"}
    assert (group / "report.html").exists() and (group / "junit.xml").exists()
