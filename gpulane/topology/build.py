"""Join what each source says into one Topology, with warnings.

Sources are optional; each fills what it carries and nothing else is guessed:
the topology matrix (labels, affinities, NICs), ``topo -p2p`` (P2P status per mode),
``nvidia-smi -q`` or NVML (bus ids, models, PCIe links), ``nvidia-smi nvlink -s`` or
NVML (link speeds), ``lspci -vvv``/``-tv`` and sysfs (links up to the root port).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulane.topology import bandwidth, paths
from gpulane.topology.lspci import LspciDevice, LspciTree
from gpulane.topology.model import Gpu, Nic, Pair, PcieLink, Topology, same_device
from gpulane.topology.nvlink import NvlinkGpu
from gpulane.topology.p2p import P2PMatrix
from gpulane.topology.smi_query import SmiQuery
from gpulane.topology.sysfs import SysfsDevice
from gpulane.topology.topo_matrix import TopoMatrix

_TREE_GPU_RE = re.compile(
    r"NVIDIA Corporation (?!.*(?:Audio|USB|Serial|Bridge|Switch|Controller))", re.IGNORECASE
)
IDLE_NOTE = (
    "an idle GPU may lower its link speed to save power; check under load with "
    "`gpulane topo --under-load` on that machine"
)


@dataclass
class Inputs:
    matrix: TopoMatrix | None = None
    p2p: list[P2PMatrix] = field(default_factory=list)
    smi: SmiQuery | None = None
    nvlink: list[NvlinkGpu] | None = None
    lspci: list[LspciDevice] = field(default_factory=list)
    trees: list[LspciTree] = field(default_factory=list)
    sysfs: dict[str, SysfsDevice] | None = None
    sources: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _single_int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _merge_link(first: PcieLink | None, second: PcieLink | None) -> PcieLink | None:
    """``first`` with the fields it lacks taken from ``second``."""
    if first is None:
        return second
    if second is None:
        return first
    for name in ("gen", "gen_max", "width", "width_max", "bus_id", "device"):
        if getattr(first, name) is None:
            setattr(first, name, getattr(second, name))
    first.downtrained = first.compute_downtrained()
    if second.downtrained:
        first.downtrained = True if first.downtrained is None else first.downtrained
    return first


def _lspci_find(devices: list[LspciDevice], bus_id: str | None) -> LspciDevice | None:
    for d in devices:
        if same_device(d.bus_id, bus_id):
            return d
    return None


def _gpus(inp: Inputs) -> list[Gpu]:
    if inp.matrix is not None:
        return [Gpu(name=g, index=int(g[3:])) for g in inp.matrix.gpus]
    if inp.smi is not None:
        return [Gpu(name=f"GPU{g.index}", index=g.index) for g in inp.smi.gpus]
    if inp.nvlink:
        return [Gpu(name=f"GPU{g.index}", index=g.index) for g in inp.nvlink]
    lspci_gpus = sorted((d for d in inp.lspci if d.is_nvidia_gpu), key=lambda d: d.bus_id)
    if lspci_gpus:
        inp.notes.append("GPUs numbered from lspci in PCI bus order, as nvidia-smi numbers them")
        return [
            Gpu(name=f"GPU{i}", index=i, bus_id=d.bus_id, model=d.name)
            for i, d in enumerate(lspci_gpus)
        ]
    if inp.sysfs:
        found = sorted(d.bus_id for d in inp.sysfs.values() if d.is_nvidia_gpu)
        return [Gpu(name=f"GPU{i}", index=i, bus_id=b) for i, b in enumerate(found)]
    for pm in inp.p2p:  # topo -p2p alone: the GPUs its matrix names
        return [Gpu(name=g, index=int(g[3:])) for g in pm.gpus]
    for tree in inp.trees:  # lspci -tv alone: its NVIDIA GPUs in PCI bus order
        if nodes := tree.gpus():
            inp.notes.append("GPUs numbered from the lspci -tv tree in PCI bus order")
            return [Gpu(f"GPU{i}", i, bus_id=n.bus_id, model=n.name) for i, n in enumerate(nodes)]
    return []


def build(inp: Inputs) -> Topology:
    topo = Topology(sources=dict(inp.sources), missing=list(inp.missing))
    topo.gpus = _gpus(inp)
    m = inp.matrix

    # Affinities from the matrix.
    if m is not None:
        for g in topo.gpus:
            g.cpu_affinity = m.cpu_affinity.get(g.name)
            g.numa = _single_int(m.numa_affinity.get(g.name))
            g.gpu_numa_id = m.gpu_numa_id.get(g.name)

    # Bus ids, models and links from nvidia-smi -q (GPUs in index order).
    if inp.smi is not None:
        by_index = {s.index: s for s in inp.smi.gpus}
        if m is not None and len(inp.smi.gpus) != len(topo.gpus):
            topo.warnings.append(
                f"nvidia-smi -q lists {len(inp.smi.gpus)} GPUs but the topology matrix "
                f"{len(topo.gpus)}: captured on different machines?"
            )
        for g in topo.gpus:
            s = by_index.get(g.index)
            if s is not None:
                g.bus_id = g.bus_id or s.bus_id
                g.model = g.model or s.model
                g.pcie = _merge_link(g.pcie, s.pcie)

    # Still no bus ids: the NVIDIA GPUs of the lspci -tv tree, in PCI bus order.
    if topo.gpus and all(g.bus_id is None for g in topo.gpus):
        for tree in inp.trees:
            found = sorted(
                n.bus_id for n in tree.nodes.values() if n.name and _TREE_GPU_RE.search(n.name)
            )
            if len(found) == len(topo.gpus):
                for g, b in zip(topo.gpus, found, strict=True):
                    g.bus_id = b
                inp.notes.append(
                    "GPUs matched to the lspci -tv tree in PCI bus order (the order nvidia-smi "
                    "numbers them); give --smi-q-file to match by bus id"
                )
                break

    # lspci: match by bus id; with no bus ids at all, by PCI bus order when counts agree.
    if inp.lspci:
        lspci_gpus = sorted((d for d in inp.lspci if d.is_nvidia_gpu), key=lambda d: d.bus_id)
        if (
            topo.gpus
            and all(g.bus_id is None for g in topo.gpus)
            and len(lspci_gpus) == len(topo.gpus)
        ):
            for g, dev in zip(topo.gpus, lspci_gpus, strict=True):
                g.bus_id = dev.bus_id
            inp.notes.append(
                "GPUs matched to lspci devices in PCI bus order (the order nvidia-smi "
                "numbers them); give --smi-q-file to match by bus id"
            )
        for g in topo.gpus:
            d = _lspci_find(inp.lspci, g.bus_id)
            if d is not None:
                g.model = g.model or d.name
                g.pcie = _merge_link(g.pcie, d.link())
                if g.numa is None and d.numa is not None:
                    g.numa = d.numa

    # The tree above each GPU (lspci -tv), with each bridge's link from lspci -vvv.
    for g in topo.gpus:
        if g.bus_id is None:
            continue
        for tree in inp.trees:
            chain = tree.chain(g.bus_id)
            if not chain and tree.find(g.bus_id) is None:
                continue
            g.upstream = []
            for node in chain:
                bridge = _lspci_find(inp.lspci, node.bus_id)
                link = bridge.link() if bridge is not None else None
                if link is None:
                    link = PcieLink(bus_id=node.bus_id, source="lspci -tv")
                link.bus_id = node.bus_id
                link.device = _bridge_kind(bridge)
                g.upstream.append(link)
            break

    # sysfs: the GPU's link and the bridges above it.
    if inp.sysfs:
        for g in topo.gpus:
            sd = next((d for b, d in inp.sysfs.items() if same_device(b, g.bus_id)), None)
            if sd is None:
                continue
            g.pcie = _merge_link(g.pcie, sd.link)
            if g.numa is None:
                g.numa = sd.numa
            if not g.upstream:
                for b in sd.chain:
                    up = inp.sysfs.get(b)
                    g.upstream.append(
                        up.link
                        if up is not None and up.link is not None
                        else PcieLink(bus_id=b, device="bridge", source="sysfs")
                    )

    # NVLink speeds.
    if inp.nvlink:
        by_index_nv = {n.index: n for n in inp.nvlink}
        for g in topo.gpus:
            nv = by_index_nv.get(g.index)
            if nv is not None:
                g.nvlink_gbps = dict(nv.links)
                g.model = g.model or nv.model

    for g in topo.gpus:
        if g.pcie is not None:
            g.pcie.device = g.pcie.device or g.model
            g.pcie.downtrained = _downtrained(g.pcie, g.upstream[0] if g.upstream else None)

    # NICs.
    if m is not None:
        topo.nics = [Nic(name=n, device=m.nic_devices.get(n)) for n in m.nics]

    # Pairs: GPU-GPU, GPU-NIC and NIC-NIC, as the matrix prints them.
    if m is not None:
        names = m.names
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                label = m.labels.get((a, b))
                if label is None:  # NVML could not tell this pair's path: no pair, not a guess
                    continue
                orig = m.original.get((a, b), label)
                topo.pairs.append(
                    Pair(
                        a=a,
                        b=b,
                        label=label,
                        kind=paths.label_kind(label),
                        nvlinks=paths.nvlink_count(label),
                        original=orig if orig != label else None,
                    )
                )
    _add_p2p(topo, inp.p2p)
    for p in topo.pairs:
        if topo.gpu(p.a) and topo.gpu(p.b):
            p.expected_gbps = _round(bandwidth.expected_pair_gbps(topo, p.a, p.b))
    _warn(topo, inp)
    return topo


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _bridge_kind(d: LspciDevice | None) -> str:
    if d is None or d.port_type is None:
        return "bridge"
    t = d.port_type.lower()
    if "root port" in t:
        return "root port"
    if "downstream" in t:
        return "switch downstream port"
    if "upstream" in t:
        return "switch upstream port"
    return "bridge"


def _downtrained(link: PcieLink, above: PcieLink | None) -> bool | None:
    down = link.compute_downtrained()
    if link.downtrained:
        down = True
    if above is not None and above.gen_max is not None and link.gen is not None:
        cap = above.gen_max if link.gen_max is None else min(above.gen_max, link.gen_max)
        down = down or link.gen < cap
    return down


def _add_p2p(topo: Topology, matrices: list[P2PMatrix]) -> None:
    for n, pm in enumerate(matrices):
        mode = pm.mode or f"mode{n}"
        if pm.mode is None:
            topo.warnings.append(
                f"P2P statuses from {pm.source} have no mode (r, w, n, a or p): listed as "
                f"{mode}, which no acceptance rule checks"
            )
        if mode not in topo.p2p_modes:
            topo.p2p_modes.append(mode)
        for (a, b), status in pm.status.items():
            pair = topo.pair(a, b)
            if pair is None:
                if topo.gpu(a) is None or topo.gpu(b) is None:
                    if a < b:
                        topo.warnings.append(
                            f"P2P ({mode}) names {a}/{b}, which the topology does not have"
                        )
                    continue
                pair = Pair(a=a, b=b, label="", kind="", nvlinks=None)
                topo.pairs.append(pair)
            if (pair.a, pair.b) != (a, b):
                continue
            back = pm.status.get((b, a), status)
            pair.p2p[mode] = status if back == status else f"{status}/{back}"
    # Pairs that only P2P files named carry no label: drop the empty label fields.
    topo.pairs = [p for p in topo.pairs if p.label or p.p2p]


def _link_text(link: PcieLink) -> str:
    return f"PCIe link at {link.describe()}, capable of {link.describe_max()}"


def _warn(topo: Topology, inp: Inputs) -> None:
    w = topo.warnings
    for g in topo.gpus:
        link = g.pcie
        above = g.upstream[0] if g.upstream else None
        if link is not None and link.downtrained:
            text = f"{g.name}: {_link_text(link)} (downtrained)"
            if (
                above is not None
                and above.width_max is not None
                and link.width is not None
                and (above.width_max <= link.width < (link.width_max or 0))
            ):
                text += (
                    f"; the port above ({above.bus_id}) is only x{above.width_max}: the slot "
                    "or riser limits it"
                )
            speed_only = (
                link.gen is not None
                and link.gen_max is not None
                and link.gen < link.gen_max
                and (link.width is None or link.width_max is None or link.width >= link.width_max)
            )
            if speed_only:
                text += f"; speed only: {IDLE_NOTE}"
            w.append(text)
        for up in g.upstream:
            if up.compute_downtrained():
                w.append(
                    f"{g.name}: {up.device or 'bridge'} {up.bus_id} upstream: {_link_text(up)} "
                    "(downtrained)"
                )
        narrow = [u for u in g.upstream if u.width is not None]
        if link is not None and link.width is not None and narrow:
            worst = min(narrow, key=lambda u: u.width or 0)
            if worst.width is not None and worst.width < link.width:
                w.append(
                    f"{g.name}: the path to the CPU narrows to x{worst.width} at "
                    f"{worst.device or 'bridge'} {worst.bus_id} (the GPU's own link is "
                    f"x{link.width})"
                )
        inactive = [k for k, v in g.nvlink_gbps.items() if v is None]
        if inactive and any(v is not None for v in g.nvlink_gbps.values()):
            w.append(f"{g.name}: NVLink {', '.join(map(str, sorted(inactive)))} inactive")
    for p in topo.pairs:
        if p.original is not None:
            w.append(f"{p.a}-{p.b}: old label {p.original} read as {p.label}")
        nv = p.p2p.get("nvlink")
        if p.nvlinks and nv is not None and nv != "OK":
            w.append(f"{p.a}-{p.b}: {p.label} but P2P over NVLink reports {nv}")
        for mode, status in p.p2p.items():
            codes = set(re.split("/", status))
            unknown = codes - {"OK", "CNS", "GNS", "TNS", "NS", "U"}
            if unknown:
                w.append(
                    f"{p.a}-{p.b}: P2P ({mode}) status {status} is not one nvidia-smi documents"
                )
    for note in inp.notes:
        w.append(note)
