"""What a path can carry, and measured bandwidth as a share of it.

Line rates per direction, after encoding (gpulane.units): PCIe generation × width
(Gen5 x16 = 63.0 GB/s), NVLink links × per-link rate (18 × 26.5625 = 478.1 GB/s on
H100/H200). Every copy row is unidirectional or, when ``bidirectional`` is set, one
direction of a pair of copies that ran at the same time (see gpulane.transfers.__init__);
either way the figure set beside it is the rate of one direction of the path.

Which path a copy takes:
- host <-> GPU: the GPU's PCIe link.
- GPU -> GPU with peer access: NVLink when the pair has links, else PCIe peer-to-peer,
  bounded by the slower of the two GPUs' links.
- GPU -> GPU without peer access: the driver stages through host memory, so both GPUs'
  PCIe links carry it: the slower of the two.
- all GPUs to or from the host at once: the sum of the GPUs' links (what the GPUs could
  take; a shared switch or the host's root ports show as the shortfall).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpulane.units import NVLINK4_LINK_GBPS, pcie_gbps

# Per-link, per-direction NVLink rate by NVLink version (NVML's nvmlDeviceGetNvLinkVersion).
NVLINK_LINK_GBPS = {1: 20.0, 2: 25.0, 3: 25.0, 4: NVLINK4_LINK_GBPS, 5: 50.0}

_NV_LABEL = re.compile(r"^NV(\d+)$")


@dataclass(frozen=True)
class Link:
    """What one path can carry per direction, and how that was worked out."""

    gbps: float
    label: str  # "PCIe Gen5 x16", "NV18", "PCIe (staged through host)"
    source: str = "nvml"  # topology, nvml, topology-json


@dataclass
class Expected:
    """Line rates by GPU name (host links) and ordered pair (peer paths)."""

    host: dict[str, Link] = field(default_factory=dict)
    pairs: dict[tuple[str, str], Link] = field(default_factory=dict)

    def host_link(self, gpu: str) -> Link | None:
        return self.host.get(gpu)

    def pair_link(self, a: str, b: str, peer_access: bool) -> Link | None:
        if not peer_access:
            return staged_link(self.host.get(a), self.host.get(b))
        return self.pairs.get((a, b)) or self.pairs.get((b, a))

    def all_host(self, gpus: list[str]) -> Link | None:
        links = [self.host.get(g) for g in gpus]
        if not links or any(link is None for link in links):
            return None
        total = sum(link.gbps for link in links if link is not None)
        return Link(total, f"sum of {len(links)} host links", "sum")


def efficiency(measured_gbps: float | None, expected_gbps: float | None) -> float | None:
    """measured / expected, or None when either is unknown (or expected is not positive)."""
    if measured_gbps is None or expected_gbps is None or expected_gbps <= 0:
        return None
    return measured_gbps / expected_gbps


def pcie_link(gen: int | None, width: int | None, source: str = "nvml") -> Link | None:
    if not gen or not width:
        return None
    try:
        return Link(pcie_gbps(int(gen), int(width)), f"PCIe Gen{gen} x{width}", source)
    except Exception:
        return None


def nvlink_link(links: int, version: int | None = None, source: str = "nvml") -> Link | None:
    if links <= 0:
        return None
    per = NVLINK_LINK_GBPS.get(version or 4, NVLINK4_LINK_GBPS)
    return Link(links * per, f"NV{links}", source)


def staged_link(a: Link | None, b: Link | None) -> Link | None:
    """A peer copy without peer access: GPU -> host -> GPU over both PCIe links."""
    if a is None or b is None:
        return None
    slow = a if a.gbps <= b.gbps else b
    return Link(slow.gbps, f"{slow.label} (staged through host)", slow.source)


def pcie_pair_link(a: Link | None, b: Link | None) -> Link | None:
    """PCIe peer-to-peer: the slower of the two links."""
    if a is None or b is None:
        return None
    slow = a if a.gbps <= b.gbps else b
    return Link(slow.gbps, f"{slow.label} (PCIe peer)", slow.source)


def from_topology_json(topo: dict[str, Any], source: str = "topology-json") -> Expected:
    """Line rates from DESIGN.md's topology JSON (``gpulane topo --json``).

    Host links from ``gpus[].pcie`` (gen × width as trained now); pairs labelled ``NV#``
    from their link count; other GPU pairs (PIX, PXB, PHB, NODE, SYS) are PCIe peer paths,
    bounded by the slower link. Unknown fields give no figure rather than a guess.
    """
    out = Expected()
    for gpu in topo.get("gpus") or []:
        name = gpu.get("name")
        pcie = gpu.get("pcie") or {}
        host = pcie_link(pcie.get("gen"), pcie.get("width"), source)
        if name and host is not None:
            out.host[name] = host
    gpu_names = set(out.host) | {g.get("name") for g in topo.get("gpus") or []}
    for pair in topo.get("pairs") or []:
        a, b = pair.get("a"), pair.get("b")
        if a not in gpu_names or b not in gpu_names:
            continue  # GPU-NIC pairs
        label = str(pair.get("label") or "")
        links = pair.get("nvlinks")
        m = _NV_LABEL.match(label)
        if links is None and m:
            links = int(m.group(1))
        link: Link | None
        if pair.get("kind") == "nvlink" or (links and m):
            link = nvlink_link(int(links or 0), source=source)
        else:
            link = pcie_pair_link(out.host.get(a), out.host.get(b))
        if link is not None:
            out.pairs[(a, b)] = link
            out.pairs[(b, a)] = link
    return out
