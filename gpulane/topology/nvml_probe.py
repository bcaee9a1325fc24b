"""NVML's view of this machine's GPUs (nvidia-ml-py): bus ids, PCIe links, NVLinks, the
labels nvidia-smi would print for each pair, and MIG mode. Read by the live probe
(:mod:`gpulane.topology.live`); every reading that NVML cannot give is None."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from gpulane.topology import paths
from gpulane.topology.model import PcieLink, normalize_bus_id


def _bus_id(pci: Any) -> str:
    raw = pci.busId
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return normalize_bus_id(text) or text.lower()


def _cpu_list(masks: Any) -> str | None:
    cpus: list[int] = []
    for word, mask in enumerate(masks):
        for bit in range(64):
            if int(mask) >> bit & 1:
                cpus.append(word * 64 + bit)
    if not cpus:
        return None
    ranges: list[str] = []
    start = prev = cpus[0]
    for c in [*cpus[1:], -2]:
        if c != prev + 1:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
            start = c
        prev = c
    return ",".join(ranges)


class GpuUnread(Exception):
    """NVML counted a GPU it then could not open (GPU is lost, no permission)."""

    SAYS = "could not be read"

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(f"GPU{index} {self.SAYS} ({error})")
        self.index = index


class NvmlProbe:
    """What NVML says about the GPUs: ids, links, NVLinks and pair labels."""

    def __init__(self) -> None:
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        self.count = pynvml.nvmlDeviceGetCount()
        self.handles: list[Any] = []
        self.bus_ids: list[str] = []
        for i in range(self.count):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                self.bus_ids.append(_bus_id(pynvml.nvmlDeviceGetPciInfo(h)))
            except pynvml.NVMLError as err:  # say which GPU, not only that NVML failed
                self.close()
                raise GpuUnread(i, err) from err
            self.handles.append(h)
        self._remote: list[dict[str, int]] | None = None

    def mig_on(self, i: int) -> bool | None:
        """MIG mode of GPU i now (None: a GPU or binding without MIG)."""
        fn = getattr(self.nv, "nvmlDeviceGetMigMode", None)
        mode = self._try(fn, self.handles[i]) if fn else None
        return bool(mode[0]) if mode else None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.nv.nvmlShutdown()

    def _try(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nv.NVMLError:
            return None

    def name(self, i: int) -> str | None:
        n = self._try(self.nv.nvmlDeviceGetName, self.handles[i])
        return n.decode() if isinstance(n, bytes) else n

    def pcie(self, i: int) -> PcieLink:
        h, nv = self.handles[i], self.nv
        link = PcieLink(
            gen=self._try(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
            gen_max=self._try(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
            width=self._try(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
            width_max=self._try(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
            bus_id=self.bus_ids[i],
            source="NVML",
        )
        link.downtrained = link.compute_downtrained()
        return link

    def current_link(self, i: int) -> tuple[int | None, int | None]:
        h, nv = self.handles[i], self.nv
        return (
            self._try(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
            self._try(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
        )

    def cpu_affinity(self, i: int) -> str | None:
        words = max(1, ((os.cpu_count() or 64) + 63) // 64)
        masks = self._try(self.nv.nvmlDeviceGetCpuAffinity, self.handles[i], words)
        return _cpu_list(masks) if masks is not None else None

    def gpu_numa_id(self, i: int) -> int | None:
        fn = getattr(self.nv, "nvmlDeviceGetNumaNodeId", None)
        v = self._try(fn, self.handles[i]) if fn else None
        return v if isinstance(v, int) and v >= 0 else None

    def nvlink_speeds(self, i: int) -> dict[int, float | None]:
        """Link -> GB/s per direction for active links, None for inactive ones."""
        nv, h = self.nv, self.handles[i]
        out: dict[int, float | None] = {}
        rate = None
        field_id = getattr(nv, "NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON", None)
        if field_id is not None:
            vals = self._try(nv.nvmlDeviceGetFieldValues, h, [field_id])
            if vals is not None and vals[0].nvmlReturn == 0:
                mbps = float(vals[0].value.uiVal)
                rate = mbps / 1000 if 1000 <= mbps <= 1_000_000 else None
        for link in range(nv.NVML_NVLINK_MAX_LINKS):
            try:
                state = nv.nvmlDeviceGetNvLinkState(h, link)
            except nv.NVMLError:
                continue
            out[link] = rate if state == nv.NVML_FEATURE_ENABLED else None
        return out

    def remote_links(self) -> list[dict[str, int]]:
        """For each GPU: remote bus id -> number of active NVLinks to it."""
        if self._remote is not None:
            return self._remote
        nv = self.nv
        out: list[dict[str, int]] = []
        for h in self.handles:
            counts: dict[str, int] = {}
            for link in range(nv.NVML_NVLINK_MAX_LINKS):
                try:
                    if nv.nvmlDeviceGetNvLinkState(h, link) != nv.NVML_FEATURE_ENABLED:
                        continue
                    remote = _bus_id(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link))
                except nv.NVMLError:
                    continue
                counts[remote] = counts.get(remote, 0) + 1
            out.append(counts)
        self._remote = out
        return out

    def label(self, a: int, b: int) -> str | None:
        """The label nvidia-smi prints for GPUs a and b."""
        remote = self.remote_links()
        direct = remote[a].get(self.bus_ids[b], 0)
        if direct:
            return f"NV{direct}"
        gpus = set(self.bus_ids)
        # Through NVSwitches: links that land on something that is not a GPU.
        sw_a = sum(n for r, n in remote[a].items() if r not in gpus)
        sw_b = sum(n for r, n in remote[b].items() if r not in gpus)
        if sw_a and sw_b:
            return f"NV{min(sw_a, sw_b)}"
        level = self._try(
            self.nv.nvmlDeviceGetTopologyCommonAncestor, self.handles[a], self.handles[b]
        )
        return paths.label_from_nvml_level(level) if level is not None else None


def open_nvml() -> tuple[NvmlProbe | None, str | None]:
    """The probe, or None and why NVML cannot be read."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    try:
        return NvmlProbe(), None
    except (pynvml.NVMLError, GpuUnread) as err:  # LibraryNotFound, DriverNotLoaded, ...
        return None, str(err) or type(err).__name__
