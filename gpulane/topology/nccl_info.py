"""NCCL's own INFO lines at communicator init: which transport it chose between which GPUs.

``NCCL_DEBUG=INFO`` with ``NCCL_DEBUG_SUBSYS=INIT,GRAPH`` makes NCCL say, per process and
communicator, what it connected and how (formats of NCCL 2.28, src/transport/*.cc,
src/init.cc, src/graph/*.cc; older ones as users paste them)::

    host:pid:tid [dev] NCCL INFO NCCL version 2.28.9+cuda13.0
    host:pid:tid [0] NCCL INFO ncclCommInitRankConfig comm 0x55... rank 0 nranks 2 cudaDev 0
        nvmlDev 0 busId 6000 commId 0x2f... - Init START
    host:pid:tid [0] NCCL INFO comm 0x55... rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
    host:pid:tid [0] NCCL INFO Channel 00/02 : 0 1                    (a ring, in rank order)
    host:pid:tid [0] NCCL INFO Ring 00 : 1 -> 0 -> 1                  (prev -> me -> next)
    host:pid:tid [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] ...
    host:pid:tid [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw 40.000000/40.000000,
        type NVL/PIX, sameChannels 1
    host:pid:tid [0] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels,
        2 p2p channels, 2 p2p channels per peer
    host:pid:tid [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
    host:pid:tid [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
    host:pid:tid [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA

The parser is pure and never fails: any text gives an :class:`NcclInfo` (perhaps empty);
lines it cannot read are counted, never raised. Prefixes that launchers and loggers add
(``[1,0]<stdout>:``, timestamps, ``0: ``) are looked past: every line is read from its
``host:pid:tid [dev] NCCL INFO`` on.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from gpulane.textio import strip_ansi

# \d{1,9} everywhere: a number that long is already damage, and int() of thousands of
# digits raises (Python's integer string limit) where this parser must not.
_N = r"\d{1,9}"
_PREFIX = re.compile(
    r"(?P<host>[^\s:\[\]]{1,255}):(?P<pid>\d{1,9}):(?P<tid>\d{1,9})\s+\[(?P<dev>\d{1,4})\]\s+NCCL\s+"
    r"(?P<level>INFO|WARN)\b"
)
_LEVEL = re.compile(r"NCCL\s+(?P<level>INFO|WARN)\b")
_VERSION = re.compile(
    r"NCCL version (?P<v>\d{1,3}\.\d{1,3}\.\d{1,4})(?P<suffix>[^+\s]{0,32})(?:\+cuda(?P<cuda>\d{1,3}\.\d{1,3}))?"
)
_DEV = r"(?:\[(?P<{0}>[0-9a-fA-Fx]{{1,16}})\])?"
_CONNECT = re.compile(
    rf"^(?:Channel|Ring) (?P<channel>{_N})(?:/(?P<conn>{_N}))? : (?P<src>{_N})"
    + _DEV.format("sdev")
    + rf" -> (?P<dst>{_N})"
    + _DEV.format("ddev")
    + r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S.{0,200})$"
)
_COLLNET = re.compile(
    rf"^CollNet (?P<channel>{_N})/(?P<conn>{_N}) : (?P<rank>{_N}) \[(?P<dir>send|receive)\] "
    r"via (?P<via>COLLNET/\S.{0,200})$"
)
_RING_ORDER = re.compile(
    rf"^Channel (?P<channel>{_N})/(?P<total>{_N}) :(?P<ranks>(?:\s+{_N}){{1,4096}})\s*$"
)
_RING_LINK = re.compile(
    rf"^Ring (?P<channel>{_N}) : (?P<prev>-?{_N}) -> (?P<rank>{_N}) -> (?P<next>-?{_N})\s*$"
)
_TREES = re.compile(r"^Trees(?P<trees>(?: \[\d{1,4}\] [-\d/>|]{1,128}){1,256})\s*$")
_COMM = re.compile(
    rf"comm (?P<ptr>0x[0-9a-fA-F]{{1,16}}|\(nil\)) rank (?P<rank>{_N}) nRanks (?P<nranks>{_N}) "
    rf"nNodes (?P<nnodes>{_N}) localRanks (?P<local>{_N})"
)
_INIT = re.compile(
    rf"comm (?P<ptr>0x[0-9a-fA-F]{{1,16}}|\(nil\)) rank (?P<rank>{_N}) nranks (?P<nranks>{_N}) "
    rf"cudaDev (?P<cuda>{_N})(?: nvmlDev (?P<nvml>{_N}))?(?: busId (?P<bus>[0-9a-fA-F]{{1,16}}))?"
    r"(?P<rest>.{0,200}?) - Init (?P<state>START|COMPLETE)"
)
_COMM_ID = re.compile(r"commId (?P<id>0x[0-9a-fA-F]{1,16})")
_CHANNELS = re.compile(rf"(?P<n>{_N}) (?P<what>coll|collnet|nvls|p2p) channels(?P<per> per peer)?")
_PATTERN = re.compile(
    rf"^Pattern (?P<pattern>{_N}), crossNic (?P<cross>{_N}), nChannels (?P<n>{_N}), "
    r"bw (?P<intra>[\d.]{1,20})/(?P<inter>[\d.]{1,20}), type (?P<ti>\w{1,8})/(?P<te>\w{1,8})"
)
_NVLS_SUPPORT = re.compile(
    rf"NVLS multicast support is (?P<not>not )?available on dev (?P<dev>{_N})"
)
_NET_USING = re.compile(r"^NET/(?P<net>[\w .-]{1,40}?) ?: Using (?P<what>.{1,500})$")
_NET_NONE = re.compile(r"^NET/(?P<net>\w{1,40}) ?: No device found")
_NETWORK = re.compile(r"^Using network (?P<net>\S.{0,60})$")
_GDR = re.compile(
    rf"GPU Direct RDMA (?P<state>Enabled|Disabled) for GPU (?P<gpu>{_N}) / HCA (?P<hca>\w{{1,20}})"
    rf"(?: \(distance (?P<dist>{_N}) [<>]=? (?P<level>{_N})\))?"
)
_RINGS_CONNECTED = re.compile(
    r"^Connected all rings(?:, use ring PXN (?P<pxn>\d) GDR (?P<gdr>\d))?"
)
_P2P_DISABLED = re.compile(rf"P2P is disabled between connected GPUs (?P<a>{_N}) and (?P<b>{_N})")
_ENV_SET = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]{1,64}) set by environment to (?P<value>.{0,200})$")
_AFFINITY = re.compile(
    rf"^Setting affinity for GPU (?P<gpu>{_N}) to (?P<mask>[0-9a-fA-F,]{{1,600}})"
)

# Transport labels from best to worst, for a row's `transport` (DESIGN.md, "Result record").
ORDER = ("NVLS", "P2P/CUMEM", "P2P/IPC", "P2P/direct pointer", "P2P", "SHM", "CollNet",
         "NET/IB/GDRDMA", "NET/IB", "NET/Socket", "NET")  # fmt: skip
MAX_WARNINGS = 20


def via_label(via: str) -> tuple[str, str, bool]:
    """("P2P/CUMEM", "P2P", gdr) from what follows ``via`` (``P2P/CUMEM/read``,
    ``SHM/direct/direct``, ``NET/IB/0/GDRDMA``, ``NET/IBext_v8/3``, ``COLLNET/...``)."""
    parts = [p for p in via.strip().split("/") if p]
    head = parts[0].upper() if parts else "?"
    if head == "P2P":
        sub = parts[1] if len(parts) > 1 else ""
        for known in ("CUMEM", "IPC", "direct pointer"):
            if sub.lower() == known.lower():
                return f"P2P/{known}", "P2P", False
        return "P2P", "P2P", False
    if head == "SHM":
        return "SHM", "SHM", False
    if head == "COLLNET":
        return "CollNet", "CollNet", "GDRDMA" in parts
    if head == "NET":
        name = parts[1] if len(parts) > 1 else ""
        gdr = any(p.upper() == "GDRDMA" for p in parts[2:])
        if name.upper().startswith("IB"):  # IB, IBext_v8 (the SHARP plugin's IB)
            return ("NET/IB/GDRDMA" if gdr else "NET/IB"), "NET", gdr
        if name.lower() == "socket":
            return "NET/Socket", "NET", False
        return (f"NET/{name}/GDRDMA" if gdr else f"NET/{name}") if name else "NET", "NET", gdr
    return via.strip()[:40], head, False


def _rank(text: str) -> int:
    return int(text)


def dev_name(dev: str | None) -> str | None:
    """The GPU a ``[dev]`` after a rank names: NCCL >= 2.12 prints the NVML index (``0``,
    -> ``GPU0``); older versions the PCI bus id as NCCL packs it (``1b000`` ->
    ``0000:1b:00.0``)."""
    if dev is None or dev == "":
        return None
    text = dev.lower().removeprefix("0x")
    if text.isdigit() and int(text) < 64:
        return f"GPU{int(text)}"
    try:
        value = int(text, 16)
    except ValueError:
        return None
    packed = f"{value:09x}"
    if len(packed) > 9:
        return None
    return f"{packed[0:4]}:{packed[4:6]}:{packed[6:8]}.{packed[8]}"


@dataclass
class Link:
    """One connection NCCL made: a channel from rank ``src`` to rank ``dst`` over a transport."""

    host: str | None  # the host of the process that logged it
    pid: int | None
    channel: int
    src: int
    dst: int
    src_gpu: str | None
    dst_gpu: str | None
    label: str  # P2P/CUMEM, SHM, NET/IB/GDRDMA, ...
    kind: str  # P2P, SHM, NET, CollNet
    via: str  # what NCCL printed after "via"
    direction: str | None = None  # send / receive (network connections)


@dataclass
class Communicator:
    """One communicator as the processes that logged it saw it (merged by commId)."""

    key: str
    comm_id: str | None = None
    ptr: str | None = None  # the communicator's address in the process that logged it
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, int] = field(default_factory=dict)  # coll, collnet, nvls, p2p, p2p_per_peer
    rings: dict[int, list[int]] = field(default_factory=dict)  # channel -> ranks in ring order
    ring_links: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)
    trees: dict[int, str] = field(default_factory=dict)  # rank -> "[0] 1/-1/-1->0->-1 ..."
    patterns: list[dict[str, Any]] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    complete: bool = False
    collnet: bool = False
    nvls_heads: bool = False  # "NVLS Head 0: 0 8": NVLS connected between nodes

    def labels(self) -> list[str]:
        return sort_labels({link.label for link in self.links} | self.extra_labels())

    def has_content(self) -> bool:
        return bool(
            self.links or self.channels or self.nranks or self.rings or self.ring_links
            or self.trees or self.patterns or self.collnet or self.nvls_heads
        )  # fmt: skip

    def extra_labels(self) -> set[str]:
        out = set()
        if self.channels.get("nvls", 0) > 0 or self.nvls_heads:
            out.add("NVLS")
        if self.collnet:
            out.add("CollNet")
        return out


@dataclass
class NcclInfo:
    """Everything read from one or more processes' INFO lines."""

    version: str | None = None
    cuda: str | None = None
    communicators: list[Communicator] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)  # "Using network IB"
    net_devices: dict[str, str] = field(default_factory=dict)  # "IB" -> "[0]mlx5_0:1/IB ..."
    no_device: list[str] = field(default_factory=list)  # "NET/IB : No device found"
    nvls_support: dict[str, bool] = field(default_factory=dict)  # "host/dev" -> available
    gdr: list[dict[str, Any]] = field(default_factory=list)
    ring_gdr: bool | None = None  # "Connected all rings, use ring PXN 0 GDR 1"
    affinity: dict[str, str] = field(default_factory=dict)  # "host/GPU0" -> cpu mask
    env: dict[str, str] = field(default_factory=dict)  # "NCCL_X set by environment to Y"
    p2p_disabled: list[tuple[int, int]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lines: int = 0  # lines read
    nccl_lines: int = 0  # lines that were NCCL's
    damaged: int = 0  # NCCL lines that looked like a known kind but could not be read

    @property
    def links(self) -> list[Link]:
        return [link for c in self.communicators for link in c.links]

    def labels(self) -> list[str]:
        """Every transport used, best first (``P2P/CUMEM``, ``NET/IB/GDRDMA``, ...)."""
        return sort_labels({x for c in self.communicators for x in c.labels()})

    def label(self) -> str | None:
        """The row's ``transport``: the transports used, joined by ``+``; None when no
        connection was logged."""
        labels = self.labels()
        return "+".join(labels) if labels else None

    def coll_channels(self) -> int | None:
        counts = [c.channels["coll"] for c in self.communicators if "coll" in c.channels]
        return max(counts) if counts else None

    def empty(self) -> bool:
        return not (self.communicators or self.version)


def sort_labels(labels: set[str]) -> list[str]:
    def key(label: str) -> tuple[int, str]:
        return (ORDER.index(label) if label in ORDER else len(ORDER), label)

    return sorted(labels, key=key)


@dataclass
class _Proc:
    """One process's view while reading: its communicators and which one is current."""

    comms: list[Communicator] = field(default_factory=list)
    by_ptr: dict[str, Communicator] = field(default_factory=dict)
    current: dict[str, Communicator] = field(default_factory=dict)  # tid -> comm
    last: Communicator | None = None


class _Reader:
    def __init__(self, info: NcclInfo) -> None:
        self.info = info
        self.procs: dict[tuple[str, str], _Proc] = {}

    def proc(self, host: str, pid: str) -> _Proc:
        return self.procs.setdefault((host, pid), _Proc())

    def comm_for(self, host: str, pid: str, tid: str, ptr: str | None = None) -> Communicator:
        proc = self.proc(host, pid)
        if ptr is not None and ptr != "(nil)":
            comm = proc.by_ptr.get(ptr)
            if comm is None:
                # Lines of this thread before its first "comm 0x..." line belong to it.
                comm = proc.current.get(tid)
                if comm is None or comm.ptr is not None:
                    comm = Communicator(key=f"{host}:{pid}:{ptr}")
                    proc.comms.append(comm)
                comm.ptr = ptr
                proc.by_ptr[ptr] = comm
            proc.current[tid] = comm
            proc.last = comm
            return comm
        comm = proc.current.get(tid) or proc.last
        if comm is None:
            comm = Communicator(key=f"{host}:{pid}:?")
            proc.comms.append(comm)
            proc.last = comm
        proc.current.setdefault(tid, comm)
        return comm

    def line(self, raw: str) -> None:
        info = self.info
        info.lines += 1
        text = strip_ansi(raw).replace("\x00", "").rstrip("\r\n")
        version = _VERSION.search(text)
        if version and info.version is None:
            info.version = version.group("v") + (version.group("suffix") or "")
            info.cuda = version.group("cuda")
        m = _PREFIX.search(text)
        if m is not None:
            host, pid, tid, level = (
                m.group("host"),
                m.group("pid"),
                m.group("tid"),
                m.group("level"),
            )
            msg = text[m.end() :].strip()
        else:
            lm = _LEVEL.search(text)
            if lm is None:
                if version:
                    info.nccl_lines += 1
                return
            host, pid, tid, level = "?", "?", "?", lm.group("level")
            msg = text[lm.end() :].strip()
        info.nccl_lines += 1
        if level == "WARN":
            if len(info.warnings) < MAX_WARNINGS:
                info.warnings.append(msg[:300])
            return
        self.message(host, pid, tid, msg)

    def message(self, host: str, pid: str, tid: str, msg: str) -> None:
        info = self.info
        hostname = None if host == "?" else host
        pid_int = int(pid) if pid.isdigit() else None
        if "via " in msg and (msg.startswith(("Channel", "Ring"))):
            m = _CONNECT.match(msg)
            if m is None:
                self.info.damaged += 1
                return
            label, kind, _gdr = via_label(m.group("via"))
            comm = self.comm_for(host, pid, tid)
            comm.links.append(
                Link(
                    host=hostname,
                    pid=pid_int,
                    channel=int(m.group("channel")),
                    src=_rank(m.group("src")),
                    dst=_rank(m.group("dst")),
                    src_gpu=dev_name(m.group("sdev")),
                    dst_gpu=dev_name(m.group("ddev")),
                    label=label,
                    kind=kind,
                    via=m.group("via").strip()[:80],
                    direction=m.group("dir"),
                )
            )
            return
        if msg.startswith("CollNet") and "via" in msg:
            if _COLLNET.match(msg) is None:
                info.damaged += 1
                return
            self.comm_for(host, pid, tid).collnet = True
            return
        if " - Init " in msg:
            m = _INIT.search(msg)
            if m is None:
                info.damaged += 1
                return
            comm = self.comm_for(host, pid, tid, m.group("ptr"))
            comm.nranks = int(m.group("nranks"))
            rank = int(m.group("rank"))
            comm.ranks[rank] = {
                "host": hostname,
                "pid": pid_int,
                "cuda_dev": int(m.group("cuda")),
                "nvml_dev": int(m.group("nvml")) if m.group("nvml") else None,
                "bus_id": dev_name(m.group("bus")) if m.group("bus") else None,
            }
            cid = _COMM_ID.search(m.group("rest") or "")
            if cid:
                comm.comm_id = cid.group("id").lower()
            if m.group("state") == "COMPLETE":
                comm.complete = True
            return
        if msg.startswith("comm ") and " nRanks " in msg:
            m = _COMM.match(msg)
            if m is None:
                info.damaged += 1
                return
            comm = self.comm_for(host, pid, tid, m.group("ptr"))
            comm.nranks = int(m.group("nranks"))
            comm.nnodes = int(m.group("nnodes"))
            comm.local_ranks = int(m.group("local"))
            comm.ranks.setdefault(int(m.group("rank")), {"host": hostname, "pid": pid_int})
            return
        if " channels" in msg and "coll channels" in msg:
            found = list(_CHANNELS.finditer(msg))
            if not found:
                info.damaged += 1
                return
            comm = self.comm_for(host, pid, tid)
            for c in found:
                key = c.group("what") + ("_per_peer" if c.group("per") else "")
                comm.channels[key] = int(c.group("n"))
            return
        if msg.startswith("Channel ") and "->" not in msg:
            m = _RING_ORDER.match(msg)
            if m is None:
                return  # "Channel 00/0 : ..." of another kind: nothing to read
            ranks = [int(x) for x in m.group("ranks").split()]
            self.comm_for(host, pid, tid).rings[int(m.group("channel"))] = ranks
            return
        if msg.startswith("Ring ") and "via" not in msg:
            m = _RING_LINK.match(msg)
            if m is None:
                info.damaged += 1
                return
            comm = self.comm_for(host, pid, tid)
            links = comm.ring_links.setdefault(int(m.group("channel")), {})
            links[int(m.group("rank"))] = (int(m.group("prev")), int(m.group("next")))
            return
        if msg.startswith("Trees"):
            m = _TREES.match(msg)
            if m is None:
                info.damaged += 1
                return
            comm = self.comm_for(host, pid, tid)
            tree_key = next(iter(comm.ranks)) if len(comm.ranks) == 1 else len(comm.trees)
            comm.trees[tree_key] = m.group("trees").strip()
            return
        if msg.startswith("NVLS Head"):
            self.comm_for(host, pid, tid).nvls_heads = True
            return
        if msg.startswith("Pattern "):
            m = _PATTERN.match(msg)
            if m is None:
                info.damaged += 1
                return
            self.comm_for(host, pid, tid).patterns.append(
                {
                    "pattern": int(m.group("pattern")),
                    "cross_nic": int(m.group("cross")),
                    "channels": int(m.group("n")),
                    "bw_intra": _float(m.group("intra")),
                    "bw_inter": _float(m.group("inter")),
                    "type": f"{m.group('ti')}/{m.group('te')}",
                }
            )
            return
        self.facts(hostname, msg)

    def facts(self, host: str | None, msg: str) -> None:
        """Lines about the machine rather than one communicator."""
        info = self.info
        where = host or "?"
        if (m := _NVLS_SUPPORT.search(msg)) is not None:
            info.nvls_support[f"{where}/GPU{int(m.group('dev'))}"] = not m.group("not")
        elif (m := _NET_NONE.match(msg)) is not None:
            text = f"NET/{m.group('net')}: no device found"
            if text not in info.no_device:
                info.no_device.append(text)
        elif (m := _NET_USING.match(msg)) is not None:
            info.net_devices.setdefault(m.group("net").strip(), m.group("what").strip()[:300])
        elif (m := _NETWORK.match(msg)) is not None:
            net = m.group("net").strip()
            if net not in info.networks:
                info.networks.append(net)
        elif (m := _GDR.search(msg)) is not None:
            entry = {
                "host": host,
                "gpu": f"GPU{int(m.group('gpu'))}",
                "hca": m.group("hca"),
                "enabled": m.group("state") == "Enabled",
                "distance": int(m.group("dist")) if m.group("dist") else None,
                "level": int(m.group("level")) if m.group("level") else None,
            }
            if entry not in info.gdr and len(info.gdr) < 256:
                info.gdr.append(entry)
        elif (m := _RINGS_CONNECTED.match(msg)) is not None:
            if m.group("gdr") is not None:
                info.ring_gdr = bool(info.ring_gdr) or m.group("gdr") == "1"
        elif (m := _P2P_DISABLED.search(msg)) is not None:
            pair = (int(m.group("a")), int(m.group("b")))
            if pair not in info.p2p_disabled:
                info.p2p_disabled.append(pair)
        elif (m := _ENV_SET.match(msg)) is not None:
            info.env.setdefault(m.group("name"), m.group("value").strip())
        elif (m := _AFFINITY.match(msg)) is not None:
            info.affinity.setdefault(f"{where}/GPU{int(m.group('gpu'))}", m.group("mask"))

    def finish(self) -> None:
        merged: dict[str, Communicator] = {}
        for proc in self.procs.values():
            seen: dict[int | None, int] = {}
            for comm in proc.comms:
                if not comm.has_content():
                    continue
                if comm.comm_id:
                    key = comm.comm_id
                else:
                    # No commId (older NCCL): the n-th communicator of a size in each process.
                    n = seen.get(comm.nranks, 0)
                    seen[comm.nranks] = n + 1
                    key = f"n{comm.nranks}#{n}"
                target = merged.get(key)
                if target is None:
                    # A copy: the reader's own stay as read, so it can go on (and merge again).
                    merged[key] = copy.deepcopy(comm)
                    merged[key].key = key
                else:
                    _merge(target, comm)
        self.info.communicators = list(merged.values())


def _merge(into: Communicator, other: Communicator) -> None:
    into.comm_id = into.comm_id or other.comm_id
    into.nranks = into.nranks or other.nranks
    into.nnodes = into.nnodes or other.nnodes
    into.local_ranks = into.local_ranks or other.local_ranks
    for rank, facts in other.ranks.items():
        into.ranks.setdefault(rank, {}).update({k: v for k, v in facts.items() if v is not None})
    for key, n in other.channels.items():
        into.channels[key] = max(into.channels.get(key, 0), n)
    for ch, ranks in other.rings.items():
        into.rings.setdefault(ch, ranks)
    for ch, links in other.ring_links.items():
        into.ring_links.setdefault(ch, {}).update(links)
    for rank, tree in other.trees.items():
        into.trees.setdefault(rank, tree)
    into.patterns.extend(p for p in other.patterns if p not in into.patterns)
    into.links.extend(other.links)
    into.complete = into.complete or other.complete
    into.collnet = into.collnet or other.collnet
    into.nvls_heads = into.nvls_heads or other.nvls_heads


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_nccl_info(text: str) -> NcclInfo:
    """Everything NCCL's INFO lines in ``text`` say; empty (never an error) when none."""
    return parse_nccl_texts([text])


class NcclLineReader:
    """NCCL's lines fed one at a time (an importer streaming a log): :meth:`info` says what
    they hold so far, as often as asked.

    ``reader = NcclLineReader(); for line in lines: reader.feed(line)``; then
    ``reader.info()`` (or ``summary(reader.info())`` for a row's ``extra.nccl``)."""

    def __init__(self) -> None:
        self._info = NcclInfo()
        self._reader = _Reader(self._info)

    def feed(self, line: str) -> None:
        self._reader.line(line)

    @property
    def nccl_lines(self) -> int:
        return self._info.nccl_lines

    def info(self) -> NcclInfo:
        self._reader.finish()
        return copy.copy(self._info)


def parse_nccl_texts(texts: list[str]) -> NcclInfo:
    """One :class:`NcclInfo` of several processes' logs (the files of one run), with each
    communicator merged across the processes that logged it."""
    info = NcclInfo()
    reader = _Reader(info)
    for text in texts:
        for raw in text.splitlines():
            reader.line(raw)
    reader.finish()
    return info
