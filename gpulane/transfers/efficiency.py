"""What a path can carry, and measured bandwidth as a share of it.

Line rates per direction come from gpulane.topology.bandwidth (PCIe generation × width,
Gen5 x16 = 63.0 GB/s; NVLink links × per-link rate, 18 × 26.5625 = 478.1 GB/s on
H100/H200). Every copy row is unidirectional or, when ``bidirectional`` is set, one
direction of a pair of copies that ran at the same time (see gpulane.transfers.__init__);
either way the figure set beside it is the rate of one direction of the path.

Which path a copy takes:
- host <-> GPU: the GPU's PCIe path up to the root port.
- GPU -> GPU with peer access: NVLink when the pair has links, else PCIe peer-to-peer,
  bounded by the slower of the two GPUs' links.
- GPU -> GPU without peer access: the driver stages through host memory, so both GPUs'
  PCIe links carry it: the slower of the two.
- all GPUs to or from the host at once: the sum of the GPUs' links (what the GPUs could
  take; a shared switch or the host's root ports show as the shortfall).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulane.topology.bandwidth import LineRate, host_rate, pair_rate, staged
from gpulane.topology.model import Topology


@dataclass
class Expected:
    """Line rates by GPU name (host links) and ordered pair (peer paths), from the topology
    and then corrected by what NVML reads during the run (gpulane.transfers.gpuinfo)."""

    host: dict[str, LineRate] = field(default_factory=dict)
    pairs: dict[tuple[str, str], LineRate] = field(default_factory=dict)

    @classmethod
    def from_topology(cls, topo: Topology | None, names: list[str] | None = None) -> Expected:
        """Line rates of ``names`` (every GPU of the topology by default), from
        gpulane.topology.bandwidth; what it cannot tell is left out, not guessed."""
        out = cls()
        if topo is None:
            return out
        names = topo.gpu_names() if names is None else names
        for n in names:
            rate = host_rate(topo, n)
            if rate is not None:
                out.host[n] = rate
        for a in names:
            for b in names:
                rate = pair_rate(topo, a, b) if a != b else None
                if rate is not None:
                    out.pairs[(a, b)] = rate
        return out

    def host_link(self, gpu: str) -> LineRate | None:
        return self.host.get(gpu)

    def pair_link(self, a: str, b: str, peer_access: bool) -> LineRate | None:
        if not peer_access:
            return staged(self.host.get(a), self.host.get(b))
        return self.pairs.get((a, b)) or self.pairs.get((b, a))

    def all_host(self, gpus: list[str]) -> LineRate | None:
        links = [self.host.get(g) for g in gpus]
        if not links or any(link is None for link in links):
            return None
        total = sum(link.gbps for link in links if link is not None)
        return LineRate(total, f"sum of {len(links)} host links", "sum")


def efficiency(measured_gbps: float | None, expected_gbps: float | None) -> float | None:
    """measured / expected, or None when either is unknown (or expected is not positive)."""
    if measured_gbps is None or expected_gbps is None or expected_gbps <= 0:
        return None
    return measured_gbps / expected_gbps
