"""`gpulane accept` runs the doctor's checks as rules and writes its findings into
accept.json ("findings"): rows of a run whose NCCL moved NV18 traffic through host memory."""

from __future__ import annotations

import json
from pathlib import Path

from gpulane.topology.nccl_info import parse_nccl_info
from gpulane.topology.nccl_logs import summary
from tests.analysis.fixture_rows import h200_topology, nccl_rows, write_run
from tests.campaigns.accept.test_run import gpulane

SHM = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "public"
    / "nccl-info"
    / "nccl1609_h800_shm_direct_oldfmt_EXCERPT.txt"
)


def _shm_run(tmp_path: Path) -> Path:
    run = tmp_path / "pcie-host-group"
    rows = nccl_rows(
        "h200x2/nccl-tests-all_reduce-p2p-disabled.txt",
        build="pcie-host", run_id="sweep-2", env={"NCCL_P2P_DISABLE": "1"},
    )  # fmt: skip
    shm = summary(parse_nccl_info(SHM.read_text()))
    for r in rows:
        r.transport, r.extra["nccl"] = shm["transport"], shm
    write_run(run, rows)
    (run / "topology.json").write_text(json.dumps(h200_topology()))
    return run


def test_findings_fail_the_doctor_rule_and_land_in_accept_json(tmp_path: Path) -> None:
    run = _shm_run(tmp_path)
    proc = gpulane("accept", f"run={run}", "format=markdown", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads((run / "accept.json").read_text())
    findings = result["findings"]
    assert {f["check"] for f in findings} >= {"transport", "nccl_env", "bandwidth"}
    assert all(
        set(f) == {"severity", "check", "title", "evidence", "why", "fix", "subject"}
        for f in findings
    )
    assert findings[0]["severity"] == "error"
    assert result["doctor"]["host"] == "(rows only)" and "acs" in result["doctor"]["checks_not_run"]
    failed = set(result["failed_rules"])
    assert {"nccl_transport_matches_path", "doctor_findings", "all_reduce_busbw_nvlink"} <= failed
    assert "likely cause: NCCL_P2P_DISABLE=1 in the run's environment" in proc.stdout
    assert "# doctor: " in proc.stdout


def test_doctor_off(tmp_path: Path) -> None:
    run = _shm_run(tmp_path)
    proc = gpulane("accept", f"run={run}", "--doctor", "false", "format=json", cwd=tmp_path)
    result = json.loads((run / "accept.json").read_text())
    assert result["findings"] == [] and result["doctor"] == {"ran": False}
    checks = [c for c in result["checks"] if c["rule"] == "doctor_findings"]
    assert checks[0]["status"] == "skip" and checks[0]["message"] == "no doctor given"
    assert proc.returncode == 1  # the transport rule still fails on the rows themselves
