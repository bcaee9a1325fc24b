"""Which GPUs these are and what their paths can carry.

GPUs are named as nvidia-smi and `gpulane topo` name them (``GPU<NVML index>``), matched by
PCI bus id, so that copy rows join with the topology; the CUDA index this process uses is
kept in ``extra.cuda_device``.

Line rates come from gpulane.topology when it is there (``probe_topology``, then
``Expected.from_topology``), else from NVML: the PCIe link is read while a large copy is
in flight, because an idle GPU drops its link to a lower generation to save power, and
NVLinks are counted per peer from NVML's link state and remote PCI ids. A topology figure
below what the busy link reads gives way to the busy reading.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulane.errors import GpulaneError
from gpulane.topology.bandwidth import (
    NVLINK_BY_VERSION,
    LineRate,
    nvlink_rate,
    pcie_peer,
    pcie_rate,
)
from gpulane.topology.model import Topology
from gpulane.transfers.efficiency import Expected
from gpulane.transfers.numa import gpu_numa_node, sysfs_bus_id
from gpulane.units import NVLINK4_LINK_GBPS

NVLINK_MAX_LINKS = 18


@dataclass
class GpuInfo:
    index: int  # CUDA device index in this process
    name: str
    bus_id: str | None = None
    model: str | None = None
    numa: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# What torch's CUDA queries raise: RuntimeError from CUDA, AssertionError for a device
# index it does not have (or a torch built without CUDA).
TORCH_CUDA_ERRORS = (RuntimeError, AssertionError)


def _nvml() -> Any | None:
    """nvidia-ml-py, initialised; None without it or without a driver (NVML's own error:
    library not found, driver not loaded, ...)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    return pynvml


# Set by `gpulane accept` for its copy step: the topology.json its topo step probed on
# this machine moments before (the same probe; about 3 s of nvidia-smi and lspci saved).
TOPOLOGY_ENV = "GPULANE_TOPOLOGY_FILE"


def nvml_errors() -> tuple[type[Exception], ...]:
    """What NVML's calls raise (nothing to catch where nvidia-ml-py is not installed)."""
    try:
        import pynvml
    except ImportError:
        return ()
    return (pynvml.NVMLError,)


def probe_topology() -> tuple[Topology | None, dict[str, Any] | None]:
    """(this machine's Topology, its JSON) from the file $GPULANE_TOPOLOGY_FILE names, else
    from gpulane.topology.live, or (None, None)."""
    given = os.environ.get(TOPOLOGY_ENV)
    if given:
        try:
            data = json.loads(Path(given).read_text(encoding="utf-8"))
            return Topology.from_json(data, given), data
        except (OSError, ValueError, GpulaneError):
            pass  # probed below instead
    try:
        from gpulane.topology.live import probe_topology as probe
    except ImportError:
        return None, None
    # It says what it could not read rather than raising; what is left: a capture it
    # could not parse, a file it could not read, an NVML call that failed mid-probe.
    failures: tuple[type[Exception], ...] = (GpulaneError, OSError, ValueError, *nvml_errors())
    try:
        topo = probe()
        return topo, topo.to_json()
    except failures:
        return None, None


def bus_id_of(index: int, torch: Any, rt: Any | None) -> str | None:
    if rt is not None:
        try:
            return sysfs_bus_id(str(rt.deviceGetPCIBusId(index)))
        except rt.CUDARuntimeError:
            pass
    try:
        p = torch.cuda.get_device_properties(index)
        return f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    except (*TORCH_CUDA_ERRORS, AttributeError):  # AttributeError: a torch without pci_*
        return None


def describe_gpus(
    indices: list[int], torch: Any, rt: Any | None, topo: Topology | None
) -> list[GpuInfo]:
    nvml = _nvml()
    by_bus = {sysfs_bus_id(g.bus_id): g for g in (topo.gpus if topo else []) if g.bus_id}
    out = []
    for i in indices:
        bus = bus_id_of(i, torch, rt)
        name = f"GPU{i}"
        numa = None
        topo_gpu = by_bus.get(bus or "")
        if topo_gpu is not None:
            name = topo_gpu.name
            numa = topo_gpu.numa
        elif nvml is not None and bus:
            try:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(bus)
                name = f"GPU{nvml.nvmlDeviceGetIndex(handle)}"
            except nvml.NVMLError:
                pass
        if numa is None:
            numa = gpu_numa_node(bus)
        try:
            model = str(torch.cuda.get_device_name(i))
        except TORCH_CUDA_ERRORS:
            model = None
        out.append(GpuInfo(i, name, bus, model, numa, {"cuda_device": i}))
    return out


def busy_pcie_link(bus_id: str | None) -> LineRate | None:
    """The PCIe link as NVML reads it now (call while a copy is in flight)."""
    nvml = _nvml()
    if nvml is None or not bus_id:
        return None
    try:
        h = nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        gen = nvml.nvmlDeviceGetCurrPcieLinkGeneration(h)
        width = nvml.nvmlDeviceGetCurrPcieLinkWidth(h)
    except nvml.NVMLError:
        return None
    return pcie_rate(gen, width, "nvml")


def nvml_nvlinks(a: str | None, b: str | None) -> LineRate | None:
    """Active NVLinks from GPU a to GPU b (by bus id), from NVML."""
    nvml = _nvml()
    if nvml is None or not a or not b:
        return None
    try:
        h = nvml.nvmlDeviceGetHandleByPciBusId(a)
    except nvml.NVMLError:
        return None
    links, version = 0, None
    for link in range(NVLINK_MAX_LINKS):
        try:
            if nvml.nvmlDeviceGetNvLinkState(h, link) != nvml.NVML_FEATURE_ENABLED:
                continue
            remote = nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId
            if isinstance(remote, bytes):
                remote = remote.decode()
            if sysfs_bus_id(str(remote)) != sysfs_bus_id(b):
                continue
            links += 1
            if version is None:
                version = int(nvml.nvmlDeviceGetNvLinkVersion(h, link))
        except nvml.NVMLError:  # a link NVML cannot query (not supported, not there)
            continue
    per_link = NVLINK_BY_VERSION.get(version or 4, NVLINK4_LINK_GBPS)
    return nvlink_rate(links, per_link, "nvml") if links else None


def merge_busy(expected: Expected, name: str, busy: LineRate | None) -> None:
    """Take the busy NVML reading where the topology gave nothing, or less."""
    have = expected.host.get(name)
    if busy is not None and (have is None or have.gbps < busy.gbps - 1e-6):
        expected.host[name] = busy


def fill_pairs(expected: Expected, gpus: list[GpuInfo]) -> None:
    """Pairs the topology did not cover: NVML NVLinks, else PCIe peer (slower link)."""
    for a in gpus:
        for b in gpus:
            if a is b or (a.name, b.name) in expected.pairs:
                continue
            link = nvml_nvlinks(a.bus_id, b.bus_id) or pcie_peer(
                expected.host.get(a.name), expected.host.get(b.name)
            )
            if link is not None:
                expected.pairs[(a.name, b.name)] = link


def versions(torch: Any, rt: Any | None) -> dict[str, str]:
    from gpulane import __version__

    out = {"gpulane": __version__, "torch": str(torch.__version__)}
    if torch.version.cuda:
        out["cuda"] = str(torch.version.cuda)
    if rt is not None:
        try:
            import cupy

            out["cupy"] = str(cupy.__version__)
            out["cuda_driver"] = str(rt.driverGetVersion())
        except (ImportError, rt.CUDARuntimeError):
            pass
    nvml = _nvml()
    if nvml is not None:
        try:
            v = nvml.nvmlSystemGetDriverVersion()
            out["driver"] = v.decode() if isinstance(v, bytes) else str(v)
        except nvml.NVMLError:
            pass
    return out
