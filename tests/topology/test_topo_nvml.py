"""`gpulane topo --json` in a subprocess over the NVML stand-in (the REAL pynvml): the
shapes a user's machine may have reach the command's output whole, with no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.topology.nvml_fake import run_gpulane

pytest.importorskip("pynvml")


def topo(nvml_dir: Path, profile: str, **env: str) -> dict:
    proc = run_gpulane(nvml_dir, profile, "topo", "--json", **env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def test_lost_gpu_is_named_not_a_machine_without_gpus(nvml_dir: Path) -> None:
    data = topo(nvml_dir, "h200x4_busy", GPULANE_NVML_FAKE_LOST="2:0")
    assert (
        "NVML: GPU2 could not be read (GPU is lost); only the other GPUs read" in (data["missing"])
    )
    assert [g.get("unreadable") for g in data["gpus"]] == [None, None, "NVML: GPU is lost", None]
    assert data["sources"]["gpus"] == "NVML"  # the three others still read through NVML
    assert not any("no NVIDIA GPU found" in m for m in data["missing"])


def test_mig_gpu_says_which_figures_are_not_measured(nvml_dir: Path) -> None:
    data = topo(nvml_dir, "mig_a100")
    (mig,) = [w for w in data["warnings"] if "MIG" in w]
    assert mig.startswith("GPU0: MIG mode on: collectives, peer copies and NVLink figures")
    assert [g["model"] for g in data["gpus"]] == ["NVIDIA A100 80GB PCIe"]


def test_mixed_models_in_one_box(nvml_dir: Path) -> None:
    data = topo(nvml_dir, "mixed_3090_1080")
    assert [g["model"] for g in data["gpus"]] == [
        "NVIDIA GeForce RTX 3090",
        "NVIDIA GeForce GTX 1080",
    ]
    assert [p["label"] for p in data["pairs"]] == ["PHB"]
