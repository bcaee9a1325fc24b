"""The Topology model and its JSON form (DESIGN.md, "Topology JSON").

Fields an input does not carry stay None and come out as ``null``; nothing is guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_BDF_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$"
)


def normalize_bus_id(text: str) -> str | None:
    """``00000000:00:06.0`` / ``0000:00:06.0`` -> ``0000:00:06.0``; ``01:00.0`` -> ``01:00.0``.

    The domain is kept (as 4 hex digits) only when the text has one. None when the text
    is not a PCI address.
    """
    m = _BDF_RE.match(text.strip())
    if not m:
        return None
    bus, dev, fn = int(m["bus"], 16), int(m["dev"], 16), int(m["fn"])
    short = f"{bus:02x}:{dev:02x}.{fn}"
    if m["domain"] is None:
        return short
    return f"{int(m['domain'], 16):04x}:{short}"


def same_device(a: str | None, b: str | None) -> bool:
    """Bus ids that name the same function; a missing domain matches any domain."""
    if not a or not b:
        return False
    na, nb = normalize_bus_id(a), normalize_bus_id(b)
    if na is None or nb is None:
        return False
    if na == nb:
        return True
    return na[-7:] == nb[-7:] and (len(na) == 7 or len(nb) == 7)


@dataclass
class PcieLink:
    """One PCIe link: the current (trained) and maximum speed and width.

    ``gen``/``width`` are what the link runs at now; ``gen_max``/``width_max`` what the
    device (or port) is capable of.
    """

    gen: int | None = None
    gen_max: int | None = None
    width: int | None = None
    width_max: int | None = None
    downtrained: bool | None = None
    bus_id: str | None = None
    device: str | None = None  # a short description: "root port", "switch", the GPU
    source: str | None = None

    def compute_downtrained(self) -> bool | None:
        known = False
        down = False
        if self.gen is not None and self.gen_max is not None:
            known = True
            down |= self.gen < self.gen_max
        if self.width is not None and self.width_max is not None:
            known = True
            down |= self.width < self.width_max
        return down if known else None

    def describe(self) -> str:
        return f"{_gen_text(self.gen)} {_width_text(self.width)}"

    def describe_max(self) -> str:
        return f"{_gen_text(self.gen_max)} {_width_text(self.width_max)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "gen": self.gen,
            "gen_max": self.gen_max,
            "width": self.width,
            "width_max": self.width_max,
            "downtrained": self.downtrained,
        }


def _gen_text(gen: int | None) -> str:
    return f"Gen{gen}" if gen is not None else "Gen?"


def _width_text(width: int | None) -> str:
    return f"x{width}" if width is not None else "x?"


@dataclass
class Gpu:
    name: str  # "GPU0"
    index: int
    bus_id: str | None = None
    model: str | None = None
    cpu_affinity: str | None = None
    numa: int | None = None
    gpu_numa_id: int | None = None
    pcie: PcieLink | None = None
    # Links between the GPU and its root port, nearest first (the GPU's own link is pcie).
    upstream: list[PcieLink] = field(default_factory=list)
    nvlink_gbps: dict[int, float | None] = field(default_factory=dict)  # link -> GB/s

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "bus_id": self.bus_id,
            "model": self.model,
            "cpu_affinity": self.cpu_affinity,
            "numa": self.numa,
            "gpu_numa_id": self.gpu_numa_id,
            "pcie": self.pcie.to_json() if self.pcie else None,
            "pcie_upstream": [
                {"bus_id": link.bus_id, "device": link.device, **link.to_json()}
                for link in self.upstream
            ],
            "nvlinks": {str(k): v for k, v in sorted(self.nvlink_gbps.items())} or None,
        }


@dataclass
class Nic:
    name: str  # "NIC0"
    device: str | None = None  # "mlx5_0"
    bus_id: str | None = None
    pcie: PcieLink | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "device": self.device,
            "bus_id": self.bus_id,
            "pcie": self.pcie.to_json() if self.pcie else None,
        }


@dataclass
class Pair:
    a: str
    b: str
    label: str  # as nvidia-smi prints it, SOC read as SYS
    kind: str  # nvlink, pix, pxb, phb, node, sys
    nvlinks: int | None = None
    original: str | None = None  # the label as printed, when it differs (SOC)
    p2p: dict[str, str] = field(default_factory=dict)  # mode -> status (OK, NS, ...)
    expected_gbps: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "a": self.a,
            "b": self.b,
            "label": self.label,
            "kind": self.kind,
            "nvlinks": self.nvlinks,
        }
        if self.original is not None:
            out["original"] = self.original
        out["p2p"] = dict(self.p2p) or None
        out["expected_gbps"] = self.expected_gbps
        return out


@dataclass
class Topology:
    gpus: list[Gpu] = field(default_factory=list)
    nics: list[Nic] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # source name -> what was read ("file x", "NVML", ...) or why it is missing
    sources: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # "lspci: not installed; ... unknown"
    p2p_modes: list[str] = field(default_factory=list)
    nvlink_source: str | None = None

    def gpu(self, name: str) -> Gpu | None:
        for g in self.gpus:
            if g.name == name:
                return g
        return None

    def pair(self, a: str, b: str) -> Pair | None:
        for p in self.pairs:
            if (p.a, p.b) in ((a, b), (b, a)):
                return p
        return None

    def gpu_pairs(self) -> list[Pair]:
        gpus = {g.name for g in self.gpus}
        return [p for p in self.pairs if p.a in gpus and p.b in gpus]

    def to_json(self) -> dict[str, Any]:
        return {
            "gpus": [g.to_json() for g in self.gpus],
            "nics": [n.to_json() for n in self.nics],
            "pairs": [p.to_json() for p in self.pairs],
            "warnings": list(self.warnings),
            "sources": dict(self.sources),
            "missing": list(self.missing),
        }
