"""NVML's view of this machine's GPUs (nvidia-ml-py): bus ids, PCIe links, NVLinks, the
labels nvidia-smi would print for each pair, and MIG mode. Read by the live probe
(:mod:`gpulane.topology.live`); every reading that NVML cannot give is None."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from gpulane.topology import paths
from gpulane.topology.model import Gpu, PcieLink, Topology, normalize_bus_id


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
    """NVML counted GPUs it then could not open, not one of them (GPU is lost, no
    permission)."""

    SAYS = "could not be read"

    def __init__(self, index: int, error: Exception | str) -> None:
        super().__init__(f"GPU{index} {self.SAYS} ({error})")
        self.index = index


class NvmlProbe:
    """What NVML says about the GPUs: ids, links, NVLinks and pair labels.

    A GPU that NVML counts but cannot open (its handle or PCI info fails: fallen off the
    bus, no permission on its device node) is kept in ``unread`` with NVML's error, and
    its handle and bus id are None; every reading of it is None, so that the other GPUs'
    facts stay and nothing is said of it that was not read. Only when no GPU opens does
    the probe fail (:class:`GpuUnread`)."""

    def __init__(self) -> None:
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        self.count = pynvml.nvmlDeviceGetCount()
        self.handles: list[Any] = []
        self.bus_ids: list[str | None] = []
        self.unread: dict[int, str] = {}  # NVML index -> NVML's error, in its words
        for i in range(self.count):
            h: Any = None
            bus: str | None = None
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                bus = _bus_id(pynvml.nvmlDeviceGetPciInfo(h))
            except pynvml.NVMLError as err:  # this GPU, not NVML: the others still answer
                self.unread[i] = str(err) or type(err).__name__
                h = None
            self.handles.append(h)
            self.bus_ids.append(bus)
        if self.count and len(self.unread) == self.count:
            first = min(self.unread)
            self.close()
            raise GpuUnread(first, self.unread[first])
        self._remote: list[dict[str, int]] | None = None

    @property
    def readable(self) -> list[int]:
        """The NVML indices of the GPUs that opened."""
        return [i for i in range(self.count) if i not in self.unread]

    def mig_on(self, i: int) -> bool | None:
        """MIG mode of GPU i now (None: a GPU or binding without MIG)."""
        fn = getattr(self.nv, "nvmlDeviceGetMigMode", None)
        mode = self._try(fn, self.handles[i]) if fn else None
        return bool(mode[0]) if mode else None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.nv.nvmlShutdown()

    def _try(self, fn: Callable[..., Any], *args: Any) -> Any:
        if args and args[0] is None:  # a GPU that did not open: nothing to read
            return None
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
        if h is None:
            return out
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
            for link in range(nv.NVML_NVLINK_MAX_LINKS if h is not None else 0):
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

    def switch_links(self, i: int) -> int | None:
        """GPU i's active NVLinks that land on something that is not a GPU (NVSwitches);
        None when that cannot be told."""
        gpus = {bus for bus in self.bus_ids if bus is not None}
        other = sum(n for r, n in self.remote_links()[i].items() if r not in gpus)
        if not other or not self.unread:
            return other
        # A GPU that did not open has no bus id here, so a link to it looks like one to a
        # switch: only NVML's word for the far end's type tells them apart.
        nv, h = self.nv, self.handles[i]
        kind = getattr(nv, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
        switch = getattr(nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
        count = 0
        for link in range(nv.NVML_NVLINK_MAX_LINKS):
            try:
                if nv.nvmlDeviceGetNvLinkState(h, link) != nv.NVML_FEATURE_ENABLED:
                    continue
            except nv.NVMLError:
                continue
            try:
                far = kind(h, link) if kind is not None else None
            except nv.NVMLError:
                far = None
            if far is None:
                return None
            count += far == switch
        return count

    def label(self, a: int, b: int) -> str | None:
        """The label nvidia-smi prints for GPUs a and b (None: unknown, as for a GPU that
        did not open)."""
        bus_b = self.bus_ids[b]
        if bus_b is None or self.handles[a] is None:
            return None
        remote = self.remote_links()
        direct = remote[a].get(bus_b, 0)
        if direct:
            return f"NV{direct}"
        sw_a, sw_b = self.switch_links(a), self.switch_links(b)
        if sw_a is None or sw_b is None:
            return None
        if sw_a and sw_b:
            return f"NV{min(sw_a, sw_b)}"
        level = self._try(
            self.nv.nvmlDeviceGetTopologyCommonAncestor, self.handles[a], self.handles[b]
        )
        return paths.label_from_nvml_level(level) if level is not None else None


UNREAD_WORDS = (
    "its bus id, model, PCIe link, NVLinks and pair labels are unknown (checks of them "
    "SKIP); a GPU NVML cannot open has usually fallen off the bus (Xid 79) or is not "
    "permitted to this user"
)


def mark_unread(topo: Topology, probe: NvmlProbe | None, under_load: bool = False) -> None:
    """Name in ``topo`` each GPU NVML counts but could not open, with NVML's error: on the
    GPU itself (``unreadable``; added when no other source listed it) and in the warnings,
    so that nothing reads its missing facts as fine. The load check is then not run: CUDA
    may or may not count such a GPU, so its device numbers cannot be matched to NVML's,
    and a link read while another GPU copies would be judged as if under load."""
    if probe is None or not probe.unread:
        return
    if under_load:
        lost = ", ".join(f"GPU{i}" for i in sorted(probe.unread))
        topo.warnings.append(
            f"load check not run: {lost} could not be read through NVML, so CUDA's device "
            "numbers cannot be matched to NVML's; the links are read at idle only"
        )
    # build() counts NVML's GPUs as "nvidia-smi -q"'s against the matrix: here the ones
    # missing are the unread ones, not another machine's capture.
    topo.warnings = [w for w in topo.warnings if not w.startswith("nvidia-smi -q lists ")]
    by_index = {g.index: g for g in topo.gpus}
    for i, why in sorted(probe.unread.items()):
        gpu = by_index.get(i)
        if gpu is None:
            gpu = Gpu(name=f"GPU{i}", index=i)
            topo.gpus.append(gpu)
        gpu.unreadable = f"NVML: {why}"
        gpu.model = gpu.model or None  # not "" from a GPU's empty NVLink listing
        topo.warnings.insert(0, f"{gpu.name}: NVML could not read it ({why}): {UNREAD_WORDS}")
        topo.missing.append(f"NVML: GPU{i} {GpuUnread.SAYS} ({why}); only the other GPUs read")
    topo.gpus.sort(key=lambda g: g.index)


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
