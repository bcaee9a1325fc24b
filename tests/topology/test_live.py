"""The live probe on this machine. CI has no GPU: it must degrade, not fail."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpulane.topology.live import _cpu_list, probe_topology, worst_path_for_gpus
from tests.topology.test_sysfs import fake_riser


def _has_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return n > 0
    except Exception:
        return False


HAS_GPU = _has_gpu()


def test_probe_runs_everywhere() -> None:
    topo = probe_topology()
    data = topo.to_json()
    assert {"gpus", "nics", "pairs", "warnings"} <= set(data)
    json.dumps(data)
    if not HAS_GPU:
        assert data["gpus"] == [] and data["pairs"] == []
        assert any("NVML" in m for m in data["missing"])
        if shutil.which("nvidia-smi") is None:
            assert any(m.startswith("nvidia-smi: not found") for m in data["missing"])


def test_worst_path_never_raises() -> None:
    assert worst_path_for_gpus([0]) is None
    result = worst_path_for_gpus([0, 1])
    if not HAS_GPU:
        assert result is None
    else:
        assert result is None or result.startswith(("NV", "P", "N", "S"))


def test_command_without_gpu_exits_zero() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpulane", "topo"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    if not HAS_GPU:
        assert "no NVIDIA GPU found" in proc.stdout


def test_fake_sysfs_without_nvml(tmp_path: Path) -> None:
    if HAS_GPU:
        pytest.skip("NVML finds real GPUs here; the fake tree is for GPU-less machines")
    fake_riser(tmp_path)
    topo = probe_topology(sys_root=str(tmp_path))
    (g,) = topo.gpus
    assert g.bus_id == "0000:03:00.0"
    assert [u.bus_id for u in g.upstream] == ["0000:02:00.0", "0000:01:00.0", "0000:00:01.0"]
    assert any("narrows to x4" in w for w in topo.warnings)


def test_cpu_list() -> None:
    assert _cpu_list([0xFFFFFFFF]) == "0-31"
    assert _cpu_list([0b1011, 0]) == "0-1,3"
    assert _cpu_list([0, 1]) == "64"
    assert _cpu_list([0]) is None


# -- on a GPU machine: the probe's values against NVML asked directly ----------------------
gpu_only = pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU (the GPU machine)")


def _nvml_facts() -> list[dict[str, object]]:
    """Per GPU, straight from NVML: bus id, PCIe link now and at most, active NVLinks and
    the bus id each one reaches."""
    import pynvml

    pynvml.nvmlInit()
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            bus = pynvml.nvmlDeviceGetPciInfo(h).busId
            peers = []
            for link in range(18 * 2):
                try:
                    if pynvml.nvmlDeviceGetNvLinkState(h, link):
                        peers.append(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId)
                except pynvml.NVMLError:
                    break
            out.append(
                {
                    "bus_id": (bus.decode() if isinstance(bus, bytes) else bus)[-12:].lower(),
                    "gen": pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                    "width": pynvml.nvmlDeviceGetCurrPcieLinkWidth(h),
                    "gen_max": pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
                    "width_max": pynvml.nvmlDeviceGetMaxPcieLinkWidth(h),
                    "peers": [
                        (p.decode() if isinstance(p, bytes) else p)[-12:].lower() for p in peers
                    ],
                }
            )
        return out
    finally:
        pynvml.nvmlShutdown()


@gpu_only
def test_probe_agrees_with_nvml() -> None:
    data = probe_topology().to_json()
    facts = _nvml_facts()
    assert len(data["gpus"]) == len(facts)
    by_bus = {g["bus_id"][-12:].lower(): g for g in data["gpus"]}
    for f in facts:
        g = by_bus[str(f["bus_id"])]
        pcie = g["pcie"]
        # links may train down at idle: the maximum is fixed, "now" at most the maximum
        assert (pcie["gen_max"], pcie["width_max"]) == (f["gen_max"], f["width_max"])
        assert pcie["gen"] <= pcie["gen_max"] and pcie["width"] <= pcie["width_max"]
    # every pair joined by NVLinks is labelled NV<count of links between them>
    names = {g["bus_id"][-12:].lower(): g["name"] for g in data["gpus"]}
    for f in facts:
        peers = [p for p in f["peers"] if p in names]  # type: ignore[attr-defined]
        for other in set(peers):
            pair = next(
                p for p in data["pairs"]
                if {p["a"], p["b"]} == {names[str(f["bus_id"])], names[other]}
            )  # fmt: skip
            assert pair["label"] == f"NV{peers.count(other)}"
            assert pair["kind"] == "nvlink" and pair["nvlinks"] == peers.count(other)


@gpu_only
def test_worst_path_is_the_pairs_label() -> None:
    data = probe_topology().to_json()
    if len(data["gpus"]) < 2:
        pytest.skip("one GPU: no pair")
    pair = next(p for p in data["pairs"] if {p["a"], p["b"]} == {"GPU0", "GPU1"})
    assert worst_path_for_gpus([0, 1]) == pair["label"]
    proc = subprocess.run(
        [sys.executable, "-m", "gpulane", "topo", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert [g["bus_id"] for g in printed["gpus"]] == [g["bus_id"] for g in data["gpus"]]
