"""Expected bandwidth of a path, per direction, from its links (GB/s = 1e9 B/s).

PCIe: the usable rate per lane after encoding (gpulane.units.PCIE_LANE_GBPS: Gen3 0.985,
Gen4 1.969, Gen5 3.938, Gen6 7.56) times the narrowest width on the path. A link's
generation is the one it can reach (its capability, capped by the port above when that is
known): an idle GPU lowers its link speed to save power and raises it under load, while
the width a link trained to stays. NVLink: the per-link rate (from NVML or
``nvidia-smi nvlink -s``; by architecture when neither says) times the link count.
"""

from __future__ import annotations

from gpulane.topology.model import Gpu, PcieLink, Topology
from gpulane.topology.paths import nvlink_count
from gpulane.units import NVLINK4_LINK_GBPS, PCIE_LANE_GBPS, pcie_gbps

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


def expected_host_gbps(topo: Topology, gpu: str) -> float | None:
    """Host<->GPU bandwidth per direction over the PCIe path upstream of ``gpu``."""
    g = topo.gpu(gpu)
    if g is None:
        return None
    gen, width = path_gen_width(path_links(g))
    if gen is None or width is None or gen not in PCIE_LANE_GBPS:
        return None
    return pcie_gbps(gen, width)


def expected_pair_gbps(topo: Topology, a: str, b: str) -> float | None:
    """Bandwidth per direction between two GPUs: NVLink links × rate, else PCIe."""
    pair = topo.pair(a, b)
    ga, gb = topo.gpu(a), topo.gpu(b)
    if pair is None or ga is None or gb is None:
        return None
    n = nvlink_count(pair.label)
    if n is not None:
        ra, rb = nvlink_link_gbps(ga), nvlink_link_gbps(gb)
        rates = [r for r in (ra, rb) if r is not None]
        return n * min(rates) if rates else None
    ha, hb = expected_host_gbps(topo, a), expected_host_gbps(topo, b)
    if ha is None or hb is None:
        return None
    return min(ha, hb)
