"""PCIe links from sysfs, walking up from a device through switches and bridges.

A x16 card behind an x4 slot or riser trains to x4; the slot's own limit shows only
on the port upstream (its ``max_link_width``), so every bridge up to the root port is
read. ``root`` lets tests point at a fake tree.

Also reads a captured listing (``--sysfs-file``) in the form the h200x2 fixture has::

    /sys/bus/pci/devices/0000:00:06.0 0x10de 0x030200 32.0 GT/s PCIe x16 max: 32.0 GT/s PCIe x16 numa=-1 -> /sys/devices/pci0000:00/0000:00:06.0
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpulane.errors import ParseError
from gpulane.textio import clean_lines, first_content_line, guess_kind
from gpulane.topology.model import PcieLink, normalize_bus_id
from gpulane.units import pcie_gen_from_gts

_BDF_DIR = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_GTS_RE = re.compile(r"^\s*([0-9.]+)\s*GT/s")


@dataclass
class SysfsDevice:
    bus_id: str
    vendor: str | None = None
    cls: str | None = None
    numa: int | None = None
    link: PcieLink | None = None
    chain: list[str] = field(default_factory=list)  # bridges above, nearest first

    @property
    def is_bridge(self) -> bool:
        return bool(self.cls and self.cls.startswith("0x0604"))

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == "0x10de" and bool(self.cls) and str(self.cls).startswith("0x03")


def gts(text: str | None) -> float | None:
    """``32.0 GT/s PCIe`` -> 32.0; ``Unknown`` or empty -> None."""
    if not text:
        return None
    m = _GTS_RE.match(text)
    return float(m.group(1)) if m else None


def _width(text: str | None) -> int | None:
    if not text:
        return None
    t = text.strip().lstrip("x")
    return int(t) if t.isdigit() and int(t) > 0 else None


def make_link(
    bus_id: str,
    cur_speed: str | None,
    cur_width: str | None,
    max_speed: str | None,
    max_width: str | None,
) -> PcieLink | None:
    cs, ms = gts(cur_speed), gts(max_speed)
    link = PcieLink(
        gen=pcie_gen_from_gts(cs) if cs else None,
        gen_max=pcie_gen_from_gts(ms) if ms else None,
        width=_width(cur_width),
        width_max=_width(max_width),
        bus_id=bus_id,
        source="sysfs",
    )
    if all(v is None for v in (link.gen, link.gen_max, link.width, link.width_max)):
        return None
    link.downtrained = link.compute_downtrained()
    return link


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def read_device(bus_id: str, root: str | os.PathLike[str] = "/sys") -> SysfsDevice | None:
    """One device's link and the bridges above it, from a live sysfs."""
    norm = normalize_bus_id(bus_id)
    if norm is None or len(norm) == 7:
        return None
    base = Path(root) / "bus" / "pci" / "devices" / norm
    if not base.exists():
        return None
    dev = _read_one(base, norm)
    real = base.resolve()
    chain = [p.name for p in real.parents if _BDF_DIR.match(p.name)]
    dev.chain = [c.lower() for c in chain]
    return dev


def _read_one(base: Path, bus_id: str) -> SysfsDevice:
    numa = _read(base / "numa_node")
    return SysfsDevice(
        bus_id=bus_id,
        vendor=_read(base / "vendor"),
        cls=_read(base / "class"),
        numa=int(numa) if numa and numa.lstrip("-").isdigit() and int(numa) >= 0 else None,
        link=make_link(
            bus_id,
            _read(base / "current_link_speed"),
            _read(base / "current_link_width"),
            _read(base / "max_link_speed"),
            _read(base / "max_link_width"),
        ),
    )


def upstream_links(bus_id: str, root: str | os.PathLike[str] = "/sys") -> list[PcieLink]:
    """Links of the bridges above a device, nearest first (live sysfs)."""
    dev = read_device(bus_id, root)
    if dev is None:
        return []
    out = []
    for b in dev.chain:
        up = _read_one(Path(root) / "bus" / "pci" / "devices" / b, b)
        if up.link is not None:
            up.link.device = "bridge"
            out.append(up.link)
    return out


def list_devices(root: str | os.PathLike[str] = "/sys") -> list[str]:
    base = Path(root) / "bus" / "pci" / "devices"
    try:
        return sorted(p.name for p in base.iterdir() if _BDF_DIR.match(p.name))
    except OSError:
        return []


def infiniband_devices(root: str | os.PathLike[str] = "/sys") -> dict[str, str | None]:
    """RDMA devices (``mlx5_0``) and the PCI function each sits on."""
    base = Path(root) / "class" / "infiniband"
    out: dict[str, str | None] = {}
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return out
    for e in entries:
        try:
            bdf = (e / "device").resolve().name
        except OSError:
            bdf = ""
        out[e.name] = bdf if _BDF_DIR.match(bdf) else None
    return out


# --- captured listing -------------------------------------------------------------------

_LISTING_RE = re.compile(
    r"^/sys/bus/pci/devices/(?P<bdf>\S+)\s+(?P<vendor>0x[0-9a-fA-F]{4})\s+(?P<cls>0x[0-9a-fA-F]{6})\s+"
    r"(?P<cur>.*?)\s*max:\s*(?P<max>.*?)\s*numa=(?P<numa>-?\d+)\s*->\s*(?P<real>\S+)$"
)
_SPEED_WIDTH_RE = re.compile(
    r"^(?:(?P<speed>[0-9.]+ GT/s(?: PCIe)?|Unknown)\s*)?(?:x(?P<width>\d*))?$"
)


def parse_sysfs_listing(text: str, source: str = "<text>") -> dict[str, SysfsDevice]:
    lines = clean_lines(text, source)
    start = first_content_line(lines)
    if start == len(lines):
        raise ParseError("empty: no sysfs listing", source, 1)
    out: dict[str, SysfsDevice] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        m = _LISTING_RE.match(line.strip())
        if not m:
            kind = guess_kind(lines)
            if kind and kind != "a sysfs listing":
                raise ParseError(
                    f"this looks like {kind} output, not a sysfs listing", source, number
                )
            raise ParseError(
                "expected '/sys/bus/pci/devices/BDF VENDOR CLASS SPEED xWIDTH max: SPEED "
                "xWIDTH numa=N -> PATH'",
                source,
                number,
            )
        bdf = normalize_bus_id(m["bdf"])
        if bdf is None or len(bdf) == 7:
            raise ParseError(f"bad PCI address {m['bdf']!r}", source, number)
        cur = _SPEED_WIDTH_RE.match(m["cur"].strip())
        mx = _SPEED_WIDTH_RE.match(m["max"].strip())
        if not cur or not mx:
            raise ParseError("cannot read the link speed and width", source, number)
        numa = int(m["numa"])
        dev = SysfsDevice(
            bus_id=bdf,
            vendor=m["vendor"].lower(),
            cls=m["cls"].lower(),
            numa=numa if numa >= 0 else None,
            link=make_link(bdf, cur["speed"], cur["width"], mx["speed"], mx["width"]),
        )
        parts = [p for p in m["real"].split("/") if _BDF_DIR.match(p)]
        if not parts or normalize_bus_id(parts[-1]) != bdf:
            raise ParseError(f"the path {m['real']!r} does not end at {bdf}", source, number)
        dev.chain = [p.lower() for p in reversed(parts[:-1])]
        out[bdf] = dev
    for dev in out.values():
        for b in dev.chain:
            if b in out and out[b].link is not None:
                link = out[b].link
                assert link is not None
                link.device = "bridge"
    return out
