"""PCIe: Access Control Services between GPUs and NICs, links below their maximum,
link-level replays."""

from __future__ import annotations

from itertools import combinations

from gpulane.analysis.doctor.model import Finding, NotRun
from gpulane.topology.evidence import Evidence
from gpulane.topology.evidence.acs import PciFunction, bridges_between
from gpulane.topology.model import PcieLink

ACS_WHY = (
    "with ReqRedir/CmpltRedir set, the port sends every peer-to-peer request up to the root "
    "complex (and through the IOMMU) instead of straight to the peer: GPU-GPU P2P and "
    "GPUDirect RDMA lose most of their bandwidth, and NCCL may hang in its first collective"
)
ACS_FIX = (
    "disable ACS on the switch ports between GPUs and NICs: in the BIOS (PCIe ACS control / "
    "'ACS' disabled), or until the next reboot as root `setpci -s {bus} ECAP_ACS+6.w=0000` "
    "for each port; keep it only where VMs need the isolation"
)


def _where(f: PciFunction) -> str:
    return f.bus_id or f"line {f.line}"


def check_acs(ev: Evidence) -> list[Finding]:
    if "acs" in ev.absent:
        raise NotRun(ev.absent["acs"])
    funcs = ev.pci or []
    ported = [f for f in funcs if f.acs_ctl]
    if not ported:
        raise NotRun("no port in the lspci output reports ACS control (no ACSCtl lines)")
    ends = [f for f in funcs if f.bus_id and (f.is_gpu or f.is_nic)]
    ranged = any(f.secondary is not None for f in funcs)
    out: list[Finding] = []
    if len(ends) >= 2 and ranged:
        between: dict[str, tuple[PciFunction, list[str]]] = {}
        for a, b in combinations(ends, 2):
            if not (a.is_gpu or b.is_gpu):
                continue
            for bridge in bridges_between(funcs, str(a.bus_id), str(b.bus_id)):
                if bridge.redirects():
                    between.setdefault(str(bridge.bus_id), (bridge, []))[1].append(
                        f"{a.bus_id}-{b.bus_id}"
                    )
        for bus, (bridge, pairs) in sorted(between.items()):
            out.append(
                Finding(
                    "error",
                    "acs",
                    f"ACS redirects peer traffic at {bus} ({bridge.name[:60]})",
                    f"{bus}: {bridge.acs_line} (between {', '.join(pairs[:3])})",
                    ACS_WHY,
                    ACS_FIX.format(bus=bus),
                    bus,
                )
            )
        return out
    redirecting = [f for f in ported if f.redirects()]
    known = [f for f in redirecting if f.bus_id]
    for f in known:
        out.append(
            Finding(
                "warning",
                "acs",
                f"ACS redirects peer traffic at {f.bus_id} ({f.name[:60]})",
                f"{f.bus_id}: {f.acs_line}",
                ACS_WHY + " (the capture holds no GPU/NIC below it, so whether it lies between "
                "them is unknown)",
                ACS_FIX.format(bus=f.bus_id),
                f.bus_id,
            )
        )
    unknown = [f for f in redirecting if not f.bus_id]
    if unknown:
        out.append(
            Finding(
                "warning",
                "acs",
                f"ACS redirects peer traffic on {len(unknown)} of {len(ported)} ports",
                f"line {unknown[0].line}: {unknown[0].acs_line} (device lines not in the capture)",
                ACS_WHY,
                ACS_FIX.format(bus="<port>")
                + "; capture `lspci -vvv` (as root) in full to name them",
            )
        )
    return out


def _links(ev: Evidence) -> list[tuple[str, PcieLink]]:
    topo = ev.topology
    if topo is None:
        return []
    out = []
    for g in topo.gpus:
        if g.pcie is not None:
            out.append((g.name, g.pcie))
        for up in g.upstream:
            out.append((f"{g.name} upstream {up.bus_id or up.device or ''}".strip(), up))
    return out


def _unread(name: str, why: str) -> Finding:
    """A GPU whose link was not read: said, so that "ok" never covers it."""
    return Finding(
        "warning", "pcie_link", f"{name}: PCIe link not checked", f"{name}: {why}",
        "NVML counts this GPU but could not open it, so its link was not read",
        "see the GPU's own finding (fallen off the bus or not permitted), then run again",
        name,
    )  # fmt: skip


def check_links(ev: Evidence) -> list[Finding]:
    links = _links(ev)
    unread = [g for g in ev.topology.gpus if g.unreadable] if ev.topology else []
    if not links:
        raise NotRun("no PCIe link speeds in the topology (needs NVML, nvidia-smi -q or lspci)")
    under_load = bool(ev.topology and "under_load" in ev.topology.sources)
    out = [_unread(g.name, g.unreadable or "") for g in unread if g.pcie is None]
    for name, link in links:
        if link.width and link.width_max and link.width < link.width_max:
            out.append(
                Finding(
                    "error",
                    "pcie_link",
                    f"{name}: PCIe link trained at x{link.width} of x{link.width_max}",
                    f"{name}: {link.describe()}, capable of {link.describe_max()} ({link.source or 'topology'})",
                    "a narrower link carries proportionally less: host-device copies, staged peer "
                    "copies and NCCL's SHM and network traffic through this GPU are capped",
                    "reseat the card or riser, check the slot's wiring (x16 electrical) and the "
                    "BIOS bifurcation setting; a riser or retimer that trains x8 is the usual cause",
                    name,
                )
            )
        elif link.gen and link.gen_max and link.gen < link.gen_max:
            if under_load:
                out.append(
                    Finding(
                        "error",
                        "pcie_link",
                        f"{name}: PCIe Gen{link.gen} under load, capable of Gen{link.gen_max}",
                        f"{name}: {link.describe()} while copies ran ({ev.topology.sources['under_load'][:120]})"
                        if ev.topology
                        else f"{name}: {link.describe()}",
                        "each generation halves the per-lane rate: the link carries a fraction of its "
                        "capability for every host and PCIe peer transfer",
                        "check the slot's and riser's generation, BIOS 'PCIe speed' (Auto/GenN), and "
                        "retimers; update the BIOS and GPU firmware",
                        name,
                    )
                )
            else:
                out.append(
                    Finding(
                        "info",
                        "pcie_link",
                        f"{name}: PCIe Gen{link.gen} at capture time (max Gen{link.gen_max})",
                        f"{name}: {link.describe()}, capable of {link.describe_max()}",
                        "an idle GPU lowers its link speed to save power; only a reading under load "
                        "says whether the link can train to its maximum",
                        "run `gpulane doctor` live on the machine (it reads the link under a copy "
                        "load) or capture nvidia-smi -q while the GPUs are busy",
                        name,
                    )
                )
    return out


def check_replays(ev: Evidence) -> list[Finding]:
    if ev.smi is None:
        raise NotRun("no nvidia-smi -q")
    out = []
    for g in ev.smi.gpus:
        value = g.fields.get("PCI/Replays Since Reset", "").strip()
        if value.isdigit() and int(value) > 0:
            out.append(
                Finding(
                    "warning",
                    "pcie_replays",
                    f"GPU{g.index}: {value} PCIe replays since reset",
                    f"GPU{g.index} ({g.bus_id}): Replays Since Reset: {value}",
                    "every replay resends a packet the other side received damaged: a marginal "
                    "link (signal integrity) loses bandwidth and may drop to a lower speed",
                    "reseat the GPU and any riser/cable, check for bent pins and retimer firmware; "
                    "watch whether the count grows under load",
                    f"GPU{g.index}",
                )
            )
    return out
