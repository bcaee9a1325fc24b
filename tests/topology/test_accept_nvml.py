"""`gpulane accept` on captured rows with the doctor examining this machine
(``doctor=live``), in a subprocess, the machine being a profile of the NVML stand-in read
through the REAL pynvml: the doctor's NVML findings reach accept's verdict. (The rows are a
real 2x H200 nvlink run, tests/fixtures/h200x2/doctor/; measuring would take minutes.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.topology.nvml_fake import REPO, run_gpulane

pytest.importorskip("pynvml")
ROWS = REPO / "tests/fixtures/h200x2/doctor/runs/20261123-053138-nvlink-3e5b"


def accept(nvml_dir: Path, profile: str, out: Path) -> tuple[int, dict[str, Any]]:
    proc = run_gpulane(
        nvml_dir, profile, "accept", f"run={ROWS}", "doctor=live", "html=false", f"out={out}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads((out / "accept.json").read_text())


def doctor_lines(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["status"], c["message"]) for c in report["checks"] if c["rule"] == "doctor_findings"]


def test_healthy_machine_gives_the_doctor_nothing_to_fail(nvml_dir: Path, tmp_path: Path) -> None:
    rc, report = accept(nvml_dir, "h200x2", tmp_path)
    assert rc == 3  # INCOMPLETE: the captured run holds no copy rows
    assert "doctor_findings" not in report["failed_rules"]
    assert {f["check"] for f in report["findings"]} == {"nccl_env"}  # its NCCL_NVLS_ENABLE=0
    # the NVML checks ran (not among those not run): a pass that was earned
    assert not {"foreign", "clocks", "pcie_link"} & set(report["doctor"]["checks_not_run"])


def test_busy_downtrained_machine_fails_naming_pid_link_and_throttle(
    nvml_dir: Path, tmp_path: Path
) -> None:
    rc, report = accept(nvml_dir, "busy_downtrained", tmp_path)
    assert rc == 1 and report["verdict"] == "FAIL"
    assert "doctor_findings" in report["failed_rules"]
    said = " ".join(m for s, m in doctor_lines(report) if s == "fail")
    assert "pid 4242 (python3 train.py, 2.0 GiB)" in said
    assert "Gen3 x4, capable of Gen4 x16" in said
    clocks = [f["title"] for f in report["findings"] if f["check"] == "clocks"]
    assert clocks == [
        "GPU0: clocks held down (SW Power Cap)",
        "GPU0: clocks held down (SW Thermal Slowdown)",
    ]
