"""What decides whether GPU peer-to-peer can be trusted, beside ACS and the IOMMU groups:
BAR1 against the frame buffer (``nvidia-smi -q``), HMM in ``nvidia_uvm`` (its module
parameter, a modprobe line or the kernel log), and the IOMMU's mode and faults as the
kernel log prints them (``dmesg``: ``iommu: Default domain type``, ``AMD-Vi ...
IO_PAGE_FAULT``, ``DMAR: [DMA Read/Write] ... fault``).

Pure parsers: text in, data out, never an error for odd text; a fact the text does not
carry stays None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpulane.textio import strip_ansi

_GPU = re.compile(r"^GPU (?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*$")
_SECTION = re.compile(r"^\s*(?P<name>FB Memory Usage|BAR1 Memory Usage)\s*$")
_TOTAL = re.compile(r"^\s*Total\s*:\s*(?P<mib>\d{1,9})\s*MiB\s*$")
_HMM_PARAM = re.compile(r"uvm_disable_hmm\s*[=:]\s*(?P<v>[YyNn01])\b")
_HMM_LOG = re.compile(r"HMM\b.{0,60}\b(?P<s>enabled|disabled|not supported)", re.IGNORECASE)
_DOMAIN = re.compile(r"iommu: Default domain type: (?P<t>Translated|Passthrough)", re.IGNORECASE)
_FAULT = re.compile(
    r"(AMD-Vi: Event logged \[IO_PAGE_FAULT|DMAR: \[DMA (Read|Write)[^\]]{0,20}\].{0,80}fault"
    r"|arm-smmu.{0,40}Unhandled context fault)"
)


@dataclass
class Bar1:
    """One GPU's BAR1 aperture and frame buffer, in MiB (``nvidia-smi -q``)."""

    bus_id: str
    bar1_mib: int | None = None
    fb_mib: int | None = None

    @property
    def maps_all_memory(self) -> bool | None:
        """BAR1 at least as large as the frame buffer (None when either is unknown)."""
        if self.bar1_mib is None or self.fb_mib is None:
            return None
        return self.bar1_mib >= self.fb_mib


def parse_bar1(text: str) -> list[Bar1]:
    """Each ``GPU 0000:xx:yy.z`` block's ``FB Memory Usage`` and ``BAR1 Memory Usage``
    totals; a block without them is kept with None. A ``grep -A3`` of the BAR1 blocks
    (no GPU lines) gives one entry per block, named ``GPU#n`` in order."""
    out: list[Bar1] = []
    section: str | None = None
    for raw in text.splitlines():
        line = strip_ansi(raw).rstrip()
        if (m := _GPU.match(line)) is not None:
            bus = m.group("bus").lower()
            domain, rest = bus.split(":", 1)
            out.append(Bar1(f"{domain[-4:]}:{rest}"))
            section = None
            continue
        if (s := _SECTION.match(line)) is not None:
            section = s.group("name")
            field_ = "fb_mib" if section == "FB Memory Usage" else "bar1_mib"
            if not out or getattr(out[-1], field_) is not None:
                out.append(Bar1(f"GPU#{len(out)}"))  # a grep without the GPU lines
            continue
        if out and section and (t := _TOTAL.match(line)) is not None:
            if section == "FB Memory Usage":
                out[-1].fb_mib = int(t.group("mib"))
            else:
                out[-1].bar1_mib = int(t.group("mib"))
            section = None
    return out


@dataclass
class Hmm:
    """HMM in nvidia_uvm: True on, False off, None unknown; with the line that says so."""

    enabled: bool | None = None
    line: str | None = None


def parse_hmm(text: str) -> Hmm:
    """``uvm_disable_hmm`` from ``/sys/module/nvidia_uvm/parameters/uvm_disable_hmm``
    (``Y``/``N`` as the file holds it, prefixed ``uvm_disable_hmm:``), a modprobe
    ``options nvidia_uvm uvm_disable_hmm=1`` line, or a kernel log line about HMM.
    The last statement in the text wins."""
    state = Hmm()
    for raw in text.splitlines():
        line = strip_ansi(raw).strip()
        if not line or line.startswith("#"):
            continue
        params = list(_HMM_PARAM.finditer(line))
        if params:
            state = Hmm(params[-1].group("v").upper() not in ("Y", "1"), line[:200])
        elif (m := _HMM_LOG.search(line)) is not None:
            state = Hmm(m.group("s").lower() == "enabled", line[:200])
    return state


@dataclass
class IommuLog:
    """The IOMMU as the kernel log tells it: the default domain type and DMA faults."""

    mode: str | None = None  # "translated", "passthrough"
    mode_line: str | None = None
    faults: list[str] = field(default_factory=list)  # the fault lines as logged (at most 20)
    fault_count: int = 0


def parse_iommu_log(text: str) -> IommuLog:
    """``dmesg`` / ``journalctl -k``: ``iommu: Default domain type: Translated`` (or
    Passthrough) and every IOMMU fault line (AMD-Vi IO_PAGE_FAULT, Intel DMAR, SMMU)."""
    log = IommuLog()
    for raw in text.splitlines():
        line = strip_ansi(raw).strip()
        if (m := _DOMAIN.search(line)) is not None:
            log.mode = m.group("t").lower()
            log.mode_line = line[m.start() :][:200]
        elif _FAULT.search(line) is not None:
            log.fault_count += 1
            if len(log.faults) < 20:
                log.faults.append(line[:300])
    return log
