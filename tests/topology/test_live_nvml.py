"""gpulane's NVML readers (live topology probe, gpu_state.capture, transfers/gpuinfo)
through the REAL pynvml, over the project's own stand-in libnvidia-ml.so.1
(tests/fixtures/nvml_fake/fake_nvml.c, compiled here with gcc) that answers from a machine
profile. pynvml's hook: its module global ``nvmlLib`` (``_LoadNvmlLibrary`` opens
``libnvidia-ml.so.1`` only while it is None); every call then goes through
``_nvmlGetFunctionPointer`` into the C library, with pynvml's own structs and errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pynvml = pytest.importorskip("pynvml")

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "nvml_fake"


def test_the_real_binding_loads_the_stand_in(machine: Callable[[str], None]) -> None:
    machine("h200x2")
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(1)
    assert pynvml.nvmlDeviceGetCount() == 2
    assert pynvml.nvmlDeviceGetName(h) == "NVIDIA H200"
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetMigMode(h)  # the profile names no MIG mode: as an H200 without it
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetGpuInstances(h, 0, None, None)  # not in the stand-in at all


def test_live_probe_reads_nvlink_speed_in_gb_s(machine: Callable[[str], None]) -> None:
    from gpulane.topology.live import NvmlProbe

    machine("h200x2")
    probe = NvmlProbe()
    try:
        assert probe.bus_ids == ["0000:00:06.0", "0000:00:07.0"]  # lspci's 4-digit domain
        speeds = probe.nvlink_speeds(0)
        # nvlink-s.txt of the H200 pair: 18 links at 26.562 GB/s (NVML: 26562 MB/s)
        assert [s for s in speeds.values() if s is not None] == [pytest.approx(26.562)] * 18
        assert probe.name(0) == "NVIDIA H200"
    finally:
        probe.close()


def test_live_probe_reads_a_downtrained_link(machine: Callable[[str], None]) -> None:
    from gpulane.topology.live import NvmlProbe

    machine("busy_downtrained")
    probe = NvmlProbe()
    try:
        assert probe.count == 1
        assert all(s is None for s in probe.nvlink_speeds(0).values())
    finally:
        probe.close()


def test_capture_reads_sm_use_processes_and_reasons(machine: Callable[[str], None]) -> None:
    from gpulane.topology import gpu_state

    machine("busy_downtrained")
    (gpu,) = gpu_state.capture()["gpus"]
    assert gpu["bus_id"] == "00000000:3B:00.0"
    assert gpu["util_gpu"] == 87  # the SM field (memory reads 12)
    assert gpu["compute_processes"] == [{"pid": 4242, "used_bytes": 2048 << 20}]
    assert gpu["process_names"] == {"4242": "python3 train.py"}
    assert gpu["clocks_event_reasons"] == 0x24
    assert gpu["temperature_c"] == 71
    assert gpu["power_mw"] == 412000


def test_gpuinfo_reads_pcie_and_nvlinks(machine: Callable[[str], None]) -> None:
    from gpulane.transfers import gpuinfo

    machine("busy_downtrained")
    low = gpuinfo.busy_pcie_link("00000000:3B:00.0")
    assert low is not None
    machine("h200x2")
    full = gpuinfo.busy_pcie_link("00000000:00:06.0")
    links = gpuinfo.nvml_nvlinks("00000000:00:06.0", "00000000:00:07.0")
    assert full is not None and links is not None
    assert (low.label, full.label, links.label) == ("PCIe Gen3 x4", "PCIe Gen5 x16", "NV18")
    assert low.source == full.source == links.source == "nvml"
    assert gpuinfo.nvml_nvlinks("00000000:00:06.0", "00000000:99:00.0") is None


def test_live_probe_labels_pcie_pairs(machine: Callable[[str], None]) -> None:
    from gpulane.topology.live import NvmlProbe

    machine("pcie_only")
    probe = NvmlProbe()
    try:
        got = [probe.label(0, 1), probe.label(0, 2), probe.label(0, 3), probe.label(2, 3)]
        assert got == ["PHB", "NODE", "SYS", "SYS"]
        assert probe.label(1, 3) is None  # the profile holds no level for it: unknown
    finally:
        probe.close()


def test_capture_matches_the_h200x4_capture(machine: Callable[[str], None]) -> None:
    """The profile is the lent 4x H200's NVML capture; capture() reads it back."""
    import json

    from gpulane.topology import gpu_state

    real = json.loads((FAKE.parents[0] / "h200x4" / "nvml-busy-gpu2.json").read_text())
    machine("h200x4_busy")
    got = gpu_state.capture()["gpus"]
    assert len(got) == len(real["gpus"]) == 4
    for ours, theirs in zip(got, real["gpus"], strict=True):
        assert ours["bus_id"] == theirs["bus_id"]
        assert ours["util_gpu"] == theirs["utilization"]["gpu"]
        assert ours["clocks_event_reasons"] == theirs["clocks_event_reasons"]
        assert ours["power_mw"] == theirs["power_mw"]
        want = [
            {"pid": p["pid"], "used_bytes": p["usedGpuMemory"]} for p in theirs["compute_processes"]
        ]
        assert ours["compute_processes"] == want


def test_live_probe_labels_nvswitch_pairs(machine: Callable[[str], None]) -> None:
    from gpulane.topology.live import NvmlProbe

    machine("h200x4_busy")
    probe = NvmlProbe()
    try:  # topo-m.txt of the 4x H200: NV18 for every pair
        assert {probe.label(a, b) for a in range(4) for b in range(4) if a != b} == {"NV18"}
    finally:
        probe.close()
