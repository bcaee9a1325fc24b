"""``lspci -vvv`` (link capability against link status) and ``lspci -tv`` (the tree).

Speeds map to generations 2.5/5/8/16/32/64 GT/s = Gen1..Gen6. Bus ids may carry a PCI
domain (``0000:01:00.0``, ``lspci -D``) or not (``01:00.0``); matching treats a missing
domain as any domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulane.errors import ParseError
from gpulane.textio import clean_lines, first_content_line, guess_kind, wrong_kind
from gpulane.topology.model import PcieLink, normalize_bus_id
from gpulane.units import pcie_gen_from_gts

_DEVICE_RE = re.compile(
    r"^((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) ([^:]+?): (.*)$"
)
_LNKCAP_RE = re.compile(r"^\s+LnkCap:\s+(.*)$")
_LNKSTA_RE = re.compile(r"^\s+LnkSta:\s+(.*)$")
_SPEED_RE = re.compile(r"Speed ([0-9.]+)GT/s|Speed (unknown)")
_WIDTH_RE = re.compile(r"Width x(\d{1,2})")
_CLEAN_NAME_RE = re.compile(r"\s*\((?:rev [0-9a-fA-F]+|prog-if [^)]*\])\)")
# a device line cut inside a parenthesis (its "(rev ..)" or "(prog-if ..)"): no name part
_CUT_SUFFIX_RE = re.compile(r"\s*\([^)]*$")
_NUMA_RE = re.compile(r"^\s+NUMA node:\s*(-?\d+)\s*$")
_EXPRESS_RE = re.compile(r"Capabilities: \[[0-9a-f]+\] Express \(v\d\) (.*?)(?:, MSI.*)?$")


@dataclass
class LspciDevice:
    bus_id: str  # normalised, with domain when printed
    cls: str  # "VGA compatible controller", "PCI bridge", ...
    name: str
    line: int
    port_type: str | None = None  # "Endpoint", "Root Port (Slot+)", "Upstream Port", ...
    numa: int | None = None
    cap_gts: float | None = None
    cap_width: int | None = None
    sta_gts: float | None = None
    sta_width: int | None = None
    speed_downgraded: bool = False
    width_downgraded: bool = False
    driver: str | None = None

    @property
    def is_nvidia_gpu(self) -> bool:
        return "NVIDIA" in self.name and (
            "VGA" in self.cls or "3D controller" in self.cls or "Display" in self.cls
        )

    @property
    def is_bridge(self) -> bool:
        return "bridge" in self.cls.lower()

    def link(self) -> PcieLink | None:
        if self.cap_gts is None and self.sta_gts is None and self.cap_width is None:
            return None
        link = PcieLink(
            gen=pcie_gen_from_gts(self.sta_gts) if self.sta_gts else None,
            gen_max=pcie_gen_from_gts(self.cap_gts) if self.cap_gts else None,
            width=self.sta_width or None,
            width_max=self.cap_width,
            bus_id=self.bus_id,
            device=self.name,
            source="lspci",
        )
        down = link.compute_downtrained()
        if self.speed_downgraded or self.width_downgraded:
            down = True
        link.downtrained = down
        return link


def _speed(text: str, source: str, line: int) -> tuple[float | None, int | None]:
    sm = _SPEED_RE.search(text)
    wm = _WIDTH_RE.search(text)
    if not sm or not wm:
        raise ParseError(
            f"link line without 'Speed ..GT/s' and 'Width x..': {text[:60]!r}", source, line
        )
    gts = None if sm.group(2) else float(sm.group(1))
    if gts is not None and pcie_gen_from_gts(gts) is None:
        raise ParseError(
            f"link speed {gts}GT/s is not a PCIe rate (2.5/5/8/16/32/64)", source, line
        )
    return gts, int(wm.group(1))


def parse_lspci_verbose(text: str, source: str = "<text>") -> list[LspciDevice]:
    """Devices of ``lspci -v``/``-vv``/``-vvv`` output with their link capability/status."""
    lines = clean_lines(text, source)
    start = first_content_line(lines)
    if start == len(lines):
        raise ParseError("empty: no lspci output", source, 1)
    other = wrong_kind("lspci", lines, source)
    if other is not None:
        raise other
    devices: list[LspciDevice] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        m = _DEVICE_RE.match(line)
        if m:
            bus = normalize_bus_id(m.group(1))
            if bus is None:
                raise ParseError(f"bad PCI address {m.group(1)!r}", source, number)
            if bus in seen:
                raise ParseError(f"device {bus} listed twice", source, number)
            seen.add(bus)
            raw = m.group(3)
            # the name is what comes before its "(rev ..)"/"(prog-if ..)" suffixes: a cut
            # into them, or anything between them, is no part of it
            first = _CLEAN_NAME_RE.search(raw)
            name = _CUT_SUFFIX_RE.sub("", raw[: first.start()] if first else raw).strip()
            devices.append(LspciDevice(bus_id=bus, cls=m.group(2).strip(), name=name, line=number))
            continue
        if not line[0].isspace():
            if not devices:
                kind = guess_kind(lines)
                if kind and kind != "lspci":
                    raise ParseError(
                        f"this looks like {kind} output, not lspci -vvv", source, number
                    )
                raise ParseError(
                    f"expected an lspci device line like '01:00.0 VGA compatible controller: ...', "
                    f"found {line.strip()[:40]!r}",
                    source,
                    number,
                )
            raise ParseError(
                f"unexpected unindented line in lspci output: {line.strip()[:40]!r}", source, number
            )
        if not devices:
            raise ParseError("indented text before the first device line", source, number)
        dev = devices[-1]
        if (cm := _LNKCAP_RE.match(line)) is not None:
            if dev.cap_gts is not None or dev.cap_width is not None:
                raise ParseError(f"two LnkCap lines for {dev.bus_id}", source, number)
            dev.cap_gts, dev.cap_width = _speed(cm.group(1), source, number)
        elif (sm := _LNKSTA_RE.match(line)) is not None:
            if dev.sta_gts is not None or dev.sta_width is not None:
                raise ParseError(f"two LnkSta lines for {dev.bus_id}", source, number)
            body = sm.group(1)
            dev.sta_gts, dev.sta_width = _speed(body, source, number)
            head, _, tail = body.partition("Width")
            dev.speed_downgraded = "downgraded" in head
            dev.width_downgraded = "downgraded" in tail.split(",")[0]
        elif (nm := _NUMA_RE.match(line)) is not None:
            dev.numa = int(nm.group(1)) if int(nm.group(1)) >= 0 else None
        elif (em := _EXPRESS_RE.search(line)) is not None:
            dev.port_type = em.group(1).strip()
        elif line.strip().startswith("Kernel driver in use:"):
            dev.driver = line.split(":", 1)[1].strip()
    if not devices:
        raise ParseError("no lspci device lines", source, start + 1)
    return devices


# --- lspci -tv -------------------------------------------------------------------------

_ROOT_RE = re.compile(r"\[([0-9a-fA-F]{4}):([0-9a-fA-F]{2})\]")
_NODE_RE = re.compile(r"([0-9a-fA-F]{2})\.([0-7])(?:-\[([0-9a-fA-F]{2})(?:-([0-9a-fA-F]{2}))?\])?")


@dataclass
class TreeNode:
    bus_id: str  # 0000:bb:dd.f (domain 0000 unless the tree printed another)
    name: str | None
    parent: str | None  # bus id of the bridge above, None for a device on a root bus
    secondary: int | None = None  # the bus behind this bridge
    line: int = 0


@dataclass
class LspciTree:
    source: str
    nodes: dict[str, TreeNode] = field(default_factory=dict)

    def find(self, bus_id: str) -> TreeNode | None:
        n = normalize_bus_id(bus_id)
        if n is None:
            return None
        if n in self.nodes:
            return self.nodes[n]
        if len(n) == 7:
            hits = [v for k, v in self.nodes.items() if k.endswith(n)]
            return hits[0] if len(hits) == 1 else None
        return None

    def chain(self, bus_id: str) -> list[TreeNode]:
        """The bridges from the device up to its root port, nearest first."""
        node = self.find(bus_id)
        out: list[TreeNode] = []
        while node is not None and node.parent is not None:
            node = self.nodes.get(node.parent)
            if node is None or node in out:
                break
            out.append(node)
        return out

    def gpus(self) -> list[TreeNode]:
        """The NVIDIA GPUs of the tree, in PCI bus order (the order nvidia-smi numbers
        them). The tree prints names, not device classes: an NVIDIA function counts as a
        GPU unless its name says audio, USB, serial, bridge, switch or controller (an
        NVSwitch that pci.ids does not name, ``Device 22a3``, would count too). Only
        function 0 counts: a GPU's other functions (audio .1, USB .2, serial .3) are never
        GPUs, also where a cut name (``AD102 High Defin``) no longer says so."""
        return sorted(
            (
                n
                for n in self.nodes.values()
                if n.name and n.bus_id.endswith(".0") and TREE_GPU_RE.search(n.name)
            ),
            key=lambda n: n.bus_id,
        )


TREE_GPU_RE = re.compile(
    r"NVIDIA Corporation (?!.*(?:Audio|USB|Serial|Bridge|Switch|Controller))", re.IGNORECASE
)


def parse_lspci_tree(text: str, source: str = "<text>") -> LspciTree:
    """Parse ``lspci -tv`` (or ``-t``): each device with the bridge it sits behind.

    The tree is drawn by columns: the children of a bus hang off one column, where the
    first child's ``+-`` (or the ``----`` of an only child) is drawn, and later children
    start with ``+-`` or ``\\-`` in that same column.
    """
    lines = clean_lines(text, source)
    start = first_content_line(lines)
    if start == len(lines):
        raise ParseError("empty: no lspci -tv output", source, 1)
    tree = LspciTree(source=source)
    # Branch column -> (bridge bus id or None for a root bus, bus number, domain).
    open_at: dict[int, _Bus] = {}
    seen_root = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        rm = _ROOT_RE.search(line)
        if (
            rm
            and line[: rm.start()].strip(" |+-\\") == ""
            and line[: rm.start()].strip(" |") in ("", "-+-", "+-", "\\-", "-")
        ):
            domain = (rm.group(1) or "0000").lower()
            seen_root = True
            open_at.clear()
            _walk(
                line, rm.end(), (None, int(rm.group(2), 16), domain), open_at, tree, source, number
            )
            continue
        if not seen_root:
            kind = guess_kind(lines)
            if kind and kind != "lspci -tv":
                raise ParseError(f"this looks like {kind} output, not lspci -tv", source, number)
            raise ParseError(
                "expected an lspci -tv root line like '-[0000:00]-+-00.0 ...'", source, number
            )
        stripped = line.lstrip(" |")
        col = len(line) - len(stripped)
        if not stripped.startswith(("+-", "\\-")):
            raise ParseError(f"not an lspci -tv tree line: {line.strip()[:40]!r}", source, number)
        if col not in open_at:
            raise ParseError(f"tree branch at column {col + 1} has no bus above it", source, number)
        for k in [k for k in open_at if k > col]:
            del open_at[k]
        _walk(line, col + 2, open_at[col], open_at, tree, source, number)
    if not tree.nodes:
        raise ParseError("no devices in the lspci -tv tree", source, start + 1)
    return tree


_Bus = tuple[str | None, int, str]


def _walk(
    line: str,
    pos: int,
    bus: _Bus,
    open_at: dict[int, _Bus],
    tree: LspciTree,
    source: str,
    number: int,
) -> None:
    """Read a chain like ``-+-01.1-[01]--+-00.0  NVIDIA ...`` from ``pos`` on.

    ``pos`` is just after the parent's ``]`` (or after a branch's ``+-``).
    """
    i = pos
    while True:
        # The connector: dashes, maybe one branch character, dashes.
        j = i
        branch = None
        while j < len(line) and line[j] in "-+\\":
            if line[j] in "+\\":
                branch = j
            j += 1
        if j >= len(line):
            if branch is not None:
                raise ParseError("tree line ends at a branch", source, number)
            return  # an empty bridge: "-[73]--"
        col = branch if branch is not None else max(j - 2, 0)
        open_at[col] = bus
        m = _NODE_RE.match(line, j)
        if not m:
            raise ParseError(
                f"cannot read the tree at column {j + 1}: {line[j : j + 20]!r}", source, number
            )
        parent_id, bus_no, domain = bus
        dev, fn, sec_lo = m.group(1), m.group(2), m.group(3)
        bus_id = f"{domain}:{bus_no:02x}:{dev.lower()}.{fn}"
        if bus_id in tree.nodes:
            raise ParseError(f"device {bus_id} appears twice in the tree", source, number)
        if sec_lo is None:
            name = line[m.end() :].strip() or None
            tree.nodes[bus_id] = TreeNode(bus_id, name, parent_id, None, number)
            return
        secondary = int(sec_lo, 16)
        tree.nodes[bus_id] = TreeNode(bus_id, None, parent_id, secondary, number)
        bus = (bus_id, secondary, domain)
        i = m.end()
