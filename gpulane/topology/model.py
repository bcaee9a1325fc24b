"""The Topology model and its JSON form (DESIGN.md, "Topology JSON").

Fields an input does not carry stay None and come out as ``null``; nothing is guessed.
:meth:`Topology.from_json` is the one reader of that JSON (``gpulane topo --json``,
``topology.json`` in a run): every other module asks the model, not the dict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpulane.errors import InputError
from gpulane.topology.paths import label_kind, normalize_label

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

    @classmethod
    def from_json(cls, data: Any, where: str) -> PcieLink | None:
        if data is None:
            return None
        d = _mapping(data, where)
        return cls(
            gen=_int(d.get("gen"), f"{where}.gen"),
            gen_max=_int(d.get("gen_max"), f"{where}.gen_max"),
            width=_int(d.get("width"), f"{where}.width"),
            width_max=_int(d.get("width_max"), f"{where}.width_max"),
            downtrained=_bool(d.get("downtrained"), f"{where}.downtrained"),
            bus_id=_str(d.get("bus_id"), f"{where}.bus_id"),
            device=_str(d.get("device"), f"{where}.device"),
        )


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
    unreadable: str | None = None  # why NVML counts this GPU but could not open it

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
            # Only on such a GPU, so that every other topology file reads as before.
            **({"unreadable": self.unreadable} if self.unreadable else {}),
        }

    @classmethod
    def from_json(cls, data: Any, position: int, where: str) -> Gpu:
        d = _mapping(data, where)
        name = _str(d.get("name"), f"{where}.name")
        index = _int(d.get("index"), f"{where}.index")
        if index is None:
            m = re.fullmatch(r"GPU(\d+)", name or "")
            index = int(m.group(1)) if m else position
        upstream = d.get("pcie_upstream") or []
        if not isinstance(upstream, list):
            raise InputError(f"{where}.pcie_upstream: expected a list, got {upstream!r}")
        nvlinks = d.get("nvlinks") or {}
        speeds: dict[int, float | None] = {}
        for key, gbps in _mapping(nvlinks, f"{where}.nvlinks").items():
            number = _int(key, f"{where}.nvlinks key")
            if number is None:
                raise InputError(f"{where}.nvlinks: expected link numbers as keys, got {key!r}")
            speeds[number] = _float(gbps, f"{where}.nvlinks.{key}")
        return cls(
            name=name or f"GPU{index}",
            index=index,
            bus_id=_str(d.get("bus_id"), f"{where}.bus_id"),
            model=_str(d.get("model"), f"{where}.model"),
            cpu_affinity=_str(d.get("cpu_affinity"), f"{where}.cpu_affinity"),
            numa=_int(d.get("numa"), f"{where}.numa"),
            gpu_numa_id=_int(d.get("gpu_numa_id"), f"{where}.gpu_numa_id"),
            pcie=PcieLink.from_json(d.get("pcie"), f"{where}.pcie"),
            upstream=[
                up
                for i, raw in enumerate(upstream)
                if (up := PcieLink.from_json(raw, f"{where}.pcie_upstream[{i}]")) is not None
            ],
            nvlink_gbps=speeds,
            unreadable=_str(d.get("unreadable"), f"{where}.unreadable"),
        )


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

    @classmethod
    def from_json(cls, data: Any, position: int, where: str) -> Nic:
        d = _mapping(data, where)
        return cls(
            name=_str(d.get("name"), f"{where}.name") or f"NIC{position}",
            device=_str(d.get("device"), f"{where}.device"),
            bus_id=_str(d.get("bus_id"), f"{where}.bus_id"),
            pcie=PcieLink.from_json(d.get("pcie"), f"{where}.pcie"),
        )


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

    @classmethod
    def from_json(cls, data: Any, where: str) -> Pair:
        d = _mapping(data, where)
        a, b = _str(d.get("a"), f"{where}.a"), _str(d.get("b"), f"{where}.b")
        printed = _str(d.get("label"), f"{where}.label") or ""
        if not a or not b:
            raise InputError(f"{where}: a pair needs a and b")
        try:
            # Empty: a pair only the P2P files named (its path label is unknown).
            label = normalize_label(printed) if printed else ""
        except InputError as err:
            raise InputError(f"{where}.label: {err}") from err
        original = _str(d.get("original"), f"{where}.original")
        if original is None and label != printed:
            original = printed  # SOC, read as SYS
        raw_p2p = d.get("p2p")
        # A single status (older files) holds for every mode.
        p2p = {"any": raw_p2p} if isinstance(raw_p2p, str) else _mapping(raw_p2p or {}, where)
        return cls(
            a=a,
            b=b,
            label=label,
            kind=_str(d.get("kind"), f"{where}.kind") or (label_kind(label) if label else ""),
            nvlinks=_int(d.get("nvlinks"), f"{where}.nvlinks"),
            original=original,
            p2p={str(k): str(v) for k, v in p2p.items()},
            expected_gbps=_float(d.get("expected_gbps"), f"{where}.expected_gbps"),
        )


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
        """The GPU of that name; ``GPU<n>`` also finds the GPU of index n."""
        for g in self.gpus:
            if g.name == name:
                return g
        m = re.fullmatch(r"GPU(\d+)", str(name))
        if m:
            for g in self.gpus:
                if g.index == int(m.group(1)):
                    return g
        return None

    def gpu_names(self) -> list[str]:
        return [g.name for g in self.gpus]

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

    @classmethod
    def from_json(cls, data: Any, source: str = "topology") -> Topology:
        """The model of DESIGN.md's topology JSON; a malformed field is an InputError
        naming it (``topology.json: gpus[1].pcie.gen: expected an integer``)."""
        d = _mapping(data, source)
        lists = {}
        for key in ("gpus", "nics", "pairs", "warnings", "missing"):
            value = d.get(key)
            if key == "gpus" and not isinstance(value, list):
                raise InputError(
                    f"{source}: expected an object with a 'gpus' list (gpulane topo --json)"
                )
            if value is not None and not isinstance(value, list):
                raise InputError(f"{source}.{key}: expected a list, got {value!r}")
            lists[key] = value or []
        return cls(
            gpus=[Gpu.from_json(g, i, f"{source}: gpus[{i}]") for i, g in enumerate(lists["gpus"])],
            nics=[Nic.from_json(n, i, f"{source}: nics[{i}]") for i, n in enumerate(lists["nics"])],
            pairs=[
                Pair.from_json(p, f"{source}: pairs[{i}]") for i, p in enumerate(lists["pairs"])
            ],
            warnings=[str(w) for w in lists["warnings"]],
            sources={str(k): str(v) for k, v in _mapping(d.get("sources") or {}, source).items()},
            missing=[str(m) for m in lists["missing"]],
        )


def as_topology(value: Topology | Mapping[str, Any] | None) -> Topology | None:
    """A Topology from the model or its JSON; None (no topology) for None or ``{}``."""
    if value is None or isinstance(value, Topology):
        return value
    return Topology.from_json(value) if value else None


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: expected an object, got {value!r}")
    return value


def _int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise InputError(f"{where}: expected an integer, got {value!r}")


def _float(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise InputError(f"{where}: expected a number, got {value!r}")


def _bool(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise InputError(f"{where}: expected true, false or null, got {value!r}")


def _str(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    raise InputError(f"{where}: expected text, got {value!r}")
