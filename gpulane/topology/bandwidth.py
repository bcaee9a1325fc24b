"""The line rate of a path, per direction, from its links (GB/s = 1e9 B/s).

One place answers "what can this path carry": :func:`host_rate` (host <-> GPU),
:func:`pair_rate` (GPU -> GPU, with or without peer access) and :func:`path_rate` (the
GPUs of a collective). Acceptance rules, copy efficiency, ``gpulane topo`` and advise all
read these, so a figure and the threshold it is checked against never disagree.

PCIe: the usable rate per lane after encoding (gpulane.units.PCIE_LANE_GBPS: Gen3 0.985,
Gen4 1.969, Gen5 3.938, Gen6 7.56) times the narrowest width on the path up to the root
port. The generation is the one the link can reach, not the one it reads now: an idle GPU
lowers its link speed to save power (an H100 at rest reads Gen1) and raises it under
load, so the speed a probe happened to read would make an idle machine's line rate 16x
too low and every copy look efficient. What holds a link down for good is taken as it
is: the width it trained to, a port above that cannot reach the GPU's generation, and the
generation of a link that also lost width (a slot or riser, not idling). A link below
its maximum is the ``pcie_max_link`` rule's to flag, not the line rate's to hide.

NVLink: the link count (``NV#``) times the per-link rate: the slowest active link
measured (NVML or ``nvidia-smi nvlink -s``), else the rate of the GPU's product. When
neither is known there is no figure: a guessed rate would make a threshold look exact.

Peer copies: with peer access, NVLink when the pair has links, else PCIe peer-to-peer
bounded by the slower of the two GPUs' links; without it the driver stages through host
memory over both links, again the slower of the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpulane.errors import InputError
from gpulane.topology.model import Gpu, PcieLink, Topology
from gpulane.topology.paths import normalize_label, nvlink_count, path_label
from gpulane.units import NVLINK4_LINK_GBPS, PCIE_LANE_GBPS, pcie_gbps

PCIE_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")

# Per-link, per-direction NVLink rate by NVLink version (NVML's nvmlDeviceGetNvLinkVersion).
NVLINK_BY_VERSION = {1: 20.0, 2: 25.0, 3: 25.0, 4: NVLINK4_LINK_GBPS, 5: 50.0}

# Per-link, per-direction NVLink rate by product, when nothing measured says.
_NVLINK_BY_MODEL = (
    ("GB200", 50.0),
    ("B200", 50.0),
    ("B100", 50.0),
    ("H100", NVLINK4_LINK_GBPS),
    ("H200", NVLINK4_LINK_GBPS),
    ("H800", NVLINK4_LINK_GBPS),
    ("H20", NVLINK4_LINK_GBPS),
    ("A100", 25.0),
    ("A800", 25.0),
    ("V100", 25.0),
    ("P100", 20.0),
)


@dataclass(frozen=True)
class LineRate:
    """What one path can carry per direction, and how that was worked out."""

    gbps: float
    label: str  # "PCIe Gen5 x16", "NV18", "PCIe Gen5 x16 (staged through host)"
    source: str = "topology"  # topology, nvml, sum


def pcie_rate(gen: int | None, width: int | None, source: str = "topology") -> LineRate | None:
    """A PCIe link of this generation and width; None when either is unknown."""
    if not gen or not width:
        return None
    try:
        return LineRate(pcie_gbps(int(gen), int(width)), f"PCIe Gen{gen} x{width}", source)
    except InputError:
        return None  # a generation the table does not know: no figure, not a guess


def nvlink_rate(
    links: int, per_link_gbps: float | None, source: str = "topology"
) -> LineRate | None:
    """``links`` bonded NVLinks of ``per_link_gbps`` each."""
    if links <= 0 or per_link_gbps is None:
        return None
    return LineRate(links * per_link_gbps, f"NV{links}", source)


def staged(a: LineRate | None, b: LineRate | None) -> LineRate | None:
    """A peer copy without peer access: GPU -> host -> GPU over both PCIe links."""
    if a is None or b is None:
        return None
    slow = a if a.gbps <= b.gbps else b
    return LineRate(slow.gbps, f"{slow.label} (staged through host)", slow.source)


def pcie_peer(a: LineRate | None, b: LineRate | None) -> LineRate | None:
    """PCIe peer-to-peer: the slower of the two links."""
    if a is None or b is None:
        return None
    slow = a if a.gbps <= b.gbps else b
    return LineRate(slow.gbps, f"{slow.label} (PCIe peer)", slow.source)


def nvlink_link_gbps(gpu: Gpu) -> float | None:
    """Per-link, per-direction rate of a GPU's NVLinks (the slowest active link)."""
    active = [v for v in gpu.nvlink_gbps.values() if v]
    if active:
        return min(active)
    if gpu.model:
        for key, rate in _NVLINK_BY_MODEL:
            if key in gpu.model:
                return rate
    return None


def _reachable_gen(link: PcieLink, above: PcieLink | None) -> int | None:
    gen = link.gen_max if link.gen_max is not None else link.gen
    if above is not None and above.gen_max is not None and gen is not None:
        gen = min(gen, above.gen_max)
    # A link that also lost width is held down by the slot or riser, not by idling.
    lost_width = (
        link.width is not None and link.width_max is not None and link.width < link.width_max
    )
    if link.gen is not None and gen is not None and lost_width:
        gen = link.gen
    return gen


def path_links(gpu: Gpu) -> list[PcieLink]:
    return [x for x in [gpu.pcie, *gpu.upstream] if x is not None]


def path_gen_width(links: list[PcieLink]) -> tuple[int | None, int | None]:
    """The lowest reachable generation and the narrowest trained width on a path."""
    gens: list[int] = []
    widths: list[int] = []
    for i, link in enumerate(links):
        above = links[i + 1] if i + 1 < len(links) else None
        gen = _reachable_gen(link, above)
        if gen is not None:
            gens.append(gen)
        width = link.width if link.width is not None else link.width_max
        if width is not None:
            widths.append(width)
    return (min(gens) if gens else None, min(widths) if widths else None)


def host_rate(topo: Topology, gpu: str) -> LineRate | None:
    """Host <-> GPU per direction over the PCIe path upstream of ``gpu``."""
    g = topo.gpu(gpu)
    if g is None:
        return None
    gen, width = path_gen_width(path_links(g))
    if gen not in PCIE_LANE_GBPS:
        return None
    return pcie_rate(gen, width)


def path_rate(
    topo: Topology | None, gpus: Sequence[str], label: str | None = None
) -> LineRate | None:
    """What a collective over ``gpus`` can carry per direction on its worst path.

    ``label`` is the path as a run recorded it; by default :func:`path_label` of the GPUs.
    ``NV#``: links x the slowest per-link rate among the GPUs; a PCIe label: the slowest
    host link among them; ``NET`` or unknown: None.
    """
    if label is None:
        label = path_label(topo, gpus)
    if label is None or topo is None:
        return None
    try:
        label = normalize_label(label)  # SOC: SYS
    except InputError:
        return None
    members = [g for g in (topo.gpu(n) for n in gpus) if g is not None]
    n = nvlink_count(label)
    if n is not None:
        rates = [r for r in (nvlink_link_gbps(g) for g in members) if r is not None]
        return nvlink_rate(n, min(rates) if rates else None)
    if label not in PCIE_PATHS or not gpus:
        return None
    hosts = [host_rate(topo, name) for name in gpus]
    known = [h for h in hosts if h is not None]
    if len(known) != len(hosts):
        return None
    return min(known, key=lambda h: h.gbps)


def pair_rate(topo: Topology, a: str, b: str, peer_access: bool = True) -> LineRate | None:
    """GPU ``a`` -> GPU ``b`` per direction: NVLink or PCIe peer-to-peer with peer access,
    staged through host memory without it."""
    if not peer_access:
        return staged(host_rate(topo, a), host_rate(topo, b))
    pair = topo.pair(a, b)
    if pair is None or not pair.label or topo.gpu(a) is None or topo.gpu(b) is None:
        return None
    if nvlink_count(pair.label) is not None:
        return path_rate(topo, [a, b], pair.label)
    return pcie_peer(host_rate(topo, a), host_rate(topo, b))


def expected_host_gbps(topo: Topology, gpu: str) -> float | None:
    """:func:`host_rate` in GB/s."""
    rate = host_rate(topo, gpu)
    return rate.gbps if rate is not None else None


def expected_pair_gbps(topo: Topology, a: str, b: str) -> float | None:
    """:func:`pair_rate` with peer access, in GB/s."""
    rate = pair_rate(topo, a, b)
    return rate.gbps if rate is not None else None
