"""`gpulane doctor` in a subprocess on each machine profile of the NVML stand-in
(tests/fixtures/nvml_fake), through the REAL pynvml: what the doctor says comes from the C
library's answers, read the way a GPU machine's driver gives them. No nvidia-smi here, so
each finding below rests on NVML alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.topology.nvml_fake import run_gpulane

pytest.importorskip("pynvml")


def doctor(nvml_dir: Path, profile: str, **env: str) -> tuple[int, dict[str, Any]]:
    proc = run_gpulane(nvml_dir, profile, "doctor", "--no-load", "--json", **env)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def titles(report: dict[str, Any], check: str) -> list[str]:
    return [f["title"] for f in report["findings"] if f["check"] == check]


@pytest.mark.parametrize("profile", ["h200x1", "h200x2"])
def test_healthy_h200_says_no_foreign_work(nvml_dir: Path, profile: str) -> None:
    rc, report = doctor(nvml_dir, profile)
    assert rc == 0
    assert report["no_gpu"] is None
    # the checks that read NVML ran, and found nothing: a pass that was earned
    assert {"foreign", "clocks", "pcie_link"} <= set(report["checks_run"])
    # h200x1 says MIG off (the check ran, nothing found); h200x2's profile cannot tell
    assert ("mig" in report["checks_run"]) == (profile == "h200x1")
    assert [f for f in report["findings"] if f["severity"] in ("error", "warning")] == []


def test_busy_h200x4_names_the_foreign_pid_and_the_power_cap(nvml_dir: Path) -> None:
    rc, report = doctor(nvml_dir, "h200x4_busy")
    assert rc == 1
    # tests/fixtures/h200x4/nvml-busy-gpu2.json: pid 1416 (python3) on GPU2, reasons 0x4
    assert titles(report, "foreign") == [
        "GPU2: in use by another process (pid 1416 (python3, 3.1 GiB))"
    ]
    assert titles(report, "clocks") == ["GPU2: clocks held down (SW Power Cap)"]


def test_downtrained_busy_gpu_names_gen3_x4_the_pid_and_both_reasons(nvml_dir: Path) -> None:
    rc, report = doctor(nvml_dir, "busy_downtrained")
    assert rc == 1
    (link,) = [f for f in report["findings"] if f["check"] == "pcie_link"]
    assert "Gen3 x4, capable of Gen4 x16" in link["evidence"]
    assert titles(report, "foreign") == [
        "GPU0: in use by another process (pid 4242 (python3 train.py, 2.0 GiB))"
    ]
    assert titles(report, "clocks") == [
        "GPU0: clocks held down (SW Power Cap)",
        "GPU0: clocks held down (SW Thermal Slowdown)",
    ]


def test_pcie_only_box_finds_nothing_and_does_not_crash(nvml_dir: Path) -> None:
    rc, report = doctor(nvml_dir, "pcie_only")
    assert rc == 0
    assert "foreign" in report["checks_run"]


def test_mixed_models_each_gpu_judged_on_its_own_link(nvml_dir: Path) -> None:
    """club-3090#222: an RTX 3090 and a GTX 1080, each at x4 of x16."""
    rc, report = doctor(nvml_dir, "mixed_3090_1080")
    assert rc == 1
    links = sorted(f["title"] for f in report["findings"] if f["check"] == "pcie_link")
    assert links == ["GPU0: PCIe link trained at x4 of x16", "GPU1: PCIe link trained at x4 of x16"]


def test_mig_gpu_is_said_once_and_never_judged_as_a_whole_gpu(nvml_dir: Path) -> None:
    rc, report = doctor(nvml_dir, "mig_a100")
    assert rc == 0
    (mig,) = [f for f in report["findings"] if f["check"] == "mig"]
    assert mig["severity"] == "info"
    assert mig["title"] == "GPU0: MIG mode on, 2 MIG device(s)"
    assert "not measured" in mig["why"]


def test_a_lost_gpu_is_named_and_never_counts_as_free(nvml_dir: Path) -> None:
    """GPU2 of the busy 4x H200 answers nothing (NVML_ERROR_GPU_IS_LOST from the start):
    its foreign process is unknown, so the doctor must not pass it as idle."""
    rc, report = doctor(nvml_dir, "h200x4_busy", GPULANE_NVML_FAKE_LOST="2:0")
    assert rc == 1
    assert report["no_gpu"] is None  # three GPUs answer: not "no GPU on this machine"
    assert titles(report, "foreign") == ["GPU2: not read through NVML (GPU is lost)"]
    # GPU2 held the power cap: its clocks were not read, so clocks is not "ok" either
    assert report["checks_not_run"]["clocks"] == "not read through NVML: GPU2 (GPU is lost)"
