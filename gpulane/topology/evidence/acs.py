"""Access Control Services from ``lspci -vvv``: which PCI bridges redirect peer traffic.

With ``ReqRedir+``/``CmpltRedir+`` (or ``UpstreamFwd+``/``EgressCtrl+``) set in ``ACSCtl``,
a switch port sends a peer-to-peer request up to the root complex instead of across to
the peer: GPU-to-GPU and GPU-to-NIC traffic takes the long way, through the IOMMU, and
NCCL's P2P either crawls or hangs. ``SrcValid+`` alone only checks requester ids.

The reader is tolerant: fragments (ACS lines before any device line, as a paste or a
``grep ACSCtl`` gives them), tabs or spaces, ``[...]`` elisions. Each bridge's bus range
(``Bus: primary=02, secondary=82, subordinate=82``) tells which devices sit below it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulane.textio import strip_ansi

_DEVICE = re.compile(
    r"^(?P<bus>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (?P<cls>[^:]{1,80}): (?P<name>.{0,300})$"
)
_BUSES = re.compile(
    r"Bus: primary=(?P<p>[0-9a-fA-F]{2}), secondary=(?P<s>[0-9a-fA-F]{2}), subordinate=(?P<u>[0-9a-fA-F]{2})"
)
_ACS = re.compile(r"^\s*ACS(?P<what>Cap|Ctl):\s*(?P<flags>.{0,200})$")
_FLAG = re.compile(r"(?P<name>[A-Za-z]{2,20})(?P<on>[+-])")
# The flags that send peer traffic up to the root complex (PCIe base spec, ACS control).
REDIRECTING = ("ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl")


@dataclass
class PciFunction:
    """One device of an lspci listing, with what the doctor needs of it."""

    bus_id: str | None  # 0000:02:08.0; None for ACS lines above any device line
    cls: str
    name: str
    line: int
    secondary: int | None = None  # bridges: the buses below them
    subordinate: int | None = None
    acs_ctl: dict[str, bool] = field(default_factory=dict)
    acs_cap: dict[str, bool] = field(default_factory=dict)
    acs_line: str | None = None  # the ACSCtl line as printed

    @property
    def is_bridge(self) -> bool:
        return "bridge" in self.cls.lower()

    @property
    def is_gpu(self) -> bool:
        return "NVIDIA" in self.name and any(
            k in self.cls for k in ("VGA", "3D controller", "Display")
        )

    @property
    def is_nic(self) -> bool:
        lowered = self.cls.lower()
        return "infiniband" in lowered or (
            ("ethernet" in lowered or "network" in lowered)
            and any(v in self.name for v in ("Mellanox", "NVIDIA", "Broadcom", "Intel"))
        )

    def redirects(self) -> list[str]:
        """The ACS control flags set that redirect peer-to-peer traffic."""
        return [f for f in REDIRECTING if self.acs_ctl.get(f)]

    def bus(self) -> tuple[str, int] | None:
        """(domain, bus number) of this device."""
        if self.bus_id is None:
            return None
        parts = self.bus_id.split(":")
        domain = parts[0] if len(parts) == 3 else "0000"
        return domain[-4:].lower(), int(parts[-2], 16)


def _bus_id(text: str) -> str:
    text = text.lower()
    if text.count(":") == 1:
        return f"0000:{text}"
    domain, rest = text.split(":", 1)
    return f"{domain[-4:]}:{rest}"


def parse_acs(text: str) -> list[PciFunction]:
    """Every device of an ``lspci -vvv`` text (or only its ACSCtl lines, or a fragment)
    with its bus range and ACS state. Never raises."""
    out: list[PciFunction] = []
    current: PciFunction | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = strip_ansi(raw).rstrip()
        if not line.strip():
            continue
        m = _DEVICE.match(line)
        if m is not None:
            current = PciFunction(
                _bus_id(m.group("bus")), m.group("cls").strip(), m.group("name").strip(), number
            )
            out.append(current)
            continue
        acs = _ACS.match(line)
        if acs is not None:
            flags = {
                f.group("name"): f.group("on") == "+" for f in _FLAG.finditer(acs.group("flags"))
            }
            if not flags:
                continue
            if current is None or (acs.group("what") == "Ctl" and current.acs_line is not None):
                # A grep of ACSCtl lines, or a fragment: a device of unknown address.
                current = PciFunction(None, "unknown", "device line not in the capture", number)
                out.append(current)
            if acs.group("what") == "Cap":
                current.acs_cap = flags
            else:
                current.acs_ctl = flags
                current.acs_line = line.strip()
            continue
        b = _BUSES.search(line)
        if b is not None and current is not None:
            current.secondary = int(b.group("s"), 16)
            current.subordinate = int(b.group("u"), 16)
    return out


def bridges_above(functions: list[PciFunction], bus_id: str) -> list[PciFunction]:
    """The bridges whose bus range holds ``bus_id``'s bus (same domain), nearest first."""
    target = PciFunction(_bus_id(bus_id), "", "", 0).bus()
    if target is None:
        return []
    domain, bus = target
    above = [
        f
        for f in functions
        if f.is_bridge
        and f.secondary is not None
        and f.subordinate is not None
        and f.bus() is not None
        and f.bus()[0] == domain  # type: ignore[index]
        and f.secondary <= bus <= f.subordinate
    ]
    return sorted(above, key=lambda f: (f.subordinate or 0) - (f.secondary or 0))


def bridges_between(functions: list[PciFunction], a: str, b: str) -> list[PciFunction]:
    """The bridges a peer transfer between devices ``a`` and ``b`` passes: those above one
    of them but not both (below their common switch or root)."""
    up_a = {f.bus_id: f for f in bridges_above(functions, a)}
    up_b = {f.bus_id: f for f in bridges_above(functions, b)}
    return [f for k, f in {**up_a, **up_b}.items() if (k in up_a) != (k in up_b)]
