"""The IOMMU: how the kernel was told to run it (``/proc/cmdline``) and what each IOMMU
group does with DMA (``/sys/kernel/iommu_groups/N/type``: ``identity`` is passthrough,
``DMA``/``DMA-FQ`` translate every peer and NIC access)."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

_GROUP_TYPE = re.compile(r"iommu_groups/(?P<g>\d{1,6})/type:(?P<t>\S{1,20})")
_GROUP_DEV = re.compile(
    r"iommu_groups/(?P<g>\d{1,6})/devices/(?P<d>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
)
# Kernel parameters that decide the IOMMU's mode (Documentation/admin-guide/kernel-parameters).
IOMMU_PARAMS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict", "pci")


@dataclass
class IommuGroups:
    types: dict[str, str] = field(default_factory=dict)  # group -> identity, DMA, DMA-FQ
    devices: dict[str, str] = field(default_factory=dict)  # bus id -> group

    def type_of(self, bus_id: str) -> str | None:
        group = self.devices.get(bus_id.lower())
        if group is None:
            for dev, g in self.devices.items():
                if dev.endswith(bus_id.lower()[-7:]):
                    group = g
                    break
        return self.types.get(group) if group is not None else None


def cmdline_params(text: str) -> dict[str, str]:
    """The IOMMU-related parameters of a kernel command line (``iommu=pt`` -> {"iommu": "pt"})."""
    out: dict[str, str] = {}
    for token in text.split():
        name, _, value = token.partition("=")
        if name in IOMMU_PARAMS:
            out[name] = value
    return out


def parse_groups(text: str) -> IommuGroups:
    """``grep -H . /sys/kernel/iommu_groups/*/type`` and ``ls -d .../devices/*`` lines."""
    groups = IommuGroups()
    for line in text.splitlines():
        if (m := _GROUP_TYPE.search(line)) is not None:
            groups.types[m.group("g")] = m.group("t")
        elif (m := _GROUP_DEV.search(line)) is not None:
            groups.devices[m.group("d").lower()] = m.group("g")
    return groups


def read_groups(sys_root: str = "/sys") -> IommuGroups | None:
    """This machine's IOMMU groups; None when there are none (no IOMMU, or none exposed)."""
    base = Path(sys_root) / "kernel" / "iommu_groups"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return None
    groups = IommuGroups()
    for g in names:
        with contextlib.suppress(OSError):
            groups.types[g] = (base / g / "type").read_text().strip()
        try:
            for dev in os.listdir(base / g / "devices"):
                groups.devices[dev.lower()] = g
        except OSError:
            continue
    return groups if (groups.types or groups.devices) else None
