"""One GPU that NVML counts but cannot open from the first call (its handle fails: fallen
off the bus, or no permission on its device node), through the REAL pynvml over the
stand-in (tests/fixtures/nvml_fake, ``GPULANE_NVML_FAKE_LOST=I:0[:E]``), on 2, 4 and 8 GPU
profiles. The other GPUs keep NVML's facts; that one GPU is marked unreadable, with why,
in the topology JSON and `gpulane topo`; the PCIe rule SKIPs it and the doctor never says
"ok" over it."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from tests.topology.nvml_fake import FAKE, run_gpulane

pynvml = pytest.importorskip("pynvml")

# profile, GPUs, the GPU lost from the start, the label of every other pair (topo -m)
SHAPES = [
    ("h200x2", 2, 1, None),  # one pair only, and it has the lost GPU in it
    ("h200x4_busy", 4, 2, "NV18"),
    ("a100x8_nv12", 8, 5, "NV12"),
]


def _profile_buses(profile: str) -> dict[int, str]:
    out = {}
    for line in (FAKE / f"{profile}.profile").read_text().splitlines():
        key, _, value = line.partition("=")
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "gpu" and parts[2] == "bus":
            out[int(parts[1])] = "0000:" + value.split(":", 1)[1].lower()
    return out


@pytest.mark.parametrize(("profile", "n", "lost", "label"), SHAPES)
def test_probe_keeps_the_other_gpus(
    machine: Callable[..., None], profile: str, n: int, lost: int, label: str | None
) -> None:
    from gpulane.topology.nvml_probe import NvmlProbe

    machine(profile, lost=f"{lost}:0")
    probe = NvmlProbe()
    try:
        assert probe.count == n
        assert probe.unread == {lost: "GPU is lost"}
        assert probe.readable == [i for i in range(n) if i != lost]
        buses = _profile_buses(profile)
        assert probe.bus_ids == [None if i == lost else buses[i] for i in range(n)]
        assert probe.name(lost) is None and probe.nvlink_speeds(lost) == {}
        assert probe.current_link(lost) == (None, None) and probe.mig_on(lost) is None
        for a, b in combinations(range(n), 2):
            want = None if lost in (a, b) else label
            assert probe.label(a, b) == want, (a, b)
    finally:
        probe.close()


def test_switch_links_not_guessed_when_a_gpu_is_missing(
    machine: Callable[..., None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without NVML's far-end type, a link to the lost GPU looks like one to an NVSwitch:
    the pairs are then unknown, never a guessed NV18."""
    from gpulane.topology.nvml_probe import NvmlProbe

    text = (FAKE / "h200x4_busy.profile").read_text()
    bare = tmp_path / "no_remote_type.profile"
    bare.write_text("\n".join(x for x in text.splitlines() if "nvlink_remote_type" not in x))
    machine("h200x4_busy", lost="2:0")
    monkeypatch.setenv("GPULANE_NVML_FAKE_PROFILE", str(bare))
    probe = NvmlProbe()
    try:
        assert probe.label(0, 1) is None and probe.label(1, 3) is None
    finally:
        probe.close()
    machine("h200x4_busy")  # every GPU there: NVML's bus ids tell GPUs from switches
    monkeypatch.setenv("GPULANE_NVML_FAKE_PROFILE", str(bare))
    probe = NvmlProbe()
    try:
        assert probe.label(0, 1) == "NV18"
    finally:
        probe.close()


def test_no_gpu_opens_is_still_an_nvml_failure(machine: Callable[..., None]) -> None:
    from gpulane.topology.nvml_probe import open_nvml

    machine("h200x1", lost="0:0")
    probe, why = open_nvml()
    assert probe is None
    assert why == "GPU0 could not be read (GPU is lost)"


def topo_json(nvml_dir: Path, profile: str, lost: str) -> dict[str, Any]:
    proc = run_gpulane(nvml_dir, profile, "topo", "--json", GPULANE_NVML_FAKE_LOST=lost)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize(("profile", "n", "lost", "label"), SHAPES)
def test_topology_json_marks_the_one_gpu(
    nvml_dir: Path, profile: str, n: int, lost: int, label: str | None
) -> None:
    from gpulane.analysis.rules.model import PASS, SKIP, Context
    from gpulane.analysis.rules.topology_checks import check_pcie_link
    from gpulane.topology.model import Topology

    data = topo_json(nvml_dir, profile, f"{lost}:0")
    gpus = data["gpus"]
    assert [g["index"] for g in gpus] == list(range(n))
    buses = _profile_buses(profile)
    for g in gpus:
        if g["index"] == lost:
            assert g["unreadable"] == "NVML: GPU is lost"
            assert (g["bus_id"], g["model"], g["pcie"], g["nvlinks"]) == (None, None, None, None)
        else:
            assert "unreadable" not in g  # other GPUs: the file reads as before
            assert g["bus_id"] == buses[g["index"]] and g["model"]
    pairs = {(p["a"], p["b"]): p["label"] for p in data["pairs"] if p["b"].startswith("GPU")}
    others = [f"GPU{i}" for i in range(n) if i != lost]
    assert pairs == {ab: label for ab in combinations(others, 2)}
    assert data["warnings"][0].startswith(f"GPU{lost}: NVML could not read it (GPU is lost)")
    assert not any("nvidia-smi -q lists" in w for w in data["warnings"])
    assert (
        f"NVML: GPU{lost} could not be read (GPU is lost); only the other GPUs read"
        in (data["missing"])
    )
    assert not any("no NVIDIA GPU found" in m or "could not read them all" in m
                   for m in data["missing"])  # fmt: skip
    # accept's PCIe rule: the lost GPU is not judged; the others are, on what NVML read
    topo = Topology.from_json(data, "topo.json")
    assert topo.gpus[lost].unreadable == "NVML: GPU is lost"
    import pandas as pd

    checks = {c.subject: c for c in check_pcie_link("links", {}, Context(pd.DataFrame(), topo))}
    assert checks[f"GPU{lost}"].status == SKIP
    assert checks[f"GPU{lost}"].message == "PCIe link not read (NVML: GPU is lost)"
    if profile != "h200x4_busy":  # that capture holds no PCIe link: unknown, SKIP too
        assert {checks[g].status for g in others} == {PASS}


def test_no_permission_is_said_as_nvml_says_it(nvml_dir: Path) -> None:
    data = topo_json(nvml_dir, "h200x4_busy", "2:0:4")  # NVML_ERROR_NO_PERMISSION
    assert data["gpus"][2]["unreadable"] == "NVML: Insufficient Permissions"
    assert [g["bus_id"] is None for g in data["gpus"]] == [False, False, True, False]


def test_topo_prints_which_gpu_and_why(nvml_dir: Path) -> None:
    proc = run_gpulane(nvml_dir, "a100x8_nv12", "topo", GPULANE_NVML_FAKE_LOST="5:0")
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "warning: GPU5: NVML could not read it (GPU is lost)" in out
    assert "missing: NVML: GPU5 could not be read (GPU is lost); only the other GPUs read" in out
    assert out.count("NVIDIA A100-SXM4-80GB") == 7


def test_doctor_never_says_ok_over_the_unread_gpu(nvml_dir: Path) -> None:
    proc = run_gpulane(nvml_dir, "a100x8_nv12", "doctor", "--no-load", "--json",
                       GPULANE_NVML_FAKE_LOST="5:0")  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the lost GPU is an error finding
    report = json.loads(proc.stdout)
    found = {(f["check"], f["title"]) for f in report["findings"]}
    assert ("foreign", "GPU5: not read through NVML (GPU is lost)") in found
    assert ("pcie_link", "GPU5: PCIe link not checked") in found
    assert report["checks_run"]["pcie_link"] != "ok"
    # the seven other links were read and are at Gen4 x16: nothing else said of them
    assert [t for c, t in found if c == "pcie_link"] == ["GPU5: PCIe link not checked"]


def test_load_check_not_run_beside_an_unread_gpu(machine: Callable[..., None]) -> None:
    """CUDA's numbering cannot be matched to NVML's when one GPU is missing from NVML:
    no copy burst, and the warning says why (never a link "read under load" on the wrong
    GPU)."""
    from gpulane.topology.live import probe_topology

    machine("a100x8_nv12", lost="5:0")
    topo = probe_topology(under_load=True)
    assert "under_load" not in topo.sources
    assert (
        "load check not run: GPU5 could not be read through NVML, so CUDA's device numbers "
        "cannot be matched to NVML's; the links are read at idle only"
    ) in topo.warnings
    assert [g.unreadable for g in topo.gpus].count("NVML: GPU is lost") == 1
