"""The kernel's side: loaded modules (``/proc/modules`` or ``lsmod``) and the NVIDIA
driver's Xid reports in the kernel log (``dmesg``, ``journalctl -k``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\): "
    r"(?P<code>\d{1,5})\b,?\s?(?P<rest>.{0,200})"
)
# Xids that mean the hardware or its links (NVIDIA's Xid catalogue); others are mostly
# an application's own faults (13, 31, 43, 45).
HARDWARE_XIDS = {
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}


@dataclass
class Xid:
    bus_id: str
    code: int
    text: str  # the line as logged (from "NVRM:")
    line: int


def parse_modules(text: str) -> set[str]:
    """Module names from ``/proc/modules`` or ``lsmod`` (its header line skipped)."""
    out = set()
    for line in text.splitlines():
        words = line.split()
        if words and words[0] != "Module" and re.fullmatch(r"[A-Za-z0-9_]{1,64}", words[0]):
            out.add(words[0])
    return out


_FALLEN_GPU = re.compile(
    r"NVRM: The NVIDIA GPU (?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
)


def parse_xids(text: str) -> list[Xid]:
    """Every ``NVRM: Xid (PCI:bus): code, ...`` line; newer drivers that say a GPU "fell off
    the bus" over several lines without an Xid count as Xid 79."""
    out = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        m = _XID.search(line)
        if m is not None:
            text_ = line[m.start() :].strip()[:300]
            out.append(Xid(m.group("bus").lower(), int(m.group("code")), text_, number))
            continue
        g = _FALLEN_GPU.search(line)
        if g is not None and any("fallen off the bus" in x for x in lines[number - 1 : number + 3]):
            text_ = f"{line[g.start() :].strip()} ... fallen off the bus"
            out.append(Xid(g.group("bus").lower(), 79, text_, number))
    return out
