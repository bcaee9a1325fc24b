"""P2P status per GPU pair, as the driver reports it (``nvidia-smi topo -p2p``, NVML)."""

from __future__ import annotations

from gpulane.analysis.doctor.model import Finding, NotRun
from gpulane.topology.evidence import Evidence
from gpulane.topology.paths import nvlink_count

CODES = {
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "U": "unknown",
}


# The modes that carry a pair's traffic: NVLink pairs move it over NVLink (PCIe P2P "NS"
# there is normal), PCIe pairs over PCIe (an "NS" in nvlink mode is normal). Atomics
# decide only whether GPU atomics can cross the pair, not bandwidth.
CARRYING = {"nvlink": ("read", "write", "nvlink"), "pcie": ("read", "write", "pcie")}


def check_p2p(ev: Evidence) -> list[Finding]:
    topo = ev.topology
    pairs = topo.gpu_pairs() if topo is not None else []
    known = [p for p in pairs if p.p2p]
    if not known:
        # gpulane reads P2P status from nvidia-smi only (NVML gives the path labels)
        raise NotRun("P2P status unknown (needs nvidia-smi topo -p2p, or --p2p-file)")
    out = []
    for p in known:
        label = p.label or "?"
        modes = CARRYING["nvlink" if nvlink_count(label) is not None else "pcie"]
        bad = {k: v for k, v in p.p2p.items() if v.upper() != "OK" and k in modes}
        if not bad:
            continue
        severity = (
            "error"
            if nvlink_count(label) is not None
            else ("warning" if label in ("PIX", "PXB") else "info")
        )
        words = ", ".join(f"{k}={v} ({CODES.get(v.upper(), v)})" for k, v in sorted(bad.items()))
        out.append(
            Finding(
                severity,
                "p2p",
                f"{p.a}-{p.b} ({label}): P2P not available",
                f"{p.a}-{p.b}: topo -p2p {words}",
                "without P2P NCCL moves this pair's traffic through host memory (SHM) or the "
                "network, at a fraction of the path's rate; peer copies are staged through the host",
                "CNS/TNS: check ACS on the switches and the IOMMU mode (see those findings) and the "
                "BIOS; GNS: the GPU model has P2P turned off (consumer boards); NS on NV#: check "
                "`nvidia-smi nvlink -s` for links down and the fabric manager on NVSwitch systems",
                f"{p.a}-{p.b}",
            )
        )
    return out
