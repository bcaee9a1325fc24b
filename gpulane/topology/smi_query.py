"""``nvidia-smi -q`` output: per GPU its bus id, product name and PCIe link.

GPUs are listed in PCI bus order, which is the order nvidia-smi numbers them
(GPU0, GPU1, ...), so the n-th section is GPUn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulane.errors import ParseError
from gpulane.textio import clean_lines, first_content_line, guess_kind
from gpulane.topology.model import PcieLink, normalize_bus_id

WHAT = "nvidia-smi -q"
_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
_KV = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*)$")
_SECTION = re.compile(r"^(\s*)(\S.*)$")


@dataclass
class SmiGpu:
    index: int
    bus_id: str
    model: str | None = None
    pcie: PcieLink | None = None
    fields: dict[str, str] = field(default_factory=dict)  # "PCI/Bus Id" -> value
    line: int = 0


@dataclass
class SmiQuery:
    source: str
    driver: str | None
    cuda: str | None
    gpus: list[SmiGpu]


def _int(value: str | None, source: str, line: int, what: str) -> int | None:
    if value is None:
        return None
    v = value.strip().rstrip("x").strip()
    if v in ("N/A", "", "Unknown", "[N/A]") or v.startswith("["):
        return None
    if not v.isdigit():
        raise ParseError(f"{what} {value!r} is not a number", source, line)
    return int(v)


def parse_smi_query(text: str, source: str = "<text>") -> SmiQuery:
    lines = clean_lines(text, source)
    start = first_content_line(lines)
    if start == len(lines):
        raise ParseError(f"empty: no {WHAT} output", source, 1)
    kind = guess_kind(lines)
    if kind is not None and kind != WHAT:
        raise ParseError(f"this looks like {kind} output, not {WHAT}", source, start + 1)
    top: dict[str, str] = {}
    gpus: list[SmiGpu] = []
    current: SmiGpu | None = None
    stack: list[tuple[int, str]] = []  # (indent, section name)
    line_of: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip() or set(line.strip()) <= {"="} or "NVSMI LOG" in line:
            continue
        m = _GPU_HEADER.match(line)
        if m:
            bus = normalize_bus_id(m.group(1))
            if bus is None:
                raise ParseError(f"bad bus id {m.group(1)!r}", source, number)
            current = SmiGpu(index=len(gpus), bus_id=bus, line=number)
            gpus.append(current)
            stack = []
            continue
        kv = _KV.match(line)
        indent = len(line) - len(line.lstrip())
        if kv and kv.group(3) != "":
            key, value = kv.group(2).strip(), kv.group(3).strip()
        else:
            sec = _SECTION.match(line)
            assert sec is not None
            key, value = sec.group(2).rstrip(":").strip(), None  # a section heading
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([s for _, s in stack] + [key])
        if value is None:
            stack.append((indent, key))
            continue
        if current is None:
            if indent == 0:
                top[key] = value
            continue
        current.fields[path] = value
        line_of[f"{current.index}/{path}"] = number
    if not gpus:
        raise ParseError(
            f"no GPU sections (lines like 'GPU 00000000:01:00.0'): not {WHAT} output",
            source,
            start + 1,
        )
    attached = top.get("Attached GPUs")
    if attached is not None and attached.strip().isdigit() and int(attached) != len(gpus):
        raise ParseError(
            f"truncated: 'Attached GPUs' says {attached.strip()}, found {len(gpus)} GPU sections",
            source,
            len(lines),
        )
    for gpu in gpus:
        f = gpu.fields
        if "PCI/Bus Id" not in f:
            raise ParseError(
                f"truncated: the section of GPU {gpu.bus_id} ends before its PCI Bus Id",
                source,
                len(lines) if lines[-1] else max(len(lines) - 1, 1),
            )
        gpu.model = f.get("Product Name")
        bus = f.get("PCI/Bus Id")
        if bus is not None and normalize_bus_id(bus) != gpu.bus_id:
            raise ParseError(
                f"PCI Bus Id {bus!r} does not match the section header {gpu.bus_id}",
                source,
                line_of.get(f"{gpu.index}/PCI/Bus Id", gpu.line),
            )

        def get(path: str, what: str, g: SmiGpu = gpu) -> int | None:
            key = f"PCI/GPU Link Info/{path}"
            return _int(g.fields.get(key), source, line_of.get(f"{g.index}/{key}", g.line), what)

        link = PcieLink(
            gen=get("PCIe Generation/Current", "PCIe generation"),
            gen_max=get("PCIe Generation/Max", "PCIe generation"),
            width=get("Link Width/Current", "link width"),
            width_max=get("Link Width/Max", "link width"),
            bus_id=gpu.bus_id,
            device=gpu.model,
            source=source,
        )
        dev_max = get("PCIe Generation/Device Max", "PCIe generation")
        if link.gen_max is None:
            link.gen_max = dev_max
        link.downtrained = link.compute_downtrained()
        gpu.pcie = (
            link
            if any(v is not None for v in (link.gen, link.gen_max, link.width, link.width_max))
            else None
        )
    return SmiQuery(
        source=source,
        driver=top.get("Driver Version"),
        cuda=top.get("CUDA Version"),
        gpus=gpus,
    )
